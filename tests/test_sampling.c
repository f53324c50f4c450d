/* Sampling (nn.h): cn_multinomial and cn_sample_logits against the laws they draw from, by
 * counting many seeded draws (frequencies within 5 standard deviations of the probabilities,
 * categories of probability 0 never drawn), the same draws for the same seed, top-k and top-p
 * keeping exactly the tokens they should, greedy sampling as argmax, and every misuse an error
 * naming the call. */
#include <math.h>

#include "harness.h"

static double *read_all(cn_tensor *t, int64_t *n) {
    *n = t ? cn_numel(t) : 0;
    return th_values(t);
}

/* Counts of each of C categories among the values of t. */
static void count(cn_tensor *t, int64_t C, int64_t *counts, int64_t *total) {
    int64_t n;
    double *v = read_all(t, &n);
    for (int64_t c = 0; c < C; c++) counts[c] = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t c = (int64_t)v[i];
        if (c < 0 || c >= C) {
            fprintf(stderr, "draw %lld is %g, outside 0..%lld\n", (long long)i, v[i],
                    (long long)C - 1);
            th_checks_failed++;
            continue;
        }
        counts[c]++;
    }
    *total = n;
    free(v);
}

/* Frequencies against p (normalised here), within 5 sigma; p = 0: never. */
static void check_law(const char *what, const int64_t *counts, int64_t total, const double *p,
                      int64_t C) {
    double sum = 0;
    for (int64_t c = 0; c < C; c++) sum += p[c];
    for (int64_t c = 0; c < C; c++) {
        double q = p[c] / sum, f = (double)counts[c] / (double)total;
        double sd = sqrt(q * (1 - q) / (double)total);
        if (q == 0 ? counts[c] != 0 : fabs(f - q) > 5 * sd + 1e-12) {
            fprintf(stderr, "%s: category %lld drawn %.4f of the time, want %.4f\n", what,
                    (long long)c, f, q);
            th_checks_failed++;
        }
    }
}

static void test_multinomial_with_replacement(void) {
    cn_generator gen = cn_generator_new(11);
    const double p[4] = {0.1, 0.2, 0.0, 0.7};
    cn_tensor *probs = th_own(th_tensor(p, (int64_t[]){4}, 1, CN_F32));
    cn_tensor *s = th_own(cn_multinomial(probs, 40000, 1, &gen));
    CHECK(s && cn_ndim(s) == 1 && cn_shape(s)[0] == 40000 && cn_dtype_of(s) == CN_I64);
    int64_t counts[4], total;
    count(s, 4, counts, &total);
    check_law("multinomial [4]", counts, total, p, 4);
    /* rows, unnormalised weights: [1 1 1 1] * 5 and [0 0 3 1] */
    const double w[8] = {5, 5, 5, 5, 0, 0, 3, 1};
    cn_tensor *rows = th_own(th_tensor(w, (int64_t[]){2, 4}, 2, CN_F64));
    cn_tensor *r = th_own(cn_multinomial(rows, 20000, 1, &gen));
    CHECK(r && cn_ndim(r) == 2 && cn_shape(r)[0] == 2 && cn_shape(r)[1] == 20000);
    for (int row = 0; row < 2 && r; row++) {
        cn_tensor *one = th_own(cn_slice(r, 0, row, row + 1, 1));
        count(one, 4, counts, &total);
        check_law(row ? "multinomial row 1" : "multinomial row 0", counts, total, w + 4 * row, 4);
    }
    /* the same seed, the same draws; another seed, others */
    cn_generator g1 = cn_generator_new(5), g2 = cn_generator_new(5), g3 = cn_generator_new(6);
    int64_t n;
    double *a = read_all(th_own(cn_multinomial(probs, 64, 1, &g1)), &n);
    double *b = read_all(th_own(cn_multinomial(probs, 64, 1, &g2)), &n);
    double *c = read_all(th_own(cn_multinomial(probs, 64, 1, &g3)), &n);
    CHECK(memcmp(a, b, sizeof(double) * 64) == 0);
    CHECK(memcmp(a, c, sizeof(double) * 64) != 0);
    free(a);
    free(b);
    free(c);
    th_release_owned();
}

static void test_multinomial_without_replacement(void) {
    cn_generator gen = cn_generator_new(12);
    const double p[4] = {0.1, 0.2, 0.0, 0.7};
    cn_tensor *probs = th_own(th_tensor(p, (int64_t[]){4}, 1, CN_F32));
    /* three of the three positive categories: each once */
    for (int rep = 0; rep < 20; rep++) {
        int64_t n;
        double *v = read_all(th_own(cn_multinomial(probs, 3, 0, &gen)), &n);
        CHECK(n == 3);
        int seen[4] = {0};
        for (int i = 0; i < 3 && n == 3; i++) seen[(int)v[i]]++;
        CHECK(seen[0] == 1 && seen[1] == 1 && seen[2] == 0 && seen[3] == 1);
        free(v);
    }
    /* one draw without replacement has the same law: 20000 rows of p, one draw each */
    double *many = malloc(sizeof(double) * 4 * 20000);
    for (int i = 0; i < 20000; i++) memcpy(many + 4 * i, p, sizeof p);
    cn_tensor *rows = th_own(th_tensor(many, (int64_t[]){20000, 4}, 2, CN_F64));
    free(many);
    int64_t counts[4], total;
    count(th_own(cn_multinomial(rows, 1, 0, &gen)), 4, counts, &total);
    check_law("without replacement, first draw", counts, total, p, 4);
    /* the second draw of two: P(second = j) = sum_i p_i p_j / (1 - p_i) */
    cn_tensor *two = th_own(cn_multinomial(rows, 2, 0, &gen));
    count(th_own(cn_slice(two, 1, 1, 2, 1)), 4, counts, &total);
    double second[4] = {0};
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 4; i++)
            if (i != j && p[i] < 1) second[j] += p[i] * p[j] / (1 - p[i]);
    check_law("without replacement, second draw", counts, total, second, 4);
    CHECK_FAILS(cn_multinomial(probs, 4, 0, &gen), CN_ERR_INVALID_ARG, "positive probability");
    CHECK_FAILS(cn_multinomial(probs, 5, 0, &gen), CN_ERR_INVALID_ARG, "multinomial");
    th_release_owned();
}

static void test_multinomial_errors(void) {
    cn_generator gen = cn_generator_new(1);
    const double neg[3] = {0.5, -0.1, 0.6}, zero[4] = {1, 1, 0, 0}, nan_[2] = {NAN, 1};
    cn_tensor *a = th_own(th_tensor(neg, (int64_t[]){3}, 1, CN_F32));
    CHECK_FAILS(cn_multinomial(a, 1, 1, &gen), CN_ERR_INVALID_ARG, "multinomial");
    cn_tensor *b = th_own(th_tensor(zero, (int64_t[]){2, 2}, 2, CN_F32));
    CHECK_FAILS(cn_multinomial(b, 1, 1, &gen), CN_ERR_INVALID_ARG, "positive sum");
    cn_tensor *c = th_own(th_tensor(nan_, (int64_t[]){2}, 1, CN_F32));
    CHECK_FAILS(cn_multinomial(c, 1, 1, &gen), CN_ERR_INVALID_ARG, "finite");
    CHECK_FAILS(cn_multinomial(a, 0, 1, &gen), CN_ERR_INVALID_ARG, "n = 0");
    cn_tensor *ints = th_own(cn_ones((int64_t[]){3}, 1, CN_I64, cn_cpu()));
    CHECK_FAILS(cn_multinomial(ints, 1, 1, &gen), CN_ERR_KIND, "multinomial");
    cn_tensor *cube = th_own(cn_ones((int64_t[]){2, 2, 2}, 3, CN_F32, cn_cpu()));
    CHECK_FAILS(cn_multinomial(cube, 1, 1, &gen), CN_ERR_SHAPE, "multinomial");
    CHECK_FAILS(cn_multinomial(a, 1, 1, NULL), CN_ERR_NULL_ARG, "multinomial");
    th_release_owned();
}

static void test_sample_logits(void) {
    cn_generator gen = cn_generator_new(21);
    const double p[5] = {0.05, 0.5, 0.25, 0.15, 0.05};
    double lg[5];
    for (int i = 0; i < 5; i++) lg[i] = log(p[i]) + 3.0; /* logits: any shift */
    cn_tensor *logits = th_own(th_tensor(lg, (int64_t[]){1, 5}, 2, CN_F64));
    /* greedy */
    th_check_values("greedy", th_own(cn_sample_logits(logits, 0, 0, 1, &gen)), (double[]){1}, 1,
                    0);
    /* many rows of the same logits, for the laws */
    enum { R = 20000 };
    double *many = malloc(sizeof(double) * 5 * R);
    for (int i = 0; i < R; i++) memcpy(many + 5 * i, lg, sizeof lg);
    cn_tensor *rows = th_own(th_tensor(many, (int64_t[]){R, 5}, 2, CN_F32));
    free(many);
    int64_t counts[5], total;
    count(th_own(cn_sample_logits(rows, 1.0, 0, 1.0, &gen)), 5, counts, &total);
    check_law("plain", counts, total, p, 5);
    /* temperature 0.5: p^2 renormalised */
    double sq[5];
    for (int i = 0; i < 5; i++) sq[i] = p[i] * p[i];
    count(th_own(cn_sample_logits(rows, 0.5, 0, 1.0, &gen)), 5, counts, &total);
    check_law("temperature 0.5", counts, total, sq, 5);
    /* top-2: tokens 1 and 2 in proportion */
    const double top2[5] = {0, 0.5, 0.25, 0, 0};
    count(th_own(cn_sample_logits(rows, 1.0, 2, 1.0, &gen)), 5, counts, &total);
    check_law("top_k 2", counts, total, top2, 5);
    /* top-p 0.7: 0.5 then 0.25 reaches it: tokens 1 and 2 */
    count(th_own(cn_sample_logits(rows, 1.0, 0, 0.7, &gen)), 5, counts, &total);
    check_law("top_p 0.7", counts, total, top2, 5);
    /* top-p 0.4: the most likely alone */
    count(th_own(cn_sample_logits(rows, 1.0, 0, 0.4, &gen)), 5, counts, &total);
    CHECK(counts[1] == total);
    /* top-k 3 then top-p 0.8 of the renormalised three (0.5/0.9, 0.25/0.9, 0.15/0.9): 1 and 2 */
    count(th_own(cn_sample_logits(rows, 1.0, 3, 0.8, &gen)), 5, counts, &total);
    check_law("top_k 3, top_p 0.8", counts, total, top2, 5);
    /* batch dims kept: [2, 3, 5] -> [2, 3] */
    cn_tensor *b = th_own(cn_expand(logits, (int64_t[]){2, 3, 5}, 3));
    cn_tensor *s = th_own(cn_sample_logits(b, 1.0, 0, 1.0, &gen));
    CHECK(s && cn_ndim(s) == 2 && cn_shape(s)[0] == 2 && cn_shape(s)[1] == 3);
    cn_tensor *g = th_own(cn_sample_logits(b, 0, 0, 1.0, &gen));
    CHECK(g && cn_ndim(g) == 2);
    /* errors */
    CHECK_FAILS(cn_sample_logits(logits, -1, 0, 1, &gen), CN_ERR_INVALID_ARG, "sample_logits");
    CHECK_FAILS(cn_sample_logits(logits, 1, -2, 1, &gen), CN_ERR_INVALID_ARG, "top_k");
    CHECK_FAILS(cn_sample_logits(logits, 1, 0, 0, &gen), CN_ERR_INVALID_ARG, "top_p");
    CHECK_FAILS(cn_sample_logits(logits, 1, 0, 1.5, &gen), CN_ERR_INVALID_ARG, "top_p");
    CHECK_FAILS(cn_sample_logits(NULL, 1, 0, 1, &gen), CN_ERR_NULL_ARG, "sample_logits");
    th_release_owned();
}

int main(void) {
    RUN(test_multinomial_with_replacement);
    RUN(test_multinomial_without_replacement);
    RUN(test_multinomial_errors);
    RUN(test_sample_logits);
    return th_finish();
}
