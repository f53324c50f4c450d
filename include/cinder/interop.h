/* cinder: sharing memory with other code, without copies.
 *
 * Three ways in and out of cinder's storage:
 * - cn_from_memory makes a tensor over memory the caller owns (a host buffer, or a device
 *   address of a backend), with a deleter that cinder calls when the last view of it dies;
 * - cn_data_ptr gives the address of a tensor's first element, for code that reads or writes
 *   the memory itself;
 * - cn_to_dlpack / cn_from_dlpack exchange tensors with any framework that speaks DLPack 0.6
 *   (NumPy, PyTorch, JAX, CuPy, TVM) through its DLManagedTensor.
 *
 * This header does not need <dlpack/dlpack.h>: struct DLManagedTensor is only declared here.
 * A program that fills or reads one includes <dlpack/dlpack.h> itself (Debian: libdlpack-dev).
 *
 * Memory shared this way is never copied, recycled or given to a backend's own free: the tensor
 * and every view of it (cn_slice, cn_transpose, ...) read and write the caller's memory, and the
 * memory is handed back through its deleter exactly once, when the last of them is released.
 * While it lives it counts in cn_live_tensors (its headers) and cn_live_bytes (the bytes its
 * shape and strides reach).
 *
 * Writing through such memory behind cinder's back (through cn_data_ptr, the caller's own
 * pointer, or another framework's view of an exported tensor) bypasses the version counters that
 * autodiff uses to detect that a value saved for backward was modified: do not write to memory
 * whose tensors are part of a graph that a cn_backward has still to run through.
 *
 * Threads: the functions here may be called from any thread. A deleter runs on the thread that
 * drops the last reference (cn_release, a scope's end, a DLPack consumer's deleter call). */
#ifndef CINDER_INTEROP_H
#define CINDER_INTEROP_H

#include "cinder/api.h"

#include <stdint.h>

#include "cinder/device.h"
#include "cinder/error.h"
#include "cinder/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Gives caller-owned memory back: called with the `data` and `ctx` that were passed to
 * cn_from_memory, exactly once, when the last tensor over the memory is released. */
typedef void (*cn_deleter)(void *data, void *ctx);

/* A tensor over `data`, memory the caller owns, without a copy. `data` is the address of
 * element [0, ..., 0], on `device`: a host address for the CPU, a device address for other
 * backends (cinder cannot check which it is). `shape` has ndim entries (0 <= ndim <= CN_MAX_DIMS,
 * sizes >= 0); `strides` (ndim entries, in elements, each >= 0; 0 repeats an element along that
 * dim) may be NULL for row-major contiguous. `data` must be aligned to the dtype's size and may
 * be NULL only when the tensor has no elements. `device` may be an autodiff device
 * (cn_autodiff(cn_cpu())): the tensor is then an untracked leaf there, like cn_zeros's.
 *
 * Ownership: with a deleter, the tensor owns the memory from the moment this call succeeds, and
 * deleter(data, ctx) runs once when the last tensor over it (this one and every view and
 * cn_to_device share of it) is released. With deleter = NULL the caller keeps the memory and
 * must keep it alive until then. On failure (NULL returned) the deleter is NOT called: the
 * memory is still the caller's, and nothing else was kept.
 *
 * Errors: CN_ERR_NULL_ARG (NULL data with elements, NULL shape with ndim > 0),
 * CN_ERR_INVALID_ARG (ndim out of range, a negative size or stride, misaligned data),
 * CN_ERR_OVERFLOW (the element count, or the extent the strides reach, overflows),
 * CN_ERR_DTYPE (not a cn_dtype), CN_ERR_UNKNOWN_DEVICE / CN_ERR_DEVICE_UNAVAILABLE (device),
 * CN_ERR_OUT_OF_MEMORY (the tensor's header). */
CN_API cn_tensor *cn_from_memory(void *data, const int64_t *shape, int ndim, const int64_t *strides,
                                 cn_dtype dtype, cn_device device, cn_deleter deleter, void *ctx);

/* The address of element [0, ..., 0] of t (its storage's memory plus its offset), on t's device:
 * a host address on the CPU, a device address on other backends. Any strides: read them with
 * cn_strides (in elements). For a tensor on an autodiff device it is the address of the
 * concrete data that the graph sees. Valid while t, or any other tensor over the same storage,
 * lives; ops never move a tensor's storage. Queued work of an asynchronous backend may still be
 * writing it: synchronize first (cn_cuda_synchronize). Writes through it are not seen by the
 * autodiff version counters (see the top of this header). NULL for a NULL t (the error is set as
 * for any NULL tensor argument); a tensor without elements may return any address, NULL too.
 * For a quantized tensor (cinder/quant.h) it is the start of its storage (packed values, then
 * scales); cn_to_dlpack refuses quantized tensors (CN_ERR_KIND: DLPack has no packed dtype). */
CN_API void *cn_data_ptr(const cn_tensor *t);

struct DLManagedTensor; /* <dlpack/dlpack.h>, DLPack 0.6 */

/* Exports t as a DLPack managed tensor that shares its memory (no copy). The result holds a
 * reference to t's storage, so t may be released before it; its own shape and strides arrays
 * (strides always set, in elements) live as long as it does. The consumer calls its deleter
 * exactly once (m->deleter(m)), which releases that reference and frees the struct; until then
 * it counts as one live tensor. dl_tensor.data is the start of t's storage and
 * dl_tensor.byte_offset the offset of t's first element in it, so data + byte_offset ==
 * cn_data_ptr(t).
 *
 * dtypes: f32/f64/f16 -> kDLFloat 32/64/16, bf16 -> kDLBfloat 16, i32/i64 -> kDLInt 32/64,
 * u8 -> kDLUInt 8, and bool -> kDLUInt 8 (DLPack 0.6 has no bool code; each byte is 0 or 1), so
 * a bool tensor comes back from cn_from_dlpack as u8. Devices: the CPU -> kDLCPU 0, the "cuda"
 * backend's device N -> kDLCUDA N; a tensor of any other backend fails with
 * CN_ERR_UNKNOWN_DEVICE. A tracked tensor (autodiff device) exports its concrete data: the
 * consumer sees plain memory, never the graph. Work queued on t's device is waited for before
 * the call returns. Returns NULL on failure (NULL t, unsupported device, CN_ERR_OUT_OF_MEMORY,
 * or the backend's error when synchronizing), holding nothing. */
CN_API struct DLManagedTensor *cn_to_dlpack(cn_tensor *t);

/* A tensor over the memory of a DLPack managed tensor, without a copy: the address of its element
 * [0, ..., 0] is dl_tensor.data + dl_tensor.byte_offset, with dl_tensor.strides (in elements,
 * each >= 0) or, when NULL, row-major contiguous. On success the tensor owns m: m->deleter(m)
 * (when not NULL) runs exactly once, when the last tensor over the memory is released; do not
 * use m afterwards. On failure (NULL returned) m->deleter is NOT called and m is still the
 * caller's, who must call m->deleter(m) to drop it.
 *
 * dtypes (lanes must be 1): kDLFloat 16/32/64, kDLBfloat 16, kDLInt 32/64, kDLUInt 8, and code 6
 * bits 8 (kDLBool of DLPack 0.8 and later) as bool. Devices: kDLCPU (device_id 0) -> the CPU,
 * kDLCUDA N -> "cuda:N" when this build has the CUDA backend; others fail with
 * CN_ERR_UNKNOWN_DEVICE. The tensor is on a concrete device; cn_to_device(t,
 * cn_autodiff(cn_device_of(t))) shares it with the autodiff layer. Other errors are those of
 * cn_from_memory, naming the dl_tensor field at fault. */
CN_API cn_tensor *cn_from_dlpack(struct DLManagedTensor *m);

#ifdef __cplusplus
}
#endif
#endif
