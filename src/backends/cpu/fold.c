/* CPU kernels of unfold4d (im2col) and fold4d (col2im), the public sliding-block ops.
 *
 * unfold gathers: column entry [n, (c * KH + i) * KW + j, oh * OW + ow] reads
 * x[n, c, oh * sh - ph + i * dh, ow * sw - pw + j * dw] (0 in the padding). fold gathers too,
 * which keeps it deterministic: output [n, c, h, w] sums the column entries (i, j, oh, ow) with
 * h = oh * sh - ph + i * dh and w likewise, found by trying each i (and j) and keeping those whose
 * h + ph - i * dh is a multiple of sh inside [0, OH * sh). Sums in double; f32 and f64. An
 * unfold into dense columns of the input's dtype runs the convolutions' im2col (im2col.h). */
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/im2col.h"
#include "core/backend_common.h"

typedef struct fold_job {
    const cn_view *x, *cols; /* x: [N, C, H, W]; cols: [N, C * KH * KW, OH * OW] */
    const int64_t *k;        /* kernel h, w, dilation h, w, padding h, w, stride h, w */
    int64_t oh, ow;          /* the block counts */
    int fold;
    cpu_conv_geom g; /* unfold of f32 / f64 into dense columns: the convolutions' im2col */
} fold_job;

/* Images [begin, end) by the convolutions' im2col (the same entries, copied, not summed) */
static void unfold_images(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const fold_job *j = ctx;
    const cn_view *x = j->x, *cols = j->cols;
    const int64_t xs[3] = {x->strides[1], x->strides[2], x->strides[3]};
    const size_t es = cn_dtype_size(x->dtype);
    for (int64_t n = begin; n < end; n++) {
        const char *xn = (const char *)x->data + (size_t)(n * x->strides[0]) * es;
        char *cn = (char *)cols->data + (size_t)(n * cols->strides[0]) * es;
        if (x->dtype == CN_F32)
            cpu_im2col_f32(&j->g, (const float *)xn, xs, (float *)cn);
        else
            cpu_im2col_f64(&j->g, (const double *)xn, xs, (double *)cn);
    }
}

static void unfold_chunk(const fold_job *j, int64_t begin, int64_t end) {
    const cn_view *x = j->x, *cols = j->cols;
    const int64_t *k = j->k;
    const cn_dtype dt = x->dtype;
    const int64_t es = (int64_t)cn_dtype_size(dt), R = cols->shape[1], L = cols->shape[2];
    for (int64_t p = begin; p < end; p++) {
        int64_t l = p % L, r = p / L % R, n = p / (L * R);
        int64_t jw = r % k[1], i = r / k[1] % k[0], c = r / (k[0] * k[1]);
        int64_t h = l / j->ow * k[6] - k[4] + i * k[2], w = l % j->ow * k[7] - k[5] + jw * k[3];
        double v = 0;
        if (h >= 0 && h < x->shape[2] && w >= 0 && w < x->shape[3])
            v = cpu_load_f((const char *)x->data + (n * x->strides[0] + c * x->strides[1] +
                                                h * x->strides[2] + w * x->strides[3]) *
                                                   es,
                       dt);
        cpu_store_f((char *)cols->data +
                    (n * cols->strides[0] + r * cols->strides[1] + l * cols->strides[2]) * es,
                dt, v);
    }
}

static void fold_chunk_x(const fold_job *j, int64_t begin, int64_t end) {
    const cn_view *x = j->x, *cols = j->cols;
    const int64_t *k = j->k;
    const cn_dtype dt = x->dtype;
    const int64_t es = (int64_t)cn_dtype_size(dt);
    const int64_t C = x->shape[1], H = x->shape[2], W = x->shape[3];
    for (int64_t p = begin; p < end; p++) {
        int64_t w = p % W, h = p / W % H, c = p / (W * H) % C, n = p / (W * H * C);
        double s = 0;
        for (int64_t i = 0; i < k[0]; i++) {
            int64_t th = h + k[4] - i * k[2];
            if (th < 0 || th % k[6] != 0 || th / k[6] >= j->oh) continue;
            for (int64_t jw = 0; jw < k[1]; jw++) {
                int64_t tw = w + k[5] - jw * k[3];
                if (tw < 0 || tw % k[7] != 0 || tw / k[7] >= j->ow) continue;
                int64_t r = (c * k[0] + i) * k[1] + jw, l = th / k[6] * j->ow + tw / k[7];
                s += cpu_load_f(
                    (const char *)cols->data +
                        (n * cols->strides[0] + r * cols->strides[1] + l * cols->strides[2]) * es,
                    dt);
            }
        }
        cpu_store_f((char *)x->data + (n * x->strides[0] + c * x->strides[1] + h * x->strides[2] +
                                   w * x->strides[3]) *
                                      es,
                dt, s);
    }
}

static void fold_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const fold_job *j = ctx;
    if (j->fold)
        fold_chunk_x(j, begin, end);
    else
        unfold_chunk(j, begin, end);
}

/* unfold4d: in = (x [N, C, H, W]), out = (cols); fold4d: in = (cols), out = (x). ints: kernel h,
 * w, dilation h, w, padding h, w, stride h, w; the block counts follow from the sizes. */
cn_status cpu_fold4d(const cn_kernel_args *a) {
    int fold = a->op == CN_OP_FOLD4D;
    const cn_view *x = fold ? &a->out[0] : &a->in[0], *cols = fold ? &a->in[0] : &a->out[0];
    if (a->n_ints != 8 || x->ndim != 4 || cols->ndim != 3)
        return cn_set_error(CN_ERR_SHAPE, cn_op_name(a->op), "need 4-D x, 3-D columns, 8 ints");
    const int64_t *k = a->ints;
    fold_job j = {.x = x,
                  .cols = cols,
                  .k = k,
                  .fold = fold,
                  .oh = (x->shape[2] + 2 * k[4] - k[2] * (k[0] - 1) - 1) / k[6] + 1,
                  .ow = (x->shape[3] + 2 * k[5] - k[3] * (k[1] - 1) - 1) / k[7] + 1};
    int64_t n = cn__view_numel(fold ? x : cols);
    /* unfold into each image's dense [C * KH * KW, L] columns: the convolutions' im2col, rows
     * of the plane copied at once (the entries one by one below take 50 ns each) */
    if (!fold && x->dtype == cols->dtype && (x->dtype == CN_F32 || x->dtype == CN_F64) &&
        cpu_dense_from(cols, 1) && n > 0) {
        j.g = (cpu_conv_geom){.N = x->shape[0], .C = x->shape[1], .H = x->shape[2],
                              .W = x->shape[3], .O = 1, .KH = k[0], .KW = k[1], .OH = j.oh,
                              .OW = j.ow, .P = j.oh * j.ow, .sh = k[6], .sw = k[7], .ph = k[4],
                              .pw = k[5], .dh = k[2], .dw = k[3], .groups = 1, .Cg = x->shape[1],
                              .Og = 1, .K = cols->shape[1]};
        int64_t per = cols->shape[1] * cols->shape[2];
        cpu_parallel(x->shape[0], cpu_chunks(x->shape[0], CPU_PARALLEL_GRAIN / 4 / per + 1),
                     unfold_images, &j);
        return CN_OK;
    }
    cpu_parallel(n, cpu_chunks(n, CPU_PARALLEL_GRAIN / 4), fold_chunk, &j);
    return CN_OK;
}
