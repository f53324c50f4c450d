/* cinder: a tensor's values as text, as PyTorch's repr(tensor) writes them.
 *
 *     tensor([[1., 2.],
 *             [3., 4.]])
 *
 * The text follows torch/_tensor_str.py with its default print options, character for character:
 * precision 4; one width for all values, right-aligned; floats that are all whole numbers written
 * "3."; scientific notation ("1.0000e-05") when, among the non-zero finite values, the largest
 * magnitude over the smallest exceeds 1000, or the largest exceeds 1e8, or (for floats that are
 * not all whole) the smallest is below 1e-4; "nan", "inf", "-inf"; ints as integers, bools as
 * True/False; lines of at most 80 columns. A tensor of more than 1000 elements is summarised: each
 * dim longer than 6 shows its first and last 3 entries with "..." between them (and the notation
 * and width come from the entries shown). Zero-element tensors print "tensor([])" (with
 * size=(...) unless 1-D), 0-d tensors "tensor(3.5000)".
 *
 * Suffixes, in PyTorch's order and line-breaking, with cinder's names:
 *   device='cuda:0'        a tensor not on the CPU (the concrete device: "cuda:0", or a registered
 *                          backend's "<name>:<index>")
 *   size=(2, 0)            a zero-element tensor that is not 1-D
 *   dtype=f64              any dtype but f32, and also i64 and bool for zero-element tensors
 *                          (PyTorch: torch.float64 -> f64, float16 -> f16, bfloat16 -> bf16,
 *                          int32 -> i32, int64 -> i64, uint8 -> u8, bool -> bool)
 *   requires_grad=True     a tracked tensor (cn_requires_grad). PyTorch writes grad_fn=<...>
 *                          instead for a non-leaf; cinder writes requires_grad=True for both.
 *
 * Values are read with public ops (cn_slice, cn_cat, cn_cast, cn_read), so any device and any
 * layout prints the same way; a tracked tensor is read through an untracked view, recording
 * nothing. Intermediate tensors are released before the call returns. */
#ifndef CINDER_FORMAT_H
#define CINDER_FORMAT_H

#include "cinder/api.h"

#include <stddef.h>
#include <stdio.h>

#include "cinder/error.h"
#include "cinder/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the text of t into buf with snprintf's contract: at most size - 1 characters and a NUL
 * (when size > 0), and returns the length of the whole text (without the NUL), so
 * cn_format(t, NULL, 0) + 1 is the size that holds it. Returns -1 with the error set when t is
 * NULL (the NULL-argument rule: an earlier error is kept), when buf is NULL with size > 0
 * (CN_ERR_NULL_ARG), or when reading the values fails (that call's error). */
CN_API int cn_format(const cn_tensor *t, char *buf, size_t size);

/* Writes the text of t and a newline to f, like Python's print(t). CN_OK, or the error (NULL t or
 * f: CN_ERR_NULL_ARG; a failed write: CN_ERR_IO). */
CN_API cn_status cn_print(const cn_tensor *t, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
