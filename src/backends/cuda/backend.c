/* The CUDA backend: device discovery, per-device state (a stream and a cuBLAS handle), the
 * memory functions, the kernel table, and the public functions of cinder/cuda.h.
 *
 * Registering the backend touches no GPU: the registry fills the table at startup in every
 * program, with or without a GPU. CUDA is first initialised when the device count is asked for
 * (once per process; an error there, such as no driver or no device, means 0 devices), and a
 * device's stream and handles are made on its first use.
 *
 * Host <-> device copies. Small ones go straight through cudaMemcpyAsync (from pageable memory
 * the driver stages them itself). Large ones go through two pinned staging buffers per device,
 * so that the host copy into one buffer overlaps the DMA out of the other: copy_from_host returns
 * once the source has been read (the DMA may still run, ordered before later kernels);
 * copy_to_host returns when the data is in place. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "backends/cuda/api.h"
#include "backends/cuda/cuda_internal.h"
#include "core/backend_common.h"

/* Copies of at least this many bytes use the pinned staging buffers. */
#define STAGE_MIN ((size_t)1 << 20)
/* Bytes per staging buffer (two per device). */
#define STAGE_BYTES ((size_t)8 << 20)

/* ---- errors ------------------------------------------------------------------------------------- */

cn_status cu_error(const char *op, cudaError_t e, const char *what) {
    (void)cudaGetLastError(); /* clears the error unless it is sticky */
    cn_status s = e == cudaErrorMemoryAllocation ? CN_ERR_OUT_OF_MEMORY : CN_ERR_BACKEND;
    return cn_set_error(s, op,
                        "%s failed: %s (%s); an error from an earlier asynchronous kernel is "
                        "reported at the next synchronisation (set CUDA_LAUNCH_BLOCKING=1 to "
                        "report it at its launch)",
                        what, cudaGetErrorString(e), cudaGetErrorName(e));
}

cn_status cu_check(const char *op, cudaError_t e, const char *what) {
    return e == cudaSuccess ? CN_OK : cu_error(op, e, what);
}

cn_status cu_check_launch(const char *op, const char *kernel) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return CN_OK;
    char what[96];
    snprintf(what, sizeof what, "launching %s", kernel);
    return cu_error(op, e, what);
}

cn_status cu_blas_error(const char *op, cublasStatus_t s, const char *what) {
    return cn_set_error(CN_ERR_BACKEND, op, "%s failed: %s (%s)", what, cublasGetStatusString(s),
                        cublasGetStatusName(s));
}

/* ---- devices ------------------------------------------------------------------------------------ */

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int device_total;
static char probe_message[256];

static void probe(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(probe_message, sizeof probe_message, "cudaGetDeviceCount: %s (%s)",
                 cudaGetErrorString(e), cudaGetErrorName(e));
        (void)cudaGetLastError();
        n = 0;
    } else if (n == 0) {
        snprintf(probe_message, sizeof probe_message, "cudaGetDeviceCount found no device");
    }
    device_total = n > CU_MAX_DEVICES ? CU_MAX_DEVICES : n;
}

/* Asked on every routed op: the probe runs once. */
static int cuda_device_count(void *ctx) {
    (void)ctx;
    pthread_once(&probe_once, probe);
    return device_total;
}

static cu_dev devices[CU_MAX_DEVICES];
static atomic_int device_ready[CU_MAX_DEVICES];
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lazy_lock = PTHREAD_MUTEX_INITIALIZER;

void cu_lock(void) { pthread_mutex_lock(&lazy_lock); }
void cu_unlock(void) { pthread_mutex_unlock(&lazy_lock); }

static cn_status check_index(const char *op, int device) {
    int count = cuda_device_count(NULL);
    if (device >= 0 && device < count) return CN_OK;
    return cn_set_error(CN_ERR_DEVICE_UNAVAILABLE, op, "cuda:%d is not available (%d device%s "
                        "usable here%s%s); pick another device, e.g. cpu", device, count,
                        count == 1 ? "" : "s", probe_message[0] ? ": " : "", probe_message);
}

static cn_status init_device(const char *op, int device) {
    cu_dev *d = &devices[device];
    memset(d, 0, sizeof *d);
    d->index = device;
    cn_status s = cu_check(op, cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking),
                           "cudaStreamCreateWithFlags");
    if (s != CN_OK) return s;
    cublasStatus_t st = cublasCreate(&d->blas);
    if (st == CUBLAS_STATUS_SUCCESS) {
        st = cublasSetStream(d->blas, d->stream);
        if (st != CUBLAS_STATUS_SUCCESS) cublasDestroy(d->blas);
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
        cudaStreamDestroy(d->stream);
        return cu_blas_error(op, st, "creating the cuBLAS handle");
    }
    atomic_store_explicit(&device_ready[device], 1, memory_order_release);
    return CN_OK;
}

cu_dev *cu_device(const char *op, int device) {
    if (check_index(op, device) != CN_OK) return NULL;
    if (cu_check(op, cudaSetDevice(device), "cudaSetDevice") != CN_OK) return NULL;
    if (atomic_load_explicit(&device_ready[device], memory_order_acquire)) return &devices[device];
    pthread_mutex_lock(&init_lock);
    cn_status s = CN_OK;
    if (!atomic_load_explicit(&device_ready[device], memory_order_acquire))
        s = init_device(op, device);
    pthread_mutex_unlock(&init_lock);
    return s == CN_OK ? &devices[device] : NULL;
}

cn_status cu_sync(cu_dev *d, const char *op) {
    return cu_check(op, cudaStreamSynchronize(d->stream), "cudaStreamSynchronize");
}

cn_status cu_read_i64(cu_dev *d, const char *op, const int64_t *src, int64_t *out) {
    cn_status s = cu_check(op, cudaMemcpyAsync(out, src, sizeof *out, cudaMemcpyDeviceToHost,
                                               d->stream), "cudaMemcpyAsync");
    return s == CN_OK ? cu_sync(d, op) : s;
}

cn_status cu_scratch(cu_dev *d, const char *op, size_t nbytes, void **ptr) {
    return cu_cache_alloc(d->index, op, nbytes, ptr);
}

void cu_scratch_free(cu_dev *d, void *ptr) {
    if (ptr) cu_cache_free(d->index, ptr);
}

static atomic_int cudnn_enabled = 1;

int cu_cudnn_enabled(void) {
#ifdef CINDER_HAVE_CUDNN
    return atomic_load(&cudnn_enabled);
#else
    return 0;
#endif
}

/* ---- memory functions --------------------------------------------------------------------------- */

static cn_status cuda_alloc(void *ctx, int device, size_t nbytes, void **ptr) {
    (void)ctx;
    *ptr = NULL;
    cu_dev *d = cu_device("cuda alloc", device);
    if (!d) return cn_last_status();
    return cu_cache_alloc(device, "cuda alloc", nbytes, ptr);
}

static void cuda_free(void *ctx, int device, void *ptr) {
    (void)ctx;
    if (ptr) cu_cache_free(device, ptr);
}

/* Two pinned buffers per device, each with an event marking the end of the last copy that used
 * it. Made on the first large copy; NULL buffers (pinned memory refused) mean direct copies. */
typedef struct staging {
    int tried;
    char *buf[2];
    cudaEvent_t done[2];
} staging;

static staging stages[CU_MAX_DEVICES];
static pthread_mutex_t stage_lock = PTHREAD_MUTEX_INITIALIZER;

/* The device's staging buffers (stage_lock held), or NULL to copy directly. */
static staging *get_staging(int device) {
    staging *st = &stages[device];
    if (!st->tried) {
        st->tried = 1;
        int ok = 1;
        for (int k = 0; k < 2 && ok; k++) {
            ok = cudaHostAlloc((void **)&st->buf[k], STAGE_BYTES, cudaHostAllocDefault) ==
                     cudaSuccess &&
                 cudaEventCreateWithFlags(&st->done[k], cudaEventDisableTiming) == cudaSuccess;
        }
        if (!ok) { /* not fatal: large copies go directly */
            (void)cudaGetLastError();
            for (int k = 0; k < 2; k++) {
                if (st->buf[k]) cudaFreeHost(st->buf[k]);
                if (st->done[k]) cudaEventDestroy(st->done[k]);
                st->buf[k] = NULL;
                st->done[k] = NULL;
            }
        }
    }
    return st->buf[0] ? st : NULL;
}

static cn_status cuda_copy_from_host(void *ctx, int device, void *dst, const void *src,
                                     size_t n) {
    (void)ctx;
    const char *op = "copy_from_host";
    if (n == 0) return CN_OK;
    cu_dev *d = cu_device(op, device);
    if (!d) return cn_last_status();
    if (n < STAGE_MIN)
        return cu_check(op, cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, d->stream),
                        "cudaMemcpyAsync");
    pthread_mutex_lock(&stage_lock);
    staging *st = get_staging(device);
    cn_status s = CN_OK;
    if (!st) {
        s = cu_check(op, cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, d->stream),
                     "cudaMemcpyAsync");
    } else {
        for (size_t off = 0, i = 0; s == CN_OK && off < n; i++) {
            int k = (int)(i & 1);
            size_t len = n - off < STAGE_BYTES ? n - off : STAGE_BYTES;
            s = cu_check(op, cudaEventSynchronize(st->done[k]), "cudaEventSynchronize");
            if (s != CN_OK) break;
            memcpy(st->buf[k], (const char *)src + off, len);
            s = cu_check(op, cudaMemcpyAsync((char *)dst + off, st->buf[k], len,
                                             cudaMemcpyHostToDevice, d->stream),
                         "cudaMemcpyAsync");
            if (s == CN_OK)
                s = cu_check(op, cudaEventRecord(st->done[k], d->stream), "cudaEventRecord");
            off += len;
        }
    }
    pthread_mutex_unlock(&stage_lock);
    return s;
}

static cn_status cuda_copy_to_host(void *ctx, int device, void *dst, const void *src, size_t n) {
    (void)ctx;
    const char *op = "copy_to_host";
    if (n == 0) return CN_OK;
    cu_dev *d = cu_device(op, device);
    if (!d) return cn_last_status();
    if (n < STAGE_MIN) {
        cn_status s = cu_check(op, cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost,
                                                   d->stream), "cudaMemcpyAsync");
        return s == CN_OK ? cu_sync(d, op) : s;
    }
    pthread_mutex_lock(&stage_lock);
    staging *st = get_staging(device);
    cn_status s = CN_OK;
    if (!st) {
        s = cu_check(op, cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, d->stream),
                     "cudaMemcpyAsync");
        if (s == CN_OK) s = cu_sync(d, op);
    } else {
        /* chunk i goes into buffer i % 2; while it is in flight, chunk i - 1 is copied out */
        size_t prev_off = 0, prev_len = 0;
        int prev = -1;
        for (size_t off = 0, i = 0; s == CN_OK && off < n; i++) {
            int k = (int)(i & 1);
            size_t len = n - off < STAGE_BYTES ? n - off : STAGE_BYTES;
            s = cu_check(op, cudaEventSynchronize(st->done[k]), "cudaEventSynchronize");
            if (s == CN_OK)
                s = cu_check(op, cudaMemcpyAsync(st->buf[k], (const char *)src + off, len,
                                                 cudaMemcpyDeviceToHost, d->stream),
                             "cudaMemcpyAsync");
            if (s == CN_OK)
                s = cu_check(op, cudaEventRecord(st->done[k], d->stream), "cudaEventRecord");
            if (s == CN_OK && prev >= 0) {
                s = cu_check(op, cudaEventSynchronize(st->done[prev]), "cudaEventSynchronize");
                if (s == CN_OK) memcpy((char *)dst + prev_off, st->buf[prev], prev_len);
            }
            prev = k;
            prev_off = off;
            prev_len = len;
            off += len;
        }
        if (s == CN_OK && prev >= 0) {
            s = cu_check(op, cudaEventSynchronize(st->done[prev]), "cudaEventSynchronize");
            if (s == CN_OK) memcpy((char *)dst + prev_off, st->buf[prev], prev_len);
        }
    }
    pthread_mutex_unlock(&stage_lock);
    return s;
}

static cn_status cuda_synchronize(void *ctx, int device) {
    (void)ctx;
    cu_dev *d = cu_device("synchronize", device);
    return d ? cu_sync(d, "synchronize") : cn_last_status();
}

/* ---- the table ---------------------------------------------------------------------------------- */

#define DT(d) (1u << (d))

/* Touches no GPU. */
static void fill_table(cn_backend *b) {
    memset(b, 0, sizeof *b);
    b->name = "cuda";
    b->device_count = cuda_device_count;
    b->alloc = cuda_alloc;
    b->free = cuda_free;
    b->copy_from_host = cuda_copy_from_host;
    b->copy_to_host = cuda_copy_to_host;
    b->synchronize = cuda_synchronize;

    cn_kernel_fn *k = b->kernels;
    const cn_op unary[] = {CN_OP_NEG,        CN_OP_ABS,     CN_OP_RELU,  CN_OP_EXP,   CN_OP_LOG,
                           CN_OP_LOG1P,      CN_OP_SQRT,    CN_OP_RSQRT, CN_OP_SIN,   CN_OP_COS,
                           CN_OP_TANH,       CN_OP_SIGMOID, CN_OP_SILU,  CN_OP_GELU,  CN_OP_ERF,
                           CN_OP_FLOOR,      CN_OP_CEIL,    CN_OP_ROUND, CN_OP_TRUNC, CN_OP_SIGN,
                           CN_OP_RECIPROCAL, CN_OP_TAN,     CN_OP_ASIN,  CN_OP_ACOS,  CN_OP_ATAN,
                           CN_OP_SINH,       CN_OP_COSH,    CN_OP_ASINH, CN_OP_ACOSH, CN_OP_ATANH};
    for (size_t i = 0; i < sizeof unary / sizeof *unary; i++) k[unary[i]] = cuda_unary;
    k[CN_OP_ADD_SCALAR] = k[CN_OP_MUL_SCALAR] = k[CN_OP_POW_SCALAR] = k[CN_OP_CLAMP] = cuda_scalar;
    k[CN_OP_ADD] = k[CN_OP_SUB] = k[CN_OP_MUL] = k[CN_OP_DIV] = cuda_binary;
    k[CN_OP_POW] = k[CN_OP_MAXIMUM] = k[CN_OP_MINIMUM] = k[CN_OP_ATAN2] = cuda_binary;
    k[CN_OP_EQ] = k[CN_OP_NE] = k[CN_OP_LT] = k[CN_OP_LE] = k[CN_OP_GT] = k[CN_OP_GE] =
        cuda_compare;
    k[CN_OP_LOGICAL_AND] = k[CN_OP_LOGICAL_OR] = k[CN_OP_LOGICAL_NOT] = cuda_logical;
    k[CN_OP_WHERE] = cuda_where;
    k[CN_OP_CAST] = k[CN_OP_COPY] = cuda_cast;
    k[CN_OP_FILL] = cuda_fill;
    k[CN_OP_RAND_UNIFORM] = k[CN_OP_RAND_NORMAL] = cuda_rand;
    const cn_op reductions[] = {CN_OP_SUM,  CN_OP_MEAN,   CN_OP_MAX,    CN_OP_MIN,      CN_OP_PROD,
                                CN_OP_ARGMAX, CN_OP_ARGMIN, CN_OP_VAR, CN_OP_LOGSUMEXP};
    for (size_t i = 0; i < sizeof reductions / sizeof *reductions; i++)
        k[reductions[i]] = cuda_reduce;
    k[CN_OP_SOFTMAX] = k[CN_OP_LOG_SOFTMAX] = cuda_softmax;
    k[CN_OP_MATMUL] = cuda_matmul;
    k[CN_OP_GATHER] = cuda_gather;
    k[CN_OP_SCATTER_ADD] = cuda_scatter_add;
    k[CN_OP_INDEX_SELECT] = cuda_index_select;
    k[CN_OP_ONE_HOT] = cuda_one_hot;
    k[CN_OP_CONV2D] = k[CN_OP_CONV2D_RELU] = k[CN_OP_CONV2D_MAX_POOL2D] = cuda_conv2d;
    k[CN_OP_MAX_POOL2D_BACKWARD_INDEX] = cuda_max_pool2d_backward_index;
    k[CN_OP_CONV2D_MAX_POOL2D_BACKWARD] = cuda_conv2d_max_pool2d_backward;
    k[CN_OP_MAX_POOL2D] = k[CN_OP_AVG_POOL2D] = cuda_pool2d;
    k[CN_OP_CONV2D_BACKWARD_INPUT] = cuda_conv2d_backward_input;
    k[CN_OP_CONV2D_BACKWARD_WEIGHT] = cuda_conv2d_backward_weight;
    k[CN_OP_CONV_TRANSPOSE2D] = k[CN_OP_CONV_TRANSPOSE1D] = cuda_conv_transpose2d;
    k[CN_OP_CONV1D] = cuda_conv1d;
    k[CN_OP_CONV3D] = k[CN_OP_CONV_TRANSPOSE3D] = k[CN_OP_CONV3D_BACKWARD_WEIGHT] = cuda_conv3d;
    k[CN_OP_MAX_POOL2D_BACKWARD] = k[CN_OP_AVG_POOL2D_BACKWARD] = cuda_pool2d_backward;
    k[CN_OP_SGD_STEP] = cuda_sgd_step;
    k[CN_OP_ADAMW_STEP] = cuda_adamw_step;
    k[CN_OP_LINEAR] = cuda_linear;
    k[CN_OP_LINEAR_GELU] = cuda_linear_gelu;
    k[CN_OP_LINEAR_ADD] = cuda_linear_add;
    k[CN_OP_ACTIVATION_BACKWARD] = cuda_activation_backward;
    k[CN_OP_SOFTMAX_BACKWARD] = cuda_softmax_backward;
    k[CN_OP_MASKED_FILL] = cuda_masked_fill;
    k[CN_OP_TRIL] = k[CN_OP_TRIU] = cuda_triangle;
    k[CN_OP_FLIP] = cuda_flip;
    k[CN_OP_REPEAT] = cuda_repeat;
    k[CN_OP_SCATTER] = cuda_scatter;
    k[CN_OP_SLICE_ASSIGN] = cuda_slice_assign;
    k[CN_OP_INDEX_COPY] = k[CN_OP_INDEX_ADD] = cuda_index_put;
    k[CN_OP_UNFOLD] = cuda_unfold;
    k[CN_OP_NONZERO] = cuda_nonzero;
    k[CN_OP_MASKED_SELECT] = cuda_masked_select;
    k[CN_OP_GATHER_ND] = cuda_gather_nd;
    k[CN_OP_SCATTER_ND] = cuda_scatter_nd; /* reductions other than assign: f32 f64 i32 i64 */
    k[CN_OP_INTERPOLATE] = k[CN_OP_INTERPOLATE_BACKWARD] = cuda_interpolate;
    k[CN_OP_GRID_SAMPLE_2D] = k[CN_OP_GRID_SAMPLE_2D_BACKWARD] = cuda_grid_sample_2d;

    /* The dtypes each kernel computes (0: every dtype the op accepts): the router refuses the
     * rest before launching, so the kernels do not check them. f16 and bf16 compute in float. */
    uint32_t *dt = b->dtypes;
    const uint32_t F = DT(CN_F32) | DT(CN_F64) | DT(CN_F16) | DT(CN_BF16);
    const uint32_t I = DT(CN_I32) | DT(CN_I64), FI = F | I;
    for (size_t i = 0; i < sizeof unary / sizeof *unary; i++) dt[unary[i]] = F;
    dt[CN_OP_NEG] = dt[CN_OP_ABS] = dt[CN_OP_RELU] = FI;
    dt[CN_OP_FLOOR] = dt[CN_OP_CEIL] = dt[CN_OP_ROUND] = dt[CN_OP_TRUNC] = dt[CN_OP_SIGN] = FI;
    dt[CN_OP_ADD_SCALAR] = dt[CN_OP_MUL_SCALAR] = dt[CN_OP_CLAMP] = FI;
    dt[CN_OP_POW_SCALAR] = F;
    dt[CN_OP_ADD] = dt[CN_OP_SUB] = dt[CN_OP_MUL] = dt[CN_OP_DIV] = FI;
    dt[CN_OP_MAXIMUM] = dt[CN_OP_MINIMUM] = FI;
    dt[CN_OP_POW] = dt[CN_OP_ATAN2] = dt[CN_OP_ACTIVATION_BACKWARD] = F;
    dt[CN_OP_SOFTMAX_BACKWARD] = F;
    /* comparisons, logical ops, where, cast, copy, fill: every dtype they accept */
    dt[CN_OP_RAND_UNIFORM] = dt[CN_OP_RAND_NORMAL] = F;
    dt[CN_OP_SUM] = dt[CN_OP_PROD] = FI | DT(CN_U8);
    dt[CN_OP_MAX] = dt[CN_OP_MIN] = dt[CN_OP_ARGMAX] = dt[CN_OP_ARGMIN] =
        FI | DT(CN_U8) | DT(CN_BOOL);
    dt[CN_OP_MEAN] = dt[CN_OP_VAR] = dt[CN_OP_LOGSUMEXP] = F;
    dt[CN_OP_SOFTMAX] = dt[CN_OP_LOG_SOFTMAX] = F;
    dt[CN_OP_MATMUL] = F | DT(CN_I32) | DT(CN_I64);
    dt[CN_OP_SCATTER_ADD] = FI;
    /* gather, index_select (by element size), one_hot (an index of any int dtype): all */
    dt[CN_OP_CONV2D] = dt[CN_OP_CONV2D_RELU] = dt[CN_OP_CONV2D_MAX_POOL2D] = F;
    dt[CN_OP_MAX_POOL2D] = dt[CN_OP_AVG_POOL2D] = dt[CN_OP_MAX_POOL2D_BACKWARD_INDEX] = F;
    dt[CN_OP_CONV2D_BACKWARD_INPUT] = dt[CN_OP_CONV2D_BACKWARD_WEIGHT] = F;
    dt[CN_OP_CONV2D_MAX_POOL2D_BACKWARD] = F;
    dt[CN_OP_CONV_TRANSPOSE2D] = dt[CN_OP_CONV_TRANSPOSE1D] = dt[CN_OP_CONV1D] = F;
    dt[CN_OP_CONV3D] = dt[CN_OP_CONV_TRANSPOSE3D] = dt[CN_OP_CONV3D_BACKWARD_WEIGHT] =
        DT(CN_F32) | DT(CN_F64);
    dt[CN_OP_MAX_POOL2D_BACKWARD] = dt[CN_OP_AVG_POOL2D_BACKWARD] = F;
    dt[CN_OP_SGD_STEP] = DT(CN_F32) | DT(CN_F64);
    dt[CN_OP_ADAMW_STEP] = DT(CN_F32) | DT(CN_F64);
    dt[CN_OP_LINEAR] = DT(CN_F32) | DT(CN_F64) | DT(CN_F16) | DT(CN_BF16);
    dt[CN_OP_LINEAR_GELU] = DT(CN_F32) | DT(CN_F64);
    dt[CN_OP_LINEAR_ADD] = DT(CN_F32) | DT(CN_F64);
    /* scans and sorts: float and int; any / all: every dtype */
    const cn_op scans[] = {CN_OP_CUMSUM, CN_OP_CUMPROD, CN_OP_CUMMAX, CN_OP_CUMMIN, CN_OP_SORT,
                           CN_OP_ANY,    CN_OP_ALL};
    for (size_t i = 0; i < sizeof scans / sizeof *scans; i++)
        k[scans[i]] = cuda_scan, dt[scans[i]] = FI | DT(CN_U8);
    dt[CN_OP_ANY] = dt[CN_OP_ALL] = 0;
    k[CN_OP_CUMPROD_BACKWARD] = cuda_cumprod_backward;
    dt[CN_OP_CUMPROD_BACKWARD] = F;

    /* issue 16's remaining elementwise ops: the bitwise ones on i32 and i64 only */
    k[CN_OP_REMAINDER] = k[CN_OP_FMOD] = k[CN_OP_HYPOT] = cuda_binary;
    k[CN_OP_BITWISE_AND] = k[CN_OP_BITWISE_OR] = k[CN_OP_BITWISE_XOR] = cuda_binary;
    k[CN_OP_BITWISE_LEFT_SHIFT] = k[CN_OP_BITWISE_RIGHT_SHIFT] = cuda_binary;
    k[CN_OP_REMAINDER_SCALAR] = k[CN_OP_BITWISE_AND_SCALAR] = k[CN_OP_BITWISE_OR_SCALAR] =
        k[CN_OP_BITWISE_XOR_SCALAR] = k[CN_OP_BITWISE_LEFT_SHIFT_SCALAR] =
            k[CN_OP_BITWISE_RIGHT_SHIFT_SCALAR] = cuda_scalar;
    k[CN_OP_IS_NAN] = k[CN_OP_IS_INF] = k[CN_OP_BITWISE_NOT] = cuda_unary;
    k[CN_OP_LOGICAL_XOR] = cuda_logical;
    dt[CN_OP_REMAINDER] = dt[CN_OP_FMOD] = dt[CN_OP_REMAINDER_SCALAR] = FI;
    dt[CN_OP_IS_NAN] = dt[CN_OP_IS_INF] = FI;
    dt[CN_OP_HYPOT] = F;
    dt[CN_OP_BITWISE_AND] = dt[CN_OP_BITWISE_OR] = dt[CN_OP_BITWISE_XOR] = I;
    dt[CN_OP_BITWISE_LEFT_SHIFT] = dt[CN_OP_BITWISE_RIGHT_SHIFT] = dt[CN_OP_BITWISE_NOT] = I;
    dt[CN_OP_BITWISE_AND_SCALAR] = dt[CN_OP_BITWISE_OR_SCALAR] = dt[CN_OP_BITWISE_XOR_SCALAR] = I;
    dt[CN_OP_BITWISE_LEFT_SHIFT_SCALAR] = dt[CN_OP_BITWISE_RIGHT_SHIFT_SCALAR] = I;
    /* the activations: float */
    k[CN_OP_HARD_SIGMOID] = k[CN_OP_LOG_SIGMOID] = k[CN_OP_HARD_SWISH] = cuda_unary;
    k[CN_OP_LEAKY_RELU] = k[CN_OP_SOFTPLUS] = k[CN_OP_ELU] = cuda_scalar;
    k[CN_OP_PRELU] = cuda_binary;
    dt[CN_OP_HARD_SIGMOID] = dt[CN_OP_LOG_SIGMOID] = dt[CN_OP_HARD_SWISH] = F;
    dt[CN_OP_LEAKY_RELU] = dt[CN_OP_SOFTPLUS] = dt[CN_OP_ELU] = dt[CN_OP_PRELU] = F;
    /* the comparisons with a scalar: float and int */
    k[CN_OP_EQ_SCALAR] = k[CN_OP_NE_SCALAR] = k[CN_OP_LT_SCALAR] = k[CN_OP_LE_SCALAR] =
        k[CN_OP_GT_SCALAR] = k[CN_OP_GE_SCALAR] = cuda_scalar;
    dt[CN_OP_EQ_SCALAR] = dt[CN_OP_NE_SCALAR] = dt[CN_OP_LT_SCALAR] = dt[CN_OP_LE_SCALAR] =
        dt[CN_OP_GT_SCALAR] = dt[CN_OP_GE_SCALAR] = FI;
    dt[CN_OP_POW] = dt[CN_OP_POW_SCALAR] = FI; /* ints too since issue 16 (powi) */
    /* indexing (issue 16): tril, triu, flip, repeat, scatter, slice_assign and index_copy move
     * elements by size (every dtype); masked_fill stores its value (floats, ints, u8, bool);
     * index_add adds */
    dt[CN_OP_MASKED_FILL] = FI | DT(CN_U8) | DT(CN_BOOL);
    dt[CN_OP_INDEX_ADD] = FI;
    /* attention and ctc_loss (issue 16): f32 and f64 */
    k[CN_OP_SDPA] = cuda_sdpa;
    k[CN_OP_SDPA_BACKWARD] = cuda_sdpa_backward;
    dt[CN_OP_SDPA] = dt[CN_OP_SDPA_BACKWARD] = DT(CN_F32) | DT(CN_F64);
    k[CN_OP_CTC_LOSS] = cuda_ctc_loss;
    k[CN_OP_CTC_LOSS_BACKWARD] = cuda_ctc_loss_backward;
    dt[CN_OP_CTC_LOSS] = dt[CN_OP_CTC_LOSS_BACKWARD] = DT(CN_F32) | DT(CN_F64);
    /* resampling (issue 16): every float dtype; grid_sample_2d's backward f32 and f64 */
    dt[CN_OP_INTERPOLATE] = dt[CN_OP_INTERPOLATE_BACKWARD] = F;
    dt[CN_OP_GRID_SAMPLE_2D] = F;
    dt[CN_OP_GRID_SAMPLE_2D_BACKWARD] = DT(CN_F32) | DT(CN_F64); /* accumulates in the output */
    /* padding and pooling (issue 16): pad moves elements by size and stores its constant by
     * cn_cast's rules (every dtype); its backward and the adaptive pools compute in double */
    k[CN_OP_PAD] = cuda_pad;
    k[CN_OP_PAD_BACKWARD] = cuda_pad_backward;
    k[CN_OP_ADAPTIVE_AVG_POOL] = k[CN_OP_ADAPTIVE_AVG_POOL_BACKWARD] = cuda_adaptive_avg_pool;
    dt[CN_OP_PAD_BACKWARD] = dt[CN_OP_ADAPTIVE_AVG_POOL] = F;
    dt[CN_OP_ADAPTIVE_AVG_POOL_BACKWARD] = F;
    k[CN_OP_MAX_POOL2D_WITH_INDICES] = cuda_max_pool2d_with_indices;
    dt[CN_OP_MAX_POOL2D_WITH_INDICES] = F;
    k[CN_OP_UNFOLD4D] = k[CN_OP_FOLD4D] = cuda_fold4d;
    dt[CN_OP_UNFOLD4D] = dt[CN_OP_FOLD4D] = F;
    k[CN_OP_DEFORM_CONV2D] = k[CN_OP_DEFORM_CONV2D_BACKWARD] = cuda_deform_conv2d;
    dt[CN_OP_DEFORM_CONV2D] = dt[CN_OP_DEFORM_CONV2D_BACKWARD] = F;
    /* the real FFT (issue 16): cuFFT in f32 and f64 (its half transforms take powers of two
     * only: f16 / bf16 are refused, cast them to f32) */
    k[CN_OP_RFFT] = k[CN_OP_IRFFT] = cuda_fft;
    dt[CN_OP_RFFT] = dt[CN_OP_IRFFT] = DT(CN_F32) | DT(CN_F64);
    /* the fused normalisations (issue 17): f32 and f64 */
    k[CN_OP_LAYER_NORM] = k[CN_OP_RMS_NORM] = cuda_norm;
    k[CN_OP_LAYER_NORM_BACKWARD] = k[CN_OP_RMS_NORM_BACKWARD] = cuda_norm_backward;
    dt[CN_OP_LAYER_NORM] = dt[CN_OP_RMS_NORM] = DT(CN_F32) | DT(CN_F64);
    dt[CN_OP_LAYER_NORM_BACKWARD] = dt[CN_OP_RMS_NORM_BACKWARD] = DT(CN_F32) | DT(CN_F64);
    /* the quantized linear (issue 19): one thread per output (quant.cu) */
    k[CN_OP_QUANT_LINEAR] = cuda_quant_linear;
    dt[CN_OP_QUANT_LINEAR] = DT(CN_F32);
}

/* ---- cinder/cuda.h, through libcinder's forwarders (api.h) ------------------------------------ */

static cn_status memory_stats(int device, cn_cuda_memory_stats_t *out) {
    const char *op = "cuda_memory_stats";
    if (!out) return cn_set_error(CN_ERR_NULL_ARG, op, "'out' is NULL; pass the address of a "
                                  "cn_cuda_memory_stats_t");
    cn_status s = check_index(op, device);
    if (s != CN_OK) return s;
    cu_cache_stats(device, out);
    return CN_OK;
}

static cn_status reset_peak_memory_stats(int device) {
    cn_status s = check_index("cuda_reset_peak_memory_stats", device);
    if (s != CN_OK) return s;
    cu_cache_reset_peaks(device);
    return CN_OK;
}

static cn_status empty_cache(int device) {
    const char *op = "cuda_empty_cache";
    cu_dev *d = cu_device(op, device);
    if (!d) return cn_last_status();
    cn_status s = cu_sync(d, op);
    return s == CN_OK ? cu_cache_empty(device) : s;
}

static cn_status synchronize_device(int device) {
    cu_dev *d = cu_device("cuda_synchronize", device);
    return d ? cu_sync(d, "cuda_synchronize") : cn_last_status();
}

static int set_cudnn_enabled(int enabled) {
    return atomic_exchange(&cudnn_enabled, enabled ? 1 : 0);
}

static int cudnn_compiled(void) {
#ifdef CINDER_HAVE_CUDNN
    return 1;
#else
    return 0;
#endif
}

static cn_status stream_of(int device, void **stream) {
    if (!stream)
        return cn_set_error(CN_ERR_NULL_ARG, "cuda_stream", "argument 'stream' is NULL; pass the "
                            "address of a void * to receive the cudaStream_t");
    cu_dev *d = cu_device("cuda_stream", device);
    if (!d) return cn_last_status();
    *stream = d->stream;
    return CN_OK;
}

/* cn_cuda_gemm: row-major c [m, n] = a @ b is column-major c^T [n, m] = b^T @ a^T, and a
 * row-major matrix is its own transpose in column-major terms, read in place. */
static cn_status gemm(int device, cn_dtype dtype, int ta, int tb, int64_t m, int64_t n, int64_t k,
                      const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                      int64_t ldc) {
    const char *op = "cuda_gemm";
    int empty;
    if (cn__gemm_check(op, dtype, 1, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, &empty) != CN_OK)
        return cn_last_status();
    if (empty) return CN_OK;
    cu_dev *d = cu_device(op, device);
    if (!d) return cn_last_status();
    cu_gemm_args g = {.dtype = dtype, .c_dtype = dtype, .trans_a = tb != 0, .trans_b = ta != 0,
                      .m = n, .n = m, .k = k, .a = b, .lda = ldb, .b = a, .ldb = lda, .c = c,
                      .ldc = ldc, .batch = 1, .beta = beta};
    return cu_gemm(d, op, &g);
}

static const char *unavailable_reason(void) {
    pthread_once(&probe_once, probe);
    return probe_message;
}

/* ---- the module --------------------------------------------------------------------------------- */

static const cu_api api = {
    .memory_stats = memory_stats,
    .reset_peak_memory_stats = reset_peak_memory_stats,
    .empty_cache = empty_cache,
    .synchronize = synchronize_device,
    .set_cudnn_enabled = set_cudnn_enabled,
    .cudnn_compiled = cudnn_compiled,
    .stream = stream_of,
    .gemm = gemm,
};

static cn_backend table;
static cn_backend_module module;
static pthread_once_t module_once = PTHREAD_ONCE_INIT;

static void make_module(void) {
    fill_table(&table);
    module.abi_version = CN_BACKEND_ABI_VERSION;
    module.backend = &table;
    module.unavailable_reason = unavailable_reason;
    module.api = &api;
}

const cn_backend_module *cn_cuda_backend_module(const cn_backend_host *host) {
    if (!cu_host_attach(host)) return NULL;
    pthread_once(&module_once, make_module);
    return &module;
}
