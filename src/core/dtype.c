/* dtype facts: sizes, names, kinds. */
#include "core/tensor_impl.h"

static const char *const names[CN_DTYPE_COUNT] = {
    [CN_F32] = "f32", [CN_F64] = "f64", [CN_F16] = "f16", [CN_BF16] = "bf16",
    [CN_I32] = "i32", [CN_I64] = "i64", [CN_U8] = "u8",   [CN_BOOL] = "bool",
    [CN_Q8_TENSOR] = "q8_tensor", [CN_Q8_CHANNEL] = "q8_channel", [CN_Q8_BLOCK] = "q8_block",
    [CN_Q4_BLOCK] = "q4_block",
};

static int valid(cn_dtype dt) { return (int)dt >= 0 && dt < CN_DTYPE_COUNT; }

size_t cn_dtype_size(cn_dtype dt) { return valid(dt) ? cn__dtype_size(dt) : 0; }

const char *cn_dtype_name(cn_dtype dt) { return valid(dt) ? names[dt] : "invalid"; }

cn_kind cn_dtype_kind(cn_dtype dt) { return valid(dt) ? cn__dtype_kind(dt) : CN_KIND_COUNT; }
