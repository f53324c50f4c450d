/* CPU ctc_loss and its backward (Graves et al. 2006; PyTorch's LossCTC.cpp), in log space and in
 * double whatever the dtype.
 *
 * Sample n: its targets l (length L = target_lengths[n]) extended with blanks, l' = (blank, l0,
 * blank, l1, ..., blank), length L' = 2L + 1; its first Tn = input_lengths[n] steps of
 * log_probs lp [T, N, C].
 *     alpha_0(0) = lp_0(blank), alpha_0(1) = lp_0(l'_1)
 *     alpha_t(s) = lp_t(l'_s) + logsumexp(alpha_{t-1}(s), alpha_{t-1}(s-1), alpha_{t-1}(s-2))
 * the last term only where l'_s is not blank and differs from l'_{s-2}; log p = logsumexp of
 * alpha_{Tn-1} at L'-1 and L'-2; the loss is -log p (+inf when p = 0). beta is the same recursion
 * from the end (including lp_t, as PyTorch's), and
 *     d(-log p)/d lp_t(c) = -exp(logsumexp_{s: l'_s = c}(alpha_t(s) + beta_t(s)) + loss - lp_t(c))
 * (zero past Tn). The samples are independent: one item each on the pool, with alpha and beta
 * [Tn, L'] in the chunk's scratch. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "core/alloc.h"
#include "core/backend_common.h"

typedef struct ctc_job {
    const cn_kernel_args *a;
    const cn_view *lp, *g;   /* g: the backward's only */
    int64_t T, N, C, blank;
    int concat, zero_inf;
    const int64_t *tg, *il, *tl;
    int64_t *first;          /* each sample's first target in tg */
    int64_t lmax;            /* the longest extended target, 2 L + 1 */
    double *scratch;         /* per chunk: alpha, beta [T, lmax], lcab [C] */
    size_t chunk_elems;
} ctc_job;

static double lp_at(const ctc_job *J, int64_t t, int64_t n, int64_t c) {
    const cn_view *v = J->lp;
    int64_t off = t * v->strides[0] + n * v->strides[1] + c * v->strides[2];
    return v->dtype == CN_F32 ? (double)((const float *)v->data)[off]
                              : ((const double *)v->data)[off];
}

static double logaddexp(double a, double b) {
    if (a == -INFINITY) return b;
    if (b == -INFINITY) return a;
    double m = a > b ? a : b;
    return m + log1p(exp(-fabs(a - b)));
}

/* l'_s of sample n */
static int64_t label(const ctc_job *J, int64_t n, int64_t s) {
    return s % 2 == 0 ? J->blank : J->tg[J->first[n] + s / 2];
}

/* alpha [Tn, L'] of sample n into al; returns log p */
static double alpha(const ctc_job *J, int64_t n, double *al) {
    int64_t Tn = J->il[n], Lp = 2 * J->tl[n] + 1;
    if (Tn == 0) return Lp == 1 ? 0.0 : -INFINITY;
    for (int64_t s = 0; s < Lp; s++) al[s] = -INFINITY;
    al[0] = lp_at(J, 0, n, J->blank);
    if (Lp > 1) al[1] = lp_at(J, 0, n, label(J, n, 1));
    for (int64_t t = 1; t < Tn; t++) {
        const double *prev = al + (t - 1) * Lp;
        double *cur = al + t * Lp;
        for (int64_t s = 0; s < Lp; s++) {
            int64_t l = label(J, n, s);
            double x = prev[s];
            if (s >= 1) x = logaddexp(x, prev[s - 1]);
            if (s >= 2 && l != J->blank && l != label(J, n, s - 2)) x = logaddexp(x, prev[s - 2]);
            cur[s] = x == -INFINITY ? -INFINITY : x + lp_at(J, t, n, l);
        }
    }
    const double *last = al + (Tn - 1) * Lp;
    return Lp > 1 ? logaddexp(last[Lp - 1], last[Lp - 2]) : last[0];
}

/* beta [Tn, L'] of sample n into be (including lp_t) */
static void beta(const ctc_job *J, int64_t n, double *be) {
    int64_t Tn = J->il[n], Lp = 2 * J->tl[n] + 1;
    double *last = be + (Tn - 1) * Lp;
    for (int64_t s = 0; s < Lp; s++) last[s] = -INFINITY;
    last[Lp - 1] = lp_at(J, Tn - 1, n, label(J, n, Lp - 1));
    if (Lp > 1) last[Lp - 2] = lp_at(J, Tn - 1, n, label(J, n, Lp - 2));
    for (int64_t t = Tn - 2; t >= 0; t--) {
        const double *next = be + (t + 1) * Lp;
        double *cur = be + t * Lp;
        for (int64_t s = 0; s < Lp; s++) {
            int64_t l = label(J, n, s);
            double x = next[s];
            if (s + 1 < Lp) x = logaddexp(x, next[s + 1]);
            if (s + 2 < Lp && l != J->blank && label(J, n, s + 2) != l)
                x = logaddexp(x, next[s + 2]);
            cur[s] = x == -INFINITY ? -INFINITY : x + lp_at(J, t, n, l);
        }
    }
}

static void store(const cn_view *v, int64_t i, double x) {
    if (v->dtype == CN_F32)
        ((float *)v->data)[i] = (float)x;
    else
        ((double *)v->data)[i] = x;
}

static void forward_items(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    const ctc_job *J = ctx;
    double *al = J->scratch + (size_t)chunk * J->chunk_elems;
    for (int64_t n = begin; n < end; n++) {
        double ll = alpha(J, n, al);
        double loss = ll == -INFINITY ? (J->zero_inf ? 0.0 : INFINITY) : -ll;
        store(&J->a->out[0], n, loss);
    }
}

static void backward_items(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    const ctc_job *J = ctx;
    const cn_view *out = &J->a->out[0];
    int64_t C = J->C, N = J->N;
    double *al = J->scratch + (size_t)chunk * J->chunk_elems;
    double *be = al + J->T * J->lmax, *lcab = be + J->T * J->lmax;
    for (int64_t n = begin; n < end; n++) {
        int64_t Tn = J->il[n], Lp = 2 * J->tl[n] + 1;
        double ll = alpha(J, n, al);
        const cn_view *gv = J->g;
        double g = gv->dtype == CN_F32 ? (double)((const float *)gv->data)[n * gv->strides[0]]
                                       : ((const double *)gv->data)[n * gv->strides[0]];
        for (int64_t t = 0; t < J->T; t++) {
            int64_t row = (t * N + n) * C;
            if (t >= Tn || ll == -INFINITY) {
                /* past the sample's steps: 0; no alignment: NaN (0 with zero_infinity) */
                double fill = t < Tn && !J->zero_inf ? NAN : 0.0;
                for (int64_t c = 0; c < C; c++) store(out, row + c, fill);
            }
        }
        if (ll == -INFINITY || Tn == 0) continue;
        beta(J, n, be);
        for (int64_t t = 0; t < Tn; t++) {
            for (int64_t c = 0; c < C; c++) lcab[c] = -INFINITY;
            for (int64_t s = 0; s < Lp; s++) {
                int64_t l = label(J, n, s);
                lcab[l] = logaddexp(lcab[l], al[t * Lp + s] + be[t * Lp + s]);
            }
            int64_t row = (t * N + n) * C;
            for (int64_t c = 0; c < C; c++)
                store(out, row + c,
                      lcab[c] == -INFINITY ? 0.0 : -exp(lcab[c] - ll - lp_at(J, t, n, c)) * g);
        }
    }
}

/* ctc_loss (in = log_probs, targets, il, tl) and its backward (in = g, then those) */
static cn_status ctc_run(const cn_kernel_args *a, int backward) {
    const char *op = cn_op_name(a->op);
    int at = backward ? 1 : 0;
    ctc_job J;
    memset(&J, 0, sizeof J);
    J.a = a;
    J.lp = &a->in[at];
    J.g = backward ? &a->in[0] : NULL;
    J.T = J.lp->shape[0];
    J.N = J.lp->shape[1];
    J.C = J.lp->shape[2];
    J.blank = a->ints[0];
    J.concat = a->ints[1] != 0;
    J.zero_inf = a->ints[2] != 0;
    J.tg = a->in[at + 1].data;
    J.il = a->in[at + 2].data;
    J.tl = a->in[at + 3].data;
    int64_t S = J.concat ? 0 : a->in[at + 1].shape[1];
    J.first = cn__malloc(op, sizeof(int64_t) * (size_t)(J.N > 0 ? J.N : 1));
    if (!J.first) return CN_ERR_OUT_OF_MEMORY;
    int64_t sum = 0, lmax = 1;
    for (int64_t n = 0; n < J.N; n++) {
        J.first[n] = J.concat ? sum : n * S;
        sum += J.tl[n];
        if (2 * J.tl[n] + 1 > lmax) lmax = 2 * J.tl[n] + 1;
    }
    J.lmax = lmax;
    int64_t elems, per;
    if (__builtin_mul_overflow(J.T, lmax, &per) || __builtin_mul_overflow(per, 2, &elems) ||
        __builtin_add_overflow(elems, J.C, &elems) ||
        elems > (int64_t)(SIZE_MAX / sizeof(double) / 256)) {
        cn__free(J.first);
        return cn_set_error(CN_ERR_OVERFLOW, op, "T x (2 S + 1) = %lld x %lld is too large for "
                            "the alpha-beta tables", (long long)J.T, (long long)lmax);
    }
    J.chunk_elems = ((size_t)elems + 7) / 8 * 8; /* whole cache lines per chunk */
    int64_t chunks = cpu_chunks(J.N * per, CPU_PARALLEL_GRAIN);
    if (chunks > J.N) chunks = J.N;
    if (chunks < 1) chunks = 1;
    J.scratch = cn__malloc(op, sizeof(double) * J.chunk_elems * (size_t)chunks);
    if (!J.scratch) {
        cn__free(J.first);
        return CN_ERR_OUT_OF_MEMORY;
    }
    cpu_parallel(J.N, chunks, backward ? backward_items : forward_items, &J);
    cn__free(J.scratch);
    cn__free(J.first);
    return CN_OK;
}

cn_status cpu_ctc_loss(const cn_kernel_args *a) { return ctc_run(a, 0); }
cn_status cpu_ctc_loss_backward(const cn_kernel_args *a) { return ctc_run(a, 1); }
