/* The op table (op_table.h): one row per op. Read top to bottom it is the list of everything
 * cinder computes; each row is all the router and the autodiff layer know of the op. */
#include "core/op_table.h"

#include "core/dtype.h"

#define F CN_KINDS_FLOAT
#define N CN_KINDS_NUMERIC
#define B CN_KINDS_BOOL
#define A CN_KINDS_ALL
#define I CN_KINDS_INT
#define IN0 CN__SAVE_IN(0)
#define IN1 CN__SAVE_IN(1)
#define IN2 CN__SAVE_IN(2)
#define OUT CN__SAVE_OUT

/* Elementwise rows: memory-bound, so checkpointing recomputes instead of keeping them. */
#define UNARY(nm, k, sv) {.name = nm, .family = CN__FAMILY_UNARY, .n_in = 1, .kinds = {k}, \
                          .out = CN__OUT_INPUT, .saves = (sv), .differentiable = 1,          \
                          .memory_bound = 1}
#define BINARY(nm, k, sv) {.name = nm, .family = CN__FAMILY_BINARY, .n_in = 2, .kinds = {k, k}, \
                           .out = CN__OUT_INPUT, .saves = (sv), .differentiable = 1,             \
                           .memory_bound = 1}
#define COMPARE(nm) {.name = nm, .family = CN__FAMILY_COMPARE, .n_in = 2, .kinds = {A, A}, \
                     .out = CN__OUT_BOOL}
/* float or int in, bool out (is_nan, is_inf) */
#define PREDICATE(nm) {.name = nm, .family = CN__FAMILY_UNARY, .n_in = 1, .kinds = {N}, \
                       .out = CN__OUT_BOOL}
#define BITWISE(nm) {.name = nm, .family = CN__FAMILY_BINARY, .n_in = 2, .kinds = {I, I}, \
                     .out = CN__OUT_INPUT}
#define BITWISE_SCALAR(nm) {.name = nm, .family = CN__FAMILY_SCALAR, .n_in = 1, .kinds = {I}, \
                            .out = CN__OUT_INPUT, .n_reals = 1}
/* a float activation with n real attributes, differentiated from its input */
#define ACTIVATION_SCALAR(nm, n) {.name = nm, .family = CN__FAMILY_SCALAR, .n_in = 1,          \
                                  .kinds = {F}, .out = CN__OUT_INPUT, .n_reals = (n),           \
                                  .saves = IN0, .differentiable = 1, .memory_bound = 1}
#define COMPARE_SCALAR(nm) {.name = nm, .family = CN__FAMILY_SCALAR, .n_in = 1, .kinds = {N}, \
                            .out = CN__OUT_BOOL, .n_reals = 1}
#define REDUCE(nm, k, sv) {.name = nm, .family = CN__FAMILY_REDUCE, .n_in = 1, .kinds = {k}, \
                           .out = CN__OUT_INPUT, .n_ints = 1, .saves = (sv), .differentiable = 1}

const cn__op_decl cn__op_table[CN__OP_ALL] = {
    /* elementwise unary */
    [CN_OP_NEG] = UNARY("neg", N, 0),
    [CN_OP_ABS] = UNARY("abs", N, IN0),
    [CN_OP_RELU] = UNARY("relu", N, OUT),
    [CN_OP_EXP] = UNARY("exp", F, OUT),
    [CN_OP_LOG] = UNARY("log", F, IN0),
    [CN_OP_LOG1P] = UNARY("log1p", F, IN0),
    [CN_OP_SQRT] = UNARY("sqrt", F, OUT),
    [CN_OP_RSQRT] = UNARY("rsqrt", F, OUT),
    [CN_OP_SIN] = UNARY("sin", F, IN0),
    [CN_OP_COS] = UNARY("cos", F, IN0),
    [CN_OP_TANH] = UNARY("tanh", F, OUT),
    [CN_OP_SIGMOID] = UNARY("sigmoid", F, OUT),
    [CN_OP_SILU] = UNARY("silu", F, IN0),
    [CN_OP_GELU] = {.name = "gelu", .family = CN__FAMILY_UNARY, .n_in = 1, .kinds = {F},
                    .out = CN__OUT_INPUT, .n_ints = 1, .saves = IN0, .differentiable = 1,
                    .memory_bound = 1},
    [CN_OP_ERF] = UNARY("erf", F, IN0),
    /* floor to sign: ints too (unchanged by the roundings, as in PyTorch); zero gradient */
    [CN_OP_FLOOR] = UNARY("floor", N, 0),
    [CN_OP_CEIL] = UNARY("ceil", N, 0),
    [CN_OP_ROUND] = UNARY("round", N, 0),
    [CN_OP_TRUNC] = UNARY("trunc", N, 0),
    [CN_OP_SIGN] = UNARY("sign", N, 0),
    [CN_OP_RECIPROCAL] = UNARY("reciprocal", F, OUT),
    [CN_OP_TAN] = UNARY("tan", F, OUT),
    [CN_OP_ASIN] = UNARY("asin", F, IN0),
    [CN_OP_ACOS] = UNARY("acos", F, IN0),
    [CN_OP_ATAN] = UNARY("atan", F, IN0),
    [CN_OP_SINH] = UNARY("sinh", F, IN0),
    [CN_OP_COSH] = UNARY("cosh", F, IN0),
    [CN_OP_ASINH] = UNARY("asinh", F, IN0),
    [CN_OP_ACOSH] = UNARY("acosh", F, IN0),
    [CN_OP_ATANH] = UNARY("atanh", F, IN0),
    /* issue 16's remaining elementwise ops. remainder and fmod on ints check for zero divisors;
     * the scalar ops read reals[0]; is_nan and is_inf take ints too (all false); the bitwise
     * ops take ints only, bool xor bools only; none of those has a gradient */
    [CN_OP_REMAINDER] = BINARY("remainder", N, IN0 | IN1),
    [CN_OP_FMOD] = BINARY("fmod", N, IN0 | IN1),
    [CN_OP_HYPOT] = BINARY("hypot", F, IN0 | IN1 | OUT),
    [CN_OP_REMAINDER_SCALAR] = {.name = "remainder_scalar", .family = CN__FAMILY_SCALAR,
                                .n_in = 1, .kinds = {N}, .out = CN__OUT_INPUT, .n_reals = 1,
                                .differentiable = 1, .memory_bound = 1},
    [CN_OP_IS_NAN] = PREDICATE("is_nan"),
    [CN_OP_IS_INF] = PREDICATE("is_inf"),
    [CN_OP_BITWISE_AND] = BITWISE("bitwise_and"),
    [CN_OP_BITWISE_OR] = BITWISE("bitwise_or"),
    [CN_OP_BITWISE_XOR] = BITWISE("bitwise_xor"),
    [CN_OP_BITWISE_LEFT_SHIFT] = BITWISE("bitwise_left_shift"),
    [CN_OP_BITWISE_RIGHT_SHIFT] = BITWISE("bitwise_right_shift"),
    [CN_OP_BITWISE_NOT] = {.name = "bitwise_not", .family = CN__FAMILY_UNARY, .n_in = 1,
                           .kinds = {I}, .out = CN__OUT_INPUT},
    [CN_OP_BITWISE_AND_SCALAR] = BITWISE_SCALAR("bitwise_and_scalar"),
    [CN_OP_BITWISE_OR_SCALAR] = BITWISE_SCALAR("bitwise_or_scalar"),
    [CN_OP_BITWISE_XOR_SCALAR] = BITWISE_SCALAR("bitwise_xor_scalar"),
    [CN_OP_BITWISE_LEFT_SHIFT_SCALAR] = BITWISE_SCALAR("bitwise_left_shift_scalar"),
    [CN_OP_BITWISE_RIGHT_SHIFT_SCALAR] = BITWISE_SCALAR("bitwise_right_shift_scalar"),
    [CN_OP_LOGICAL_XOR] = {.name = "logical_xor", .family = CN__FAMILY_LOGIC, .n_in = 2,
                           .kinds = {B, B}, .out = CN__OUT_BOOL},
    /* activations: leaky_relu reals[0] = slope, softplus (beta, threshold), elu alpha; prelu's
     * weight comes reshaped to broadcast along x's dim 1 */
    [CN_OP_LEAKY_RELU] = ACTIVATION_SCALAR("leaky_relu", 1),
    [CN_OP_PRELU] = BINARY("prelu", F, IN0 | IN1),
    [CN_OP_HARD_SIGMOID] = UNARY("hard_sigmoid", F, IN0),
    [CN_OP_LOG_SIGMOID] = UNARY("log_sigmoid", F, IN0),
    [CN_OP_HARD_SWISH] = UNARY("hard_swish", F, IN0),
    [CN_OP_SOFTPLUS] = ACTIVATION_SCALAR("softplus", 2),
    [CN_OP_ELU] = ACTIVATION_SCALAR("elu", 1),
    /* comparisons with reals[0]: bool out, no gradient */
    [CN_OP_EQ_SCALAR] = COMPARE_SCALAR("eq_scalar"),
    [CN_OP_NE_SCALAR] = COMPARE_SCALAR("ne_scalar"),
    [CN_OP_LT_SCALAR] = COMPARE_SCALAR("lt_scalar"),
    [CN_OP_LE_SCALAR] = COMPARE_SCALAR("le_scalar"),
    [CN_OP_GT_SCALAR] = COMPARE_SCALAR("gt_scalar"),
    [CN_OP_GE_SCALAR] = COMPARE_SCALAR("ge_scalar"),
    /* elementwise with scalars: reals[0] the scalar; clamp: lo, hi */
    [CN_OP_ADD_SCALAR] = {.name = "add_scalar", .family = CN__FAMILY_SCALAR, .n_in = 1,
                          .kinds = {N}, .out = CN__OUT_INPUT, .n_reals = 1, .differentiable = 1,
                          .memory_bound = 1},
    [CN_OP_MUL_SCALAR] = {.name = "mul_scalar", .family = CN__FAMILY_SCALAR, .n_in = 1,
                          .kinds = {N}, .out = CN__OUT_INPUT, .n_reals = 1, .differentiable = 1,
                          .memory_bound = 1},
    [CN_OP_POW_SCALAR] = {.name = "pow_scalar", .family = CN__FAMILY_SCALAR, .n_in = 1,
                          .kinds = {N}, .out = CN__OUT_INPUT, .n_reals = 1, .saves = IN0,
                          .differentiable = 1, .memory_bound = 1},
    [CN_OP_CLAMP] = {.name = "clamp", .family = CN__FAMILY_SCALAR, .n_in = 1, .kinds = {N},
                     .out = CN__OUT_INPUT, .n_reals = 2, .saves = IN0, .differentiable = 1,
                     .memory_bound = 1},
    /* elementwise binary */
    [CN_OP_ADD] = BINARY("add", N, 0),
    [CN_OP_SUB] = BINARY("sub", N, 0),
    [CN_OP_MUL] = BINARY("mul", N, IN0 | IN1),
    [CN_OP_DIV] = BINARY("div", N, IN0 | IN1),
    [CN_OP_POW] = BINARY("pow", N, IN0 | IN1 | OUT), /* ints since issue 16 (powi) */
    [CN_OP_MAXIMUM] = BINARY("maximum", N, IN0 | IN1),
    [CN_OP_MINIMUM] = BINARY("minimum", N, IN0 | IN1),
    [CN_OP_ATAN2] = BINARY("atan2", F, IN0 | IN1),
    /* comparisons and logic: no gradient (bool out) */
    [CN_OP_EQ] = COMPARE("eq"),
    [CN_OP_NE] = COMPARE("ne"),
    [CN_OP_LT] = COMPARE("lt"),
    [CN_OP_LE] = COMPARE("le"),
    [CN_OP_GT] = COMPARE("gt"),
    [CN_OP_GE] = COMPARE("ge"),
    [CN_OP_LOGICAL_AND] = {.name = "logical_and", .family = CN__FAMILY_LOGIC, .n_in = 2,
                           .kinds = {B, B}, .out = CN__OUT_BOOL},
    [CN_OP_LOGICAL_OR] = {.name = "logical_or", .family = CN__FAMILY_LOGIC, .n_in = 2,
                          .kinds = {B, B}, .out = CN__OUT_BOOL},
    [CN_OP_LOGICAL_NOT] = {.name = "logical_not", .family = CN__FAMILY_LOGIC, .n_in = 1,
                           .kinds = {B}, .out = CN__OUT_BOOL},
    [CN_OP_WHERE] = {.name = "where", .family = CN__FAMILY_WHERE, .n_in = 3, .kinds = {B, A, A},
                     .value_from = 1, .out = CN__OUT_INPUT, .saves = IN0, .differentiable = 1,
                     .memory_bound = 1},
    /* data movement and creation */
    [CN_OP_CAST] = {.name = "cast", .family = CN__FAMILY_CONVERT, .n_in = 1, .kinds = {A},
                    .out = CN__OUT_TARGET, .differentiable = 1, .memory_bound = 1},
    [CN_OP_COPY] = {.name = "copy", .family = CN__FAMILY_CONVERT, .n_in = 1, .kinds = {A},
                    .out = CN__OUT_INPUT, .differentiable = 1, .memory_bound = 1},
    [CN_OP_FILL] = {.name = "fill", .family = CN__FAMILY_CREATE, .kinds = {A},
                    .out = CN__OUT_TARGET, .n_reals = 1},
    [CN_OP_RAND_UNIFORM] = {.name = "rand_uniform", .family = CN__FAMILY_CREATE, .kinds = {F},
                            .out = CN__OUT_TARGET, .n_ints = 2, .n_reals = 2},
    [CN_OP_RAND_NORMAL] = {.name = "rand_normal", .family = CN__FAMILY_CREATE, .kinds = {F},
                           .out = CN__OUT_TARGET, .n_ints = 2, .n_reals = 2},
    /* reductions over one dim (ints[0]); var: ints[1] = correction */
    [CN_OP_SUM] = REDUCE("sum", N, 0),
    [CN_OP_MEAN] = REDUCE("mean", F, 0),
    [CN_OP_MAX] = REDUCE("max", N, IN0),
    [CN_OP_MIN] = REDUCE("min", N, IN0),
    [CN_OP_PROD] = REDUCE("prod", N, IN0),
    [CN_OP_ARGMAX] = {.name = "argmax", .family = CN__FAMILY_REDUCE, .n_in = 1, .kinds = {N},
                      .out = CN__OUT_I64, .n_ints = 1},
    [CN_OP_ARGMIN] = {.name = "argmin", .family = CN__FAMILY_REDUCE, .n_in = 1, .kinds = {N},
                      .out = CN__OUT_I64, .n_ints = 1},
    [CN_OP_VAR] = {.name = "var", .family = CN__FAMILY_REDUCE, .n_in = 1, .kinds = {F},
                   .out = CN__OUT_INPUT, .n_ints = 2, .saves = IN0, .differentiable = 1},
    [CN_OP_LOGSUMEXP] = REDUCE("logsumexp", F, IN0 | OUT),
    [CN_OP_SOFTMAX] = {.name = "softmax", .family = CN__FAMILY_SOFTMAX, .n_in = 1, .kinds = {F},
                       .out = CN__OUT_INPUT, .n_ints = 1, .saves = OUT, .differentiable = 1},
    [CN_OP_LOG_SOFTMAX] = {.name = "log_softmax", .family = CN__FAMILY_SOFTMAX, .n_in = 1,
                           .kinds = {F}, .out = CN__OUT_INPUT, .n_ints = 1, .saves = OUT,
                           .differentiable = 1},
    /* linear algebra, indexing (index inputs are i64), convolution */
    [CN_OP_MATMUL] = {.name = "matmul", .family = CN__FAMILY_MATMUL, .n_in = 2, .kinds = {N, N},
                      .out = CN__OUT_INPUT, .saves = IN0 | IN1, .differentiable = 1},
    [CN_OP_GATHER] = {.name = "gather", .family = CN__FAMILY_INDEX, .n_in = 2, .kinds = {N, I},
                      .out = CN__OUT_INPUT, .n_ints = 1, .saves = IN1, .differentiable = 1},
    [CN_OP_SCATTER_ADD] = {.name = "scatter_add", .family = CN__FAMILY_INDEX, .n_in = 3,
                           .kinds = {N, I, N}, .out = CN__OUT_INPUT, .n_ints = 1, .saves = IN1,
                           .differentiable = 1},
    [CN_OP_INDEX_SELECT] = {.name = "index_select", .family = CN__FAMILY_INDEX, .n_in = 2,
                            .kinds = {N, I}, .out = CN__OUT_INPUT, .n_ints = 1, .saves = IN1,
                            .differentiable = 1},
    [CN_OP_ONE_HOT] = {.name = "one_hot", .family = CN__FAMILY_INDEX, .n_in = 1, .kinds = {I},
                       .out = CN__OUT_TARGET, .n_ints = 1},
    [CN_OP_CONV2D] = {.name = "conv2d", .family = CN__FAMILY_WINDOW, .n_in = 3,
                      .kinds = {F, F, F}, .out = CN__OUT_INPUT, .n_ints = 7, .saves = IN0 | IN1,
                      .differentiable = 1},
    /* conv2d then relu in one kernel; its formula masks g by the output, so it saves that too */
    [CN_OP_CONV2D_RELU] = {.name = "conv2d_relu", .family = CN__FAMILY_WINDOW, .n_in = 3,
                           .kinds = {F, F, F}, .out = CN__OUT_INPUT, .n_ints = 7,
                           .saves = IN0 | IN1 | OUT, .differentiable = 1},
    /* conv2d then a k x k max pool at stride k in one kernel (ints: conv2d's 7, then k). Its
     * node has the inputs (x, w, idx[, b]): idx, the pool's choices (the kernel's out[1]), is
     * saved in place of the convolution's output, which is never written out. */
    [CN_OP_CONV2D_MAX_POOL2D] = {.name = "conv2d_max_pool2d", .family = CN__FAMILY_WINDOW,
                                 .n_in = 3, .kinds = {F, F, F}, .out = CN__OUT_INPUT,
                                 .n_ints = 8, .saves = IN0 | IN1 | IN2, .differentiable = 1},
    /* convolutions of issue 16 (see backend.h) */
    [CN_OP_CONV_TRANSPOSE2D] = {.name = "conv_transpose2d", .family = CN__FAMILY_WINDOW,
                                .n_in = 3, .kinds = {F, F, F}, .out = CN__OUT_INPUT,
                                .n_ints = 9, .saves = IN0 | IN1, .differentiable = 1},
    [CN_OP_CONV1D] = {.name = "conv1d", .family = CN__FAMILY_WINDOW, .n_in = 3,
                      .kinds = {F, F, F}, .out = CN__OUT_INPUT, .n_ints = 4, .saves = IN0 | IN1,
                      .differentiable = 1},
    [CN_OP_CONV_TRANSPOSE1D] = {.name = "conv_transpose1d", .family = CN__FAMILY_WINDOW,
                                .n_in = 3, .kinds = {F, F, F}, .out = CN__OUT_INPUT,
                                .n_ints = 5, .saves = IN0 | IN1, .differentiable = 1},
    [CN_OP_CONV3D] = {.name = "conv3d", .family = CN__FAMILY_WINDOW, .n_in = 3,
                      .kinds = {F, F, F}, .out = CN__OUT_INPUT, .n_ints = 10, .saves = IN0 | IN1,
                      .differentiable = 1},
    [CN_OP_CONV_TRANSPOSE3D] = {.name = "conv_transpose3d", .family = CN__FAMILY_WINDOW,
                                .n_in = 3, .kinds = {F, F, F}, .out = CN__OUT_INPUT,
                                .n_ints = 13, .saves = IN0 | IN1, .differentiable = 1},
    [CN_OP_MAX_POOL2D] = {.name = "max_pool2d", .family = CN__FAMILY_WINDOW, .n_in = 1,
                          .kinds = {F}, .out = CN__OUT_INPUT, .n_ints = 6, .saves = IN0,
                          .differentiable = 1},
    [CN_OP_AVG_POOL2D] = {.name = "avg_pool2d", .family = CN__FAMILY_WINDOW, .n_in = 1,
                          .kinds = {F}, .out = CN__OUT_INPUT, .n_ints = 6, .differentiable = 1},
    /* kernels of backward formulas (their own gradients are not needed: no double backward) */
    [CN_OP_CONV2D_BACKWARD_INPUT] = {.name = "conv2d_backward_input", .family = CN__FAMILY_GRAD,
                                     .n_in = 2, .kinds = {F, F}, .out = CN__OUT_INPUT,
                                     .n_ints = 7},
    [CN_OP_CONV2D_BACKWARD_WEIGHT] = {.name = "conv2d_backward_weight",
                                      .family = CN__FAMILY_GRAD, .n_in = 2, .kinds = {F, F},
                                      .out = CN__OUT_INPUT, .n_ints = 7},
    [CN_OP_CONV3D_BACKWARD_WEIGHT] = {.name = "conv3d_backward_weight",
                                      .family = CN__FAMILY_GRAD, .n_in = 2, .kinds = {F, F},
                                      .out = CN__OUT_INPUT, .n_ints = 10},
    [CN_OP_MAX_POOL2D_BACKWARD] = {.name = "max_pool2d_backward", .family = CN__FAMILY_GRAD,
                                   .n_in = 2, .kinds = {F, F}, .out = CN__OUT_INPUT, .n_ints = 6},
    [CN_OP_MAX_POOL2D_BACKWARD_INDEX] = {.name = "max_pool2d_backward_index",
                                         .family = CN__FAMILY_GRAD, .n_in = 2, .kinds = {F, I},
                                         .out = CN__OUT_INPUT, .n_ints = 6},
    [CN_OP_AVG_POOL2D_BACKWARD] = {.name = "avg_pool2d_backward", .family = CN__FAMILY_GRAD,
                                   .n_in = 1, .kinds = {F}, .out = CN__OUT_INPUT, .n_ints = 6},
    /* ints: the forward op (relu, tanh, sigmoid, silu, gelu, hard_sigmoid, log_sigmoid,
     * hard_swish), cn_gelu_approx */
    [CN_OP_ACTIVATION_BACKWARD] = {.name = "activation_backward", .family = CN__FAMILY_GRAD,
                                   .n_in = 2, .kinds = {F, F}, .out = CN__OUT_INPUT,
                                   .n_ints = 2, .memory_bound = 1},
    /* ints: the dim, 1 for log_softmax */
    [CN_OP_SOFTMAX_BACKWARD] = {.name = "softmax_backward", .family = CN__FAMILY_GRAD, .n_in = 2,
                                .kinds = {F, F}, .out = CN__OUT_INPUT, .n_ints = 2},
    /* in-place parameter updates (under no-grad) */
    [CN_OP_SGD_STEP] = {.name = "sgd_step", .family = CN__FAMILY_OPTIM, .n_in = 3,
                        .kinds = {F, F, F}, .out = CN__OUT_INPUT, .n_ints = 2, .n_reals = 4},
    /* y = x w^T (+ b); the formula needs x and w (ad_grad_linear) */
    [CN_OP_LINEAR] = {.name = "linear", .family = CN__FAMILY_MATMUL, .n_in = 3, .kinds = {F, F, F},
                      .out = CN__OUT_INPUT, .saves = IN0 | IN1, .differentiable = 1},
    [CN_OP_ADAMW_STEP] = {.name = "adamw_step", .family = CN__FAMILY_OPTIM, .n_in = 4,
                          .kinds = {F, F, F}, .out = CN__OUT_INPUT, .n_ints = 2, .n_reals = 5},
    /* scans and sorts along ints[0] (cumsum: ints[1] = reverse; sort: ints[1] = descending);
     * cummax, cummin and sort also write i64 indices, which their formulas recompute from the
     * saved input (as max's does); any / all: reductions to bool of any kind */
    [CN_OP_CUMSUM] = {.name = "cumsum", .family = CN__FAMILY_SCAN, .n_in = 1, .kinds = {N},
                      .out = CN__OUT_INPUT, .n_ints = 2, .differentiable = 1},
    [CN_OP_CUMPROD] = {.name = "cumprod", .family = CN__FAMILY_SCAN, .n_in = 1, .kinds = {N},
                       .out = CN__OUT_INPUT, .n_ints = 1, .saves = IN0, .differentiable = 1},
    [CN_OP_CUMPROD_BACKWARD] = {.name = "cumprod_backward", .family = CN__FAMILY_GRAD,
                                .n_in = 2, .kinds = {F, F}, .out = CN__OUT_INPUT, .n_ints = 1},
    [CN_OP_CUMMAX] = {.name = "cummax", .family = CN__FAMILY_SCAN, .n_in = 1, .kinds = {N},
                      .out = CN__OUT_INPUT, .n_ints = 1, .saves = IN0, .differentiable = 1},
    [CN_OP_CUMMIN] = {.name = "cummin", .family = CN__FAMILY_SCAN, .n_in = 1, .kinds = {N},
                      .out = CN__OUT_INPUT, .n_ints = 1, .saves = IN0, .differentiable = 1},
    [CN_OP_SORT] = {.name = "sort", .family = CN__FAMILY_SCAN, .n_in = 1, .kinds = {N},
                    .out = CN__OUT_INPUT, .n_ints = 2, .saves = IN0, .differentiable = 1},
    [CN_OP_ANY] = {.name = "any", .family = CN__FAMILY_REDUCE, .n_in = 1, .kinds = {A},
                   .out = CN__OUT_BOOL, .n_ints = 1},
    [CN_OP_ALL] = {.name = "all", .family = CN__FAMILY_REDUCE, .n_in = 1, .kinds = {A},
                   .out = CN__OUT_BOOL, .n_ints = 1},
    /* indexing (issue 16): masks, triangles, flips, repeats and assignments; index inputs are
     * i64, masks bool. Not memory-bound: autodiff's replay runs only elementwise families. */
    [CN_OP_MASKED_FILL] = {.name = "masked_fill", .family = CN__FAMILY_INDEX, .n_in = 2,
                           .kinds = {A, B}, .out = CN__OUT_INPUT, .n_reals = 1, .saves = IN1,
                           .differentiable = 1},
    [CN_OP_TRIL] = {.name = "tril", .family = CN__FAMILY_INDEX, .n_in = 1, .kinds = {A},
                    .out = CN__OUT_INPUT, .n_ints = 1, .differentiable = 1},
    [CN_OP_TRIU] = {.name = "triu", .family = CN__FAMILY_INDEX, .n_in = 1, .kinds = {A},
                    .out = CN__OUT_INPUT, .n_ints = 1, .differentiable = 1},
    [CN_OP_FLIP] = {.name = "flip", .family = CN__FAMILY_INDEX, .n_in = 1, .kinds = {A},
                    .out = CN__OUT_INPUT, .n_ints = CN_MAX_DIMS, .differentiable = 1},
    [CN_OP_REPEAT] = {.name = "repeat", .family = CN__FAMILY_INDEX, .n_in = 1, .kinds = {A},
                      .out = CN__OUT_INPUT, .n_ints = CN_MAX_DIMS, .differentiable = 1},
    [CN_OP_SCATTER] = {.name = "scatter", .family = CN__FAMILY_INDEX, .n_in = 3,
                       .kinds = {A, I, A}, .out = CN__OUT_INPUT, .n_ints = 1, .saves = IN1,
                       .differentiable = 1},
    [CN_OP_SLICE_ASSIGN] = {.name = "slice_assign", .family = CN__FAMILY_INDEX, .n_in = 2,
                            .kinds = {A, A}, .out = CN__OUT_INPUT, .n_ints = 3,
                            .differentiable = 1},
    [CN_OP_INDEX_COPY] = {.name = "index_copy", .family = CN__FAMILY_INDEX, .n_in = 3,
                          .kinds = {A, I, A}, .out = CN__OUT_INPUT, .n_ints = 1, .saves = IN1,
                          .differentiable = 1},
    [CN_OP_INDEX_ADD] = {.name = "index_add", .family = CN__FAMILY_INDEX, .n_in = 3,
                         .kinds = {N, I, N}, .out = CN__OUT_INPUT, .n_ints = 1, .saves = IN1,
                         .differentiable = 1},
    [CN_OP_UNFOLD] = {.name = "unfold", .family = CN__FAMILY_INDEX, .n_in = 1, .kinds = {A},
                      .out = CN__OUT_INPUT, .n_ints = 3, .differentiable = 1},
    /* data-dependent shapes: the front-end counts, then the kernel fills [count, ...] */
    [CN_OP_NONZERO] = {.name = "nonzero", .family = CN__FAMILY_INDEX, .n_in = 1, .kinds = {A},
                       .out = CN__OUT_I64},
    [CN_OP_MASKED_SELECT] = {.name = "masked_select", .family = CN__FAMILY_INDEX, .n_in = 2,
                             .kinds = {A, B}, .out = CN__OUT_INPUT, .saves = IN1,
                             .differentiable = 1},
    /* ONNX's GatherND / ScatterND (batch_dims 0): index tuples in the last dim of index */
    [CN_OP_GATHER_ND] = {.name = "gather_nd", .family = CN__FAMILY_INDEX, .n_in = 2,
                         .kinds = {A, I}, .out = CN__OUT_INPUT, .saves = IN1,
                         .differentiable = 1},
    [CN_OP_SCATTER_ND] = {.name = "scatter_nd", .family = CN__FAMILY_INDEX, .n_in = 3,
                          .kinds = {A, I, A}, .out = CN__OUT_INPUT, .n_ints = 1,
                          .saves = IN0 | IN1 | CN__SAVE_IN(2) | OUT, .differentiable = 1},
    /* attention (issue 16): in = q, k, v[, mask] (the mask: float, the value dtype too, checked
     * by the front-end); ints[0] causal, reals[0] scale. The node's inputs are (q, k, v, lse[,
     * mask]): lse, the kernel's out[1], is saved beside the output, and the backward kernel
     * recomputes the probabilities from them block by block */
    [CN_OP_SDPA] = {.name = "scaled_dot_product_attention", .family = CN__FAMILY_MATMUL,
                    .n_in = 4, .kinds = {F, F, F}, .out = CN__OUT_INPUT, .n_ints = 1,
                    .n_reals = 1, .saves = IN0 | IN1 | IN2 | CN__SAVE_IN(3) | CN__SAVE_IN(4) | OUT,
                    .differentiable = 1},
    [CN_OP_SDPA_BACKWARD] = {.name = "scaled_dot_product_attention_backward",
                             .family = CN__FAMILY_GRAD, .n_in = 7, .kinds = {F, F, F},
                             .out = CN__OUT_INPUT, .n_ints = 1, .n_reals = 1},
    /* ctc_loss (issue 16): in = log_probs (float), targets, input_lengths, target_lengths (i64,
     * the 4th's kind checked by the front-end); out = each sample's loss; ints = blank,
     * concatenated, zero_infinity. Its backward recomputes alpha and beta from the inputs. */
    [CN_OP_CTC_LOSS] = {.name = "ctc_loss", .family = CN__FAMILY_INDEX, .n_in = 4,
                        .kinds = {F, I, I}, .out = CN__OUT_INPUT, .n_ints = 3,
                        .saves = IN0 | IN1 | IN2 | CN__SAVE_IN(3), .differentiable = 1},
    [CN_OP_CTC_LOSS_BACKWARD] = {.name = "ctc_loss_backward", .family = CN__FAMILY_GRAD,
                                 .n_in = 5, .kinds = {F, F, I}, .out = CN__OUT_INPUT,
                                 .n_ints = 3},
    /* resampling (issue 16): interpolate, grid_sample_2d and their backward kernels (for the
     * formulas) */
    [CN_OP_INTERPOLATE] = {.name = "interpolate", .family = CN__FAMILY_INDEX, .n_in = 1,
                           .kinds = {F}, .out = CN__OUT_INPUT, .n_ints = 2, .n_reals = 2,
                           .differentiable = 1},
    [CN_OP_INTERPOLATE_BACKWARD] = {.name = "interpolate_backward", .family = CN__FAMILY_GRAD,
                                    .n_in = 1, .kinds = {F}, .out = CN__OUT_INPUT, .n_ints = 2,
                                    .n_reals = 2},
    [CN_OP_GRID_SAMPLE_2D] = {.name = "grid_sample_2d", .family = CN__FAMILY_INDEX, .n_in = 2,
                              .kinds = {F, F}, .out = CN__OUT_INPUT, .n_ints = 3,
                              .saves = IN0 | IN1, .differentiable = 1},
    [CN_OP_GRID_SAMPLE_2D_BACKWARD] = {.name = "grid_sample_2d_backward",
                                       .family = CN__FAMILY_GRAD, .n_in = 3, .kinds = {F, F, F},
                                       .out = CN__OUT_INPUT, .n_ints = 4},
    /* padding and pooling (issue 16): pad moves elements by size (every dtype; a constant
     * fits the dtype); its backward and the adaptive pools are float */
    [CN_OP_PAD] = {.name = "pad", .family = CN__FAMILY_INDEX, .n_in = 1, .kinds = {A},
                   .out = CN__OUT_INPUT, .n_ints = 8, .n_reals = 1, .differentiable = 1},
    [CN_OP_PAD_BACKWARD] = {.name = "pad_backward", .family = CN__FAMILY_GRAD, .n_in = 1,
                            .kinds = {F}, .out = CN__OUT_INPUT, .n_ints = 4},
    [CN_OP_ADAPTIVE_AVG_POOL] = {.name = "adaptive_avg_pool", .family = CN__FAMILY_INDEX,
                                 .n_in = 1, .kinds = {F}, .out = CN__OUT_INPUT, .n_ints = 1,
                                 .differentiable = 1},
    /* values and i64 indices; the formula recomputes the indices from the saved input */
    [CN_OP_MAX_POOL2D_WITH_INDICES] = {.name = "max_pool2d_with_indices",
                                       .family = CN__FAMILY_INDEX, .n_in = 1, .kinds = {F},
                                       .out = CN__OUT_INPUT, .n_ints = 8, .saves = IN0,
                                       .differentiable = 1},
    /* im2col and col2im, each the other's adjoint (so each one's formula is the other) */
    [CN_OP_UNFOLD4D] = {.name = "unfold4d", .family = CN__FAMILY_INDEX, .n_in = 1, .kinds = {F},
                        .out = CN__OUT_INPUT, .n_ints = 8, .differentiable = 1},
    [CN_OP_FOLD4D] = {.name = "fold4d", .family = CN__FAMILY_INDEX, .n_in = 1, .kinds = {F},
                      .out = CN__OUT_INPUT, .n_ints = 8, .differentiable = 1},
    /* deformable convolution (issue 16): in = x, offset, w[, mask][, b] (ints[8]: whether the
     * mask is there); the backward kernel gives x's, offset's, w's and the mask's gradients at
     * once, from the saved x, offset, w and mask (the bias is not read) */
    [CN_OP_DEFORM_CONV2D] = {.name = "deform_conv2d", .family = CN__FAMILY_WINDOW, .n_in = 5,
                             .kinds = {F, F, F}, .out = CN__OUT_INPUT, .n_ints = 9,
                             .saves = IN0 | IN1 | IN2 | CN__SAVE_IN(3), .differentiable = 1},
    [CN_OP_DEFORM_CONV2D_BACKWARD] = {.name = "deform_conv2d_backward",
                                      .family = CN__FAMILY_GRAD, .n_in = 5, .kinds = {F, F, F},
                                      .out = CN__OUT_INPUT, .n_ints = 9},
    /* the real FFT (issue 16): linear maps, each one's adjoint the other's with the bins
     * reweighted, so the formulas need no value (formulas_fft.c) */
    [CN_OP_RFFT] = {.name = "rfft", .family = CN__FAMILY_INDEX, .n_in = 1, .kinds = {F},
                    .out = CN__OUT_INPUT, .n_ints = 3, .n_reals = 1, .differentiable = 1},
    [CN_OP_IRFFT] = {.name = "irfft", .family = CN__FAMILY_INDEX, .n_in = 1, .kinds = {F},
                     .out = CN__OUT_INPUT, .n_ints = 3, .n_reals = 1, .differentiable = 1},
    [CN_OP_ADAPTIVE_AVG_POOL_BACKWARD] = {.name = "adaptive_avg_pool_backward",
                                          .family = CN__FAMILY_GRAD, .n_in = 1, .kinds = {F},
                                          .out = CN__OUT_INPUT, .n_ints = 1},
    /* the fused normalisations (issue 17; see backend.h). A layer_norm node has the inputs
     * (x, mean, rstd[, w][, b]), an rms_norm node (x, rstd[, w]): mean and rstd, the kernel's
     * out[1] and out[2], are saved beside x for the backward kernel (not recomputed). ints = k,
     * has_w[, has_b]; reals[0] = eps */
    [CN_OP_LAYER_NORM] = {.name = "layer_norm", .family = CN__FAMILY_INDEX, .n_in = 5,
                          .kinds = {F, F, F}, .out = CN__OUT_INPUT, .n_ints = 3, .n_reals = 1,
                          .saves = IN0 | IN1 | IN2 | CN__SAVE_IN(3), .differentiable = 1},
    [CN_OP_LAYER_NORM_BACKWARD] = {.name = "layer_norm_backward", .family = CN__FAMILY_GRAD,
                                   .n_in = 5, .kinds = {F, F, F}, .out = CN__OUT_INPUT,
                                   .n_ints = 4},
    [CN_OP_RMS_NORM] = {.name = "rms_norm", .family = CN__FAMILY_INDEX, .n_in = 3,
                        .kinds = {F, F, F}, .out = CN__OUT_INPUT, .n_ints = 2, .n_reals = 1,
                        .saves = IN0 | IN1 | IN2, .differentiable = 1},
    [CN_OP_RMS_NORM_BACKWARD] = {.name = "rms_norm_backward", .family = CN__FAMILY_GRAD,
                                 .n_in = 4, .kinds = {F, F, F}, .out = CN__OUT_INPUT,
                                 .n_ints = 3},
    /* quantized tensors (issue 19): the weight is quantized (a constant: gradients reach x and
     * bias only, formulas_quant.c). ints = has_bias, w_offset, group, scales_at */
    [CN_OP_QUANT_LINEAR] = {.name = "quant_linear", .family = CN__FAMILY_INDEX, .n_in = 3,
                            .kinds = {F, 1u << CN_KIND_QUANTIZED, F}, .out = CN__OUT_INPUT,
                            .n_ints = 4, .saves = IN1, .differentiable = 1},
    /* y = gelu(x w^T + b) (issue 17). The node's inputs are (x, w, d[, b]), d = gelu' of the
     * pre-activation that the forward wrote (concrete, no gradient); ints = approx, has_b. The
     * formula needs x, w and d (ad_grad_linear_gelu) */
    [CN_OP_LINEAR_GELU] = {.name = "linear_gelu", .family = CN__FAMILY_MATMUL, .n_in = 3,
                           .kinds = {F, F, F}, .out = CN__OUT_INPUT, .n_ints = 2,
                           .saves = IN0 | IN1 | IN2, .differentiable = 1},
    /* in = g, idx (u8), x, w; ints: conv2d_max_pool2d's 8, want_gx, want_gw, want_gb */
    [CN_OP_CONV2D_MAX_POOL2D_BACKWARD] = {.name = "conv2d_max_pool2d_backward",
                                          .family = CN__FAMILY_GRAD, .n_in = 4,
                                          .kinds = {F, I, F}, .out = CN__OUT_INPUT,
                                          .n_ints = 11},
    /* y = x w^T + b + r (issue 17): inputs (x, w, r[, b]); the formula needs x and w
     * (ad_grad_linear_add: r's gradient is g itself) */
    [CN_OP_LINEAR_ADD] = {.name = "linear_add", .family = CN__FAMILY_MATMUL, .n_in = 4,
                          .kinds = {F, F, F}, .out = CN__OUT_INPUT, .saves = IN0 | IN1,
                          .differentiable = 1},
    /* no kernel: views share the input's storage; cat copies through cn_copy_ */
    [CN__OP_TRANSPOSE] = {.name = "transpose", .family = CN__FAMILY_VIEW, .n_in = 1,
                          .kinds = {A}, .out = CN__OUT_INPUT, .n_ints = 2, .differentiable = 1,
                          .memory_bound = 1},
    [CN__OP_PERMUTE] = {.name = "permute", .family = CN__FAMILY_VIEW, .n_in = 1, .kinds = {A},
                        .out = CN__OUT_INPUT, .n_ints = CN_MAX_DIMS, .differentiable = 1,
                        .memory_bound = 1},
    [CN__OP_SLICE] = {.name = "slice", .family = CN__FAMILY_VIEW, .n_in = 1, .kinds = {A},
                      .out = CN__OUT_INPUT, .n_ints = 3, .differentiable = 1, .memory_bound = 1},
    [CN__OP_VIEW] = {.name = "view", .family = CN__FAMILY_VIEW, .n_in = 1, .kinds = {A},
                     .out = CN__OUT_INPUT, .differentiable = 1, .memory_bound = 1},
    [CN__OP_EXPAND] = {.name = "expand", .family = CN__FAMILY_VIEW, .n_in = 1, .kinds = {A},
                       .out = CN__OUT_INPUT, .differentiable = 1, .memory_bound = 1},
    [CN__OP_CAT] = {.name = "cat", .family = CN__FAMILY_VIEW, .n_in = -1, .kinds = {A},
                    .out = CN__OUT_INPUT, .n_ints = 1, .differentiable = 1},
};

const char *cn_op_name(cn_op op) {
    const cn__op_decl *d = cn__op_decl_of((int)op);
    return d ? d->name : "unknown";
}

#define DT(d) (1u << (d))
#define FLOATS (DT(CN_F32) | DT(CN_F64) | DT(CN_F16) | DT(CN_BF16))
#define INTS (DT(CN_I32) | DT(CN_I64) | DT(CN_U8))
#define BOOLS DT(CN_BOOL)
const uint32_t cn__kinds_dtypes_table[1u << CN_KIND_QUANTIZED] = {
    [CN_KINDS_FLOAT] = FLOATS,
    [CN_KINDS_INT] = INTS,
    [CN_KINDS_BOOL] = BOOLS,
    [CN_KINDS_NUMERIC] = FLOATS | INTS,
    [CN_KINDS_FLOAT | CN_KINDS_BOOL] = FLOATS | BOOLS,
    [CN_KINDS_INT | CN_KINDS_BOOL] = INTS | BOOLS,
    [CN_KINDS_ALL] = FLOATS | INTS | BOOLS,
};

unsigned cn__kinds_dtypes(unsigned kinds) {
    unsigned m = 0;
    for (int dt = 0; dt < CN_DTYPE_COUNT; dt++)
        if ((kinds >> cn__dtype_kind((cn_dtype)dt)) & 1u) m |= 1u << dt;
    return m;
}
