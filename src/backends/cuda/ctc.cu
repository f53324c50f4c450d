/* CUDA ctc_loss and its backward: simple and correct, one thread per sample, in double, with the
 * CPU's recursions (cpu/ctc.c): alpha and beta [T, 2 S + 1] per sample in scratch memory (S the
 * padded targets' length, or all the concatenated targets' count, a bound of every sample's). */
#include <math.h>

#include "backends/cuda/common.cuh"
#include "core/backend_common.h"

typedef struct ctc_geom {
    int64_t T, N, C, blank, lmax;
    int64_t s0, s1, s2;         /* log_probs' strides */
    int64_t g_stride;           /* backward: g's */
    int64_t S;                  /* padded targets' row length */
    int concat, zero_inf, f32;
} ctc_geom;

__device__ double ctc_lp(const ctc_geom &G, const void *lp, int64_t t, int64_t n, int64_t c) {
    int64_t off = t * G.s0 + n * G.s1 + c * G.s2;
    return G.f32 ? (double)((const float *)lp)[off] : ((const double *)lp)[off];
}

__device__ double ctc_logaddexp(double a, double b) {
    if (a == -INFINITY) return b;
    if (b == -INFINITY) return a;
    double m = a > b ? a : b;
    return m + log1p(exp(-fabs(a - b)));
}

__device__ int64_t ctc_label(const ctc_geom &G, const int64_t *tg, int64_t first, int64_t s) {
    return s % 2 == 0 ? G.blank : tg[first + s / 2];
}

__device__ double ctc_alpha(const ctc_geom &G, const void *lp, const int64_t *tg, int64_t first,
                            int64_t n, int64_t Tn, int64_t Lp, double *al) {
    if (Tn == 0) return Lp == 1 ? 0.0 : -INFINITY;
    for (int64_t s = 0; s < Lp; s++) al[s] = -INFINITY;
    al[0] = ctc_lp(G, lp, 0, n, G.blank);
    if (Lp > 1) al[1] = ctc_lp(G, lp, 0, n, ctc_label(G, tg, first, 1));
    for (int64_t t = 1; t < Tn; t++) {
        const double *prev = al + (t - 1) * Lp;
        double *cur = al + t * Lp;
        for (int64_t s = 0; s < Lp; s++) {
            int64_t l = ctc_label(G, tg, first, s);
            double x = prev[s];
            if (s >= 1) x = ctc_logaddexp(x, prev[s - 1]);
            if (s >= 2 && l != G.blank && l != ctc_label(G, tg, first, s - 2))
                x = ctc_logaddexp(x, prev[s - 2]);
            cur[s] = x == -INFINITY ? -INFINITY : x + ctc_lp(G, lp, t, n, l);
        }
    }
    const double *last = al + (Tn - 1) * Lp;
    return Lp > 1 ? ctc_logaddexp(last[Lp - 1], last[Lp - 2]) : last[0];
}

__device__ int64_t ctc_first(const ctc_geom &G, const int64_t *tl, int64_t n) {
    if (!G.concat) return n * G.S;
    int64_t first = 0;
    for (int64_t m = 0; m < n; m++) first += tl[m];
    return first;
}

__global__ void ctc_fwd_kernel(const __grid_constant__ ctc_geom G, const void *lp,
                               const int64_t *tg, const int64_t *il, const int64_t *tl,
                               double *scratch, void *out) {
    CU_GRID_LOOP(n, G.N) {
        double *al = scratch + n * G.T * G.lmax;
        double ll = ctc_alpha(G, lp, tg, ctc_first(G, tl, n), n, il[n], 2 * tl[n] + 1, al);
        double loss = ll == -INFINITY ? (G.zero_inf ? 0.0 : INFINITY) : -ll;
        if (G.f32)
            ((float *)out)[n] = (float)loss;
        else
            ((double *)out)[n] = loss;
    }
}

__device__ void ctc_store(const ctc_geom &G, void *out, int64_t i, double x) {
    if (G.f32)
        ((float *)out)[i] = (float)x;
    else
        ((double *)out)[i] = x;
}

__global__ void ctc_bwd_kernel(const __grid_constant__ ctc_geom G, const void *g, const void *lp,
                               const int64_t *tg, const int64_t *il, const int64_t *tl,
                               double *scratch, void *out) {
    CU_GRID_LOOP(n, G.N) {
        double *al = scratch + n * 2 * G.T * G.lmax, *be = al + G.T * G.lmax;
        int64_t Tn = il[n], Lp = 2 * tl[n] + 1, first = ctc_first(G, tl, n);
        double ll = ctc_alpha(G, lp, tg, first, n, Tn, Lp, al);
        double gn = G.f32 ? (double)((const float *)g)[n * G.g_stride]
                          : ((const double *)g)[n * G.g_stride];
        for (int64_t t = 0; t < G.T; t++) {
            int64_t row = (t * G.N + n) * G.C;
            if (t >= Tn || ll == -INFINITY) {
                double fill = t < Tn && !G.zero_inf ? NAN : 0.0;
                for (int64_t c = 0; c < G.C; c++) ctc_store(G, out, row + c, fill);
            }
        }
        if (ll == -INFINITY || Tn == 0) continue;
        /* beta, including lp_t */
        double *last = be + (Tn - 1) * Lp;
        for (int64_t s = 0; s < Lp; s++) last[s] = -INFINITY;
        last[Lp - 1] = ctc_lp(G, lp, Tn - 1, n, ctc_label(G, tg, first, Lp - 1));
        if (Lp > 1) last[Lp - 2] = ctc_lp(G, lp, Tn - 1, n, ctc_label(G, tg, first, Lp - 2));
        for (int64_t t = Tn - 2; t >= 0; t--) {
            const double *next = be + (t + 1) * Lp;
            double *cur = be + t * Lp;
            for (int64_t s = 0; s < Lp; s++) {
                int64_t l = ctc_label(G, tg, first, s);
                double x = next[s];
                if (s + 1 < Lp) x = ctc_logaddexp(x, next[s + 1]);
                if (s + 2 < Lp && l != G.blank && ctc_label(G, tg, first, s + 2) != l)
                    x = ctc_logaddexp(x, next[s + 2]);
                cur[s] = x == -INFINITY ? -INFINITY : x + ctc_lp(G, lp, t, n, l);
            }
        }
        for (int64_t t = 0; t < Tn; t++) {
            int64_t row = (t * G.N + n) * G.C;
            for (int64_t c = 0; c < G.C; c++) {
                double lcab = -INFINITY;
                for (int64_t s = 0; s < Lp; s++)
                    if (ctc_label(G, tg, first, s) == c)
                        lcab = ctc_logaddexp(lcab, al[t * Lp + s] + be[t * Lp + s]);
                ctc_store(G, out, row + c,
                          lcab == -INFINITY ? 0.0 : -exp(lcab - ll - ctc_lp(G, lp, t, n, c)) * gn);
            }
        }
    }
}

static cn_status ctc_run(const cn_kernel_args *a, int backward) {
    const char *op = cn_op_name(a->op);
    int at = backward ? 1 : 0;
    const cn_view *lp = &a->in[at], *tg = &a->in[at + 1];
    ctc_geom G;
    memset(&G, 0, sizeof G);
    G.T = lp->shape[0];
    G.N = lp->shape[1];
    G.C = lp->shape[2];
    G.s0 = lp->strides[0];
    G.s1 = lp->strides[1];
    G.s2 = lp->strides[2];
    G.blank = a->ints[0];
    G.concat = a->ints[1] != 0;
    G.zero_inf = a->ints[2] != 0;
    G.f32 = lp->dtype == CN_F32;
    G.S = G.concat ? 0 : tg->shape[1];
    G.g_stride = backward ? a->in[0].strides[0] : 0;
    int64_t bound = G.concat ? tg->shape[0] : G.S, per, total;
    G.lmax = 2 * bound + 1;
    if (__builtin_mul_overflow(G.T, G.lmax, &per) ||
        __builtin_mul_overflow(per, (int64_t)(backward ? 2 : 1), &per) ||
        __builtin_mul_overflow(per, G.N, &total) ||
        total > (int64_t)(SIZE_MAX / sizeof(double) / 2))
        return cn_set_error(CN_ERR_OVERFLOW, op, "T x (2 S + 1) x N is too large for the "
                            "alpha-beta tables");
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    void *scratch = NULL;
    cn_status s = cu_scratch(d, op, sizeof(double) * (size_t)(total > 0 ? total : 1), &scratch);
    if (s != CN_OK) return s;
    const int64_t *tgp = (const int64_t *)tg->data, *il = (const int64_t *)a->in[at + 2].data;
    const int64_t *tl = (const int64_t *)a->in[at + 3].data;
    if (backward)
        ctc_bwd_kernel<<<cu_blocks(G.N, 64), 64, 0, d->stream>>>(
            G, a->in[0].data, lp->data, tgp, il, tl, (double *)scratch, a->out[0].data);
    else
        ctc_fwd_kernel<<<cu_blocks(G.N, 64), 64, 0, d->stream>>>(
            G, lp->data, tgp, il, tl, (double *)scratch, a->out[0].data);
    s = cu_check_launch(op, backward ? "ctc_bwd_kernel" : "ctc_fwd_kernel");
    cu_scratch_free(d, scratch);
    return s;
}

extern "C" cn_status cuda_ctc_loss(const cn_kernel_args *a) { return ctc_run(a, 0); }
extern "C" cn_status cuda_ctc_loss_backward(const cn_kernel_args *a) { return ctc_run(a, 1); }
