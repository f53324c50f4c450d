/* Backward formulas of the real FFT (issue 16), through the public ops; formulas.c's table points
 * here. Each returns input i's gradient.
 *
 * Both transforms are linear, so each gradient is the adjoint map applied to g. With
 * theta = 2 pi j k / n, F = n / 2 + 1 bins, s rfft's scale and c irfft's (from norm):
 *
 *   rfft:  Re Y_k = s sum_j x_j cos theta,  Im Y_k = -s sum_j x_j sin theta   (j < n, k < F)
 *          dL/dx_j = s sum_{k<F} (gr_k cos theta - gi_k sin theta)
 *   irfft: x_j = c sum_{k<F} m_k (Re Z_k cos theta - Im Z_k sin theta)
 *          with m_k = 1 for bin 0 and (n even) the Nyquist bin n / 2, 2 for the others (each
 *          stands for itself and its conjugate), Im Z_0 and Im Z_{n/2} ignored;
 *          dL/dRe Z_k = c m_k sum_j g_j cos theta,  dL/dIm Z_k = -c m_k sum_j g_j sin theta
 *
 * So rfft's adjoint is irfft applied to g with each bin divided by m_k, and irfft's adjoint is
 * rfft of g with each bin multiplied by m_k. The scales match when the adjoint runs with the
 * dual norm: rfft "backward" (s = 1) needs irfft's unscaled sum, which is irfft "forward";
 * rfft "forward" (s = 1 / n) needs irfft "backward"; "ortho" is its own dual. At bin 0 and the
 * Nyquist bin sin theta = 0, so the imaginary parts there get no gradient (rfft writes exact
 * zeros) and irfft ignoring them loses nothing. Last, the sizes along dim: rfft cut or padded x
 * to n (its gradient is cut or zero-padded back to x's size: the cut entries did not count),
 * irfft cut or padded the spectrum to F bins (likewise back to the spectrum's size).
 * tests/test_fft.c checks these against finite differences. */
#include "autodiff/formula_helpers.h"
#include "core/alloc.h"

static cn_fft_norm dual(int64_t norm) {
    return norm == CN_FFT_BACKWARD  ? CN_FFT_FORWARD
           : norm == CN_FFT_FORWARD ? CN_FFT_BACKWARD
                                    : CN_FFT_ORTHO;
}

/* like ([.., F, .., 2], F = n / 2 + 1 bins along dim d) with each bin weighted: 1 at bin 0 and
 * the Nyquist bin, `other` elsewhere (the weights a [.., F, .., 1] tensor broadcast against it). */
static cn_tensor *weigh_bins(cn_tensor *like, int d, int64_t n, double other) {
    if (!like) return NULL;
    int64_t f = n / 2 + 1, shape[CN_MAX_DIMS];
    int nd = cn_ndim(like);
    for (int k = 0; k < nd; k++)
        shape[k] = k == d ? f : 1;
    double *w = cn__malloc("rfft backward", sizeof(double) * (size_t)f);
    if (!w) return NULL;
    for (int64_t k = 0; k < f; k++)
        w[k] = k == 0 || (n % 2 == 0 && k == n / 2) ? 1.0 : other;
    cn_tensor *t = cn_from_data(w, shape, nd, CN_F64, cn_device_of(like));
    cn__free(w);
    return t ? cn_mul(like, cn_cast(t, cn_dtype_of(like))) : NULL;
}

/* t with dim d cut or zero-padded at its end to `size` entries. */
static cn_tensor *resize_dim(cn_tensor *t, int d, int64_t size) {
    if (!t || cn_shape(t)[d] == size) return t;
    int nd = cn_ndim(t);
    int64_t pad[2 * CN_MAX_DIMS] = {0};
    pad[2 * (nd - 1 - d) + 1] = size - cn_shape(t)[d]; /* dim d's right side; negative crops */
    return cn_pad(t, pad, 2 * (nd - d), CN_PAD_CONSTANT, 0.0);
}

cn_tensor *ad_grad_rfft(ad_node *n, cn_tensor *g, int i) {
    int d = (int)n->ints[0];
    int64_t len = n->ints[1];
    cn_tensor *gx = cn_irfft(weigh_bins(g, d, len, 0.5), len, d, dual(n->ints[2]));
    return resize_dim(gx, d, n->in[i].shape[d]);
}

cn_tensor *ad_grad_irfft(ad_node *n, cn_tensor *g, int i) {
    int d = (int)n->ints[0];
    int64_t len = n->ints[1];
    cn_tensor *gz = weigh_bins(cn_rfft(g, len, d, dual(n->ints[2])), d, len, 2.0);
    return resize_dim(gz, d, n->in[i].shape[d]);
}
