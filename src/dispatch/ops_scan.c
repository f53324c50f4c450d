/* Front-ends of the scans and sorts along one dim (cumsum, cumprod, cummax, cummin, sort and
 * what is built on them: argsort, topk), max / min along a dim with their indices, any / all,
 * max_abs, and the router entries of the kernels that their gradients use (the reverse cumsum,
 * cumprod_backward).
 *
 * Two outputs. The ops that find elements (cummax, cummin, sort, topk, max / min with indices)
 * return the values and write the i64 indices to *indices, a new reference the caller releases
 * (NULL: not wanted). One kernel writes both. The values are recorded for autodiff like any other
 * output; the indices are int and never tracked. The gradient goes to the selected elements
 * (scattered back to the indices, added where one element is selected several times), the
 * formula finding the indices again from the saved input, as max's does. */
#include <string.h>

#include "cinder/ops.h"
#include "core/error_internal.h"
#include "dispatch/backward_ops.h"
#include "dispatch/router.h"

static int has_indices(cn_op op) {
    return op == CN_OP_CUMMAX || op == CN_OP_CUMMIN || op == CN_OP_SORT;
}

/* Runs scan `op` along dim of x (a 0-d x counts as shape [1]) with attribute ints[1] = extra
 * (cumsum: reverse; sort: descending). Returns the values; *indices gets the i64 indices of the
 * ops that have them, when indices is non-NULL. `name` names the public call in messages. */
static cn_tensor *scan(cn_op op, const char *name, cn_tensor *x, int dim, int64_t extra,
                       cn_tensor **indices) {
    if (indices) *indices = NULL;
    cn_device dev;
    const char *names[1] = {"x"};
    const cn_backend *b = cn__route(name, &x, names, 1, &dev);
    if (!b || cn__check_kind(name, "x", x, CN_KINDS_NUMERIC) != CN_OK) return NULL;
    int d = cn__norm_dim(name, "dim", dim, x->ndim);
    if (d < 0) return NULL;
    cn_view in;
    cn__tensor_as_view(x, &in);
    if (x->ndim == 0) { /* view the scalar as [1] */
        in.ndim = 1;
        in.shape[0] = 1;
        in.strides[0] = 1;
    }
    cn_tensor *out[2] = {NULL, NULL};
    int n_out = has_indices(op) ? 2 : 1;
    out[0] = cn__tensor_alloc(name, in.shape, in.ndim, x->dtype, dev);
    if (out[0] && n_out == 2) out[1] = cn__tensor_alloc(name, in.shape, in.ndim, CN_I64, dev);
    int64_t ints[2] = {d, extra};
    int n_ints = cn__op_decl_of(op)->n_ints;
    if (!out[0] || (n_out == 2 && !out[1]) ||
        cn__launch(b, dev, op, &in, 1, out, n_out, ints, n_ints, NULL, 0) != CN_OK) {
        cn_release(out[0]);
        cn_release(out[1]);
        return NULL;
    }
    if (x->ndim == 0)
        for (int i = 0; i < n_out; i++) cn__drop_dim(out[i], 0);
    cn_tensor *values = cn__record(op, out[0], &x, 1, ints, n_ints, NULL, 0);
    if (values && indices)
        *indices = out[1];
    else
        cn_release(out[1]);
    return values;
}

cn_tensor *cn_cumsum(cn_tensor *x, int dim) {
    return scan(CN_OP_CUMSUM, "cumsum", x, dim, 0, NULL);
}
cn_tensor *cn_cumprod(cn_tensor *x, int dim) {
    return scan(CN_OP_CUMPROD, "cumprod", x, dim, 0, NULL);
}
cn_tensor *cn_cummax(cn_tensor *x, int dim, cn_tensor **indices) {
    return scan(CN_OP_CUMMAX, "cummax", x, dim, 0, indices);
}
cn_tensor *cn_cummin(cn_tensor *x, int dim, cn_tensor **indices) {
    return scan(CN_OP_CUMMIN, "cummin", x, dim, 0, indices);
}
cn_tensor *cn_sort(cn_tensor *x, int dim, int descending, cn_tensor **indices) {
    return scan(CN_OP_SORT, "sort", x, dim, descending != 0, indices);
}

cn_tensor *cn_argsort(cn_tensor *x, int dim, int descending) {
    cn_tensor *idx = NULL;
    cn_tensor *values = scan(CN_OP_SORT, "argsort", x, dim, descending != 0, &idx);
    cn_release(values);
    return values ? idx : NULL;
}

/* The first k along dim of the stable sort (descending when largest): the k largest (smallest)
 * values, the first of equal ones first. */
cn_tensor *cn_topk(cn_tensor *x, int64_t k, int dim, int largest, int sorted,
                   cn_tensor **indices) {
    const char *name = "topk";
    (void)sorted; /* always sorted: the first k of a sort */
    if (indices) *indices = NULL;
    if (!x) {
        cn__null_arg(name, "x");
        return NULL;
    }
    CN__CHECK_LIVE(name, x);
    int d = cn__norm_dim(name, "dim", dim, x->ndim);
    if (d < 0) return NULL;
    int64_t size = x->ndim ? x->shape[d] : 1;
    if (k < 0 || k > size) {
        char a[128];
        cn_set_error(CN_ERR_INVALID_ARG, name, "k = %lld is out of range for dim %d of 'x' %s, "
                     "of size %lld; pass k in [0, %lld]", (long long)k, d,
                     cn_tensor_str(x, a, sizeof a), (long long)size, (long long)size);
        return NULL;
    }
    cn_tensor *all_idx = NULL;
    cn_tensor *all = scan(CN_OP_SORT, name, x, d, largest != 0, &all_idx);
    if (!all) return NULL;
    /* a 0-d x is one element: k = 1 keeps it, k = 0 gives [0] (torch.topk does the same) */
    cn_tensor *values = NULL, *idx = NULL, *vs = NULL, *is = NULL;
    if (cn_ndim(all) == 0 && k == 1) {
        values = cn_retain(all);
        idx = cn_retain(all_idx);
    } else {
        int64_t one = 1;
        cn_tensor *va = cn_ndim(all) ? cn_retain(all) : cn_reshape(all, &one, 1);
        cn_tensor *ia = cn_ndim(all) ? cn_retain(all_idx) : cn_reshape(all_idx, &one, 1);
        vs = va ? cn_slice(va, d, 0, k, 1) : NULL;
        is = ia ? cn_slice(ia, d, 0, k, 1) : NULL;
        values = vs ? cn_contiguous(vs) : NULL;
        idx = is ? cn_contiguous(is) : NULL;
        cn_release(va);
        cn_release(ia);
    }
    cn_release(vs);
    cn_release(is);
    cn_release(all);
    cn_release(all_idx);
    if (!values || !idx) {
        cn_release(values);
        cn_release(idx);
        return NULL;
    }
    if (indices)
        *indices = idx;
    else
        cn_release(idx);
    return values;
}

/* ---- max / min along a dim with their indices ----------------------------------------------- */

/* The values are max_dim's (recorded as max: the gradient goes to the first extreme, which is
 * the index argmax gives), the indices argmax_dim's: the same rule picks both. */
static cn_tensor *extreme_with_indices(int is_max, cn_tensor *x, int dim, int keepdim,
                                       cn_tensor **indices) {
    if (indices) *indices = NULL;
    cn_tensor *values = is_max ? cn_max_dim(x, dim, keepdim) : cn_min_dim(x, dim, keepdim);
    if (!values || !indices) return values;
    *indices = is_max ? cn_argmax_dim(x, dim, keepdim) : cn_argmin_dim(x, dim, keepdim);
    if (!*indices) {
        cn_release(values);
        return NULL;
    }
    return values;
}

cn_tensor *cn_max_dim_indices(cn_tensor *x, int dim, int keepdim, cn_tensor **indices) {
    return extreme_with_indices(1, x, dim, keepdim, indices);
}
cn_tensor *cn_min_dim_indices(cn_tensor *x, int dim, int keepdim, cn_tensor **indices) {
    return extreme_with_indices(0, x, dim, keepdim, indices);
}

/* ---- any, all ---------------------------------------------------------------------------- */

static cn_tensor *any_all_dim(cn_op op, cn_tensor *x, int dim, int keepdim) {
    const char *name = cn_op_name(op);
    cn_device dev;
    const char *names[1] = {"x"};
    const cn_backend *b = cn__route(name, &x, names, 1, &dev);
    if (!b) return NULL;
    int d = cn__norm_dim(name, "dim", dim, x->ndim);
    if (d < 0) return NULL;
    cn_view in;
    cn__tensor_as_view(x, &in);
    if (x->ndim == 0) {
        in.ndim = 1;
        in.shape[0] = 1;
        in.strides[0] = 1;
    }
    int64_t shape[CN_MAX_DIMS];
    memcpy(shape, in.shape, sizeof(int64_t) * (size_t)in.ndim);
    shape[d] = 1;
    cn_tensor *out = cn__tensor_alloc(name, shape, in.ndim, CN_BOOL, dev);
    if (!out) return NULL;
    int64_t ints[1] = {d};
    if (cn__launch(b, dev, op, &in, 1, &out, 1, ints, 1, NULL, 0) != CN_OK) {
        cn_release(out);
        return NULL;
    }
    if (!keepdim || x->ndim == 0) cn__drop_dim(out, d);
    return out; /* bool: nothing to record */
}

static cn_tensor *any_all(cn_op op, cn_tensor *x) {
    if (!x) {
        cn__null_arg(cn_op_name(op), "x");
        return NULL;
    }
    int64_t flat = -1;
    cn_tensor *f = cn_reshape(x, &flat, 1);
    if (!f) return NULL;
    cn_tensor *out = any_all_dim(op, f, 0, 0);
    cn_release(f);
    return out;
}

cn_tensor *cn_any(cn_tensor *x) { return any_all(CN_OP_ANY, x); }
cn_tensor *cn_any_dim(cn_tensor *x, int dim, int keepdim) {
    return any_all_dim(CN_OP_ANY, x, dim, keepdim);
}
cn_tensor *cn_all(cn_tensor *x) { return any_all(CN_OP_ALL, x); }
cn_tensor *cn_all_dim(cn_tensor *x, int dim, int keepdim) {
    return any_all_dim(CN_OP_ALL, x, dim, keepdim);
}

/* ---- max_abs ----------------------------------------------------------------------------- */

cn_tensor *cn_max_abs(cn_tensor *x) {
    cn_tensor *a = cn_abs(x);
    cn_tensor *m = a ? cn_max(a) : NULL;
    cn_release(a);
    return m;
}

cn_tensor *cn_max_abs_dim(cn_tensor *x, int dim, int keepdim) {
    cn_tensor *a = cn_abs(x);
    cn_tensor *m = a ? cn_max_dim(a, dim, keepdim) : NULL;
    cn_release(a);
    return m;
}

/* ---- the kernels of the gradients ----------------------------------------------------------- */

cn_tensor *cn__cumsum_reverse(cn_tensor *g, int dim) {
    return scan(CN_OP_CUMSUM, "cumsum", g, dim, 1, NULL);
}

cn_tensor *cn__cumprod_backward(cn_tensor *g, cn_tensor *x, int dim) {
    const char *op = "cumprod_backward";
    cn_tensor *in[2] = {g, x};
    const char *names[2] = {"g", "x"};
    cn_device dev;
    const cn_backend *b = cn__route(op, in, names, 2, &dev);
    if (!b || cn__check_same_dtype(op, "g", g, "x", x) != CN_OK ||
        cn__check_kind(op, "x", x, CN_KINDS_FLOAT) != CN_OK)
        return NULL;
    if (g->ndim != x->ndim || memcmp(g->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim)) {
        char a[128], c[128];
        cn_set_error(CN_ERR_SHAPE, op, "'g' %s and 'x' %s differ in shape; pass the gradient of "
                     "cumprod(x)", cn_tensor_str(g, a, sizeof a), cn_tensor_str(x, c, sizeof c));
        return NULL;
    }
    int d = cn__norm_dim(op, "dim", dim, x->ndim);
    if (d < 0) return NULL;
    cn_view v[2];
    for (int i = 0; i < 2; i++) {
        cn__tensor_as_view(in[i], &v[i]);
        if (in[i]->ndim == 0) {
            v[i].ndim = 1;
            v[i].shape[0] = 1;
            v[i].strides[0] = 1;
        }
    }
    cn_tensor *out = cn__tensor_alloc(op, v[1].shape, v[1].ndim, x->dtype, dev);
    if (!out) return NULL;
    int64_t ints[1] = {d};
    if (cn__launch(b, dev, CN_OP_CUMPROD_BACKWARD, v, 2, &out, 1, ints, 1, NULL, 0) != CN_OK) {
        cn_release(out);
        return NULL;
    }
    if (x->ndim == 0) cn__drop_dim(out, 0);
    return out;
}
