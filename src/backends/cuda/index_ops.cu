/* CUDA kernels for the indexing ops of issue 16 that move elements without an index tensor:
 * masked_fill, tril / triu, flip, repeat and slice_assign (scatter, index_copy and index_add are
 * in index.cu). One thread per output element, as the CPU computes them (cpu/index_ops.c):
 * elements are moved by size, so each kernel serves every dtype; masked_fill's value is stored
 * in the output's dtype by cn_cast's rules. */
#include <string.h>

#include "backends/cuda/common.cuh"
#include "core/backend_common.h"

/* ---- masked_fill ------------------------------------------------------------------------------
 */

typedef struct masked_fill_geom {
    cu_nd out, x, mask; /* mask: bool, stride 0 on broadcast dims */
    int64_t n;
    int es;
    uint64_t value; /* the bytes of the value in the output's dtype */
} masked_fill_geom;

__global__ void masked_fill_kernel(const __grid_constant__ masked_fill_geom g, char *out,
                                   const char *x, const uint8_t *mask) {
    CU_GRID_LOOP(p, g.n) {
        char *dst = out + cu_nd_offset(g.out, p) * g.es;
        if (mask[cu_nd_offset(g.mask, p)])
            cu_move(dst, (const char *)&g.value, g.es);
        else
            cu_move(dst, x + cu_nd_offset(g.x, p) * g.es, g.es);
    }
}

__global__ void value_bytes_kernel(int dt, double v, uint64_t *bytes) {
    union {
        uint64_t u;
        char c[8];
    } b;
    b.u = 0;
    cu_store_from_double(b.c, dt, v);
    *bytes = b.u;
}

/* in = (x, mask bool broadcast to x's shape), reals[0] = value; out = x's shape. */
extern "C" cn_status cuda_masked_fill(const cn_kernel_args *a) {
    const char *op = "masked_fill";
    const cn_view *out = &a->out[0], *x = &a->in[0], *mask = &a->in[1];
    if (mask->dtype != CN_BOOL || mask->ndim != out->ndim || x->ndim != out->ndim)
        return cn_set_error(CN_ERR_SHAPE, op, "need a bool mask of x's shape");
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    /* the value's bytes by the device's own conversion (f16 and bf16 included) */
    uint64_t *bytes;
    cn_status s = cu_scratch(d, op, sizeof *bytes, (void **)&bytes);
    if (s != CN_OK) return s;
    value_bytes_kernel<<<1, 1, 0, d->stream>>>(out->dtype, a->reals[0], bytes);
    s = cu_check_launch(op, "value_bytes_kernel");
    int64_t value = 0;
    if (s == CN_OK) s = cu_read_i64(d, op, (const int64_t *)bytes, &value);
    cu_scratch_free(d, bytes);
    if (s != CN_OK) return s;
    cn_view o = cn__view_at_least_1d(out), xv = cn__view_at_least_1d(x),
            mv = cn__view_at_least_1d(mask);
    masked_fill_geom g;
    memset(&g, 0, sizeof g);
    g.out = cu_nd_of(&o);
    g.x = cu_nd_of(&xv);
    g.mask = cu_nd_of(&mv);
    g.n = cn__view_numel(&o);
    g.es = (int)cn_dtype_size(out->dtype);
    g.value = (uint64_t)value;
    masked_fill_kernel<<<cu_blocks(g.n), CU_THREADS, 0, d->stream>>>(
        g, (char *)o.data, (const char *)xv.data, (const uint8_t *)mv.data);
    return cu_check_launch(op, "masked_fill_kernel");
}

/* ---- tril and triu ----------------------------------------------------------------------------
 */

typedef struct tri_geom {
    cu_nd out, x;
    int64_t n, diagonal;
    int es, upper;
} tri_geom;

/* Entry (.., i, j) is kept where j - i <= diagonal (tril) or >= diagonal (triu), else zero (the
 * all-zero bytes of every dtype). */
__global__ void tri_kernel(const __grid_constant__ tri_geom g, char *out, const char *x) {
    const int nd = g.out.nd;
    CU_GRID_LOOP(p, g.n) {
        int64_t j = p % g.out.shape[nd - 1], i = (p / g.out.shape[nd - 1]) % g.out.shape[nd - 2];
        int keep = g.upper ? j - i >= g.diagonal : j - i <= g.diagonal;
        char *dst = out + cu_nd_offset(g.out, p) * g.es;
        const uint64_t zero = 0;
        cu_move(dst, keep ? x + cu_nd_offset(g.x, p) * g.es : (const char *)&zero, g.es);
    }
}

/* in = (x, ndim >= 2), ints[0] = diagonal; out = x's shape. */
extern "C" cn_status cuda_triangle(const cn_kernel_args *a) {
    const char *op = cn_op_name(a->op);
    const cn_view *out = &a->out[0], *x = &a->in[0];
    if (out->ndim < 2 || x->ndim != out->ndim)
        return cn_set_error(CN_ERR_SHAPE, op, "need x with at least 2 dims");
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    tri_geom g;
    memset(&g, 0, sizeof g);
    g.out = cu_nd_of(out);
    g.x = cu_nd_of(x);
    g.n = cn__view_numel(out);
    g.diagonal = a->ints[0];
    g.es = (int)cn_dtype_size(out->dtype);
    g.upper = a->op == CN_OP_TRIU;
    tri_kernel<<<cu_blocks(g.n), CU_THREADS, 0, d->stream>>>(g, (char *)out->data,
                                                             (const char *)x->data);
    return cu_check_launch(op, "tri_kernel");
}

/* ---- flip and repeat: out[p] = x[map(p)] ------------------------------------------------------
 */

/* x's coordinate for out's coordinate c along d: c mod x's size (repeat; c for flip), reversed
 * on the flipped dims. x has out's ndim (repeat pads it with leading dims of size 1). */
typedef struct remap_geom {
    cu_nd out;
    int64_t xshape[CN_MAX_DIMS], xstr[CN_MAX_DIMS];
    unsigned flip;
    int64_t n;
    int es;
} remap_geom;

__global__ void remap_kernel(const __grid_constant__ remap_geom g, char *out, const char *x) {
    CU_GRID_LOOP(p, g.n) {
        int64_t q = p, oo = 0, xo = 0;
        for (int d = g.out.nd - 1; d >= 0; d--) {
            int64_t t = q / g.out.shape[d], c = q - t * g.out.shape[d];
            q = t;
            oo += c * g.out.stride[d];
            int64_t k = c % g.xshape[d];
            if ((g.flip >> d) & 1u) k = g.xshape[d] - 1 - k;
            xo += k * g.xstr[d];
        }
        cu_move(out + oo * g.es, x + xo * g.es, g.es);
    }
}

static cn_status launch_remap(const cn_kernel_args *a, const char *op, remap_geom *g,
                              const cn_view *out0, const void *x) {
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    cn_view out = cn__view_at_least_1d(out0);
    g->out = cu_nd_of(&out);
    g->n = cn__view_numel(&out);
    remap_kernel<<<cu_blocks(g->n), CU_THREADS, 0, d->stream>>>(*g, (char *)out.data,
                                                                (const char *)x);
    return cu_check_launch(op, "remap_kernel");
}

/* in = (x), ints = the dims to flip (distinct, in [0, ndim)); out = x's shape. */
extern "C" cn_status cuda_flip(const cn_kernel_args *a) {
    cn_view x = cn__view_at_least_1d(&a->in[0]);
    remap_geom g;
    memset(&g, 0, sizeof g);
    g.es = (int)cn_dtype_size(x.dtype);
    for (int d = 0; d < x.ndim; d++) {
        g.xshape[d] = x.shape[d];
        g.xstr[d] = x.strides[d];
    }
    for (int i = 0; i < a->n_ints; i++) {
        if (a->ints[i] < 0 || a->ints[i] >= a->in[0].ndim)
            return cn_set_error(CN_ERR_INVALID_ARG, "flip", "dim %lld is out of range",
                                (long long)a->ints[i]);
        g.flip |= 1u << a->ints[i];
    }
    return launch_remap(a, "flip", &g, &a->out[0], x.data);
}

/* in = (x), ints = the repeats (one per output dim, n_ints >= x's ndim); out[p] = x[p mod x's
 * shape], x taken with leading dims of size 1. */
extern "C" cn_status cuda_repeat(const cn_kernel_args *a) {
    const cn_view *x = &a->in[0], *out = &a->out[0];
    int nd = out->ndim, lead = nd - x->ndim;
    if (lead < 0 || a->n_ints != nd)
        return cn_set_error(CN_ERR_SHAPE, "repeat", "need one repeat per output dim");
    remap_geom g;
    memset(&g, 0, sizeof g);
    g.es = (int)cn_dtype_size(x->dtype);
    for (int d = 0; d < nd; d++) {
        g.xshape[d] = d < lead ? 1 : x->shape[d - lead];
        g.xstr[d] = d < lead ? 0 : x->strides[d - lead];
    }
    if (nd == 0) g.xshape[0] = 1; /* a 0-d x: one element */
    return launch_remap(a, "repeat", &g, out, x->data);
}

/* ---- slice_assign -----------------------------------------------------------------------------
 */

/* in = (x, values), ints = dim, start, step; out = x with the slice start::step of dim replaced
 * by values (the slice's shape). Two copies on the stream: x, then values into the slice. */
extern "C" cn_status cuda_slice_assign(const cn_kernel_args *a) {
    const char *op = "slice_assign";
    const cn_view *x = &a->in[0], *values = &a->in[1], *out = &a->out[0];
    int dim = (int)a->ints[0];
    int64_t start = a->ints[1], step = a->ints[2];
    if (dim < 0 || dim >= out->ndim || values->ndim != out->ndim || step < 1)
        return cn_set_error(CN_ERR_SHAPE, op, "need values of x's ndim and a valid dim and step");
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    cn_status s = cu_copy_view(d, op, out, x);
    if (s != CN_OK || cn__view_numel(values) == 0) return s;
    cn_view part = *out;
    part.shape[dim] = values->shape[dim];
    part.strides[dim] = out->strides[dim] * step;
    part.data = (char *)out->data + start * out->strides[dim] * (int64_t)cn_dtype_size(out->dtype);
    return cu_copy_view(d, op, &part, values);
}

/* ---- unfold -----------------------------------------------------------------------------------
 */

/* in = (x), ints = dim, size, step; out[.., w, .., j] = x[.., w * step + j, ..]: a copy of the
 * strided view of x's windows (as the CPU does). */
extern "C" cn_status cuda_unfold(const cn_kernel_args *a) {
    const char *op = "unfold";
    const cn_view *x = &a->in[0], *out = &a->out[0];
    int dim = (int)a->ints[0], nd = x->ndim;
    int64_t step = a->ints[2];
    if (dim < 0 || dim >= nd || out->ndim != nd + 1 || step < 1)
        return cn_set_error(CN_ERR_SHAPE, op, "need out with one dim more than x");
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    cn_view windows = *x;
    windows.ndim = nd + 1;
    for (int k = 0; k <= nd; k++)
        windows.shape[k] = out->shape[k];
    windows.strides[dim] = out->shape[dim] > 1 ? x->strides[dim] * step : 0;
    windows.strides[nd] = x->strides[dim];
    return cu_copy_view(d, op, out, &windows);
}

/* ---- nonzero and masked_select: an ordered compaction in one block ---------------------------- *
 * Thread t of one block takes the t-th contiguous range of positions, counts its hits, the block
 * turns the counts into starting rows (a scan by thread 0), and each thread writes its hits in
 * order: row-major order, deterministic, as the CPU's. */

#define COMPACT_THREADS 1024

typedef struct compact_geom {
    cu_nd x, mask;      /* mask: masked_select only */
    int64_t n, want;    /* positions; the router's count */
    int dt, es, select; /* select: masked_select (write x's values), else nonzero (coordinates) */
    int64_t ostride0, ostride1;
} compact_geom;

__device__ __forceinline__ bool cu_nonzero_at(const char *p, int dt) {
    switch (dt) {
    case CN_F32:
        return *(const float *)p != 0.0f;
    case CN_F64:
        return *(const double *)p != 0.0;
    case CN_F16:
    case CN_BF16:
        return (*(const uint16_t *)p & 0x7fffu) != 0;
    case CN_I32:
        return *(const int32_t *)p != 0;
    case CN_I64:
        return *(const int64_t *)p != 0;
    default:
        return *(const uint8_t *)p != 0;
    }
}

__global__ void compact_kernel(const __grid_constant__ compact_geom g, const char *x,
                               const uint8_t *mask, char *out, int64_t *found) {
    __shared__ int64_t start[COMPACT_THREADS];
    const int t = threadIdx.x;
    const int64_t chunk = (g.n + COMPACT_THREADS - 1) / COMPACT_THREADS;
    const int64_t lo = t * chunk < g.n ? t * chunk : g.n, hi = lo + chunk < g.n ? lo + chunk : g.n;
    int64_t hits = 0;
    for (int64_t p = lo; p < hi; p++)
        hits += g.select ? mask[cu_nd_offset(g.mask, p)] != 0
                         : cu_nonzero_at(x + cu_nd_offset(g.x, p) * g.es, g.dt);
    start[t] = hits;
    __syncthreads();
    if (t == 0) {
        int64_t sum = 0;
        for (int k = 0; k < COMPACT_THREADS; k++) {
            int64_t c = start[k];
            start[k] = sum;
            sum += c;
        }
        *found = sum;
    }
    __syncthreads();
    int64_t row = start[t];
    for (int64_t p = lo; p < hi; p++) {
        const char *src = x + cu_nd_offset(g.x, p) * g.es;
        bool hit = g.select ? mask[cu_nd_offset(g.mask, p)] != 0 : cu_nonzero_at(src, g.dt);
        if (!hit) continue;
        if (row < g.want) { /* a count that changed meanwhile is reported by the host */
            if (g.select) {
                cu_move(out + row * g.ostride0 * g.es, src, g.es);
            } else {
                int64_t q = p;
                for (int k = g.x.nd - 1; k >= 0; k--) {
                    int64_t s = q / g.x.shape[k];
                    ((int64_t *)out)[row * g.ostride0 + k * g.ostride1] = q - s * g.x.shape[k];
                    q = s;
                }
            }
        }
        row++;
    }
}

static cn_status compact(const cn_kernel_args *a, const char *op, int select) {
    const cn_view *x = &a->in[0], *out = &a->out[0];
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    compact_geom g;
    memset(&g, 0, sizeof g);
    cn_view xv = cn__view_at_least_1d(x);
    g.x = cu_nd_of(&xv); /* a 0-d x never gets here: nonzero's [count, 0] is empty */
    const uint8_t *mask = NULL;
    if (select) {
        cn_view mv = cn__view_at_least_1d(&a->in[1]);
        g.mask = cu_nd_of(&mv);
        mask = (const uint8_t *)mv.data;
    }
    g.n = cn__view_numel(&xv);
    g.want = out->shape[0];
    g.dt = x->dtype;
    g.es = (int)cn_dtype_size(x->dtype);
    g.select = select;
    g.ostride0 = out->strides[0];
    g.ostride1 = out->ndim > 1 ? out->strides[1] : 0;
    int64_t *found;
    cn_status s = cu_scratch(d, op, sizeof *found, (void **)&found);
    if (s != CN_OK) return s;
    compact_kernel<<<1, COMPACT_THREADS, 0, d->stream>>>(g, (const char *)xv.data, mask,
                                                         (char *)out->data, found);
    s = cu_check_launch(op, "compact_kernel");
    int64_t got = 0;
    if (s == CN_OK) s = cu_read_i64(d, op, found, &got);
    cu_scratch_free(d, found);
    if (s == CN_OK && got != g.want)
        s = cn_set_error(CN_ERR_INVALID_ARG, op,
                         "the input changed while the op ran: %lld "
                         "entries were counted, %lld found; do not write to it from another "
                         "thread",
                         (long long)g.want, (long long)got);
    return s;
}

/* in = (x), out = [count, ndim] i64: the coordinates of x's nonzero entries, row-major. */
extern "C" cn_status cuda_nonzero(const cn_kernel_args *a) {
    if (a->out[0].ndim != 2 || a->out[0].shape[1] != a->in[0].ndim)
        return cn_set_error(CN_ERR_SHAPE, "nonzero", "need an i64 output of [count, ndim]");
    return compact(a, "nonzero", 0);
}

/* in = (x, mask bool), one (broadcast) shape; out = [count]: x where mask, row-major. */
extern "C" cn_status cuda_masked_select(const cn_kernel_args *a) {
    if (a->in[1].dtype != CN_BOOL || a->in[1].ndim != a->in[0].ndim || a->out[0].ndim != 1)
        return cn_set_error(CN_ERR_SHAPE, "masked_select", "need x and a bool mask of one shape");
    return compact(a, "masked_select", 1);
}
