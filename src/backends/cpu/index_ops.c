/* CPU kernels for the indexing ops of issue 16 that move elements without an index tensor:
 * masked_fill, tril / triu, flip, repeat and slice_assign. (scatter, index_copy and index_add
 * read an index and live with scatter_add in index.c.)
 *
 * Elements are moved by size (1, 2, 4 or 8 bytes), so each kernel serves every dtype; only
 * masked_fill's value is converted, once, to the output's dtype. Inputs may be strided (the mask
 * of masked_fill has stride 0 on broadcast dims); outputs are addressed through their strides.
 * Work is split over rows of the output's last dim on the backend's pool. */
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "core/backend_common.h"
#include "core/dtype.h"

/* ---- helpers ------------------------------------------------------------------------------- */

/* The coordinates of row r (counted row-major over every dim but the last) of shape. */
static void row_coords(int nd, const int64_t *shape, int64_t r, int64_t *coord) {
    for (int d = nd - 2; d >= 0; d--) {
        coord[d] = r % shape[d];
        r /= shape[d];
    }
}

/* The bytes of value in dtype dt: f32, f64, the ints (truncated toward zero: the router checked
 * the range) or bool (nonzero is true). The CPU's masked_fill takes no f16 or bf16 (backend.c). */
void cpu_value_bytes(cn_dtype dt, double v, unsigned char *b) {
    memset(b, 0, 8);
    switch (dt) {
    case CN_F32: {
        float f = (float)v;
        memcpy(b, &f, sizeof f);
        break;
    }
    case CN_F64:
        memcpy(b, &v, sizeof v);
        break;
    case CN_I32: {
        int32_t i = (int32_t)v;
        memcpy(b, &i, sizeof i);
        break;
    }
    case CN_I64: {
        int64_t i = (int64_t)v;
        memcpy(b, &i, sizeof i);
        break;
    }
    case CN_U8:
        b[0] = (unsigned char)(uint8_t)v;
        break;
    default:
        b[0] = v != 0;
        break; /* bool */
    }
}

/* ---- masked_fill ------------------------------------------------------------------------------
 */

typedef struct fill_ctx {
    size_t es;
    unsigned char value[8];
} fill_ctx;

/* p = (out, x, mask): out = mask ? value : x, over one run. */
static void masked_fill_row(char **p, const int64_t *step, int64_t n, const void *ctx) {
    const fill_ctx *c = ctx;
    const size_t es = c->es;
    for (int64_t i = 0; i < n; i++)
        cpu_move_elem(p[0] + i * step[0],
                      p[2][i * step[2]] ? (const char *)c->value : p[1] + i * step[1], es);
}

/* in = (x, mask bool broadcast to x's shape), reals[0] = value; out = x's shape. */
cn_status cpu_masked_fill(const cn_kernel_args *a) {
    const cn_view *out = &a->out[0], *x = &a->in[0], *mask = &a->in[1];
    if (mask->dtype != CN_BOOL || mask->ndim != out->ndim || x->ndim != out->ndim)
        return cn_set_error(CN_ERR_SHAPE, "masked_fill", "need a bool mask of x's shape");
    fill_ctx c = {.es = cn_dtype_size(out->dtype)};
    cpu_value_bytes(out->dtype, a->reals[0], c.value);
    const cn_view *views[3] = {out, x, mask};
    cpu_map(3, views, masked_fill_row, &c);
    return CN_OK;
}

/* ---- tril and triu ----------------------------------------------------------------------------
 */

typedef struct tri_job {
    const cn_view *out, *x;
    int upper;
    int64_t diagonal;
    size_t es;
} tri_job;

/* Rows [begin, end) of the output's last dim: entry (i, j) of each matrix is kept where
 * j - i <= diagonal (tril) or j - i >= diagonal (triu), else zero (all-zero bytes in every
 * dtype). */
static void tri_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const tri_job *j = ctx;
    const cn_view *out = j->out, *x = j->x;
    const int nd = out->ndim;
    const int64_t cols = out->shape[nd - 1], os = out->strides[nd - 1], xs = x->strides[nd - 1];
    const size_t es = j->es;
    static const unsigned char zero[8] = {0};
    for (int64_t r = begin; r < end; r++) {
        int64_t coord[CN_MAX_DIMS], oo = 0, xo = 0;
        row_coords(nd, out->shape, r, coord);
        for (int d = 0; d < nd - 1; d++) {
            oo += coord[d] * out->strides[d];
            xo += coord[d] * x->strides[d];
        }
        const int64_t i = coord[nd - 2];
        char *orow = (char *)out->data + oo * (int64_t)es;
        const char *xrow = (const char *)x->data + xo * (int64_t)es;
        for (int64_t c = 0; c < cols; c++) {
            /* c - i never overflows: both lie in [0, 2^62] */
            int keep = j->upper ? c - i >= j->diagonal : c - i <= j->diagonal;
            cpu_move_elem(orow + c * os * (int64_t)es,
                          keep ? xrow + c * xs * (int64_t)es : (const char *)zero, es);
        }
    }
}

/* in = (x, ndim >= 2), ints[0] = diagonal; out = x's shape. */
cn_status cpu_triangle(const cn_kernel_args *a) {
    const cn_view *out = &a->out[0], *x = &a->in[0];
    if (out->ndim < 2 || x->ndim != out->ndim)
        return cn_set_error(CN_ERR_SHAPE, cn_op_name(a->op), "need x with at least 2 dims");
    tri_job j = {.out = out,
                 .x = x,
                 .upper = a->op == CN_OP_TRIU,
                 .diagonal = a->ints[0],
                 .es = cn_dtype_size(out->dtype)};
    int64_t n = cn__view_numel(out);
    cpu_parallel(n / out->shape[out->ndim - 1], cpu_chunks(n, CPU_PARALLEL_GRAIN), tri_chunk, &j);
    return CN_OK;
}

/* ---- flip and repeat: out[p] = x[map(p)] ------------------------------------------------------
 */

/* x's coordinate d for out's coordinate c: c mod x's size (repeat; c itself for flip, where the
 * sizes are equal), reversed on the flipped dims. x has out's ndim (repeat pads it with leading
 * dims of size 1). */
typedef struct remap_job {
    const cn_view *out;
    const char *x;
    int64_t xshape[CN_MAX_DIMS], xstr[CN_MAX_DIMS];
    unsigned flip; /* bit d: dim d reversed */
    size_t es;
} remap_job;

static inline int64_t remap(const remap_job *j, int d, int64_t c) {
    int64_t size = j->xshape[d];
    int64_t k = c < size ? c : c % size;
    return (j->flip >> d) & 1u ? size - 1 - k : k;
}

static void remap_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const remap_job *j = ctx;
    const cn_view *out = j->out;
    const int nd = out->ndim, last = nd - 1;
    const int64_t cols = out->shape[last], os = out->strides[last], xs = j->xstr[last];
    const size_t es = j->es;
    for (int64_t r = begin; r < end; r++) {
        int64_t coord[CN_MAX_DIMS], oo = 0, xo = 0;
        row_coords(nd, out->shape, r, coord);
        for (int d = 0; d < last; d++) {
            oo += coord[d] * out->strides[d];
            xo += remap(j, d, coord[d]) * j->xstr[d];
        }
        char *orow = (char *)out->data + oo * (int64_t)es;
        const char *xrow = j->x + xo * (int64_t)es;
        for (int64_t c = 0; c < cols; c++)
            cpu_move_elem(orow + c * os * (int64_t)es, xrow + remap(j, last, c) * xs * (int64_t)es,
                          es);
    }
}

static cn_status run_remap(remap_job *j, const cn_view *out0) {
    cn_view out = cn__view_at_least_1d(out0);
    j->out = &out;
    int64_t n = cn__view_numel(&out);
    cpu_parallel(n / out.shape[out.ndim - 1], cpu_chunks(n, CPU_PARALLEL_GRAIN), remap_chunk, j);
    return CN_OK;
}

/* in = (x), ints = the dims to flip (n_ints of them, distinct, in [0, ndim)); out = x's shape. */
cn_status cpu_flip(const cn_kernel_args *a) {
    cn_view x = cn__view_at_least_1d(&a->in[0]);
    remap_job j = {.x = (const char *)x.data, .es = cn_dtype_size(x.dtype)};
    for (int d = 0; d < x.ndim; d++) {
        j.xshape[d] = x.shape[d];
        j.xstr[d] = x.strides[d];
    }
    for (int i = 0; i < a->n_ints; i++) {
        if (a->ints[i] < 0 || a->ints[i] >= a->in[0].ndim)
            return cn_set_error(CN_ERR_INVALID_ARG, "flip", "dim %lld is out of range",
                                (long long)a->ints[i]);
        j.flip |= 1u << a->ints[i];
    }
    return run_remap(&j, &a->out[0]);
}

/* in = (x), ints = the repeats (n_ints >= x's ndim); out[p] = x[p mod x's shape], x taken with
 * n_ints - ndim leading dims of size 1. */
cn_status cpu_repeat(const cn_kernel_args *a) {
    const cn_view *x = &a->in[0], *out = &a->out[0];
    int nd = out->ndim, lead = nd - x->ndim;
    if (lead < 0 || a->n_ints != nd)
        return cn_set_error(CN_ERR_SHAPE, "repeat", "need one repeat per output dim");
    remap_job j = {.x = (const char *)x->data, .es = cn_dtype_size(x->dtype)};
    for (int d = 0; d < nd; d++) {
        j.xshape[d] = d < lead ? 1 : x->shape[d - lead];
        j.xstr[d] = d < lead ? 0 : x->strides[d - lead];
    }
    if (nd == 0) j.xshape[0] = 1; /* a 0-d x: one element */
    return run_remap(&j, out);
}

/* ---- slice_assign -----------------------------------------------------------------------------
 */

static void copy_run(char **p, const int64_t *step, int64_t n, const void *ctx) {
    size_t es = *(const size_t *)ctx;
    if (step[0] == (int64_t)es && step[1] == (int64_t)es) {
        memcpy(p[0], p[1], (size_t)n * es);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        cpu_move_elem(p[0] + i * step[0], p[1] + i * step[1], es);
}

/* in = (x, values), ints = dim, start, step (start in [0, size], step >= 1); out = x with
 * out[.., start + i * step, ..] = values[.., i, ..] for i < values' size at dim. */
cn_status cpu_slice_assign(const cn_kernel_args *a) {
    const cn_view *x = &a->in[0], *values = &a->in[1], *out = &a->out[0];
    int dim = (int)a->ints[0];
    int64_t start = a->ints[1], step = a->ints[2];
    if (dim < 0 || dim >= out->ndim || values->ndim != out->ndim || step < 1)
        return cn_set_error(CN_ERR_SHAPE, "slice_assign",
                            "need values of x's ndim and a valid "
                            "dim and step");
    size_t es = cn_dtype_size(out->dtype);
    const cn_view *pair[2] = {out, x};
    cpu_map(2, pair, copy_run, &es);
    if (cn__view_numel(values) == 0) return CN_OK;
    cn_view part = *out; /* the slice of out that values replace */
    part.shape[dim] = values->shape[dim];
    part.strides[dim] = out->strides[dim] * step;
    part.data = (char *)out->data + start * out->strides[dim] * (int64_t)es;
    const cn_view *into[2] = {&part, values};
    cpu_map(2, into, copy_run, &es);
    return CN_OK;
}

/* ---- unfold -----------------------------------------------------------------------------------
 */

/* in = (x), ints = dim, size, step; out = x's shape with the window count at dim, plus [size]:
 * out[.., w, .., j] = x[.., w * step + j, ..]. The windows are a strided view of x (stride
 * step * s at dim, s for the new last dim, s x's stride at dim), copied into out. */
cn_status cpu_unfold(const cn_kernel_args *a) {
    const cn_view *x = &a->in[0], *out = &a->out[0];
    int dim = (int)a->ints[0], nd = x->ndim;
    int64_t step = a->ints[2];
    if (dim < 0 || dim >= nd || out->ndim != nd + 1 || step < 1)
        return cn_set_error(CN_ERR_SHAPE, "unfold", "need out with one dim more than x");
    cn_view windows = *x;
    windows.ndim = nd + 1;
    for (int d = 0; d <= nd; d++)
        windows.shape[d] = out->shape[d];
    /* one window: its stride is never used (and step * s might not fit) */
    windows.strides[dim] = out->shape[dim] > 1 ? x->strides[dim] * step : 0;
    windows.strides[nd] = x->strides[dim];
    size_t es = cn_dtype_size(out->dtype);
    const cn_view *pair[2] = {out, &windows};
    cpu_map(2, pair, copy_run, &es);
    return CN_OK;
}

/* ---- nonzero and masked_select: one pass in row-major order --------------------------------- */

/* Whether the element at p of dtype dt is nonzero (NaN is; -0.0 is not). */
static int is_nonzero(const char *p, cn_dtype dt) {
    switch (dt) {
    case CN_F32: {
        float v;
        memcpy(&v, p, sizeof v);
        return v != 0.0f;
    }
    case CN_F64: {
        double v;
        memcpy(&v, p, sizeof v);
        return v != 0.0;
    }
    case CN_F16:
    case CN_BF16: {
        uint16_t v;
        memcpy(&v, p, sizeof v);
        return (v & 0x7fffu) != 0;
    }
    case CN_I32: {
        int32_t v;
        memcpy(&v, p, sizeof v);
        return v != 0;
    }
    case CN_I64: {
        int64_t v;
        memcpy(&v, p, sizeof v);
        return v != 0;
    }
    default:
        return *(const uint8_t *)p != 0; /* u8, bool */
    }
}

/* Visits every position of shape in row-major order, keeping its coordinates in coord: returns 0
 * after the last one. */
static int next_coord(int nd, const int64_t *shape, int64_t *coord) {
    for (int d = nd - 1; d >= 0; d--) {
        if (++coord[d] < shape[d]) return 1;
        coord[d] = 0;
    }
    return 0;
}

static int64_t offset_of(const cn_view *v, const int64_t *coord) {
    int64_t off = 0;
    for (int d = 0; d < v->ndim; d++)
        off += coord[d] * v->strides[d];
    return off;
}

/* The router counted the entries; a different count here means the data changed in between. */
static cn_status count_changed(const char *op, int64_t want, int64_t got) {
    return cn_set_error(CN_ERR_INVALID_ARG, op,
                        "the input changed while the op ran: %lld entries "
                        "were counted, %lld found; do not write to it from another thread",
                        (long long)want, (long long)got);
}

/* in = (x), out = [count, ndim] i64: the coordinates of x's nonzero entries, row-major. */
cn_status cpu_nonzero(const cn_kernel_args *a) {
    const cn_view *x = &a->in[0], *out = &a->out[0];
    if (out->ndim != 2 || out->shape[1] != x->ndim || out->dtype != CN_I64)
        return cn_set_error(CN_ERR_SHAPE, "nonzero", "need an i64 output of [count, ndim]");
    const int nd = x->ndim;
    const size_t es = cn_dtype_size(x->dtype);
    int64_t coord[CN_MAX_DIMS] = {0}, found = 0, want = out->shape[0];
    int64_t *o = (int64_t *)out->data;
    if (cn__view_numel(x) == 0) return count_changed("nonzero", want, 0);
    do {
        if (is_nonzero((const char *)x->data + offset_of(x, coord) * (int64_t)es, x->dtype)) {
            if (found == want) return count_changed("nonzero", want, found + 1);
            for (int d = 0; d < nd; d++)
                o[found * out->strides[0] + d * out->strides[1]] = coord[d];
            found++;
        }
    } while (next_coord(nd, x->shape, coord));
    return found == want ? CN_OK : count_changed("nonzero", want, found);
}

/* in = (x, mask bool), both of one (broadcast) shape; out = [count]: x where mask, row-major. */
cn_status cpu_masked_select(const cn_kernel_args *a) {
    const cn_view *x = &a->in[0], *mask = &a->in[1], *out = &a->out[0];
    if (mask->dtype != CN_BOOL || mask->ndim != x->ndim || out->ndim != 1)
        return cn_set_error(CN_ERR_SHAPE, "masked_select", "need x and a bool mask of one shape");
    const int nd = x->ndim;
    const size_t es = cn_dtype_size(x->dtype);
    int64_t coord[CN_MAX_DIMS] = {0}, found = 0, want = out->shape[0];
    char *o = (char *)out->data;
    if (cn__view_numel(x) == 0) return count_changed("masked_select", want, 0);
    do {
        if (((const uint8_t *)mask->data)[offset_of(mask, coord)]) {
            if (found == want) return count_changed("masked_select", want, found + 1);
            cpu_move_elem(o + found * out->strides[0] * (int64_t)es,
                          (const char *)x->data + offset_of(x, coord) * (int64_t)es, es);
            found++;
        }
    } while (next_coord(nd, x->shape, coord));
    return found == want ? CN_OK : count_changed("masked_select", want, found);
}
