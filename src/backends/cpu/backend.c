/* The CPU backend: host memory and the kernel table. */
#define _DEFAULT_SOURCE /* madvise */
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#include "backends/cpu/cpu_internal.h"
#include "core/alloc.h"
#include "core/op_table.h"

#if defined(__SANITIZE_ADDRESS__)
#define CPU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CPU_ASAN 1
#endif
#endif
#ifdef CPU_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

static int cpu_device_count(void *ctx) {
    (void)ctx;
    return 1;
}

/* ---- host memory: a cache of freed large blocks -------------------------------------------------- *
 * Every op returns a new tensor, so a program allocates and frees the same sizes over and over.
 * Small blocks (up to CPU_SMALL_BYTES) are recycled by core's per-thread lists behind
 * cn__aligned_alloc. Larger ones come from glibc, and above its mmap threshold (128 KiB at first,
 * 32 MiB at most) each is fresh pages from the kernel, every one of which faults on its first
 * write: a 64 MB output pays 16k page faults, more time than the arithmetic that fills it. So
 * freed large blocks are kept here, by size class, and handed out again, up to CPU_CACHE_BYTES in
 * all (beyond that a freed block goes back to the C library).
 *
 * Classes step by a quarter of a power of two (at most 20% of a block unused). Each block starts
 * with a 64-byte header (the data stays 64-byte aligned) holding its class (CLASS_SMALL for a
 * small block, which goes back to cn__aligned_free) and, while cached, the link to the next block
 * of its class. A block taken from the cache still counts as one allocation for the
 * failure-injection mode (cn_alloc_fail_after), like a fresh one. Under AddressSanitizer a cached
 * block's data, and the slack past the bytes asked for, are poisoned, so a use after cn_release
 * or an overrun is still reported. */

#define CPU_SMALL_BYTES 4096                 /* core recycles blocks up to this size */
#define CPU_CACHE_BYTES ((size_t)1 << 30)    /* most bytes kept in cached blocks */
#define BLOCK_HEADER 64
#define SMALL_LOG2 12                        /* log2(CPU_SMALL_BYTES) */
#define NUM_CLASSES (4 * (64 - SMALL_LOG2))  /* 4 per octave above CPU_SMALL_BYTES */
#define CLASS_SMALL (-1)

typedef struct block_header {
    struct block_header *next; /* while cached: the next block of the class */
    int cls;                   /* CLASS_SMALL, or the size class */
} block_header;

static struct {
    atomic_flag lock;
    block_header *free[NUM_CLASSES];
    size_t bytes; /* capacity of the cached blocks */
} cache = {.lock = ATOMIC_FLAG_INIT};

/* The lock is held for a few instructions (a list push or pop), so a spin lock: a mutex's lock
 * and unlock cost more than the pop. A waiter yields its core now and then, in case the holder
 * was preempted (the machine may run more threads than it has cores). */
static void cache_lock(void) {
    for (int spins = 0; atomic_flag_test_and_set_explicit(&cache.lock, memory_order_acquire);)
        if (++spins % 64 == 0) sched_yield();
}

static void cache_unlock(void) { atomic_flag_clear_explicit(&cache.lock, memory_order_release); }

/* The class of a request of n > CPU_SMALL_BYTES bytes; *cap receives its capacity. */
static int size_class(size_t n, size_t *cap) {
    int k = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* n in (2^k, 2^(k+1)], k >= 12 */
    size_t units = (n + ((size_t)1 << (k - 2)) - 1) >> (k - 2); /* 5..8 steps of 2^k / 4 */
    *cap = units << (k - 2);
    return 4 * (k - SMALL_LOG2) + (int)(units - 5);
}

static size_t class_bytes(int cls) {
    int k = cls / 4 + SMALL_LOG2;
    return (size_t)(cls % 4 + 5) << (k - 2);
}

static void *block_data(block_header *h) { return (char *)h + BLOCK_HEADER; }

static block_header *block_of(void *data) { return (block_header *)((char *)data - BLOCK_HEADER); }

static void cache_push(block_header *h, size_t cap) {
    h->next = cache.free[h->cls];
    cache.free[h->cls] = h;
    cache.bytes += cap;
}

/* A cached block of class cls, or NULL. */
static block_header *cache_pop(int cls, size_t cap) {
    cache_lock();
    block_header *h = cache.free[cls];
    if (h) {
        cache.free[cls] = h->next;
        cache.bytes -= cap;
    }
    cache_unlock();
    return h;
}

/* ---- 2 MB pages for data sets ---------------------------------------------------------------- *
 * A training set is read a batch of shuffled rows at a time, anywhere in its hundreds of MB: on
 * 4 KB pages nearly every row is a TLB miss whose page-table walk misses the caches too (the
 * MLP's batch of 128 images from the 188 MB Fashion-MNIST set: 0.058 s of gathering an epoch at
 * one thread, 0.042 s with this advice; docs/benchmarks.md). Where Linux leaves
 * transparent huge pages to the program ("madvise", Debian's default), fresh blocks of at least
 * HUGE_BYTES ask for them. Only blocks this large: smaller ones are recycled outputs, and making
 * every block huge (glibc's hugetlb tunable) slowed the MLP's forward by a third (oneDNN's packing
 * buffers, mapped and unmapped per call, then fault 2 MB at a time). */
#define HUGE_BYTES ((size_t)128 << 20)
#define HUGE_PAGE  ((uintptr_t)2 << 20)

static void advise_huge_pages(void *p, size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~(HUGE_PAGE - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* advice: may be refused */
#else
    (void)p, (void)n;
#endif
}

static cn_status cpu_alloc(void *ctx, int device, size_t nbytes, void **ptr) {
    (void)ctx;
    (void)device;
    *ptr = NULL;
    if (nbytes > SIZE_MAX / 4) { /* beyond the classes, and beyond any machine */
        cn__alloc_should_fail(); /* still one allocation for the failure-injection count */
        cn_set_error(CN_ERR_OUT_OF_MEMORY, "cpu alloc", "could not allocate %zu bytes of host "
                     "memory: more than the address space holds", nbytes);
        return CN_ERR_OUT_OF_MEMORY;
    }
    if (nbytes <= CPU_SMALL_BYTES - BLOCK_HEADER) {
        block_header *h = cn__aligned_alloc("cpu alloc", BLOCK_HEADER + nbytes);
        if (!h) return CN_ERR_OUT_OF_MEMORY;
        h->cls = CLASS_SMALL;
        *ptr = block_data(h);
        return CN_OK;
    }
    size_t cap;
    int cls = size_class(BLOCK_HEADER + nbytes, &cap);
    cap -= BLOCK_HEADER; /* the block is BLOCK_HEADER + cap bytes: a class's size */
    block_header *h = cache_pop(cls, cap);
    if (h && cn__alloc_should_fail()) { /* failure injection picked this allocation */
        cache_lock();
        cache_push(h, cap);
        cache_unlock();
        cn_set_error(CN_ERR_OUT_OF_MEMORY, "cpu alloc", "could not allocate %zu bytes of host "
                     "memory; free tensors you no longer need (cn_release, scopes) or use "
                     "smaller batches", nbytes);
        return CN_ERR_OUT_OF_MEMORY;
    }
    if (!h) {
        h = cn__aligned_alloc("cpu alloc", BLOCK_HEADER + cap);
        if (!h) return CN_ERR_OUT_OF_MEMORY;
        h->cls = cls;
        if (cap >= HUGE_BYTES) advise_huge_pages(h, BLOCK_HEADER + cap);
    }
    UNPOISON(block_data(h), nbytes);
    POISON((char *)block_data(h) + nbytes, cap - nbytes);
    *ptr = block_data(h);
    return CN_OK;
}

static void cpu_free(void *ctx, int device, void *ptr) {
    (void)ctx;
    (void)device;
    if (!ptr) return;
    block_header *h = block_of(ptr);
    if (h->cls == CLASS_SMALL) {
        cn__aligned_free(h);
        return;
    }
    size_t cap = class_bytes(h->cls) - BLOCK_HEADER;
    POISON(ptr, cap);
    cache_lock();
    int keep = cache.bytes + cap <= CPU_CACHE_BYTES;
    if (keep) cache_push(h, cap);
    cache_unlock();
    if (!keep) {
        UNPOISON(ptr, cap);
        cn__aligned_free(h);
    }
}

static cn_status cpu_copy_bytes(void *ctx, int device, void *dst, const void *src, size_t n) {
    (void)ctx;
    (void)device;
    if (n) memcpy(dst, src, n);
    return CN_OK;
}

#define DT(d) (1u << (d))

/* Called once by the registry, which gives the CPU id 0. */
void cn__cpu_backend_fill(cn_backend *b) {
    memset(b, 0, sizeof *b);
    b->name = "cpu";
    b->device_count = cpu_device_count;
    b->alloc = cpu_alloc;
    b->free = cpu_free;
    b->copy_from_host = cpu_copy_bytes;
    b->copy_to_host = cpu_copy_bytes;

    /* The elementwise ops come from the op table, by family: an op added there is routed to its
     * family's kernel, whose switch has its case (or reports it missing, never computing another
     * op). Each kernel takes the dtypes the op's row accepts that it computes: the arithmetic ones
     * in f32, f64, i32 and i64; comparisons also u8 and bool. The router refuses the rest before
     * launching, so the kernels do not check them. */
    cn_kernel_fn *k = b->kernels;
    uint32_t *dt = b->dtypes;
    const uint32_t F = DT(CN_F32) | DT(CN_F64), I = DT(CN_I32) | DT(CN_I64), FI = F | I;
    for (int op = 0; op < CN_OP_COUNT; op++) {
        const cn__op_decl *d = cn__op_decl_of(op);
        uint32_t accepted = d ? cn__kinds_dtypes(d->kinds[d->value_from]) : 0;
        switch (d ? d->family : 0) {
        case CN__FAMILY_UNARY: k[op] = cpu_unary, dt[op] = accepted & FI; break;
        case CN__FAMILY_SCALAR: k[op] = cpu_scalar, dt[op] = accepted & FI; break;
        case CN__FAMILY_BINARY: k[op] = cpu_binary, dt[op] = accepted & FI; break;
        case CN__FAMILY_COMPARE:
            k[op] = cpu_compare, dt[op] = accepted & (FI | DT(CN_U8) | DT(CN_BOOL));
            break;
        case CN__FAMILY_LOGIC: k[op] = cpu_logical; break; /* bool only, by kind */
        default: break;                                    /* below, op by op */
        }
    }
    k[CN_OP_WHERE] = cpu_where;
    k[CN_OP_CAST] = k[CN_OP_COPY] = cpu_cast;
    k[CN_OP_FILL] = cpu_fill;
    k[CN_OP_RAND_UNIFORM] = k[CN_OP_RAND_NORMAL] = cpu_rand;
    /* where, cast, copy, fill, the random ops: every dtype they accept */
    const cn_op reductions[] = {CN_OP_SUM,    CN_OP_MEAN,   CN_OP_MAX, CN_OP_MIN,
                                CN_OP_PROD,   CN_OP_ARGMAX, CN_OP_ARGMIN, CN_OP_VAR,
                                CN_OP_LOGSUMEXP};
    for (size_t i = 0; i < sizeof reductions / sizeof *reductions; i++)
        k[reductions[i]] = cpu_reduce;
    dt[CN_OP_SUM] = dt[CN_OP_PROD] = FI | DT(CN_U8);
    dt[CN_OP_MAX] = dt[CN_OP_MIN] = dt[CN_OP_ARGMAX] = dt[CN_OP_ARGMIN] =
        FI | DT(CN_U8) | DT(CN_BOOL);
    dt[CN_OP_MEAN] = dt[CN_OP_VAR] = dt[CN_OP_LOGSUMEXP] = F;
    k[CN_OP_SOFTMAX] = k[CN_OP_LOG_SOFTMAX] = cpu_softmax;
    k[CN_OP_MATMUL] = cpu_matmul;
    dt[CN_OP_SOFTMAX] = dt[CN_OP_LOG_SOFTMAX] = F;
    dt[CN_OP_MATMUL] = F | DT(CN_I32) | DT(CN_I64); /* ints: matmul.c's own loop */
    k[CN_OP_GATHER] = cpu_gather;
    k[CN_OP_SCATTER_ADD] = cpu_scatter_add;
    k[CN_OP_INDEX_SELECT] = cpu_index_select;
    k[CN_OP_ONE_HOT] = cpu_one_hot;
    dt[CN_OP_SCATTER_ADD] = FI;
    /* gather, index_select (by element size), one_hot (an index of any int dtype): all */
    k[CN_OP_CONV2D] = k[CN_OP_CONV2D_RELU] = k[CN_OP_CONV2D_MAX_POOL2D] = cpu_conv2d;
    k[CN_OP_MAX_POOL2D_BACKWARD_INDEX] = cpu_max_pool2d_backward_index;
    k[CN_OP_MAX_POOL2D] = k[CN_OP_AVG_POOL2D] = cpu_pool2d;
    k[CN_OP_CONV2D_BACKWARD_INPUT] = cpu_conv2d_backward_input;
    k[CN_OP_CONV2D_BACKWARD_WEIGHT] = cpu_conv2d_backward_weight;
    k[CN_OP_MAX_POOL2D_BACKWARD] = k[CN_OP_AVG_POOL2D_BACKWARD] = cpu_pool2d_backward;
    dt[CN_OP_CONV2D] = dt[CN_OP_CONV2D_RELU] = dt[CN_OP_CONV2D_MAX_POOL2D] = F;
    dt[CN_OP_MAX_POOL2D] = dt[CN_OP_AVG_POOL2D] = dt[CN_OP_MAX_POOL2D_BACKWARD_INDEX] = F;
    dt[CN_OP_CONV2D_BACKWARD_INPUT] = dt[CN_OP_CONV2D_BACKWARD_WEIGHT] = F;
    dt[CN_OP_MAX_POOL2D_BACKWARD] = dt[CN_OP_AVG_POOL2D_BACKWARD] = F;
    k[CN_OP_CONV2D_MAX_POOL2D_BACKWARD] = cpu_conv2d_max_pool2d_backward;
    dt[CN_OP_CONV2D_MAX_POOL2D_BACKWARD] = F;
    /* convolutions of issue 16 */
    k[CN_OP_CONV_TRANSPOSE2D] = k[CN_OP_CONV_TRANSPOSE1D] = cpu_conv_transpose2d;
    k[CN_OP_CONV1D] = cpu_conv1d;
    dt[CN_OP_CONV_TRANSPOSE2D] = dt[CN_OP_CONV_TRANSPOSE1D] = dt[CN_OP_CONV1D] = F;
    k[CN_OP_CONV3D] = k[CN_OP_CONV_TRANSPOSE3D] = k[CN_OP_CONV3D_BACKWARD_WEIGHT] = cpu_conv3d;
    dt[CN_OP_CONV3D] = dt[CN_OP_CONV_TRANSPOSE3D] = dt[CN_OP_CONV3D_BACKWARD_WEIGHT] = F;
    k[CN_OP_SGD_STEP] = cpu_sgd_step;
    dt[CN_OP_SGD_STEP] = F;
    k[CN_OP_ADAMW_STEP] = cpu_adamw_step;
    dt[CN_OP_ADAMW_STEP] = F;
    k[CN_OP_LINEAR] = cpu_linear;
    dt[CN_OP_LINEAR] = F;
    k[CN_OP_LINEAR_GELU] = cpu_linear_gelu;
    dt[CN_OP_LINEAR_GELU] = F;
    k[CN_OP_LINEAR_ADD] = cpu_linear_add;
    dt[CN_OP_LINEAR_ADD] = F;
    k[CN_OP_ACTIVATION_BACKWARD] = cpu_activation_backward;
    dt[CN_OP_ACTIVATION_BACKWARD] = F;
    k[CN_OP_SOFTMAX_BACKWARD] = cpu_softmax_backward;
    dt[CN_OP_SOFTMAX_BACKWARD] = F;
    /* scans and sorts: float and int; any / all: every dtype but the half floats */
    const cn_op scans[] = {CN_OP_CUMSUM, CN_OP_CUMPROD, CN_OP_CUMMAX, CN_OP_CUMMIN, CN_OP_SORT,
                           CN_OP_ANY,    CN_OP_ALL};
    for (size_t i = 0; i < sizeof scans / sizeof *scans; i++)
        k[scans[i]] = cpu_scan, dt[scans[i]] = FI | DT(CN_U8);
    dt[CN_OP_ANY] = dt[CN_OP_ALL] = FI | DT(CN_U8) | DT(CN_BOOL);
    k[CN_OP_CUMPROD_BACKWARD] = cpu_cumprod_backward;
    dt[CN_OP_CUMPROD_BACKWARD] = F;
    /* indexing (issue 16): data movement by element size, every dtype, except masked_fill (its
     * value is converted: no f16/bf16) and index_add (adds: f32 f64 i32 i64) */
    k[CN_OP_MASKED_FILL] = cpu_masked_fill;
    dt[CN_OP_MASKED_FILL] = FI | DT(CN_U8) | DT(CN_BOOL);
    k[CN_OP_TRIL] = k[CN_OP_TRIU] = cpu_triangle;
    k[CN_OP_FLIP] = cpu_flip;
    k[CN_OP_REPEAT] = cpu_repeat;
    k[CN_OP_SCATTER] = cpu_scatter;
    k[CN_OP_SLICE_ASSIGN] = cpu_slice_assign;
    k[CN_OP_INDEX_COPY] = k[CN_OP_INDEX_ADD] = cpu_index_put;
    dt[CN_OP_INDEX_ADD] = FI;
    k[CN_OP_UNFOLD] = cpu_unfold;
    k[CN_OP_NONZERO] = cpu_nonzero;
    k[CN_OP_MASKED_SELECT] = cpu_masked_select;
    k[CN_OP_GATHER_ND] = cpu_gather_nd;
    k[CN_OP_SCATTER_ND] = cpu_scatter_nd; /* reductions other than assign: f32 f64 i32 i64 */
    /* attention and ctc_loss (issue 16): f32 and f64 */
    k[CN_OP_SDPA] = cpu_sdpa;
    k[CN_OP_SDPA_BACKWARD] = cpu_sdpa_backward;
    dt[CN_OP_SDPA] = dt[CN_OP_SDPA_BACKWARD] = F;
    k[CN_OP_CTC_LOSS] = cpu_ctc_loss;
    k[CN_OP_CTC_LOSS_BACKWARD] = cpu_ctc_loss_backward;
    dt[CN_OP_CTC_LOSS] = dt[CN_OP_CTC_LOSS_BACKWARD] = F;
    /* resampling (issue 16): f32 and f64 */
    k[CN_OP_INTERPOLATE] = k[CN_OP_INTERPOLATE_BACKWARD] = cpu_interpolate;
    dt[CN_OP_INTERPOLATE] = dt[CN_OP_INTERPOLATE_BACKWARD] = F;
    k[CN_OP_GRID_SAMPLE_2D] = k[CN_OP_GRID_SAMPLE_2D_BACKWARD] = cpu_grid_sample_2d;
    dt[CN_OP_GRID_SAMPLE_2D] = dt[CN_OP_GRID_SAMPLE_2D_BACKWARD] = F;
    /* padding and pooling (issue 16): pad converts its constant (no f16/bf16), the rest adds */
    k[CN_OP_PAD] = cpu_pad;
    dt[CN_OP_PAD] = FI | DT(CN_U8) | DT(CN_BOOL);
    k[CN_OP_PAD_BACKWARD] = cpu_pad_backward;
    k[CN_OP_ADAPTIVE_AVG_POOL] = k[CN_OP_ADAPTIVE_AVG_POOL_BACKWARD] = cpu_adaptive_avg_pool;
    dt[CN_OP_PAD_BACKWARD] = dt[CN_OP_ADAPTIVE_AVG_POOL] = F;
    dt[CN_OP_ADAPTIVE_AVG_POOL_BACKWARD] = F;
    k[CN_OP_MAX_POOL2D_WITH_INDICES] = cpu_max_pool2d_with_indices;
    dt[CN_OP_MAX_POOL2D_WITH_INDICES] = F;
    k[CN_OP_UNFOLD4D] = k[CN_OP_FOLD4D] = cpu_fold4d;
    dt[CN_OP_UNFOLD4D] = dt[CN_OP_FOLD4D] = F;
    k[CN_OP_DEFORM_CONV2D] = k[CN_OP_DEFORM_CONV2D_BACKWARD] = cpu_deform_conv2d;
    dt[CN_OP_DEFORM_CONV2D] = dt[CN_OP_DEFORM_CONV2D_BACKWARD] = F;
    /* the real FFT (issue 16): f32 through kissfft, f64 by a direct DFT in double (fft.c) */
    k[CN_OP_RFFT] = k[CN_OP_IRFFT] = cpu_fft;
    dt[CN_OP_RFFT] = dt[CN_OP_IRFFT] = F;
    /* the fused normalisations (issue 17): f32 and f64 */
    k[CN_OP_LAYER_NORM] = k[CN_OP_RMS_NORM] = cpu_norm;
    k[CN_OP_LAYER_NORM_BACKWARD] = k[CN_OP_RMS_NORM_BACKWARD] = cpu_norm_backward;
    dt[CN_OP_LAYER_NORM] = dt[CN_OP_RMS_NORM] = F;
    dt[CN_OP_LAYER_NORM_BACKWARD] = dt[CN_OP_RMS_NORM_BACKWARD] = F;
    /* the quantized linear (issue 19): f32 activations (quant.c) */
    k[CN_OP_QUANT_LINEAR] = cpu_quant_linear;
    dt[CN_OP_QUANT_LINEAR] = DT(CN_F32);
}
