/* CUDA transposed convolution (conv_transpose2d, and conv_transpose1d through it), and conv1d
 * through conv2d's kernel (conv.cu).
 *
 * conv_transpose2d, x: [N, C, H, W] (any strides), w: [C, O/g, KH, KW] (any strides), b: [O] or
 * absent -> out: [N, O, OH, OW] contiguous. One thread per output entry gathers, over its
 * group's input channels and the taps (kh, kw) whose input position i = (r + ph - kh*dh) / sh,
 * j = (q + pw - kw*dw) / sw divides exactly and lies inside x, x[n, c, i, j] w[c, o', kh, kw]:
 * no atomics, so the result does not depend on timing. f16 / bf16 accumulate in f32, f64 in f64.
 * The geometry (backend.h) is the transposed convolution's own (output_padding already in oh,
 * ow). */
#include "backends/cuda/common.cuh"
#include "core/backend_common.h"

typedef struct ct_operands {
    const char *x, *w, *b;
    char *out;
    int64_t xs[4], ws[4], bs; /* strides in elements */
    int dt, es;
} ct_operands;

__device__ __forceinline__ int64_t ct_tap(int64_t pos, int64_t pad, int64_t k, int64_t dil,
                                          int64_t s, int64_t n) {
    int64_t t = pos + pad - k * dil;
    if (t < 0 || t % s) return -1;
    t /= s;
    return t < n ? t : -1;
}

template <typename T>
__global__ void conv_transpose_kernel(const __grid_constant__ cn_conv_geometry g,
                                      const __grid_constant__ ct_operands a, int64_t total) {
    int64_t Cg = g.c / g.groups, Og = g.o / g.groups;
    CU_GRID_LOOP(idx, total) {
        int64_t q = idx % g.ow, r = (idx / g.ow) % g.oh, o = (idx / (g.ow * g.oh)) % g.o,
                n = idx / (g.ow * g.oh * g.o);
        int64_t grp = o / Og, ol = o % Og;
        T acc = a.b ? cu_ld<T>(a.b + o * a.bs * a.es, a.dt) : (T)0;
        for (int64_t kh = 0; kh < g.kh; kh++) {
            int64_t i = ct_tap(r, g.ph, kh, g.dh, g.sh, g.h);
            if (i < 0) continue;
            for (int64_t kw = 0; kw < g.kw; kw++) {
                int64_t j = ct_tap(q, g.pw, kw, g.dw, g.sw, g.w);
                if (j < 0) continue;
                int64_t xo = n * a.xs[0] + i * a.xs[2] + j * a.xs[3];
                int64_t wo = ol * a.ws[1] + kh * a.ws[2] + kw * a.ws[3];
                for (int64_t c = grp * Cg; c < (grp + 1) * Cg; c++)
                    acc += cu_ld<T>(a.x + (xo + c * a.xs[1]) * a.es, a.dt) *
                           cu_ld<T>(a.w + (wo + c * a.ws[0]) * a.es, a.dt);
            }
        }
        cu_st<T>(a.out + idx * a.es, a.dt, acc);
    }
}

extern "C" cn_status cuda_conv_transpose2d(const cn_kernel_args *args) {
    const char *op = cn_op_name(args->op);
    const cn_conv_geometry *g = cn__kernel_geometry("cuda", args);
    if (!g) return CN_ERR_INVALID_ARG;
    if (args->in[0].ndim == 3) { /* conv_transpose1d: the 2-D kernel with a unit height */
        cn_kernel_args b;
        cn_view in[4], out[4];
        cn__args_unit_height(args, &b, in, out);
        return cuda_conv_transpose2d(&b);
    }
    int64_t total = g->n * g->o * g->oh * g->ow;
    if (total == 0) return CN_OK;
    cu_dev *d = cu_device(op, args->device);
    if (!d) return cn_last_status();
    const cn_view *xv = &args->in[0], *wv = &args->in[1], *ov = &args->out[0];
    const cn_view *bv = args->n_in > 2 ? &args->in[2] : NULL;
    ct_operands a;
    a.x = (const char *)xv->data;
    a.w = (const char *)wv->data;
    a.b = bv ? (const char *)bv->data : NULL;
    a.out = (char *)ov->data;
    for (int k = 0; k < 4; k++) {
        a.xs[k] = xv->strides[k];
        a.ws[k] = wv->strides[k];
    }
    a.bs = bv ? bv->strides[0] : 0;
    a.dt = (int)ov->dtype;
    a.es = (int)cn_dtype_size(ov->dtype);
    if (ov->dtype == CN_F64)
        conv_transpose_kernel<double><<<cu_blocks(total), CU_THREADS, 0, d->stream>>>(*g, a,
                                                                                     total);
    else
        conv_transpose_kernel<float><<<cu_blocks(total), CU_THREADS, 0, d->stream>>>(*g, a,
                                                                                    total);
    return cu_check_launch(op, "conv_transpose_kernel");
}

extern "C" cn_status cuda_conv1d(const cn_kernel_args *args) {
    cn_kernel_args b;
    cn_view in[4], out[4];
    cn__args_unit_height(args, &b, in, out);
    return cuda_conv2d(&b);
}
