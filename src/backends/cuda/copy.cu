/* CUDA data movement and creation kernels: cast and copy between the eight dtypes, fill, and the
 * Philox random generators.
 *
 * The conversion rules are cn_cast's (cpu/copy.c): a float source is read exactly as double and
 * stored by cu_store_from_double, an integer or bool source is read as int64 and stored by
 * cu_store_from_int (common.cuh). Copies between equal dtypes move raw bits.
 *
 * Random numbers come from core/philox.h, compiled for the device: element i of a call depends
 * only on (seed, offset + i), and the arithmetic there is written so that the GPU produces the
 * CPU's numbers bit for bit. This file is built without FMA contraction (CinderCuda.cmake) so
 * that no expression here or in the header is fused behind our back. */
#include <math.h>

#include "backends/cuda/common.cuh"
#include "core/backend_common.h"

/* philox.h calls nextafter(double, -INFINITY), a float second argument. In C++ that picks
 * libstdc++'s host-only template nextafter<double, float> over the device function; this exact
 * overload routes the call to nextafter(double, double) on both sides. */
static __host__ __device__ __forceinline__ double nextafter(double x, float toward) {
    return nextafter(x, (double)toward);
}

#include "core/philox.h"

/* ---- cast and copy ------------------------------------------------------------------------------ */

__global__ void cast_kernel(const __grid_constant__ cu_iter it, int src, int dst) {
    const bool from_float = cu_is_float(src);
    CU_GRID_LOOP(i, it.numel) {
        int64_t off[2];
        cu_offsets<2>(it, i, off);
        if (from_float)
            cu_store_from_double(it.base[0] + off[0], dst, cu_load_f(it.base[1] + off[1], src));
        else
            cu_store_from_int(it.base[0] + off[0], dst, cu_load_i(it.base[1] + off[1], src));
    }
}

__global__ void copy_kernel(const __grid_constant__ cu_iter it, int es) {
    CU_GRID_LOOP(i, it.numel) {
        int64_t off[2];
        cu_offsets<2>(it, i, off);
        cu_move(it.base[0] + off[0], it.base[1] + off[1], es);
    }
}

/* The bytes [*lo, *hi) that a view touches (its strides are never negative). */
static void byte_range(const cn_view *v, uintptr_t *lo, uintptr_t *hi) {
    size_t es = cn_dtype_size(v->dtype);
    int64_t last = 0;
    for (int d = 0; d < v->ndim; d++) last += (v->shape[d] - 1) * v->strides[d];
    *lo = (uintptr_t)v->data;
    *hi = *lo + (uintptr_t)(last * (int64_t)es) + es;
}

static int same_view(const cn_view *a, const cn_view *b) {
    if (a->data != b->data || a->dtype != b->dtype || a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d] || (a->shape[d] > 1 && a->strides[d] != b->strides[d]))
            return 0;
    return 1;
}

/* A copy whose source and destination share bytes: through a dense scratch copy, since the
 * GPU's threads would otherwise read elements that others have already overwritten. */
static cn_status copy_overlapping(cu_dev *d, const char *op, const cn_view *dst,
                                  const cn_view *src, int64_t numel) {
    void *tmp;
    cn_status s = cu_scratch(d, op, (size_t)numel * cn_dtype_size(src->dtype), &tmp);
    if (s != CN_OK) return s;
    cn_view mid = *src;
    mid.data = tmp;
    int64_t stride = 1;
    for (int k = src->ndim - 1; k >= 0; k--) {
        mid.strides[k] = stride;
        stride *= src->shape[k];
    }
    s = cu_copy_view(d, op, &mid, src);
    if (s == CN_OK) s = cu_copy_view(d, op, dst, &mid);
    cu_scratch_free(d, tmp);
    return s;
}

extern "C" cn_status cu_copy_view(cu_dev *d, const char *op, const cn_view *dst,
                                  const cn_view *src) {
    const cn_view *views[2] = {dst, src};
    cu_iter it;
    cu_iter_init(&it, 2, views);
    if (it.numel == 0) return CN_OK;
    if (same_view(dst, src)) return CN_OK;
    uintptr_t dlo, dhi, slo, shi;
    byte_range(dst, &dlo, &dhi);
    byte_range(src, &slo, &shi);
    if (dlo < shi && slo < dhi) return copy_overlapping(d, op, dst, src, it.numel);
    if (dst->dtype == src->dtype) {
        size_t es = cn_dtype_size(dst->dtype);
        if (cu_iter_dense(&it))
            return cu_check(op,
                            cudaMemcpyAsync(it.base[0], it.base[1], (size_t)it.numel * es,
                                            cudaMemcpyDeviceToDevice, d->stream),
                            "cudaMemcpyAsync");
        copy_kernel<<<cu_blocks(it.numel), CU_THREADS, 0, d->stream>>>(it, (int)es);
        return cu_check_launch(op, "copy_kernel");
    }
    cast_kernel<<<cu_blocks(it.numel), CU_THREADS, 0, d->stream>>>(it, src->dtype, dst->dtype);
    return cu_check_launch(op, "cast_kernel");
}

static int valid_dtype(cn_dtype dt) { return (int)dt >= 0 && dt < CN_DTYPE_COUNT; }

/* A dtype outside the enum: a guard against a direct call (the router passes valid ones). */
static cn_status bad_dtype(const cn_kernel_args *a, cn_dtype dt) {
    return cn__kernel_dtype_error("cuda", a->op, dt);
}

/* in[0] (src dtype, any strides) -> out[0] (dst dtype, any strides). Serves cast and copy. */
extern "C" cn_status cuda_cast(const cn_kernel_args *a) {
    if (!valid_dtype(a->in[0].dtype)) return bad_dtype(a, a->in[0].dtype);
    if (!valid_dtype(a->out[0].dtype)) return bad_dtype(a, a->out[0].dtype);
    const char *op = cn_op_name(a->op);
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    return cu_copy_view(d, op, &a->out[0], &a->in[0]);
}

/* ---- fill ------------------------------------------------------------------------------------- */

__global__ void fill_kernel(const __grid_constant__ cu_iter it, int dt, double value) {
    union {
        uint64_t u;
        char c[8];
    } v;
    v.u = 0;
    cu_store_from_double(v.c, dt, value); /* the value in the output dtype, once per thread */
    const int es = (int)it.esize[0];
    CU_GRID_LOOP(i, it.numel) {
        int64_t off[1];
        cu_offsets<1>(it, i, off);
        cu_move(it.base[0] + off[0], v.c, es);
    }
}

/* out[0] (any strides) = reals[0], converted to its dtype by the cast rules. */
extern "C" cn_status cuda_fill(const cn_kernel_args *a) {
    cn_dtype dt = a->out[0].dtype;
    if (!valid_dtype(dt)) return bad_dtype(a, dt);
    if (a->n_reals < 1)
        return cn_set_error(CN_ERR_INVALID_ARG, cn_op_name(a->op),
                            "the kernel needs the fill value in reals[0]; call cn_full");
    const cn_view *views[1] = {&a->out[0]};
    cu_iter it;
    cu_iter_init(&it, 1, views);
    if (it.numel == 0) return CN_OK;
    const char *op = cn_op_name(a->op);
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    double v = a->reals[0];
    if (v == 0.0 && !signbit(v) && cu_iter_dense(&it)) /* +0 is all-zero bytes in every dtype */
        return cu_check(op, cudaMemsetAsync(it.base[0], 0, (size_t)(it.numel * it.esize[0]),
                                            d->stream),
                        "cudaMemsetAsync");
    fill_kernel<<<cu_blocks(it.numel), CU_THREADS, 0, d->stream>>>(it, dt, v);
    return cu_check_launch(op, "fill_kernel");
}

/* ---- random ----------------------------------------------------------------------------------- */

/* The next f16 or bf16 value toward -inf (both are sign-magnitude). */
__device__ __forceinline__ uint16_t half_bits_below(uint16_t h) {
    if ((h & 0x7fff) == 0) return 0x8001;
    return (h & 0x8000) ? (uint16_t)(h + 1) : (uint16_t)(h - 1);
}

/* Elements [0, n) of a random call into contiguous out (philox.h's rules, as cpu_rand). */
__global__ void rand_kernel(char *out, int64_t n, int dt, int normal, uint64_t seed,
                            uint64_t offset, double p0, double p1) {
    CU_GRID_LOOP(i, n) {
        const uint64_t k = (uint64_t)i;
        if (dt == CN_F32) {
            ((float *)out)[i] = normal ? (float)cn_philox_normal(seed, offset, k, p0, p1)
                                       : cn_philox_uniform_f32(seed, offset, k, p0, p1);
        } else if (dt == CN_F64) {
            ((double *)out)[i] = normal ? cn_philox_normal(seed, offset, k, p0, p1)
                                        : cn_philox_uniform_f64(seed, offset, k, p0, p1);
        } else { /* f16, bf16: the f32 value, rounded once more */
            const bool bf16 = dt == CN_BF16;
            float f = normal ? (float)cn_philox_normal(seed, offset, k, p0, p1)
                             : cn_philox_uniform_f32(seed, offset, k, p0, p1);
            uint16_t h = bf16 ? cu_f32_to_bf16(f) : cu_f32_to_f16(f);
            if (!normal && p0 < p1) {
                float back = bf16 ? cu_bf16_to_f32(h) : cu_f16_to_f32(h);
                if ((double)back >= p1) h = half_bits_below(h); /* rounded up onto high */
            }
            ((uint16_t *)out)[i] = h;
        }
    }
}

/* out[0] contiguous f32/f64/f16/bf16; ints = (seed, offset); reals = (low, high) or
 * (mean, std). */
extern "C" cn_status cuda_rand(const cn_kernel_args *a) {
    const cn_view *out = &a->out[0];
    cn_dtype dt = out->dtype;
    /* Unreachable through the router: dtypes[op] (backend.c) admits the float dtypes. Kept
     * because rand_kernel writes any other dtype as 2 bytes (past the end of a u8 buffer). */
    if (dt != CN_F32 && dt != CN_F64 && dt != CN_F16 && dt != CN_BF16) return bad_dtype(a, dt);
    if (a->n_ints < 2 || a->n_reals < 2)
        return cn_set_error(CN_ERR_INVALID_ARG, cn_op_name(a->op),
                            "the kernel needs ints = (seed, offset) and two reals; call "
                            "cn_rand_uniform or cn_rand_normal");
    int64_t n = 1;
    for (int d = 0; d < out->ndim; d++) n *= out->shape[d];
    if (n == 0) return CN_OK;
    const char *op = cn_op_name(a->op);
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    rand_kernel<<<cu_blocks(n), CU_THREADS, 0, d->stream>>>(
        (char *)out->data, n, dt, a->op == CN_OP_RAND_NORMAL, (uint64_t)a->ints[0],
        (uint64_t)a->ints[1], a->reals[0], a->reals[1]);
    return cu_check_launch(op, "rand_kernel");
}
