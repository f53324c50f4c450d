/* What the graph needs to know of each op: its name, whether it is memory-bound, which values its
 * backward reads, and how to run it again (checkpointing). */
#include "autodiff/autodiff_internal.h"
#include "cinder/ops.h"
#include "core/error_internal.h"
#include "dispatch/backward_ops.h"

const char *ad_op_name(int op) {
    static const char *const names[] = {"leaf", "transpose", "permute", "slice",    "view",
                                        "expand", "cat",     "extension", "extension output"};
    if (op < CN_OP_COUNT) return cn_op_name((cn_op)op);
    if (op < AD_OP_COUNT) return names[op - AD_OP_LEAF];
    return "unknown";
}

int ad_op_memory_bound(int op) {
    if (op >= AD_OP_TRANSPOSE && op <= AD_OP_EXPAND) return 1; /* views cost nothing to redo */
    return op <= CN_OP_CAST || op == CN_OP_COPY || op == CN_OP_ERF;
}

#define IN0 (1u << 0)
#define IN1 (1u << 1)
#define IN2 (1u << 2)

unsigned ad_op_saves(int op, int n_in) {
    (void)n_in;
    switch (op) {
    case CN_OP_EXP: case CN_OP_SQRT: case CN_OP_RSQRT: case CN_OP_TANH: case CN_OP_SIGMOID:
    case CN_OP_RELU: case CN_OP_SOFTMAX: case CN_OP_LOG_SOFTMAX:
        return AD_SAVE_OUT;
    case CN_OP_ABS: case CN_OP_LOG: case CN_OP_LOG1P: case CN_OP_SIN: case CN_OP_COS:
    case CN_OP_SILU: case CN_OP_GELU: case CN_OP_ERF: case CN_OP_POW_SCALAR: case CN_OP_CLAMP:
    case CN_OP_MAX: case CN_OP_MIN: case CN_OP_VAR: case CN_OP_MAX_POOL2D:
        return IN0;
    case CN_OP_MUL: case CN_OP_DIV: case CN_OP_MAXIMUM: case CN_OP_MINIMUM: case CN_OP_MATMUL:
    case CN_OP_CONV2D:
        return IN0 | IN1;
    case CN_OP_POW: return IN0 | IN1 | AD_SAVE_OUT;
    case CN_OP_PROD: case CN_OP_LOGSUMEXP: return IN0 | AD_SAVE_OUT;
    case CN_OP_WHERE: return IN0;          /* the condition */
    case CN_OP_GATHER: case CN_OP_SCATTER_ADD: case CN_OP_INDEX_SELECT: return IN1; /* index */
    default: return 0;
    }
}

/* ---- replay -------------------------------------------------------------------------------- */

cn_tensor *ad_replay(ad_node *n, cn_tensor *const *v) {
    const int64_t *k = n->ints;
    const double *r = n->reals;
    switch (n->op) {
    case CN_OP_NEG: return cn_neg(v[0]);
    case CN_OP_ABS: return cn_abs(v[0]);
    case CN_OP_RELU: return cn_relu(v[0]);
    case CN_OP_EXP: return cn_exp(v[0]);
    case CN_OP_LOG: return cn_log(v[0]);
    case CN_OP_LOG1P: return cn_log1p(v[0]);
    case CN_OP_SQRT: return cn_sqrt(v[0]);
    case CN_OP_RSQRT: return cn_rsqrt(v[0]);
    case CN_OP_SIN: return cn_sin(v[0]);
    case CN_OP_COS: return cn_cos(v[0]);
    case CN_OP_TANH: return cn_tanh(v[0]);
    case CN_OP_SIGMOID: return cn_sigmoid(v[0]);
    case CN_OP_SILU: return cn_silu(v[0]);
    case CN_OP_GELU: return cn_gelu(v[0], (cn_gelu_approx)k[0]);
    case CN_OP_ERF: return cn__erf(v[0]);
    case CN_OP_ADD_SCALAR: return cn_add_scalar(v[0], r[0]);
    case CN_OP_MUL_SCALAR: return cn_mul_scalar(v[0], r[0]);
    case CN_OP_POW_SCALAR: return cn_pow_scalar(v[0], r[0]);
    case CN_OP_CLAMP: return cn_clamp(v[0], r[0], r[1]);
    case CN_OP_ADD: return cn_add(v[0], v[1]);
    case CN_OP_SUB: return cn_sub(v[0], v[1]);
    case CN_OP_MUL: return cn_mul(v[0], v[1]);
    case CN_OP_DIV: return cn_div(v[0], v[1]);
    case CN_OP_POW: return cn_pow(v[0], v[1]);
    case CN_OP_MAXIMUM: return cn_maximum(v[0], v[1]);
    case CN_OP_MINIMUM: return cn_minimum(v[0], v[1]);
    case CN_OP_WHERE: return cn_where(v[0], v[1], v[2]);
    case CN_OP_CAST: return cn_cast(v[0], n->dtype);
    case CN_OP_COPY: return cn_contiguous(v[0]);
    case AD_OP_TRANSPOSE: return cn_transpose(v[0], (int)k[0], (int)k[1]);
    case AD_OP_PERMUTE: {
        int perm[CN_MAX_DIMS];
        for (int i = 0; i < n->n_ints; i++) perm[i] = (int)k[i];
        return cn_permute(v[0], perm);
    }
    case AD_OP_SLICE: return cn_slice(v[0], (int)k[0], k[1], k[1] + k[2] * n->shape[k[0]], k[2]);
    case AD_OP_VIEW: return cn_reshape(v[0], n->shape, n->ndim);
    case AD_OP_EXPAND: return cn_expand(v[0], n->shape, n->ndim);
    default:
        cn_set_error(CN_ERR_BACKEND, "backward", "'%s' cannot be recomputed for checkpointing; "
                     "this is a bug in cinder: please report it", ad_op_name(n->op));
        return NULL;
    }
}
