/* CUDA kernels of pad and of its backward along one dim, one thread per output element, as the
 * CPU computes them (cpu/pad.c): pad gathers by element size (every dtype; the constant stored
 * by cn_cast's rules), pad_backward sums the gradient at each position pad read from an input
 * entry, in double, in a fixed order (deterministic; no atomics). */
#include <string.h>

#include "backends/cuda/common.cuh"
#include "cinder/ops.h" /* cn_pad_mode */
#include "core/backend_common.h"

/* The input coordinate that output coordinate c of a dim (input size n, output size m, left
 * padding l) reads under mode; -1 for the constant. Circular crops first, then wraps the kept
 * [cl, n - cr) (PyTorch's order); the others crop only in constant mode, where this is the same. */
__device__ __forceinline__ int64_t pad_source(int mode, int64_t c, int64_t l, int64_t n, int64_t m) {
    if (mode == CN_PAD_CIRCULAR) {
        int64_t r = m - n - l, cl = l < 0 ? -l : 0, cr = r < 0 ? -r : 0, kept = n - cl - cr;
        int64_t w = (c - (l > 0 ? l : 0)) % kept;
        return cl + (w < 0 ? w + kept : w);
    }
    int64_t t = c - l;
    if (t >= 0 && t < n) return t;
    switch (mode) {
    case CN_PAD_REFLECT: return t < 0 ? -t : 2 * (n - 1) - t;
    case CN_PAD_REPLICATE: return t < 0 ? 0 : n - 1;
    default: return -1;
    }
}

/* The first output coordinate that circular padding (as pad_source) reads from input index i,
 * and the step to the next (all up to m); -1 when i was cropped. */
__device__ __forceinline__ int64_t circular_first(int64_t i, int64_t l, int64_t n, int64_t m, int64_t *step) {
    int64_t r = m - n - l, cl = l < 0 ? -l : 0, cr = r < 0 ? -r : 0, kept = n - cl - cr;
    *step = kept;
    if (i < cl || i >= n - cr) return -1;
    return (i - cl + (l > 0 ? l : 0)) % kept;
}

/* ---- pad ----------------------------------------------------------------------------------- */

typedef struct pad_geom {
    cu_nd out, x;
    int64_t left[CN_MAX_DIMS];
    int64_t n;
    int mode, es, dt;
    double value;
} pad_geom;

__global__ void pad_kernel(const __grid_constant__ pad_geom g, char *out, const char *x) {
    CU_GRID_LOOP(p, g.n) {
        int64_t q = p, oo = 0, xo = 0;
        bool outside = false;
        for (int d = g.out.nd - 1; d >= 0; d--) {
            int64_t t = q / g.out.shape[d], c = q - t * g.out.shape[d];
            q = t;
            oo += c * g.out.stride[d];
            int64_t s = pad_source(g.mode, c, g.left[d], g.x.shape[d], g.out.shape[d]);
            if (s < 0) outside = true;
            else xo += s * g.x.stride[d];
        }
        if (outside) cu_store_from_double(out + oo * g.es, g.dt, g.value);
        else cu_move(out + oo * g.es, x + xo * g.es, g.es);
    }
}

/* in = (x), ints = mode, skip, then (left, right) of dim ndim - 1 - skip, the one before, ...
 * (at most 3 dims); reals[0] = the constant; out = x's shape grown by left + right there. */
extern "C" cn_status cuda_pad(const cn_kernel_args *a) {
    const char *op = "pad";
    cn_view out = cn__view_at_least_1d(&a->out[0]), x = cn__view_at_least_1d(&a->in[0]);
    int dims = (a->n_ints - 2) / 2, skip = a->n_ints >= 2 ? (int)a->ints[1] : 0;
    if (x.ndim != out.ndim || skip < 0 || skip + dims > x.ndim || a->n_ints != 2 + 2 * dims ||
        a->n_reals < 1)
        return cn_set_error(CN_ERR_SHAPE, op, "the kernel needs the mode, skip and a pad tuple of "
                            "at most x's dims");
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    pad_geom g;
    memset(&g, 0, sizeof g);
    g.out = cu_nd_of(&out);
    g.x = cu_nd_of(&x);
    for (int k = 0; k < dims; k++) g.left[x.ndim - 1 - skip - k] = a->ints[2 + 2 * k];
    g.n = cn__view_numel(&out);
    g.mode = (int)a->ints[0];
    g.es = (int)cn_dtype_size(x.dtype);
    g.dt = (int)x.dtype;
    g.value = a->reals[0];
    pad_kernel<<<cu_blocks(g.n), CU_THREADS, 0, d->stream>>>(g, (char *)out.data,
                                                            (const char *)x.data);
    return cu_check_launch(op, "pad_kernel");
}

/* ---- pad_backward --------------------------------------------------------------------------- */

typedef struct pad_back_geom {
    cu_nd out, g;
    int64_t n, left;
    int mode, dim, es, dt;
} pad_back_geom;

__global__ void pad_backward_kernel(const __grid_constant__ pad_back_geom g, char *out,
                                    const char *gr) {
    CU_GRID_LOOP(p, g.n) {
        int64_t q = p, oo = 0, go = 0, i = 0;
        for (int d = g.out.nd - 1; d >= 0; d--) {
            int64_t t = q / g.out.shape[d], c = q - t * g.out.shape[d];
            q = t;
            oo += c * g.out.stride[d];
            if (d == g.dim) i = c;
            else go += c * g.g.stride[d];
        }
        const int64_t n = g.out.shape[g.dim], m = g.g.shape[g.dim], l = g.left;
        const int64_t gs = g.g.stride[g.dim];
        const char *base = gr + go * g.es;
#define G(o) cu_load_f(base + (o) * gs * g.es, g.dt)
        double s = 0;
        if (g.mode == CN_PAD_CIRCULAR) {
            int64_t step, o = circular_first(i, l, n, m, &step);
            for (; o >= 0 && o < m; o += step) s += G(o);
        } else {
            if (i + l >= 0 && i + l < m) s += G(i + l);
            if (g.mode == CN_PAD_REFLECT) {
                if (i >= 1 && l - i >= 0) s += G(l - i);
                if (i <= n - 2 && l + 2 * (n - 1) - i < m) s += G(l + 2 * (n - 1) - i);
            } else if (g.mode == CN_PAD_REPLICATE) {
                if (i == 0)
                    for (int64_t o = 0; o < l; o++) s += G(o);
                if (i == n - 1)
                    for (int64_t o = l + n; o < m; o++) s += G(o);
            }
        }
#undef G
        cu_store_from_double(out + oo * g.es, g.dt, s);
    }
}

/* in = (g), ints = mode, dim, left, right; out = g's shape with x's size at dim. Float. */
extern "C" cn_status cuda_pad_backward(const cn_kernel_args *a) {
    const char *op = "pad_backward";
    const cn_view *out = &a->out[0], *gv = &a->in[0];
    int dim = (int)a->ints[1];
    if (a->n_ints != 4 || dim < 0 || dim >= out->ndim || gv->ndim != out->ndim)
        return cn_set_error(CN_ERR_SHAPE, op, "need mode, dim, left, right");
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    pad_back_geom g;
    memset(&g, 0, sizeof g);
    g.out = cu_nd_of(out);
    g.g = cu_nd_of(gv);
    g.n = cn__view_numel(out);
    g.left = a->ints[2];
    g.mode = (int)a->ints[0];
    g.dim = dim;
    g.es = (int)cn_dtype_size(out->dtype);
    g.dt = (int)out->dtype;
    pad_backward_kernel<<<cu_blocks(g.n), CU_THREADS, 0, d->stream>>>(g, (char *)out->data,
                                                                     (const char *)gv->data);
    return cu_check_launch(op, "pad_backward_kernel");
}
