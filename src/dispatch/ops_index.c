/* Indexing front-ends of issue 16: masked_fill, tril / triu, flip, repeat, scatter, slice_assign,
 * index_copy and index_add. Each checks its arguments (dims, index dtype and shape, mask kind and
 * broadcast, sizes), computes the output's shape, and runs its kernel through the router. Index
 * values themselves are checked by the kernels, before they write (as for gather). */
#include <string.h>

#include "cinder/memory.h"
#include "cinder/ops.h"
#include "core/error_internal.h"
#include "dispatch/index_internal.h"
#include "dispatch/router.h"

/* ---- masked_fill ------------------------------------------------------------------------------
 */

/* The checks masked_fill and masked_select share: x and a bool mask that broadcast together
 * into shape (ndim *nd). */
static cn_status mask_broadcast(const char *op, cn_tensor *x, cn_tensor *mask, int64_t *shape,
                                int *nd) {
    if (!x || !mask) {
        cn__null_arg(op, !x ? "x" : "mask");
        return cn_last_status();
    }
    if (cn__check_kind(op, "mask", mask, CN_KINDS_BOOL) != CN_OK) return cn_last_status();
    return cn__broadcast_shapes(op, "x", x, "mask", mask, shape, nd);
}

cn_tensor *cn_masked_fill(cn_tensor *x, cn_tensor *mask, double value) {
    const char *op = "masked_fill";
    cn_tensor *in[2] = {x, mask};
    const char *names[2] = {"x", "mask"};
    int64_t shape[CN_MAX_DIMS];
    int nd;
    if (mask_broadcast(op, x, mask, shape, &nd) != CN_OK) return NULL;
    if (nd != x->ndim || memcmp(shape, x->shape, sizeof(int64_t) * (size_t)nd) != 0) {
        char a[128], b[128];
        cn_set_error(CN_ERR_SHAPE, op,
                     "'mask' %s does not broadcast to 'x' %s: the result keeps "
                     "x's shape; give the mask x's dims or sizes of 1",
                     cn_tensor_str(mask, a, sizeof a), cn_tensor_str(x, b, sizeof b));
        return NULL;
    }
    if (cn__check_int_scalar(op, "value", value, x->dtype) != CN_OK) return NULL;
    cn_device dev;
    const cn_backend *b = cn__route(op, in, names, 2, &dev);
    if (!b) return NULL;
    cn_tensor *out = cn__tensor_alloc(op, x->shape, x->ndim, x->dtype, dev);
    if (!out) return NULL;
    cn_view views[2];
    cn__tensor_as_view(x, &views[0]);
    cn__broadcast_view(mask, x->shape, x->ndim, &views[1]);
    double reals[1] = {value};
    if (cn__launch(b, dev, CN_OP_MASKED_FILL, views, 2, &out, 1, NULL, 0, reals, 1) != CN_OK) {
        cn_release(out);
        return NULL;
    }
    return cn__record(CN_OP_MASKED_FILL, out, in, 2, NULL, 0, reals, 1);
}

/* ---- tril and triu ----------------------------------------------------------------------------
 */

static cn_tensor *triangle(cn_op op, cn_tensor *x, int64_t diagonal) {
    const char *name = cn_op_name(op);
    if (!x) {
        cn__null_arg(name, "x");
        return NULL;
    }
    if (x->ndim < 2) {
        char a[128];
        cn_set_error(CN_ERR_SHAPE, name,
                     "'x' %s has fewer than 2 dims; the triangle is taken over "
                     "the last two (reshape a vector to [1, n])",
                     cn_tensor_str(x, a, sizeof a));
        return NULL;
    }
    int64_t ints[1] = {diagonal};
    return cn__run_index_op(op, &x, (const char *const[]){"x"}, 1, x->shape, x->ndim, x->dtype,
                            ints, 1);
}

cn_tensor *cn_tril(cn_tensor *x, int64_t diagonal) { return triangle(CN_OP_TRIL, x, diagonal); }
cn_tensor *cn_triu(cn_tensor *x, int64_t diagonal) { return triangle(CN_OP_TRIU, x, diagonal); }

/* ---- flip and repeat --------------------------------------------------------------------------
 */

cn_tensor *cn_flip(cn_tensor *x, const int *dims, int n) {
    const char *op = "flip";
    if (!x) {
        cn__null_arg(op, "x");
        return NULL;
    }
    if (n < 0 || n > x->ndim) {
        cn_set_error(CN_ERR_INVALID_ARG, op,
                     "n = %d dims to flip for a tensor of %d dims; name "
                     "each dim at most once",
                     n, x->ndim);
        return NULL;
    }
    if (n > 0 && !dims) {
        cn__null_arg(op, "dims");
        return NULL;
    }
    int64_t ints[CN_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        int d = cn__norm_dim(op, "dims", dims[i], x->ndim);
        if (d < 0) return NULL;
        for (int j = 0; j < i; j++)
            if (ints[j] == d) {
                cn_set_error(CN_ERR_INVALID_ARG, op,
                             "dim %d appears twice in dims (entries %d "
                             "and %d); name each dim once",
                             d, j, i);
                return NULL;
            }
        ints[i] = d;
    }
    return cn__run_index_op(CN_OP_FLIP, &x, (const char *const[]){"x"}, 1, x->shape, x->ndim,
                            x->dtype, ints, n);
}

cn_tensor *cn_repeat(cn_tensor *x, const int64_t *repeats, int n) {
    const char *op = "repeat";
    if (!x) {
        cn__null_arg(op, "x");
        return NULL;
    }
    if (n < x->ndim || n > CN_MAX_DIMS) {
        char a[128];
        cn_set_error(CN_ERR_SHAPE, op,
                     "%d repeats for 'x' %s: give one per dim of x, or more "
                     "(up to %d) to add leading dims",
                     n, cn_tensor_str(x, a, sizeof a), CN_MAX_DIMS);
        return NULL;
    }
    if (n > 0 && !repeats) {
        cn__null_arg(op, "repeats");
        return NULL;
    }
    int64_t shape[CN_MAX_DIMS];
    for (int d = 0; d < n; d++) {
        int xd = d - (n - x->ndim);
        int64_t size = xd >= 0 ? x->shape[xd] : 1;
        if (repeats[d] < 0) {
            cn_set_error(CN_ERR_INVALID_ARG, op, "repeats[%d] = %lld; repeats must be >= 0", d,
                         (long long)repeats[d]);
            return NULL;
        }
        if (__builtin_mul_overflow(size, repeats[d], &shape[d])) {
            cn_set_error(CN_ERR_OVERFLOW, op,
                         "repeats[%d] = %lld times size %lld passes int64; "
                         "repeat less",
                         d, (long long)repeats[d], (long long)size);
            return NULL;
        }
    }
    return cn__run_index_op(CN_OP_REPEAT, &x, (const char *const[]){"x"}, 1, shape, n, x->dtype,
                            repeats, n);
}

/* ---- scatter ----------------------------------------------------------------------------------
 */

cn_tensor *cn_scatter(cn_tensor *x, int dim, cn_tensor *index, cn_tensor *src) {
    const char *op = "scatter";
    cn_tensor *in[3] = {x, index, src};
    const char *names[3] = {"x", "index", "src"};
    for (int i = 0; i < 3; i++)
        if (!in[i]) {
            cn__null_arg(op, names[i]);
            return NULL;
        }
    int d = cn__norm_dim(op, "dim", dim, x->ndim);
    if (d < 0 || cn__check_index_i64(op, index) != CN_OK ||
        cn__check_same_dtype(op, "x", x, "src", src) != CN_OK)
        return NULL;
    int ok = index->ndim == x->ndim;
    for (int k = 0; ok && k < x->ndim; k++)
        if (k != d && index->shape[k] > x->shape[k]) ok = 0;
    if (!ok) {
        char a[128], b[128];
        cn_set_error(CN_ERR_SHAPE, op,
                     "'index' %s does not fit 'x' %s; it needs x's number of "
                     "dims and sizes no larger than x's except along dim %d",
                     cn_tensor_str(index, a, sizeof a), cn_tensor_str(x, b, sizeof b), d);
        return NULL;
    }
    if (src->ndim != index->ndim ||
        memcmp(src->shape, index->shape, sizeof(int64_t) * (size_t)index->ndim) != 0) {
        char a[128], b[128];
        cn_set_error(CN_ERR_SHAPE, op,
                     "'src' %s and 'index' %s differ in shape; give src the "
                     "index's shape",
                     cn_tensor_str(src, a, sizeof a), cn_tensor_str(index, b, sizeof b));
        return NULL;
    }
    int64_t ints[1] = {d};
    return cn__run_index_op(CN_OP_SCATTER, in, names, 3, x->shape, x->ndim, x->dtype, ints, 1);
}

/* ---- slice_assign -----------------------------------------------------------------------------
 */

cn_tensor *cn_slice_assign(cn_tensor *x, cn_tensor *values, int dim, int64_t start, int64_t end,
                           int64_t step) {
    const char *op = "slice_assign";
    cn_tensor *in[2] = {x, values};
    const char *names[2] = {"x", "values"};
    if (!x || !values) {
        cn__null_arg(op, !x ? "x" : "values");
        return NULL;
    }
    if (x->ndim == 0) {
        cn_set_error(CN_ERR_SHAPE, op, "'x' is 0-d; assign into a tensor with at least one dim");
        return NULL;
    }
    int d = cn__norm_dim(op, "dim", dim, x->ndim);
    if (d < 0 || cn__check_same_dtype(op, "x", x, "values", values) != CN_OK) return NULL;
    if (step <= 0) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "step = %lld; the step must be positive",
                     (long long)step);
        return NULL;
    }
    /* cn_slice's bounds: negative from the end, clamped to [0, size] */
    int64_t size = x->shape[d];
    if (start < 0) start += size;
    if (end < 0) end += size;
    if (start < 0) start = 0;
    if (start > size) start = size;
    if (end < start) end = start;
    if (end > size) end = size;
    int64_t want[CN_MAX_DIMS];
    memcpy(want, x->shape, sizeof want);
    want[d] = end == start ? 0 : (end - start - 1) / step + 1;
    if (values->ndim != x->ndim ||
        memcmp(values->shape, want, sizeof(int64_t) * (size_t)x->ndim) != 0) {
        char a[128], b[128];
        cn_set_error(CN_ERR_SHAPE, op,
                     "'values' %s does not have the slice's shape %s (dim %d, "
                     "%lld:%lld:%lld); give values exactly that shape (cn_expand broadcasts)",
                     cn_tensor_str(values, a, sizeof a), cn__shape_str(want, x->ndim, b, sizeof b),
                     d, (long long)start, (long long)end, (long long)step);
        return NULL;
    }
    int64_t ints[3] = {d, start, step};
    return cn__run_index_op(CN_OP_SLICE_ASSIGN, in, names, 2, x->shape, x->ndim, x->dtype, ints, 3);
}

/* ---- index_copy and index_add -----------------------------------------------------------------
 */

static cn_tensor *index_put(cn_op op, cn_tensor *x, int dim, cn_tensor *index, cn_tensor *src) {
    const char *name = cn_op_name(op);
    cn_tensor *in[3] = {x, index, src};
    const char *names[3] = {"x", "index", "src"};
    for (int i = 0; i < 3; i++)
        if (!in[i]) {
            cn__null_arg(name, names[i]);
            return NULL;
        }
    if (x->ndim == 0) {
        cn_set_error(CN_ERR_SHAPE, name, "'x' is 0-d; index a tensor with at least one dim");
        return NULL;
    }
    int d = cn__norm_dim(name, "dim", dim, x->ndim);
    if (d < 0 || cn__check_index_i64(name, index) != CN_OK ||
        (op == CN_OP_INDEX_ADD && cn__check_kind(name, "x", x, CN_KINDS_NUMERIC) != CN_OK) ||
        cn__check_same_dtype(name, "x", x, "src", src) != CN_OK)
        return NULL;
    if (index->ndim != 1) {
        char a[128];
        cn_set_error(CN_ERR_SHAPE, name,
                     "'index' is %s; it must be 1-D (flatten it with "
                     "cn_reshape)",
                     cn_tensor_str(index, a, sizeof a));
        return NULL;
    }
    int64_t want[CN_MAX_DIMS];
    memcpy(want, x->shape, sizeof want);
    want[d] = index->shape[0];
    if (src->ndim != x->ndim || memcmp(src->shape, want, sizeof(int64_t) * (size_t)x->ndim) != 0) {
        char a[128], b[128];
        cn_set_error(CN_ERR_SHAPE, name,
                     "'src' %s must have x's shape with len(index) at dim "
                     "%d: %s",
                     cn_tensor_str(src, a, sizeof a), d, cn__shape_str(want, x->ndim, b, sizeof b));
        return NULL;
    }
    int64_t ints[1] = {d};
    return cn__run_index_op(op, in, names, 3, x->shape, x->ndim, x->dtype, ints, 1);
}

cn_tensor *cn_index_copy(cn_tensor *x, int dim, cn_tensor *index, cn_tensor *src) {
    return index_put(CN_OP_INDEX_COPY, x, dim, index, src);
}

cn_tensor *cn_index_add(cn_tensor *x, int dim, cn_tensor *index, cn_tensor *src) {
    return index_put(CN_OP_INDEX_ADD, x, dim, index, src);
}

/* ---- unfold -----------------------------------------------------------------------------------
 */

cn_tensor *cn_unfold(cn_tensor *x, int dim, int64_t size, int64_t step) {
    const char *op = "unfold";
    if (!x) {
        cn__null_arg(op, "x");
        return NULL;
    }
    if (x->ndim == 0 || x->ndim == CN_MAX_DIMS) {
        char a[128];
        cn_set_error(CN_ERR_SHAPE, op,
                     "'x' %s: unfold needs 1 to %d dims (the result has one "
                     "more); reshape x",
                     cn_tensor_str(x, a, sizeof a), CN_MAX_DIMS - 1);
        return NULL;
    }
    int d = cn__norm_dim(op, "dim", dim, x->ndim);
    if (d < 0) return NULL;
    if (size < 0 || size > x->shape[d]) {
        cn_set_error(CN_ERR_INVALID_ARG, op,
                     "size = %lld for dim %d of size %lld; the window "
                     "must fit: 0 <= size <= %lld",
                     (long long)size, d, (long long)x->shape[d], (long long)x->shape[d]);
        return NULL;
    }
    if (step < 1) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "step = %lld; the step must be >= 1", (long long)step);
        return NULL;
    }
    int64_t shape[CN_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[d] = (x->shape[d] - size) / step + 1;
    shape[x->ndim] = size;
    int64_t ints[3] = {d, size, step};
    return cn__run_index_op(CN_OP_UNFOLD, &x, (const char *const[]){"x"}, 1, shape, x->ndim + 1,
                            x->dtype, ints, 3);
}

/* ---- data-dependent shapes: nonzero and masked_select ---------------------------------------- */

/* The number of true entries of the bool tensor m (read back to the host), or -1 with the error
 * set. */
static int64_t count_true(cn_tensor *m) {
    cn_scope_begin();
    int64_t count = -1;
    cn_tensor *n = cn_sum(cn_cast(m, CN_I64));
    if (n && cn_read(n, &count, sizeof count) != CN_OK) count = -1;
    cn_scope_end();
    return count;
}

cn_tensor *cn_nonzero(cn_tensor *x) {
    const char *op = "nonzero";
    if (!x) {
        cn__null_arg(op, "x");
        return NULL;
    }
    cn_scope_begin();
    int64_t count = count_true(cn_cast(x, CN_BOOL));
    cn_scope_end();
    if (count < 0) return NULL;
    int64_t shape[2] = {count, x->ndim};
    return cn__run_index_op(CN_OP_NONZERO, &x, (const char *const[]){"x"}, 1, shape, 2, CN_I64,
                            NULL, 0);
}

cn_tensor *cn_masked_select(cn_tensor *x, cn_tensor *mask) {
    const char *op = "masked_select";
    cn_tensor *in[2] = {x, mask};
    const char *names[2] = {"x", "mask"};
    int64_t shape[CN_MAX_DIMS];
    int nd;
    if (mask_broadcast(op, x, mask, shape, &nd) != CN_OK) return NULL;
    cn_device dev;
    const cn_backend *b = cn__route(op, in, names, 2, &dev);
    if (!b) return NULL;
    cn_scope_begin();
    int64_t count = count_true(cn_expand(mask, shape, nd));
    cn_scope_end();
    if (count < 0) return NULL;
    cn_tensor *out = cn__tensor_alloc(op, &count, 1, x->dtype, dev);
    if (!out) return NULL;
    cn_view views[2];
    cn__broadcast_view(x, shape, nd, &views[0]);
    cn__broadcast_view(mask, shape, nd, &views[1]);
    if (cn__launch(b, dev, CN_OP_MASKED_SELECT, views, 2, &out, 1, NULL, 0, NULL, 0) != CN_OK) {
        cn_release(out);
        return NULL;
    }
    return cn__record(CN_OP_MASKED_SELECT, out, in, 2, NULL, 0, NULL, 0);
}

/* ---- gather_nd and scatter_nd -----------------------------------------------------------------
 */

/* index fits x as [B.., K] tuples; writes the shape B.. + x's shape past K to shape. Returns its
 * ndim, or -1 with the error set. */
static int nd_shape(const char *op, const cn_tensor *x, const cn_tensor *index, int64_t *shape) {
    if (cn__check_index_i64(op, index) != CN_OK) return -1;
    char a[128], b[128];
    int64_t k = index->ndim ? index->shape[index->ndim - 1] : 0;
    if (index->ndim == 0 || k < 1 || k > x->ndim) {
        cn_set_error(CN_ERR_SHAPE, op,
                     "'index' %s for 'x' %s: the last dim of index holds tuples "
                     "of K coordinates, 1 <= K <= %d (x's dims)",
                     cn_tensor_str(index, a, sizeof a), cn_tensor_str(x, b, sizeof b), x->ndim);
        return -1;
    }
    int nd = index->ndim - 1 + x->ndim - (int)k;
    if (nd > CN_MAX_DIMS) {
        cn_set_error(CN_ERR_SHAPE, op,
                     "'index' %s and 'x' %s make a result of %d dims (at most "
                     "%d); flatten index's leading dims",
                     cn_tensor_str(index, a, sizeof a), cn_tensor_str(x, b, sizeof b), nd,
                     CN_MAX_DIMS);
        return -1;
    }
    memcpy(shape, index->shape, sizeof(int64_t) * (size_t)(index->ndim - 1));
    memcpy(shape + index->ndim - 1, x->shape + k, sizeof(int64_t) * (size_t)(x->ndim - k));
    return nd;
}

cn_tensor *cn_gather_nd(cn_tensor *x, cn_tensor *index) {
    const char *op = "gather_nd";
    cn_tensor *in[2] = {x, index};
    const char *names[2] = {"x", "index"};
    if (!x || !index) {
        cn__null_arg(op, !x ? "x" : "index");
        return NULL;
    }
    int64_t shape[CN_MAX_DIMS];
    int nd = nd_shape(op, x, index, shape);
    if (nd < 0) return NULL;
    return cn__run_index_op(CN_OP_GATHER_ND, in, names, 2, shape, nd, x->dtype, NULL, 0);
}

/* The kernels read ints[0] by these numbers (backend.h's contract for scatter_nd). */
_Static_assert(CN_SCATTER_ASSIGN == 0 && CN_SCATTER_ADD == 1 && CN_SCATTER_MUL == 2 &&
                   CN_SCATTER_MIN == 3 && CN_SCATTER_MAX == 4,
               "cn_scatter_reduce's values are the backend ABI of scatter_nd");

cn_tensor *cn_scatter_nd(cn_tensor *x, cn_tensor *index, cn_tensor *updates,
                         cn_scatter_reduce reduce) {
    const char *op = "scatter_nd";
    cn_tensor *in[3] = {x, index, updates};
    const char *names[3] = {"x", "index", "updates"};
    for (int i = 0; i < 3; i++)
        if (!in[i]) {
            cn__null_arg(op, names[i]);
            return NULL;
        }
    if ((int)reduce < CN_SCATTER_ASSIGN || (int)reduce > CN_SCATTER_MAX) {
        cn_set_error(CN_ERR_INVALID_ARG, op,
                     "reduce = %d is not a cn_scatter_reduce; use "
                     "CN_SCATTER_ASSIGN, _ADD, _MUL, _MIN or _MAX",
                     (int)reduce);
        return NULL;
    }
    if (cn__check_same_dtype(op, "x", x, "updates", updates) != CN_OK ||
        (reduce != CN_SCATTER_ASSIGN && cn__check_kind(op, "x", x, CN_KINDS_NUMERIC) != CN_OK))
        return NULL;
    int64_t shape[CN_MAX_DIMS];
    int nd = nd_shape(op, x, index, shape);
    if (nd < 0) return NULL;
    if (updates->ndim != nd || memcmp(updates->shape, shape, sizeof(int64_t) * (size_t)nd) != 0) {
        char a[128], b[128];
        cn_set_error(CN_ERR_SHAPE, op,
                     "'updates' %s must have index's leading dims and x's dims "
                     "past the tuples: %s",
                     cn_tensor_str(updates, a, sizeof a), cn__shape_str(shape, nd, b, sizeof b));
        return NULL;
    }
    int64_t ints[1] = {reduce};
    return cn__run_index_op(CN_OP_SCATTER_ND, in, names, 3, x->shape, x->ndim, x->dtype, ints, 1);
}
