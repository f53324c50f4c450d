/* The CPU's row kernels of "same"-width convolutions and of 2x2 max pooling with kept choices
 * (im2col512.c, pool512.c where the CPU has AVX-512; im2col.c and pool_index.c elsewhere) on rows
 * of every length they cut into 16-lane pieces (1 to 66 columns: one, two and five pieces, and
 * partial ones; pools of up to 8 windows a row take two rows a vector, an odd last one alone):
 * - conv2d and its input and weight gradients (cn__conv2d_backward_input / _weight) against the
 *   definition's loops in double, for kernel widths 1, 3 and 5, heights with padding from none
 *   to more than the kernel, channels sliced out of a wider tensor; inputs are k/8, so the f32
 *   results are exact sums and any misplaced or missing term shows;
 * - conv2d_max_pool2d (k = 2) against max_pool2d(conv2d(...)) bit for bit, values and the
 *   gradient of x, on planes full of ties, signed zeros and NaN, with a column and a row left
 *   out of the last window, with and without a bias and kept choices. */
#include <math.h>

#include "dispatch/backward_ops.h"
#include "harness.h"

static uint64_t rng_state = 0x6a09e667f3bcc908ull;

/* k/8 values, k in [-16, 16], as a tensor of dt; *out (when not NULL) keeps the doubles. */
static cn_tensor *eighths(const int64_t *shape, cn_dtype dt, double **out) {
    int64_t n = shape[0] * shape[1] * shape[2] * shape[3];
    double *v = th_alloc_doubles(n);
    th_fill_eighths(&rng_state, v, n);
    cn_tensor *t = th_own(th_tensor(v, shape, 4, dt));
    if (out)
        *out = v;
    else
        free(v);
    return t;
}

/* ---- the convolution and its gradients against the definition -------------------------------- */

typedef struct conv_case {
    int64_t N, C, H, W, O, KH, KW, ph;
} conv_case;

/* x [N, C, H, W] (element (n, c, h, w) at xv[((n C + c) H + h) W + w]), w [O, C, KH, KW], unit
 * stride, padding (ph, (KW - 1) / 2): the output is as wide as x. y = conv(x, w); with R of y's
 * shape, gx = the gradient of sum(y * R) by x, gw by w. */
static void reference(const conv_case *k, const double *x, const double *w, const double *r,
                      int64_t OH, double *y, double *gx, double *gw) {
    int64_t pw = (k->KW - 1) / 2;
    for (int64_t n = 0; n < k->N; n++)
        for (int64_t o = 0; o < k->O; o++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < k->W; ow++) {
                    int64_t at = ((n * k->O + o) * OH + oh) * k->W + ow;
                    double s = 0;
                    for (int64_t c = 0; c < k->C; c++)
                        for (int64_t kh = 0; kh < k->KH; kh++)
                            for (int64_t kw = 0; kw < k->KW; kw++) {
                                int64_t ih = oh - k->ph + kh, iw = ow - pw + kw;
                                if (ih < 0 || ih >= k->H || iw < 0 || iw >= k->W) continue;
                                int64_t xi = ((n * k->C + c) * k->H + ih) * k->W + iw;
                                int64_t wi = ((o * k->C + c) * k->KH + kh) * k->KW + kw;
                                s += x[xi] * w[wi];
                                gx[xi] += r[at] * w[wi];
                                gw[wi] += r[at] * x[xi];
                            }
                    y[at] = s;
                }
}

static void check_conv_case(const conv_case *k, int sliced) {
    char what[160];
    snprintf(what, sizeof what, "W %lld, H %lld, kernel %lldx%lld, ph %lld%s", (long long)k->W,
             (long long)k->H, (long long)k->KH, (long long)k->KW, (long long)k->ph,
             sliced ? ", sliced channels" : "");
    int64_t OH = k->H + 2 * k->ph - k->KH + 1, pw = (k->KW - 1) / 2;
    if (OH < 1) return;
    const int64_t xs[4] = {k->N, k->C, k->H, k->W}, ws[4] = {k->O, k->C, k->KH, k->KW};
    const int64_t ys[4] = {k->N, k->O, OH, k->W};
    double *xv, *wv, *rv;
    cn_tensor *x;
    if (sliced) { /* channels 1..C of a tensor of C + 2: a channel stride of (C + 2) H W */
        const int64_t wide[4] = {k->N, k->C + 2, k->H, k->W};
        double *all;
        cn_tensor *t = eighths(wide, CN_F32, &all);
        x = th_own(cn_slice(t, 1, 1, 1 + k->C, 1));
        xv = th_alloc_doubles(k->N * k->C * k->H * k->W);
        for (int64_t n = 0; n < k->N; n++)
            for (int64_t c = 0; c < k->C; c++)
                for (int64_t i = 0; i < k->H * k->W; i++)
                    xv[(n * k->C + c) * k->H * k->W + i] =
                        all[(n * (k->C + 2) + c + 1) * k->H * k->W + i];
        free(all);
    } else {
        x = eighths(xs, CN_F32, &xv);
    }
    cn_tensor *w = eighths(ws, CN_F32, &wv), *r = eighths(ys, CN_F32, &rv);
    int64_t ny = k->N * k->O * OH * k->W;
    double *y = th_alloc_doubles(ny), *gx = th_alloc_doubles(k->N * k->C * k->H * k->W);
    double *gw = th_alloc_doubles(k->O * k->C * k->KH * k->KW);
    reference(k, xv, wv, rv, OH, y, gx, gw);
    const cn_conv2d_params p = {{1, 1}, {k->ph, pw}, {1, 1}, 1};
    const int64_t ints[7] = {1, 1, k->ph, pw, 1, 1, 1};
    th_check_values(what, th_own(cn_conv2d(x, w, NULL, &p)), y, ny, 0);
    th_check_values(what, th_own(cn__conv2d_backward_input(r, w, xs, ints)), gx,
                    k->N * k->C * k->H * k->W, 0);
    th_check_values(what, th_own(cn__conv2d_backward_weight(r, x, ws, ints)), gw,
                    k->O * k->C * k->KH * k->KW, 0);
    free(xv);
    free(wv);
    free(rv);
    free(y);
    free(gx);
    free(gw);
    th_release_owned();
}

static void test_same_width_rows_against_the_definition(void) {
    const int64_t widths[] = {1, 5, 14, 16, 17, 28, 32, 33, 40};
    const int64_t kernels[][2] = {{3, 3}, {1, 1}, {1, 5}, {3, 5}, {5, 3}};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        for (size_t j = 0; j < sizeof kernels / sizeof kernels[0]; j++) {
            int64_t KH = kernels[j][0], KW = kernels[j][1];
            const int64_t phs[] = {0, (KH - 1) / 2, KH + 1};
            for (int q = 0; q < 3; q++) {
                conv_case k = {2, 3, 6, widths[i], 4, KH, KW, phs[q]};
                check_conv_case(&k, 0);
                if (q == 1) check_conv_case(&k, 1);
            }
        }
}

/* ---- 2x2 max pooling with kept choices ------------------------------------------------------- */

/* Checks a and b hold the same values bit for bit (NaN matching NaN). */
static void check_same(const char *what, cn_tensor *a, cn_tensor *b) {
    if (!a || !b || cn_numel(a) != cn_numel(b)) {
        fprintf(stderr, "%s: missing or mismatched (%s)\n", what, cn_last_error());
        th_checks_failed++;
        return;
    }
    double *va = th_values(a), *vb = th_values(b);
    for (int64_t i = 0; i < cn_numel(a); i++)
        if (!(va[i] == vb[i] && signbit(va[i]) == signbit(vb[i])) &&
            !(isnan(va[i]) && isnan(vb[i]))) {
            fprintf(stderr, "%s[%lld]: %.17g, want %.17g\n", what, (long long)i, va[i], vb[i]);
            th_checks_failed++;
            break;
        }
    free(va);
    free(vb);
}

static void test_pool_rows_match_max_pool2d(void) {
    /* values that tie often: -1, -0, +0, 1, 2, and now and then NaN */
    const double pick[6] = {-1.0, -0.0, 0.0, 1.0, 2.0, NAN};
    const int64_t widths[] = {2, 3, 8, 14, 15, 16, 18, 28, 32, 33, 34, 63, 66};
    const int64_t heights[] = {2, 5, 7, 8};
    cn_device ad = cn_autodiff(cn_cpu());
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        for (size_t j = 0; j < sizeof heights / sizeof heights[0]; j++) {
            char what[96];
            snprintf(what, sizeof what, "pool of %lld x %lld planes", (long long)heights[j],
                     (long long)widths[i]);
            /* a 1x1 convolution by 1: the pooled planes are x's values */
            const int64_t xs[4] = {3, 2, heights[j], widths[i]};
            int64_t nx = xs[0] * xs[1] * xs[2] * xs[3];
            double *v = th_alloc_doubles(nx);
            for (int64_t e = 0; e < nx; e++) {
                uint64_t u = th_lcg(&rng_state);
                v[e] = pick[u % 29 == 0 ? 5 : u % 5];
            }
            cn_tensor *x = th_own(cn_to_device(th_own(th_tensor(v, xs, 4, CN_F32)), ad));
            free(v);
            x = cn_require_grad(x);
            const double ones[2] = {1.0, 1.0};
            cn_tensor *w = th_own(th_tensor(ones, (int64_t[]){2, 1, 1, 1}, 4, CN_F32));
            w = th_own(cn_to_device(w, ad));
            const cn_conv2d_params p = {{1, 1}, {0, 0}, {1, 1}, 2}; /* groups 2: w = 1 */
            const cn_pool2d_params pp = {{2, 2}, {2, 2}, {0, 0}};
            /* every other case with a bias (added in the pool where it is fused there) */
            const double bv[2] = {0.25, -0.0};
            cn_tensor *b = NULL;
            if (j % 2) b = th_own(th_tensor(bv, (int64_t[]){2}, 1, CN_F32));
            if (b) b = th_own(cn_to_device(b, ad));
            cn_tensor *fused = th_own(cn_conv2d_max_pool2d(x, w, b, &p, 2));
            cn_tensor *two = th_own(cn_max_pool2d(th_own(cn_conv2d(x, w, b, &p)), &pp));
            check_same(what, fused, two);
            cn_tensor *r = fused ? eighths(cn_shape(fused), CN_F32, NULL) : NULL;
            cn_tensor *ra = r ? th_own(cn_to_device(r, ad)) : NULL;
            cn_grads *gf = cn_backward(th_own(cn_sum(th_own(cn_mul(fused, ra)))));
            cn_grads *gt = cn_backward(th_own(cn_sum(th_own(cn_mul(two, ra)))));
            CHECK(gf && gt);
            if (gf && gt) check_same(what, cn_grad(gf, x), cn_grad(gt, x));
            cn_grads_free(gf);
            cn_grads_free(gt);
            /* untracked: no choices kept, the same values */
            cn_tensor *xc = th_own(cn_to_device(x, cn_cpu()));
            cn_tensor *wc = th_own(cn_to_device(w, cn_cpu()));
            cn_tensor *bc = b ? th_own(cn_to_device(b, cn_cpu())) : NULL;
            check_same(what, th_own(cn_conv2d_max_pool2d(xc, wc, bc, &p, 2)), two);
            th_release_owned();
        }
}

int main(void) {
    RUN(test_same_width_rows_against_the_definition);
    RUN(test_pool_rows_match_max_pool2d);
    return th_finish();
}
