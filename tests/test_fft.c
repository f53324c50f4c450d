/* The real FFT of issue 16 (cn_rfft, cn_irfft) through the public API, beyond the op table's
 * PyTorch cases (tests/test_op_table.c): spectra worked out by hand, round trips, long and odd
 * (prime) lengths in f32 against the f64 transform, strided inputs, many lines on the pool and
 * several threads at once (the kissfft plans are shared through a cache), gradients through
 * burn's (re, im) views by finite differences, and every misuse: a clear status and message
 * naming the call and the argument, the inputs untouched and nothing leaked. */
#include "harness.h"

#include <pthread.h>

#define PI 3.14159265358979323846

static const cn_dtype dtypes[2] = {CN_F64, CN_F32};

/* ---- values by hand -------------------------------------------------------------------------- */

/* x_j = 0.5 + cos(2 pi 3 j / 16) - 2 sin(2 pi 5 j / 16), n = 16. With cos = (e^{i t} + e^{-i t}) /
 * 2 and sin = (e^{i t} - e^{-i t}) / 2i, X_k = sum_j x_j e^{-2 pi i j k / 16} is 16 * 0.5 = 8 at
 * bin 0, 16 / 2 = 8 at bin 3, and -2 * 16 / (2i) = 16 i at bin 5; 0 elsewhere. "forward" divides
 * by 16 (0.5, 0.5, i), "ortho" by 4 (2, 2, 4i). irfft of each gives x back. */
static void test_cosine_by_hand(void) {
    cn_scope_begin();
    const int64_t s[1] = {16};
    double x[16], want[3][18] = {{0}};
    for (int j = 0; j < 16; j++)
        x[j] = 0.5 + cos(2 * PI * 3 * j / 16) - 2 * sin(2 * PI * 5 * j / 16);
    const double div[3] = {1, 16, 4};
    for (int m = 0; m < 3; m++) {
        want[m][0] = 8 / div[m];
        want[m][2 * 3] = 8 / div[m];
        want[m][2 * 5 + 1] = 16 / div[m];
    }
    for (int d = 0; d < 2; d++) {
        cn_tensor *t = th_tensor(x, s, 1, dtypes[d]);
        double tol = dtypes[d] == CN_F64 ? 1e-14 : 2e-6;
        for (int m = 0; m < 3; m++) {
            cn_tensor *y = cn_rfft(t, -1, 0, (cn_fft_norm)m);
            const int64_t ys[2] = {9, 2};
            th_check_shape("rfft shape", y, ys, 2);
            th_check_values("rfft by hand", y, want[m], 18, tol);
            th_check_values("irfft by hand", cn_irfft(y, 16, -1, (cn_fft_norm)m), x, 16, tol * 8);
            th_check_values("irfft default n", cn_irfft(y, -1, 0, (cn_fft_norm)m), x, 16, tol * 8);
        }
    }
    cn_scope_end();
}

/* An odd length: x = [0, 1, 0, 0, 0] (a unit impulse at 1), X_k = e^{-2 pi i k / 5}:
 * (cos(2 pi k / 5), -sin(2 pi k / 5)) for k = 0, 1, 2. Cut to n = 2: [0, 1] -> X = (1, 0),
 * (-1, 0). Padded to n = 7: the impulse at 1 of 7 points: e^{-2 pi i k / 7}, k = 0..3. n = 1:
 * the first sample only: (0, 0). */
static void test_odd_cut_padded_by_hand(void) {
    cn_scope_begin();
    const int64_t s[1] = {5};
    const double x[5] = {0, 1, 0, 0, 0};
    double w5[6], w7[8];
    for (int k = 0; k < 3; k++)
        w5[2 * k] = cos(2 * PI * k / 5), w5[2 * k + 1] = k ? -sin(2 * PI * k / 5) : 0;
    for (int k = 0; k < 4; k++)
        w7[2 * k] = cos(2 * PI * k / 7), w7[2 * k + 1] = k ? -sin(2 * PI * k / 7) : 0;
    const double w2[4] = {1, 0, -1, 0}, w1[2] = {0, 0};
    for (int d = 0; d < 2; d++) {
        cn_tensor *t = th_tensor(x, s, 1, dtypes[d]);
        double tol = dtypes[d] == CN_F64 ? 1e-15 : 1e-6;
        th_check_values("odd n", cn_rfft(t, -1, 0, CN_FFT_BACKWARD), w5, 6, tol);
        th_check_values("cut to 2", cn_rfft(t, 2, 0, CN_FFT_BACKWARD), w2, 4, tol);
        th_check_values("padded to 7", cn_rfft(t, 7, 0, CN_FFT_BACKWARD), w7, 8, tol);
        th_check_values("n = 1", cn_rfft(t, 1, 0, CN_FFT_BACKWARD), w1, 2, 0);
        /* back: n = 5 from the 3 bins (the odd length must be given) */
        const int64_t zs[2] = {3, 2};
        cn_tensor *z = th_tensor(w5, zs, 2, dtypes[d]);
        th_check_values("irfft odd", cn_irfft(z, 5, 0, CN_FFT_BACKWARD), x, 5, tol);
    }
    cn_scope_end();
}

/* irfft ignores the imaginary parts of bin 0 and of the Nyquist bin (as PyTorch's CPU transform):
 * the spectrum [(1, 5), (0, 0), (2, -7)] with n = 4 is [1, 0, 2] as real values:
 * x_j = (1 + 2 (-1)^j) / 4 = [0.75, -0.25, 0.75, -0.25]. */
static void test_irfft_ignores_dc_and_nyquist_imaginary(void) {
    cn_scope_begin();
    const int64_t zs[2] = {3, 2};
    const double z[6] = {1, 5, 0, 0, 2, -7}, want[4] = {0.75, -0.25, 0.75, -0.25};
    for (int d = 0; d < 2; d++)
        th_check_values("irfft", cn_irfft(th_tensor(z, zs, 2, dtypes[d]), 4, 0, CN_FFT_BACKWARD),
                        want, 4, 1e-7);
    cn_scope_end();
}

/* ---- round trips, layouts, long lengths --------------------------------------------------------
 */

/* irfft(rfft(x, n), n) = x cut or zero-padded to n, along a middle dim, every norm, even and odd
 * n; a transposed (strided) x gives what its contiguous copy gives. */
static void test_round_trips_and_strides(void) {
    cn_scope_begin();
    const int64_t s[3] = {3, 10, 4};
    double v[120];
    uint64_t st = 7;
    th_fill_eighths(&st, v, 120);
    const int64_t ns[4] = {10, 11, 16, 7};
    for (int d = 0; d < 2; d++) {
        cn_tensor *x = th_tensor(v, s, 3, dtypes[d]);
        double tol = dtypes[d] == CN_F64 ? 1e-13 : 2e-6;
        for (int m = 0; m < 3; m++)
            for (int k = 0; k < 4; k++) {
                int64_t n = ns[k];
                cn_tensor *back = cn_irfft(cn_rfft(x, n, 1, (cn_fft_norm)m), n, 1, (cn_fft_norm)m);
                /* x along dim 1 cut or zero-padded to n */
                const int64_t pad[4] = {0, 0, 0, n - 10};
                cn_tensor *want = cn_pad(x, pad, 4, CN_PAD_CONSTANT, 0);
                double w[3 * 16 * 4];
                int64_t cnt = th_read(want, w);
                th_check_values("round trip", back, w, cnt, tol);
            }
        /* strided: x^T along its dims 1 and 2 ([3, 4, 10], transform along the 10) */
        cn_tensor *t = cn_transpose(x, 1, 2), *c = cn_contiguous(t);
        double w[3 * 4 * 6 * 2];
        int64_t cnt = th_read(cn_rfft(c, -1, 2, CN_FFT_ORTHO), w);
        th_check_values("strided rfft", cn_rfft(t, -1, 2, CN_FFT_ORTHO), w, cnt, 0);
        cn_tensor *z = cn_rfft(c, -1, 1, CN_FFT_BACKWARD); /* [3, 3, 10, 2] */
        cn_tensor *zt = cn_transpose(cn_contiguous(cn_transpose(z, 2, 3)), 2, 3); /* strided */
        double w2[3 * 4 * 10];
        cnt = th_read(cn_irfft(z, 4, 1, CN_FFT_BACKWARD), w2);
        th_check_values("strided irfft", cn_irfft(zt, 4, 1, CN_FFT_BACKWARD), w2, cnt, 0);
    }
    cn_scope_end();
}

/* Many lines (split over the pool's threads) of long even, odd and prime lengths: kissfft in f32
 * against the DFT in f64 on the same values, within f32's rounding times the size. The f64
 * products run in blocks of bins or samples (n = 1024) and of lines (1100 lines of 600). */
static void test_long_f32_against_f64(void) {
    cn_scope_begin();
    const int64_t lens[5][2] = {{24, 1024}, {24, 243}, {24, 257}, {24, 1000}, {1100, 600}};
    for (int k = 0; k < 5; k++) {
        int64_t n = lens[k][1], s[2] = {lens[k][0], n}, total = s[0] * n;
        double *v = th_alloc_doubles(total);
        uint64_t st = (uint64_t)n;
        th_fill_eighths(&st, v, total);
        cn_tensor *x64 = th_tensor(v, s, 2, CN_F64), *x32 = cn_cast(x64, CN_F32);
        cn_tensor *y64 = cn_rfft(x64, -1, 1, CN_FFT_BACKWARD);
        double *w = th_values(y64);
        /* |X_k| <= n; float's error ~ 6e-8 log2 n * sqrt(n) relative to that */
        th_check_values("f32 rfft", cn_rfft(x32, -1, 1, CN_FFT_BACKWARD), w, cn_numel(y64),
                        2e-5 * (double)n / 64);
        th_check_values("f32 irfft", cn_irfft(cn_cast(y64, CN_F32), n, 1, CN_FFT_BACKWARD), v,
                        total, 1e-5);
        th_check_values("f64 irfft", cn_irfft(y64, n, 1, CN_FFT_BACKWARD), v, total, 1e-13);
        free(w);
        free(v);
    }
    cn_scope_end();
}

/* Threads running f32 transforms of the same lengths at once take plans from one cache: each
 * gets what a lone call gets, bit for bit. */
typedef struct fft_thread_arg {
    cn_tensor *x;
    const double (*want)[93]; /* after rfft with n = 31, then n = 30 */
    int bad;
} fft_thread_arg;

static void *fft_thread(void *p) {
    fft_thread_arg *a = p;
    double got[93];
    for (int r = 0; r < 20; r++) {
        cn_tensor *y = cn_rfft(a->x, r % 2 ? 30 : 31, -1, CN_FFT_BACKWARD);
        cn_tensor *b = y ? cn_irfft(y, 31, -1, CN_FFT_BACKWARD) : NULL;
        if (!b || th_read(b, got) != 93 || memcmp(got, a->want[r % 2], sizeof got) != 0) a->bad = 1;
        cn_release(y);
        cn_release(b);
    }
    return NULL;
}

static void test_threads_share_plans(void) {
    const int64_t s[2] = {3, 31};
    double v[93];
    uint64_t st = 3;
    th_fill_eighths(&st, v, 93);
    cn_tensor *x = th_tensor(v, s, 2, CN_F32);
    double want[2][93];
    for (int r = 0; r < 2; r++) {
        cn_tensor *y = cn_rfft(x, r ? 30 : 31, -1, CN_FFT_BACKWARD);
        cn_tensor *b = cn_irfft(y, 31, -1, CN_FFT_BACKWARD);
        CHECK(th_read(b, want[r]) == 93);
        cn_release(y);
        cn_release(b);
    }
    pthread_t th[4];
    fft_thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (fft_thread_arg){x, (const double(*)[93])want, 0};
        CHECK(pthread_create(&th[i], NULL, fft_thread, &args[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(!args[i].bad);
    }
    cn_release(x);
}

/* ---- gradients ----------------------------------------------------------------------------- */

/* L = sum over bins of w_k (re_k^2 + im_k^2) through burn's (re, im) views of rfft's output,
 * with odd weights w_k = k + 1 and an odd n cut from x, and L = sum(irfft(z) * r) of a spectrum
 * padded to more bins: cn_backward's gradients against central differences in f64. */
static double power_loss(cn_tensor *x, int64_t n, cn_tensor **out) {
    cn_tensor *y = cn_rfft(x, n, 0, CN_FFT_ORTHO);
    cn_tensor *re = cn_squeeze(cn_slice(y, -1, 0, 1, 1), -1);
    cn_tensor *im = cn_squeeze(cn_slice(y, -1, 1, 2, 1), -1);
    int64_t f = n / 2 + 1;
    cn_tensor *w = cn_arange(1, (double)f + 1, 1, CN_F64, cn_device_of(x));
    cn_tensor *l = cn_sum(cn_mul(w, cn_add(cn_mul(re, re), cn_mul(im, im))));
    double v = 0;
    if (l) cn_read(l, &v, sizeof v);
    if (out) *out = l;
    return v;
}

static void test_gradients_by_differences(void) {
    cn_scope_begin();
    const int64_t s[1] = {8};
    double v[8] = {0.5, -1, 0.25, 2, -0.75, 1.5, 0.125, -0.5};
    cn_device ad = cn_autodiff(cn_cpu());
    cn_tensor *x = cn_require_grad(cn_from_inner(th_tensor(v, s, 1, CN_F64), ad));
    cn_tensor *l = NULL;
    power_loss(x, 7, &l);
    cn_grads *g = l ? cn_backward(l) : NULL;
    CHECK(g != NULL);
    double gx[8] = {0};
    if (g) CHECK(th_read(cn_grad(g, x), gx) == 8);
    for (int j = 0; j < 8; j++) {
        double e = 1e-6, vp[8], vm[8];
        memcpy(vp, v, sizeof v);
        memcpy(vm, v, sizeof v);
        vp[j] += e;
        vm[j] -= e;
        double num = (power_loss(th_tensor(vp, s, 1, CN_F64), 7, NULL) -
                      power_loss(th_tensor(vm, s, 1, CN_F64), 7, NULL)) /
                     (2 * e);
        if (fabs(num - gx[j]) > 1e-6 * (1 + fabs(num))) {
            fprintf(stderr, "power spectrum: dL/dx[%d] = %.12g, finite difference %.12g\n", j,
                    gx[j], num);
            th_checks_failed++;
        }
    }
    /* x[7] is cut (n = 7): no gradient */
    CHECK(gx[7] == 0);
    if (g) cn_grads_free(g);

    /* irfft of 3 bins to n = 8 (5 bins: padded): the imaginary parts of bin 0 get nothing; the
     * gradient is r's rfft (unscaled: "forward" irfft's dual) doubled on bins 1 and 2 */
    const int64_t zs[2] = {3, 2};
    const double zv[6] = {1, 0.5, -0.25, 0.75, 2, -1};
    double r[8];
    for (int j = 0; j < 8; j++)
        r[j] = (j + 0.5) / 8;
    cn_tensor *z = cn_require_grad(cn_from_inner(th_tensor(zv, zs, 2, CN_F64), ad));
    cn_tensor *rt = cn_from_inner(th_tensor(r, s, 1, CN_F64), ad);
    cn_grads *g2 = cn_backward(cn_sum(cn_mul(cn_irfft(z, 8, 0, CN_FFT_FORWARD), rt)));
    CHECK(g2 != NULL);
    double gz[6] = {0}, want[6];
    for (int k = 0; k < 3; k++) {
        double re = 0, im = 0;
        for (int j = 0; j < 8; j++)
            re += r[j] * cos(2 * PI * j * k / 8), im -= r[j] * sin(2 * PI * j * k / 8);
        want[2 * k] = (k ? 2 : 1) * re;
        want[2 * k + 1] = k ? 2 * im : 0;
    }
    if (g2) {
        CHECK(th_read(cn_grad(g2, z), gz) == 6);
        th_check_values("irfft gradient", cn_grad(g2, z), want, 6, 1e-14);
        cn_grads_free(g2);
    }
    cn_scope_end();
}

/* ---- misuse ---------------------------------------------------------------------------------- */

static void test_misuse(void) {
    cn_scope_begin();
    const int64_t s2[2] = {2, 6}, s1[1] = {6}, se[2] = {2, 0}, z3[3] = {2, 4, 3}, z1[3] = {2, 1, 2};
    double v[24];
    for (int i = 0; i < 24; i++)
        v[i] = i;
    cn_tensor *x = th_tensor(v, s2, 2, CN_F64), *xi = cn_cast(x, CN_I32);
    cn_tensor *xh = cn_cast(x, CN_F16), *scalar = cn_full(NULL, 0, 1, CN_F64, cn_cpu());
    cn_tensor *empty = cn_zeros(se, 2, CN_F64, cn_cpu()), *x1 = th_tensor(v, s1, 1, CN_F64);
    cn_tensor *bad_last = th_tensor(v, z3, 3, CN_F64), *one_bin = th_tensor(v, z1, 3, CN_F64);
    cn_tensor *z = cn_rfft(x, -1, 1, CN_FFT_BACKWARD);
    int64_t big[CN_MAX_DIMS];
    for (int d = 0; d < CN_MAX_DIMS; d++)
        big[d] = 1;
    cn_tensor *full_rank = cn_zeros(big, CN_MAX_DIMS, CN_F64, cn_cpu());
    cn_tensor *zi = cn_cast(z, CN_I64), *zb = cn_cast(z, CN_BF16);
    int64_t live = cn_live_tensors();

    CHECK_FAILS(cn_rfft(NULL, -1, 0, CN_FFT_BACKWARD), CN_ERR_NULL_ARG, "x");
    CHECK_FAILS(cn_rfft(xi, -1, 0, CN_FFT_BACKWARD), CN_ERR_KIND, "'x'");
    CHECK_FAILS(cn_rfft(xh, -1, 0, CN_FFT_BACKWARD), CN_ERR_DTYPE, "f16");
    CHECK_FAILS(cn_rfft(scalar, -1, 0, CN_FFT_BACKWARD), CN_ERR_SHAPE, "cn_unsqueeze");
    CHECK_FAILS(cn_rfft(full_rank, -1, 0, CN_FFT_BACKWARD), CN_ERR_SHAPE, "cn_reshape");
    CHECK_FAILS(cn_rfft(x, -1, 2, CN_FFT_BACKWARD), CN_ERR_INVALID_ARG, "dim = 2");
    CHECK_FAILS(cn_rfft(x, -1, -3, CN_FFT_BACKWARD), CN_ERR_INVALID_ARG, "dim = -3");
    CHECK_FAILS(cn_rfft(x, 0, 1, CN_FFT_BACKWARD), CN_ERR_INVALID_ARG, "'n' is 0");
    CHECK_FAILS(cn_rfft(x, -2, 1, CN_FFT_BACKWARD), CN_ERR_INVALID_ARG, "'n' is -2");
    CHECK_FAILS(cn_rfft(empty, -1, 1, CN_FFT_BACKWARD), CN_ERR_INVALID_ARG, "pass a length");
    CHECK_FAILS(cn_rfft(x, (int64_t)1 << 31, 1, CN_FFT_BACKWARD), CN_ERR_INVALID_ARG, "2^31 - 1");
    CHECK_FAILS(cn_rfft(x, -1, 1, (cn_fft_norm)3), CN_ERR_INVALID_ARG, "'norm' 3");
    CHECK_FAILS(cn_rfft(x, -1, 1, (cn_fft_norm)-1), CN_ERR_INVALID_ARG, "CN_FFT_ORTHO");

    CHECK_FAILS(cn_irfft(NULL, -1, 0, CN_FFT_BACKWARD), CN_ERR_NULL_ARG, "spectrum");
    CHECK_FAILS(cn_irfft(zi, -1, 0, CN_FFT_BACKWARD), CN_ERR_KIND, "'spectrum'");
    CHECK_FAILS(cn_irfft(x1, -1, 0, CN_FFT_BACKWARD), CN_ERR_SHAPE, "cn_stack");
    CHECK_FAILS(cn_irfft(bad_last, -1, 1, CN_FFT_BACKWARD), CN_ERR_SHAPE, "end in a dim of 2");
    CHECK_FAILS(cn_irfft(z, -1, 2, CN_FFT_BACKWARD), CN_ERR_INVALID_ARG, "dim = 2");
    CHECK_FAILS(cn_irfft(z, 0, 1, CN_FFT_BACKWARD), CN_ERR_INVALID_ARG, "'n' is 0");
    CHECK_FAILS(cn_irfft(z, -7, 1, CN_FFT_BACKWARD), CN_ERR_INVALID_ARG, "'n' is -7");
    CHECK_FAILS(cn_irfft(one_bin, -1, 1, CN_FFT_BACKWARD), CN_ERR_INVALID_ARG, "pass a length");
    CHECK_FAILS(cn_irfft(z, (int64_t)1 << 40, 1, CN_FFT_BACKWARD), CN_ERR_INVALID_ARG, "2^31 - 1");
    CHECK_FAILS(cn_irfft(z, -1, 1, (cn_fft_norm)7), CN_ERR_INVALID_ARG, "'norm' 7");
    CHECK_FAILS(cn_irfft(zb, -1, 1, CN_FFT_BACKWARD), CN_ERR_DTYPE, "bf16");

    /* nothing leaked, x untouched, the runtime still usable */
    CHECK(cn_live_tensors() == live);
    th_check_values("x after the misuse", x, v, 12, 0);
    CHECK(cn_irfft(z, 6, 1, CN_FFT_BACKWARD) != NULL);
    cn_scope_end();
}

int main(void) {
    RUN(test_cosine_by_hand);
    RUN(test_odd_cut_padded_by_hand);
    RUN(test_irfft_ignores_dc_and_nyquist_imaginary);
    RUN(test_round_trips_and_strides);
    RUN(test_long_f32_against_f64);
    RUN(test_threads_share_plans);
    RUN(test_gradients_by_differences);
    RUN(test_misuse);
    return th_finish();
}
