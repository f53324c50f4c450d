/* The CUDA backend's fused optimizer kernel: sgd_step, torch.optim.SGD's update of one parameter
 * in one grid-stride pass over p, g and the momentum buffer, in place (the contract is in
 * cinder/backend.h). f32 is computed in float and f64 in double, as on the CPU (cpu/optim.c).
 * Strided operands go through the shared iterator (elementwise.cu): each thread reads and then
 * writes its own elements, so updating in place is safe. */
#include "backends/cuda/common.cuh"
#include "core/backend_common.h"

/* What the kernel needs besides the iterator. */
typedef struct sgd_params {
    double lr, momentum, dampening, weight_decay;
    int nesterov, first, has_buf;
    int dense; /* every operand is one run with unit stride: index directly */
} sgd_params;

/* it's operands: (p, g[, buf]). The flags are the same for every thread of a launch. */
template <typename T>
__global__ void sgd_step_kernel(const __grid_constant__ cu_iter it, sgd_params s) {
    const T lr = (T)s.lr, wd = (T)s.weight_decay, mom = (T)s.momentum;
    const T keep = (T)(1.0 - s.dampening);
    CU_GRID_LOOP(i, it.numel) {
        T *p, *b;
        const T *g;
        if (s.dense) {
            p = (T *)it.base[0] + i;
            g = (const T *)it.base[1] + i;
            b = s.has_buf ? (T *)it.base[2] + i : nullptr;
        } else {
            int64_t off[3];
            cu_offsets<3>(it, i, off);
            p = (T *)(it.base[0] + off[0]);
            g = (const T *)(it.base[1] + off[1]);
            b = (T *)(it.base[2] + off[2]);
        }
        T pi = *p;
        T gi = s.weight_decay != 0 ? *g + wd * pi : *g; /* skipped at 0: inf * 0 would be NaN */
        T d = gi;
        if (s.has_buf) {
            T bi = s.first ? gi : mom * *b + keep * gi;
            *b = bi;
            d = s.nesterov ? gi + mom * bi : bi;
        }
        *p = pi - lr * d;
    }
}

extern "C" cn_status cuda_sgd_step(const cn_kernel_args *a) {
    const char *op = cn_op_name(a->op);
    int has_buf = a->n_in == 3;
    /* the arity, the attributes and the in-place outputs are the router's (dispatch/ops_optim.c);
     * so are the dtypes: dtypes[op] (backend.c) admits f32 and f64, and the front-end gives p, g
     * and buf one dtype. Unreachable through the router, the guard stays because the kernel would
     * read any other dtype as float or double (past the end of a narrower buffer). */
    cn_dtype dt = a->in[0].dtype;
    for (int k = 0; k < a->n_in; k++)
        if (a->in[k].dtype != dt || (dt != CN_F32 && dt != CN_F64))
            return cn__kernel_dtype_error("cuda", a->op, a->in[k].dtype);
    const cn_view *views[3] = {&a->out[0], &a->in[1], has_buf ? &a->out[1] : NULL};
    cu_iter it;
    cu_iter_init(&it, has_buf ? 3 : 2, views);
    if (it.numel == 0) return CN_OK;
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    sgd_params s = {};
    s.lr = a->reals[0];
    s.momentum = a->reals[1];
    s.dampening = a->reals[2];
    s.weight_decay = a->reals[3];
    s.nesterov = a->ints[0] != 0;
    s.first = a->ints[1] != 0;
    s.has_buf = has_buf;
    s.dense = cu_iter_dense(&it);
    unsigned blocks = cu_blocks(it.numel);
    if (dt == CN_F64)
        sgd_step_kernel<double><<<blocks, CU_THREADS, 0, d->stream>>>(it, s);
    else
        sgd_step_kernel<float><<<blocks, CU_THREADS, 0, d->stream>>>(it, s);
    return cu_check_launch(op, "sgd_step_kernel");
}
