/* CUDA kernels for indexing: gather, scatter_add, scatter, index_select, index_copy, index_add
 * and one_hot.
 *
 * As on the CPU (cpu/index.c), every index value is checked against its bound before anything is
 * written, so a bad index is a clean CN_ERR_INDEX with the CPU's exact message, never an
 * out-of-bounds access: a first kernel records the lowest row-major position holding a bad value,
 * and the host reads it back (this waits for the GPU). Elements are moved by size, so the data
 * kernels serve every dtype. scatter_add gives each thread one line along dim and adds in index
 * order: deterministic, and equal to the CPU's result. */
#include <stdio.h>
#include <string.h>

#include "backends/cuda/common.cuh"
#include "core/backend_common.h"

/* ---- helpers ------------------------------------------------------------------------------------ */

/* Records in *flag (as INT64_MAX - p, so that atomicMax keeps the lowest p) every position p of
 * the int view whose value lies outside [0, limit). */
__global__ void find_bad_index_kernel(const __grid_constant__ cu_nd v, const char *data, int dt,
                                      int64_t n, int64_t limit, unsigned long long *flag) {
    const int es = dt == CN_I64 ? 8 : (dt == CN_I32 ? 4 : 1);
    CU_GRID_LOOP(p, n) {
        int64_t x = cu_load_i(data + cu_nd_offset(v, p) * es, dt);
        if (x < 0 || x >= limit) atomicMax(flag, (unsigned long long)(INT64_MAX - p));
    }
}

/* The row-major position of the first value of idx outside [0, limit) in *bad (-1: none). */
static cn_status first_bad_index(cu_dev *d, const char *op, const cn_view *idx0, int64_t limit,
                                 int64_t *bad) {
    *bad = -1;
    cn_view v = cn__view_at_least_1d(idx0);
    int64_t n = cn__view_numel(&v);
    if (n == 0) return CN_OK;
    int64_t *flag;
    cn_status s = cu_scratch(d, op, sizeof *flag, (void **)&flag);
    if (s != CN_OK) return s;
    int64_t found = 0;
    s = cu_check(op, cudaMemsetAsync(flag, 0, sizeof *flag, d->stream), "cudaMemsetAsync");
    if (s == CN_OK) {
        find_bad_index_kernel<<<cu_blocks(n), CU_THREADS, 0, d->stream>>>(
            cu_nd_of(&v), (const char *)v.data, v.dtype, n, limit, (unsigned long long *)flag);
        s = cu_check_launch(op, "find_bad_index_kernel");
    }
    if (s == CN_OK) s = cu_read_i64(d, op, flag, &found);
    cu_scratch_free(d, flag);
    if (s == CN_OK && found) *bad = INT64_MAX - found;
    return s;
}

/* Reports the out-of-range value at row-major position pos of idx, worded as the CPU does. */
static cn_status index_error(cu_dev *d, const char *op, const cn_view *idx, int64_t pos,
                             const char *bound, int64_t limit, const char *fix) {
    int64_t coord[CN_MAX_DIMS], off = 0, r = pos;
    for (int k = idx->ndim - 1; k >= 0; k--) {
        coord[k] = r % idx->shape[k];
        r /= idx->shape[k];
        off += coord[k] * idx->strides[k];
    }
    size_t es = cn_dtype_size(idx->dtype);
    unsigned char raw[8] = {0};
    cn_status s = cu_check(op,
                           cudaMemcpyAsync(raw, (const char *)idx->data + off * (int64_t)es, es,
                                           cudaMemcpyDeviceToHost, d->stream),
                           "cudaMemcpyAsync");
    if (s == CN_OK) s = cu_sync(d, op);
    if (s != CN_OK) return s;
    long long value;
    if (idx->dtype == CN_I64) {
        int64_t v;
        memcpy(&v, raw, sizeof v);
        value = v;
    } else if (idx->dtype == CN_I32) {
        int32_t v;
        memcpy(&v, raw, sizeof v);
        value = v;
    } else {
        value = raw[0];
    }
    char where[CN_MAX_DIMS * 24 + 4];
    size_t len = 0;
    where[len++] = '[';
    for (int k = 0; k < idx->ndim; k++)
        len += (size_t)snprintf(where + len, sizeof where - len, "%s%lld", k ? ", " : "",
                                (long long)coord[k]);
    snprintf(where + len, sizeof where - len, "]");
    char range[64];
    if (limit > 0)
        snprintf(range, sizeof range, "values must lie in 0..%lld", (long long)(limit - 1));
    else
        snprintf(range, sizeof range, "no value is valid for an empty range");
    return cn_set_error(CN_ERR_INDEX, op,
                        "index value %lld at position %s is out of range for %s; %s "
                        "(negative values are not wrapped); %s",
                        value, where, bound, range, fix);
}

/* Checks every value of idx against [0, size) for dim `dim` of the indexed tensor. */
static cn_status check_dim_indices(cu_dev *d, const char *op, const cn_view *idx, int dim,
                                   int64_t size) {
    int64_t bad;
    cn_status s = first_bad_index(d, op, idx, size, &bad);
    if (s != CN_OK || bad < 0) return s;
    char bound[64];
    snprintf(bound, sizeof bound, "dim %d of size %lld", dim, (long long)size);
    return index_error(d, op, idx, bad, bound, size,
                       "fix the index values or choose the dim they index");
}

static cn_status require_i64_index(const char *op, const cn_view *idx) {
    if (idx->dtype == CN_I64) return CN_OK;
    return cn_set_error(CN_ERR_DTYPE, op, "index has dtype %s, need i64; convert it with cn_cast",
                        cn_dtype_name(idx->dtype));
}

/* ---- gather and index_select ------------------------------------------------------------------ */

typedef struct gather_geom {
    int nd, dim, es;
    int64_t n;
    int64_t shape[CN_MAX_DIMS];                  /* out's */
    int64_t os[CN_MAX_DIMS], is[CN_MAX_DIMS];    /* out's and the index's strides */
    int64_t xs[CN_MAX_DIMS];                     /* x's, 0 at dim */
    int64_t xdim;                                /* x's stride at dim */
    const char *x;
    const int64_t *idx;
    char *out;
} gather_geom;

/* out[p] = x[p with coordinate dim replaced by the index value at offset sum(p[k] * is[k])]. */
__global__ void gather_kernel(const __grid_constant__ gather_geom g) {
    CU_GRID_LOOP(p, g.n) {
        int64_t r = p, oo = 0, io = 0, xo = 0;
        for (int k = g.nd - 1; k >= 0; k--) {
            int64_t q = r / g.shape[k], c = r - q * g.shape[k];
            r = q;
            oo += c * g.os[k];
            io += c * g.is[k];
            xo += c * g.xs[k];
        }
        xo += g.idx[io] * g.xdim;
        cu_move(g.out + oo * g.es, g.x + xo * g.es, g.es);
    }
}

static cn_status launch_gather(cu_dev *d, const char *op, const cn_view *out, const cn_view *x,
                               int dim, const cn_view *idx, const int64_t *istr) {
    gather_geom g;
    memset(&g, 0, sizeof g);
    g.n = cn__view_numel(out);
    if (g.n == 0) return CN_OK;
    g.nd = out->ndim;
    g.dim = dim;
    g.es = (int)cn_dtype_size(out->dtype);
    for (int k = 0; k < out->ndim; k++) {
        g.shape[k] = out->shape[k];
        g.os[k] = out->strides[k];
        g.is[k] = istr[k];
        g.xs[k] = k == dim ? 0 : x->strides[k];
    }
    g.xdim = x->strides[dim];
    g.x = (const char *)x->data;
    g.idx = (const int64_t *)idx->data;
    g.out = (char *)out->data;
    gather_kernel<<<cu_blocks(g.n), CU_THREADS, 0, d->stream>>>(g);
    return cu_check_launch(op, "gather_kernel");
}

/* in = (x, index i64), ints[0] = dim; out has index's shape. */
extern "C" cn_status cuda_gather(const cn_kernel_args *a) {
    const char *op = "gather";
    cn_view x = cn__view_at_least_1d(&a->in[0]), idx = cn__view_at_least_1d(&a->in[1]);
    cn_view out = cn__view_at_least_1d(&a->out[0]);
    int dim = (int)a->ints[0];
    cn_status s = require_i64_index(op, &idx);
    if (s) return s;
    if (idx.ndim != x.ndim || out.ndim != idx.ndim || dim < 0 || dim >= x.ndim)
        return cn_set_error(CN_ERR_SHAPE, op, "index has %d dims and x %d (dim %d); they must "
                            "match", idx.ndim, x.ndim, dim);
    for (int k = 0; k < x.ndim; k++)
        if (out.shape[k] != idx.shape[k] || (k != dim && idx.shape[k] > x.shape[k]))
            return cn_set_error(CN_ERR_SHAPE, op, "index size %lld at dim %d exceeds x's %lld; "
                                "shrink the index", (long long)idx.shape[k], k,
                                (long long)x.shape[k]);
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    s = check_dim_indices(d, op, &a->in[1], dim, x.shape[dim]);
    if (s) return s;
    return launch_gather(d, op, &out, &x, dim, &idx, idx.strides);
}

/* in = (x, index 1-D i64), ints[0] = dim: out[..., i, ...] = x[..., index[i], ...]. */
extern "C" cn_status cuda_index_select(const cn_kernel_args *a) {
    const char *op = "index_select";
    cn_view x = cn__view_at_least_1d(&a->in[0]), idx = cn__view_at_least_1d(&a->in[1]);
    cn_view out = cn__view_at_least_1d(&a->out[0]);
    int dim = (int)a->ints[0];
    cn_status s = require_i64_index(op, &idx);
    if (s) return s;
    if (idx.ndim != 1 || out.ndim != x.ndim || dim < 0 || dim >= x.ndim ||
        out.shape[dim] != idx.shape[0])
        return cn_set_error(CN_ERR_SHAPE, op, "need a 1-D index whose length is the output's "
                            "size at dim %d", dim);
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    s = check_dim_indices(d, op, &a->in[1], dim, x.shape[dim]);
    if (s) return s;
    int64_t istr[CN_MAX_DIMS] = {0};
    istr[dim] = idx.strides[0];
    return launch_gather(d, op, &out, &x, dim, &idx, istr);
}

/* ---- scatter_add ------------------------------------------------------------------------------ */

typedef struct scatter_geom {
    int nd, dim, dt, es, assign;
    int64_t outer, len;
    int64_t shape[CN_MAX_DIMS];                                /* the positions visited */
    int64_t os[CN_MAX_DIMS], is[CN_MAX_DIMS], ss[CN_MAX_DIMS]; /* strides, os 0 at dim */
    int64_t odim;                                              /* out's stride at dim */
    char *out;
    const int64_t *idx;
    const char *src;
} scatter_geom;

__device__ __forceinline__ void add_into(char *dst, const char *src, int dt) {
    switch (dt) {
    case CN_F32: *(float *)dst += *(const float *)src; break;
    case CN_F64: *(double *)dst += *(const double *)src; break;
    case CN_I32:
        *(int32_t *)dst = (int32_t)((uint32_t) * (int32_t *)dst + (uint32_t) * (const int32_t *)src);
        break;
    case CN_I64:
        *(int64_t *)dst = (int64_t)((uint64_t) * (int64_t *)dst + (uint64_t) * (const int64_t *)src);
        break;
    default: cu_store_f32(dst, dt, cu_load_f32(dst, dt) + cu_load_f32(src, dt)); break; /* halves */
    }
}

/* Thread r owns one line along dim (all positions that differ only at dim): lines write disjoint
 * parts of out, and each adds or assigns in index order (the last write wins). */
__global__ void scatter_kernel(const __grid_constant__ scatter_geom g) {
    CU_GRID_LOOP(r, g.outer) {
        int64_t q = r, oo = 0, io = 0, so = 0;
        for (int k = g.nd - 1; k >= 0; k--) {
            if (k == g.dim) continue;
            int64_t t = q / g.shape[k], c = q - t * g.shape[k];
            q = t;
            oo += c * g.os[k];
            io += c * g.is[k];
            so += c * g.ss[k];
        }
        for (int64_t i = 0; i < g.len; i++) {
            int64_t target = g.idx[io + i * g.is[g.dim]];
            char *dst = g.out + (oo + target * g.odim) * g.es;
            const char *from = g.src + (so + i * g.ss[g.dim]) * g.es;
            if (g.assign)
                cu_move(dst, from, g.es);
            else
                add_into(dst, from, g.dt);
        }
    }
}

/* out = x, then src's entries over `shape` (nd dims) added or assigned along dim at the index
 * values idx[sum(p[k] * istr[k])], already checked. */
static cn_status scatter_lines(cu_dev *d, const char *op, const cn_view *out, const cn_view *x,
                               const cn_view *src, const int64_t *idx, const int64_t *istr,
                               const int64_t *shape, int nd, int dim, int assign) {
    cn_status s = cu_copy_view(d, op, out, x);
    if (s) return s;
    int64_t n = 1;
    for (int k = 0; k < nd; k++) n *= shape[k];
    if (n == 0) return CN_OK;
    scatter_geom g;
    memset(&g, 0, sizeof g);
    g.nd = nd;
    g.dim = dim;
    g.dt = out->dtype;
    g.es = (int)cn_dtype_size(out->dtype);
    g.assign = assign;
    g.len = shape[dim];
    g.outer = n / g.len;
    for (int k = 0; k < nd; k++) {
        g.shape[k] = shape[k];
        g.os[k] = k == dim ? 0 : out->strides[k];
        g.is[k] = istr[k];
        g.ss[k] = src->strides[k];
    }
    g.odim = out->strides[dim];
    g.out = (char *)out->data;
    g.idx = idx;
    g.src = (const char *)src->data;
    scatter_kernel<<<cu_blocks(g.outer), CU_THREADS, 0, d->stream>>>(g);
    return cu_check_launch(op, "scatter_kernel");
}

/* Adds into dst by dtype; anything else would be moved as 2 bytes (past a u8's buffer). */
static int addable(cn_dtype dt) {
    return dt == CN_F32 || dt == CN_F64 || dt == CN_F16 || dt == CN_BF16 || dt == CN_I32 ||
           dt == CN_I64;
}

/* in = (x, index i64, src), ints[0] = dim; out = x with src added (scatter_add) or assigned
 * (scatter) at the indexed positions. */
static cn_status scatter_common(const cn_kernel_args *a, const char *op, int assign) {
    cn_view x = cn__view_at_least_1d(&a->in[0]), idx = cn__view_at_least_1d(&a->in[1]);
    cn_view src = cn__view_at_least_1d(&a->in[2]);
    cn_view out = cn__view_at_least_1d(&a->out[0]);
    int dim = (int)a->ints[0];
    cn_status s = require_i64_index(op, &idx);
    if (s) return s;
    /* Unreachable through the router: dtypes[op] (backend.c) admits x's dtype, and the front-end
     * gives x, src and out one dtype. */
    cn_dtype dt = out.dtype;
    if ((!assign && !addable(dt)) || x.dtype != dt || src.dtype != dt)
        return cn__kernel_dtype_error("cuda", a->op, x.dtype != dt ? x.dtype : src.dtype);
    if (idx.ndim != x.ndim || src.ndim != x.ndim || out.ndim != x.ndim || dim < 0 || dim >= x.ndim)
        return cn_set_error(CN_ERR_SHAPE, op, "x, index and src must have the same number of "
                            "dims");
    for (int k = 0; k < x.ndim; k++)
        if (idx.shape[k] > src.shape[k] || (k != dim && idx.shape[k] > x.shape[k]) ||
            out.shape[k] != x.shape[k])
            return cn_set_error(CN_ERR_SHAPE, op, "index size %lld at dim %d exceeds src's or "
                                "x's; shrink the index", (long long)idx.shape[k], k);
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    s = check_dim_indices(d, op, &a->in[1], dim, x.shape[dim]);
    if (s) return s;
    return scatter_lines(d, op, &out, &x, &src, (const int64_t *)idx.data, idx.strides,
                         idx.shape, idx.ndim, dim, assign);
}

extern "C" cn_status cuda_scatter_add(const cn_kernel_args *a) {
    return scatter_common(a, "scatter_add", 0);
}

extern "C" cn_status cuda_scatter(const cn_kernel_args *a) {
    return scatter_common(a, "scatter", 1);
}

/* in = (x, index 1-D i64, src), ints[0] = dim; src has x's shape but len(index) at dim. out = x
 * with src[.., i, ..] assigned (index_copy) or added (index_add) at x[.., index[i], ..]. */
extern "C" cn_status cuda_index_put(const cn_kernel_args *a) {
    const char *op = cn_op_name(a->op);
    const cn_view *x = &a->in[0], *idx = &a->in[1], *src = &a->in[2], *out = &a->out[0];
    int dim = (int)a->ints[0], assign = a->op == CN_OP_INDEX_COPY;
    cn_status s = require_i64_index(op, idx);
    if (s) return s;
    if (!assign && !addable(out->dtype)) return cn__kernel_dtype_error("cuda", a->op, out->dtype);
    if (idx->ndim != 1 || x->ndim < 1 || src->ndim != x->ndim || out->ndim != x->ndim || dim < 0 ||
        dim >= x->ndim || src->shape[dim] != idx->shape[0])
        return cn_set_error(CN_ERR_SHAPE, op, "need a 1-D index as long as src's dim %d", dim);
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    s = check_dim_indices(d, op, idx, dim, x->shape[dim]);
    if (s) return s;
    int64_t istr[CN_MAX_DIMS] = {0};
    istr[dim] = idx->strides[0];
    return scatter_lines(d, op, out, x, src, (const int64_t *)idx->data, istr, src->shape,
                         src->ndim, dim, assign);
}

/* ---- one_hot ------------------------------------------------------------------------------------ */

typedef struct one_hot_geom {
    cu_nd idx;                    /* the index view (at least 1-d) */
    cu_nd out;                    /* the output's first idx.nd dims */
    int64_t classes, cs, n;       /* n = index elements * classes; cs = out's stride at the end */
    int dt_idx, es;
    uint64_t one;                 /* the bytes of 1 in the output dtype */
    const char *index;
    char *data;
} one_hot_geom;

__global__ void one_hot_kernel(const __grid_constant__ one_hot_geom g) {
    const int ies = g.dt_idx == CN_I64 ? 8 : (g.dt_idx == CN_I32 ? 4 : 1);
    const uint64_t zero = 0;
    CU_GRID_LOOP(p, g.n) {
        int64_t q = p / g.classes, c = p - q * g.classes;
        int64_t v = cu_load_i(g.index + cu_nd_offset(g.idx, q) * ies, g.dt_idx);
        char *dst = g.data + (cu_nd_offset(g.out, q) + c * g.cs) * g.es;
        cu_move(dst, (const char *)(c == v ? &g.one : &zero), g.es);
    }
}

/* The bytes of the value 1 in dtype dt (0 is all-zero bytes in every dtype). */
static uint64_t one_bytes(cn_dtype dt) {
    uint64_t b = 0;
    switch (dt) {
    case CN_F32: {
        float v = 1.0f;
        memcpy(&b, &v, sizeof v);
        break;
    }
    case CN_F64: {
        double v = 1.0;
        memcpy(&b, &v, sizeof v);
        break;
    }
    case CN_F16: b = 0x3C00; break;
    case CN_BF16: b = 0x3F80; break;
    default: b = 1; break; /* integers (little-endian), u8, bool */
    }
    return b;
}

/* in = (index of i32/i64/u8, any shape), ints[0] = C; out = index's shape + [C]. */
extern "C" cn_status cuda_one_hot(const cn_kernel_args *a) {
    const char *op = "one_hot";
    const cn_view *idx = &a->in[0], *out = &a->out[0];
    int64_t classes = a->ints[0];
    if (idx->dtype != CN_I64 && idx->dtype != CN_I32 && idx->dtype != CN_U8)
        return cn_set_error(CN_ERR_DTYPE, op, "index has dtype %s, need i32, i64 or u8; convert "
                            "it with cn_cast", cn_dtype_name(idx->dtype));
    int nd = idx->ndim;
    if (out->ndim != nd + 1 || out->shape[nd] != classes)
        return cn_set_error(CN_ERR_SHAPE, op, "the output must have the index's shape plus [%lld]",
                            (long long)classes);
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    int64_t bad;
    cn_status s = first_bad_index(d, op, idx, classes, &bad);
    if (s) return s;
    if (bad >= 0) {
        char bound[64];
        snprintf(bound, sizeof bound, "num_classes %lld", (long long)classes);
        return index_error(d, op, idx, bad, bound, classes, "raise num_classes or fix the labels");
    }
    cn_view iv = cn__view_at_least_1d(idx);
    int64_t n = cn__view_numel(&iv);
    if (n == 0 || classes == 0) return CN_OK;
    one_hot_geom g;
    memset(&g, 0, sizeof g);
    g.idx = cu_nd_of(&iv);
    cn_view ov = *out; /* its first nd dims (for a 0-d index, one dim of size 1) */
    ov.ndim = nd;
    cn_view ov1 = cn__view_at_least_1d(&ov);
    g.out = cu_nd_of(&ov1);
    g.classes = classes;
    g.cs = out->strides[nd];
    g.n = n * classes;
    g.dt_idx = idx->dtype;
    g.es = (int)cn_dtype_size(out->dtype);
    g.one = one_bytes(out->dtype);
    g.index = (const char *)idx->data;
    g.data = (char *)out->data;
    one_hot_kernel<<<cu_blocks(g.n), CU_THREADS, 0, d->stream>>>(g);
    return cu_check_launch(op, "one_hot_kernel");
}

/* ---- gather_nd and scatter_nd ------------------------------------------------------------------ *
 * index [B.., K] holds B tuples of K coordinates naming slices of x of S entries (x's dims past
 * K). As on the CPU (cpu/index.c): every coordinate is checked first; gather_nd runs a thread per
 * output entry; scatter_nd a thread per slice position, applying the tuples in row-major order
 * (deterministic, the CPU's result). */

enum { ND_ASSIGN = 0, ND_ADD = 1, ND_MUL = 2, ND_MIN = 3, ND_MAX = 4 }; /* cn_scatter_reduce */

typedef struct nd_geom {
    cu_nd idx;                   /* the index view [B.., K] */
    int k, bnd, snd, es, dt, reduce;
    int64_t limit[CN_MAX_DIMS];  /* x's sizes of the first K dims */
    int64_t xstr[CN_MAX_DIMS];   /* the tuples' dims' strides in x (gather) or out (scatter) */
    int64_t sshape[CN_MAX_DIMS]; /* the slice's shape (x's dims past K) */
    int64_t sstr[CN_MAX_DIMS];   /* the slice's strides in x (gather) or out (scatter) */
    int64_t vshape[CN_MAX_DIMS], vstr[CN_MAX_DIMS]; /* gather's out, scatter's updates */
    int64_t B, S;
} nd_geom;

/* Records the lowest position p of the index holding a coordinate outside [0, limit[p % K]). */
__global__ void find_bad_tuple_kernel(const __grid_constant__ nd_geom g, const int64_t *idx,
                                      int64_t n, unsigned long long *flag) {
    CU_GRID_LOOP(p, n) {
        int64_t v = idx[cu_nd_offset(g.idx, p)], limit = g.limit[p % g.k];
        if (v < 0 || v >= limit) atomicMax(flag, (unsigned long long)(INT64_MAX - p));
    }
}

static cn_status check_tuples(cu_dev *d, const char *op, const cn_view *idx, nd_geom *g) {
    int64_t n = cn__view_numel(idx);
    if (n == 0) return CN_OK;
    int64_t *flag;
    cn_status s = cu_scratch(d, op, sizeof *flag, (void **)&flag);
    if (s != CN_OK) return s;
    int64_t found = 0;
    s = cu_check(op, cudaMemsetAsync(flag, 0, sizeof *flag, d->stream), "cudaMemsetAsync");
    if (s == CN_OK) {
        find_bad_tuple_kernel<<<cu_blocks(n), CU_THREADS, 0, d->stream>>>(
            *g, (const int64_t *)idx->data, n, (unsigned long long *)flag);
        s = cu_check_launch(op, "find_bad_tuple_kernel");
    }
    if (s == CN_OK) s = cu_read_i64(d, op, flag, &found);
    cu_scratch_free(d, flag);
    if (s != CN_OK || !found) return s;
    int64_t bad = INT64_MAX - found, col = bad % g->k;
    char bound[64];
    snprintf(bound, sizeof bound, "dim %lld of size %lld", (long long)col,
             (long long)g->limit[col]);
    return index_error(d, op, idx, bad, bound, g->limit[col],
                       "each tuple's j-th value indexes x's dim j; fix the tuples");
}

/* The element offset, under strides st, of position b over the dims shape[0..nd). */
__device__ __forceinline__ int64_t nd_offset(int nd, const int64_t *shape, const int64_t *st,
                                             int64_t b) {
    int64_t off = 0;
    for (int d = nd - 1; d >= 0; d--) {
        int64_t q = b / shape[d];
        off += (b - q * shape[d]) * st[d];
        b = q;
    }
    return off;
}

/* The offset (under g.xstr) of the slice tuple b names. */
__device__ __forceinline__ int64_t nd_tuple(const nd_geom &g, const int64_t *idx, int64_t b) {
    int64_t base = 0;
    for (int j = 0; j < g.k; j++) base += idx[cu_nd_offset(g.idx, b * g.k + j)] * g.xstr[j];
    return base;
}

__global__ void gather_nd_kernel(const __grid_constant__ nd_geom g, const int64_t *idx,
                                 const char *x, char *out) {
    CU_GRID_LOOP(p, g.B * g.S) {
        int64_t b = p / g.S, s = p - b * g.S;
        int64_t xo = nd_tuple(g, idx, b) + nd_offset(g.snd, g.sshape, g.sstr, s);
        int64_t oo = nd_offset(g.bnd + g.snd, g.vshape, g.vstr, p);
        cu_move(out + oo * g.es, x + xo * g.es, g.es);
    }
}

template <typename T, typename U>
__device__ __forceinline__ void nd_reduce(char *o, const char *u, int reduce) {
    T *op = (T *)o, v = *(const T *)u;
    switch (reduce) {
    case ND_ADD: *op = (T)((U)*op + (U)v); break;
    case ND_MUL: *op = (T)((U)*op * (U)v); break;
    case ND_MIN: *op = (v < *op || v != v) ? v : *op; break;
    default: *op = (v > *op || v != v) ? v : *op; break;
    }
}

__global__ void scatter_nd_kernel(const __grid_constant__ nd_geom g, const int64_t *idx,
                                  const char *upd, char *out) {
    CU_GRID_LOOP(s, g.S) {
        int64_t so = nd_offset(g.snd, g.sshape, g.sstr, s);
        for (int64_t b = 0; b < g.B; b++) {
            char *o = out + (nd_tuple(g, idx, b) + so) * g.es;
            const char *u = upd + nd_offset(g.bnd + g.snd, g.vshape, g.vstr, b * g.S + s) * g.es;
            switch (g.reduce == ND_ASSIGN ? -1 : g.dt) {
            case -1: cu_move(o, u, g.es); break;
            case CN_F32: nd_reduce<float, float>(o, u, g.reduce); break;
            case CN_F64: nd_reduce<double, double>(o, u, g.reduce); break;
            case CN_I32: nd_reduce<int32_t, uint32_t>(o, u, g.reduce); break;
            default: nd_reduce<int64_t, uint64_t>(o, u, g.reduce); break;
            }
        }
    }
}

/* The geometry shared by both: x (gather) or out (scatter) as t, and v (gather's out, scatter's
 * updates) of shape B.. + slice. */
static cn_status nd_geom_of(const char *op, const cn_view *t, const cn_view *idx, const cn_view *v,
                            nd_geom *g) {
    memset(g, 0, sizeof *g);
    if (idx->dtype != CN_I64)
        return cn_set_error(CN_ERR_DTYPE, op, "index has dtype %s, need i64; convert it with "
                            "cn_cast", cn_dtype_name(idx->dtype));
    int k = idx->ndim ? (int)idx->shape[idx->ndim - 1] : 0, bnd = idx->ndim - 1;
    if (k < 1 || k > t->ndim || v->ndim != bnd + t->ndim - k)
        return cn_set_error(CN_ERR_SHAPE, op, "need index [.., K] with 1 <= K <= x's dims");
    g->idx = cu_nd_of(idx);
    g->k = k;
    g->bnd = bnd;
    g->snd = t->ndim - k;
    g->es = (int)cn_dtype_size(t->dtype);
    g->dt = t->dtype;
    g->B = g->S = 1;
    for (int j = 0; j < k; j++) {
        g->limit[j] = t->shape[j];
        g->xstr[j] = t->strides[j];
    }
    for (int j = 0; j < g->snd; j++) {
        g->sshape[j] = t->shape[k + j];
        g->sstr[j] = t->strides[k + j];
        g->S *= t->shape[k + j];
    }
    for (int j = 0; j < v->ndim; j++) {
        g->vshape[j] = v->shape[j];
        g->vstr[j] = v->strides[j];
    }
    for (int j = 0; j < bnd; j++) g->B *= idx->shape[j];
    return CN_OK;
}

/* in = (x, index i64 [B.., K]); out = B.. + x's shape past K: out[b..] = x[index[b..]]. */
extern "C" cn_status cuda_gather_nd(const cn_kernel_args *a) {
    const char *op = "gather_nd";
    const cn_view *x = &a->in[0], *idx = &a->in[1], *out = &a->out[0];
    nd_geom g;
    cn_status s = nd_geom_of(op, x, idx, out, &g);
    if (s) return s;
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    s = check_tuples(d, op, idx, &g);
    if (s) return s;
    gather_nd_kernel<<<cu_blocks(g.B * g.S), CU_THREADS, 0, d->stream>>>(
        g, (const int64_t *)idx->data, (const char *)x->data, (char *)out->data);
    return cu_check_launch(op, "gather_nd_kernel");
}

/* in = (x, index i64 [B.., K], updates [B.., x's shape past K]), ints[0] = cn_scatter_reduce;
 * out = x with each update combined into its slice, tuples in row-major order. */
extern "C" cn_status cuda_scatter_nd(const cn_kernel_args *a) {
    const char *op = "scatter_nd";
    const cn_view *x = &a->in[0], *idx = &a->in[1], *upd = &a->in[2], *out = &a->out[0];
    nd_geom g;
    cn_status s = nd_geom_of(op, out, idx, upd, &g);
    if (s) return s;
    g.reduce = (int)a->ints[0];
    cn_dtype dt = x->dtype;
    if (g.reduce < ND_ASSIGN || g.reduce > ND_MAX)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "unknown reduction %d", g.reduce);
    if (g.reduce != ND_ASSIGN && dt != CN_F32 && dt != CN_F64 && dt != CN_I32 && dt != CN_I64)
        return cn__kernel_dtype_error("cuda", a->op, dt);
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    s = check_tuples(d, op, idx, &g);
    if (s) return s;
    s = cu_copy_view(d, op, out, x);
    if (s || g.B == 0) return s;
    scatter_nd_kernel<<<cu_blocks(g.S), CU_THREADS, 0, d->stream>>>(
        g, (const int64_t *)idx->data, (const char *)upd->data, (char *)out->data);
    return cu_check_launch(op, "scatter_nd_kernel");
}
