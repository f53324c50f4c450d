/* cinder: quantized tensors (int8 and 4-bit weights) and the quantized linear.
 *
 * The schemes are dtypes of kind CN_KIND_QUANTIZED (cinder/tensor.h):
 *   CN_Q8_TENSOR   symmetric int8, one f32 scale for the tensor: scale = amax / 127 (f32),
 *                  q = nearbyint(x * (1 / scale)) (ties to even, as PyTorch's quantize_per_tensor
 *                  rounds), clamped to [-127, 127].
 *   CN_Q8_CHANNEL  the same with one f32 scale per index of dim 0 (the output channel of a
 *                  [N, K] weight; of a [O, C, kh, kw] conv weight); a 0-d tensor has one scale.
 *   CN_Q8_BLOCK    ggml's Q8_0: one scale per block of 32 consecutive elements along the last
 *                  dim (which must be a multiple of 32): d = amax / 127 (f32), q = roundf(x / d)
 *                  computed as x * (1 / d) (ties away from zero, as ggml's reference
 *                  quantize_row_q8_0_ref); d is stored as f16 (IEEE half, rounded to nearest
 *                  even) exactly as ggml stores it, so the bits match ggml's.
 *   CN_Q4_BLOCK    ggml's Q4_0: per block of 32, m = the element of largest magnitude (with its
 *                  sign), d = m / -8, q = min(15, (int)(x * (1 / d) + 8.5)) - 8 (so q is in
 *                  -8..7; as ggml's quantize_row_q4_0_ref), d stored as f16.
 *   All-zero groups get scale 0 and q = 0. Dequantized value: q * scale (the stored scale).
 *   Error: |x - q * scale| <= scale / 2 for the q8 schemes with f32 scales; the block schemes
 *   quantize with the f32 d and store it rounded to f16 (as ggml), which adds at most
 *   |q| * |d - f16(d)| <= 127 * 2^-11 * d (q8) or 8 * 2^-11 * d (q4); for Q4_0 the element of
 *   largest magnitude maps to q = -8 exactly.
 *
 * Storage. A quantized tensor's storage, on its device, holds the packed values (int8 one per
 * byte; for q4_block two per byte, element e in the low nibble of byte e/2 when e is even and in
 * the high nibble when odd, as q + 8), followed by the scales (16-byte aligned), scale e / G for
 * storage element e where G is the tensor's group (numel for q8_tensor, numel / shape[0] for
 * q8_channel, 32 for the blocks). The shape is the logical shape; cn_numel counts logical
 * elements; cn_dtype_size is 0 (packed). cn_tensor_str names the scheme ("[4, 64] q8_block
 * cpu:0"); cn_format / cn_print show the dequantized values with the dtype.
 *
 * Views keep groups whole: for the block dtypes a view (cn_reshape, cn_slice, cn_transpose,
 * cn_permute, cn_squeeze, cn_unsqueeze, cn_expand) must keep the last dim contiguous (stride 1), a
 * multiple of 32 long and every other stride a multiple of 32 (reshapes that keep the last dim
 * and slices along outer dims do); anything else is CN_ERR_INVALID_ARG naming why. q8_tensor and
 * q8_channel take any view (a scale follows its element). A quantized tensor is never copied into
 * a new layout: cn_contiguous of a non-contiguous one and a reshape that would copy are
 * CN_ERR_INVALID_ARG (dequantize, reshape, quantize again). cn_to_device copies the whole storage
 * (bit-identical on any device). Safetensors files record quantized tensors as documented in
 * cinder/io.h (a reload is bit-identical).
 *
 * Every op that is not one of the calls below refuses a quantized input with CN_ERR_KIND, whose
 * message names cn_dequantize; cn_read refuses it the same way. A quantized tensor is never
 * tracked: cn_require_grad on it is CN_ERR_AUTODIFF_NONFLOAT ("only float tensors may use an
 * autodiff primitive"). Threads: as any tensor (cinder/tensor.h). */
#ifndef CINDER_QUANT_H
#define CINDER_QUANT_H

#include "cinder/api.h"
#include "cinder/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x (any float dtype, any layout, any device) quantized with `scheme` (CN_Q8_TENSOR,
 * CN_Q8_CHANNEL, CN_Q8_BLOCK or CN_Q4_BLOCK) into a new contiguous tensor of x's shape on x's
 * device (never tracked: on an autodiff device it is a constant). The scales are computed on the
 * host from x's values read as f32 (x is read back once, then the packed result written to the
 * device). Errors: NULL x keeps the earlier error; x not float is CN_ERR_KIND; a scheme that is
 * not quantized is CN_ERR_INVALID_ARG; for the block schemes a 0-d x or a last dim that is not a
 * multiple of 32 is CN_ERR_SHAPE; a non-finite element is CN_ERR_INVALID_ARG. */
CN_API cn_tensor *cn_quantize(cn_tensor *x, cn_dtype scheme);

/* The values of quantized q (q * scale, each rounded once to `dtype`, a float dtype) as a new
 * contiguous tensor of q's shape on q's device (untracked). Errors: q not quantized is
 * CN_ERR_KIND; dtype not float is CN_ERR_DTYPE. */
CN_API cn_tensor *cn_dequantize(cn_tensor *q, cn_dtype dtype);

/* The two parts of quantized q, contiguous, as new plain tensors on q's device (for files and
 * other runtimes): *values u8 holding the packed bytes (int8 two's complement for the q8 dtypes,
 * of q's shape; for q4_block two elements a byte, shape [.., K / 2], element 2j in the low
 * nibble as q + 8) and *scales (f32 [1] for q8_tensor, f32 [shape[0]] for q8_channel (a 0-d q:
 * [1]), f16 [.., K / 32] for the block dtypes). q must be contiguous (any view of a block dtype
 * is: its rows are whole blocks; a strided q8_tensor / q8_channel view is CN_ERR_INVALID_ARG).
 * On error nothing is returned (both NULL) and the error is set. */
CN_API cn_status cn_quant_parts(cn_tensor *q, cn_tensor **values, cn_tensor **scales);

/* The quantized tensor of dtype `scheme` and logical `shape` whose parts are values and scales
 * (as cn_quant_parts gives them: their dtypes and shapes must be exactly those), on values'
 * device: the inverse of cn_quant_parts, bit for bit. Errors: CN_ERR_INVALID_ARG for a scheme
 * that is not quantized, CN_ERR_DTYPE / CN_ERR_SHAPE for parts that do not fit. */
CN_API cn_tensor *cn_quant_from_parts(cn_tensor *values, cn_tensor *scales, cn_dtype scheme,
                                      const int64_t *shape, int ndim);

/* Where quantized q's elements and scales lie in its storage (for extension kernels, whose view
 * of a quantized input starts at the storage's first byte: cinder/extension.h): *offset the
 * storage element of q's first element, *group the storage elements per scale, *scales_at the
 * byte offset of the scales. Element e (offset + sum of index * stride) has the value
 * q(e) * scale(e / group), as the layout above says. CN_ERR_KIND when q is not quantized. */
CN_API cn_status cn_quant_layout(const cn_tensor *q, int64_t *offset, int64_t *group,
                                 int64_t *scales_at);

/* The quantized linear: out[.., n] = sum_k x[.., k] * W[n, k] + bias[n], for x f32 [.., K] and
 * wq quantized [N, K] (q8_tensor, q8_channel, q8_block or q4_block; for q8_channel the rows of
 * wq must be its channels, as for any view of an [N, K] weight that slices rows), bias f32 [N]
 * or NULL. Each row of x is quantized on the fly to int8 (symmetric, one scale a row for every
 * scheme: x_scale = the largest |x| of the row / 127, NaN aside; rounded to nearest, ties away
 * from zero), the products are summed in int32 (per block of 32 for the block weights, scaled by
 * the block's weight scale) and scaled to f32: the result differs from the exact product of x
 * and the dequantized weight by at most the activation quantization error,
 * x_scale / 2 * sum_k |W(n, k)| (tests/test_quant.c checks this bound, plus 1e-5 of
 * sum_k |x W|; against the double-precision product of the same int8 values the f32 arithmetic
 * adds at most 1e-5 of the sum of |terms|, about 1e-7 measured). CPU: AMX (amx-int8 tiles, for
 * the block weights from 6 rows of x), AVX-512 VNNI, AVX2 or portable C, chosen at run time
 * (CINDER_QUANT_ISA=amx|vnni|avx2|c forces a path no wider than the CPU has; AMX needs Linux
 * 5.16+, which grants the tile state to the process on first use), threaded over the CPU pool;
 * the result never depends on the number of threads (the paths agree to f32 rounding, exactly
 * for q8_tensor / q8_channel; on VNNI the block weights take a row kernel below 6 rows of x and
 * a tiled one from 6, which may differ in the last bits of a row; AMX (from 6 rows) and AVX2
 * (tiled from 4 rows) give the bits of VNNI's tiled kernel). The output, f32 [.., N], lives on
 * x's device.
 * On an autodiff device the result is differentiable with respect to x and bias only (the
 * weight is a constant, as for a frozen quantized base fine-tuned with adapters): dx = g @ W and
 * dbias = g summed over the rows, W the dequantized weight, the activations' int8 rounding
 * passed straight through (the straight-through estimator). Errors: a NULL x or wq keeps the
 * earlier error; x not f32 or bias not f32 is CN_ERR_DTYPE; wq not quantized is CN_ERR_KIND; shapes
 * that do not match (x's last dim vs K, bias vs N, wq not 2-D) are CN_ERR_SHAPE; tensors on
 * different devices are CN_ERR_DEVICE_MISMATCH; a wq view whose rows do not start blocks (or, for
 * q8_channel, are not its channels) is CN_ERR_INVALID_ARG. */
CN_API cn_tensor *cn_quant_linear(cn_tensor *x, cn_tensor *wq, cn_tensor *bias);

/* The CPU path cn_quant_linear takes now: "amx" (AMX tiles for the block weights from 6 rows,
 * AVX-512 VNNI otherwise), "vnni" (AVX-512 VNNI), "avx2" or "c" (portable): the widest the CPU
 * (and the kernel, for AMX) allows, or the narrower one CINDER_QUANT_ISA (vnni, avx2 or c) asks
 * for (read at each call). Static string; any thread. */
CN_API const char *cn_cpu_quant_isa(void);

#ifdef __cplusplus
}
#endif
#endif
