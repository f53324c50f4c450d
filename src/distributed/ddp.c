/* cn_ddp: the gradient reducer of data-parallel training, after PyTorch's DDP Reducer. The
 * parameters are grouped into buckets in reverse order, the order backward finishes them: the
 * first bucket small (1 MiB, as PyTorch's first bucket), so that a reduction starts early in
 * backward, the others larger (25 MiB). A small parameter shares a flat buffer with its
 * neighbours: its gradient-ready hook (cn_set_grad_ready_hook) copies the final gradient into
 * the bucket's slice, and cn_ddp_sync copies the mean back. A large one (SOLO_BYTES or more
 * over MPI, more than a bucket over NCCL) is a bucket of its own, reduced in place in the
 * gradient itself, which cn_backward hands over final, so the two copies of its bytes are saved.
 * When a bucket is complete it is all-reduced (mean, non-blocking) while backward computes the
 * layers below. Buckets start strictly in index order, so every rank issues the same collectives
 * in the same order whatever order its hooks ran in. */
#include <stdio.h>
#include <string.h>

#include "cinder/ops.h"
#include "distributed/dist_internal.h"

/* The default sizes of the buckets (bucket_bytes 0), and the size from which a parameter is
 * reduced alone, in place, by the MPI engine: past it, the latency of one more collective
 * (microseconds over MPI's shared memory) costs less than copying its gradient in and out of a
 * shared buffer in host memory. On GPUs a copy is cheap and each NCCL call costs tens of
 * microseconds (and a device synchronisation here), so there only a parameter that does not fit
 * a bucket is alone. */
#define FIRST_BUCKET_BYTES ((size_t)1 << 20)
#define BUCKET_BYTES       ((size_t)25 << 20)
#define SOLO_BYTES         ((size_t)256 << 10)

typedef struct ddp_param {
    struct cn_ddp *owner;
    cn_tensor *t;           /* the parameter (a reference) */
    int bucket;
    int64_t offset, numel;  /* its slice of the bucket */
    int ready;              /* its gradient of this step is in the bucket */
    cn_tensor *grad;        /* a solo bucket's: the gradient reduced in place (a reference) */
} ddp_param;

typedef struct ddp_bucket {
    cn_tensor *buf;      /* [elements] of the parameters' dtype, on their concrete device;
                            NULL for a solo bucket */
    int n_params, n_ready;
    int solo;            /* one parameter, reduced in its own gradient (ddp_param.grad) */
    int first;           /* its parameter's index, for a solo bucket */
    cn_dist_work *work;  /* the all-reduce in flight, or NULL */
} ddp_bucket;

struct cn_ddp {
    int n, n_buckets;
    ddp_param *params;
    ddp_bucket *buckets;
    int next_launch;     /* buckets [0, next_launch) were started this step */
};

/* The slice of p's bucket that holds p's gradient, shaped as p ([numel] then p's shape). */
static cn_tensor *slice_of(cn_ddp *d, const ddp_param *p) {
    cn_tensor *flat = cn_slice(d->buckets[p->bucket].buf, 0, p->offset, p->offset + p->numel, 1);
    cn_tensor *view = cn_reshape(flat, cn_shape(p->t), cn_ndim(p->t));
    cn_release(flat);
    return view;
}

/* Starts every bucket from next_launch on whose gradients are all in, in index order. */
static cn_status launch_ready(cn_ddp *d) {
    while (d->next_launch < d->n_buckets) {
        ddp_bucket *b = &d->buckets[d->next_launch];
        if (b->n_ready < b->n_params) break;
        cn_tensor *buf = b->solo ? d->params[b->first].grad : b->buf;
        b->work = dist__all_reduce_unchecked("ddp", buf, CN_DIST_MEAN);
        if (!b->work) return cn_last_status();
        d->next_launch++;
    }
    return CN_OK;
}

static void progress(cn_ddp *d) {
    for (int i = 0; i < d->next_launch; i++)
        if (d->buckets[i].work) dist__progress(&d->buckets[i].work, 1);
}

/* The gradient-ready hook of one parameter: runs inside cn_backward, under no-grad mode. */
static cn_status on_grad_ready(cn_tensor *grad, void *ctx) {
    ddp_param *p = ctx;
    cn_ddp *d = p->owner;
    if (p->ready)
        return cn_set_error(CN_ERR_INVALID_ARG, "ddp", "a parameter's gradient is ready twice "
                            "before cn_ddp_sync; call cn_ddp_sync after every cn_backward (with "
                            "NULL grads after a failed one)");
    cn_status s = CN_OK;
    if (d->buckets[p->bucket].solo) {
        p->grad = cn_retain(grad); /* dense and final: reduced where it is */
    } else {
        cn_tensor *slice = slice_of(d, p);
        s = slice ? cn_copy_(slice, grad) : cn_last_status();
        cn_release(slice);
    }
    if (s != CN_OK) return s;
    p->ready = 1;
    d->buckets[p->bucket].n_ready++;
    s = launch_ready(d);
    progress(d);
    return s;
}

/* ---- construction ---------------------------------------------------------------------------- */

static void describe_layout(const int64_t *desc, char *buf, size_t size) {
    snprintf(buf, size, "cn_ddp_new over %lld parameters of %lld elements (layout hash %016llx)",
             (long long)desc[1], (long long)desc[2], (unsigned long long)desc[3]);
}

/* FNV-1a over the parameters' dtypes and shapes: equal on every rank that has the same model. */
static uint64_t layout_hash(const cn_param *params, int n, int64_t *elements) {
    uint64_t h = 1469598103934665603ull;
    *elements = 0;
    for (int i = 0; i < n; i++) {
        const cn_tensor *t = params[i].tensor;
        int64_t fields[2 + CN_MAX_DIMS] = {cn_dtype_of(t), cn_ndim(t)};
        for (int k = 0; k < cn_ndim(t); k++) fields[2 + k] = cn_shape(t)[k];
        const unsigned char *bytes = (const unsigned char *)fields;
        for (size_t k = 0; k < sizeof fields; k++) h = (h ^ bytes[k]) * 1099511628211ull;
        *elements += cn_numel(t);
    }
    return h;
}

static cn_status check_params(const char *op, const cn_param *params, int n) {
    if (!params) {
        dist__null_arg(op, "params");
        return cn_last_status();
    }
    if (n < 1)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "n = %d; give the model's parameters "
                            "(cn_module_params) and their count", n);
    char buf[128], dev[48];
    for (int i = 0; i < n; i++) {
        cn_tensor *t = params[i].tensor;
        const char *name = params[i].name ? params[i].name : "?";
        if (!t) {
            dist__null_arg(op, "params[i].tensor");
            return cn_last_status();
        }
        if (cn_kind_of(t) != CN_KIND_FLOAT)
            return cn_set_error(CN_ERR_KIND, op, "parameter %d ('%s') %s is not float; only "
                                "float parameters have gradients to average", i, name,
                                cn_tensor_str(t, buf, sizeof buf));
        if (!dist__state.eng->device_ok(cn_inner_device(cn_device_of(t))))
            return cn_set_error(CN_ERR_DEVICE_MISMATCH, op, "parameter %d ('%s') %s is not on "
                                "the %s engine's device %s; build the model there", i, name,
                                cn_tensor_str(t, buf, sizeof buf), dist__state.eng->name,
                                cn_device_str(dist__state.device, dev, sizeof dev));
        if (!cn_requires_grad(t))
            return cn_set_error(CN_ERR_AUTODIFF_NO_GRAD, op, "parameter %d ('%s') %s does not "
                                "require grad; mark it with cn_require_grad", i, name,
                                cn_tensor_str(t, buf, sizeof buf));
    }
    return CN_OK;
}

void cn_ddp_free(cn_ddp *d) {
    if (!d) return;
    for (int i = 0; i < d->n_buckets; i++) {
        if (d->buckets[i].work) cn_dist_wait(d->buckets[i].work);
        cn_release(d->buckets[i].buf);
    }
    for (int i = 0; i < d->n; i++) {
        cn_release(d->params[i].grad);
        if (!d->params[i].t) continue;
        cn_set_grad_ready_hook(d->params[i].t, NULL, NULL);
        cn_release(d->params[i].t);
    }
    dist__free(d->params);
    dist__free(d->buckets);
    dist__free(d);
}

cn_status dist__share_params(const char *op, const cn_param *params, int n) {
    if (dist__check_group(op) != CN_OK) return cn_last_status();
    cn_status s = check_params(op, params, n);
    int64_t elements = 0;
    int64_t desc[4] = {s == CN_OK ? DIST_DDP : -(int64_t)s, n, 0, 0};
    if (s == CN_OK) desc[3] = (int64_t)layout_hash(params, n, &elements);
    desc[2] = elements;
    cn_status agreed = dist__agree(op, desc, 4, describe_layout);
    if (s != CN_OK || agreed != CN_OK) return cn_last_status();
    /* rank 0's values everywhere */
    cn_no_grad_begin();
    for (int i = 0; i < n && s == CN_OK; i++) s = cn_dist_broadcast(params[i].tensor, 0);
    cn_no_grad_end();
    return s;
}

cn_ddp *cn_ddp_new(const cn_param *params, int n, size_t bucket_bytes) {
    const char *op = "ddp_new";
    if (dist__share_params(op, params, n) != CN_OK) return NULL;
    cn_status s = CN_OK;

    /* bucket b holds up to cap(b) bytes; a parameter of solo_bytes or more is a bucket alone */
    const size_t first_cap = bucket_bytes ? bucket_bytes : FIRST_BUCKET_BYTES;
    const size_t cap = bucket_bytes ? bucket_bytes : BUCKET_BYTES;
    size_t solo_bytes = bucket_bytes && bucket_bytes < SOLO_BYTES ? bucket_bytes : SOLO_BYTES;
    if (dist__state.engine != CN_DIST_MPI) solo_bytes = cap;
    cn_ddp *d = dist__calloc(op, 1, sizeof *d);
    if (!d) return NULL;
    d->params = dist__calloc(op, (size_t)n, sizeof *d->params);
    d->buckets = dist__calloc(op, (size_t)n, sizeof *d->buckets);
    if (!d->params || !d->buckets) {
        cn_ddp_free(d);
        return NULL;
    }
    d->n = n;
    /* the buckets, last parameter first */
    size_t bytes = 0;
    int64_t offset = 0;
    for (int i = n - 1; i >= 0 && s == CN_OK; i--) {
        cn_tensor *t = params[i].tensor;
        size_t pb = (size_t)cn_numel(t) * cn_dtype_size(cn_dtype_of(t));
        ddp_bucket *cur = d->n_buckets ? &d->buckets[d->n_buckets - 1] : NULL;
        const ddp_param *prev = i < n - 1 ? &d->params[i + 1] : NULL;
        int solo = pb >= solo_bytes;
        if (!cur || solo || cur->solo || bytes + pb > (d->n_buckets == 1 ? first_cap : cap) ||
            cn_dtype_of(prev->t) != cn_dtype_of(t)) {
            d->n_buckets++;
            d->buckets[d->n_buckets - 1].solo = solo;
            d->buckets[d->n_buckets - 1].first = i;
            bytes = 0;
            offset = 0;
        }
        ddp_param *p = &d->params[i];
        p->owner = d;
        p->t = cn_retain(t);
        p->bucket = d->n_buckets - 1;
        p->offset = offset;
        p->numel = cn_numel(t);
        d->buckets[p->bucket].n_params++;
        offset += p->numel;
        bytes += pb;
    }
    for (int b = 0; b < d->n_buckets && s == CN_OK; b++) {
        if (d->buckets[b].solo) continue;
        int64_t len = 0;
        cn_dtype dt = CN_F32;
        for (int i = 0; i < n; i++)
            if (d->params[i].bucket == b) {
                len += d->params[i].numel;
                dt = cn_dtype_of(d->params[i].t);
            }
        d->buckets[b].buf =
            dist__own(cn_zeros(&len, 1, dt, cn_inner_device(cn_device_of(params[0].tensor))));
        if (!d->buckets[b].buf) s = cn_last_status();
    }
    for (int i = 0; i < n && s == CN_OK; i++)
        s = cn_set_grad_ready_hook(d->params[i].t, on_grad_ready, &d->params[i]);
    /* the buckets' reductions by halving over MPI (engine_mpi.c); its one-time cost here */
    if (s == CN_OK && dist__state.engine == CN_DIST_MPI) dist__mpi_prefer_halving();
    if (s != CN_OK) {
        cn_ddp_free(d);
        return NULL;
    }
    return d;
}

int cn_ddp_bucket_count(const cn_ddp *d) { return d ? d->n_buckets : 0; }

int cn_ddp_started(const cn_ddp *d) { return d ? d->next_launch : 0; }

/* ---- the end of a step ----------------------------------------------------------------------- */

cn_status cn_ddp_sync(cn_ddp *d, cn_grads *grads) {
    const char *op = "ddp_sync";
    if (!d) {
        dist__null_arg(op, "d");
        return cn_last_status();
    }
    cn_status s = CN_OK;
    if (grads) {
        /* a parameter the backward did not reach counts as a zero gradient */
        cn_tensor *zero = NULL;
        for (int i = 0; i < d->n && s == CN_OK; i++) {
            ddp_param *p = &d->params[i];
            if (p->ready) continue;
            if (d->buckets[p->bucket].solo) {
                p->grad = dist__own(cn_zeros(cn_shape(p->t), cn_ndim(p->t), cn_dtype_of(p->t),
                                             cn_dist_device()));
                if (!p->grad) s = cn_last_status();
            } else {
                if (!zero) zero = cn_zeros(NULL, 0, cn_dtype_of(p->t), cn_dist_device());
                cn_tensor *slice = zero ? slice_of(d, p) : NULL;
                s = slice ? cn_copy_(slice, zero) : cn_last_status();
                cn_release(slice);
            }
            p->ready = 1;
            d->buckets[p->bucket].n_ready++;
        }
        cn_release(zero);
        if (s == CN_OK) s = launch_ready(d);
    }
    for (int b = 0; b < d->n_buckets; b++) {
        if (!d->buckets[b].work) continue;
        cn_status w = cn_dist_wait(d->buckets[b].work);
        d->buckets[b].work = NULL;
        if (s == CN_OK) s = w;
    }
    cn_no_grad_begin();
    for (int i = 0; i < d->n && s == CN_OK && grads; i++) {
        ddp_param *p = &d->params[i];
        cn_tensor *g = cn_grad_find(grads, p->t);
        if (!g || g == p->grad) continue; /* none, or reduced in place */
        cn_tensor *slice = d->buckets[p->bucket].solo ? cn_retain(p->grad) : slice_of(d, p);
        s = slice ? cn_copy_(g, slice) : cn_last_status();
        cn_release(slice);
    }
    cn_no_grad_end();
    for (int i = 0; i < d->n; i++) {
        d->params[i].ready = 0;
        cn_release(d->params[i].grad);
        d->params[i].grad = NULL;
    }
    for (int b = 0; b < d->n_buckets; b++) d->buckets[b].n_ready = 0;
    d->next_launch = 0;
    return s;
}
