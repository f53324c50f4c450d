/* CUDA 3-D convolutions: conv3d, conv_transpose3d and conv3d's weight gradient, one thread per
 * output element computing it by its definition (core/conv3d_common.h, the CPU's very
 * arithmetic) in f64, stored in the output's dtype (f32 or f64). No atomics. */
#include "backends/cuda/common.cuh"
#include "core/backend_common.h"
#include "core/conv3d_common.h"

__global__ void conv3d_kernel(cn_op op, const __grid_constant__ cn__conv3d_geom g,
                              const __grid_constant__ cn_view in0,
                              const __grid_constant__ cn_view in1, const __grid_constant__ cn_view b,
                              int has_b, const __grid_constant__ cn_view out, int64_t total) {
    CU_GRID_LOOP(i, total) {
        double v = cn__conv3d_at(op, &g, &in0, &in1, has_b ? &b : NULL, i);
        if (out.dtype == CN_F32)
            ((float *)out.data)[i] = (float)v;
        else
            ((double *)out.data)[i] = v;
    }
}

extern "C" cn_status cuda_conv3d(const cn_kernel_args *a) {
    const char *op = cn_op_name(a->op);
    int64_t total = cn__view_numel(&a->out[0]);
    if (total == 0) return CN_OK;
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    cn__conv3d_geom g;
    cn__conv3d_geom_of(a, &g);
    int has_b = a->op != CN_OP_CONV3D_BACKWARD_WEIGHT && a->n_in > 2;
    cn_view none = a->in[0];
    conv3d_kernel<<<cu_blocks(total), CU_THREADS, 0, d->stream>>>(
        a->op, g, a->in[0], a->in[1], has_b ? a->in[2] : none, has_b, a->out[0], total);
    return cu_check_launch(op, "conv3d_kernel");
}
