/* CPU kernels of the adaptive average pools (1-D to 3-D: x's last k dims) and their backward,
 * and of max pooling with indices, dilation and ceil mode (at the end).
 *
 * Output index o of a pooled dim (input size n, output size m) averages the inputs
 * [floor(o * n / m), ceil((o + 1) * n / m)) (PyTorch's windows, which may overlap by one when m
 * does not divide n). The backward gives each input entry the sum of g / (window size) over the
 * outputs whose windows hold it: along one dim those are o in
 * [floor(i * m / n), floor(((i + 1) * m - 1) / n)]. Both sum in double, in a fixed order, one
 * output entry per step, split over the backend's pool. f32 and f64. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "core/backend_common.h"

/* window [*lo, *hi) of output index o (input size n, output size m); n * m fits int64 (the
 * front-end checked). */
static inline void window(int64_t o, int64_t n, int64_t m, int64_t *lo, int64_t *hi) {
    *lo = o * n / m;
    *hi = ((o + 1) * n + m - 1) / m;
}



typedef struct adaptive_job {
    const cn_view *out, *in; /* forward: in = x; backward: in = g */
    int k;
    int backward;
} adaptive_job;

static void adaptive_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const adaptive_job *j = ctx;
    const cn_view *out = j->out, *in = j->in;
    const int nd = out->ndim, lead = nd - j->k;
    const cn_dtype dt = out->dtype;
    const int64_t es = (int64_t)cn_dtype_size(dt);
    for (int64_t p = begin; p < end; p++) {
        int64_t q = p, oo = 0, io = 0, c[CN_MAX_DIMS];
        for (int d = nd - 1; d >= 0; d--) {
            c[d] = q % out->shape[d];
            q /= out->shape[d];
            oo += c[d] * out->strides[d];
            if (d < lead) io += c[d] * in->strides[d];
        }
        /* the ranges of in's pooled coordinates to visit (up to 3 dims; unused ones [0, 1)) */
        int64_t lo[3] = {0, 0, 0}, hi[3] = {1, 1, 1}, st[3] = {0, 0, 0};
        for (int i = 0; i < j->k; i++) {
            int d = lead + i;
            int64_t n = out->shape[d], m = in->shape[d]; /* forward: n is the output's size */
            st[i] = in->strides[d];
            if (!j->backward) {
                window(c[d], m, n, &lo[i], &hi[i]);
            } else { /* the outputs (of size m) whose windows hold input index c[d] (of n) */
                lo[i] = c[d] * m / n;
                hi[i] = ((c[d] + 1) * m - 1) / n + 1;
            }
        }
        double s = 0;
        for (int64_t a = lo[0]; a < hi[0]; a++)
            for (int64_t b = lo[1]; b < hi[1]; b++)
                for (int64_t e = lo[2]; e < hi[2]; e++) {
                    double v = cpu_load_f(
                        (const char *)in->data + (io + a * st[0] + b * st[1] + e * st[2]) * es, dt);
                    if (j->backward) { /* divided by the size of the window of (a, b, e) */
                        const int64_t o[3] = {a, b, e};
                        int64_t count = 1;
                        for (int i = 0; i < j->k; i++) {
                            int64_t wl, wh;
                            window(o[i], out->shape[lead + i], in->shape[lead + i], &wl, &wh);
                            count *= wh - wl;
                        }
                        v /= (double)count;
                    }
                    s += v;
                }
        if (!j->backward) s /= (double)((hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]));
        cpu_store_f((char *)out->data + oo * es, dt, s);
    }
}

/* adaptive_avg_pool: in = (x), ints[0] = k; out = x's shape with its last k dims the output
 * sizes. adaptive_avg_pool_backward: in = (g, the pool's output shape), ints[0] = k; out = the
 * pool's input shape. */
cn_status cpu_adaptive_avg_pool(const cn_kernel_args *a) {
    const cn_view *out = &a->out[0], *in = &a->in[0];
    int k = (int)a->ints[0];
    if (k < 1 || k > 3 || out->ndim != in->ndim || k > out->ndim)
        return cn_set_error(CN_ERR_SHAPE, cn_op_name(a->op), "need k in [1, 3] pooled dims");
    adaptive_job j = {
        .out = out, .in = in, .k = k, .backward = a->op == CN_OP_ADAPTIVE_AVG_POOL_BACKWARD};
    int64_t n = cn__view_numel(out);
    cpu_parallel(n, cpu_chunks(n, CPU_PARALLEL_GRAIN / 8), adaptive_chunk, &j);
    return CN_OK;
}

/* ---- max pooling with indices ---------------------------------------------------------------- *
 * Window (oh, ow) holds rows oh * sh - ph + i * dh (i < kh) and columns likewise, those inside
 * the input; the first maximum in row-major order wins, a NaN wins over numbers (the last NaN, as
 * PyTorch's CPU kernel: `val > max || isnan(val)`). An all -inf window keeps its first position
 * inside the input. */

typedef struct max_pool_job {
    const cn_view *x, *out, *idx;
    const int64_t *k; /* kh, kw, sh, sw, ph, pw, dh, dw */
} max_pool_job;

static void max_pool_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const max_pool_job *j = ctx;
    const cn_view *x = j->x, *out = j->out, *idx = j->idx;
    const int64_t *k = j->k;
    const cn_dtype dt = x->dtype;
    const int64_t es = (int64_t)cn_dtype_size(dt);
    const int64_t C = out->shape[1], OH = out->shape[2], OW = out->shape[3];
    const int64_t H = x->shape[2], W = x->shape[3];
    for (int64_t p = begin; p < end; p++) {
        int64_t ow = p % OW, oh = p / OW % OH, c = p / (OW * OH) % C, n = p / (OW * OH * C);
        const char *plane = (const char *)x->data + (n * x->strides[0] + c * x->strides[1]) * es;
        int64_t h0 = oh * k[2] - k[4], w0 = ow * k[3] - k[5];
        int64_t hf = h0, wf = w0;
        while (hf < 0)
            hf += k[6];
        while (wf < 0)
            wf += k[7];
        double best = -INFINITY;
        /* PyTorch's start, which may lie outside the plane when the window holds only padding
         * (then the maximum is -inf); unsigned so that absurd sizes wrap instead of overflowing */
        int64_t at = (int64_t)((uint64_t)hf * (uint64_t)W + (uint64_t)wf);
        for (int64_t i = 0; i < k[0]; i++) {
            int64_t h = h0 + i * k[6];
            if (h < 0 || h >= H) continue;
            for (int64_t jw = 0; jw < k[1]; jw++) {
                int64_t w = w0 + jw * k[7];
                if (w < 0 || w >= W) continue;
                double v = cpu_load_f(plane + (h * x->strides[2] + w * x->strides[3]) * es, dt);
                if (v > best || v != v) {
                    best = v;
                    at = h * W + w;
                }
            }
        }
        int64_t oo =
            n * out->strides[0] + c * out->strides[1] + oh * out->strides[2] + ow * out->strides[3];
        int64_t io =
            n * idx->strides[0] + c * idx->strides[1] + oh * idx->strides[2] + ow * idx->strides[3];
        cpu_store_f((char *)out->data + oo * es, dt, best);
        memcpy((char *)idx->data + io * (int64_t)sizeof(int64_t), &at, sizeof at);
    }
}

/* in = (x [N, C, H, W]), ints = kernel h, w, stride h, w, padding h, w, dilation h, w; out =
 * (values [N, C, OH, OW], i64 indices of the same shape). */
cn_status cpu_max_pool2d_with_indices(const cn_kernel_args *a) {
    const cn_view *x = &a->in[0], *out = &a->out[0], *idx = &a->out[1];
    if (a->n_out != 2 || a->n_ints != 8 || x->ndim != 4 || out->ndim != 4 || idx->ndim != 4 ||
        idx->dtype != CN_I64)
        return cn_set_error(CN_ERR_SHAPE, "max_pool2d_with_indices",
                            "need 4-D x, values and "
                            "i64 indices, and 8 ints");
    max_pool_job j = {.x = x, .out = out, .idx = idx, .k = a->ints};
    int64_t n = cn__view_numel(out);
    cpu_parallel(n, cpu_chunks(n, CPU_PARALLEL_GRAIN / 8), max_pool_chunk, &j);
    return CN_OK;
}
