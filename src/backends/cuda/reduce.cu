/* CUDA reductions (sum, mean, max, min, prod, argmax, argmin, var, logsumexp) and softmax /
 * log_softmax.
 *
 * Geometry. The input view splits into the reduced dim (n elements at stride rs) and the kept
 * dims, which index the contiguous output row-major; kept dims are merged where the input allows.
 * Two kernels share one accumulator algebra:
 * - each:  one thread per output, looping over its n elements (short reductions, and columns:
 *          adjacent threads then read adjacent elements);
 * - block: one block per output, its threads striding over the n elements and combining in a
 *          shared-memory tree (long contiguous rows, or few long columns).
 *
 * Semantics follow the CPU kernels (cpu/reduce.c). Float dtypes (f32, f64, f16, bf16) accumulate
 * in double: sums are then at least as accurate as the CPU's pairwise float sums, and max / min /
 * argmax are exact. Integers accumulate in 64 bits, wrapping, and are narrowed on store. max and
 * min propagate NaN; argmax / argmin return the first index of the extreme, a NaN counting as
 * the largest (the first NaN wins). var = mean, then the sum of squared deviations (two passes);
 * logsumexp = max, then the sum of exp(x - max). */
#include <math.h>
#include <string.h>

#include "backends/cuda/common.cuh"
#include "core/backend_common.h"

/* ---- the accumulator algebra ------------------------------------------------------------------ */

enum { P_NONE, P_SUM, P_PROD, P_MAX, P_MIN, P_ARGMAX, P_ARGMIN, P_SUMSQ, P_SUMEXP };

/* A value and the index it came from (argmax / argmin); INT64_MAX = no element yet. */
template <typename A> struct Pair {
    A v;
    int64_t i;
};

__device__ __forceinline__ bool r_isnan(double x) { return x != x; }
__device__ __forceinline__ bool r_isnan(int64_t x) { return false; }
__device__ __forceinline__ double r_add(double a, double b) { return a + b; }
__device__ __forceinline__ int64_t r_add(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a + (uint64_t)b);
}
__device__ __forceinline__ double r_mul(double a, double b) { return a * b; }
__device__ __forceinline__ int64_t r_mul(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a * (uint64_t)b);
}

template <typename A> __device__ __forceinline__ A r_lowest();
template <> __device__ __forceinline__ double r_lowest<double>() { return -INFINITY; }
template <> __device__ __forceinline__ int64_t r_lowest<int64_t>() { return INT64_MIN; }
template <typename A> __device__ __forceinline__ A r_highest();
template <> __device__ __forceinline__ double r_highest<double>() { return INFINITY; }
template <> __device__ __forceinline__ int64_t r_highest<int64_t>() { return INT64_MAX; }

template <typename A> __device__ __forceinline__ Pair<A> r_identity(int prim) {
    Pair<A> p;
    p.i = INT64_MAX;
    switch (prim) {
    case P_PROD: p.v = (A)1; break;
    case P_MAX:
    case P_ARGMAX: p.v = r_lowest<A>(); break;
    case P_MIN:
    case P_ARGMIN: p.v = r_highest<A>(); break;
    default: p.v = (A)0; break;
    }
    return p;
}

/* Does b win over a for argmax (max) or argmin? NaN beats numbers; ties go to the lower index. */
template <typename A> __device__ __forceinline__ bool r_beats(Pair<A> b, Pair<A> a, bool max) {
    bool bn = r_isnan(b.v), an = r_isnan(a.v);
    if (bn || an) return bn && !an ? true : (an && !bn ? false : b.i < a.i);
    if (b.v != a.v) return max ? b.v > a.v : b.v < a.v;
    return b.i < a.i;
}

template <typename A> __device__ __forceinline__ Pair<A> r_combine(int prim, Pair<A> a, Pair<A> b) {
    switch (prim) {
    case P_PROD: a.v = r_mul(a.v, b.v); return a;
    case P_MAX: return (r_isnan(b.v) && !r_isnan(a.v)) || b.v > a.v ? b : a;
    case P_MIN: return (r_isnan(b.v) && !r_isnan(a.v)) || b.v < a.v ? b : a;
    case P_ARGMAX: return r_beats(b, a, true) ? b : a;
    case P_ARGMIN: return r_beats(b, a, false) ? b : a;
    default: a.v = r_add(a.v, b.v); return a; /* sums */
    }
}

/* The term an element contributes: itself, or (x - c)^2, or exp(x - c) (floats only). */
__device__ __forceinline__ double r_term(int prim, double x, double c) {
    if (prim == P_SUMSQ) return (x - c) * (x - c);
    if (prim == P_SUMEXP) return exp(x - c);
    return x;
}
__device__ __forceinline__ int64_t r_term(int prim, int64_t x, int64_t c) { return x; }

template <typename A> __device__ __forceinline__ A r_load(const char *p, int dt);
template <> __device__ __forceinline__ double r_load<double>(const char *p, int dt) {
    return cu_load_f(p, dt);
}
template <> __device__ __forceinline__ int64_t r_load<int64_t>(const char *p, int dt) {
    return cu_load_i(p, dt);
}

/* ---- geometry --------------------------------------------------------------------------------- */

typedef struct red_geom {
    int nd;                      /* kept dims, merged */
    int64_t shape[CN_MAX_DIMS];
    int64_t stride[CN_MAX_DIMS]; /* input element strides */
    int64_t count;               /* outputs (rows) */
    int64_t n, rs;               /* the reduced dim: size and input element stride */
    int64_t inner;               /* softmax: the output's stride along dim */
    const char *x;
    char *y;
    int dt_in, dt_out, es_in, es_out;
    int op, p1, p2;
    int64_t correction;
} red_geom;

/* Input element offset of output (row) o. */
__device__ __forceinline__ int64_t kept_offset(const red_geom &g, int64_t o) {
    int64_t off = 0;
    for (int d = g.nd - 1; d >= 0; d--) {
        int64_t q = o / g.shape[d];
        off += (o - q * g.shape[d]) * g.stride[d];
        o = q;
    }
    return off;
}

/* var's mean and logsumexp's shift, from the first pass. */
__device__ __forceinline__ double r_between(const red_geom &g, double a) {
    if (g.op == CN_OP_VAR) return a / (double)g.n;
    return isfinite(a) ? a : 0.0; /* logsumexp */
}
__device__ __forceinline__ int64_t r_between(const red_geom &g, int64_t a) { return a; }

__device__ __forceinline__ void r_finish(const red_geom &g, int64_t o, Pair<double> a,
                                         Pair<double> b) {
    double v;
    switch (g.op) {
    case CN_OP_ARGMAX:
    case CN_OP_ARGMIN: ((int64_t *)g.y)[o] = a.i; return;
    case CN_OP_MEAN: v = a.v / (double)g.n; break; /* n = 0: NaN */
    case CN_OP_VAR: {
        double dof = (double)(g.n - g.correction);
        v = g.n > 0 && dof > 0 ? b.v / dof : NAN;
        break;
    }
    case CN_OP_LOGSUMEXP: v = isfinite(a.v) ? a.v + log(b.v) : a.v; break;
    default: v = a.v; break;
    }
    cu_store_from_double(g.y + o * g.es_out, g.dt_out, v);
}

__device__ __forceinline__ void r_finish(const red_geom &g, int64_t o, Pair<int64_t> a,
                                         Pair<int64_t> b) {
    if (g.op == CN_OP_ARGMAX || g.op == CN_OP_ARGMIN)
        ((int64_t *)g.y)[o] = a.i;
    else /* narrowing keeps the low bits: sums and products wrap like the dtype's own */
        cu_st<int64_t>(g.y + o * g.es_out, g.dt_out, a.v);
}

/* ---- kernels ---------------------------------------------------------------------------------- */

/* One pass of prim over the n elements at base, for elements k = k0, k0 + step, ... */
template <typename A>
__device__ __forceinline__ Pair<A> r_pass(const red_geom &g, int prim, const char *base, A c,
                                          int64_t k0, int64_t step) {
    Pair<A> acc = r_identity<A>(prim);
    const int64_t bstep = g.rs * g.es_in;
    for (int64_t k = k0; k < g.n; k += step) {
        A x = r_load<A>(base + k * bstep, g.dt_in);
        Pair<A> e;
        e.v = r_term(prim, x, c);
        e.i = k;
        acc = r_combine(prim, acc, e);
    }
    return acc;
}

template <typename A> __global__ void reduce_each_kernel(const __grid_constant__ red_geom g) {
    CU_GRID_LOOP(o, g.count) {
        const char *base = g.x + kept_offset(g, o) * g.es_in;
        Pair<A> a = r_pass<A>(g, g.p1, base, (A)0, 0, 1);
        Pair<A> b = r_identity<A>(P_SUM);
        if (g.p2 != P_NONE) b = r_pass<A>(g, g.p2, base, r_between(g, a.v), 0, 1);
        r_finish(g, o, a, b);
    }
}

/* Combines every thread's pair in a deterministic tree; all threads get the result. */
template <typename A>
__device__ __forceinline__ Pair<A> block_combine(int prim, Pair<A> mine, Pair<A> *sh) {
    const int t = threadIdx.x;
    sh[t] = mine;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] = r_combine(prim, sh[t], sh[t + s]);
        __syncthreads();
    }
    Pair<A> r = sh[0];
    __syncthreads();
    return r;
}

/* blockDim.x: a power of two <= CU_THREADS. */
template <typename A> __global__ void reduce_block_kernel(const __grid_constant__ red_geom g) {
    __shared__ __align__(16) unsigned char smem[CU_THREADS * sizeof(Pair<A>)];
    Pair<A> *sh = (Pair<A> *)smem;
    for (int64_t o = blockIdx.x; o < g.count; o += gridDim.x) {
        const char *base = g.x + kept_offset(g, o) * g.es_in;
        Pair<A> a = r_pass<A>(g, g.p1, base, (A)0, threadIdx.x, blockDim.x);
        a = block_combine(g.p1, a, sh);
        Pair<A> b = r_identity<A>(P_SUM);
        if (g.p2 != P_NONE) {
            b = r_pass<A>(g, g.p2, base, r_between(g, a.v), threadIdx.x, blockDim.x);
            b = block_combine(g.p2, b, sh);
        }
        if (threadIdx.x == 0) r_finish(g, o, a, b);
    }
}

/* softmax(x)_k = exp(x_k - max) / sum; log_softmax(x)_k = (x_k - max) - log(sum), in double. A
 * row holding a NaN, a +inf, or only -inf gives NaN everywhere (x - max is NaN somewhere). */
__device__ __forceinline__ void softmax_write(const red_geom &g, const char *base, char *out,
                                              double mx, double s, bool lg, int64_t k0,
                                              int64_t step) {
    const double ls = log(s);
    for (int64_t k = k0; k < g.n; k += step) {
        double x = cu_load_f(base + k * g.rs * g.es_in, g.dt_in);
        double y = lg ? (x - mx) - ls : exp(x - mx) / s;
        cu_store_from_double(out + k * g.inner * g.es_out, g.dt_out, y);
    }
}

__device__ __forceinline__ char *softmax_out(const red_geom &g, int64_t o) {
    return g.y + ((o / g.inner) * g.n * g.inner + o % g.inner) * g.es_out;
}

__global__ void softmax_each_kernel(const __grid_constant__ red_geom g) {
    const bool lg = g.op == CN_OP_LOG_SOFTMAX;
    CU_GRID_LOOP(o, g.count) {
        const char *base = g.x + kept_offset(g, o) * g.es_in;
        double mx = r_pass<double>(g, P_MAX, base, 0.0, 0, 1).v;
        double s = r_pass<double>(g, P_SUMEXP, base, mx, 0, 1).v;
        softmax_write(g, base, softmax_out(g, o), mx, s, lg, 0, 1);
    }
}

__global__ void softmax_block_kernel(const __grid_constant__ red_geom g) {
    __shared__ __align__(16) unsigned char smem[CU_THREADS * sizeof(Pair<double>)];
    Pair<double> *sh = (Pair<double> *)smem;
    const bool lg = g.op == CN_OP_LOG_SOFTMAX;
    for (int64_t o = blockIdx.x; o < g.count; o += gridDim.x) {
        const char *base = g.x + kept_offset(g, o) * g.es_in;
        double mx = block_combine(P_MAX, r_pass<double>(g, P_MAX, base, 0.0, threadIdx.x,
                                                        blockDim.x), sh).v;
        double s = block_combine(P_SUM, r_pass<double>(g, P_SUMEXP, base, mx, threadIdx.x,
                                                       blockDim.x), sh).v;
        softmax_write(g, base, softmax_out(g, o), mx, s, lg, threadIdx.x, blockDim.x);
    }
}

/* softmax over contiguous f32 rows of 64 to SOFTMAX_ROW_MAX elements: one block a row, the row
 * read once into shared memory, in float. The general kernels read a row three times and work in
 * double: 0.39 of PyTorch's rate at 4096 x 4096 on an H200. Each thread keeps to its own elements
 * of the row (k = t, t + blockDim.x, ...), so only the two block reductions synchronise. NaN
 * propagates through the max as in the double kernels: a row holding a NaN, a +inf or only -inf
 * is NaN everywhere. */
#define SOFTMAX_ROW_MAX 8192

__device__ __forceinline__ float nan_max(float a, float b) { return (b > a || b != b) ? b : a; }

__global__ void softmax_f32_rows_kernel(const __grid_constant__ red_geom g) {
    extern __shared__ float row[];
    __shared__ float red[CU_THREADS];
    const bool lg = g.op == CN_OP_LOG_SOFTMAX;
    const int t = threadIdx.x, nt = blockDim.x;
    for (int64_t o = blockIdx.x; o < g.count; o += gridDim.x) {
        const float *x = (const float *)(g.x + kept_offset(g, o) * g.es_in);
        float *y = (float *)softmax_out(g, o);
        float mx = -INFINITY;
        for (int64_t k = t; k < g.n; k += nt) {
            float v = x[k];
            row[k] = v;
            mx = nan_max(mx, v);
        }
        red[t] = mx;
        __syncthreads();
        for (int h = nt / 2; h > 0; h >>= 1) {
            if (t < h) red[t] = nan_max(red[t], red[t + h]);
            __syncthreads();
        }
        mx = red[0];
        __syncthreads();
        float s = 0.0f;
        for (int64_t k = t; k < g.n; k += nt) s += expf(row[k] - mx);
        red[t] = s;
        __syncthreads();
        for (int h = nt / 2; h > 0; h >>= 1) {
            if (t < h) red[t] += red[t + h];
            __syncthreads();
        }
        s = red[0];
        __syncthreads();
        const float ls = logf(s);
        for (int64_t k = t; k < g.n; k += nt)
            y[k] = lg ? (row[k] - mx) - ls : expf(row[k] - mx) / s;
    }
}

/* ---- host ------------------------------------------------------------------------------------- */

/* Appends a kept dim, dropping size 1 and merging it into the previous one when one stride steps
 * through both. */
static void push_dim(red_geom *g, int64_t size, int64_t stride) {
    cn__dims_push(&g->nd, g->shape, g->stride, size, stride);
}

/* Fills the geometry of reducing x along dim; returns the element count of x. */
static int64_t geom_init(red_geom *g, const cn_view *x, const cn_view *y, int dim) {
    memset(g, 0, sizeof *g);
    g->n = x->ndim > 0 ? x->shape[dim] : 1;
    g->rs = x->ndim > 0 ? x->strides[dim] : 0;
    g->count = 1;
    g->inner = 1;
    int64_t numel = g->n;
    for (int d = 0; d < x->ndim; d++) {
        if (d == dim) continue;
        g->count *= x->shape[d];
        numel *= x->shape[d];
        if (d > dim) g->inner *= x->shape[d];
        push_dim(g, x->shape[d], x->strides[d]);
    }
    g->x = (const char *)x->data;
    g->y = (char *)y->data;
    g->dt_in = x->dtype;
    g->dt_out = y->dtype;
    g->es_in = (int)cn_dtype_size(x->dtype);
    g->es_out = (int)cn_dtype_size(y->dtype);
    return numel;
}

/* Block-per-output when each output reads a long run: contiguous rows, or few long columns. */
static int block_threads(const red_geom *g) {
    int contiguous = g->rs == 1;
    if (g->n < 64 || !(contiguous || (g->count <= 4096 && g->n >= 512))) return 0;
    return g->n >= 256 ? CU_THREADS : (g->n >= 128 ? 128 : 64);
}

static int is_float_dt(cn_dtype dt) {
    return dt == CN_F32 || dt == CN_F64 || dt == CN_F16 || dt == CN_BF16;
}

/* A dtype outside the backend's dtypes[op] (backend.c): a guard against a direct call. */
static cn_status no_kernel(cn_op op, cn_dtype dt) {
    return cn__kernel_dtype_error("cuda", op, dt);
}

/* in[0]: any strides; ints[0] = dim, ints[1] = correction (var); out[0]: contiguous, the input's
 * shape with 1 at dim (i64 for argmax/argmin). */
extern "C" cn_status cuda_reduce(const cn_kernel_args *a) {
    const cn_view *x = &a->in[0], *y = &a->out[0];
    const char *name = cn_op_name(a->op);
    int p1 = P_NONE, p2 = P_NONE;
    switch (a->op) {
    case CN_OP_SUM:
    case CN_OP_MEAN: p1 = P_SUM; break;
    case CN_OP_PROD: p1 = P_PROD; break;
    case CN_OP_MAX: p1 = P_MAX; break;
    case CN_OP_MIN: p1 = P_MIN; break;
    case CN_OP_ARGMAX: p1 = P_ARGMAX; break;
    case CN_OP_ARGMIN: p1 = P_ARGMIN; break;
    case CN_OP_VAR: p1 = P_SUM, p2 = P_SUMSQ; break;
    case CN_OP_LOGSUMEXP: p1 = P_MAX, p2 = P_SUMEXP; break;
    default: return cn__kernel_op_error("cuda", "cuda_reduce", a->op);
    }
    cn_dtype dt = x->dtype;
    int float_only = a->op == CN_OP_MEAN || a->op == CN_OP_VAR || a->op == CN_OP_LOGSUMEXP;
    int extreme = p1 == P_MAX || p1 == P_MIN || p1 == P_ARGMAX || p1 == P_ARGMIN;
    int is_int = dt == CN_I32 || dt == CN_I64 || dt == CN_U8;
    if (!(is_float_dt(dt) || (is_int && !float_only) || (dt == CN_BOOL && extreme && !p2)))
        return no_kernel(a->op, dt);
    int arg = a->op == CN_OP_ARGMAX || a->op == CN_OP_ARGMIN;
    cn_dtype want = arg ? CN_I64 : dt;
    if (y->dtype != want)
        return cn_set_error(CN_ERR_DTYPE, name, "output dtype is %s, expected %s",
                            cn_dtype_name(y->dtype), cn_dtype_name(want));
    int dim = a->n_ints > 0 ? (int)a->ints[0] : 0;
    if (x->ndim > 0 && (dim < 0 || dim >= x->ndim))
        return cn_set_error(CN_ERR_INVALID_ARG, name, "dim %d is out of range for %d dims", dim,
                            x->ndim);
    red_geom g;
    geom_init(&g, x, y, dim);
    if (g.n == 0 && extreme)
        return cn_set_error(CN_ERR_SHAPE, name, "the reduced dim %d is empty, and an empty set "
                            "has no %s", dim, name);
    if (g.count == 0) return CN_OK;
    g.op = a->op;
    g.p1 = p1;
    g.p2 = p2;
    g.correction = a->op == CN_OP_VAR && a->n_ints > 1 ? a->ints[1] : 0;
    cu_dev *d = cu_device(name, a->device);
    if (!d) return cn_last_status();

    int threads = block_threads(&g);
    unsigned blocks = threads ? (unsigned)(g.count < 65535 ? g.count : 65535) : cu_blocks(g.count);
    int threads_each = threads ? threads : CU_THREADS;
    if (is_float_dt(dt)) {
        if (threads)
            reduce_block_kernel<double><<<blocks, threads_each, 0, d->stream>>>(g);
        else
            reduce_each_kernel<double><<<blocks, threads_each, 0, d->stream>>>(g);
    } else {
        if (threads)
            reduce_block_kernel<int64_t><<<blocks, threads_each, 0, d->stream>>>(g);
        else
            reduce_each_kernel<int64_t><<<blocks, threads_each, 0, d->stream>>>(g);
    }
    return cu_check_launch(name, threads ? "reduce_block_kernel" : "reduce_each_kernel");
}

/* in[0]: any strides; ints[0] = dim; out[0]: contiguous, same shape. */
extern "C" cn_status cuda_softmax(const cn_kernel_args *a) {
    const cn_view *x = &a->in[0], *y = &a->out[0];
    const char *name = cn_op_name(a->op);
    if (a->op != CN_OP_SOFTMAX && a->op != CN_OP_LOG_SOFTMAX)
        return cn__kernel_op_error("cuda", "cuda_softmax", a->op);
    /* Unreachable through the router: dtypes[op] (backend.c) admits the float dtypes and the
     * output takes the input's. Kept because a u8 or bool would be read as 2 bytes. */
    if (!is_float_dt(x->dtype) || y->dtype != x->dtype)
        return no_kernel(a->op, is_float_dt(x->dtype) ? y->dtype : x->dtype);
    int dim = a->n_ints > 0 ? (int)a->ints[0] : 0;
    if (x->ndim > 0 && (dim < 0 || dim >= x->ndim))
        return cn_set_error(CN_ERR_INVALID_ARG, name, "dim %d is out of range for %d dims", dim,
                            x->ndim);
    red_geom g;
    int64_t numel = geom_init(&g, x, y, dim);
    if (numel == 0) return CN_OK;
    g.op = a->op;
    cu_dev *d = cu_device(name, a->device);
    if (!d) return cn_last_status();
    int threads = block_threads(&g);
    if (x->dtype == CN_F32 && g.rs == 1 && g.inner == 1 && g.n >= 64 && g.n <= SOFTMAX_ROW_MAX) {
        unsigned blocks = (unsigned)(g.count < 65535 ? g.count : 65535);
        softmax_f32_rows_kernel<<<blocks, CU_THREADS, (size_t)g.n * sizeof(float), d->stream>>>(g);
        return cu_check_launch(name, "softmax_f32_rows_kernel");
    }
    if (threads) {
        unsigned blocks = (unsigned)(g.count < 65535 ? g.count : 65535);
        softmax_block_kernel<<<blocks, threads, 0, d->stream>>>(g);
    } else {
        softmax_each_kernel<<<cu_blocks(g.count), CU_THREADS, 0, d->stream>>>(g);
    }
    return cu_check_launch(name, threads ? "softmax_block_kernel" : "softmax_each_kernel");
}
