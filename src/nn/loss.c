/* Losses: cross-entropy from logits (log-softmax + NLL, with label smoothing) and mean squared
 * error. Each runs in its own scope and keeps only the loss. */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error_internal.h"
#include "nn/nn_internal.h"

/* gather found a label outside [0, C): the error is the caller's, so it names cross_entropy and
 * 'labels' (not the internal gather), with the first bad value and its position. index: the
 * labels as i64 [N, 1]. Reading them back needs memory; without it the message omits the value. */
static void label_range_error(cn_tensor *logits, cn_tensor *labels, cn_tensor *index) {
    const char *op = "cross_entropy";
    char a[128], b[128];
    int64_t n = cn_shape(labels)[0], c = cn_shape(logits)[1];
    int64_t *host = cn__malloc(op, n ? (size_t)n * sizeof *host : 1);
    int64_t pos = -1;
    if (host && cn_read(index, host, (size_t)n * sizeof *host) == CN_OK)
        for (int64_t i = 0; i < n && pos < 0; i++)
            if (host[i] < 0 || host[i] >= c) pos = i;
    char found[96] = "a value out of range";
    if (pos >= 0)
        snprintf(found, sizeof found, "%lld at position %lld", (long long)host[pos],
                 (long long)pos);
    cn__free(host);
    cn_set_error(CN_ERR_INDEX, op,
                 "'labels' %s holds %s, but 'logits' %s has %lld classes; labels are class "
                 "indices in 0..%lld (not one-hot rows, not 1-based): fix the labels or give "
                 "the logits more classes",
                 cn_tensor_str(labels, b, sizeof b), found, cn_tensor_str(logits, a, sizeof a),
                 (long long)c, (long long)(c - 1));
}

/* logits: [N, C], labels: [N] integers -> 0-d */
static cn_tensor *cross_entropy(cn_tensor *logits, cn_tensor *labels, double s) {
    const char *op = "cross_entropy";
    char a[128], b[128];
    if (cn_ndim(logits) != 2 || cn_ndim(labels) != 1 ||
        cn_shape(labels)[0] != cn_shape(logits)[0]) {
        cn_set_error(CN_ERR_SHAPE, op,
                     "'logits' is %s and 'labels' %s; they must be [N, C] and "
                     "[N]",
                     cn_tensor_str(logits, a, sizeof a), cn_tensor_str(labels, b, sizeof b));
        return NULL;
    }
    if (cn_kind_of(logits) != CN_KIND_FLOAT) {
        cn_set_error(CN_ERR_KIND, op,
                     "'logits' is %s; cross-entropy takes float logits (convert with "
                     "cn_cast(logits, CN_F32))",
                     cn_tensor_str(logits, a, sizeof a));
        return NULL;
    }
    if (cn_kind_of(labels) != CN_KIND_INT) {
        cn_set_error(CN_ERR_KIND, op,
                     "'labels' is %s; labels are integer class indices (convert "
                     "with cn_cast(labels, CN_I64))",
                     cn_tensor_str(labels, b, sizeof b));
        return NULL;
    }
    int64_t column[2] = {cn_shape(labels)[0], 1};
    cn_tensor *index =
        cn_reshape(cn_dtype_of(labels) == CN_I64 ? labels : cn_cast(labels, CN_I64), column, 2);
    cn_tensor *logp = cn_log_softmax(logits, 1);   /* [N, C] */
    cn_tensor *picked = cn_gather(logp, 1, index); /* [N, 1]: logp[i, labels[i]] */
    if (!picked && cn_last_status() == CN_ERR_INDEX) {
        label_range_error(logits, labels, index);
        return NULL;
    }
    cn_tensor *per_sample = cn_mul_scalar(picked, -(1.0 - s));
    if (s != 0.0) /* the uniform target's share: -s * mean_c logp[i, c] */
        per_sample = cn_add(per_sample, cn_mul_scalar(cn_mean_dim(logp, 1, 1), -s));
    return cn_mean(per_sample);
}

cn_tensor *cn_cross_entropy(cn_tensor *logits, cn_tensor *labels, double label_smoothing) {
    const char *op = "cross_entropy";
    if (!logits || !labels) {
        cn__null_arg(op, !logits ? "logits" : "labels");
        return NULL;
    }
    if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0)) {
        cn_set_error(CN_ERR_INVALID_ARG, op,
                     "label_smoothing = %g; it must be in [0, 1] (0: "
                     "none)",
                     label_smoothing);
        return NULL;
    }
    if (cn_scope_begin() != CN_OK) return NULL;
    cn_tensor *loss = cn_keep(cross_entropy(logits, labels, label_smoothing));
    cn_scope_end();
    return loss;
}

cn_tensor *cn_mse_loss(cn_tensor *pred, cn_tensor *target) {
    const char *op = "mse_loss";
    if (!pred || !target) {
        cn__null_arg(op, !pred ? "pred" : "target");
        return NULL;
    }
    if (cn_ndim(pred) != cn_ndim(target) ||
        memcmp(cn_shape(pred), cn_shape(target), sizeof(int64_t) * (size_t)cn_ndim(pred)) != 0) {
        char a[128], b[128];
        cn_set_error(CN_ERR_SHAPE, op,
                     "'pred' is %s and 'target' %s; they must have the same "
                     "shape (reshape one: broadcasting here is almost always a bug)",
                     cn_tensor_str(pred, a, sizeof a), cn_tensor_str(target, b, sizeof b));
        return NULL;
    }
    if (cn_kind_of(pred) != CN_KIND_FLOAT || cn_dtype_of(target) != cn_dtype_of(pred)) {
        char a[128], b[128];
        cn_set_error(cn_kind_of(pred) != CN_KIND_FLOAT ? CN_ERR_KIND : CN_ERR_DTYPE, op,
                     "'pred' is %s and 'target' %s; both must be of one float dtype (cast the "
                     "target to the prediction's, e.g. cn_cast(target, CN_F32))",
                     cn_tensor_str(pred, a, sizeof a), cn_tensor_str(target, b, sizeof b));
        return NULL;
    }
    if (cn_scope_begin() != CN_OK) return NULL;
    cn_tensor *diff = cn_sub(pred, target);
    cn_tensor *loss = cn_keep(cn_mean(cn_mul(diff, diff)));
    cn_scope_end();
    return loss;
}
