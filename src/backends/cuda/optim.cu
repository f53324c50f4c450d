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

/* ---- AdamW ---------------------------------------------------------------------------------- */

/* What the AdamW kernel needs besides the iterator (the coefficients as cpu/optim.c makes them). */
typedef struct adamw_params {
    double decay, step_size, bc2_sqrt, beta1, beta2, eps;
    int has_decay, first;
    int dense;
} adamw_params;

/* it's operands: (p, g, exp_avg, exp_avg_sq); PyTorch's order of operations, as on the CPU. */
template <typename T>
__global__ void adamw_step_kernel(const __grid_constant__ cu_iter it, adamw_params s) {
    const T decay = (T)s.decay, step_size = (T)s.step_size, bc2_sqrt = (T)s.bc2_sqrt;
    const T w1 = (T)(1.0 - s.beta1), b2 = (T)s.beta2, w2 = (T)(1.0 - s.beta2), eps = (T)s.eps;
    CU_GRID_LOOP(i, it.numel) {
        T *p, *m, *v;
        const T *g;
        if (s.dense) {
            p = (T *)it.base[0] + i;
            g = (const T *)it.base[1] + i;
            m = (T *)it.base[2] + i;
            v = (T *)it.base[3] + i;
        } else {
            int64_t off[4];
            cu_offsets<4>(it, i, off);
            p = (T *)(it.base[0] + off[0]);
            g = (const T *)(it.base[1] + off[1]);
            m = (T *)(it.base[2] + off[2]);
            v = (T *)(it.base[3] + off[3]);
        }
        T pi = *p, gi = *g;
        if (s.has_decay) pi = pi * decay;
        T mi = s.first ? w1 * gi : *m + w1 * (gi - *m);
        T vi = s.first ? w2 * gi * gi : b2 * *v + w2 * gi * gi;
        *m = mi;
        *v = vi;
        *p = pi - step_size * (mi / (sqrt(vi) / bc2_sqrt + eps));
    }
}

extern "C" cn_status cuda_adamw_step(const cn_kernel_args *a) {
    const char *op = cn_op_name(a->op);
    /* the router's checks, as for sgd_step; the guard stays for the same reason */
    cn_dtype dt = a->in[0].dtype;
    for (int k = 0; k < a->n_in; k++)
        if (a->in[k].dtype != dt || (dt != CN_F32 && dt != CN_F64))
            return cn__kernel_dtype_error("cuda", a->op, a->in[k].dtype);
    const cn_view *views[4] = {&a->out[0], &a->in[1], &a->out[1], &a->out[2]};
    cu_iter it;
    cu_iter_init(&it, 4, views);
    if (it.numel == 0) return CN_OK;
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    const double lr = a->reals[0], b1 = a->reals[1], b2 = a->reals[2], wd = a->reals[4];
    const double steps = (double)a->ints[0];
    adamw_params s = {};
    s.decay = 1.0 - lr * wd;
    s.step_size = lr / (1.0 - pow(b1, steps));
    s.bc2_sqrt = sqrt(1.0 - pow(b2, steps));
    s.beta1 = b1;
    s.beta2 = b2;
    s.eps = a->reals[3];
    s.has_decay = wd != 0;
    s.first = a->ints[1] != 0;
    s.dense = cu_iter_dense(&it);
    unsigned blocks = cu_blocks(it.numel);
    if (dt == CN_F64)
        adamw_step_kernel<double><<<blocks, CU_THREADS, 0, d->stream>>>(it, s);
    else
        adamw_step_kernel<float><<<blocks, CU_THREADS, 0, d->stream>>>(it, s);
    return cu_check_launch(op, "adamw_step_kernel");
}
