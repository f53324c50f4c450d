/* Random numbers: the Philox 4x32-10 block function against Random123's published known-answer
 * vectors, then cn_rand_uniform / cn_rand_normal against the stream that core/philox.h defines,
 * recomputed here from the block function with plain libm arithmetic (the 24- and 53-bit unit
 * values, Box-Muller), plus the properties users rely on: the same (seed, offset) gives the same
 * bits, consecutive calls continue one stream, the moments are right, and values stay in
 * [low, high) even where rounding to the dtype would land on high. */
#include <stdint.h>

#include "core/philox.h"
#include "harness.h"

#define N_STAT 100000

static float *read_f32(cn_tensor *t, int64_t n) {
    float *v = malloc(sizeof(float) * (size_t)n);
    if (!t || cn_read(t, v, sizeof(float) * (size_t)n) != CN_OK) {
        fprintf(stderr, "read_f32 failed: %s\n", cn_last_error());
        th_checks_failed++;
        memset(v, 0, sizeof(float) * (size_t)n);
    }
    return v;
}

static double *read_f64(cn_tensor *t, int64_t n) {
    double *v = malloc(sizeof(double) * (size_t)n);
    if (!t || cn_read(t, v, sizeof(double) * (size_t)n) != CN_OK) {
        fprintf(stderr, "read_f64 failed: %s\n", cn_last_error());
        th_checks_failed++;
        memset(v, 0, sizeof(double) * (size_t)n);
    }
    return v;
}

/* The block of element i of a call with generator (seed, offset): counter = offset + i in the low
 * two words, key = seed. */
static void block_of(uint64_t seed, uint64_t offset, int64_t i, uint32_t w[4]) {
    uint64_t c = offset + (uint64_t)i;
    const uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), 0, 0};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    cn_philox4x32_10(ctr, key, w);
}

static double bits53(uint32_t a, uint32_t b) {
    return (double)(((uint64_t)a << 21) | (b >> 11));
}

/* ---- the block function --------------------------------------------------------------------- */

static void test_philox_matches_random123_known_answers(void) {
    const uint32_t ctr[3][4] = {{0, 0, 0, 0},
                                {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                                {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}};
    const uint32_t key[3][2] = {{0, 0}, {0xffffffff, 0xffffffff}, {0xa4093822, 0x299f31d0}};
    const uint32_t want[3][4] = {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
                                 {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
                                 {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}};
    for (int k = 0; k < 3; k++) {
        uint32_t out[4];
        cn_philox4x32_10(ctr[k], key[k], out);
        for (int j = 0; j < 4; j++) {
            if (out[j] != want[k][j]) {
                fprintf(stderr, "vector %d word %d: 0x%08x, want 0x%08x\n", k, j, out[j],
                        want[k][j]);
                th_checks_failed++;
            }
        }
    }
}

/* ---- the stream ----------------------------------------------------------------------------- */

static void test_uniform_follows_the_stream_definition(void) {
    /* a seed using both key words, and an offset whose counter crosses into the high word */
    const uint64_t seed = 0x0123456789abcdefULL, offset = 0xfffffff0ULL;
    const int64_t n = 40000; /* above the parallel grain: thread splits must not change values */
    int64_t shape[1] = {n};
    const double low = -1.5, high = 2.25;

    cn_generator g = cn_generator_new(seed);
    g.offset = offset;
    cn_tensor *t32 = cn_rand_uniform(&g, shape, 1, low, high, CN_F32, cn_cpu());
    CHECK(g.offset == offset + (uint64_t)n);
    g.offset = offset;
    cn_tensor *t64 = cn_rand_uniform(&g, shape, 1, low, high, CN_F64, cn_cpu());
    float *v32 = read_f32(t32, n);
    double *v64 = read_f64(t64, n);
    int bad32 = 0, bad64 = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t w[4];
        block_of(seed, offset, i, w);
        float want32 = (float)(low + (high - low) * ((double)(w[0] >> 8) / 16777216.0));
        double want64 = low + (high - low) * (bits53(w[0], w[1]) / 9007199254740992.0);
        bad32 += v32[i] != want32;
        bad64 += v64[i] != want64;
    }
    CHECK(bad32 == 0);
    CHECK(bad64 == 0);
    free(v64);
    free(v32);
    cn_release(t64);
    cn_release(t32);
}

static void test_normal_follows_box_muller(void) {
    const uint64_t seed = 42, offset = 7;
    const int64_t n = 4096;
    int64_t shape[1] = {n};
    const double mean = 0.5, std = 2;
    const double two_pi = 6.283185307179586476925;
    cn_generator g = {seed, offset};
    cn_tensor *t = cn_rand_normal(&g, shape, 1, mean, std, CN_F64, cn_cpu());
    double *v = read_f64(t, n);
    int bad = 0;
    for (int64_t i = 0; i < n && !bad; i++) {
        uint32_t w[4];
        block_of(seed, offset, i, w);
        double u1 = (bits53(w[0], w[1]) + 1) / 9007199254740992.0; /* (0, 1] */
        double u2 = bits53(w[2], w[3]) / 9007199254740992.0;
        double want = mean + std * sqrt(-2 * log(u1)) * cos(two_pi * u2);
        /* philox.h's own log and cos agree with libm to a few ulp */
        if (fabs(v[i] - want) > 1e-13 * fmax(1, fabs(want))) {
            fprintf(stderr, "normal[%lld] = %.17g, want %.17g\n", (long long)i, v[i], want);
            bad = 1;
        }
    }
    CHECK(!bad);
    free(v);
    cn_release(t);
}

static void test_normal_f32_is_the_f64_stream_rounded(void) {
    const int64_t n = 1000;
    int64_t shape[1] = {n};
    cn_generator a = cn_generator_new(99), b = cn_generator_new(99);
    cn_tensor *t32 = cn_rand_normal(&a, shape, 1, -1, 3, CN_F32, cn_cpu());
    cn_tensor *t64 = cn_rand_normal(&b, shape, 1, -1, 3, CN_F64, cn_cpu());
    float *v32 = read_f32(t32, n);
    double *v64 = read_f64(t64, n);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += v32[i] != (float)v64[i];
    CHECK(bad == 0);
    free(v64);
    free(v32);
    cn_release(t64);
    cn_release(t32);
}

static void test_same_seed_same_numbers_other_seed_others(void) {
    int64_t shape[2] = {33, 17};
    const int64_t n = 33 * 17;
    cn_generator a = cn_generator_new(1234), b = cn_generator_new(1234), c = cn_generator_new(1235);
    cn_tensor *ta = cn_rand_uniform(&a, shape, 2, 0, 1, CN_F32, cn_cpu());
    cn_tensor *tb = cn_rand_uniform(&b, shape, 2, 0, 1, CN_F32, cn_cpu());
    cn_tensor *tc = cn_rand_uniform(&c, shape, 2, 0, 1, CN_F32, cn_cpu());
    float *va = read_f32(ta, n), *vb = read_f32(tb, n), *vc = read_f32(tc, n);
    CHECK(memcmp(va, vb, sizeof(float) * (size_t)n) == 0);
    int same = 0;
    for (int64_t i = 0; i < n; i++) same += va[i] == vc[i];
    CHECK(same < 5); /* a handful of coincidences at most among 561 draws of 2^24 values */
    free(vc);
    free(vb);
    free(va);
    cn_release(tc);
    cn_release(tb);
    cn_release(ta);
}

static void test_two_calls_continue_one_call(void) {
    /* n above the CPU's parallel grain, so both the split and the serial paths are covered */
    const int64_t n = 40001;
    int64_t one[1] = {n}, two[1] = {2 * n};
    const cn_dtype dts[] = {CN_F32, CN_F64};
    for (int d = 0; d < 2; d++) {
        for (int normal = 0; normal < 2; normal++) {
            cn_generator g1 = cn_generator_new(77), g2 = cn_generator_new(77);
            cn_tensor *first, *second, *both;
            if (normal) {
                first = cn_rand_normal(&g1, one, 1, 0, 1, dts[d], cn_cpu());
                second = cn_rand_normal(&g1, one, 1, 0, 1, dts[d], cn_cpu());
                both = cn_rand_normal(&g2, two, 1, 0, 1, dts[d], cn_cpu());
            } else {
                first = cn_rand_uniform(&g1, one, 1, 0, 1, dts[d], cn_cpu());
                second = cn_rand_uniform(&g1, one, 1, 0, 1, dts[d], cn_cpu());
                both = cn_rand_uniform(&g2, two, 1, 0, 1, dts[d], cn_cpu());
            }
            CHECK(g1.offset == (uint64_t)(2 * n) && g2.offset == (uint64_t)(2 * n));
            size_t es = cn_dtype_size(dts[d]);
            char *buf = malloc(es * (size_t)(4 * n)); /* first, second, then both */
            CHECK(first && cn_read(first, buf, es * (size_t)n) == CN_OK);
            CHECK(second && cn_read(second, buf + es * (size_t)n, es * (size_t)n) == CN_OK);
            CHECK(both && cn_read(both, buf + es * (size_t)(n * 2), es * (size_t)(2 * n)) == CN_OK);
            CHECK(memcmp(buf, buf + es * (size_t)(2 * n), es * (size_t)(2 * n)) == 0);
            free(buf);
            cn_release(both);
            cn_release(second);
            cn_release(first);
        }
    }
}

/* ---- distributions -------------------------------------------------------------------------- */

static void test_uniform_moments_and_range(void) {
    int64_t shape[1] = {N_STAT};
    const double low = 2, high = 5;
    const cn_dtype dts[] = {CN_F32, CN_F64};
    for (int d = 0; d < 2; d++) {
        cn_generator g = cn_generator_new(2024);
        cn_tensor *t = cn_rand_uniform(&g, shape, 1, low, high, dts[d], cn_cpu());
        double *v = malloc(sizeof(double) * N_STAT);
        CHECK(th_read(t, v) == N_STAT);
        double sum = 0, sq = 0;
        int out_of_range = 0;
        for (int i = 0; i < N_STAT; i++) {
            out_of_range += !(v[i] >= low && v[i] < high);
            sum += v[i];
        }
        double mean = sum / N_STAT;
        for (int i = 0; i < N_STAT; i++) sq += (v[i] - mean) * (v[i] - mean);
        double var = sq / (N_STAT - 1);
        /* mean 3.5, var (b - a)^2 / 12 = 0.75; bounds are about 5 standard errors */
        CHECK(out_of_range == 0);
        CHECK_NEAR(mean, 3.5, 0.014 / 3.5);
        CHECK_NEAR(var, 0.75, 0.011);
        free(v);
        cn_release(t);
    }
}

static void test_normal_moments_and_shape(void) {
    int64_t shape[1] = {N_STAT};
    const cn_dtype dts[] = {CN_F32, CN_F64};
    for (int d = 0; d < 2; d++) {
        cn_generator g = cn_generator_new(7 + (uint64_t)d);
        cn_tensor *t = cn_rand_normal(&g, shape, 1, 0, 1, dts[d], cn_cpu());
        double *v = malloc(sizeof(double) * N_STAT);
        CHECK(th_read(t, v) == N_STAT);
        double sum = 0, m2 = 0, m4 = 0;
        int within1 = 0, finite = 1;
        for (int i = 0; i < N_STAT; i++) {
            sum += v[i];
            finite &= isfinite(v[i]) != 0;
        }
        double mean = sum / N_STAT;
        for (int i = 0; i < N_STAT; i++) {
            double c = v[i] - mean;
            m2 += c * c;
            m4 += c * c * c * c;
            within1 += fabs(v[i]) < 1;
        }
        double var = m2 / N_STAT, kurtosis = (m4 / N_STAT) / (var * var);
        /* standard errors: mean 1/sqrt(n) = 0.0032, std 1/sqrt(2n) = 0.0022, kurtosis
         * sqrt(24/n) = 0.015, P(|z| < 1) = 0.6827 +- 0.0015; bounds are about 5 of them */
        CHECK(finite);
        CHECK_NEAR(mean, 0, 0.016);
        CHECK_NEAR(sqrt(var), 1, 0.011);
        CHECK_NEAR(kurtosis, 3, 0.08 / 3);
        CHECK_NEAR((double)within1 / N_STAT, 0.682689, 0.0075);
        free(v);
        cn_release(t);
    }
    /* mean and std scale the draws: N(3, 2) */
    cn_generator g = cn_generator_new(11);
    cn_tensor *t = cn_rand_normal(&g, shape, 1, 3, 2, CN_F64, cn_cpu());
    double *v = malloc(sizeof(double) * N_STAT);
    CHECK(th_read(t, v) == N_STAT);
    double sum = 0, sq = 0;
    for (int i = 0; i < N_STAT; i++) sum += v[i];
    double mean = sum / N_STAT;
    for (int i = 0; i < N_STAT; i++) sq += (v[i] - mean) * (v[i] - mean);
    CHECK_NEAR(mean, 3, 0.032 / 3);
    CHECK_NEAR(sqrt(sq / N_STAT), 2, 0.022 / 2);
    free(v);
    cn_release(t);
}

static void test_std_zero_gives_the_mean(void) {
    int64_t shape[1] = {100};
    cn_generator g = cn_generator_new(5);
    cn_tensor *t = cn_rand_normal(&g, shape, 1, -2.5, 0, CN_F32, cn_cpu());
    double want[100];
    for (int i = 0; i < 100; i++) want[i] = -2.5;
    th_check_values("normal std 0", t, want, 100, 0);
    cn_release(t);
}

/* Ranges so narrow (or dtypes so coarse) that rounding to the dtype often lands on high: the
 * definition then takes the largest value below high, which must appear and never be exceeded. */
static void test_uniform_stays_below_high_after_rounding(void) {
    typedef struct { cn_dtype dt; double low, high, top; } range_case;
    const range_case cases[] = {
        {CN_F32, 1, 1 + 0x1p-20, 1 + 0x1p-20 - 0x1p-23}, /* 8 f32 values in range */
        {CN_F64, 1, 1 + 0x1p-40, 1 + 0x1p-40 - 0x1p-52},
        {CN_F16, 0, 1, 1 - 0x1p-11},                      /* f16 spacing below 1 is 2^-11 */
        {CN_BF16, 0, 1, 1 - 0x1p-8},                      /* bf16 spacing below 1 is 2^-8 */
        {CN_F16, -1, -0.5, -0.5 - 0x1p-11},               /* a negative high: one step down */
    };
    int64_t shape[1] = {N_STAT};
    double *v = malloc(sizeof(double) * N_STAT);
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const range_case *c = &cases[k];
        cn_generator g = cn_generator_new(31337);
        cn_tensor *t = cn_rand_uniform(&g, shape, 1, c->low, c->high, c->dt, cn_cpu());
        CHECK(th_read(t, v) == N_STAT);
        double lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < N_STAT; i++) {
            lo = fmin(lo, v[i]);
            hi = fmax(hi, v[i]);
        }
        if (!(lo >= c->low && hi < c->high && hi == c->top)) {
            fprintf(stderr, "%s [%.17g, %.17g): drew [%.17g, %.17g], top should be %.17g\n",
                    cn_dtype_name(c->dt), c->low, c->high, lo, hi, c->top);
            th_checks_failed++;
        }
        cn_release(t);
    }
    free(v);
}

/* ---- errors --------------------------------------------------------------------------------- */

static void test_bad_arguments_fail_and_keep_the_offset(void) {
    int64_t shape[1] = {4};
    cn_generator g = cn_generator_new(3);
    CHECK_FAILS(cn_rand_uniform(&g, shape, 1, 0, 1, CN_I32, cn_cpu()), CN_ERR_DTYPE, "i32");
    CHECK_FAILS(cn_rand_uniform(&g, shape, 1, 1, 1, CN_F32, cn_cpu()), CN_ERR_INVALID_ARG, "");
    CHECK_FAILS(cn_rand_normal(&g, shape, 1, 0, -1, CN_F32, cn_cpu()), CN_ERR_INVALID_ARG, "");
    CHECK(g.offset == 0);
}

int main(void) {
    RUN(test_philox_matches_random123_known_answers);
    RUN(test_uniform_follows_the_stream_definition);
    RUN(test_normal_follows_box_muller);
    RUN(test_normal_f32_is_the_f64_stream_rounded);
    RUN(test_same_seed_same_numbers_other_seed_others);
    RUN(test_two_calls_continue_one_call);
    RUN(test_uniform_moments_and_range);
    RUN(test_normal_moments_and_shape);
    RUN(test_std_zero_gives_the_mean);
    RUN(test_uniform_stays_below_high_after_rounding);
    RUN(test_bad_arguments_fail_and_keep_the_offset);
    return th_finish();
}
