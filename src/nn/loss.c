/* Losses: cross-entropy from logits (log-softmax + NLL, with label smoothing) and mean squared
 * error. Each runs in its own scope and keeps only the loss. */
#include <string.h>

#include "core/error_internal.h"
#include "nn/nn_internal.h"

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
    if (cn_scope_begin() != CN_OK) return NULL;
    cn_tensor *diff = cn_sub(pred, target);
    cn_tensor *loss = cn_keep(cn_mean(cn_mul(diff, diff)));
    cn_scope_end();
    return loss;
}
