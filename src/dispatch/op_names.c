/* The user-facing name of every op: the one table messages and the catalogue use. */
#include "cinder/backend.h"

static const char *const op_names[CN_OP_COUNT] = {
    [CN_OP_NEG] = "neg", [CN_OP_ABS] = "abs", [CN_OP_RELU] = "relu", [CN_OP_EXP] = "exp",
    [CN_OP_LOG] = "log", [CN_OP_LOG1P] = "log1p", [CN_OP_SQRT] = "sqrt", [CN_OP_RSQRT] = "rsqrt",
    [CN_OP_SIN] = "sin", [CN_OP_COS] = "cos", [CN_OP_TANH] = "tanh", [CN_OP_SIGMOID] = "sigmoid",
    [CN_OP_SILU] = "silu", [CN_OP_GELU] = "gelu",
    [CN_OP_ADD_SCALAR] = "add_scalar", [CN_OP_MUL_SCALAR] = "mul_scalar",
    [CN_OP_POW_SCALAR] = "pow_scalar", [CN_OP_CLAMP] = "clamp",
    [CN_OP_ADD] = "add", [CN_OP_SUB] = "sub", [CN_OP_MUL] = "mul", [CN_OP_DIV] = "div",
    [CN_OP_POW] = "pow", [CN_OP_MAXIMUM] = "maximum", [CN_OP_MINIMUM] = "minimum",
    [CN_OP_EQ] = "eq", [CN_OP_NE] = "ne", [CN_OP_LT] = "lt", [CN_OP_LE] = "le", [CN_OP_GT] = "gt",
    [CN_OP_GE] = "ge", [CN_OP_LOGICAL_AND] = "logical_and", [CN_OP_LOGICAL_OR] = "logical_or",
    [CN_OP_LOGICAL_NOT] = "logical_not", [CN_OP_WHERE] = "where",
    [CN_OP_CAST] = "cast", [CN_OP_COPY] = "copy", [CN_OP_FILL] = "fill",
    [CN_OP_RAND_UNIFORM] = "rand_uniform", [CN_OP_RAND_NORMAL] = "rand_normal",
    [CN_OP_SUM] = "sum", [CN_OP_MEAN] = "mean", [CN_OP_MAX] = "max", [CN_OP_MIN] = "min",
    [CN_OP_PROD] = "prod", [CN_OP_ARGMAX] = "argmax", [CN_OP_ARGMIN] = "argmin",
    [CN_OP_VAR] = "var", [CN_OP_LOGSUMEXP] = "logsumexp", [CN_OP_SOFTMAX] = "softmax",
    [CN_OP_LOG_SOFTMAX] = "log_softmax",
    [CN_OP_MATMUL] = "matmul", [CN_OP_GATHER] = "gather", [CN_OP_SCATTER_ADD] = "scatter_add",
    [CN_OP_INDEX_SELECT] = "index_select", [CN_OP_ONE_HOT] = "one_hot",
    [CN_OP_CONV2D] = "conv2d", [CN_OP_MAX_POOL2D] = "max_pool2d",
    [CN_OP_AVG_POOL2D] = "avg_pool2d", [CN_OP_ERF] = "erf",
    [CN_OP_CONV2D_BACKWARD_INPUT] = "conv2d_backward_input",
    [CN_OP_CONV2D_BACKWARD_WEIGHT] = "conv2d_backward_weight",
    [CN_OP_MAX_POOL2D_BACKWARD] = "max_pool2d_backward",
    [CN_OP_AVG_POOL2D_BACKWARD] = "avg_pool2d_backward",
    [CN_OP_SGD_STEP] = "sgd_step",
};

const char *cn_op_name(cn_op op) {
    if ((int)op < 0 || op >= CN_OP_COUNT || !op_names[op]) return "unknown";
    return op_names[op];
}
