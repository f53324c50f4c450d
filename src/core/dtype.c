/* dtype facts: sizes, names, kinds. */
#include "cinder/tensor.h"

static const struct {
    const char *name;
    size_t size;
    cn_kind kind;
} dtype_info[CN_DTYPE_COUNT] = {
    [CN_F32] = {"f32", 4, CN_KIND_FLOAT}, [CN_F64] = {"f64", 8, CN_KIND_FLOAT},
    [CN_F16] = {"f16", 2, CN_KIND_FLOAT}, [CN_BF16] = {"bf16", 2, CN_KIND_FLOAT},
    [CN_I32] = {"i32", 4, CN_KIND_INT},   [CN_I64] = {"i64", 8, CN_KIND_INT},
    [CN_U8] = {"u8", 1, CN_KIND_INT},     [CN_BOOL] = {"bool", 1, CN_KIND_BOOL},
};

static int valid(cn_dtype dt) { return (int)dt >= 0 && dt < CN_DTYPE_COUNT; }

size_t cn_dtype_size(cn_dtype dt) { return valid(dt) ? dtype_info[dt].size : 0; }

const char *cn_dtype_name(cn_dtype dt) { return valid(dt) ? dtype_info[dt].name : "invalid"; }

cn_kind cn_dtype_kind(cn_dtype dt) { return valid(dt) ? dtype_info[dt].kind : CN_KIND_COUNT; }
