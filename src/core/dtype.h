/* dtype facts for the hot paths, inline: sizes and kinds of valid dtypes (every tensor's and
 * view's dtype is valid). The public cn_dtype_size and cn_dtype_kind add the range check. */
#ifndef CINDER_CORE_DTYPE_H
#define CINDER_CORE_DTYPE_H

#include <stddef.h>

#include "cinder/tensor.h"

/* Bytes per element of a valid dtype (every tensor's is): cn_dtype_size without the range check,
 * inline for the hot paths. */
static inline size_t cn__dtype_size(cn_dtype dt) {
    static const unsigned char bytes[CN_DTYPE_COUNT] = {
        [CN_F32] = 4, [CN_F64] = 8, [CN_F16] = 2, [CN_BF16] = 2,
        [CN_I32] = 4, [CN_I64] = 8, [CN_U8] = 1,  [CN_BOOL] = 1,
        /* quantized: packed data plus scales (core/quant.h), no bytes per element */
        [CN_Q8_TENSOR] = 0, [CN_Q8_CHANNEL] = 0, [CN_Q8_BLOCK] = 0, [CN_Q4_BLOCK] = 0,
    };
    return bytes[dt];
}

/* The kind of a valid dtype: cn_dtype_kind without the range check. */
static inline cn_kind cn__dtype_kind(cn_dtype dt) {
    static const unsigned char kinds[CN_DTYPE_COUNT] = {
        [CN_F32] = CN_KIND_FLOAT, [CN_F64] = CN_KIND_FLOAT, [CN_F16] = CN_KIND_FLOAT,
        [CN_BF16] = CN_KIND_FLOAT, [CN_I32] = CN_KIND_INT, [CN_I64] = CN_KIND_INT,
        [CN_U8] = CN_KIND_INT, [CN_BOOL] = CN_KIND_BOOL,
        [CN_Q8_TENSOR] = CN_KIND_QUANTIZED, [CN_Q8_CHANNEL] = CN_KIND_QUANTIZED,
        [CN_Q8_BLOCK] = CN_KIND_QUANTIZED, [CN_Q4_BLOCK] = CN_KIND_QUANTIZED,
    };
    return (cn_kind)kinds[dt];
}

#endif
