/* CUDA kernels of the real FFT (issue 16): rfft and irfft along one dim, f32 and f64, through
 * cuFFT (R2C / C2R, D2Z / Z2D).
 *
 * The tensor is a batch of 1-D lines along dim, as on the CPU (cpu/fft.c). cuFFT wants dense
 * lines, so each chunk of lines goes through scratch: a pack kernel gathers the lines (any
 * strides, cut or zero-padded to n; irfft: the bins cut or zero-padded to n / 2 + 1, with the
 * imaginary parts of bin 0 and of the Nyquist bin zeroed, which cuFFT's C2R leaves undefined
 * otherwise), one batched cuFFT call transforms them, and an unpack kernel scales them into the
 * output (rfft: the imaginary parts of bin 0 and the Nyquist bin written as exact zeros, as the
 * CPU does). n = 1 needs no transform: bin 0 is the sample (one small kernel).
 *
 * Plans. A cuFFT plan is made per (device, n, lines in the chunk, direction, dtype) and cached
 * (a few, least recently used dropped); the work area comes from the backend's caching allocator
 * (cufftSetAutoAllocation off) so it is counted and freed like any scratch. A plan is not safe to
 * reconfigure from two threads at once, so its use (work area, stream, execution: all of them
 * just queue work on the device's stream) runs under the backend's lock. */
#include <cufft.h>
#include <string.h>

#include "backends/cuda/common.cuh"

/* The lines of a view: every dim but d (and irfft's trailing 2), with their strides. */
static cu_nd line_view(const cn_view *v, int nd, int d) {
    cu_nd r;
    memset(&r, 0, sizeof r);
    for (int k = 0; k < nd; k++) {
        if (k == d) continue;
        r.shape[r.nd] = v->shape[k];
        r.stride[r.nd] = v->strides[k];
        r.nd++;
    }
    if (r.nd == 0) {
        r.nd = 1;
        r.shape[0] = 1;
    }
    for (int k = r.nd; k < CN_MAX_DIMS; k++)
        r.shape[k] = 1;
    return r;
}

typedef struct fft_geom {
    cu_nd in, out;          /* the lines of the input and of the output */
    int64_t in_sd, in_si;   /* the input's strides along d and (irfft) to the imaginary part */
    int64_t out_sd, out_si; /* the output's along d and (rfft) to the imaginary part */
    int64_t n, f, lin;      /* the length, its bins n / 2 + 1, the input's size along d */
    int64_t b0, count;      /* this chunk's first line and number of lines */
    double scale;
} fft_geom;

__device__ __forceinline__ bool dc_or_nyquist(const fft_geom &g, int64_t k) {
    return k == 0 || (g.n % 2 == 0 && k == g.n / 2);
}

/* rfft: lines [b0, b0 + count) cut or zero-padded to n, into buf [count, n] */
template <typename T>
__global__ void rfft_pack(const __grid_constant__ fft_geom g, T *buf, const T *x) {
    CU_GRID_LOOP(i, g.count * g.n) {
        int64_t b = g.b0 + i / g.n, j = i % g.n;
        buf[i] = j < g.lin ? x[cu_nd_offset(g.in, b) + j * g.in_sd] : T(0);
    }
}

/* rfft: the bins [count, f] of buf, scaled, into the output */
template <typename T, typename C>
__global__ void rfft_unpack(const __grid_constant__ fft_geom g, T *y, const C *buf) {
    CU_GRID_LOOP(i, g.count * g.f) {
        int64_t b = g.b0 + i / g.f, k = i % g.f;
        int64_t off = cu_nd_offset(g.out, b) + k * g.out_sd;
        y[off] = (T)(g.scale * buf[i].x);
        y[off + g.out_si] = dc_or_nyquist(g, k) ? T(0) : (T)(g.scale * buf[i].y);
    }
}

/* irfft: the bins of lines [b0, b0 + count) cut or zero-padded to f, into buf [count, f] */
template <typename T, typename C>
__global__ void irfft_pack(const __grid_constant__ fft_geom g, C *buf, const T *z) {
    CU_GRID_LOOP(i, g.count * g.f) {
        int64_t b = g.b0 + i / g.f, k = i % g.f;
        C c;
        c.x = c.y = T(0);
        if (k < g.lin) {
            int64_t off = cu_nd_offset(g.in, b) + k * g.in_sd;
            c.x = z[off];
            if (!dc_or_nyquist(g, k)) c.y = z[off + g.in_si];
        }
        buf[i] = c;
    }
}

/* irfft: the samples [count, n] of buf, scaled, into the output */
template <typename T>
__global__ void irfft_unpack(const __grid_constant__ fft_geom g, T *y, const T *buf) {
    CU_GRID_LOOP(i, g.count * g.n) {
        int64_t b = g.b0 + i / g.n, j = i % g.n;
        y[cu_nd_offset(g.out, b) + j * g.out_sd] = (T)(g.scale * buf[i]);
    }
}

/* n = 1: bin 0 is the sample (rfft, imaginary part 0); the sample is bin 0's real part (irfft) */
template <typename T>
__global__ void fft_one(const __grid_constant__ fft_geom g, T *y, const T *x, int inverse) {
    CU_GRID_LOOP(b, g.count) {
        T v = g.lin > 0 ? x[cu_nd_offset(g.in, b)] : T(0);
        int64_t off = cu_nd_offset(g.out, b);
        y[off] = (T)(g.scale * v);
        if (!inverse) y[off + g.out_si] = T(0);
    }
}

/* ---- plans --------------------------------------------------------------------------------- */

#define PLAN_CACHE 8

typedef struct fft_plan {
    int used;
    int device, inverse, f64;
    long long n, batch;
    cufftHandle handle;
    size_t work;       /* the work area it needs */
    unsigned long age; /* last use, for eviction */
} fft_plan;

static fft_plan plans[PLAN_CACHE]; /* under cu_lock */
static unsigned long plan_clock;

static cn_status fft_error(const char *op, cufftResult r, const char *what) {
    return cn_set_error(r == CUFFT_ALLOC_FAILED ? CN_ERR_OUT_OF_MEMORY : CN_ERR_BACKEND, op,
                        "%s failed: cuFFT error %d", what, (int)r);
}

/* The cached plan for these sizes, made when missing (cu_lock held). NULL with the error set. */
static fft_plan *plan_for(const char *op, int device, long long n, long long batch, int inverse,
                          int f64) {
    fft_plan *slot = &plans[0];
    for (int i = 0; i < PLAN_CACHE; i++) {
        fft_plan *p = &plans[i];
        if (p->used && p->device == device && p->n == n && p->batch == batch &&
            p->inverse == inverse && p->f64 == f64) {
            p->age = ++plan_clock;
            return p;
        }
        if (!p->used || (slot->used && p->age < slot->age)) slot = p;
    }
    if (slot->used) {
        cufftDestroy(slot->handle);
        slot->used = 0;
    }
    cufftType type = inverse ? (f64 ? CUFFT_Z2D : CUFFT_C2R) : (f64 ? CUFFT_D2Z : CUFFT_R2C);
    cufftHandle h;
    cufftResult r = cufftCreate(&h);
    if (r != CUFFT_SUCCESS) {
        fft_error(op, r, "cufftCreate");
        return NULL;
    }
    size_t work = 0;
    long long len = n;
    r = cufftSetAutoAllocation(h, 0);
    if (r == CUFFT_SUCCESS)
        r = cufftMakePlanMany64(h, 1, &len, NULL, 1, 0, NULL, 1, 0, type, batch, &work);
    if (r != CUFFT_SUCCESS) {
        cufftDestroy(h);
        (void)cudaGetLastError();
        fft_error(op, r, "planning the transform (cufftMakePlanMany64)");
        return NULL;
    }
    slot->used = 1;
    slot->device = device;
    slot->n = n;
    slot->batch = batch;
    slot->inverse = inverse;
    slot->f64 = f64;
    slot->handle = h;
    slot->work = work;
    slot->age = ++plan_clock;
    return slot;
}

/* Runs the batched transform of `batch` lines from src into dst on d's stream. */
static cn_status transform(cu_dev *d, const char *op, long long n, long long batch, int inverse,
                           int f64, void *src, void *dst) {
    cu_lock();
    fft_plan *p = plan_for(op, d->index, n, batch, inverse, f64);
    void *work = NULL;
    cn_status s = p ? CN_OK : cn_last_status();
    if (s == CN_OK && p->work) s = cu_scratch(d, op, p->work, &work);
    cufftResult r = CUFFT_SUCCESS;
    if (s == CN_OK) {
        r = cufftSetWorkArea(p->handle, work);
        if (r == CUFFT_SUCCESS) r = cufftSetStream(p->handle, d->stream);
        if (r == CUFFT_SUCCESS) {
            if (inverse)
                r = f64 ? cufftExecZ2D(p->handle, (cufftDoubleComplex *)src, (double *)dst)
                        : cufftExecC2R(p->handle, (cufftComplex *)src, (float *)dst);
            else
                r = f64 ? cufftExecD2Z(p->handle, (double *)src, (cufftDoubleComplex *)dst)
                        : cufftExecR2C(p->handle, (float *)src, (cufftComplex *)dst);
        }
        if (r != CUFFT_SUCCESS) s = fft_error(op, r, "running the transform (cufftExec)");
    }
    cu_unlock();
    cu_scratch_free(d, work); /* stream order keeps it until the transform has run */
    return s;
}

/* ---- the kernel ------------------------------------------------------------------------------ */

template <typename T, typename C>
static cn_status run(cu_dev *d, const char *op, fft_geom g, int inverse, int64_t lines, const T *in,
                     T *out) {
    if (g.n == 1) {
        g.count = lines;
        fft_one<T><<<cu_blocks(lines), CU_THREADS, 0, d->stream>>>(g, out, in, inverse);
        return cu_check_launch(op, "fft_one");
    }
    /* chunks of lines of at most ~2^24 scalars each way: bounded scratch */
    int64_t per = ((int64_t)1 << 24) / (g.n + 2);
    if (per < 1) per = 1;
    if (per > lines) per = lines;
    void *real = NULL, *cplx = NULL;
    cn_status s = cu_scratch(d, op, (size_t)(per * g.n) * sizeof(T), &real);
    if (s == CN_OK) s = cu_scratch(d, op, (size_t)(per * g.f) * sizeof(C), &cplx);
    for (int64_t b0 = 0; s == CN_OK && b0 < lines; b0 += per) {
        g.b0 = b0;
        g.count = lines - b0 < per ? lines - b0 : per;
        if (!inverse) {
            rfft_pack<T><<<cu_blocks(g.count * g.n), CU_THREADS, 0, d->stream>>>(g, (T *)real, in);
            s = cu_check_launch(op, "rfft_pack");
            if (s == CN_OK) s = transform(d, op, g.n, g.count, 0, sizeof(T) == 8, real, cplx);
            if (s == CN_OK) {
                rfft_unpack<T, C><<<cu_blocks(g.count * g.f), CU_THREADS, 0, d->stream>>>(
                    g, out, (const C *)cplx);
                s = cu_check_launch(op, "rfft_unpack");
            }
        } else {
            irfft_pack<T, C>
                <<<cu_blocks(g.count * g.f), CU_THREADS, 0, d->stream>>>(g, (C *)cplx, in);
            s = cu_check_launch(op, "irfft_pack");
            if (s == CN_OK) s = transform(d, op, g.n, g.count, 1, sizeof(T) == 8, cplx, real);
            if (s == CN_OK) {
                irfft_unpack<T><<<cu_blocks(g.count * g.n), CU_THREADS, 0, d->stream>>>(
                    g, out, (const T *)real);
                s = cu_check_launch(op, "irfft_unpack");
            }
        }
    }
    cu_scratch_free(d, real);
    cu_scratch_free(d, cplx);
    return s;
}

/* rfft: in = x, out = [.., n / 2 + 1, .., 2]; irfft: in = [.., F, .., 2], out = [.., n, ..].
 * ints = dim, n, norm; reals[0] = the scale. The router checked kinds, dims and n (1 to
 * INT_MAX), computed the output's shape, and sends f32 and f64 only. */
extern "C" cn_status cuda_fft(const cn_kernel_args *a) {
    int inverse = a->op == CN_OP_IRFFT;
    const char *op = inverse ? "irfft" : "rfft";
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    const cn_view *in = &a->in[0], *out = &a->out[0];
    int dim = (int)a->ints[0];
    int in_nd = inverse ? in->ndim - 1 : in->ndim, out_nd = inverse ? out->ndim : out->ndim - 1;
    fft_geom g;
    memset(&g, 0, sizeof g);
    g.in = line_view(in, in_nd, dim);
    g.out = line_view(out, out_nd, dim);
    g.in_sd = in->strides[dim];
    g.in_si = inverse ? in->strides[in->ndim - 1] : 0;
    g.out_sd = out->strides[dim];
    g.out_si = inverse ? 0 : out->strides[out->ndim - 1];
    g.n = a->ints[1];
    g.f = g.n / 2 + 1;
    g.lin = in->shape[dim];
    if (!inverse && g.lin > g.n) g.lin = g.n; /* rfft reads at most n samples */
    g.scale = a->reals[0];
    int64_t lines = 1;
    for (int k = 0; k < out_nd; k++)
        if (k != dim) lines *= out->shape[k];
    if (in->dtype == CN_F64)
        return run<double, cufftDoubleComplex>(d, op, g, inverse, lines, (const double *)in->data,
                                               (double *)out->data);
    return run<float, cufftComplex>(d, op, g, inverse, lines, (const float *)in->data,
                                    (float *)out->data);
}
