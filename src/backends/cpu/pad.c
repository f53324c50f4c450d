/* CPU kernels of pad (constant, reflect, replicate, circular) and of its backward along one dim.
 *
 * pad gathers: each output entry reads the input entry its coordinates map to (or takes the
 * constant), by element size, so one kernel serves every dtype but f16/bf16 (the constant is
 * converted here: backend.c leaves the half floats to other backends, as for masked_fill).
 * pad_backward sums, for each input entry, the output gradient at every position mapped to it
 * (one for constant, up to three for reflect, a run for replicate's edges, every size-th for
 * circular), in double, in a fixed order: deterministic. Work is split over rows of the output's
 * last dim on the backend's pool. */
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "cinder/ops.h" /* cn_pad_mode */
#include "core/backend_common.h"
#include "core/dtype.h"

/* The input coordinate that output coordinate c of a dim (input size n, output size m, left
 * padding l) reads under mode; -1 for the constant. Circular crops first, then wraps the kept
 * [cl, n - cr) (PyTorch's order); the others crop only in constant mode, where this is the same. */
static inline int64_t pad_source(int mode, int64_t c, int64_t l, int64_t n, int64_t m) {
    if (mode == CN_PAD_CIRCULAR) {
        int64_t r = m - n - l, cl = l < 0 ? -l : 0, cr = r < 0 ? -r : 0, kept = n - cl - cr;
        int64_t w = (c - (l > 0 ? l : 0)) % kept;
        return cl + (w < 0 ? w + kept : w);
    }
    int64_t t = c - l;
    if (t >= 0 && t < n) return t;
    switch (mode) {
    case CN_PAD_REFLECT:
        return t < 0 ? -t : 2 * (n - 1) - t;
    case CN_PAD_REPLICATE:
        return t < 0 ? 0 : n - 1;
    default:
        return -1;
    }
}

/* The first output coordinate that circular padding (as pad_source) reads from input index i,
 * and the step to the next (all up to m); -1 when i was cropped. */
static inline int64_t circular_first(int64_t i, int64_t l, int64_t n, int64_t m, int64_t *step) {
    int64_t r = m - n - l, cl = l < 0 ? -l : 0, cr = r < 0 ? -r : 0, kept = n - cl - cr;
    *step = kept;
    if (i < cl || i >= n - cr) return -1;
    return (i - cl + (l > 0 ? l : 0)) % kept;
}

/* ---- pad ----------------------------------------------------------------------------------- */

typedef struct pad_job {
    const cn_view *out, *x;
    int mode;
    int64_t left[CN_MAX_DIMS];
    size_t es;
    unsigned char value[8];
} pad_job;

static void pad_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const pad_job *j = ctx;
    const cn_view *out = j->out, *x = j->x;
    const int nd = out->ndim, last = nd - 1;
    const int64_t es = (int64_t)j->es;
    for (int64_t r = begin; r < end; r++) {
        /* the row's coordinates over every dim but the last */
        int64_t q = r, oo = 0, xo = 0;
        int outside = 0;
        for (int d = last - 1; d >= 0; d--) {
            int64_t c = q % out->shape[d];
            q /= out->shape[d];
            oo += c * out->strides[d];
            int64_t s = pad_source(j->mode, c, j->left[d], x->shape[d], out->shape[d]);
            if (s < 0)
                outside = 1;
            else
                xo += s * x->strides[d];
        }
        char *orow = (char *)out->data + oo * es;
        const char *xrow = (const char *)x->data + xo * es;
        for (int64_t c = 0; c < out->shape[last]; c++) {
            char *dst = orow + c * out->strides[last] * es;
            int64_t s =
                outside ? -1
                        : pad_source(j->mode, c, j->left[last], x->shape[last], out->shape[last]);
            if (s < 0)
                cpu_move_elem(dst, (const char *)j->value, j->es);
            else
                cpu_move_elem(dst, xrow + s * x->strides[last] * es, j->es);
        }
    }
}

/* in = (x), ints = mode, skip, then (left, right) of dim ndim - 1 - skip, the one before, ...
 * (at most 3 dims); reals[0] = the constant; out = x's shape grown by left + right there. */
cn_status cpu_pad(const cn_kernel_args *a) {
    cn_view out = cn__view_at_least_1d(&a->out[0]), x = cn__view_at_least_1d(&a->in[0]);
    int dims = (a->n_ints - 2) / 2, skip = a->n_ints >= 2 ? (int)a->ints[1] : 0;
    if (x.ndim != out.ndim || skip < 0 || skip + dims > x.ndim || a->n_ints != 2 + 2 * dims ||
        a->n_reals < 1)
        return cn_set_error(CN_ERR_SHAPE, "pad",
                            "the kernel needs the mode, skip and a pad tuple "
                            "of at most x's dims");
    pad_job j = {.out = &out, .x = &x, .mode = (int)a->ints[0], .es = cn_dtype_size(x.dtype)};
    for (int k = 0; k < dims; k++)
        j.left[x.ndim - 1 - skip - k] = a->ints[2 + 2 * k];
    cpu_value_bytes(x.dtype, a->reals[0], j.value);
    int64_t n = cn__view_numel(&out);
    cpu_parallel(n / out.shape[out.ndim - 1], cpu_chunks(n, CPU_PARALLEL_GRAIN), pad_chunk, &j);
    return CN_OK;
}

/* ---- pad_backward --------------------------------------------------------------------------- */

typedef struct pad_back_job {
    const cn_view *out, *g;
    int mode, dim;
    int64_t left;
} pad_back_job;

/* The sum of g's entries along the dim (g's size m, stride gs, from gp) that pad copied from
 * input index i (input size n). */
static double pad_back_sum(const pad_back_job *j, const char *gp, int64_t gs, int64_t m, int64_t i,
                           int64_t n) {
    const cn_dtype dt = j->g->dtype;
    const int64_t es = (int64_t)cn_dtype_size(dt), l = j->left;
#define G(o) cpu_load_f(gp + (o)*gs * es, dt)
    double s = 0;
    if (j->mode == CN_PAD_CIRCULAR) {
        int64_t step, o = circular_first(i, l, n, m, &step);
        for (; o >= 0 && o < m; o += step)
            s += G(o);
        return s;
    }
    if (i + l >= 0 && i + l < m) s += G(i + l);
    if (j->mode == CN_PAD_REFLECT) {
        if (i >= 1 && l - i >= 0) s += G(l - i);
        if (i <= n - 2 && l + 2 * (n - 1) - i < m) s += G(l + 2 * (n - 1) - i);
    } else if (j->mode == CN_PAD_REPLICATE) {
        if (i == 0)
            for (int64_t o = 0; o < l; o++)
                s += G(o);
        if (i == n - 1)
            for (int64_t o = l + n; o < m; o++)
                s += G(o);
    }
#undef G
    return s;
}

static void pad_back_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const pad_back_job *j = ctx;
    const cn_view *out = j->out, *g = j->g;
    const int nd = out->ndim, last = nd - 1, dim = j->dim;
    const int64_t es = (int64_t)cn_dtype_size(out->dtype);
    const int64_t n = out->shape[dim], m = g->shape[dim];
    for (int64_t r = begin; r < end; r++) {
        int64_t q = r, oo = 0, go = 0, ci = 0;
        for (int d = last - 1; d >= 0; d--) {
            int64_t c = q % out->shape[d];
            q /= out->shape[d];
            oo += c * out->strides[d];
            if (d == dim)
                ci = c;
            else
                go += c * g->strides[d];
        }
        for (int64_t c = 0; c < out->shape[last]; c++) {
            int64_t i = dim == last ? c : ci;
            const char *gp =
                (const char *)g->data + (go + (dim == last ? 0 : c * g->strides[last])) * es;
            double s = pad_back_sum(j, gp, g->strides[dim], m, i, n);
            char *dst = (char *)out->data + (oo + c * out->strides[last]) * es;
            if (out->dtype == CN_F32) {
                float f = (float)s;
                memcpy(dst, &f, sizeof f);
            } else {
                memcpy(dst, &s, sizeof s);
            }
        }
    }
}

/* in = (g), ints = mode, dim, left, right; out = g's shape with out's size at dim: out[.., i, ..]
 * = the sum of g[.., o, ..] over the o that pad of that dim read from i. f32 or f64. */
cn_status cpu_pad_backward(const cn_kernel_args *a) {
    const cn_view *out = &a->out[0], *g = &a->in[0];
    int dim = (int)a->ints[1];
    if (a->n_ints != 4 || dim < 0 || dim >= out->ndim || g->ndim != out->ndim)
        return cn_set_error(CN_ERR_SHAPE, "pad_backward", "need mode, dim, left, right");
    pad_back_job j = {.out = out, .g = g, .mode = (int)a->ints[0], .dim = dim, .left = a->ints[2]};
    int64_t n = cn__view_numel(out);
    cpu_parallel(n / out->shape[out->ndim - 1], cpu_chunks(n, CPU_PARALLEL_GRAIN), pad_back_chunk,
                 &j);
    return CN_OK;
}
