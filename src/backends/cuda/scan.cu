/* CUDA kernels for the scans and sorts along one dim (cumsum, cumprod and its backward, cummax,
 * cummin, sort) and for any / all, with the CPU's semantics (cpu/scan.c says them).
 *
 * Simple by design: one thread per row (the n elements along dim at one position of the other
 * dims), each running its row in order exactly as the CPU does, so the results are the CPU's:
 * floats accumulate in double (exact loads of every float dtype), ints in 64 bits wrapping. sort
 * is the CPU's stable bottom-up merge sort of the row's indices, in scratch memory. */
#include <stdint.h>
#include <string.h>

#include "backends/cuda/common.cuh"
#include "core/backend_common.h"

/* The rows of a view along dim; the output (contiguous, of the input's shape but out_n at dim)
 * steps by `inner` along dim. */
typedef struct cu_rows {
    int ndim, dim;
    int64_t shape[CN_MAX_DIMS], strides[CN_MAX_DIMS];
    int64_t n, xs, inner, rows;
} cu_rows;

static cu_rows rows_of(const cn_view *x, int dim) {
    cu_rows g;
    memset(&g, 0, sizeof g);
    g.ndim = x->ndim;
    g.dim = dim;
    for (int d = 0; d < x->ndim; d++) {
        g.shape[d] = x->shape[d];
        g.strides[d] = x->strides[d];
    }
    g.n = x->ndim ? x->shape[dim] : 1;
    g.xs = x->ndim ? x->strides[dim] : 0;
    g.inner = 1;
    for (int d = dim + 1; d < x->ndim; d++) g.inner *= x->shape[d];
    g.rows = 1;
    for (int d = 0; d < x->ndim; d++)
        if (d != dim) g.rows *= x->shape[d];
    return g;
}

/* Row r's first input element (elements), and its first output element in *out. */
__device__ __forceinline__ int64_t cu_row_offsets(const cu_rows &g, int64_t r, int64_t out_n,
                                                  int64_t *out) {
    *out = r / g.inner * out_n * g.inner + r % g.inner;
    int64_t off = 0;
    for (int d = g.ndim - 1; d >= 0 && r > 0; d--) {
        if (d == g.dim) continue;
        off += r % g.shape[d] * g.strides[d];
        r /= g.shape[d];
    }
    return off;
}

/* ---- kernels ------------------------------------------------------------------------------- */

__device__ __forceinline__ int cu_elem_size(int dt) {
    return dt == CN_F64 || dt == CN_I64 ? 8 : dt == CN_F32 || dt == CN_I32 ? 4
           : dt == CN_F16 || dt == CN_BF16 ? 2 : 1;
}

/* cumsum (reverse: from the end) and cumprod. */
__global__ void cum_kernel(const __grid_constant__ cu_rows g, const char *x, char *y, int dt,
                           int prod, int reverse) {
    const int es = cu_elem_size(dt);
    bool fl = cu_is_float(dt);
    CU_GRID_LOOP(r, g.rows) {
        int64_t yo, xo = cu_row_offsets(g, r, g.n, &yo);
        double facc = prod ? 1.0 : 0.0;
        uint64_t iacc = prod ? 1u : 0u;
        for (int64_t k = 0; k < g.n; k++) {
            int64_t i = reverse ? g.n - 1 - k : k;
            const char *px = x + (xo + i * g.xs) * es;
            char *py = y + (yo + i * g.inner) * es;
            if (fl) {
                double v = cu_load_f(px, dt);
                facc = prod ? facc * v : facc + v;
                cu_store_from_double(py, dt, facc);
            } else {
                uint64_t v = (uint64_t)cu_load_i(px, dt);
                iacc = prod ? iacc * v : iacc + v;
                cu_st<int64_t>(py, dt, (int64_t)iacc);
            }
        }
    }
}

/* cumprod's gradient: dx_i = P_{i-1} S_i, S_i = g_i + x_{i+1} S_{i+1} (no division). */
__global__ void cumprod_bwd_kernel(const __grid_constant__ cu_rows gg,
                                   const __grid_constant__ cu_rows gx, const char *g,
                                   const char *x, char *dx, int dt) {
    const int es = cu_elem_size(dt);
    CU_GRID_LOOP(r, gx.rows) {
        int64_t yo, go = cu_row_offsets(gg, r, gx.n, &yo);
        int64_t xo = cu_row_offsets(gx, r, gx.n, &yo);
        double s = 0;
        for (int64_t i = gx.n - 1; i >= 0; i--) {
            double next = i + 1 < gx.n ? cu_load_f(x + (xo + (i + 1) * gx.xs) * es, dt) * s : 0.0;
            s = cu_load_f(g + (go + i * gg.xs) * es, dt) + next;
            cu_store_from_double(dx + (yo + i * gx.inner) * es, dt, s);
        }
        double p = 1;
        for (int64_t i = 0; i < gx.n; i++) {
            char *pd = dx + (yo + i * gx.inner) * es;
            cu_store_from_double(pd, dt, p * cu_load_f(pd, dt));
            p *= cu_load_f(x + (xo + i * gx.xs) * es, dt);
        }
    }
}

/* cummax / cummin: the last index among equals; NaN takes over. Ints compare as int64. */
__global__ void cumext_kernel(const __grid_constant__ cu_rows g, const char *x, char *y,
                              int64_t *idx, int dt, int is_max) {
    const int es = cu_elem_size(dt);
    bool fl = cu_is_float(dt);
    CU_GRID_LOOP(r, g.rows) {
        int64_t yo, xo = cu_row_offsets(g, r, g.n, &yo);
        int64_t at = 0;
        const char *best = x + xo * es;
        for (int64_t i = 0; i < g.n; i++) {
            const char *px = x + (xo + i * g.xs) * es;
            bool take;
            if (fl) {
                double v = cu_load_f(px, dt), m = cu_load_f(best, dt);
                take = v != v || (m == m && (is_max ? v >= m : v <= m));
            } else {
                int64_t v = cu_load_i(px, dt), m = cu_load_i(best, dt);
                take = is_max ? v >= m : v <= m;
            }
            if (take) {
                best = px;
                at = i;
            }
            cu_move(y + (yo + i * g.inner) * es, best, es);
            idx[yo + i * g.inner] = at;
        }
    }
}

/* a sorts strictly before b (NaN as the largest value). */
__device__ __forceinline__ bool cu_before(const char *a, const char *b, int dt, bool fl,
                                          int desc) {
    if (fl) {
        double u = cu_load_f(a, dt), v = cu_load_f(b, dt);
        bool un = u != u, vn = v != v;
        if (desc) return (un && !vn) || (!vn && u > v);
        return !un && (vn || u < v);
    }
    int64_t u = cu_load_i(a, dt), v = cu_load_i(b, dt);
    return desc ? u > v : u < v;
}

/* Stable bottom-up merge sort of each row's indices in scratch (2 n per row), then the values
 * and indices in that order. */
__global__ void sort_kernel(const __grid_constant__ cu_rows g, const char *x, char *y,
                            int64_t *idx, int64_t *scratch, int dt, int desc) {
    const int es = cu_elem_size(dt);
    bool fl = cu_is_float(dt);
    CU_GRID_LOOP(r, g.rows) {
        int64_t yo, xo = cu_row_offsets(g, r, g.n, &yo);
        int64_t n = g.n;
        int64_t *src = scratch + r * 2 * n, *dst = src + n;
        for (int64_t i = 0; i < n; i++) src[i] = i;
        for (int64_t w = 1; w < n; w *= 2) {
            for (int64_t lo = 0; lo < n; lo += 2 * w) {
                int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
                int64_t p = lo, q = mid, o = lo;
                while (p < mid && q < hi)
                    dst[o++] = cu_before(x + (xo + src[q] * g.xs) * es,
                                         x + (xo + src[p] * g.xs) * es, dt, fl, desc)
                                   ? src[q++]
                                   : src[p++];
                while (p < mid) dst[o++] = src[p++];
                while (q < hi) dst[o++] = src[q++];
            }
            int64_t *t = src;
            src = dst;
            dst = t;
        }
        for (int64_t i = 0; i < n; i++) {
            cu_move(y + (yo + i * g.inner) * es, x + (xo + src[i] * g.xs) * es, es);
            idx[yo + i * g.inner] = src[i];
        }
    }
}

/* any / all: != 0 is true (NaN too); over nothing, any is false and all true. */
__global__ void anyall_kernel(const __grid_constant__ cu_rows g, const char *x, uint8_t *y,
                              int dt, int want_any) {
    const int es = cu_elem_size(dt);
    bool fl = cu_is_float(dt);
    CU_GRID_LOOP(r, g.rows) {
        int64_t yo, xo = cu_row_offsets(g, r, 1, &yo);
        bool found = false;
        for (int64_t k = 0; k < g.n && !found; k++) {
            const char *px = x + (xo + k * g.xs) * es;
            bool nz = fl ? cu_load_f(px, dt) != 0.0 : cu_load_i(px, dt) != 0;
            found = nz == (bool)want_any;
        }
        y[yo] = (uint8_t)(want_any ? found : !found);
    }
}

/* ---- entries ------------------------------------------------------------------------------- */

static cn_status bad_dim(const cn_kernel_args *a, int dim) {
    return cn_set_error(CN_ERR_INVALID_ARG, cn_op_name(a->op), "dim %d is out of range for %d "
                        "dims", dim, a->in[0].ndim);
}

extern "C" cn_status cuda_scan(const cn_kernel_args *a) {
    const cn_view *x = &a->in[0];
    const char *name = cn_op_name(a->op);
    int dim = a->n_ints > 0 ? (int)a->ints[0] : 0;
    if (x->ndim > 0 && (dim < 0 || dim >= x->ndim)) return bad_dim(a, dim);
    cu_rows g = rows_of(x, dim);
    int anyall = a->op == CN_OP_ANY || a->op == CN_OP_ALL;
    if (g.rows == 0 || (g.n == 0 && !anyall)) return CN_OK;
    cu_dev *d = cu_device(name, a->device);
    if (!d) return cn_last_status();
    unsigned blocks = cu_blocks(g.rows);
    const char *xd = (const char *)x->data;
    char *yd = (char *)a->out[0].data;
    switch (a->op) {
    case CN_OP_CUMSUM:
    case CN_OP_CUMPROD:
        cum_kernel<<<blocks, CU_THREADS, 0, d->stream>>>(
            g, xd, yd, x->dtype, a->op == CN_OP_CUMPROD,
            a->op == CN_OP_CUMSUM && a->n_ints > 1 && a->ints[1] != 0);
        return cu_check_launch(name, "cum_kernel");
    case CN_OP_CUMMAX:
    case CN_OP_CUMMIN:
        cumext_kernel<<<blocks, CU_THREADS, 0, d->stream>>>(
            g, xd, yd, (int64_t *)a->out[1].data, x->dtype, a->op == CN_OP_CUMMAX);
        return cu_check_launch(name, "cumext_kernel");
    case CN_OP_ANY:
    case CN_OP_ALL:
        anyall_kernel<<<blocks, CU_THREADS, 0, d->stream>>>(g, xd, (uint8_t *)yd, x->dtype,
                                                            a->op == CN_OP_ANY);
        return cu_check_launch(name, "anyall_kernel");
    case CN_OP_SORT: {
        /* rows * n = numel fits in int64; twice that in bytes * 8 is checked here */
        int64_t numel = g.rows * g.n;
        if (numel > INT64_MAX / 16)
            return cn_set_error(CN_ERR_OVERFLOW, name, "the sort's scratch (16 bytes per "
                                "element) does not fit in memory");
        int64_t *scratch;
        cn_status s = cu_scratch(d, name, (size_t)numel * 16, (void **)&scratch);
        if (s != CN_OK) return s;
        sort_kernel<<<blocks, CU_THREADS, 0, d->stream>>>(g, xd, yd, (int64_t *)a->out[1].data,
                                                          scratch, x->dtype,
                                                          a->n_ints > 1 && a->ints[1] != 0);
        s = cu_check_launch(name, "sort_kernel");
        cu_scratch_free(d, scratch);
        return s;
    }
    default: return cn__kernel_op_error("cuda", "cuda_scan", a->op);
    }
}

extern "C" cn_status cuda_cumprod_backward(const cn_kernel_args *a) {
    const char *name = cn_op_name(a->op);
    int dim = a->n_ints > 0 ? (int)a->ints[0] : 0;
    if (a->in[1].ndim > 0 && (dim < 0 || dim >= a->in[1].ndim)) return bad_dim(a, dim);
    cu_rows gg = rows_of(&a->in[0], dim), gx = rows_of(&a->in[1], dim);
    if (gx.rows == 0 || gx.n == 0) return CN_OK;
    cu_dev *d = cu_device(name, a->device);
    if (!d) return cn_last_status();
    cumprod_bwd_kernel<<<cu_blocks(gx.rows), CU_THREADS, 0, d->stream>>>(
        gg, gx, (const char *)a->in[0].data, (const char *)a->in[1].data, (char *)a->out[0].data,
        a->in[1].dtype);
    return cu_check_launch(name, "cumprod_bwd_kernel");
}
