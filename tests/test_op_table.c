/* Tests from the op table: every op of src/core/op_table.c, on every backend present, against
 * values PyTorch computed, and with its gradient checked by finite differences (as ggml's
 * test-backend-ops does for every op on every backend).
 *
 * The walk. For every op number in [0, CN__OP_ALL) the test requires a row in the op table, an
 * entry in `ops` below (how to call the op through its public entry, or the internal one of a
 * backward kernel) and reference values in tests/data/op_cases.inc (written by
 * tests/data/gen_op_cases.py); an op the table marks differentiable must also have a gradient
 * formula (ad_has_formula) and a case whose gradient is checked. Adding an op without them fails
 * here, naming the op and the file to change. Every backend registered (the CPU, and CUDA when its
 * module loads, with or without a device) must have a kernel for every op that has one.
 *
 * Forward. Each case of op_cases.inc gives the inputs (a few elements, float32-exact floats in
 * each op's safe domain), the attributes and PyTorch's float64 result. The op runs in f64 and
 * must match within 1e-12 (relative above 1, absolute below); it runs again with its float
 * inputs in f32 and must match within 1e-5; integer and bool results must match exactly.
 *
 * Gradient. For a differentiable op, each case with float inputs and a float output runs on the
 * autodiff device over the backend, in f64: L = sum(y * R) with fixed R ((k + 1/2) / 8, exact
 * in f32), and cn_backward's dL/dx of every float input must equal the central difference
 *     (L(x[j] + eps) - L(x[j] - eps)) / (2 eps)
 * computed with forward ops only on the concrete device, within tol (1 + |numeric|); eps = 1e-6
 * and tol = 1e-6 unless the case says otherwise (the cast to f32 uses f32's 1e-3). In f64 the
 * difference is off by ~eps^2 |L'''| + 1e-16 |L| / eps, about 1e-10 here, while a wrong formula
 * is off by the size of the gradient. The inputs keep away from kinks and domain edges by more
 * than eps (gen_op_cases.py), so each function is smooth where it is differenced.
 *
 * The random ops cannot match PyTorch's generator (cinder's is a Philox stream of its own), so
 * they are checked against statistics instead: range, mean, variance and a histogram (uniform),
 * or mean, variance and the mass within one standard deviation (normal), each within five
 * standard errors of the exact value for 4096 samples; the same seed must give the same values
 * and another seed others; and another backend must draw the CPU's very numbers.
 *
 * CUDA runs when its module loads and sees a device; otherwise that part prints that it skipped
 * (the CPU part still runs, and the kernel-completeness check covers a module that loads without
 * a device). */
#include <stdint.h>

#include "harness.h"

#include "autodiff/autodiff_internal.h" /* ad_has_formula */
#include "core/op_table.h"
#include "dispatch/backward_ops.h" /* the backward kernels' entries */

/* ---- the reference data ------------------------------------------------------------------ */

#define OC_MAX_IN    5
#define OC_MAX_INTS  16
#define OC_MAX_REALS 5

typedef struct oc_tensor {
    char kind; /* 'f' float, 'i' i64, 'b' bool */
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    const double *v; /* row-major */
} oc_tensor;

typedef struct oc_data {
    const char *op;      /* the op table's name */
    const char *variant; /* unique per case */
    int n_in;
    oc_tensor in[OC_MAX_IN];
    int n_ints;
    int64_t ints[OC_MAX_INTS];
    int n_reals;
    double reals[OC_MAX_REALS];
    double eps, tol; /* the gradient check's, 0: the defaults */
    oc_tensor out;   /* PyTorch's result, in float64 */
} oc_data;

#include "data/op_cases.inc"

#define N_CASES  ((int)(sizeof oc_cases / sizeof oc_cases[0]))
#define GRAD_EPS 1e-6
#define GRAD_TOL 1e-6
#define TOL_F64  1e-12
#define TOL_F32  1e-5

static const char *const FIX_CASE = "add one to `ops` in tests/test_op_table.c and a case to "
                                    "tests/data/gen_op_cases.py, then regenerate "
                                    "tests/data/op_cases.inc with it";

/* ---- how each op is called --------------------------------------------------------------- */

typedef struct oc_op oc_op;

/* One call of an op: case d on inputs x (made from the case's inputs, floats in dtype dt, on
 * device dev), with o the op's entry in `ops` below. */
typedef struct oc_call {
    const oc_op *o;
    const oc_data *d;
    cn_tensor *const *x;
    cn_dtype dt;
    cn_device dev;
} oc_call;

/* Calls the op through its public entry (or the internal one of a backward kernel). Runs in a
 * scope, so it releases nothing. */
typedef cn_tensor *(*oc_run_fn)(const oc_call *c);

struct oc_op {
    oc_run_fn run;
    cn_tensor *(*un)(cn_tensor *);
    cn_tensor *(*bin)(cn_tensor *, cn_tensor *);
    cn_tensor *(*scalar)(cn_tensor *, double);
    cn_tensor *(*all)(cn_tensor *);           /* a reduction over all elements */
    cn_tensor *(*dim)(cn_tensor *, int, int); /* over one dim, keepdim */
    cn_tensor *(*along)(cn_tensor *, int);    /* softmax-like, along a dim */
    cn_tensor *(*pool)(cn_tensor *, const cn_pool2d_params *);
    /* instead of run: the random ops, checked by their statistics on dev */
    void (*property)(cn_device dev, const char *backend);
};

#define INT_AT(k) ((int)c->d->ints[k])

static cn_tensor *run_unary(const oc_call *c) { return c->o->un(c->x[0]); }
static cn_tensor *run_gelu(const oc_call *c) { return cn_gelu(c->x[0], (cn_gelu_approx)INT_AT(0)); }
static cn_tensor *run_scalar(const oc_call *c) { return c->o->scalar(c->x[0], c->d->reals[0]); }
static cn_tensor *run_binary(const oc_call *c) { return c->o->bin(c->x[0], c->x[1]); }
static cn_tensor *run_not(const oc_call *c) { return cn_logical_not(c->x[0]); }
static cn_tensor *run_where(const oc_call *c) { return cn_where(c->x[0], c->x[1], c->x[2]); }

/* reals: beta, threshold */
static cn_tensor *run_softplus(const oc_call *c) {
    return cn_softplus(c->x[0], c->d->reals[0], c->d->reals[1]);
}

static cn_tensor *run_clamp(const oc_call *c) {
    return cn_clamp(c->x[0], c->d->reals[0], c->d->reals[1]);
}

/* The target: the expected kind; a float target is the other float dtype than the input's. */
static cn_tensor *run_cast(const oc_call *c) {
    char kind = c->d->out.kind;
    cn_dtype to = kind == 'i'                      ? CN_I64
                  : kind == 'b'                    ? CN_BOOL
                  : cn_dtype_of(c->x[0]) == CN_F64 ? CN_F32
                                                   : CN_F64;
    return cn_cast(c->x[0], to);
}

static cn_tensor *run_copy(const oc_call *c) { return cn_clone(cn_transpose(c->x[0], 0, 1)); }

/* ints: the shape; reals[0]: the value; the dtype: the run's float one, or i64. */
static cn_tensor *run_fill(const oc_call *c) {
    const oc_data *d = c->d;
    return cn_full(d->ints, d->n_ints, d->reals[0], d->out.kind == 'f' ? c->dt : CN_I64, c->dev);
}

/* ints: (dim, keepdim), or none for all elements. */
static cn_tensor *run_reduce(const oc_call *c) {
    return c->d->n_ints ? c->o->dim(c->x[0], INT_AT(0), INT_AT(1)) : c->o->all(c->x[0]);
}

/* ints: (correction), or (correction, dim, keepdim). */
static cn_tensor *run_var(const oc_call *c) {
    return c->d->n_ints >= 3 ? cn_var_dim(c->x[0], INT_AT(1), c->d->ints[0], INT_AT(2))
                             : cn_var(c->x[0], c->d->ints[0]);
}

static cn_tensor *run_along(const oc_call *c) { return c->o->along(c->x[0], INT_AT(0)); }
static cn_tensor *run_gather(const oc_call *c) { return cn_gather(c->x[0], INT_AT(0), c->x[1]); }

static cn_tensor *run_scatter_add(const oc_call *c) {
    return cn_scatter_add(c->x[0], INT_AT(0), c->x[1], c->x[2]);
}

static cn_tensor *run_index_select(const oc_call *c) {
    return cn_index_select(c->x[0], INT_AT(0), c->x[1]);
}

static cn_tensor *run_one_hot(const oc_call *c) {
    return cn_one_hot(c->x[0], c->d->ints[0], CN_I64);
}

/* indexing of issue 16. masked_fill: reals[0] the value; tril/triu: ints[0] the diagonal;
 * flip: ints the dims; repeat: ints the repeats; slice_assign: ints dim, start, end, step */
static cn_tensor *run_masked_fill(const oc_call *c) {
    return cn_masked_fill(c->x[0], c->x[1], c->d->reals[0]);
}
static cn_tensor *run_tril(const oc_call *c) { return cn_tril(c->x[0], c->d->ints[0]); }
static cn_tensor *run_triu(const oc_call *c) { return cn_triu(c->x[0], c->d->ints[0]); }

static cn_tensor *run_flip(const oc_call *c) {
    int dims[CN_MAX_DIMS];
    for (int i = 0; i < c->d->n_ints; i++)
        dims[i] = INT_AT(i);
    return cn_flip(c->x[0], dims, c->d->n_ints);
}

static cn_tensor *run_repeat(const oc_call *c) {
    return cn_repeat(c->x[0], c->d->ints, c->d->n_ints);
}

static cn_tensor *run_scatter(const oc_call *c) {
    return cn_scatter(c->x[0], INT_AT(0), c->x[1], c->x[2]);
}

static cn_tensor *run_slice_assign(const oc_call *c) {
    const int64_t *i = c->d->ints;
    return cn_slice_assign(c->x[0], c->x[1], (int)i[0], i[1], i[2], i[3]);
}

static cn_tensor *run_index_copy(const oc_call *c) {
    return cn_index_copy(c->x[0], INT_AT(0), c->x[1], c->x[2]);
}

static cn_tensor *run_index_add(const oc_call *c) {
    return cn_index_add(c->x[0], INT_AT(0), c->x[1], c->x[2]);
}

static cn_tensor *run_unfold(const oc_call *c) {
    return cn_unfold(c->x[0], INT_AT(0), c->d->ints[1], c->d->ints[2]);
}

static cn_tensor *run_nonzero(const oc_call *c) { return cn_nonzero(c->x[0]); }

static cn_tensor *run_masked_select(const oc_call *c) {
    return cn_masked_select(c->x[0], c->x[1]);
}

static cn_tensor *run_gather_nd(const oc_call *c) { return cn_gather_nd(c->x[0], c->x[1]); }

static cn_tensor *run_scatter_nd(const oc_call *c) {
    return cn_scatter_nd(c->x[0], c->x[1], c->x[2], (cn_scatter_reduce)INT_AT(0));
}

/* ints: stride h, w, padding h, w, dilation h, w, groups; a bias when there is a third input */
static cn_tensor *run_conv2d(const oc_call *c) {
    const int64_t *i = c->d->ints;
    cn_conv2d_params p = {{i[0], i[1]}, {i[2], i[3]}, {i[4], i[5]}, i[6]};
    return cn_conv2d(c->x[0], c->x[1], c->d->n_in > 2 ? c->x[2] : NULL, &p);
}

static cn_tensor *run_conv2d_relu(const oc_call *c) {
    const int64_t *i = c->d->ints;
    cn_conv2d_params p = {{i[0], i[1]}, {i[2], i[3]}, {i[4], i[5]}, i[6]};
    return cn_conv2d_relu(c->x[0], c->x[1], c->d->n_in > 2 ? c->x[2] : NULL, &p);
}

/* ints: stride h, w, padding h, w, output_padding h, w, dilation h, w, groups; a bias when there
 * is a third input */
static cn_tensor *run_conv_transpose2d(const oc_call *c) {
    const int64_t *i = c->d->ints;
    cn_conv_transpose2d_params p = {{i[0], i[1]}, {i[2], i[3]}, {i[4], i[5]}, {i[6], i[7]}, i[8]};
    return cn_conv_transpose2d(c->x[0], c->x[1], c->d->n_in > 2 ? c->x[2] : NULL, &p);
}

/* ints: stride, padding, dilation, groups */
static cn_tensor *run_conv1d(const oc_call *c) {
    const int64_t *i = c->d->ints;
    cn_conv1d_params p = {i[0], i[1], i[2], i[3]};
    return cn_conv1d(c->x[0], c->x[1], c->d->n_in > 2 ? c->x[2] : NULL, &p);
}

/* ints: stride, padding, output_padding, dilation, groups */
static cn_tensor *run_conv_transpose1d(const oc_call *c) {
    const int64_t *i = c->d->ints;
    cn_conv_transpose1d_params p = {i[0], i[1], i[2], i[3], i[4]};
    return cn_conv_transpose1d(c->x[0], c->x[1], c->d->n_in > 2 ? c->x[2] : NULL, &p);
}

/* ints: stride d, h, w, padding d, h, w, dilation d, h, w, groups */
static cn_tensor *run_conv3d(const oc_call *c) {
    const int64_t *i = c->d->ints;
    cn_conv3d_params p = {{i[0], i[1], i[2]}, {i[3], i[4], i[5]}, {i[6], i[7], i[8]}, i[9]};
    return cn_conv3d(c->x[0], c->x[1], c->d->n_in > 2 ? c->x[2] : NULL, &p);
}

/* ints: stride (3), padding (3), output_padding (3), dilation (3), groups */
static cn_tensor *run_conv_transpose3d(const oc_call *c) {
    const int64_t *i = c->d->ints;
    cn_conv_transpose3d_params p = {{i[0], i[1], i[2]},  {i[3], i[4], i[5]}, {i[6], i[7], i[8]},
                                    {i[9], i[10], i[11]}, i[12]};
    return cn_conv_transpose3d(c->x[0], c->x[1], c->d->n_in > 2 ? c->x[2] : NULL, &p);
}

/* ints: w's shape, then conv3d's 10 */
static cn_tensor *run_conv3d_bwd_weight(const oc_call *c) {
    return cn__conv3d_backward_weight(c->x[0], c->x[1], c->d->ints, c->d->ints + 5);
}

/* ints: conv2d's 7, then the pool's k */
static cn_tensor *run_conv2d_max_pool2d(const oc_call *c) {
    const int64_t *i = c->d->ints;
    cn_conv2d_params p = {{i[0], i[1]}, {i[2], i[3]}, {i[4], i[5]}, i[6]};
    return cn_conv2d_max_pool2d(c->x[0], c->x[1], c->d->n_in > 2 ? c->x[2] : NULL, &p, i[7]);
}

/* ints: the pool input's shape, then k; the choices (i64 in the data) as the u8 the op takes */
static cn_tensor *run_max_pool_bwd_index(const oc_call *c) {
    cn_tensor *idx = cn_cast(c->x[1], CN_U8);
    cn_tensor *out = idx ? cn__max_pool2d_backward_index(c->x[0], idx, c->d->ints, c->d->ints[4])
                         : NULL;
    cn_release(idx);
    return out;
}

/* conv2d_max_pool2d_backward: inputs (g, choices, x, w); ints = conv2d's 7, k, then the output
 * checked (0 gx, 1 gw, 2 gb), every output asked for */
static cn_tensor *run_conv_pool_bwd(const oc_call *c) {
    cn_tensor *idx = cn_cast(c->x[1], CN_U8), *g[3] = {NULL, NULL, NULL};
    const int want[3] = {1, 1, 1};
    int which = (int)c->d->ints[8];
    if (idx && cn__conv2d_max_pool2d_backward(c->x[0], idx, c->x[2], c->x[3], c->d->ints, want,
                                              g) != CN_OK)
        g[which] = NULL;
    cn_release(idx);
    for (int i = 0; i < 3; i++)
        if (i != which) cn_release(g[i]);
    return g[which];
}

/* ints: kernel h, w, stride h, w, padding h, w */
static cn_tensor *run_pool(const oc_call *c) {
    const int64_t *i = c->d->ints;
    cn_pool2d_params p = {{i[0], i[1]}, {i[2], i[3]}, {i[4], i[5]}};
    return c->o->pool(c->x[0], &p);
}

/* conv: ints = x's shape, then conv2d's 7 */
static cn_tensor *run_conv_bwd_input(const oc_call *c) {
    return cn__conv2d_backward_input(c->x[0], c->x[1], c->d->ints, c->d->ints + 4);
}

/* ints: w's shape, then conv2d's 7 */
static cn_tensor *run_conv_bwd_weight(const oc_call *c) {
    return cn__conv2d_backward_weight(c->x[0], c->x[1], c->d->ints, c->d->ints + 4);
}

/* ints: the pool's 6 */
static cn_tensor *run_max_pool_bwd(const oc_call *c) {
    return cn__max_pool2d_backward(c->x[0], c->x[1], c->d->ints);
}

/* ints: x's shape, then the pool's 6 */
static cn_tensor *run_avg_pool_bwd(const oc_call *c) {
    return cn__avg_pool2d_backward(c->x[0], c->d->ints, c->d->ints + 4);
}

/* resampling of issue 16. interpolate: ints = mode, align_corners, then the output sizes (when
 * the case has no reals); reals = the scale factors. interpolate_backward: ints = x's shape
 * (4-D), mode, align_corners; reals = the scale factors, or none. */
static cn_tensor *run_interpolate(const oc_call *c) {
    const oc_data *d = c->d;
    int n = cn_ndim(c->x[0]) - 2;
    return cn_interpolate(c->x[0], n, d->n_reals ? NULL : d->ints + 2,
                          d->n_reals ? d->reals : NULL, (cn_interp_mode)INT_AT(0), INT_AT(1));
}
static cn_tensor *run_interpolate_bwd(const oc_call *c) {
    const double none[2] = {0, 0};
    return cn__interpolate_backward(c->x[0], c->d->ints, 4, c->d->ints + 4,
                                    c->d->n_reals ? c->d->reals : none);
}

/* grid_sample_2d: ints = mode, padding, align_corners; its backward: in = (g, x, grid), ints =
 * the same and which gradient */
static cn_tensor *run_grid_sample(const oc_call *c) {
    return cn_grid_sample_2d(c->x[0], c->x[1], (cn_grid_mode)INT_AT(0), (cn_grid_padding)INT_AT(1),
                             INT_AT(2));
}
static cn_tensor *run_grid_sample_bwd(const oc_call *c) {
    return cn__grid_sample_2d_backward(c->x[0], c->x[1], c->x[2], c->d->ints, INT_AT(3));
}

/* padding and pooling of issue 16. pad: ints = mode, then the pad tuple; reals[0] = the
 * constant. pad_backward: ints = mode, dim, left, right, x's size at dim. adaptive_avg_pool:
 * ints = k, then the output sizes; its backward: ints = k, then x's shape */
static cn_tensor *run_pad(const oc_call *c) {
    return cn_pad(c->x[0], c->d->ints + 1, c->d->n_ints - 1, (cn_pad_mode)INT_AT(0),
                  c->d->reals[0]);
}
static cn_tensor *run_pad_bwd(const oc_call *c) {
    const int64_t *i = c->d->ints;
    return cn__pad_backward(c->x[0], (int)i[1], i[2], i[3], (int)i[0], i[4]);
}
static cn_tensor *run_adaptive_avg_pool(const oc_call *c) {
    const int64_t *o = c->d->ints + 1;
    switch (INT_AT(0)) {
    case 1: return cn_adaptive_avg_pool1d(c->x[0], o[0]);
    case 2: return cn_adaptive_avg_pool2d(c->x[0], o[0], o[1]);
    default: return cn_adaptive_avg_pool3d(c->x[0], o[0], o[1], o[2]);
    }
}
static cn_tensor *run_adaptive_avg_pool_bwd(const oc_call *c) {
    return cn__adaptive_avg_pool_backward(c->x[0], c->d->ints + 1, c->d->n_ints - 1, INT_AT(0));
}

/* the real FFT of issue 16: ints = n (-1: the default), dim, norm */
static cn_tensor *run_rfft(const oc_call *c) {
    return cn_rfft(c->x[0], c->d->ints[0], INT_AT(1), (cn_fft_norm)INT_AT(2));
}
static cn_tensor *run_irfft(const oc_call *c) {
    return cn_irfft(c->x[0], c->d->ints[0], INT_AT(1), (cn_fft_norm)INT_AT(2));
}

/* ints: kernel h, w, stride h, w, padding h, w, dilation h, w, ceil_mode, which output */
static cn_tensor *run_max_pool_ex(const oc_call *c) {
    const int64_t *k = c->d->ints;
    cn_max_pool2d_params p = {{k[0], k[1]}, {k[2], k[3]}, {k[4], k[5]}, {k[6], k[7]}, (int)k[8]};
    cn_tensor *idx = NULL;
    cn_tensor *values = cn_max_pool2d_ex(c->x[0], &p, &idx);
    if (!values || !idx) return NULL;
    return k[9] ? idx : values; /* both are the scope's */
}

/* unfold4d: ints = kernel h, w, dilation h, w, padding h, w, stride h, w; fold4d: out_h,
 * out_w, then those */
static cn_tensor *run_unfold4d(const oc_call *c) {
    const int64_t *k = c->d->ints;
    cn_fold_params p = {{k[0], k[1]}, {k[2], k[3]}, {k[4], k[5]}, {k[6], k[7]}};
    return cn_unfold4d(c->x[0], &p);
}
static cn_tensor *run_fold4d(const oc_call *c) {
    const int64_t *k = c->d->ints + 2;
    cn_fold_params p = {{k[0], k[1]}, {k[2], k[3]}, {k[4], k[5]}, {k[6], k[7]}};
    return cn_fold4d(c->x[0], c->d->ints[0], c->d->ints[1], &p);
}

/* Two optimizer steps on a copy of p (x[0]) with gradients x[1] then x[2] (the gradient of
 * sum(p * g) is g exactly); returns p after them. reals: lr, momentum, dampening,
 * weight_decay; ints[0]: nesterov. */
/* ints: the dim, 1 for log_softmax */
static cn_tensor *run_softmax_bwd(const oc_call *c) {
    return cn__softmax_backward(c->x[0], c->x[1], (int)INT_AT(0), (int)INT_AT(1));
}

/* ints: the forward op, cn_gelu_approx */
static cn_tensor *run_act_bwd(const oc_call *c) {
    return cn__activation_backward(c->x[0], c->x[1], (cn_op)INT_AT(0), INT_AT(1));
}

static cn_tensor *run_sgd(const oc_call *c) {
    const double *r = c->d->reals;
    cn_tensor *p = cn_require_grad(cn_from_inner(cn_clone(c->x[0]), cn_autodiff(c->dev)));
    if (!p) return NULL;
    cn_param param = {"p", p};
    cn_optimizer *opt = cn_sgd_new(&param, 1, r[0], r[1], r[2], INT_AT(0), r[3]);
    if (!opt) return NULL;
    cn_status s = CN_OK;
    for (int step = 1; step <= 2 && s == CN_OK; step++) {
        cn_grads *g = cn_backward(cn_sum(cn_mul(p, c->x[step])));
        s = g ? cn_optimizer_step(opt, g) : cn_last_status();
        cn_grads_free(g);
    }
    cn_optimizer_free(opt);
    return s == CN_OK ? cn_inner(p) : NULL;
}

/* two steps of cn_adamw_new / cn_optimizer_step (the fused adamw_step kernel on the CPU) */
static cn_tensor *run_adamw(const oc_call *c) {
    const double *r = c->d->reals;
    cn_tensor *p = cn_require_grad(cn_from_inner(cn_clone(c->x[0]), cn_autodiff(c->dev)));
    if (!p) return NULL;
    cn_param param = {"p", p};
    cn_optimizer *opt = cn_adamw_new(&param, 1, r[0], r[1], r[2], r[3], r[4]);
    if (!opt) return NULL;
    cn_status s = CN_OK;
    for (int step = 1; step <= 2 && s == CN_OK; step++) {
        cn_grads *g = cn_backward(cn_sum(cn_mul(p, c->x[step])));
        s = g ? cn_optimizer_step(opt, g) : cn_last_status();
        cn_grads_free(g);
    }
    cn_optimizer_free(opt);
    return s == CN_OK ? cn_inner(p) : NULL;
}

/* linear: x, w[, b] (x of any rank, as cn_linear takes it) */
static cn_tensor *run_linear(const oc_call *c) {
    return cn_linear(c->x[0], c->x[1], c->d->n_in > 2 ? c->x[2] : NULL);
}

/* linear_gelu: x, w[, b]; ints = approx */
static cn_tensor *run_linear_gelu(const oc_call *c) {
    return cn_linear_gelu(c->x[0], c->x[1], c->d->n_in > 2 ? c->x[2] : NULL,
                          (cn_gelu_approx)INT_AT(0));
}

/* linear_add: x, w, r[, b] */
static cn_tensor *run_linear_add(const oc_call *c) {
    return cn_linear_add(c->x[0], c->x[1], c->d->n_in > 3 ? c->x[3] : NULL, c->x[2]);
}

static cn_tensor *run_transpose(const oc_call *c) {
    return cn_transpose(c->x[0], INT_AT(0), INT_AT(1));
}

static cn_tensor *run_permute(const oc_call *c) {
    int perm[CN_MAX_DIMS];
    for (int i = 0; i < c->d->n_ints; i++)
        perm[i] = INT_AT(i);
    return cn_permute(c->x[0], perm);
}

/* ints: dim, start, end, step */
static cn_tensor *run_slice(const oc_call *c) {
    const int64_t *i = c->d->ints;
    return cn_slice(c->x[0], (int)i[0], i[1], i[2], i[3]);
}

static cn_tensor *run_reshape(const oc_call *c) {
    return cn_reshape(c->x[0], c->d->ints, c->d->n_ints);
}

static cn_tensor *run_expand(const oc_call *c) {
    return cn_expand(c->x[0], c->d->ints, c->d->n_ints);
}

static cn_tensor *run_cat(const oc_call *c) { return cn_cat(c->x, c->d->n_in, INT_AT(0)); }

/* scans and sorts: ints = (dim[, descending], which): the last picks values (0) or indices (1) */
static cn_tensor *run_scan(const oc_call *c) { return c->o->along(c->x[0], INT_AT(0)); }
static cn_tensor *pick(cn_tensor *values, cn_tensor *indices, int64_t which) {
    if (!values || !indices) return NULL;
    return which ? indices : values; /* both are the scope's */
}
static cn_tensor *run_cumext(const oc_call *c) {
    cn_tensor *idx = NULL;
    cn_tensor *(*f)(cn_tensor *, int, cn_tensor **) =
        strcmp(c->d->op, "cummax") == 0 ? cn_cummax : cn_cummin;
    cn_tensor *values = f(c->x[0], INT_AT(0), &idx);
    return pick(values, idx, c->d->ints[1]);
}
static cn_tensor *run_sort(const oc_call *c) {
    cn_tensor *idx = NULL;
    cn_tensor *values = cn_sort(c->x[0], INT_AT(0), INT_AT(1), &idx);
    return pick(values, idx, c->d->ints[2]);
}
/* ints: the dim */
static cn_tensor *run_cumprod_bwd(const oc_call *c) {
    return cn__cumprod_backward(c->x[0], c->x[1], INT_AT(0));
}

/* attention: inputs (q, k, v[, mask]); ints = (causal); reals = (scale) */
/* deform_conv2d: inputs (x, offset, w[, mask][, b]); ints = stride h, w, padding h, w, dilation
 * h, w, groups, offset_groups, has_mask. Its backward kernel: inputs (g, x, offset, w[, mask]);
 * the same ints, then which gradient (x, offset, w, mask) */
static cn_tensor *run_deform_conv2d(const oc_call *c) {
    const int64_t *k = c->d->ints;
    int has_mask = INT_AT(8);
    cn_deform_conv2d_params p = {{k[0], k[1]}, {k[2], k[3]}, {k[4], k[5]}, k[6], k[7]};
    return cn_deform_conv2d(c->x[0], c->x[1], c->x[2], has_mask ? c->x[3] : NULL,
                            c->d->n_in > 3 + has_mask ? c->x[3 + has_mask] : NULL, &p);
}
static cn_tensor *run_deform_conv2d_bwd(const oc_call *c) {
    cn_tensor *grads[4];
    cn_status s = cn__deform_conv2d_backward(c->x[0], c->x[1], c->x[2], c->x[3],
                                             INT_AT(8) ? c->x[4] : NULL, c->d->ints, grads);
    return s == CN_OK ? grads[INT_AT(9)] : NULL;
}

static cn_tensor *run_sdpa(const oc_call *c) {
    return cn_scaled_dot_product_attention(c->x[0], c->x[1], c->x[2],
                                           c->d->n_in > 3 ? c->x[3] : NULL, INT_AT(0),
                                           c->d->reals[0]);
}

/* its backward kernel: inputs (g, q, k, v[, mask]); ints = (causal, which): dq, dk, dv or the
 * scores' gradient; o and lse from the forward's internal entry */
static cn_tensor *run_sdpa_bwd(const oc_call *c) {
    cn_tensor *mask = c->d->n_in > 4 ? c->x[4] : NULL, *lse = NULL, *grads[4];
    cn_tensor *o = cn__sdpa_forward(c->x[1], c->x[2], c->x[3], mask, INT_AT(0), c->d->reals[0],
                                    &lse);
    if (!o) return NULL;
    cn_status s = cn__sdpa_backward(c->x[0], c->x[1], c->x[2], c->x[3], o, lse, mask, INT_AT(0),
                                    c->d->reals[0], INT_AT(1) == 3, grads);
    return s == CN_OK ? grads[INT_AT(1)] : NULL;
}

/* ctc_loss: inputs (log_probs, targets, input_lengths, target_lengths); ints = (blank,
 * reduction, zero_infinity) */
static cn_tensor *run_ctc(const oc_call *c) {
    return cn_ctc_loss(c->x[0], c->x[1], c->x[2], c->x[3], c->d->ints[0],
                       (cn_reduction)INT_AT(1), INT_AT(2));
}

/* its backward kernel: inputs (g, log_probs, targets, input_lengths, target_lengths), all dense
 * (the targets i64); ints = (blank, concatenated, zero_infinity) */
static cn_tensor *run_ctc_bwd(const oc_call *c) {
    return cn__ctc_loss_backward(c->x[0], c->x[1], c->x[2], c->x[3], c->x[4], c->d->ints);
}

/* layer_norm / rms_norm: inputs (x[, w][, b]); ints = (k, has_w[, has_b]); reals = (eps); the
 * normalised shape is x's last k dims */
static cn_tensor *run_layer_norm(const oc_call *c) {
    int k = INT_AT(0), has_w = INT_AT(1), has_b = INT_AT(2);
    cn_tensor *x = c->x[0];
    return cn_layer_norm(x, cn_shape(x) + cn_ndim(x) - k, k, has_w ? c->x[1] : NULL,
                         has_b ? c->x[1 + has_w] : NULL, c->d->reals[0]);
}
static cn_tensor *run_rms_norm(const oc_call *c) {
    int k = INT_AT(0);
    cn_tensor *x = c->x[0];
    return cn_rms_norm(x, cn_shape(x) + cn_ndim(x) - k, k, INT_AT(1) ? c->x[1] : NULL,
                       c->d->reals[0]);
}

/* their backward kernels: inputs (g, x[, w]); ints = (k, has_w, which: dx, dw, db); the
 * statistics from the forward's internal entry */
static cn_tensor *run_norm_bwd(const oc_call *c) {
    int k = INT_AT(0), which = INT_AT(2);
    cn_tensor *g = c->x[0], *x = c->x[1], *w = INT_AT(1) ? c->x[2] : NULL;
    const int64_t *shape = cn_shape(x) + cn_ndim(x) - k;
    cn_tensor *mean = NULL, *rstd = NULL, *grads[3];
    int rms = strcmp(c->d->op, "rms_norm_backward") == 0;
    cn_tensor *y = rms ? cn__rms_norm_forward(x, shape, k, w, c->d->reals[0], &rstd)
                       : cn__layer_norm_forward(x, shape, k, w, NULL, c->d->reals[0], &mean,
                                                &rstd);
    if (!y) return NULL;
    cn_status s = rms ? cn__rms_norm_backward(g, x, rstd, w, k, 1, grads)
                      : cn__layer_norm_backward(g, x, mean, rstd, w, k, 1, 1, grads);
    return s == CN_OK ? grads[which] : NULL;
}

#undef INT_AT

#include "op_table_random.h" /* check_rand_uniform, check_rand_normal */

/* cn_quant_linear on dev: x [3, 64] and W [5, 64] with bias, the weight quantized with each
 * scheme; y within dx / 2 sum_k |Wq[n, k]| (+ f32 rounding) of x @ dequant(W)^T + b in double,
 * dx = the step of x's int8 quantization (amax / 127 a row). */
static void check_quant_linear(cn_device dev, const char *backend) {
    enum { M = 3, N = 5, K = 64 };
    const cn_dtype schemes[4] = {CN_Q8_TENSOR, CN_Q8_CHANNEL, CN_Q8_BLOCK, CN_Q4_BLOCK};
    double x[M * K], w[N * K], b[N];
    for (int i = 0; i < M * K; i++) x[i] = (float)sin(0.37 * i + 1) * (1 + i % 5);
    for (int i = 0; i < N * K; i++) w[i] = (float)cos(0.21 * i) * 0.5;
    for (int i = 0; i < N; i++) b[i] = 0.25 * i - 0.5;
    const int64_t xs[2] = {M, K}, ws[2] = {N, K}, bs[1] = {N};
    cn_scope_begin();
    cn_tensor *xt = cn_to_device(th_tensor(x, xs, 2, CN_F32), dev);
    cn_tensor *wt = cn_to_device(th_tensor(w, ws, 2, CN_F32), dev);
    cn_tensor *bt = cn_to_device(th_tensor(b, bs, 1, CN_F32), dev);
    for (int s = 0; s < 4; s++) {
        cn_tensor *wq = cn_quantize(wt, schemes[s]);
        cn_tensor *y = wq ? cn_quant_linear(xt, wq, bt) : NULL;
        cn_tensor *wd = wq ? cn_to_device(cn_dequantize(wq, CN_F64), cn_cpu()) : NULL;
        double *got = y ? th_values(cn_to_device(y, cn_cpu())) : NULL, *wv = wd ? th_values(wd) : NULL;
        if (!got || !wv) {
            fprintf(stderr, "op 'quant_linear' on %s (%s): failed (%s)\n", backend,
                    cn_dtype_name(schemes[s]), cn_last_error());
            th_checks_failed++;
        }
        const int per = K; /* the activations' scales: one a row */
        for (int m = 0; got && wv && m < M; m++)
            for (int n = 0; n < N; n++) {
                double ref = b[n], bound = 1e-6;
                for (int g = 0; g < K / per; g++) {
                    float amax = 0;
                    for (int k = g * per; k < (g + 1) * per; k++)
                        amax = fmaxf(amax, fabsf((float)x[m * K + k]));
                    for (int k = g * per; k < (g + 1) * per; k++) {
                        ref += x[m * K + k] * wv[n * K + k];
                        bound += (amax / 127.0f) / 2 * fabs(wv[n * K + k]) +
                                 1e-5 * fabs(x[m * K + k] * wv[n * K + k]);
                    }
                }
                if (!(fabs(got[m * N + n] - ref) <= bound)) {
                    fprintf(stderr, "op 'quant_linear' on %s (%s): y[%d, %d] = %.9g, want %.9g "
                            "within %.3g\n", backend, cn_dtype_name(schemes[s]), m, n,
                            got[m * N + n], ref, bound);
                    th_checks_failed++;
                    m = M;
                    break;
                }
            }
        /* the gradients on the autodiff device, the weight constant: for L = sum(G * y),
         * dL/dx = G @ Wd and dL/db = G summed over the rows (the straight-through estimator) */
        double G[M * N], gx[M * K] = {0}, gb[N] = {0};
        for (int i = 0; i < M * N; i++) G[i] = (i % 5) - 2;
        const int64_t gs[2] = {M, N};
        cn_device ad = cn_autodiff(dev);
        cn_tensor *xa = cn_require_grad(cn_to_device(xt, ad)), *ba = cn_require_grad(cn_to_device(bt, ad));
        cn_tensor *ya = wq ? cn_quant_linear(xa, wq, ba) : NULL;
        cn_grads *gr = ya ? cn_backward(cn_sum(cn_mul(ya, cn_to_device(th_tensor(G, gs, 2, CN_F32), ad))))
                          : NULL;
        if (!gr || th_read(cn_grad(gr, xa), gx) != M * K || th_read(cn_grad(gr, ba), gb) != N) {
            fprintf(stderr, "op 'quant_linear' on %s (%s): no gradients (%s)\n", backend,
                    cn_dtype_name(schemes[s]), cn_last_error());
            th_checks_failed++;
        }
        for (int k = 0; gr && wv && k < M * K; k++) {
            double want = 0, mag = 0;
            for (int n = 0; n < N; n++) {
                want += G[(k / K) * N + n] * wv[n * K + k % K];
                mag += fabs(G[(k / K) * N + n] * wv[n * K + k % K]);
            }
            if (!(fabs(gx[k] - want) <= 1e-5 * (1 + mag))) {
                fprintf(stderr, "op 'quant_linear' on %s (%s): dx[%d] = %.9g, want %.9g\n",
                        backend, cn_dtype_name(schemes[s]), k, gx[k], want);
                th_checks_failed++;
                break;
            }
        }
        for (int n = 0; gr && n < N; n++) {
            double want = 0;
            for (int m = 0; m < M; m++) want += G[m * N + n];
            if (gb[n] != want) {
                fprintf(stderr, "op 'quant_linear' on %s (%s): db[%d] = %.9g, want %.9g\n",
                        backend, cn_dtype_name(schemes[s]), n, gb[n], want);
                th_checks_failed++;
            }
        }
        if (gr) cn_grads_free(gr);
        free(got);
        free(wv);
    }
    cn_scope_end();
}

/* One entry per op of the table, keyed by its number: an op without one fails
 * test_every_op_has_cases. */
static const oc_op ops[CN__OP_ALL] = {
    /* elementwise unary: each value against PyTorch's (abs and relu on values away from the
     * kink at 0, log/sqrt/rsqrt on positive ones); gradients through each derivative */
    [CN_OP_NEG] = {run_unary, .un = cn_neg},
    [CN_OP_ABS] = {run_unary, .un = cn_abs},
    [CN_OP_RELU] = {run_unary, .un = cn_relu},
    [CN_OP_EXP] = {run_unary, .un = cn_exp},
    [CN_OP_LOG] = {run_unary, .un = cn_log},
    [CN_OP_LOG1P] = {run_unary, .un = cn_log1p},
    [CN_OP_SQRT] = {run_unary, .un = cn_sqrt},
    [CN_OP_RSQRT] = {run_unary, .un = cn_rsqrt},
    [CN_OP_SIN] = {run_unary, .un = cn_sin},
    [CN_OP_COS] = {run_unary, .un = cn_cos},
    [CN_OP_TANH] = {run_unary, .un = cn_tanh},
    [CN_OP_SIGMOID] = {run_unary, .un = cn_sigmoid},
    [CN_OP_SILU] = {run_unary, .un = cn_silu},
    /* both approximations: ints[0] = cn_gelu_approx */
    [CN_OP_GELU] = {run_gelu},
    [CN_OP_ERF] = {run_unary, .un = cn_erf},
    /* the roundings off their jumps and sign away from 0 (zero gradients), and on i64; round's
     * ties: test_round_ties_to_even */
    [CN_OP_FLOOR] = {run_unary, .un = cn_floor},
    [CN_OP_CEIL] = {run_unary, .un = cn_ceil},
    [CN_OP_ROUND] = {run_unary, .un = cn_round},
    [CN_OP_TRUNC] = {run_unary, .un = cn_trunc},
    [CN_OP_SIGN] = {run_unary, .un = cn_sign},
    /* reciprocal away from 0; asin, acos, atanh and tan inside (-1, 1); acosh above 1 */
    [CN_OP_RECIPROCAL] = {run_unary, .un = cn_reciprocal},
    [CN_OP_TAN] = {run_unary, .un = cn_tan},
    [CN_OP_ASIN] = {run_unary, .un = cn_asin},
    [CN_OP_ACOS] = {run_unary, .un = cn_acos},
    [CN_OP_ATAN] = {run_unary, .un = cn_atan},
    [CN_OP_SINH] = {run_unary, .un = cn_sinh},
    [CN_OP_COSH] = {run_unary, .un = cn_cosh},
    [CN_OP_ASINH] = {run_unary, .un = cn_asinh},
    [CN_OP_ACOSH] = {run_unary, .un = cn_acosh},
    [CN_OP_ATANH] = {run_unary, .un = cn_atanh},
    /* issue 16's remaining elementwise ops: remainder and fmod off the jumps of a / b (floats:
     * gradients of both inputs) and on i64 with -1 at the minimum; is_nan and is_inf on NaN,
     * +-inf, +-0 and ints; the bitwise ops on negative i64 and shift counts past both ends */
    [CN_OP_REMAINDER] = {run_binary, .bin = cn_remainder},
    [CN_OP_FMOD] = {run_binary, .bin = cn_fmod},
    [CN_OP_HYPOT] = {run_binary, .bin = cn_hypot},
    [CN_OP_REMAINDER_SCALAR] = {run_scalar, .scalar = cn_remainder_scalar},
    [CN_OP_IS_NAN] = {run_unary, .un = cn_is_nan},
    [CN_OP_IS_INF] = {run_unary, .un = cn_is_inf},
    [CN_OP_BITWISE_AND] = {run_binary, .bin = cn_bitwise_and},
    [CN_OP_BITWISE_OR] = {run_binary, .bin = cn_bitwise_or},
    [CN_OP_BITWISE_XOR] = {run_binary, .bin = cn_bitwise_xor},
    [CN_OP_BITWISE_LEFT_SHIFT] = {run_binary, .bin = cn_bitwise_left_shift},
    [CN_OP_BITWISE_RIGHT_SHIFT] = {run_binary, .bin = cn_bitwise_right_shift},
    [CN_OP_BITWISE_NOT] = {run_unary, .un = cn_bitwise_not},
    [CN_OP_BITWISE_AND_SCALAR] = {run_scalar, .scalar = cn_bitwise_and_scalar},
    [CN_OP_BITWISE_OR_SCALAR] = {run_scalar, .scalar = cn_bitwise_or_scalar},
    [CN_OP_BITWISE_XOR_SCALAR] = {run_scalar, .scalar = cn_bitwise_xor_scalar},
    [CN_OP_BITWISE_LEFT_SHIFT_SCALAR] = {run_scalar, .scalar = cn_bitwise_left_shift_scalar},
    [CN_OP_BITWISE_RIGHT_SHIFT_SCALAR] = {run_scalar, .scalar = cn_bitwise_right_shift_scalar},
    [CN_OP_LOGICAL_XOR] = {run_binary, .bin = cn_logical_xor},
    /* the activations off their kinks; prelu with a weight per channel and a single one (its
     * gradient summed back through the view of the weight) */
    [CN_OP_LEAKY_RELU] = {run_scalar, .scalar = cn_leaky_relu},
    [CN_OP_PRELU] = {run_binary, .bin = cn_prelu},
    [CN_OP_HARD_SIGMOID] = {run_unary, .un = cn_hard_sigmoid},
    [CN_OP_LOG_SIGMOID] = {run_unary, .un = cn_log_sigmoid},
    [CN_OP_HARD_SWISH] = {run_unary, .un = cn_hard_swish},
    [CN_OP_SOFTPLUS] = {run_softplus},
    [CN_OP_ELU] = {run_scalar, .scalar = cn_elu},
    /* comparisons with a scalar: floats on eighths (ties), ints with a fractional scalar */
    [CN_OP_EQ_SCALAR] = {run_scalar, .scalar = cn_eq_scalar},
    [CN_OP_NE_SCALAR] = {run_scalar, .scalar = cn_ne_scalar},
    [CN_OP_LT_SCALAR] = {run_scalar, .scalar = cn_lt_scalar},
    [CN_OP_LE_SCALAR] = {run_scalar, .scalar = cn_le_scalar},
    [CN_OP_GT_SCALAR] = {run_scalar, .scalar = cn_gt_scalar},
    [CN_OP_GE_SCALAR] = {run_scalar, .scalar = cn_ge_scalar},
    /* elementwise with scalars (reals); clamp's bounds off the inputs' grid */
    [CN_OP_ADD_SCALAR] = {run_scalar, .scalar = cn_add_scalar},
    [CN_OP_MUL_SCALAR] = {run_scalar, .scalar = cn_mul_scalar},
    [CN_OP_POW_SCALAR] = {run_scalar, .scalar = cn_pow_scalar},
    [CN_OP_CLAMP] = {run_clamp},
    /* elementwise binary, b broadcast against a: the gradient of b is summed back to its shape */
    [CN_OP_ADD] = {run_binary, .bin = cn_add},
    [CN_OP_SUB] = {run_binary, .bin = cn_sub},
    [CN_OP_MUL] = {run_binary, .bin = cn_mul},
    [CN_OP_DIV] = {run_binary, .bin = cn_div},
    [CN_OP_POW] = {run_binary, .bin = cn_pow},
    [CN_OP_MAXIMUM] = {run_binary, .bin = cn_maximum},
    [CN_OP_MINIMUM] = {run_binary, .bin = cn_minimum},
    [CN_OP_ATAN2] = {run_binary, .bin = cn_atan2},
    /* comparisons on eighths (ties included) and logic on bools: exact bools */
    [CN_OP_EQ] = {run_binary, .bin = cn_eq},
    [CN_OP_NE] = {run_binary, .bin = cn_ne},
    [CN_OP_LT] = {run_binary, .bin = cn_lt},
    [CN_OP_LE] = {run_binary, .bin = cn_le},
    [CN_OP_GT] = {run_binary, .bin = cn_gt},
    [CN_OP_GE] = {run_binary, .bin = cn_ge},
    [CN_OP_LOGICAL_AND] = {run_binary, .bin = cn_logical_and},
    [CN_OP_LOGICAL_OR] = {run_binary, .bin = cn_logical_or},
    [CN_OP_LOGICAL_NOT] = {run_not},
    /* cond broadcast with a and b; gradients of a and b (cond is bool) */
    [CN_OP_WHERE] = {run_where},
    /* cast: to the other float dtype (rounding to nearest even), to i64 (truncation toward zero),
     * to bool (-0 is false); copy: a dense clone of a strided input */
    [CN_OP_CAST] = {run_cast},
    [CN_OP_COPY] = {run_copy},
    /* fill: cn_full against the constant (torch.full), float and i64 */
    [CN_OP_FILL] = {run_fill},
    /* random: statistics, not PyTorch's values (see the top of the file) */
    [CN_OP_RAND_UNIFORM] = {.property = check_rand_uniform},
    /* quantized weights: no PyTorch case (fbgemm rounds otherwise); every scheme against the
     * dequantized product in double within the activation quantization bound (tests/test_quant.c
     * tests the kernels further) */
    [CN_OP_QUANT_LINEAR] = {.property = check_quant_linear},
    [CN_OP_RAND_NORMAL] = {.property = check_rand_normal},
    /* reductions over a dim (kept and not) and over all elements; max/min/argmax/argmin on
     * distinct values (no ties), prod away from zero */
    [CN_OP_SUM] = {run_reduce, .all = cn_sum, .dim = cn_sum_dim},
    [CN_OP_MEAN] = {run_reduce, .all = cn_mean, .dim = cn_mean_dim},
    [CN_OP_MAX] = {run_reduce, .all = cn_max, .dim = cn_max_dim},
    [CN_OP_MIN] = {run_reduce, .all = cn_min, .dim = cn_min_dim},
    [CN_OP_PROD] = {run_reduce, .all = cn_prod, .dim = cn_prod_dim},
    [CN_OP_ARGMAX] = {run_reduce, .all = cn_argmax, .dim = cn_argmax_dim},
    [CN_OP_ARGMIN] = {run_reduce, .all = cn_argmin, .dim = cn_argmin_dim},
    /* sample variance over a dim, population variance over all */
    [CN_OP_VAR] = {run_var},
    [CN_OP_LOGSUMEXP] = {run_reduce, .all = cn_logsumexp, .dim = cn_logsumexp_dim},
    [CN_OP_SOFTMAX] = {run_along, .along = cn_softmax},
    [CN_OP_LOG_SOFTMAX] = {run_along, .along = cn_log_softmax},
    /* matmul 2-D and with a broadcast batch; indexing with repeated indices (gradients add up) */
    [CN_OP_MATMUL] = {run_binary, .bin = cn_matmul},
    [CN_OP_GATHER] = {run_gather},
    [CN_OP_SCATTER_ADD] = {run_scatter_add},
    [CN_OP_INDEX_SELECT] = {run_index_select},
    [CN_OP_ONE_HOT] = {run_one_hot},
    /* conv2d with stride, padding, dilation, groups and bias, and without; pools with
     * overlapping padded windows (max on distinct values) */
    [CN_OP_CONV2D] = {run_conv2d},
    [CN_OP_CONV2D_RELU] = {run_conv2d_relu},
    [CN_OP_CONV2D_MAX_POOL2D] = {run_conv2d_max_pool2d},
    /* issue 16's convolutions: groups, bias, unequal strides and dilations, and an
     * output_padding past the stride (below the dilation) */
    [CN_OP_CONV_TRANSPOSE2D] = {run_conv_transpose2d},
    [CN_OP_CONV1D] = {run_conv1d},
    [CN_OP_CONV_TRANSPOSE1D] = {run_conv_transpose1d},
    [CN_OP_CONV3D] = {run_conv3d},
    [CN_OP_CONV_TRANSPOSE3D] = {run_conv_transpose3d},
    [CN_OP_CONV3D_BACKWARD_WEIGHT] = {run_conv3d_bwd_weight},
    [CN_OP_MAX_POOL2D] = {run_pool, .pool = cn_max_pool2d},
    [CN_OP_AVG_POOL2D] = {run_pool, .pool = cn_avg_pool2d},
    /* the backward kernels through their router entries, against torch.nn.grad and autograd */
    [CN_OP_CONV2D_BACKWARD_INPUT] = {run_conv_bwd_input},
    [CN_OP_CONV2D_BACKWARD_WEIGHT] = {run_conv_bwd_weight},
    [CN_OP_MAX_POOL2D_BACKWARD] = {run_max_pool_bwd},
    [CN_OP_MAX_POOL2D_BACKWARD_INDEX] = {run_max_pool_bwd_index},
    /* the three outputs of conv2d_max_pool2d's whole backward, against autograd's conv2d
     * gradients of max_unpool2d's expansion */
    [CN_OP_CONV2D_MAX_POOL2D_BACKWARD] = {run_conv_pool_bwd},
    [CN_OP_AVG_POOL2D_BACKWARD] = {run_avg_pool_bwd},
    /* the fused backward of relu, tanh, sigmoid, silu and gelu (both forms), against aten's
     * threshold/tanh/sigmoid/silu/gelu_backward */
    [CN_OP_ACTIVATION_BACKWARD] = {run_act_bwd},
    /* softmax's and log_softmax's backward along a middle and the last dim */
    [CN_OP_SOFTMAX_BACKWARD] = {run_softmax_bwd},
    /* two steps of cn_sgd_new / cn_optimizer_step against torch.optim.SGD: nesterov with weight
     * decay, dampening, and plain (no momentum buffer) */
    [CN_OP_SGD_STEP] = {run_sgd},
    [CN_OP_ADAMW_STEP] = {run_adamw},
    [CN_OP_LINEAR] = {run_linear},
    /* both forms, with a bias and without (x 3-D); the gradient through the saved gelu' */
    [CN_OP_LINEAR_GELU] = {run_linear_gelu},
    /* with a bias and without (x 3-D); r's gradient is the output's */
    [CN_OP_LINEAR_ADD] = {run_linear_add},
    /* scans along a dim (cumprod with zeros: its gradient must not divide by x), cumprod's
     * backward kernel against autograd's, cummax / cummin / sort values and indices (distinct
     * values for the gradients, ties on ints), any / all on float, int and bool */
    [CN_OP_CUMSUM] = {run_scan, .along = cn_cumsum},
    [CN_OP_CUMPROD] = {run_scan, .along = cn_cumprod},
    [CN_OP_CUMPROD_BACKWARD] = {run_cumprod_bwd},
    [CN_OP_CUMMAX] = {run_cumext},
    [CN_OP_CUMMIN] = {run_cumext},
    [CN_OP_SORT] = {run_sort},
    [CN_OP_ANY] = {run_reduce, .all = cn_any, .dim = cn_any_dim},
    [CN_OP_ALL] = {run_reduce, .all = cn_all, .dim = cn_all_dim},
    /* indexing of issue 16, on float, i64 and bool: the mask broadcast, triangles off the main
     * diagonal, flips of several dims, repeats adding a leading dim; scatter and index_copy on
     * distinct index values (PyTorch leaves repeats undefined), index_add on repeated ones */
    [CN_OP_MASKED_FILL] = {run_masked_fill},
    [CN_OP_TRIL] = {run_tril},
    [CN_OP_TRIU] = {run_triu},
    [CN_OP_FLIP] = {run_flip},
    [CN_OP_REPEAT] = {run_repeat},
    [CN_OP_SCATTER] = {run_scatter},
    [CN_OP_SLICE_ASSIGN] = {run_slice_assign},
    [CN_OP_INDEX_COPY] = {run_index_copy},
    [CN_OP_INDEX_ADD] = {run_index_add},
    /* unfold with overlapping windows (gradients add up); nonzero and masked_select, whose shape
     * depends on the values, with -0.0 (zero) and a mask broadcast against x */
    [CN_OP_UNFOLD] = {run_unfold},
    [CN_OP_NONZERO] = {run_nonzero},
    [CN_OP_MASKED_SELECT] = {run_masked_select},
    /* gather_nd of slices and of entries; scatter_nd with each reduction, repeated tuples (add,
     * mul with a zero factor, min and max on distinct values) */
    [CN_OP_GATHER_ND] = {run_gather_nd},
    [CN_OP_SCATTER_ND] = {run_scatter_nd},
    /* attention against torch's scaled_dot_product_attention: causal with Lq > Lk and Lq < Lk
     * (top-left), a mask broadcast over the batch (its gradient summed back), a mask with -inf
     * and a row with no key (zeros, no gradient), mask and causal together; the backward kernel
     * against autograd's dq, dk, dv and the scores' gradient */
    [CN_OP_SDPA] = {run_sdpa},
    [CN_OP_SDPA_BACKWARD] = {run_sdpa_bwd},
    /* ctc_loss against torch's: padded and concatenated targets, repeated labels, a custom
     * blank, each reduction, an impossible sample under zero_infinity, an empty target, one
     * unbatched sample; its backward kernel against autograd's gradient less PyTorch's extra
     * exp(log_probs) term (see cn_ctc_loss), which the finite differences here also confirm */
    [CN_OP_CTC_LOSS] = {run_ctc},
    [CN_OP_CTC_LOSS_BACKWARD] = {run_ctc_bwd},
    /* resampling of issue 16: interpolate's every mode, sizes and scale factors, align_corners
     * on and off, 1-D and 2-D; grid_sample_2d's modes and paddings with grid points outside x;
     * the backward kernels against PyTorch's autograd */
    [CN_OP_INTERPOLATE] = {run_interpolate},
    [CN_OP_INTERPOLATE_BACKWARD] = {run_interpolate_bwd},
    [CN_OP_GRID_SAMPLE_2D] = {run_grid_sample},
    [CN_OP_GRID_SAMPLE_2D_BACKWARD] = {run_grid_sample_bwd},
    /* padding and pooling of issue 16: pad in every mode (crops, a tuple of 4 dims, int and
     * bool constants), its backward kernel per dim against autograd; adaptive average pools
     * with overlapping and growing windows, 1-D to 3-D, and their backward kernel */
    [CN_OP_PAD] = {run_pad},
    [CN_OP_PAD_BACKWARD] = {run_pad_bwd},
    [CN_OP_ADAPTIVE_AVG_POOL] = {run_adaptive_avg_pool},
    [CN_OP_ADAPTIVE_AVG_POOL_BACKWARD] = {run_adaptive_avg_pool_bwd},
    /* max pooling with dilation, padding and ceil mode: values (gradient) and indices */
    [CN_OP_MAX_POOL2D_WITH_INDICES] = {run_max_pool_ex},
    /* im2col / col2im with dilation, padding, strides and overlapping blocks (fold adds) */
    [CN_OP_UNFOLD4D] = {run_unfold4d},
    [CN_OP_FOLD4D] = {run_fold4d},
    /* deformable convolution against a float64 reference of torchvision's formula (checked
     * against torchvision.ops.deform_conv2d by the generator): DCNv1 with a bias, DCNv2 with
     * weight and offset groups, unequal strides, paddings and dilations, offset groups other
     * than the weight's, samples partly and wholly outside x; its backward kernel's every
     * gradient against autograd's */
    [CN_OP_DEFORM_CONV2D] = {run_deform_conv2d},
    [CN_OP_DEFORM_CONV2D_BACKWARD] = {run_deform_conv2d_bwd},
    /* the real FFT: even and odd n, cut and zero-padded, every norm, dims not last; irfft with
     * the ignored imaginary parts of bin 0 and the Nyquist bin non-zero */
    [CN_OP_RFFT] = {run_rfft},
    [CN_OP_IRFFT] = {run_irfft},
    /* the fused normalisations (issue 17): layer_norm with and without weight and bias, over 1
     * and 2 dims, eps 0; rms_norm with and without weight, PyTorch's default eps; the backward
     * kernels against autograd's dx, dw and db */
    [CN_OP_LAYER_NORM] = {run_layer_norm},
    [CN_OP_LAYER_NORM_BACKWARD] = {run_norm_bwd},
    [CN_OP_RMS_NORM] = {run_rms_norm},
    [CN_OP_RMS_NORM_BACKWARD] = {run_norm_bwd},
    /* views and cat: values against PyTorch's, gradients back through the view */
    [CN__OP_TRANSPOSE] = {run_transpose},
    [CN__OP_PERMUTE] = {run_permute},
    [CN__OP_SLICE] = {run_slice},
    [CN__OP_VIEW] = {run_reshape},
    [CN__OP_EXPAND] = {run_expand},
    [CN__OP_CAT] = {run_cat},
};

/* ---- cases and ops ------------------------------------------------------------------------ */

/* The op number of a name of the table, or -1. */
static int op_number(const char *name) {
    for (int op = 0; op < CN__OP_ALL; op++) {
        const cn__op_decl *decl = cn__op_decl_of(op);
        if (decl && strcmp(decl->name, name) == 0) return op;
    }
    return -1;
}

static const oc_op *op_of(const oc_data *d) { return &ops[op_number(d->op)]; }

/* Case d's op on inputs x. */
static cn_tensor *call_op(const oc_data *d, cn_tensor *const *x, cn_dtype dt, cn_device dev) {
    oc_call c = {op_of(d), d, x, dt, dev};
    return c.o->run(&c);
}

static int has_float_input(const oc_data *d) {
    for (int i = 0; i < d->n_in; i++)
        if (d->in[i].kind == 'f') return 1;
    return 0;
}

/* Whether case d's gradient is checked: its op is differentiable and it has float inputs and a
 * float output. */
static int grad_case(const oc_data *d) {
    int op = op_number(d->op);
    const cn__op_decl *decl = cn__op_decl_of(op);
    return decl && decl->differentiable && d->out.kind == 'f' && has_float_input(d);
}

/* ---- the walk: every op has its cases, formula and kernels -------------------------------- */

static void test_every_op_has_cases(void) {
    for (int op = 0; op < CN__OP_ALL; op++) {
        const cn__op_decl *decl = cn__op_decl_of(op);
        if (!decl) {
            fprintf(stderr, "op %d has no row in the op table (src/core/op_table.c)\n", op);
            th_checks_failed++;
            continue;
        }
        if (!ops[op].run && !ops[op].property) {
            fprintf(stderr, "op '%s' has no forward case: %s\n", decl->name, FIX_CASE);
            th_checks_failed++;
            continue;
        }
        int forward = 0, grads = 0;
        for (int c = 0; c < N_CASES; c++)
            if (strcmp(oc_cases[c].op, decl->name) == 0) {
                forward++;
                grads += grad_case(&oc_cases[c]);
            }
        if (ops[op].run && !forward) {
            fprintf(stderr,
                    "op '%s' has no reference values in tests/data/op_cases.inc: add a "
                    "case to tests/data/gen_op_cases.py and run it\n",
                    decl->name);
            th_checks_failed++;
        }
        if (decl->differentiable) {
            if (!ad_has_formula(op)) {
                fprintf(stderr,
                        "op '%s' is differentiable in the op table but has no gradient "
                        "formula (src/autodiff/formulas.c)\n",
                        decl->name);
                th_checks_failed++;
            }
            if (!grads && !ops[op].property) { /* a property checks its own gradients */
                fprintf(stderr,
                        "op '%s' is differentiable but no case checks its gradient "
                        "(one with float inputs and a float output): %s\n",
                        decl->name, FIX_CASE);
                th_checks_failed++;
            }
        }
    }
    /* and the data names only ops of the table, each variant once */
    for (int c = 0; c < N_CASES; c++) {
        if (op_number(oc_cases[c].op) < 0) {
            fprintf(stderr,
                    "tests/data/op_cases.inc: case '%s' names op '%s', which the op table "
                    "lacks\n",
                    oc_cases[c].variant, oc_cases[c].op);
            th_checks_failed++;
        }
        for (int e = 0; e < c; e++)
            if (strcmp(oc_cases[e].variant, oc_cases[c].variant) == 0) {
                fprintf(stderr, "tests/data/op_cases.inc: case '%s' twice\n", oc_cases[c].variant);
                th_checks_failed++;
            }
    }
}

/* Every registered backend (the CPU; CUDA once its module loaded, device or not) has a kernel for
 * every op that has one. */
/* The router's hot path reads the dtypes of a kinds mask from a table written by hand
 * (cn__kinds_dtypes_table); it must say what each dtype's kind says. */
static void test_kinds_dtypes_table_matches_the_dtypes_kinds(void) {
    for (unsigned kinds = 0; kinds < (1u << CN_KIND_QUANTIZED); kinds++) {
        unsigned want = 0;
        for (int dt = 0; dt < CN_DTYPE_COUNT; dt++)
            if ((kinds >> cn_dtype_kind((cn_dtype)dt)) & 1u) want |= 1u << dt;
        CHECK(cn__kinds_dtypes_table[kinds] == want);
        CHECK(cn__kinds_dtypes(kinds) == want);
    }
}

static void test_every_backend_has_every_kernel(void) {
    int n = 0;
    for (int id = 0; cn_backend_get(id); id++, n++) {
        const cn_backend *b = cn_backend_get(id);
        for (int op = 0; op < CN_OP_COUNT; op++)
            if (!b->kernels[op]) {
                fprintf(stderr, "backend '%s' has no kernel for op '%s'\n", b->name,
                        cn_op_name((cn_op)op));
                th_checks_failed++;
            }
    }
    CHECK(n >= 1);
    printf("     %d backend%s registered, each checked for %d kernels\n", n, n == 1 ? "" : "s",
           (int)CN_OP_COUNT);
}

/* ---- forward ------------------------------------------------------------------------------- */

static cn_dtype dtype_of_kind(char kind, cn_dtype dt) {
    return kind == 'i' ? CN_I64 : kind == 'b' ? CN_BOOL : dt;
}

/* Input i of case d on dev, floats in dt (a leaf that requires grad when `leaf`, dev then being an
 * autodiff device); values from v (the case's unless given). Scope-owned. */
static cn_tensor *make_input(const oc_tensor *in, const double *v, cn_dtype dt, cn_device dev,
                             int leaf) {
    cn_tensor *t = cn_from_data(v ? v : in->v, in->shape, in->ndim, CN_F64, dev);
    cn_dtype want = dtype_of_kind(in->kind, dt);
    if (t && want != CN_F64) t = cn_cast(t, want);
    if (leaf && in->kind == 'f') t = cn_require_grad(t);
    return t;
}

static int64_t numel_of(const oc_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

/* Whether dev's backend declares a kernel for case d's op in float dtype dt (cn_backend.dtypes:
 * the mask of the first value input's dtype, the output's for fill). A backend other than the CPU
 * may leave a dtype out, and the run is then skipped with a line saying so; the CPU, the
 * reference backend, must run every case. */
static int supported(const oc_data *d, cn_device dev, const char *backend, cn_dtype dt) {
    int op = op_number(d->op);
    const cn__op_decl *decl = cn__op_decl_of(op);
    const cn_backend *b = cn_backend_get(dev.backend);
    if (!cn__op_has_kernel(op) || !b || !b->dtypes[op]) return 1;
    char kind = d->n_in > decl->value_from ? d->in[decl->value_from].kind : d->out.kind;
    cn_dtype first = dtype_of_kind(kind, dt);
    if ((b->dtypes[op] >> first) & 1u) return 1;
    if (dev.backend == CN_BACKEND_CPU) return 1; /* runs, and fails with the router's message */
    printf("skip op '%s' case %s on %s in %s: the backend declares no %s kernel\n", d->op,
           d->variant, backend, cn_dtype_name(dt), cn_dtype_name(first));
    return 0;
}

/* Case d on dev in dt against PyTorch's values. */
static void check_forward(const oc_data *d, cn_device dev, const char *backend, cn_dtype dt) {
    char what[160];
    snprintf(what, sizeof what, "op '%s' case %s on %s in %s", d->op, d->variant, backend,
             cn_dtype_name(dt));
    cn_scope_begin();
    cn_tensor *x[OC_MAX_IN] = {0};
    int ok = 1;
    for (int i = 0; i < d->n_in; i++)
        ok = ok && (x[i] = make_input(&d->in[i], NULL, dt, dev, 0)) != NULL;
    cn_tensor *y = ok ? call_op(d, x, dt, dev) : NULL;
    if (!y) {
        fprintf(stderr, "%s: failed (%s)\n", what, cn_last_error());
        th_checks_failed++;
    } else {
        /* the run's float dtype (cast's float case: the other one), i64 or bool */
        cn_dtype want = dtype_of_kind(d->out.kind, dt);
        if (op_number(d->op) == CN_OP_CAST && d->out.kind == 'f')
            want = dt == CN_F64 ? CN_F32 : CN_F64;
        int dtype_ok = cn_dtype_of(y) == want;
        if (!dtype_ok) {
            fprintf(stderr, "%s: result is %s\n", what, cn_dtype_name(cn_dtype_of(y)));
            th_checks_failed++;
        }
        if (!cn_device_eq(cn_device_of(y), dev)) {
            fprintf(stderr, "%s: result is on another device\n", what);
            th_checks_failed++;
        }
        th_check_shape(what, y, d->out.shape, d->out.ndim);
        double tol = d->out.kind != 'f' ? 0 : dt == CN_F32 ? TOL_F32 : TOL_F64;
        th_check_values(what, y, d->out.v, numel_of(&d->out), tol);
    }
    cn_scope_end();
    cn_clear_error();
}

static int n_forward;

/* round's ties go to the even neighbour, as torch.round (the cases keep off them: its gradient
 * check would see the jump); 0.5 - 2^-25 is below the tie, where floor(x + 0.5) would give 1 in
 * f32. The expected values are torch.round's. */
static void check_round_ties(cn_device dev, const char *backend) {
    static const double x[8] = {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997019767761};
    static const double want[8] = {-2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 4.0, 0.0};
    const int64_t shape[1] = {8};
    for (int k = 0; k < 2; k++) {
        cn_dtype dt = k ? CN_F32 : CN_F64;
        char what[96];
        snprintf(what, sizeof what, "round's ties to even on %s in %s", backend, cn_dtype_name(dt));
        cn_scope_begin();
        cn_tensor *t = cn_cast(cn_from_data(x, shape, 1, CN_F64, dev), dt);
        th_check_values(what, t ? cn_round(t) : NULL, want, 8, 0);
        cn_scope_end();
        cn_clear_error();
    }
}

static void forward_all(cn_device dev, const char *backend) {
    for (int c = 0; c < N_CASES; c++) {
        const oc_data *d = &oc_cases[c];
        int op = op_number(d->op);
        if (op < 0 || !ops[op].run) continue; /* reported by the walk */
        /* f64, then f32 when there is a float to compute in it */
        for (int k = 0; k < 2; k++) {
            cn_dtype dt = k ? CN_F32 : CN_F64;
            if (k && !has_float_input(d) && d->out.kind != 'f') break;
            if (!supported(d, dev, backend, dt)) continue;
            check_forward(d, dev, backend, dt);
            n_forward++;
        }
    }
    for (int op = 0; op < CN__OP_ALL; op++)
        if (ops[op].property) ops[op].property(dev, backend);
    check_round_ties(dev, backend);
}

/* ---- gradients ----------------------------------------------------------------------------- */

static int n_grad_cases;
static int64_t n_grad_entries;

/* R: (k + 1/2) / 8 for k in [-16, 16): never zero, exact in f32. */
static void weights(uint64_t seed, double *r, int64_t n) {
    for (int64_t k = 0; k < n; k++)
        r[k] = ((double)((int)(th_lcg(&seed) % 32) - 16) + 0.5) / 8.0;
}

/* L = sum(y * R) of case d with input values v, on the concrete dev; NAN on failure. */
static double concrete_loss(const oc_data *d, double *const *v, const double *r, int64_t n_out,
                            cn_device dev) {
    double loss = NAN;
    cn_scope_begin();
    cn_tensor *x[OC_MAX_IN] = {0};
    int ok = 1;
    for (int i = 0; i < d->n_in; i++)
        ok = ok && (x[i] = make_input(&d->in[i], v[i], CN_F64, dev, 0)) != NULL;
    cn_tensor *y = ok ? call_op(d, x, CN_F64, dev) : NULL;
    if (y && cn_numel(y) == n_out) {
        double *yv = th_values(y);
        loss = 0;
        for (int64_t k = 0; k < n_out; k++)
            loss += r[k] * yv[k];
        free(yv);
    }
    cn_scope_end();
    return loss;
}

static void check_gradient(const oc_data *d, cn_device dev, const char *backend) {
    char what[160];
    snprintf(what, sizeof what, "gradient of op '%s' case %s on %s", d->op, d->variant, backend);
    double eps = d->eps > 0 ? d->eps : GRAD_EPS, tol = d->tol > 0 ? d->tol : GRAD_TOL;
    int64_t n_out = numel_of(&d->out);
    double *r = th_alloc_doubles(n_out);
    uint64_t seed = 0;
    for (const char *s = d->variant; *s; s++)
        seed = seed * 131 + (unsigned char)*s;
    weights(seed, r, n_out);
    double *v[OC_MAX_IN] = {0};
    for (int i = 0; i < d->n_in; i++) {
        int64_t n = numel_of(&d->in[i]);
        v[i] = th_alloc_doubles(n);
        memcpy(v[i], d->in[i].v, sizeof(double) * (size_t)n);
    }

    /* analytic: cn_backward on the autodiff device */
    cn_scope_begin();
    cn_device ad = cn_autodiff(dev);
    cn_tensor *x[OC_MAX_IN] = {0};
    int ok = 1;
    for (int i = 0; i < d->n_in; i++)
        ok = ok && (x[i] = make_input(&d->in[i], NULL, CN_F64, ad, 1)) != NULL;
    cn_tensor *y = ok ? call_op(d, x, CN_F64, ad) : NULL;
    cn_tensor *rt = y ? cn_from_data(r, cn_shape(y), cn_ndim(y), CN_F64, ad) : NULL;
    if (rt && cn_dtype_of(y) != CN_F64) rt = cn_cast(rt, cn_dtype_of(y));
    cn_grads *g = rt ? cn_backward(cn_sum(cn_mul(y, rt))) : NULL;
    if (!g) {
        fprintf(stderr, "%s: forward or backward failed (%s)\n", what, cn_last_error());
        th_checks_failed++;
    }
    for (int i = 0; g && i < d->n_in; i++) {
        if (d->in[i].kind != 'f') continue;
        int64_t n = numel_of(&d->in[i]);
        cn_tensor *gi = cn_grad(g, x[i]);
        if (!gi) {
            fprintf(stderr, "%s: no gradient for input %d (%s)\n", what, i, cn_last_error());
            th_checks_failed++;
            continue;
        }
        th_check_shape(what, gi, d->in[i].shape, d->in[i].ndim);
        double *got = th_values(gi);
        /* numeric: central differences of the concrete loss */
        int64_t bad = 0, worst = -1;
        double worst_err = 0, worst_num = 0;
        for (int64_t j = 0; j < n; j++) {
            double keep = v[i][j];
            v[i][j] = keep + eps;
            double lp = concrete_loss(d, v, r, n_out, dev);
            v[i][j] = keep - eps;
            double lm = concrete_loss(d, v, r, n_out, dev);
            v[i][j] = keep;
            double num = (lp - lm) / (2 * eps);
            double err = fabs(got[j] - num) / (1 + fabs(num));
            if (!(err <= tol)) {
                bad++;
                if (worst < 0 || !(err <= worst_err)) {
                    worst = j;
                    worst_err = err;
                    worst_num = num;
                }
            }
        }
        if (bad) {
            fprintf(stderr,
                    "%s: dL/dx%d[%lld] = %.12g, finite difference %.12g (%lld of %lld "
                    "entries off by more than %g)\n",
                    what, i, (long long)worst, got[worst], worst_num, (long long)bad, (long long)n,
                    tol);
            th_checks_failed++;
        }
        n_grad_entries += n;
        free(got);
    }
    cn_grads_free(g);
    cn_scope_end();
    cn_clear_error();
    n_grad_cases++;
    for (int i = 0; i < d->n_in; i++)
        free(v[i]);
    free(r);
}

static void gradients_all(cn_device dev, const char *backend) {
    for (int c = 0; c < N_CASES; c++)
        if (grad_case(&oc_cases[c]) && op_of(&oc_cases[c])->run && /* else: the walk says */
            supported(&oc_cases[c], dev, backend, CN_F64))
            check_gradient(&oc_cases[c], dev, backend);
}

/* ---- the backends -------------------------------------------------------------------------- */

static cn_device current;
static const char *current_name;

static void test_forward(void) {
    n_forward = 0;
    forward_all(current, current_name);
    printf("     %s: %d forward runs of %d cases (f64 and f32), and the random ops\n", current_name,
           n_forward, N_CASES);
}

static void test_gradients(void) {
    n_grad_cases = 0;
    n_grad_entries = 0;
    gradients_all(current, current_name);
    printf("     %s: %d gradient checks, %lld entries by finite differences\n", current_name,
           n_grad_cases, (long long)n_grad_entries);
}

static void test_cuda(void) {
    cn_backend_status st;
    CHECK(cn_backend_status_of("cuda", &st) == CN_OK);
    if (st.id < 0 || st.devices <= 0) {
        char *nl = strchr(st.why, '\n'); /* its first line says why */
        if (nl) *nl = '\0';
        printf("skip cuda: %s (%s)\n", st.id < 0 ? "the module does not load" : "no device",
               st.why);
        return;
    }
    char name[32];
    snprintf(name, sizeof name, "cuda:0");
    current.backend = (int16_t)st.id;
    current.index = 0;
    current.autodiff = 0;
    current.checkpoint = 0;
    current_name = name;
    test_forward();
    test_gradients();
}

int main(void) {
    current = cn_cpu();
    current_name = "cpu";
    cn_backend_status st;
    /* load the CUDA module when there is one, so that the completeness check covers it */
    cn_backend_status_of("cuda", &st);
    cn_clear_error();
    RUN(test_every_op_has_cases);
    RUN(test_kinds_dtypes_table_matches_the_dtypes_kinds);
    RUN(test_every_backend_has_every_kernel);
    RUN(test_forward);
    RUN(test_gradients);
    RUN(test_cuda);
    return th_finish();
}
