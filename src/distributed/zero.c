/* cn_zero: ZeRO stage 1 (distributed.h). The parameters, laid end to end and padded to a multiple
 * of the world size, are a flat vector of which rank r owns part r; the optimizer of each rank
 * holds state for its part alone. A step: the gradients into the flat vector, reduce-scatter
 * (mean) to the parts, the optimizer on this rank's part, all-gather of the parts, and the flat
 * parameters copied back into the model's tensors. */
#include "cinder/memory.h"
#include "cinder/ops.h"
#include "distributed/dist_internal.h"

struct cn_zero {
    int n;
    cn_tensor **params;   /* references */
    int64_t *offset;      /* of each parameter in the flat vector */
    int64_t shard_len;    /* padded / world */
    cn_tensor *flat_grad; /* [padded], concrete */
    cn_tensor *flat_param;
    cn_tensor *shard;     /* [shard_len], tracked leaf: what the optimizer updates */
    cn_tensor *shard_grad;/* [shard_len], concrete */
    cn_optimizer *opt;
};

/* flat[offset[i] : offset[i] + numel] seen with params[i]'s shape */
static cn_tensor *part(cn_zero *z, cn_tensor *flat, int i) {
    cn_tensor *p = z->params[i];
    cn_tensor *s = cn_slice(flat, 0, z->offset[i], z->offset[i] + cn_numel(p), 1);
    cn_tensor *v = cn_reshape(s, cn_shape(p), cn_ndim(p));
    cn_release(s);
    return v;
}

void cn_zero_free(cn_zero *z) {
    if (!z) return;
    cn_optimizer_free(z->opt);
    for (int i = 0; i < z->n; i++) cn_release(z->params[i]);
    cn_release(z->flat_grad);
    cn_release(z->flat_param);
    cn_release(z->shard);
    cn_release(z->shard_grad);
    dist__free(z->params);
    dist__free(z->offset);
    dist__free(z);
}

static cn_tensor *unscoped(cn_tensor *t) {
    return dist__own(t);
}

cn_zero *cn_zero_new(const cn_param *params, int n, cn_zero_make_optimizer make, void *ctx) {
    const char *op = "zero_new";
    if (!make && dist__check_group(op) == CN_OK) {
        dist__null_arg(op, "make");
        return NULL; /* the same on every rank: nobody is left waiting */
    }
    if (dist__share_params(op, params, n) != CN_OK) return NULL;
    cn_dtype dt = cn_dtype_of(params[0].tensor);
    for (int i = 1; i < n; i++)
        if (cn_dtype_of(params[i].tensor) != dt) {
            char a[128];
            cn_set_error(CN_ERR_DTYPE, op, "parameter %d ('%s') %s is not %s like parameter 0; "
                         "ZeRO shards one flat vector of one dtype: cast the model to one dtype",
                         i, params[i].name ? params[i].name : "?",
                         cn_tensor_str(params[i].tensor, a, sizeof a), cn_dtype_name(dt));
            return NULL;
        }
    cn_zero *z = dist__calloc(op, 1, sizeof *z);
    if (!z) return NULL;
    z->params = dist__calloc(op, (size_t)n, sizeof *z->params);
    z->offset = dist__calloc(op, (size_t)n, sizeof *z->offset);
    if (!z->params || !z->offset) {
        cn_zero_free(z);
        return NULL;
    }
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        z->params[i] = cn_retain(params[i].tensor);
        z->offset[i] = total;
        total += cn_numel(params[i].tensor);
    }
    z->n = n;
    const int64_t world = dist__state.world, rank = dist__state.rank;
    z->shard_len = (total + world - 1) / world;
    int64_t padded = z->shard_len * world, len = z->shard_len;
    cn_device dev = cn_inner_device(cn_device_of(params[0].tensor));
    cn_status s = CN_OK;
    cn_no_grad_begin();
    z->flat_grad = unscoped(cn_zeros(&padded, 1, dt, dev));
    z->flat_param = unscoped(cn_zeros(&padded, 1, dt, dev));
    z->shard_grad = unscoped(cn_zeros(&len, 1, dt, dev));
    z->shard = unscoped(cn_zeros(&len, 1, dt, cn_autodiff(dev)));
    if (!z->flat_grad || !z->flat_param || !z->shard_grad || !z->shard) s = cn_last_status();
    for (int i = 0; i < n && s == CN_OK; i++) {
        cn_tensor *v = part(z, z->flat_param, i);
        s = v ? cn_copy_(v, z->params[i]) : cn_last_status();
        cn_release(v);
    }
    if (s == CN_OK) {
        cn_tensor *mine = cn_slice(z->flat_param, 0, rank * len, (rank + 1) * len, 1);
        s = mine ? cn_copy_(z->shard, mine) : cn_last_status();
        cn_release(mine);
    }
    cn_no_grad_end();
    if (s == CN_OK && !cn_require_grad(z->shard)) s = cn_last_status();
    if (s == CN_OK) {
        cn_param shard = {"zero_shard", z->shard};
        z->opt = make(&shard, 1, ctx);
        if (!z->opt) s = cn_last_status() != CN_OK ? cn_last_status()
                         : cn_set_error(CN_ERR_INVALID_ARG, op, "make returned no optimizer "
                                        "and set no error; return the optimizer of the shard");
    }
    if (s != CN_OK) {
        cn_zero_free(z);
        return NULL;
    }
    return z;
}

cn_status cn_zero_step(cn_zero *z, const cn_grads *grads) {
    const char *op = "zero_step";
    if (!z || !grads) {
        dist__null_arg(op, !z ? "z" : "grads");
        return cn_last_status();
    }
    cn_status s = cn_scope_begin();
    if (s != CN_OK) return s;
    /* the gradients into the flat vector (zeros where there is none, and in the padding) */
    cn_no_grad_begin();
    cn_tensor *zero = cn_zeros(NULL, 0, cn_dtype_of(z->flat_grad), cn_device_of(z->flat_grad));
    s = zero ? cn_copy_(z->flat_grad, zero) : cn_last_status();
    for (int i = 0; i < z->n && s == CN_OK; i++) {
        cn_tensor *g = cn_grad_find(grads, z->params[i]);
        if (!g) continue;
        cn_tensor *v = part(z, z->flat_grad, i);
        s = v ? cn_copy_(v, g) : cn_last_status();
    }
    cn_no_grad_end();
    if (s == CN_OK) s = cn_dist_reduce_scatter(z->shard_grad, z->flat_grad, CN_DIST_MEAN);
    cn_grads *mine = s == CN_OK ? cn_grads_new() : NULL;
    if (s == CN_OK && !mine) s = cn_last_status();
    if (s == CN_OK) s = cn_grads_set(mine, z->shard, z->shard_grad);
    if (s == CN_OK) s = cn_optimizer_step(z->opt, mine);
    cn_grads_free(mine);
    /* every rank's new part into every rank's flat parameters, then into the model */
    if (s == CN_OK) {
        cn_tensor *shard = cn_inner(z->shard);
        s = shard ? cn_dist_all_gather(z->flat_param, shard) : cn_last_status();
    }
    cn_no_grad_begin();
    for (int i = 0; i < z->n && s == CN_OK; i++) {
        cn_tensor *v = part(z, z->flat_param, i);
        s = v ? cn_copy_(z->params[i], v) : cn_last_status();
    }
    cn_no_grad_end();
    cn_scope_end();
    return s;
}

cn_optimizer *cn_zero_optimizer(cn_zero *z) { return z ? z->opt : NULL; }
int64_t cn_zero_shard_numel(const cn_zero *z) { return z ? z->shard_len : 0; }
