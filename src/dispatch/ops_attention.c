/* Front-ends of the fused attention (cn_scaled_dot_product_attention) and of its backward kernel:
 * the shape checks, the default scale, the outputs, and the node, whose inputs are (q, k, v,
 * lse[, mask]): lse, each query row's log-sum-exp, is what the backward kernel needs besides
 * q, k, v and the output to recompute the probabilities block by block. */
#include <math.h>
#include <string.h>

#include "cinder/ops.h"
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
    cn_tensor *outs[2] = {cn__tensor_alloc(SDPA, oshape, nb + 2, q->dtype, dev),
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
    const cn_backend *be = cn__route(op, in, names, n_in, &dev);
    if (!be) return cn_last_status();
    for (int i = 0; i < n_in; i++)
        if (cn__check_kind(op, names[i], in[i], CN_KINDS_FLOAT) != CN_OK ||
            cn__check_same_dtype(op, "q", q, names[i], in[i]) != CN_OK)
            return cn_last_status();
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
    cn_tensor *outs[4] = {cn__tensor_alloc(op, q->shape, q->ndim, q->dtype, dev),
                          cn__tensor_alloc(op, k->shape, k->ndim, q->dtype, dev),
                          cn__tensor_alloc(op, v->shape, v->ndim, q->dtype, dev),
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
