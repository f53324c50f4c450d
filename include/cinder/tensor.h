/* cinder: the tensor type, its metadata, creation, views and reading back.
 *
 * A cn_tensor is opaque and reference counted. Every function that returns a cn_tensor* hands the
 * caller one reference (release it with cn_release, or let a scope do it: see memory.h). Views
 * (reshape, transpose, slice, ...) share storage with their source and never copy.
 *
 * Functions returning cn_tensor* return NULL on failure and set the error (error.h). A NULL tensor
 * argument makes them return NULL and keep the earlier error.
 *
 * Threads. cinder may be called from any number of threads at once.
 *   - Shared: a tensor may be read by several threads at once (as an op's input, by cn_read, by
 *     the accessors), and retained and released from any thread: reference counts are atomic, and
 *     whichever thread drops the last reference frees the tensor. Writing a storage in place (the
 *     ops ending in `_`, cn_copy_, an optimizer's step) while another thread reads or writes it
 *     is a data race that the caller must serialise, as is changing a tensor's own state
 *     (cn_require_grad, cn_retain_grad) while another thread uses it.
 *   - Per thread: the last error (error.h), scopes (memory.h), grad mode and no-grad
 *     (autodiff.h), and cinder's caches. A tensor made while a scope is open is owned by that
 *     thread's scope: other threads may use it while the scope is open, and one that must keep it
 *     takes its own reference (cn_retain) before the scope ends; only the owning thread may
 *     cn_keep it or drop the scope's reference (debug builds stop the program otherwise).
 *   - Autodiff: threads may record ops on tracked tensors they share (a shared parameter). A
 *     backward walks and marks every node of its graph, its leaves included, so two cn_backward
 *     calls whose graphs share a node (e.g. the same parameters) must not run at once; graphs that
 *     share nothing (two models, one per thread) are differentiated in parallel. A cn_grads, a
 *     module (nn.h) and an optimizer are used by one thread at a time.
 *   - Registries: cn_backend_register, cn_backend_get/cn_backend_find (backend.h), cn_ext_define,
 *     cn_ext_find, cn_ext_register_kernel and cn_ext_register_backward (extension.h) may be
 *     called from any thread, also while other threads run ops; a kernel or backward registered
 *     while another thread calls the op is used by that call or not at all. A backend's functions
 *     (its device_count, memory functions and kernels) are called from every thread that runs ops
 *     on it, concurrently, and must allow that.
 *   - A cn_generator (below) is a plain value that every draw advances: give each thread its own
 *     (e.g. cn_generator_new(seed + thread)), or serialise the draws.
 *   - The CPU backend's thread pool is shared: cn_cpu_parallel_for may be called from any thread;
 *     when the pool is busy with another caller's job, a call runs its ranges on its own thread.
 *   Debug and sanitizer builds stop the program, with a message naming the tensor and the call,
 *   when a released tensor is used or released again (scripts/tsan.sh checks the threaded paths
 *   under ThreadSanitizer). */
#ifndef CINDER_TENSOR_H
#define CINDER_TENSOR_H

#include "cinder/api.h"

#include <stddef.h>
#include <stdint.h>

#include "cinder/device.h"
#include "cinder/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CN_MAX_DIMS 8

typedef enum cn_dtype {
    CN_F32 = 0,
    CN_F64 = 1,
    CN_F16 = 2,
    CN_BF16 = 3,
    CN_I32 = 4,
    CN_I64 = 5,
    CN_U8 = 6,
    CN_BOOL = 7,
    /* Quantized dtypes (kind CN_KIND_QUANTIZED; made only by cn_quantize, read back only by
     * cn_dequantize; the schemes, layout and rules are in cinder/quant.h). */
    CN_Q8_TENSOR = 8,  /* symmetric int8, one f32 scale for the whole tensor */
    CN_Q8_CHANNEL = 9, /* symmetric int8, one f32 scale per index of dim 0 (output channel) */
    CN_Q8_BLOCK = 10,  /* ggml's Q8_0: int8, one f16 scale per block of 32 along the last dim */
    CN_Q4_BLOCK = 11,  /* ggml's Q4_0: 4-bit, one f16 scale per block of 32 along the last dim */
    CN_DTYPE_COUNT
} cn_dtype;

/* The kind of a tensor decides which ops accept it. CN_KIND_QUANTIZED is the kind of the
 * quantized dtypes (cinder/quant.h): only the quantized calls take it; every other op refuses it
 * with CN_ERR_KIND, naming cn_dequantize as the way out. */
typedef enum cn_kind {
    CN_KIND_FLOAT = 0,
    CN_KIND_INT = 1,
    CN_KIND_BOOL = 2,
    CN_KIND_QUANTIZED = 3,
    CN_KIND_COUNT
} cn_kind;

typedef struct cn_tensor cn_tensor;

/* ---- dtypes ------------------------------------------------------------------------------- */

/* bytes per element; 0 for an invalid dtype and for the quantized (packed) dtypes */
CN_API size_t cn_dtype_size(cn_dtype dt);
CN_API const char *cn_dtype_name(cn_dtype dt);  /* "f32", "i64", ...; "invalid" otherwise */
/* float for f32/f64/f16/bf16, int, bool, quantized for CN_Q8_* and CN_Q4_* */
CN_API cn_kind cn_dtype_kind(cn_dtype dt);

/* ---- references and metadata ---------------------------------------------------------------- */

CN_API cn_tensor *cn_retain(cn_tensor *t);      /* adds a reference; returns t (NULL-safe) */
CN_API void cn_release(cn_tensor *t);           /* drops a reference; frees at zero (NULL-safe) */

CN_API int cn_ndim(const cn_tensor *t);
CN_API const int64_t *cn_shape(const cn_tensor *t);    /* ndim entries; valid while t lives */
CN_API const int64_t *cn_strides(const cn_tensor *t);  /* in elements; valid while t lives */
CN_API int64_t cn_numel(const cn_tensor *t);
CN_API cn_dtype cn_dtype_of(const cn_tensor *t);
CN_API cn_kind cn_kind_of(const cn_tensor *t);
CN_API cn_device cn_device_of(const cn_tensor *t);
CN_API int cn_is_contiguous(const cn_tensor *t);       /* row-major dense */

/* Writes "[2, 3] f32 cpu:0" into buf; returns buf. (The values: cn_format, cinder/format.h.) */
CN_API const char *cn_tensor_str(const cn_tensor *t, char *buf, size_t size);

/* ---- creation ------------------------------------------------------------------------------- */

/* A tensor of `shape` (ndim entries, 0 <= ndim <= CN_MAX_DIMS) initialised from host memory laid
 * out row-major in `dtype`. ndim = 0 makes a scalar. */
CN_API cn_tensor *cn_from_data(const void *data, const int64_t *shape, int ndim, cn_dtype dtype,
                        cn_device device);
CN_API cn_tensor *cn_empty(const int64_t *shape, int ndim, cn_dtype dtype, cn_device device);
CN_API cn_tensor *cn_zeros(const int64_t *shape, int ndim, cn_dtype dtype, cn_device device);
CN_API cn_tensor *cn_ones(const int64_t *shape, int ndim, cn_dtype dtype, cn_device device);
/* Every element `value`, converted to dtype. For an integer dtype the value is truncated toward
 * zero and must then lie in the dtype's range: NaN, infinities and values out of range are
 * CN_ERR_INVALID_ARG, as in PyTorch (float and bool dtypes take any value; bool is value != 0). */
CN_API cn_tensor *cn_full(const int64_t *shape, int ndim, double value, cn_dtype dtype, cn_device device);
/* [start, end) in steps of `step` (non-zero, all finite), like numpy.arange. For an integer
 * dtype the first and the last value must fit the dtype as cn_full's value does. */
CN_API cn_tensor *cn_arange(double start, double end, double step, cn_dtype dtype, cn_device device);
/* An n x m matrix with ones on the diagonal. */
CN_API cn_tensor *cn_eye(int64_t n, int64_t m, cn_dtype dtype, cn_device device);

/* A counter-based random generator (Philox 4x32-10). Each random call consumes numel counters
 * and advances `offset`, so the stream depends only on (seed, offset): every backend produces
 * bit-identical numbers for the same generator state. */
typedef struct cn_generator {
    uint64_t seed;
    uint64_t offset;
} cn_generator;

CN_API cn_generator cn_generator_new(uint64_t seed);
/* Uniform in [low, high). Float dtypes only. */
CN_API cn_tensor *cn_rand_uniform(cn_generator *gen, const int64_t *shape, int ndim, double low,
                           double high, cn_dtype dtype, cn_device device);
/* Normal with the given mean and standard deviation (Box-Muller). Float dtypes only. */
CN_API cn_tensor *cn_rand_normal(cn_generator *gen, const int64_t *shape, int ndim, double mean,
                          double std, cn_dtype dtype, cn_device device);

/* ---- views (no copy) ------------------------------------------------------------------------ */

/* New shape with the same number of elements; one entry may be -1 (inferred). A view when the
 * strides allow it, otherwise a contiguous copy (like torch.reshape). */
CN_API cn_tensor *cn_reshape(cn_tensor *t, const int64_t *shape, int ndim);
CN_API cn_tensor *cn_transpose(cn_tensor *t, int dim0, int dim1);
/* perm is a permutation of 0..ndim-1. */
CN_API cn_tensor *cn_permute(cn_tensor *t, const int *perm);
/* Elements start, start+step, ... below end along dim (step > 0). Negative start/end count from
 * the end; out-of-range bounds are clamped, as in Python slicing: any int64 bounds and positive
 * step are accepted (a step past the end keeps the first element). A stride that would pass int64 (only
 * an empty tensor with huge sizes can ask for one) is CN_ERR_OVERFLOW. */
CN_API cn_tensor *cn_slice(cn_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
/* Broadcast to `shape` (numpy rules; new dims on the left; size-1 dims stretch with stride 0).
 * The result's elements share memory, so it cannot be written in place (cn_copy_ refuses it). */
CN_API cn_tensor *cn_expand(cn_tensor *t, const int64_t *shape, int ndim);
/* Removes dim (which must have size 1). */
CN_API cn_tensor *cn_squeeze(cn_tensor *t, int dim);
/* Inserts a size-1 dim at position dim (0..ndim; negative counts from the end). */
CN_API cn_tensor *cn_unsqueeze(cn_tensor *t, int dim);
/* t itself (a new reference) when row-major dense, otherwise a dense copy. */
CN_API cn_tensor *cn_contiguous(cn_tensor *t);

/* ---- moving data ---------------------------------------------------------------------------- */

/* Copies the elements of t, in row-major order whatever its strides, into host memory `dst` of
 * exactly numel * dtype-size bytes (CN_ERR_BUFFER otherwise). */
CN_API cn_status cn_read(const cn_tensor *t, void *dst, size_t nbytes);

/* The data of t on `device`: a copy on another backend or device index; on the same memory seen
 * through or without the autodiff layer (cn_cpu() <-> cn_autodiff(cn_cpu())), a new untracked
 * tensor sharing t's data; on t's own device, a new reference-holding view of t. */
CN_API cn_tensor *cn_to_device(cn_tensor *t, cn_device device);

#ifdef __cplusplus
}
#endif
#endif
