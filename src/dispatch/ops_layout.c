/* Layout ops: reshape and contiguous copies, concatenation and splitting, indexing. */
#include <string.h>

#include "cinder/ops.h"
#include "core/alloc.h"
#include "core/error_internal.h"
#include "dispatch/router.h"

/* ---- reshape and contiguous ---------------------------------------------------------------- */

/* A dense copy of t on its device, recorded as a copy for autodiff. */
static cn_tensor *dense_copy(const char *op, cn_tensor *t) {
    if (!t) {
        cn__null_arg(op, "t");
        return NULL;
    }
    cn_tensor *out = cn__tensor_alloc(op, t->shape, t->ndim, t->dtype, t->device);
    if (!out) return NULL;
    cn_view v;
    cn__tensor_as_view(out, &v);
    if (cn__copy_into(out, &v, t) != CN_OK) {
        cn_release(out);
        return NULL;
    }
    return cn__record(CN_OP_COPY, out, &t, 1, NULL, 0, NULL, 0);
}

cn_tensor *cn_contiguous(cn_tensor *t) {
    CN__CHECK_LIVE("contiguous", t);
    /* already dense: a new header (every result is a new reference its scope can own) */
    if (t && cn_is_contiguous(t))
        return cn__record(CN__OP_VIEW, cn__tensor_view(t, t->shape, t->strides, t->ndim, t->offset),
                          &t, 1, NULL, 0, NULL, 0);
    if (t && cn__is_quant(t->dtype)) {
        cn__quant_no_copy("contiguous", t, "it is not contiguous");
        return NULL;
    }
    return dense_copy("contiguous", t);
}

cn_tensor *cn_clone(cn_tensor *t) { return dense_copy("clone", t); }

/* Strides that view t's elements in row-major order as `shape`, if its layout allows; the
 * dims of t are taken in runs that are contiguous among themselves, and each run must map
 * onto whole dims of the new shape. */
static int view_strides(const cn_tensor *t, const int64_t *shape, int ndim, int64_t *strides) {
    if (t->numel == 0 || t->ndim == 0) {
        int64_t n;
        return cn__contiguous_strides(shape, ndim, strides, &n) == CN_OK;
    }
    int view_d = ndim - 1;
    int64_t base = t->strides[t->ndim - 1], t_numel = 1, v_numel = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        t_numel *= t->shape[d]; /* at most t->numel */
        /* a size-1 dim's stride is arbitrary, so the product may overflow: then it is not the
         * stride that continues the run */
        int64_t next;
        int run_ends = d == 0 || (t->shape[d - 1] != 1 &&
                                  (__builtin_mul_overflow(t_numel, base, &next) ||
                                   t->strides[d - 1] != next));
        if (!run_ends) continue;
        while (view_d >= 0 && (v_numel < t_numel || shape[view_d] == 1)) {
            if (__builtin_mul_overflow(v_numel, base, &strides[view_d])) return 0;
            v_numel *= shape[view_d];
            view_d--;
        }
        if (v_numel != t_numel) return 0;
        if (d > 0) {
            base = t->strides[d - 1];
            t_numel = v_numel = 1;
        }
    }
    return view_d == -1;
}

cn_tensor *cn_reshape(cn_tensor *t, const int64_t *shape_in, int ndim) {
    const char *op = "reshape";
    CN__CHECK_LIVE(op, t);
    if (!t || !shape_in) {
        cn__null_arg(op, !t ? "t" : "shape");
        return NULL;
    }
    char a[128], b[128];
    if (ndim < 0 || ndim > CN_MAX_DIMS) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "ndim = %d; tensors have 0 to %d dims", ndim,
                     CN_MAX_DIMS);
        return NULL;
    }
    int64_t shape[CN_MAX_DIMS];
    int infer = -1, has_zero = 0;
    int64_t known = 1;
    for (int d = 0; d < ndim; d++) has_zero |= shape_in[d] == 0; /* then no product overflows */
    for (int d = 0; d < ndim; d++) {
        shape[d] = shape_in[d];
        if (shape[d] == -1) {
            if (infer >= 0) {
                cn_set_error(CN_ERR_INVALID_ARG, op, "shape %s has more than one -1; at most one "
                             "size can be inferred", cn__shape_str(shape_in, ndim, b, sizeof b));
                return NULL;
            }
            infer = d;
        } else if (shape[d] < 0) {
            cn_set_error(CN_ERR_INVALID_ARG, op, "shape %s has a negative size; sizes must be "
                         ">= 0 (or -1 to infer one)", cn__shape_str(shape_in, ndim, b, sizeof b));
            return NULL;
        } else {
            if (!has_zero && known > INT64_MAX / shape[d]) {
                cn_set_error(CN_ERR_OVERFLOW, op, "shape %s has too many elements",
                             cn__shape_str(shape_in, ndim, b, sizeof b));
                return NULL;
            }
            if (!has_zero) known *= shape[d];
        }
    }
    if (has_zero) known = 0;
    if (infer >= 0) {
        if (known == 0 || t->numel % known != 0) {
            cn_set_error(CN_ERR_SHAPE, op, "cannot infer the -1 in %s for %s (%lld elements); "
                         "the other sizes must divide the element count",
                         cn__shape_str(shape_in, ndim, b, sizeof b), cn_tensor_str(t, a, sizeof a),
                         (long long)t->numel);
            return NULL;
        }
        shape[infer] = t->numel / known;
        known = t->numel;
    }
    if (known != t->numel) {
        cn_set_error(CN_ERR_SHAPE, op, "shape %s has %lld elements but %s has %lld; the element "
                     "count must stay the same", cn__shape_str(shape, ndim, b, sizeof b),
                     (long long)known, cn_tensor_str(t, a, sizeof a), (long long)t->numel);
        return NULL;
    }
    int64_t strides[CN_MAX_DIMS];
    if (view_strides(t, shape, ndim, strides))
        return cn__record(CN__OP_VIEW, cn__view(op, t, shape, strides, ndim, t->offset), &t, 1,
                          NULL, 0, NULL, 0);
    if (cn__is_quant(t->dtype)) {
        cn__quant_no_copy(op, t, "this reshape is not a view of its layout");
        return NULL;
    }
    cn_tensor *dense = cn_contiguous(t);
    if (!dense) return NULL;
    int64_t numel;
    cn__contiguous_strides(shape, ndim, strides, &numel);
    cn_tensor *out = cn__record(CN__OP_VIEW,
                                cn__tensor_view(dense, shape, strides, ndim, dense->offset),
                                &dense, 1, NULL, 0, NULL, 0);
    cn_release(dense);
    return out;
}

/* ---- cat, stack, split, chunk -------------------------------------------------------------- */

cn_tensor *cn_cat(cn_tensor *const *ts, int n, int dim) {
    const char *op = "cat";
    if (!ts) {
        cn__null_arg(op, "ts");
        return NULL;
    }
    if (n <= 0) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "n = %d; give at least one tensor", n);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!ts[i]) {
            cn__null_arg(op, "ts[i]");
            return NULL;
        }
    }
    cn_tensor *first = ts[0];
    if (first->ndim == 0) {
        cn_set_error(CN_ERR_SHAPE, op, "ts[0] is 0-d; cat needs tensors with at least one dim "
                     "(cn_stack makes a new dim)");
        return NULL;
    }
    int d = cn__norm_dim(op, "dim", dim, first->ndim);
    if (d < 0) return NULL;
    int64_t shape[CN_MAX_DIMS];
    memcpy(shape, first->shape, sizeof shape);
    shape[d] = 0;
    char a[128], b[128];
    for (int i = 0; i < n; i++) {
        cn_tensor *t = ts[i];
        if (!cn_device_eq(t->device, first->device)) {
            cn_set_error(CN_ERR_DEVICE_MISMATCH, op, "ts[0] is %s but ts[%d] is %s; move them to "
                         "one device with cn_to_device", cn_tensor_str(first, a, sizeof a), i,
                         cn_tensor_str(t, b, sizeof b));
            return NULL;
        }
        if (t->dtype != first->dtype) {
            cn_set_error(CN_ERR_DTYPE, op, "ts[0] is %s but ts[%d] is %s; cast them to one dtype "
                         "with cn_cast", cn_tensor_str(first, a, sizeof a), i,
                         cn_tensor_str(t, b, sizeof b));
            return NULL;
        }
        int same = t->ndim == first->ndim;
        for (int k = 0; same && k < t->ndim; k++)
            if (k != d && t->shape[k] != first->shape[k]) same = 0;
        if (!same) {
            cn_set_error(CN_ERR_SHAPE, op, "ts[0] is %s but ts[%d] is %s; all sizes except dim "
                         "%d must match", cn_tensor_str(first, a, sizeof a), i,
                         cn_tensor_str(t, b, sizeof b), d);
            return NULL;
        }
        if (__builtin_add_overflow(shape[d], t->shape[d], &shape[d])) {
            cn_set_error(CN_ERR_OVERFLOW, op, "the sizes of dim %d add up past int64 at ts[%d] "
                         "%s; check the shapes for a mistake", d, i,
                         cn_tensor_str(t, b, sizeof b));
            return NULL;
        }
    }
    cn_tensor *out = cn__tensor_alloc(op, shape, first->ndim, first->dtype, first->device);
    if (!out) return NULL;
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        int64_t part = ts[i]->shape[d];
        at += part;
        if (ts[i]->numel == 0) continue; /* then out may be empty too, with huge sizes */
        cn_view v;
        cn__tensor_as_view(out, &v);
        v.shape[d] = part;
        /* out is not empty: the offset lies within it */
        int64_t es = (int64_t)cn_dtype_size(out->dtype);
        v.data = (char *)v.data + (at - part) * out->strides[d] * es;
        if (cn__copy_into(out, &v, ts[i]) != CN_OK) {
            cn_release(out);
            return NULL;
        }
    }
    int64_t ints[1] = {d};
    return cn__record(CN__OP_CAT, out, ts, n, ints, 1, NULL, 0);
}

cn_tensor *cn_stack(cn_tensor *const *ts, int n, int dim) {
    const char *op = "stack";
    if (!ts) {
        cn__null_arg(op, "ts");
        return NULL;
    }
    if (n <= 0 || n > 4096) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "n = %d; give 1 to 4096 tensors", n);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!ts[i]) {
            cn__null_arg(op, "ts[i]");
            return NULL;
        }
    }
    /* checked here so that errors name stack, not the cat and unsqueeze it is made of */
    if (cn__norm_dim(op, "dim", dim, ts[0]->ndim + 1) < 0) return NULL;
    char a[128], b[128];
    for (int i = 1; i < n; i++) {
        cn_status s = !cn_device_eq(ts[i]->device, ts[0]->device) ? CN_ERR_DEVICE_MISMATCH
                      : ts[i]->dtype != ts[0]->dtype                ? CN_ERR_DTYPE
                      : ts[i]->ndim != ts[0]->ndim ||
                              memcmp(ts[i]->shape, ts[0]->shape,
                                     sizeof(int64_t) * (size_t)ts[0]->ndim) != 0
                          ? CN_ERR_SHAPE
                          : CN_OK;
        if (s == CN_OK) continue;
        cn_set_error(s, op, "ts[0] is %s but ts[%d] is %s; stacked tensors must share one "
                     "device, dtype and shape", cn_tensor_str(ts[0], a, sizeof a), i,
                     cn_tensor_str(ts[i], b, sizeof b));
        return NULL;
    }
    cn_tensor *views[4096];
    int made = 0;
    cn_tensor *out = NULL;
    for (; made < n; made++) {
        views[made] = cn_unsqueeze(ts[made], dim);
        if (!views[made]) break;
    }
    if (made == n) out = cn_cat(views, n, dim);
    for (int i = 0; i < made; i++) cn_release(views[i]);
    return out;
}

int cn_split(cn_tensor *x, int64_t size, int dim, cn_tensor **parts, int max_parts) {
    const char *op = "split";
    if (!x || !parts) {
        cn__null_arg(op, !x ? "x" : "parts");
        return -1;
    }
    int d = cn__norm_dim(op, "dim", dim, x->ndim);
    if (d < 0) return -1;
    if (size <= 0) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "size = %lld; pieces need a positive size",
                     (long long)size);
        return -1;
    }
    int64_t len = x->ndim ? x->shape[d] : 1;
    int64_t count = len == 0 ? 1 : (len - 1) / size + 1; /* ceil, without len + size */
    if (count > INT32_MAX) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "%lld pieces are too many; use a larger size",
                     (long long)count);
        return -1;
    }
    /* like snprintf: the count of all pieces, but only max_parts of them written */
    int64_t written = count < max_parts ? count : (max_parts > 0 ? max_parts : 0);
    /* the pieces are made aside and handed over only once all exist: nothing written on error */
    cn_tensor *local[16];
    cn_tensor **made = written <= 16 ? local : cn__malloc(op, (size_t)written * sizeof *made);
    if (!made) return -1;
    for (int64_t i = 0; i < written; i++) {
        int64_t begin = i * size; /* < len */
        int64_t end = size > INT64_MAX - begin ? INT64_MAX : begin + size; /* slice clamps it */
        made[i] = cn_slice(x, d, begin, end, 1);
        if (!made[i]) {
            for (int64_t j = 0; j < i; j++) cn_release(made[j]);
            if (made != local) cn__free(made);
            return -1;
        }
    }
    for (int64_t i = 0; i < written; i++) parts[i] = made[i];
    if (made != local) cn__free(made);
    return (int)count;
}

int cn_chunk(cn_tensor *x, int chunks, int dim, cn_tensor **parts, int max_parts) {
    if (!x) {
        cn__null_arg("chunk", "x");
        return -1;
    }
    if (chunks <= 0) {
        cn_set_error(CN_ERR_INVALID_ARG, "chunk", "chunks = %d; ask for at least one", chunks);
        return -1;
    }
    int d = cn__norm_dim("chunk", "dim", dim, x->ndim);
    if (d < 0) return -1;
    int64_t len = x->ndim ? x->shape[d] : 1;
    int64_t size = len == 0 ? 0 : (len - 1) / chunks + 1; /* torch.chunk: ceil, so maybe fewer */
    return cn_split(x, size ? size : 1, d, parts, max_parts);
}

/* ---- indexing ------------------------------------------------------------------------------ */

static cn_status check_index(const char *op, const cn_tensor *index) {
    if (cn__check_kind(op, "index", index, CN_KINDS_INT) != CN_OK) return cn_last_status();
    if (index->dtype != CN_I64) {
        char a[128];
        return cn_set_error(CN_ERR_DTYPE, op, "'index' is %s; indices are i64: cn_cast(index, "
                            "CN_I64)", cn_tensor_str(index, a, sizeof a));
    }
    return CN_OK;
}

/* Runs an indexing kernel: allocates out of `shape` and `dtype`, views the inputs as they are. */
static cn_tensor *run_index_op(cn_op op, cn_tensor *const *in, const char *const *names, int n,
                               const int64_t *shape, int ndim, cn_dtype dtype,
                               const int64_t *ints, int n_ints) {
    const char *name = cn_op_name(op);
    cn_device dev;
    const cn_backend *b = cn__route(name, in, names, n, &dev);
    if (!b) return NULL;
    cn_tensor *out = cn__tensor_alloc(name, shape, ndim, dtype, dev);
    if (!out) return NULL;
    cn_view views[3];
    for (int i = 0; i < n; i++) cn__tensor_as_view(in[i], &views[i]);
    if (cn__launch(b, dev, op, views, n, &out, 1, ints, n_ints, NULL, 0) != CN_OK) {
        cn_release(out);
        return NULL;
    }
    return cn__record(op, out, in, n, ints, n_ints, NULL, 0);
}

/* index fits x for gather / scatter_add: same ndim, no larger off `dim`. */
static cn_status check_index_shape(const char *op, const cn_tensor *x, const cn_tensor *index,
                                   int d) {
    int ok = index->ndim == x->ndim;
    for (int k = 0; ok && k < x->ndim; k++)
        if (k != d && index->shape[k] > x->shape[k]) ok = 0;
    if (ok) return CN_OK;
    char a[128], b[128];
    return cn_set_error(CN_ERR_SHAPE, op, "'index' %s does not fit 'x' %s; it needs x's number "
                        "of dims and sizes no larger than x's except along dim %d",
                        cn_tensor_str(index, a, sizeof a), cn_tensor_str(x, b, sizeof b), d);
}

cn_tensor *cn_gather(cn_tensor *x, int dim, cn_tensor *index) {
    const char *op = "gather";
    cn_tensor *in[2] = {x, index};
    const char *names[2] = {"x", "index"};
    if (!x || !index) {
        cn__null_arg(op, !x ? "x" : "index");
        return NULL;
    }
    int d = cn__norm_dim(op, "dim", dim, x->ndim);
    if (d < 0 || check_index(op, index) != CN_OK || check_index_shape(op, x, index, d) != CN_OK)
        return NULL;
    int64_t ints[1] = {d};
    return run_index_op(CN_OP_GATHER, in, names, 2, index->shape, index->ndim, x->dtype, ints, 1);
}

cn_tensor *cn_scatter_add(cn_tensor *x, int dim, cn_tensor *index, cn_tensor *src) {
    const char *op = "scatter_add";
    cn_tensor *in[3] = {x, index, src};
    const char *names[3] = {"x", "index", "src"};
    for (int i = 0; i < 3; i++) {
        if (!in[i]) {
            cn__null_arg(op, names[i]);
            return NULL;
        }
    }
    int d = cn__norm_dim(op, "dim", dim, x->ndim);
    if (d < 0 || check_index(op, index) != CN_OK ||
        cn__check_kind(op, "x", x, CN_KINDS_NUMERIC) != CN_OK ||
        cn__check_same_dtype(op, "x", x, "src", src) != CN_OK ||
        check_index_shape(op, x, index, d) != CN_OK)
        return NULL;
    if (src->ndim != index->ndim ||
        memcmp(src->shape, index->shape, sizeof(int64_t) * (size_t)index->ndim) != 0) {
        char a[128], b[128];
        cn_set_error(CN_ERR_SHAPE, op, "'src' %s and 'index' %s differ in shape; give src the "
                     "index's shape", cn_tensor_str(src, a, sizeof a),
                     cn_tensor_str(index, b, sizeof b));
        return NULL;
    }
    int64_t ints[1] = {d};
    return run_index_op(CN_OP_SCATTER_ADD, in, names, 3, x->shape, x->ndim, x->dtype, ints, 1);
}

cn_tensor *cn_index_select(cn_tensor *x, int dim, cn_tensor *index) {
    const char *op = "index_select";
    cn_tensor *in[2] = {x, index};
    const char *names[2] = {"x", "index"};
    if (!x || !index) {
        cn__null_arg(op, !x ? "x" : "index");
        return NULL;
    }
    int d = cn__norm_dim(op, "dim", dim, x->ndim);
    if (d < 0 || check_index(op, index) != CN_OK) return NULL;
    if (index->ndim != 1) {
        char a[128];
        cn_set_error(CN_ERR_SHAPE, op, "'index' is %s; it must be 1-D (flatten it with "
                     "cn_reshape)", cn_tensor_str(index, a, sizeof a));
        return NULL;
    }
    if (x->ndim == 0) {
        cn_set_error(CN_ERR_SHAPE, op, "'x' is 0-d; select from a tensor with at least one dim");
        return NULL;
    }
    int64_t shape[CN_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[d] = index->shape[0];
    int64_t ints[1] = {d};
    return run_index_op(CN_OP_INDEX_SELECT, in, names, 2, shape, x->ndim, x->dtype, ints, 1);
}

cn_tensor *cn_one_hot(cn_tensor *index, int64_t num_classes, cn_dtype dtype) {
    const char *op = "one_hot";
    cn_tensor *in[1] = {index};
    const char *names[1] = {"index"};
    if (!index) {
        cn__null_arg(op, "index");
        return NULL;
    }
    if (cn__check_kind(op, "index", index, CN_KINDS_INT) != CN_OK) return NULL;
    if (num_classes <= 0) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "num_classes = %lld; it must be positive",
                     (long long)num_classes);
        return NULL;
    }
    if (index->ndim == CN_MAX_DIMS) {
        cn_set_error(CN_ERR_SHAPE, op, "'index' already has %d dims; the result needs one more",
                     CN_MAX_DIMS);
        return NULL;
    }
    if (cn_dtype_size(dtype) == 0) {
        cn_set_error(CN_ERR_DTYPE, op, "dtype value %d is not a cn_dtype", (int)dtype);
        return NULL;
    }
    int64_t shape[CN_MAX_DIMS];
    memcpy(shape, index->shape, sizeof(int64_t) * (size_t)index->ndim);
    shape[index->ndim] = num_classes;
    int64_t ints[1] = {num_classes};
    return run_index_op(CN_OP_ONE_HOT, in, names, 1, shape, index->ndim + 1, dtype, ints, 1);
}

/* For the other indexing front-ends (ops_index.c): the same index check and launch. */
cn_status cn__check_index_i64(const char *op, const cn_tensor *index) {
    return check_index(op, index);
}

cn_tensor *cn__run_index_op(cn_op op, cn_tensor *const *in, const char *const *names, int n,
                            const int64_t *shape, int ndim, cn_dtype dtype, const int64_t *ints,
                            int n_ints) {
    return run_index_op(op, in, names, n, shape, ndim, dtype, ints, n_ints);
}
