/* Front-ends of the fused attention (cn_scaled_dot_product_attention) and of its backward kernel:
 * the shape checks, the default scale, the outputs, and the node, whose inputs are (q, k, v,
 * lse[, mask]): lse, each query row's log-sum-exp, is what the backward kernel needs besides
 * q, k, v and the output to recompute the probabilities block by block. */
#include <math.h>
#include <string.h>

#include "cinder/ops.h"
#include "core/alloc.h"
#include "core/error_internal.h"
#include "dispatch/backward_ops.h"
#include "dispatch/router.h"

static const char *const SDPA = "scaled_dot_product_attention";

/* Checks q, k, v (and the mask) against each other; on success fills the batch dims (nb of
 * them) and Lq, Lk, D, Dv. */
static cn_status check_shapes(cn_tensor *q, cn_tensor *k, cn_tensor *v, cn_tensor *mask,
                              int *nb) {
    char a[128], b[128];
    cn_tensor *t[3] = {q, k, v};
    const char *names[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++)
        if (t[i]->ndim < 2)
            return cn_set_error(CN_ERR_SHAPE, SDPA, "'%s' is %s; it must have at least 2 dims "
                                "[B.., L, D] (add one with cn_unsqueeze(%s, 0))", names[i],
                                cn_tensor_str(t[i], a, sizeof a), names[i]);
    int n = q->ndim - 2;
    for (int i = 1; i < 3; i++) {
        int same = t[i]->ndim == q->ndim;
        for (int d = 0; same && d < n; d++) same = t[i]->shape[d] == q->shape[d];
        if (!same)
            return cn_set_error(CN_ERR_SHAPE, SDPA, "'%s' %s and 'q' %s have different batch "
                                "dims; they must be equal (expand them with cn_expand)",
                                names[i], cn_tensor_str(t[i], a, sizeof a),
                                cn_tensor_str(q, b, sizeof b));
    }
    if (k->shape[n + 1] != q->shape[n + 1])
        return cn_set_error(CN_ERR_SHAPE, SDPA, "'k' %s and 'q' %s have different feature sizes "
                            "D (%lld vs %lld); q is [B.., Lq, D] and k [B.., Lk, D]",
                            cn_tensor_str(k, a, sizeof a), cn_tensor_str(q, b, sizeof b),
                            (long long)k->shape[n + 1], (long long)q->shape[n + 1]);
    if (v->shape[n] != k->shape[n])
        return cn_set_error(CN_ERR_SHAPE, SDPA, "'v' %s and 'k' %s have different lengths Lk "
                            "(%lld vs %lld); k is [B.., Lk, D] and v [B.., Lk, Dv]",
                            cn_tensor_str(v, a, sizeof a), cn_tensor_str(k, b, sizeof b),
                            (long long)v->shape[n], (long long)k->shape[n]);
    if (mask) {
        int ok = mask->ndim <= n + 2;
        for (int i = 0; ok && i < mask->ndim; i++) {
            int64_t want = i == mask->ndim - 1   ? k->shape[n]
                           : i == mask->ndim - 2 ? q->shape[n]
                                                 : q->shape[n + 2 - mask->ndim + i];
            ok = mask->shape[i] == want || mask->shape[i] == 1;
        }
        if (!ok)
            return cn_set_error(CN_ERR_SHAPE, SDPA, "'attn_mask' %s does not broadcast to "
                                "[B.., Lq, Lk] = [.., %lld, %lld] of 'q' %s; give it sizes equal "
                                "to those or 1", cn_tensor_str(mask, a, sizeof a),
                                (long long)q->shape[n], (long long)k->shape[n],
                                cn_tensor_str(q, b, sizeof b));
    }
    *nb = n;
    return CN_OK;
}

/* A new tensor of `shape` (ndim dims, as like's) laid out in memory as `like` is: dense, its dims
 * in the order of like's strides (a permuted view of a dense allocation). The CPU's attention
 * kernels write o, dq, dk and dv through their views' strides, so a q that is a transposed view
 * ([B, T, nh, hs] seen as [B, nh, T, hs], as a transformer's heads are) gives an o and a dq that
 * turn back into [B, T, C] as views instead of copies. Other backends get dense outputs. */
static cn_tensor *alloc_like(const char *op, const int64_t *shape, int ndim, cn_tensor *like,
                             cn_device dev) {
    int order[CN_MAX_DIMS], identity = 1;
    for (int d = 0; d < ndim; d++) { /* dims by decreasing stride, ties in order (stable) */
        int k = d;
        for (; k > 0 && like->strides[order[k - 1]] < like->strides[d]; k--)
            order[k] = order[k - 1];
        order[k] = d;
    }
    for (int d = 0; d < ndim; d++) identity &= order[d] == d;
    if (dev.backend != CN_BACKEND_CPU || identity || like->ndim != ndim)
        return cn__tensor_alloc(op, shape, ndim, like->dtype, dev);
    int64_t dense[CN_MAX_DIMS];
    int perm[CN_MAX_DIMS];
    for (int d = 0; d < ndim; d++) {
        dense[d] = shape[order[d]];
        perm[order[d]] = d; /* view dim order[d] is dense dim d */
    }
    cn_tensor *base = cn__tensor_alloc(op, dense, ndim, like->dtype, dev);
    cn_tensor *view = base ? cn_permute(base, perm) : NULL;
    cn_release(base);
    return view;
}

/* The forward: o, and *lse_out (a new concrete tensor [B.., Lq]) when lse_out is not NULL. */
static cn_tensor *sdpa(cn_tensor *q, cn_tensor *k, cn_tensor *v, cn_tensor *mask, int causal,
                       double scale, cn_tensor **lse_out) {
    cn_tensor *in[4] = {q, k, v, mask};
    const char *names[4] = {"q", "k", "v", "attn_mask"};
    int n_in = mask ? 4 : 3;
    cn_device dev;
    const cn_backend *be = cn__route(SDPA, in, names, n_in, &dev);
    if (!be) return NULL;
    for (int i = 0; i < n_in; i++)
        if (cn__check_kind(SDPA, names[i], in[i], CN_KINDS_FLOAT) != CN_OK ||
            cn__check_same_dtype(SDPA, "q", q, names[i], in[i]) != CN_OK)
            return NULL;
    int nb;
    if (check_shapes(q, k, v, mask, &nb) != CN_OK) return NULL;
    if (!isfinite(scale)) {
        cn_set_error(CN_ERR_INVALID_ARG, SDPA, "scale is %g; it must be finite (0 for the "
                     "default 1 / sqrt(D))", scale);
        return NULL;
    }
    int64_t D = q->shape[nb + 1];
    if (scale == 0) scale = D > 0 ? 1.0 / sqrt((double)D) : 1.0;
    int64_t oshape[CN_MAX_DIMS], sshape[CN_MAX_DIMS];
    memcpy(oshape, q->shape, sizeof(int64_t) * (size_t)q->ndim);
    oshape[nb + 1] = v->shape[nb + 1];
    memcpy(sshape, q->shape, sizeof(int64_t) * (size_t)q->ndim);
    sshape[nb + 1] = k->shape[nb]; /* the scores' [B.., Lq, Lk], for the mask's view */
    cn_device concrete = dev;
    concrete.autodiff = 0;
    concrete.checkpoint = 0;
    cn_tensor *outs[2] = {alloc_like(SDPA, oshape, nb + 2, q, dev),
                          cn__tensor_alloc(SDPA, q->shape, nb + 1, q->dtype, concrete)};
    if (!outs[0] || !outs[1]) goto fail;
    cn_view views[4];
    for (int i = 0; i < 3; i++) cn__tensor_as_view(in[i], &views[i]);
    if (mask) cn__broadcast_view(mask, sshape, nb + 2, &views[3]);
    int64_t ints[1] = {causal != 0};
    double reals[1] = {scale};
    if (cn__launch(be, dev, CN_OP_SDPA, views, n_in, outs, 2, ints, 1, reals, 1) != CN_OK)
        goto fail;
    cn_tensor *rec[5] = {q, k, v, outs[1], mask};
    cn_tensor *out = cn__record(CN_OP_SDPA, outs[0], rec, mask ? 5 : 4, ints, 1, reals, 1);
    if (lse_out && out)
        *lse_out = outs[1];
    else
        cn_release(outs[1]);
    return out;
fail:
    cn_release(outs[0]);
    cn_release(outs[1]);
    return NULL;
}

cn_tensor *cn_scaled_dot_product_attention(cn_tensor *q, cn_tensor *k, cn_tensor *v,
                                           cn_tensor *attn_mask, int is_causal, double scale) {
    return sdpa(q, k, v, attn_mask, is_causal, scale, NULL);
}

cn_tensor *cn__sdpa_forward(cn_tensor *q, cn_tensor *k, cn_tensor *v, cn_tensor *mask,
                            int causal, double scale, cn_tensor **lse) {
    *lse = NULL;
    return sdpa(q, k, v, mask, causal, scale, lse);
}

cn_status cn__sdpa_backward(cn_tensor *g, cn_tensor *q, cn_tensor *k, cn_tensor *v, cn_tensor *o,
                            cn_tensor *lse, cn_tensor *mask, int causal, double scale,
                            int want_dmask, cn_tensor **grads) {
    const char *op = cn_op_name(CN_OP_SDPA_BACKWARD);
    for (int i = 0; i < 4; i++) grads[i] = NULL;
    cn_tensor *in[7] = {g, q, k, v, o, lse, mask};
    const char *names[7] = {"g", "q", "k", "v", "o", "lse", "attn_mask"};
    int n_in = mask ? 7 : 6;
    cn_device dev;
    const cn_backend *be = cn__route_floats(op, in, names, n_in, 1, &dev);
    if (!be) return cn_last_status();
    int nb;
    if (check_shapes(q, k, v, mask, &nb) != CN_OK) return cn_last_status();
    int ok = g->ndim == nb + 2 && o->ndim == nb + 2 && lse->ndim == nb + 1;
    for (int d = 0; ok && d < nb + 2; d++) {
        int64_t want = d == nb + 1 ? v->shape[nb + 1] : q->shape[d];
        ok = g->shape[d] == want && o->shape[d] == want && (d > nb || lse->shape[d] == want);
    }
    if (!ok) return cn_set_error(CN_ERR_SHAPE, op, "g, o and lse must have the forward's shapes");
    int64_t sshape[CN_MAX_DIMS];
    memcpy(sshape, q->shape, sizeof(int64_t) * (size_t)q->ndim);
    sshape[nb + 1] = k->shape[nb];
    cn_tensor *outs[4] = {alloc_like(op, q->shape, q->ndim, q, dev),
                          alloc_like(op, k->shape, k->ndim, k, dev),
                          alloc_like(op, v->shape, v->ndim, v, dev),
                          want_dmask ? cn__tensor_alloc(op, sshape, nb + 2, q->dtype, dev)
                                     : NULL};
    int n_out = want_dmask ? 4 : 3;
    cn_status s = CN_OK;
    for (int i = 0; i < n_out; i++)
        if (!outs[i]) s = cn_last_status();
    if (s == CN_OK) {
        cn_view views[7];
        for (int i = 0; i < 6; i++) cn__tensor_as_view(in[i], &views[i]);
        if (mask) cn__broadcast_view(mask, sshape, nb + 2, &views[6]);
        int64_t ints[1] = {causal != 0};
        double reals[1] = {scale};
        s = cn__launch(be, dev, CN_OP_SDPA_BACKWARD, views, n_in, outs, n_out, ints, 1, reals,
                       1);
    }
    for (int i = 0; i < 4; i++) {
        if (s == CN_OK)
            grads[i] = outs[i];
        else
            cn_release(outs[i]);
    }
    return s;
}

/* ---- ctc_loss -------------------------------------------------------------------------------- */

static const char *const CTC = "ctc_loss";

/* The n entries of int tensor t as i64 on the host (cn__free it), or NULL with the error set. */
static int64_t *host_i64(cn_tensor *t, int64_t n) {
    int64_t *h = cn__malloc(CTC, sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    cn_tensor *c = h ? cn_cast(t, CN_I64) : NULL;
    if (c && cn_read(c, h, sizeof(int64_t) * (size_t)n) == CN_OK) {
        cn_release(c);
        return h;
    }
    cn_release(c);
    cn__free(h);
    return NULL;
}

/* Checks the lengths and the targets that they select (host copies il, tl of N entries, tg). */
static cn_status check_lengths(const int64_t *il, const int64_t *tl, const int64_t *tg, int64_t N,
                               int64_t T, int64_t S, int64_t C, int64_t blank, int concat,
                               int64_t tg_len) {
    int64_t at = 0;
    for (int64_t n = 0; n < N; n++) {
        if (il[n] < 0 || il[n] > T)
            return cn_set_error(CN_ERR_INVALID_ARG, CTC, "input_lengths[%lld] = %lld is outside "
                                "[0, T = %lld]; each must be at most log_probs' first dim",
                                (long long)n, (long long)il[n], (long long)T);
        if (tl[n] < 0 || (!concat && tl[n] > S))
            return cn_set_error(CN_ERR_INVALID_ARG, CTC, "target_lengths[%lld] = %lld is outside "
                                "[0, S = %lld] (the padded targets' second dim)", (long long)n,
                                (long long)tl[n], (long long)S);
        if (concat && (__builtin_add_overflow(at, tl[n], &at) || at > tg_len))
            return cn_set_error(CN_ERR_SHAPE, CTC, "the target_lengths add up past the %lld "
                                "concatenated targets; they must sum to its length",
                                (long long)tg_len);
        const int64_t *row = concat ? tg + at - tl[n] : tg + n * S;
        for (int64_t s = 0; s < tl[n]; s++)
            if (row[s] < 0 || row[s] >= C || row[s] == blank)
                return cn_set_error(CN_ERR_INDEX, CTC, "target %lld of sample %lld is %lld; "
                                    "targets must lie in [0, C = %lld) and differ from blank "
                                    "(%lld)", (long long)s, (long long)n, (long long)row[s],
                                    (long long)C, (long long)blank);
    }
    if (concat && at != tg_len)
        return cn_set_error(CN_ERR_SHAPE, CTC, "the target_lengths sum to %lld but the "
                            "concatenated targets have %lld entries; they must be equal",
                            (long long)at, (long long)tg_len);
    return CN_OK;
}

/* Each sample's loss [N] (the recorded op) from the batched form. */
static cn_tensor *ctc_batched(cn_tensor *lp, cn_tensor *targets, cn_tensor *il, cn_tensor *tl,
                              int64_t blank, int zero_inf, cn_device dev, const cn_backend *be,
                              const int64_t **tl_host) {
    char a[128], b[128];
    int64_t T = lp->shape[0], N = lp->shape[1], C = lp->shape[2];
    cn_tensor *lens[2] = {il, tl};
    const char *lnames[2] = {"input_lengths", "target_lengths"};
    for (int i = 0; i < 2; i++)
        if (lens[i]->ndim != 1 || lens[i]->shape[0] != N) {
            cn_set_error(CN_ERR_SHAPE, CTC, "'%s' is %s; it must be [N] = [%lld], one length "
                         "per sample of 'log_probs' %s", lnames[i],
                         cn_tensor_str(lens[i], a, sizeof a), (long long)N,
                         cn_tensor_str(lp, b, sizeof b));
            return NULL;
        }
    int concat = targets->ndim == 1;
    if (!concat && (targets->ndim != 2 || targets->shape[0] != N)) {
        cn_set_error(CN_ERR_SHAPE, CTC, "'targets' is %s; it must be [N, S] = [%lld, S] (padded) "
                     "or 1-D (concatenated)", cn_tensor_str(targets, a, sizeof a), (long long)N);
        return NULL;
    }
    if (blank < 0 || blank >= C) {
        cn_set_error(CN_ERR_INVALID_ARG, CTC, "blank = %lld is outside [0, C = %lld) of "
                     "'log_probs' %s", (long long)blank, (long long)C,
                     cn_tensor_str(lp, a, sizeof a));
        return NULL;
    }
    int64_t S = concat ? 0 : targets->shape[1], tg_len = cn_numel(targets);
    int64_t *il_h = host_i64(il, N), *tl_h = il_h ? host_i64(tl, N) : NULL;
    int64_t *tg_h = tl_h ? host_i64(targets, tg_len) : NULL;
    cn_status s = tg_h ? check_lengths(il_h, tl_h, tg_h, N, T, S, C, blank, concat, tg_len)
                       : cn_last_status();
    cn__free(il_h);
    cn__free(tg_h);
    if (s != CN_OK) {
        cn__free(tl_h);
        return NULL;
    }
    *tl_host = tl_h;
    /* the kernel's inputs: i64, dense */
    cn_tensor *ints_in[3] = {targets, il, tl}, *dense[3] = {NULL, NULL, NULL}, *out = NULL;
    for (int i = 0; i < 3; i++) {
        cn_tensor *c = cn_cast(ints_in[i], CN_I64);
        dense[i] = c ? cn_contiguous(c) : NULL;
        cn_release(c);
        if (!dense[i]) goto done;
    }
    int64_t shape[1] = {N};
    out = cn__tensor_alloc(CTC, shape, 1, lp->dtype, dev);
    if (!out) goto done;
    cn_view views[4];
    cn__tensor_as_view(lp, &views[0]);
    for (int i = 0; i < 3; i++) cn__tensor_as_view(dense[i], &views[i + 1]);
    int64_t ints[3] = {blank, concat, zero_inf != 0};
    if (cn__launch(be, dev, CN_OP_CTC_LOSS, views, 4, &out, 1, ints, 3, NULL, 0) != CN_OK) {
        cn_release(out);
        out = NULL;
        goto done;
    }
    cn_tensor *rec[4] = {lp, dense[0], dense[1], dense[2]};
    out = cn__record(CN_OP_CTC_LOSS, out, rec, 4, ints, 3, NULL, 0);
done:
    for (int i = 0; i < 3; i++) cn_release(dense[i]);
    if (!out) {
        cn__free(tl_h);
        *tl_host = NULL;
    }
    return out;
}

cn_tensor *cn_ctc_loss(cn_tensor *log_probs, cn_tensor *targets, cn_tensor *input_lengths,
                       cn_tensor *target_lengths, int64_t blank, cn_reduction reduction,
                       int zero_infinity) {
    char a[128];
    cn_tensor *in[4] = {log_probs, targets, input_lengths, target_lengths};
    const char *names[4] = {"log_probs", "targets", "input_lengths", "target_lengths"};
    cn_device dev;
    const cn_backend *be = cn__route(CTC, in, names, 4, &dev);
    if (!be) return NULL;
    for (int i = 0; i < 4; i++)
        if (cn__check_kind(CTC, names[i], in[i], i ? CN_KINDS_INT : CN_KINDS_FLOAT) != CN_OK)
            return NULL;
    if (reduction != CN_REDUCTION_NONE && reduction != CN_REDUCTION_MEAN &&
        reduction != CN_REDUCTION_SUM) {
        cn_set_error(CN_ERR_INVALID_ARG, CTC, "reduction %d is unknown; use CN_REDUCTION_NONE, "
                     "CN_REDUCTION_MEAN or CN_REDUCTION_SUM", (int)reduction);
        return NULL;
    }
    if (log_probs->ndim != 2 && log_probs->ndim != 3) {
        cn_set_error(CN_ERR_SHAPE, CTC, "'log_probs' is %s; it must be [T, N, C] (or [T, C] for "
                     "one sample)", cn_tensor_str(log_probs, a, sizeof a));
        return NULL;
    }
    int unbatched = log_probs->ndim == 2;
    cn_tensor *lp = log_probs, *tg = targets, *il = input_lengths, *tl = target_lengths;
    if (unbatched) {
        if (targets->ndim != 1 || cn_numel(il) != 1 || cn_numel(tl) != 1 || il->ndim > 1 ||
            tl->ndim > 1) {
            cn_set_error(CN_ERR_SHAPE, CTC, "unbatched 'log_probs' [T, C] takes 'targets' [S] "
                         "and one input and target length each (0-d or [1])");
            return NULL;
        }
        const int64_t one[1] = {1};
        lp = cn_unsqueeze(log_probs, 1);
        tg = cn_unsqueeze(targets, 0);
        il = cn_reshape(input_lengths, one, 1);
        tl = cn_reshape(target_lengths, one, 1);
    }
    const int64_t *tl_h = NULL;
    cn_tensor *loss = lp && tg && il && tl ? ctc_batched(lp, tg, il, tl, blank, zero_infinity,
                                                         dev, be, &tl_h)
                                           : NULL;
    cn_tensor *out = NULL;
    if (loss && reduction == CN_REDUCTION_NONE) {
        const int64_t scalar[1] = {1}; /* ndim 0: read as no dims */
        out = unbatched ? cn_reshape(loss, scalar, 0) : cn_retain(loss);
    } else if (loss && reduction == CN_REDUCTION_SUM) {
        out = cn_sum(loss);
    } else if (loss) { /* mean of loss[n] / max(target_lengths[n], 1) */
        int64_t N = cn_shape(loss)[0];
        double *d = cn__malloc(CTC, sizeof(double) * (size_t)(N > 0 ? N : 1));
        cn_device concrete = dev;
        concrete.autodiff = 0;
        concrete.checkpoint = 0;
        for (int64_t n = 0; d && n < N; n++) d[n] = tl_h[n] > 1 ? (double)tl_h[n] : 1.0;
        cn_tensor *div64 = d ? cn_from_data(d, cn_shape(loss), 1, CN_F64, concrete) : NULL;
        cn_tensor *div = div64 ? cn_cast(div64, loss->dtype) : NULL;
        cn_tensor *per = div ? cn_div(loss, div) : NULL;
        out = per ? cn_mean(per) : NULL;
        cn__free(d);
        cn_release(div64);
        cn_release(div);
        cn_release(per);
    }
    cn__free((void *)tl_h);
    cn_release(loss);
    if (unbatched) {
        cn_release(lp);
        cn_release(tg);
        cn_release(il);
        cn_release(tl);
    }
    return out;
}

cn_tensor *cn__ctc_loss_backward(cn_tensor *g, cn_tensor *log_probs, cn_tensor *targets,
                                 cn_tensor *input_lengths, cn_tensor *target_lengths,
                                 const int64_t *ints) {
    const char *op = cn_op_name(CN_OP_CTC_LOSS_BACKWARD);
    cn_tensor *in[5] = {g, log_probs, targets, input_lengths, target_lengths};
    const char *names[5] = {"g", "log_probs", "targets", "input_lengths", "target_lengths"};
    cn_device dev;
    const cn_backend *be = cn__route(op, in, names, 5, &dev);
    if (!be) return NULL;
    for (int i = 0; i < 5; i++)
        if (cn__check_kind(op, names[i], in[i], i < 2 ? CN_KINDS_FLOAT : CN_KINDS_INT) != CN_OK ||
            (i == 1 && cn__check_same_dtype(op, "g", g, names[i], in[i]) != CN_OK))
            return NULL;
    int64_t N = log_probs->ndim == 3 ? log_probs->shape[1] : -1;
    int ok = N >= 0 && g->ndim == 1 && g->shape[0] == N;
    for (int i = 2; ok && i < 5; i++) ok = in[i]->dtype == CN_I64 && cn_is_contiguous(in[i]);
    if (!ok) {
        cn_set_error(CN_ERR_SHAPE, op, "g must be [N] and log_probs [T, N, C], with the forward's "
                     "dense i64 targets and lengths");
        return NULL;
    }
    cn_tensor *out = cn__tensor_alloc(op, log_probs->shape, 3, log_probs->dtype, dev);
    if (!out) return NULL;
    cn_view views[5];
    for (int i = 0; i < 5; i++) cn__tensor_as_view(in[i], &views[i]);
    if (cn__launch(be, dev, CN_OP_CTC_LOSS_BACKWARD, views, 5, &out, 1, ints, 3, NULL, 0) !=
        CN_OK) {
        cn_release(out);
        return NULL;
    }
    return out;
}
