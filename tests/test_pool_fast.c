/* The fast paths of max and average pooling (2x2 and 3x3 windows at stride 2 over dense planes:
 * src/backends/cpu/pool.c and pool_backward.c), forward and backward, in f32 and f64:
 * - against a reference written here in double (max: NaN if the window holds one, else its first
 *   maximum, sign of zero included; the backward's gradient to the first maximum or the first
 *   NaN; avg: the sum over in-image positions divided by the whole window);
 * - bit for bit against the general loop, reached with the same values through a
 *   column-strided view (every other column of a tensor twice as wide), which the fast path does
 *   not take.
 * Inputs: few distinct values (many ties, +0 and -0 among them), and for max -inf and NaNs of
 * both signs (the forward keeps the window's last NaN, so its sign shows which one); odd and even
 * sizes, padding 0 and 1 on either axis, windows clipped on every side, rows longer than the
 * backward's blocks, enough planes to run on several threads. */
#include <stdint.h>

#include "dispatch/backward_ops.h"
#include "harness.h"

/* ---- values ---------------------------------------------------------------------------------- */

static uint64_t rng_state = 0x8f14e45fceea167aull;

/* n values k/8, k in [-4, 4], with -0 for k = 0 half the time; with specials, one in 16 is -inf
 * and one in 16 a NaN (of either sign). Sums of a few are exact in f32. */
static double *pool_values(int64_t n, int specials) {
    double *v = th_alloc_doubles(n);
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = th_lcg(&rng_state);
        int64_t k = (int64_t)(r % 9) - 4;
        v[i] = k == 0 && (r >> 8) % 2 ? -0.0 : (double)k / 8.0;
        if (specials && (r >> 12) % 16 == 0) v[i] = -INFINITY;
        if (specials && (r >> 12) % 16 == 1) v[i] = (r >> 20) % 2 ? NAN : -NAN;
    }
    return v;
}

/* A dense tensor of dtype dt holding v (NaN signs kept). */
static cn_tensor *dense_tensor(const double *v, const int64_t *shape, cn_dtype dt) {
    int64_t n = shape[0] * shape[1] * shape[2] * shape[3];
    if (dt == CN_F64) return th_own(cn_from_data(v, shape, 4, CN_F64, cn_cpu()));
    float *f = malloc(sizeof *f * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        f[i] = (float)v[i];
    cn_tensor *t = th_own(cn_from_data(f, shape, 4, CN_F32, cn_cpu()));
    free(f);
    return t;
}

/* The same values as a view of every other column of a tensor twice as wide (the odd columns
 * hold 7s): not dense along W, so the kernels take their general loop. */
static cn_tensor *strided_tensor(const double *v, const int64_t *shape, cn_dtype dt) {
    int64_t wide[4] = {shape[0], shape[1], shape[2], 2 * shape[3]};
    int64_t n = wide[0] * wide[1] * wide[2] * wide[3];
    double *w = th_alloc_doubles(n);
    for (int64_t i = 0; i < n; i++)
        w[i] = i % 2 ? 7.0 : v[i / 2];
    cn_tensor *t = dense_tensor(w, wide, dt);
    free(w);
    return th_own(cn_slice(t, 3, 0, wide[3], 2));
}

/* t's elements as raw bytes, malloc'd. */
static void *raw(cn_tensor *t, size_t *nbytes) {
    *nbytes = t ? (size_t)cn_numel(t) * (cn_dtype_of(t) == CN_F32 ? 4 : 8) : 0;
    void *b = malloc(*nbytes ? *nbytes : 1);
    if (!t || cn_read(t, b, *nbytes) != CN_OK) {
        fprintf(stderr, "raw: cannot read (%s)\n", cn_last_error());
        th_checks_failed++;
    }
    return b;
}

/* Checks that a and b hold the same bytes. */
static void check_same_bits(const char *what, cn_tensor *a, cn_tensor *b) {
    size_t na, nb;
    void *ra = raw(a, &na), *rb = raw(b, &nb);
    if (na != nb || memcmp(ra, rb, na) != 0) {
        fprintf(stderr, "%s: fast path and general loop differ\n", what);
        th_checks_failed++;
    }
    free(ra);
    free(rb);
}

/* Checks got against want: NaN where want is NaN, else equal with the same sign (tol 0), or
 * within tol * max(1, |want|). */
static void check_against(const char *what, cn_tensor *t, const double *want, double tol) {
    double *got = th_values(t);
    int64_t n = t ? cn_numel(t) : 0, bad = 0;
    for (int64_t i = 0; i < n; i++) {
        int ok;
        if (isnan(want[i]))
            ok = isnan(got[i]);
        else if (tol == 0)
            ok = got[i] == want[i] && signbit(got[i]) == signbit(want[i]);
        else
            ok = got[i] == want[i] ||
                 fabs(got[i] - want[i]) <= tol * (fabs(want[i]) > 1 ? fabs(want[i]) : 1);
        if (!ok && bad++ < 3)
            fprintf(stderr, "%s: element %lld = %.17g, want %.17g\n", what, (long long)i, got[i],
                    want[i]);
    }
    if (bad) th_checks_failed++;
    free(got);
}

/* ---- the reference --------------------------------------------------------------------------- */

typedef struct geom {
    int64_t N, C, H, W, K, ph, pw, OH, OW;
} geom;

static geom make_geom(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t ph,
                      int64_t pw) {
    geom g = {N, C, H, W, K, ph, pw, 0, 0};
    g.OH = (H + 2 * ph - K) / 2 + 1;
    g.OW = (W + 2 * pw - K) / 2 + 1;
    return g;
}

/* Forward: out [N, C, OH, OW]. */
static double *ref_forward(const geom *g, const double *x, int is_max) {
    double *out = th_alloc_doubles(g->N * g->C * g->OH * g->OW);
    for (int64_t q = 0; q < g->N * g->C; q++)
        for (int64_t oh = 0; oh < g->OH; oh++)
            for (int64_t ow = 0; ow < g->OW; ow++) {
                double acc = is_max ? -INFINITY : 0.0;
                int nan = 0;
                for (int64_t i = 0; i < g->K; i++)
                    for (int64_t j = 0; j < g->K; j++) {
                        int64_t h = oh * 2 - g->ph + i, w = ow * 2 - g->pw + j;
                        if (h < 0 || h >= g->H || w < 0 || w >= g->W) continue;
                        double v = x[(q * g->H + h) * g->W + w];
                        if (!is_max)
                            acc += v;
                        else if (isnan(v))
                            nan = 1;
                        else if (v > acc)
                            acc = v;
                    }
                out[(q * g->OH + oh) * g->OW + ow] = nan      ? NAN
                                                     : is_max ? acc
                                                              : acc / (double)(g->K * g->K);
            }
    return out;
}

/* Backward: gx [N, C, H, W] from gy [N, C, OH, OW]. */
static double *ref_backward(const geom *g, const double *x, const double *gy, int is_max) {
    double *gx = th_alloc_doubles(g->N * g->C * g->H * g->W);
    for (int64_t q = 0; q < g->N * g->C; q++)
        for (int64_t oh = 0; oh < g->OH; oh++)
            for (int64_t ow = 0; ow < g->OW; ow++) {
                double v = gy[(q * g->OH + oh) * g->OW + ow];
                int64_t best = -1;
                for (int64_t i = 0; i < g->K; i++)
                    for (int64_t j = 0; j < g->K; j++) {
                        int64_t h = oh * 2 - g->ph + i, w = ow * 2 - g->pw + j;
                        if (h < 0 || h >= g->H || w < 0 || w >= g->W) continue;
                        int64_t at = (q * g->H + h) * g->W + w;
                        if (!is_max)
                            gx[at] += v / (double)(g->K * g->K);
                        else if (best < 0 || (!isnan(x[best]) && (isnan(x[at]) || x[at] > x[best])))
                            best = at;
                    }
                if (is_max && best >= 0) gx[best] += v;
            }
    return gx;
}

/* ---- one case -------------------------------------------------------------------------------- */

static void check_case(const geom *g, cn_dtype dt) {
    const int64_t xs[4] = {g->N, g->C, g->H, g->W}, gs[4] = {g->N, g->C, g->OH, g->OW};
    const int64_t ints[6] = {g->K, g->K, 2, 2, g->ph, g->pw};
    const cn_pool2d_params p = {{g->K, g->K}, {2, 2}, {g->ph, g->pw}};
    for (int is_max = 0; is_max < 2; is_max++) {
        char what[160];
        snprintf(what, sizeof what, "%s %lldx%lld pad (%lld, %lld) on [%lld, %lld, %lld, %lld] %s",
                 is_max ? "max" : "avg", (long long)g->K, (long long)g->K, (long long)g->ph,
                 (long long)g->pw, (long long)g->N, (long long)g->C, (long long)g->H,
                 (long long)g->W, dt == CN_F32 ? "f32" : "f64");
        double *x = pool_values(g->N * g->C * g->H * g->W, is_max);
        double *gy = pool_values(g->N * g->C * g->OH * g->OW, 0);
        cn_tensor *xd = dense_tensor(x, xs, dt), *xv = strided_tensor(x, xs, dt);
        cn_tensor *gd = dense_tensor(gy, gs, dt), *gv = strided_tensor(gy, gs, dt);
        /* the reference sees the values as stored (f32 rounding is exact for these) */
        double tol = is_max ? 0 : th_tol_of(dt);

        double *want = ref_forward(g, x, is_max);
        cn_tensor *fast = th_own(is_max ? cn_max_pool2d(xd, &p) : cn_avg_pool2d(xd, &p));
        cn_tensor *slow = th_own(is_max ? cn_max_pool2d(xv, &p) : cn_avg_pool2d(xv, &p));
        char name[200];
        snprintf(name, sizeof name, "%s forward, fast path", what);
        check_against(name, fast, want, tol);
        snprintf(name, sizeof name, "%s forward, general loop", what);
        check_against(name, slow, want, tol);
        snprintf(name, sizeof name, "%s forward", what);
        check_same_bits(name, fast, slow);
        free(want);

        want = ref_backward(g, x, gy, is_max);
        fast = th_own(is_max ? cn__max_pool2d_backward(gd, xd, ints)
                             : cn__avg_pool2d_backward(gd, xs, ints));
        slow = th_own(is_max ? cn__max_pool2d_backward(gv, xv, ints)
                             : cn__avg_pool2d_backward(gv, xs, ints));
        snprintf(name, sizeof name, "%s backward, fast path", what);
        check_against(name, fast, want, th_tol_of(dt));
        snprintf(name, sizeof name, "%s backward, general loop", what);
        check_against(name, slow, want, th_tol_of(dt));
        snprintf(name, sizeof name, "%s backward", what);
        check_same_bits(name, fast, slow);
        if (is_max) { /* only g strided, only x strided: the general loop too */
            cn_tensor *mixed = th_own(cn__max_pool2d_backward(gv, xd, ints));
            check_same_bits(name, fast, mixed);
            mixed = th_own(cn__max_pool2d_backward(gd, xv, ints));
            check_same_bits(name, fast, mixed);
        }
        free(want);
        free(x);
        free(gy);
        th_release_owned();
    }
}

/* ---- tests ----------------------------------------------------------------------------------- */

static const cn_dtype dtypes[2] = {CN_F32, CN_F64};

/* Sizes odd and even, down to a single window, with every padding: clipped windows on the top,
 * left, bottom and right, and rows of whole windows between. */
static void test_fast_paths_match_reference_and_general_loop(void) {
    static const int64_t sizes[][2] = {{2, 2}, {3, 3}, {4, 5}, {5, 4},   {7, 7},
                                       {8, 8}, {6, 9}, {9, 6}, {12, 13}, {3, 10}};
    for (int d = 0; d < 2; d++)
        for (int64_t K = 2; K <= 3; K++)
            for (int pad = 0; pad < 4; pad++)
                for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
                    int64_t ph = pad & 1, pw = pad >> 1, H = sizes[s][0], W = sizes[s][1];
                    if (H + 2 * ph < K || W + 2 * pw < K) continue;
                    geom g = make_geom(3, 2, H, W, K, ph, pw);
                    check_case(&g, dtypes[d]);
                }
}

/* Rows of more windows than the 3x3 backward's block of choices (64), and the CNN's shapes,
 * large enough that the planes are split over threads. */
static void test_long_rows_and_threaded_planes(void) {
    for (int d = 0; d < 2; d++)
        for (int64_t K = 2; K <= 3; K++)
            for (int pad = 0; pad < 2; pad++) {
                geom wide = make_geom(2, 1, 5, 151, K, pad, pad);
                check_case(&wide, dtypes[d]);
                geom cnn = make_geom(4, 16, 28, 28, K, pad, pad);
                check_case(&cnn, dtypes[d]);
                geom odd = make_geom(3, 16, 15, 15, K, pad, pad);
                check_case(&odd, dtypes[d]);
            }
}

/* Planes dense but channels strided (every other channel): the fast path works plane by plane. */
static void test_dense_planes_of_a_channel_slice(void) {
    for (int d = 0; d < 2; d++) {
        cn_dtype dt = dtypes[d];
        const int64_t all[4] = {2, 6, 9, 8}, xs[4] = {2, 3, 9, 8};
        double *v = pool_values(2 * 6 * 9 * 8, 1);
        cn_tensor *x = th_own(cn_slice(dense_tensor(v, all, dt), 1, 0, 6, 2));
        double *xv = th_values(x);
        for (int64_t K = 2; K <= 3; K++) {
            geom g = make_geom(2, 3, 9, 8, K, 1, 1);
            const cn_pool2d_params p = {{K, K}, {2, 2}, {1, 1}};
            double *want = ref_forward(&g, xv, 1);
            check_against("max over a channel slice", th_own(cn_max_pool2d(x, &p)), want, 0);
            free(want);
            want = ref_forward(&g, xv, 0);
            check_against("avg over a channel slice", th_own(cn_avg_pool2d(x, &p)), want,
                          th_tol_of(dt));
            free(want);
            const int64_t gs[4] = {2, 3, g.OH, g.OW}, ints[6] = {K, K, 2, 2, 1, 1};
            double *gy = pool_values(2 * 3 * g.OH * g.OW, 0);
            cn_tensor *gt = dense_tensor(gy, gs, dt);
            want = ref_backward(&g, xv, gy, 1);
            check_against("max backward over a channel slice",
                          th_own(cn__max_pool2d_backward(gt, x, ints)), want, 0);
            free(want);
            want = ref_backward(&g, xv, gy, 0);
            check_against("avg backward over a channel slice",
                          th_own(cn__avg_pool2d_backward(gt, xs, ints)), want, th_tol_of(dt));
            free(want);
            free(gy);
        }
        free(xv);
        free(v);
        th_release_owned();
    }
}

int main(void) {
    RUN(test_fast_paths_match_reference_and_general_loop);
    RUN(test_long_rows_and_threaded_planes);
    RUN(test_dense_planes_of_a_channel_slice);
    return th_finish();
}
