/* cinder: files in and out: checkpoints in the safetensors format, IDX data files (MNIST and
 * Fashion-MNIST), and a batch iterator with reproducible shuffling.
 *
 * Every function here reports a file that is missing, unreadable, truncated or corrupt with
 * CN_ERR_IO; its message names the file, the byte offset or field that is wrong, and a way out.
 * Tensors returned through `cn_tensor **` out-parameters are new references, like every other
 * tensor a call returns (memory.h: they belong to the innermost open scope). */
#ifndef CINDER_IO_H
#define CINDER_IO_H

#include "cinder/api.h"

#include <stdint.h>

#include "cinder/device.h"
#include "cinder/error.h"
#include "cinder/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- checkpoints: safetensors ------------------------------------------------------------- *
 *
 * The format of Hugging Face's `safetensors` library, which PyTorch and Hugging Face read and
 * write (safetensors.torch.save_file / load_file):
 *
 *     8 bytes      N, the header length, unsigned little-endian
 *     N bytes      a JSON object, UTF-8, padded with trailing spaces:
 *                    {"__metadata__": {"key": "value", ...},            (optional, str -> str)
 *                     "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
 *                     ...}
 *     the rest     the tensors' raw bytes, row-major, little-endian; [begin, end) is relative to
 *                  the first byte after the header, and the tensors cover it with neither holes
 *                  nor overlaps.
 *
 * dtypes: F32, F64, F16, BF16, I32, I64, U8 and BOOL (one byte, 0 or 1), cinder's eight.
 *
 * Quantized tensors (cinder/quant.h) are written as their two parts (cn_quant_parts): "<name>"
 * holds the packed values (U8; int8 two's complement for the q8 schemes, two 4-bit values a byte
 * for q4_block), "<name>.__qscales" the scales (F32 or F16), and the metadata key
 * "cinder.quant.<name>" the scheme ("q8_tensor", "q8_channel", "q8_block", "q4_block").
 * cn_safetensors_get("<name>") rebuilds the quantized tensor bit for bit (other readers see the
 * two plain tensors); a strided view that cn_quant_parts refuses cannot be saved. */

/* Writes tensors[i] under names[i] (i < n) to `path`. Tensors may live on any device (they are
 * read back with cn_read), have any strides, be 0-d or empty. The data follows in the order
 * given; the header carries {"__metadata__": {"format": "pt"}}, which Hugging Face's loaders
 * expect, and is padded with spaces so the data starts at a multiple of 8 bytes. The file is
 * written beside `path` under a temporary name and renamed over it at the end, so a failed save
 * leaves an existing checkpoint intact.
 * Errors: CN_ERR_NULL_ARG; CN_ERR_INVALID_ARG for n < 0, a name repeated, "__metadata__" used as
 * a name, or a name that is not UTF-8; CN_ERR_IO when the file cannot be written. */
CN_API cn_status cn_safetensors_save(const char *path, const char *const *names,
                              cn_tensor *const *tensors, int n);

/* cn_safetensors_save with metadata: the header's "__metadata__" holds "format": "pt" and then
 * keys[i]: values[i] (i < n_meta), strings that cn_safetensors_metadata reads back (and
 * safetensors.safe_open(...).metadata() in Python). The same file otherwise, written the same
 * atomic way. Errors: those of cn_safetensors_save, and CN_ERR_NULL_ARG for a NULL key or value,
 * CN_ERR_INVALID_ARG for n_meta < 0, a key given twice, the key "format" (written by the save
 * itself) or a key or value that is not UTF-8. n_meta = 0 is cn_safetensors_save. */
CN_API cn_status cn_safetensors_save_metadata(const char *path, const char *const *names,
                                       cn_tensor *const *tensors, int n,
                                       const char *const *keys, const char *const *values,
                                       int n_meta);

/* A loaded checkpoint: its tensors, by name, and its metadata. */
typedef struct cn_safetensors cn_safetensors;

/* Reads the whole checkpoint at `path` onto `device` and sets *out to a new handle (NULL on
 * failure). The file is validated before any tensor is made: the header length lies within the
 * file; the header is strict JSON; every dtype is known; shapes have at most CN_MAX_DIMS dims;
 * each tensor's byte range has numel * dtype-size bytes; the ranges tile the data section
 * exactly; no name repeats; BOOL bytes are 0 or 1. Any violation is CN_ERR_IO naming the file,
 * the byte offset (of the header or the file) and the field. */
CN_API cn_status cn_safetensors_load(const char *path, cn_device device, cn_safetensors **out);

/* Number of tensors in the checkpoint (0 for NULL). */
CN_API int cn_safetensors_count(const cn_safetensors *h);

/* The name of tensor i (0 <= i < count), in the order of the file's data section (for files
 * cinder wrote: the order they were saved in); NULL when out of range. Valid until
 * cn_safetensors_free. */
CN_API const char *cn_safetensors_name(const cn_safetensors *h, int i);

/* The tensor called `name`: a new tensor (owned by the caller, or by the open scope) sharing the
 * handle's data, which stays valid after cn_safetensors_free. NULL with CN_ERR_INVALID_ARG when
 * the checkpoint has no such tensor. */
CN_API cn_tensor *cn_safetensors_get(const cn_safetensors *h, const char *name);

/* The value of `key` in the header's "__metadata__", or NULL when absent (no error is set).
 * Valid until cn_safetensors_free. */
CN_API const char *cn_safetensors_metadata(const cn_safetensors *h, const char *key);

/* Releases the handle and its references (NULL-safe). Tensors obtained from cn_safetensors_get
 * stay valid. */
CN_API void cn_safetensors_free(cn_safetensors *h);

/* Copies the tensors called names[i] in `path` into the existing tensors[i] (i < n), in place,
 * under no-grad mode, so it works on tracked parameters; each is read straight onto its
 * destination's device. All or nothing: every name, shape and dtype is checked, and every named
 * tensor is read and its bytes checked, before the first destination is written, so any failure
 * leaves every destination unchanged: a name the file lacks is CN_ERR_INVALID_ARG, a shape that
 * differs CN_ERR_SHAPE, a dtype that differs CN_ERR_DTYPE, a bad file (a BOOL byte other than 0
 * or 1 in any named tensor included) CN_ERR_IO, no memory CN_ERR_OUT_OF_MEMORY. So the load holds
 * a second copy of the named tensors (their total size) until it returns. Tensors in the file
 * that are not named are ignored. Quantized tensors (cinder/quant.h) are not copied into: a
 * quantized tensors[i] is CN_ERR_INVALID_ARG, and a name that the file holds quantized is
 * CN_ERR_DTYPE; both messages say to read it with cn_safetensors_load + cn_safetensors_get
 * (then cn_dequantize it for a float tensor). */
CN_API cn_status cn_safetensors_load_into(const char *path, const char *const *names,
                                   cn_tensor *const *tensors, int n);

/* ---- data: IDX files ---------------------------------------------------------------------- *
 *
 * The IDX format of MNIST and Fashion-MNIST: bytes 0x00 0x00, a type byte, a dim count D, then D
 * big-endian u32 sizes, then the elements, row-major and big-endian. Files may be gzip-compressed
 * (read through zlib; a plain file is read as is). */

/* Reads the IDX file at `path` onto `device` and sets *out to a new tensor (NULL on failure).
 * Types: 0x08 unsigned byte -> CN_U8; 0x09 signed byte, 0x0B i16 and 0x0C i32 -> CN_I32 (cinder
 * has no i8 or i16); 0x0D f32 -> CN_F32; 0x0E f64 -> CN_F64. D must be 1..CN_MAX_DIMS.
 * CN_ERR_IO for a missing or unreadable file, a bad magic, type or dim count, data cut short
 * (naming the byte offset in the (decompressed) data where it ends and how many bytes were due),
 * bytes left after the data the dims describe, and corrupt gzip streams. */
CN_API cn_status cn_idx_load(const char *path, cn_device device, cn_tensor **out);

/* The directory that the Debian package dataset-fashion-mnist installs. */
#define CN_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

/* Loads Fashion-MNIST (or MNIST: same files) from `dir` (NULL: CN_FASHION_MNIST_DIR) onto
 * `device`: the files train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte
 * and t10k-labels-idx1-ubyte, each found with ".gz" first, then without.
 *   images: f32 [N, 784], pixel / 255 (so in [0, 1]); cn_reshape to [N, 1, 28, 28] for conv;
 *   labels: i64 [N], classes 0..9.
 * N is 60000 for train and 10000 for test. An output pointer may be NULL to skip that file. On
 * failure every output is set to NULL. A missing directory or file is CN_ERR_IO naming it and
 * how to install the data set (apt-get install dataset-fashion-mnist, or scripts/demo.sh);
 * files whose shapes are not [N, 28, 28] u8 and [N] u8, or whose counts differ, are CN_ERR_IO. */
CN_API cn_status cn_fashion_mnist_load(const char *dir, cn_device device, cn_tensor **train_x,
                                cn_tensor **train_y, cn_tensor **test_x, cn_tensor **test_y);

/* What cn_fashion_mnist_load_with does besides cn_fashion_mnist_load's work; all zero ({0}) is
 * cn_fashion_mnist_load. */
typedef struct cn_fashion_mnist_options {
    /* Keep only the first that many samples of each split (0, or more than the file holds:
     * all). Every file is still read to its end and checked. */
    int64_t train_limit, test_limit;
    /* std > 0: images are normalised, pixel p stored as (p / 255 + (float)-mean) *
     * (float)(1 / std), each step rounded to f32: bit for bit what cn_add_scalar(x, -mean) and
     * then cn_mul_scalar(x, 1 / std) make of the [0, 1] images. std = 0: [0, 1] as above. */
    double mean, std;
} cn_fashion_mnist_options;

/* cn_fashion_mnist_load with options (NULL: none), for loading a data set the size of memory:
 * the images are limited and normalised as they are decompressed, straight into their f32
 * tensor, so the load holds one copy of the images it keeps (and a 1 MB buffer), where loading
 * whole and then cn_slice, cn_add_scalar and cn_mul_scalar would hold three. (A file that does
 * not show its size, such as a gzip file of several members, is read whole first: its u8 bytes
 * are held too.) Errors as cn_fashion_mnist_load, and CN_ERR_INVALID_ARG for a negative limit,
 * a negative or non-finite std, or a non-finite mean. */
CN_API cn_status cn_fashion_mnist_load_with(const char *dir, cn_device device,
                                            const cn_fashion_mnist_options *opt,
                                            cn_tensor **train_x, cn_tensor **train_y,
                                            cn_tensor **test_x, cn_tensor **test_y);

/* ---- data: batches ------------------------------------------------------------------------ *
 *
 * An iterator over mini-batches of a data set held in two tensors whose first dim indexes the
 * samples. Batches are gathered with cn_index_select on dim 0, so they are new tensors (copies)
 * on the data's devices.
 *
 * The shuffle is reproducible: epoch e visits the samples in the order of a Fisher-Yates shuffle
 * of 0..N-1 driven by the counter-based generator Philox 4x32-10 (src/core/philox.h):
 *     order = [0, 1, ..., N-1]
 *     for i = N-1 down to 1:
 *         w = philox4x32_10(counter = {lo32(i), hi32(i), lo32(e), hi32(e)},
 *                           key = {lo32(seed), hi32(seed)})
 *         j = (w[0] | (uint64)w[1] << 32) mod (i + 1)
 *         swap order[i], order[j]
 * so the order depends only on (seed, epoch, N), on every machine. (The modulo's bias is below
 * N / 2^64.) Without shuffling the order is 0..N-1 every epoch. */
typedef struct cn_batches cn_batches;

/* An iterator over `images` and `labels` (labels may be NULL for unlabelled data; otherwise its
 * first dim must equal images') in batches of `batch` samples. shuffle: non-zero to shuffle
 * every epoch as above with `seed`. drop_last: non-zero to skip a last batch smaller than
 * `batch`. Keeps references to both tensors. Starts at epoch 0. Returns NULL on failure
 * (CN_ERR_NULL_ARG, CN_ERR_INVALID_ARG for batch < 1, CN_ERR_SHAPE for a 0-d tensor or differing
 * sample counts, CN_ERR_OUT_OF_MEMORY). */
CN_API cn_batches *cn_batches_new(cn_tensor *images, cn_tensor *labels, int64_t batch, int shuffle,
                           uint64_t seed, int drop_last);

/* A data-parallel share of the same epochs, as PyTorch's DistributedSampler gives it: each
 * epoch's order (shuffled as cn_batches_new shuffles it for the same seed, the same on every
 * rank) is dealt out in turn, so rank r of world gets the samples at positions r, r + world,
 * r + 2 world, ... of it, floor(N / world) of them (the last N mod world positions are left out
 * so that every rank has as many batches), in batches of `batch`. Batch i of all the ranks
 * together holds the samples of batch i of cn_batches_new with batch * world. rank 0 of world 1
 * is cn_batches_new. Errors: those of cn_batches_new, and CN_ERR_INVALID_ARG for world < 1 or a
 * rank outside 0 .. world - 1. */
CN_API cn_batches *cn_batches_new_sharded(cn_tensor *images, cn_tensor *labels, int64_t batch,
                                          int shuffle, uint64_t seed, int drop_last, int rank,
                                          int world);

/* The next batch of this epoch: sets *x (and *y, when labels were given and y is not NULL) to new
 * references and returns 1; returns 0 at the end of the epoch (setting them to NULL), and -1 with
 * the error set on failure. x: [k, ...images' other dims], y: [k, ...], k = batch except for the
 * last batch without drop_last. */
CN_API int cn_batches_next(cn_batches *b, cn_tensor **x, cn_tensor **y);

/* Starts epoch `epoch` from its first batch, reshuffling (when shuffling) with the epoch's order.
 * A typical loop: for (e = 0; e < epochs; e++) { cn_batches_reset(b, e); while (next(...)) ... } */
CN_API void cn_batches_reset(cn_batches *b, uint64_t epoch);

/* Starts epoch `epoch` at its batch `index` (0 <= index <= cn_batches_count(b)): the batches that
 * follow are the ones cn_batches_reset(b, epoch) and `index` calls of cn_batches_next would
 * leave, without gathering the skipped ones. For resuming an interrupted epoch. CN_ERR_NULL_ARG;
 * CN_ERR_INVALID_ARG for an index out of range, with b unchanged. */
CN_API cn_status cn_batches_seek(cn_batches *b, uint64_t epoch, int64_t index);

/* Batches per epoch: N / batch with drop_last, ceil(N / batch) without. 0 for NULL. */
CN_API int64_t cn_batches_count(const cn_batches *b);

/* Releases the iterator and its references (NULL-safe). */
CN_API void cn_batches_free(cn_batches *b);

#ifdef __cplusplus
}
#endif
#endif
