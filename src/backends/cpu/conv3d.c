/* CPU 3-D convolutions: conv3d, conv_transpose3d and conv3d's weight gradient, each output element
 * by its definition (core/conv3d_common.h, the arithmetic the CUDA kernels share), in f64, then
 * rounded once to the output's dtype (f32 or f64). Chunks of output elements run on the pool. */
#include <stdint.h>

#include "backends/cpu/cpu_internal.h"
#include "core/backend_common.h"
#include "core/conv3d_common.h"

typedef struct c3_job {
    const cn_kernel_args *a;
    const cn__conv3d_geom *g;
} c3_job;

static void c3_tasks(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const c3_job *j = ctx;
    const cn_kernel_args *a = j->a;
    const cn_view *b = a->op != CN_OP_CONV3D_BACKWARD_WEIGHT && a->n_in > 2 ? &a->in[2] : NULL;
    for (int64_t i = begin; i < end; i++) {
        double v = cn__conv3d_at(a->op, j->g, &a->in[0], &a->in[1], b, i);
        if (a->out[0].dtype == CN_F32)
            ((float *)a->out[0].data)[i] = (float)v;
        else
            ((double *)a->out[0].data)[i] = v;
    }
}

cn_status cpu_conv3d(const cn_kernel_args *args) {
    cn_dtype dt = args->out[0].dtype;
    if (dt != CN_F32 && dt != CN_F64) /* unreachable through the router: dtypes[op] (backend.c) */
        return cn__kernel_dtype_error("cpu", args->op, dt);
    cn__conv3d_geom g;
    cn__conv3d_geom_of(args, &g);
    int64_t total = cn__view_numel(&args->out[0]);
    if (total == 0) return CN_OK;
    /* the multiply-adds per element: the window (forward, transposed) or the positions (weight) */
    double per = args->op == CN_OP_CONV3D_BACKWARD_WEIGHT ? (double)g.out_n * (double)g.n
                                                           : (double)g.k_n * (double)g.cg;
    int64_t grain = per >= 4096 ? 1 : (int64_t)(4096 / (per + 1)) + 1;
    c3_job j = {.a = args, .g = &g};
    cpu_parallel(total, cpu_chunks(total, grain), c3_tasks, &j);
    return CN_OK;
}
