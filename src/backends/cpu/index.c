/* CPU kernels for indexing: gather, scatter_add, scatter, index_select, index_copy, index_add
 * and one_hot.
 *
 * Each kernel checks every index value against its bound before it writes anything, so a bad
 * index never leads to an out-of-bounds access or a half-written result. Inputs may be strided;
 * outputs are addressed through their strides too. Elements are moved by size (1, 2, 4 or 8
 * bytes), so the data-movement kernels serve every dtype. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "core/backend_common.h"

/* ---- helpers ------------------------------------------------------------------------------- */

static int is_int_dtype(cn_dtype dt) { return dt == CN_I64 || dt == CN_I32 || dt == CN_U8; }

/* The integer at element offset `off` of data in an int dtype (i64, i32 or u8). */
static int64_t read_int(const void *data, cn_dtype dt, int64_t off) {
    switch (dt) {
    case CN_I64:
        return ((const int64_t *)data)[off];
    case CN_I32:
        return ((const int32_t *)data)[off];
    default:
        return ((const uint8_t *)data)[off];
    }
}

/* The element offsets, under each of `nops` stride sets, of position r (counted row-major) of
 * `shape` taken over every dim except `skip` (-1: none). The skipped dim is the caller's inner
 * loop. */
static void pos_offsets(int ndim, const int64_t *shape, int skip, int64_t r, int nops,
                        const int64_t *const *strides, int64_t *off) {
    for (int k = 0; k < nops; k++)
        off[k] = 0;
    for (int d = ndim - 1; d >= 0 && r > 0; d--) {
        if (d == skip) continue;
        int64_t i = r % shape[d];
        r /= shape[d];
        for (int k = 0; k < nops; k++)
            off[k] += i * strides[k][d];
    }
}

typedef struct bad_job {
    const cn_view *v;
    int64_t limit, inner, step;
    _Atomic int64_t bad; /* the smallest bad position found so far, INT64_MAX for none */
} bad_job;

static void find_bad_rows(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    bad_job *j = ctx;
    const cn_view *v = j->v;
    const int64_t *st[1] = {v->strides};
    for (int64_t r = begin; r < end; r++) {
        int64_t off;
        pos_offsets(v->ndim, v->shape, v->ndim - 1, r, 1, st, &off);
        for (int64_t k = 0; k < j->inner; k++) {
            int64_t x = read_int(v->data, v->dtype, off + k * j->step);
            if (x < 0 || x >= j->limit) {
                int64_t pos = r * j->inner + k, seen = atomic_load(&j->bad);
                while (pos < seen && !atomic_compare_exchange_weak(&j->bad, &seen, pos)) {
                }
                return; /* later rows of this chunk come after pos */
            }
        }
    }
}

/* The row-major position of the first value of the int view idx outside [0, limit), or -1. */
static int64_t first_bad_index(const cn_view *idx0, int64_t limit) {
    cn_view v = cn__view_at_least_1d(idx0);
    int last = v.ndim - 1;
    int64_t inner = v.shape[last], n = cn__view_numel(&v);
    if (n == 0) return -1;
    bad_job j = {.v = &v, .limit = limit, .inner = inner, .step = v.strides[last]};
    atomic_init(&j.bad, INT64_MAX);
    cpu_parallel(n / inner, cpu_chunks(n, CPU_PARALLEL_GRAIN), find_bad_rows, &j);
    int64_t bad = atomic_load(&j.bad);
    return bad == INT64_MAX ? -1 : bad;
}

/* Reports the out-of-range value at row-major position pos of idx. `bound` says what the value
 * indexes ("dim 1 of size 3", "num_classes 4") and `fix` how to get out. */
static cn_status index_error(const char *op, const cn_view *idx, int64_t pos, const char *bound,
                             int64_t limit, const char *fix) {
    int64_t coord[CN_MAX_DIMS], off = 0, r = pos;
    for (int d = idx->ndim - 1; d >= 0; d--) {
        coord[d] = r % idx->shape[d];
        r /= idx->shape[d];
        off += coord[d] * idx->strides[d];
    }
    char where[CN_MAX_DIMS * 24 + 4];
    size_t len = 0;
    where[len++] = '[';
    for (int d = 0; d < idx->ndim; d++)
        len += (size_t)snprintf(where + len, sizeof where - len, "%s%lld", d ? ", " : "",
                                (long long)coord[d]);
    snprintf(where + len, sizeof where - len, "]");
    char range[64];
    if (limit > 0)
        snprintf(range, sizeof range, "values must lie in 0..%lld", (long long)(limit - 1));
    else
        snprintf(range, sizeof range, "no value is valid for an empty range");
    return cn_set_error(CN_ERR_INDEX, op,
                        "index value %lld at position %s is out of range for %s; %s "
                        "(negative values are not wrapped); %s",
                        (long long)read_int(idx->data, idx->dtype, off), where, bound, range, fix);
}

/* Checks every value of idx against [0, x_size) for dim `dim` of the indexed tensor. */
static cn_status check_dim_indices(const char *op, const cn_view *idx, int dim, int64_t x_size) {
    int64_t bad = first_bad_index(idx, x_size);
    if (bad < 0) return CN_OK;
    char bound[64];
    snprintf(bound, sizeof bound, "dim %d of size %lld", dim, (long long)x_size);
    return index_error(op, idx, bad, bound, x_size,
                       "fix the index values or choose the dim they index");
}

static cn_status require_i64_index(const char *op, const cn_view *idx) {
    if (idx->dtype == CN_I64) return CN_OK;
    return cn_set_error(CN_ERR_DTYPE, op, "index has dtype %s, need i64; convert it with cn_cast",
                        cn_dtype_name(idx->dtype));
}

/* ---- gather and index_select ---------------------------------------------------------------- */

/* Moves one run of `inner` elements of size ES: out[j] = x[j, with coordinate dim replaced by
 * irow[j * isl]] (offsets in elements). */
#define GATHER_RUN(ES)                                                                             \
    for (int64_t j = 0; j < inner; j++)                                                            \
    memcpy(orow + j * os * (ES), xrow + (j * xsl + irow[j * isl] * xdim) * (ES), (ES))

typedef struct gather_job {
    int nd, last;
    int64_t inner;
    const int64_t *shape;
    const int64_t *const *st; /* out's, x's (0 at dim) and the index's strides */
    int64_t xdim, os, xsl, isl;
    size_t es;
    char *obase;
    const char *xbase;
    const int64_t *ip;
} gather_job;

/* Rows [begin, end) of gather_rows. */
static void gather_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const gather_job *j = ctx;
    const int64_t inner = j->inner, xdim = j->xdim, os = j->os, xsl = j->xsl, isl = j->isl;
    const size_t es = j->es;
    /* a row whose index value is fixed and whose data is dense is one memcpy */
    const int dense_rows = isl == 0 && os == 1 && xsl == 1;
    for (int64_t r = begin; r < end; r++) {
        int64_t off[3];
        pos_offsets(j->nd, j->shape, j->last, r, 3, j->st, off);
        char *orow = j->obase + off[0] * (int64_t)es;
        const char *xrow = j->xbase + off[1] * (int64_t)es;
        const int64_t *irow = j->ip + off[2];
        if (dense_rows) {
            memcpy(orow, xrow + irow[0] * xdim * (int64_t)es, (size_t)inner * es);
            continue;
        }
        switch (es) {
        case 1:
            GATHER_RUN(1);
            break;
        case 2:
            GATHER_RUN(2);
            break;
        case 4:
            GATHER_RUN(4);
            break;
        default:
            GATHER_RUN(8);
            break;
        }
    }
}

/* Over every position p of out's shape: out[p] = x[p with coordinate dim replaced by the index
 * value at element offset sum(p[d] * istr[d]) of ip]. Gather passes the index's own strides;
 * index_select passes a stride only at dim, so each row reads one entry of its 1-D index. Views
 * have ndim >= 1 and the indices are already checked. */
static void gather_rows(const cn_view *out, const cn_view *x, int dim, const int64_t *ip,
                        const int64_t *istr) {
    int nd = out->ndim, last = nd - 1;
    int64_t inner = out->shape[last], n = cn__view_numel(out);
    if (n == 0) return;
    int64_t rows = n / inner;
    int64_t xs[CN_MAX_DIMS]; /* x's strides with dim removed: its coordinate comes from ip */
    memcpy(xs, x->strides, sizeof xs);
    xs[dim] = 0;
    const int64_t xdim = x->strides[dim], os = out->strides[last], xsl = xs[last], isl = istr[last];
    const int64_t *st[3] = {out->strides, xs, istr};
    const size_t es = cn_dtype_size(out->dtype);
    char *obase = (char *)out->data;
    const char *xbase = (const char *)x->data;
    gather_job j = {.nd = nd, .last = last, .inner = inner, .shape = out->shape, .st = st,
                    .xdim = xdim, .os = os, .xsl = xsl, .isl = isl, .es = es, .obase = obase,
                    .xbase = xbase, .ip = ip};
    cpu_parallel(rows, cpu_chunks(n, CPU_PARALLEL_GRAIN), gather_chunk, &j);
}

/* in = (x, index i64), ints[0] = dim; out has index's shape (sizes <= x's off dim):
 * out[i][j][k] = x[i][index[i][j][k]][k] for dim = 1. */
cn_status cpu_gather(const cn_kernel_args *a) {
    cn_view x = cn__view_at_least_1d(&a->in[0]), idx = cn__view_at_least_1d(&a->in[1]);
    cn_view out = cn__view_at_least_1d(&a->out[0]);
    int dim = (int)a->ints[0];
    cn_status s = require_i64_index("gather", &idx);
    if (s) return s;
    if (idx.ndim != x.ndim || out.ndim != idx.ndim || dim < 0 || dim >= x.ndim)
        return cn_set_error(CN_ERR_SHAPE, "gather",
                            "index has %d dims and x %d (dim %d); they must match", idx.ndim,
                            x.ndim, dim);
    for (int d = 0; d < x.ndim; d++)
        if (out.shape[d] != idx.shape[d] || (d != dim && idx.shape[d] > x.shape[d]))
            return cn_set_error(CN_ERR_SHAPE, "gather",
                                "index size %lld at dim %d exceeds x's %lld; shrink the index",
                                (long long)idx.shape[d], d, (long long)x.shape[d]);
    s = check_dim_indices("gather", &a->in[1], dim, x.shape[dim]);
    if (s) return s;
    gather_rows(&out, &x, dim, (const int64_t *)idx.data, idx.strides);
    return CN_OK;
}

/* in = (x, index 1-D i64), ints[0] = dim; out = x's shape with dim of len(index):
 * out[..., i, ...] = x[..., index[i], ...]. */
cn_status cpu_index_select(const cn_kernel_args *a) {
    cn_view x = cn__view_at_least_1d(&a->in[0]), idx = cn__view_at_least_1d(&a->in[1]);
    cn_view out = cn__view_at_least_1d(&a->out[0]);
    int dim = (int)a->ints[0];
    cn_status s = require_i64_index("index_select", &idx);
    if (s) return s;
    if (idx.ndim != 1 || out.ndim != x.ndim || dim < 0 || dim >= x.ndim ||
        out.shape[dim] != idx.shape[0])
        return cn_set_error(CN_ERR_SHAPE, "index_select",
                            "need a 1-D index whose length is the output's size at dim %d", dim);
    s = check_dim_indices("index_select", &a->in[1], dim, x.shape[dim]);
    if (s) return s;
    int64_t istr[CN_MAX_DIMS] = {0};
    istr[dim] = idx.strides[0];
    gather_rows(&out, &x, dim, (const int64_t *)idx.data, istr);
    return CN_OK;
}

/* ---- scatter_add ---------------------------------------------------------------------------- */

static void copy_row(char **p, const int64_t *step, int64_t n, const void *ctx) {
    size_t es = *(const size_t *)ctx;
    if (step[0] == (int64_t)es && step[1] == (int64_t)es) {
        memcpy(p[0], p[1], (size_t)n * es);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        memcpy(p[0] + i * step[0], p[1] + i * step[1], es);
}

/* Adds along dim: out[.., index[.., i, ..], ..] += src[.., i, ..] for i in [0, len). Integers
 * wrap on overflow (unsigned arithmetic) rather than invoking undefined behaviour. */
#define SCATTER_RUN(T, ADD)                                                                        \
    do {                                                                                           \
        T *o_ = (T *)obase + off[0];                                                               \
        const T *s_ = (const T *)sbase + off[2];                                                   \
        for (int64_t i = 0; i < len; i++) {                                                        \
            T *dst_ = o_ + ip[off[1] + i * idim] * odim;                                           \
            T v_ = s_[i * sdim];                                                                   \
            *dst_ = ADD(*dst_, v_);                                                                \
        }                                                                                          \
    } while (0)
#define ADD_PLAIN(a, b)  ((a) + (b))
#define ADD_WRAP32(a, b) ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define ADD_WRAP64(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))

/* Assigns along dim: out[.., index[.., i, ..], ..] = src[.., i, ..] in index order, so the last
 * write wins. Moves bytes, so it serves every dtype. */
#define ASSIGN_RUN(ES)                                                                             \
    for (int64_t i = 0; i < len; i++)                                                              \
    memcpy(obase + (off[0] + ip[off[1] + i * idim] * odim) * (ES), sbase + (off[2] + i * sdim) * (ES), \
           (ES))

typedef struct scatter_job {
    int nd, dim, assign;
    int64_t len;
    const int64_t *shape;     /* the positions visited: the index's (scatter), src's (index_*) */
    const int64_t *const *st; /* out's (0 at dim), the index's and src's strides */
    int64_t odim, idim, sdim;
    cn_dtype dt;
    const int64_t *ip;
    char *obase;
    const char *sbase;
} scatter_job;

/* Positions [begin, end) off dim of scatter_add, scatter, index_copy and index_add. */
static void scatter_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const scatter_job *j = ctx;
    const int64_t len = j->len, odim = j->odim, idim = j->idim, sdim = j->sdim;
    const int64_t *ip = j->ip;
    char *obase = j->obase;
    const char *sbase = j->sbase;
    const size_t es = cn_dtype_size(j->dt);
    for (int64_t r = begin; r < end; r++) {
        int64_t off[3];
        pos_offsets(j->nd, j->shape, j->dim, r, 3, j->st, off);
        if (j->assign) {
            switch (es) {
            case 1: ASSIGN_RUN(1); break;
            case 2: ASSIGN_RUN(2); break;
            case 4: ASSIGN_RUN(4); break;
            default: ASSIGN_RUN(8); break;
            }
            continue;
        }
        switch (j->dt) {
        case CN_F32:
            SCATTER_RUN(float, ADD_PLAIN);
            break;
        case CN_F64:
            SCATTER_RUN(double, ADD_PLAIN);
            break;
        case CN_I32:
            SCATTER_RUN(int32_t, ADD_WRAP32);
            break;
        default:
            SCATTER_RUN(int64_t, ADD_WRAP64);
            break;
        }
    }
}

/* out = x, then src's entries over `shape` (at least 1-d, dim in range) added or assigned along
 * dim at the index values ip[sum(p[d] * istr[d])] (already checked). Positions that differ off
 * dim write disjoint parts of out, so the outer loop runs in parallel without races, and each
 * inner loop goes in index order (deterministic: the last write wins, sums in one order). */
static void scatter_lines(const cn_view *out, const cn_view *x, const cn_view *src,
                          const int64_t *ip, const int64_t *istr, const int64_t *shape, int nd,
                          int dim, int assign) {
    size_t es = cn_dtype_size(out->dtype);
    const cn_view *pair[2] = {out, x};
    cpu_iter it;
    cpu_iter_init(&it, 2, pair);
    cpu_iter_run(&it, copy_row, &es);

    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= shape[d];
    if (n == 0) return;
    int64_t len = shape[dim], outer = n / len;
    int64_t os[CN_MAX_DIMS];
    memcpy(os, out->strides, sizeof os);
    os[dim] = 0;
    const int64_t *st[3] = {os, istr, src->strides};
    scatter_job j = {.nd = nd, .dim = dim, .assign = assign, .len = len, .shape = shape,
                     .st = st, .odim = out->strides[dim], .idim = istr[dim],
                     .sdim = src->strides[dim], .dt = out->dtype, .ip = ip,
                     .obase = (char *)out->data, .sbase = (const char *)src->data};
    cpu_parallel(outer, cpu_chunks(n, CPU_PARALLEL_GRAIN), scatter_chunk, &j);
}

/* in = (x, index i64, src), ints[0] = dim; out[0] with x's shape: a copy of x with src[p] added
 * (scatter_add) or assigned (scatter) at p with coordinate dim replaced by index[p], for every
 * position p of index. */
static cn_status scatter_common(const cn_kernel_args *a, const char *op, int assign) {
    const cn_view *idx0 = &a->in[1];
    cn_view x = cn__view_at_least_1d(&a->in[0]), idx = cn__view_at_least_1d(idx0);
    cn_view src = cn__view_at_least_1d(&a->in[2]);
    cn_view out = cn__view_at_least_1d(&a->out[0]);
    int dim = (int)a->ints[0];
    cn_status s = require_i64_index(op, &idx);
    if (s) return s;
    cn_dtype dt = out.dtype;
    if (!assign && dt != CN_F32 && dt != CN_F64 && dt != CN_I32 && dt != CN_I64) /* dtypes */
        return cn__kernel_dtype_error("cpu", a->op, dt);
    if (idx.ndim != x.ndim || src.ndim != x.ndim || out.ndim != x.ndim || dim < 0 || dim >= x.ndim)
        return cn_set_error(CN_ERR_SHAPE, op, "x, index and src must have the same number of dims");
    for (int d = 0; d < x.ndim; d++)
        if (idx.shape[d] > src.shape[d] || (d != dim && idx.shape[d] > x.shape[d]) ||
            out.shape[d] != x.shape[d])
            return cn_set_error(CN_ERR_SHAPE, op,
                                "index size %lld at dim %d exceeds src's or x's; shrink the index",
                                (long long)idx.shape[d], d);
    s = check_dim_indices(op, idx0, dim, x.shape[dim]);
    if (s) return s;
    scatter_lines(&out, &x, &src, (const int64_t *)idx.data, idx.strides, idx.shape, idx.ndim, dim,
                  assign);
    return CN_OK;
}

cn_status cpu_scatter_add(const cn_kernel_args *a) { return scatter_common(a, "scatter_add", 0); }
cn_status cpu_scatter(const cn_kernel_args *a) { return scatter_common(a, "scatter", 1); }

/* in = (x, index 1-D i64, src), ints[0] = dim; src has x's shape but len(index) at dim. out = x
 * with src[.., i, ..] assigned (index_copy) or added (index_add) at x[.., index[i], ..]. */
cn_status cpu_index_put(const cn_kernel_args *a) {
    const char *op = cn_op_name(a->op);
    const cn_view *x = &a->in[0], *idx = &a->in[1], *src = &a->in[2], *out = &a->out[0];
    int dim = (int)a->ints[0];
    cn_status s = require_i64_index(op, idx);
    if (s) return s;
    if (idx->ndim != 1 || x->ndim < 1 || src->ndim != x->ndim || out->ndim != x->ndim || dim < 0 ||
        dim >= x->ndim || src->shape[dim] != idx->shape[0])
        return cn_set_error(CN_ERR_SHAPE, op, "need a 1-D index as long as src's dim %d", dim);
    cn_dtype dt = out->dtype;
    if (a->op == CN_OP_INDEX_ADD && dt != CN_F32 && dt != CN_F64 && dt != CN_I32 && dt != CN_I64)
        return cn__kernel_dtype_error("cpu", a->op, dt); /* unreachable: dtypes */
    s = check_dim_indices(op, idx, dim, x->shape[dim]);
    if (s) return s;
    int64_t istr[CN_MAX_DIMS] = {0};
    istr[dim] = idx->strides[0];
    scatter_lines(out, x, src, (const int64_t *)idx->data, istr, src->shape, src->ndim, dim,
                  a->op == CN_OP_INDEX_COPY);
    return CN_OK;
}

/* ---- one_hot -------------------------------------------------------------------------------- */

typedef struct one_hot_job {
    int nd;
    const int64_t *shape;
    const int64_t *const *st; /* the index's and out's strides */
    int64_t cs, classes;
    size_t es;
    unsigned char one[8];
    char *obase;
    const cn_view *idx;
} one_hot_job;

/* Index positions [begin, end): each row of out zeroed, with one at the index value. */
static void one_hot_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const one_hot_job *j = ctx;
    const size_t es = j->es;
    for (int64_t p = begin; p < end; p++) {
        int64_t off[2];
        pos_offsets(j->nd, j->shape, -1, p, 2, j->st, off);
        char *row = j->obase + off[1] * (int64_t)es;
        if (j->cs == 1) {
            memset(row, 0, (size_t)j->classes * es);
        } else {
            for (int64_t c = 0; c < j->classes; c++)
                memset(row + c * j->cs * (int64_t)es, 0, es);
        }
        memcpy(row + read_int(j->idx->data, j->idx->dtype, off[0]) * j->cs * (int64_t)es, j->one,
               es);
    }
}

/* The bytes of the value 1 in dtype dt (0 is all-zero bytes in every dtype). */
static void one_bytes(cn_dtype dt, unsigned char *b) {
    memset(b, 0, 8);
    switch (dt) {
    case CN_F32: {
        float v = 1.0f;
        memcpy(b, &v, sizeof v);
        break;
    }
    case CN_F64: {
        double v = 1.0;
        memcpy(b, &v, sizeof v);
        break;
    }
    case CN_F16: {
        uint16_t v = 0x3C00;
        memcpy(b, &v, sizeof v);
        break;
    }
    case CN_BF16: {
        uint16_t v = 0x3F80;
        memcpy(b, &v, sizeof v);
        break;
    }
    case CN_I32: {
        int32_t v = 1;
        memcpy(b, &v, sizeof v);
        break;
    }
    case CN_I64: {
        int64_t v = 1;
        memcpy(b, &v, sizeof v);
        break;
    }
    default:
        b[0] = 1;
        break; /* u8, bool */
    }
}

/* in = (index of i32/i64/u8, any shape), ints[0] = C; out = index's shape + [C] in any dtype:
 * out[p][c] = (c == index[p]). */
cn_status cpu_one_hot(const cn_kernel_args *a) {
    const cn_view *idx = &a->in[0], *out = &a->out[0];
    int64_t classes = a->ints[0];
    if (!is_int_dtype(idx->dtype))
        return cn_set_error(CN_ERR_DTYPE, "one_hot",
                            "index has dtype %s, need i32, i64 or u8; convert it with cn_cast",
                            cn_dtype_name(idx->dtype));
    int nd = idx->ndim;
    if (out->ndim != nd + 1 || out->shape[nd] != classes)
        return cn_set_error(CN_ERR_SHAPE, "one_hot",
                            "the output must have the index's shape plus [%lld]",
                            (long long)classes);
    int64_t bad = first_bad_index(idx, classes);
    if (bad >= 0) {
        char bound[64];
        snprintf(bound, sizeof bound, "num_classes %lld", (long long)classes);
        return index_error("one_hot", idx, bad, bound, classes,
                           "raise num_classes or fix the labels");
    }

    unsigned char one[8];
    one_bytes(out->dtype, one);
    const size_t es = cn_dtype_size(out->dtype);
    const int64_t n = cn__view_numel(idx), cs = out->strides[nd];
    const int64_t *st[2] = {idx->strides, out->strides};
    char *obase = (char *)out->data;
    one_hot_job j = {.nd = nd, .shape = idx->shape, .st = st, .cs = cs, .classes = classes,
                     .es = es, .obase = obase, .idx = idx};
    memcpy(j.one, one, sizeof one);
    cpu_parallel(n, cpu_chunks(n * classes, CPU_PARALLEL_GRAIN), one_hot_chunk, &j);
    return CN_OK;
}

/* ---- gather_nd and scatter_nd --------------------------------------------------------------- *
 * index [B.., K] holds B tuples of K coordinates; a tuple names the slice x[i0, .., iK-1, ...] of
 * S = numel(x's shape past K) entries. */

/* scatter_nd's ints[0]: cn_scatter_reduce's values (cinder/ops.h; backend.h's contract) */
enum { ND_ASSIGN = 0, ND_ADD = 1, ND_MUL = 2, ND_MIN = 3, ND_MAX = 4 };

/* Checks every coordinate of every tuple against the size of the dim it indexes. */
static cn_status check_tuples(const char *op, const cn_view *idx, const cn_view *x) {
    int nd = idx->ndim;
    int64_t k = idx->shape[nd - 1], n = cn__view_numel(idx);
    const int64_t *st[1] = {idx->strides};
    for (int64_t p = 0; p < n; p++) {
        int64_t off, col = p % k;
        pos_offsets(nd, idx->shape, -1, p, 1, st, &off);
        int64_t v = ((const int64_t *)idx->data)[off], size = x->shape[col];
        if (v < 0 || v >= size) {
            char bound[64];
            snprintf(bound, sizeof bound, "dim %lld of size %lld", (long long)col, (long long)size);
            return index_error(op, idx, p, bound, size,
                               "each tuple's j-th value indexes x's dim j; fix the tuples");
        }
    }
    return CN_OK;
}

/* The element offset, under strides xs (x's first K dims), of the slice tuple b names. */
static int64_t tuple_offset(const cn_view *idx, int64_t b, const int64_t *xs) {
    int nd = idx->ndim;
    int64_t k = idx->shape[nd - 1], off = 0, r = b;
    for (int d = nd - 2; d >= 0; d--) {
        off += (r % idx->shape[d]) * idx->strides[d];
        r /= idx->shape[d];
    }
    const int64_t *ip = (const int64_t *)idx->data + off;
    int64_t base = 0;
    for (int64_t j = 0; j < k; j++) base += ip[j * idx->strides[nd - 1]] * xs[j];
    return base;
}

/* The element offset, under strides st, of position b of the dims `shape` (bnd of them). */
static int64_t lead_offset(int bnd, const int64_t *shape, const int64_t *st, int64_t b) {
    int64_t off = 0;
    for (int d = bnd - 1; d >= 0; d--) {
        off += (b % shape[d]) * st[d];
        b /= shape[d];
    }
    return off;
}

typedef struct nd_job {
    const cn_view *x, *idx, *v; /* v: gather's output, scatter's updates ([B.., slice]) */
    char *obase;                /* scatter's output */
    const int64_t *ostr;        /* scatter's output strides */
    int k, bnd, snd;            /* tuple length, index's leading dims, slice dims */
    int64_t S, B;
    int reduce;
    size_t es;
} nd_job;

/* Tuples [begin, end) of gather_nd: out[b, s] = x[tuple b, s]. */
static void gather_nd_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const nd_job *j = ctx;
    const cn_view *x = j->x, *out = j->v;
    const int64_t *st[2] = {x->strides + j->k, out->strides + j->bnd};
    for (int64_t b = begin; b < end; b++) {
        const char *xb = (const char *)x->data +
                         tuple_offset(j->idx, b, x->strides) * (int64_t)j->es;
        char *ob = (char *)out->data +
                   lead_offset(j->bnd, out->shape, out->strides, b) * (int64_t)j->es;
        for (int64_t s = 0; s < j->S; s++) {
            int64_t off[2];
            pos_offsets(j->snd, x->shape + j->k, -1, s, 2, st, off);
            memcpy(ob + off[1] * (int64_t)j->es, xb + off[0] * (int64_t)j->es, j->es);
        }
    }
}

/* in = (x, index i64 [B.., K]); out = B.. + x's shape past K: out[b..] = x[index[b..]]. */
cn_status cpu_gather_nd(const cn_kernel_args *a) {
    const char *op = "gather_nd";
    const cn_view *x = &a->in[0], *idx = &a->in[1], *out = &a->out[0];
    cn_status s = require_i64_index(op, idx);
    if (s) return s;
    int k = idx->ndim ? (int)idx->shape[idx->ndim - 1] : 0, bnd = idx->ndim - 1;
    if (k < 1 || k > x->ndim || out->ndim != bnd + x->ndim - k)
        return cn_set_error(CN_ERR_SHAPE, op, "need index [.., K] with 1 <= K <= x's dims");
    s = check_tuples(op, idx, x);
    if (s) return s;
    nd_job j = {.x = x, .idx = idx, .v = out, .k = k, .bnd = bnd, .snd = x->ndim - k,
                .S = 1, .B = 1, .es = cn_dtype_size(x->dtype)};
    for (int d = k; d < x->ndim; d++) j.S *= x->shape[d];
    for (int d = 0; d < bnd; d++) j.B *= idx->shape[d];
    cpu_parallel(j.B, cpu_chunks(j.B * j.S, CPU_PARALLEL_GRAIN), gather_nd_chunk, &j);
    return CN_OK;
}

/* o = reduce(o, u) for one entry of type T; integers wrap (unsigned), min/max keep NaN. */
#define ND_REDUCE(T, U)                                                                            \
    do {                                                                                           \
        T *o_ = (T *)o, u_ = *(const T *)u;                                                        \
        switch (j->reduce) {                                                                       \
        case ND_ADD: *o_ = (T)((U)*o_ + (U)u_); break;                                     \
        case ND_MUL: *o_ = (T)((U)*o_ * (U)u_); break;                                     \
        case ND_MIN: *o_ = (u_ < *o_ || u_ != u_) ? u_ : *o_; break;                       \
        default: *o_ = (u_ > *o_ || u_ != u_) ? u_ : *o_; break;                                   \
        }                                                                                          \
    } while (0)

/* Slice positions [begin, end) of scatter_nd: each applies the B tuples in order. */
static void scatter_nd_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const nd_job *j = ctx;
    const cn_view *x = j->x, *upd = j->v;
    const int64_t *st[2] = {j->ostr + j->k, upd->strides + j->bnd};
    for (int64_t s = begin; s < end; s++) {
        int64_t off[2];
        pos_offsets(j->snd, x->shape + j->k, -1, s, 2, st, off);
        for (int64_t b = 0; b < j->B; b++) {
            char *o = j->obase + (tuple_offset(j->idx, b, j->ostr) + off[0]) * (int64_t)j->es;
            const char *u = (const char *)upd->data +
                            (lead_offset(j->bnd, upd->shape, upd->strides, b) + off[1]) *
                                (int64_t)j->es;
            if (j->reduce == ND_ASSIGN) {
                memcpy(o, u, j->es);
                continue;
            }
            switch (upd->dtype) {
            case CN_F32: ND_REDUCE(float, float); break;
            case CN_F64: ND_REDUCE(double, double); break;
            case CN_I32: ND_REDUCE(int32_t, uint32_t); break;
            default: ND_REDUCE(int64_t, uint64_t); break;
            }
        }
    }
}

/* in = (x, index i64 [B.., K], updates [B.., x's shape past K]), ints[0] = cn_scatter_reduce;
 * out = x with each update combined into its slice, tuples in row-major order. */
cn_status cpu_scatter_nd(const cn_kernel_args *a) {
    const char *op = "scatter_nd";
    const cn_view *x = &a->in[0], *idx = &a->in[1], *upd = &a->in[2], *out = &a->out[0];
    cn_status s = require_i64_index(op, idx);
    if (s) return s;
    int k = idx->ndim ? (int)idx->shape[idx->ndim - 1] : 0, bnd = idx->ndim - 1;
    int reduce = (int)a->ints[0];
    if (k < 1 || k > x->ndim || upd->ndim != bnd + x->ndim - k || out->ndim != x->ndim)
        return cn_set_error(CN_ERR_SHAPE, op, "need index [.., K] with 1 <= K <= x's dims");
    cn_dtype dt = x->dtype;
    if (reduce < ND_ASSIGN || reduce > ND_MAX)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "unknown reduction %d", reduce);
    if (reduce != ND_ASSIGN && dt != CN_F32 && dt != CN_F64 && dt != CN_I32 &&
        dt != CN_I64)
        return cn__kernel_dtype_error("cpu", a->op, dt);
    s = check_tuples(op, idx, x);
    if (s) return s;
    size_t es = cn_dtype_size(dt);
    const cn_view *pair[2] = {out, x};
    cpu_iter it;
    cpu_iter_init(&it, 2, pair);
    cpu_iter_run(&it, copy_row, &es);
    nd_job j = {.x = x, .idx = idx, .v = upd, .obase = (char *)out->data, .ostr = out->strides,
                .k = k, .bnd = bnd, .snd = x->ndim - k, .S = 1, .B = 1, .reduce = reduce,
                .es = es};
    for (int d = k; d < x->ndim; d++) j.S *= x->shape[d];
    for (int d = 0; d < bnd; d++) j.B *= idx->shape[d];
    if (j.B == 0) return CN_OK;
    cpu_parallel(j.S, cpu_chunks(j.B * j.S, CPU_PARALLEL_GRAIN), scatter_nd_chunk, &j);
    return CN_OK;
}
