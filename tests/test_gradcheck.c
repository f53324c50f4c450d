/* Finite-difference gradient checks, in f64, for every differentiable op.
 *
 * Each case makes random leaves x_i on an autodiff device, computes y = op(x...) and the loss
 * L = sum(y * R) with a fixed random R of y's shape (so every output element weighs differently),
 * and compares cn_backward's dL/dx_i with the central difference
 *     (L(x_i[j] + eps) - L(x_i[j] - eps)) / (2 eps)
 * where L is evaluated on the concrete CPU device (no autodiff involved) and summed here in double
 * from cn_read. The finite differences are the oracle: they run forward ops only.
 *
 * Every case runs on cn_autodiff(cn_cpu()) and on
 * cn_autodiff_checkpointed(cn_cpu(), CN_CHECKPOINT_BALANCED), which recomputes memory-bound values
 * in backward; both must match the same numbers. Each also runs with a second loss,
 * L = sum(R * y^2) / 2, whose backward reads y itself: under checkpointing y is then recomputed by
 * replaying the op, so a wrong replay shows (with sum(R y) nothing reads y). The autodiff forward
 * loss must equal the concrete one, and each case must leave no tensor alive.
 *
 * Tolerance: |analytic - numeric| <= tol * (1 + |numeric|), with eps = 1e-6 and tol = 1e-6. In
 * f64 the central difference is off by about eps^2 |L'''| (truncation, ~1e-12 here) plus
 * 1e-16 |L| / eps (rounding, ~1e-9 for the |L| < 100 of these small shapes), so 1e-6 leaves a
 * wide margin while a wrong formula is off by the size of the gradient itself. The f32 cast
 * chain uses eps = 1e-3 and tol = 1e-3 (f32 rounding, ~6e-8, divided by 2 eps).
 *
 * Inputs keep away from kinks and domain edges, so each function is smooth within eps of them.
 *
 * Input specs: each input is KIND[VIEW][d0,d1,...], separated by spaces: "u[3,1] pT[4,3] dS[2,9]".
 *   KIND  u: uniform in [-1, 1]; p: uniform in [0.5, 2] (log, sqrt, rsqrt, pow's base, divisors);
 *         a: +-[0.5, 1.5] (away from zero: prod); d: distinct values at least 0.03 apart, with
 *         |x| >= 0.15 (abs, relu, clamp, max/min, maximum/minimum, max_pool: no ties, no kinks).
 *   VIEW  none: the leaf itself is the op's input; T: transpose(leaf, -1, -2) is; S: the stepped
 *         slice leaf[..., 1::2] is (a leaf [..., 2n+1] gives [..., n]). T and S make the op's
 *         input non-contiguous, and the gradient must flow back through the view into the leaf
 *         (zero where S skipped). */
#include <stdint.h>

#include "harness.h"

#define GC_MAX_IN 4
#define GC_EPS    1e-6
#define GC_TOL    1e-6

static cn_device devices[2];
static const char *const device_names[2] = {"autodiff", "checkpointed"};

/* The two losses (see the top of the file). */
#define GC_LOSSES 2
static const char *const loss_names[GC_LOSSES] = {"L = sum(R y)", "L = sum(R y^2) / 2"};
static long long gc_cases, gc_entries;

/* ---- cases --------------------------------------------------------------------------------- */

typedef struct gc_args gc_args;

/* The op under test: y from the op's inputs x[0..n). Everything it makes is owned by the scope
 * open around it, so it releases nothing. */
typedef cn_tensor *(*gc_fn)(cn_tensor *const *x, int n, const gc_args *a);

/* Parameters of the op under test; each gc_fn reads the fields it needs. */
struct gc_args {
    cn_tensor *(*un)(cn_tensor *);
    cn_tensor *(*bin)(cn_tensor *, cn_tensor *);
    int kind; /* which reduction, view or piece */
    int all;  /* reductions: over all elements */
    int dim, keepdim;
    double s0, s1;             /* scalar operands */
    int64_t ints[CN_MAX_DIMS]; /* a shape, a permutation, slice bounds, a size */
    int n_ints;
    const int64_t *index; /* gather, scatter_add, index_select */
    int64_t index_shape[2];
    int index_ndim;
    cn_conv2d_params conv;
    cn_pool2d_params pool;
    double eps, tol; /* 0: GC_EPS, GC_TOL */
};

typedef struct gc_input {
    char kind, view;
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    int64_t numel;
    double *v; /* the leaf's values, row-major */
} gc_input;

typedef struct gc_case {
    char name[160];
    gc_fn fn;
    const gc_args *args;
    int n_in;
    gc_input in[GC_MAX_IN];
    double eps, tol;
    int64_t n_out;
    double *r; /* R, n_out values */
    double *y; /* scratch for reading y */
} gc_case;

/* ---- random values (splitmix64: fixed per case, independent of the library) --------------- */

static uint64_t rng_state;

static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_uniform(double lo, double hi) {
    return lo + (hi - lo) * (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0);
}

static double rng_sign(void) { return (rng_next() >> 63) ? -1.0 : 1.0; }

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

/* Parses the input spec (see the top of the file) into in; returns the input count or -1. */
static int parse_spec(const char *spec, gc_input *in) {
    int n = 0;
    const char *s = spec;
    while (*s) {
        if (*s == ' ') {
            s++;
            continue;
        }
        if (n == GC_MAX_IN || !strchr("upad", *s)) return -1;
        gc_input *x = &in[n++];
        memset(x, 0, sizeof *x);
        x->kind = *s++;
        if (*s == 'T' || *s == 'S') x->view = *s++;
        if (*s != '[') return -1;
        s++;
        x->numel = 1;
        while (*s && *s != ']') {
            char *end;
            long long d = strtoll(s, &end, 10);
            if (end == s || d < 1 || x->ndim == CN_MAX_DIMS) return -1;
            x->shape[x->ndim++] = d;
            x->numel *= d;
            s = *end == ',' ? end + 1 : end;
        }
        if (*s != ']') return -1;
        s++;
    }
    return n;
}

/* Fills every input's values by its kind. The 'd' inputs of a case share one pool of distinct
 * magnitudes 0.15 + 0.03 k (k a permutation), each with a random sign. */
static void fill_values(gc_case *c) {
    int64_t distinct = 0;
    for (int i = 0; i < c->n_in; i++)
        if (c->in[i].kind == 'd') distinct += c->in[i].numel;
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)(distinct ? distinct : 1));
    for (int64_t k = 0; k < distinct; k++)
        perm[k] = k;
    for (int64_t k = distinct - 1; k > 0; k--) {
        int64_t j = (int64_t)(rng_next() % (uint64_t)(k + 1));
        int64_t t = perm[k];
        perm[k] = perm[j];
        perm[j] = t;
    }
    int64_t next = 0;
    for (int i = 0; i < c->n_in; i++) {
        gc_input *x = &c->in[i];
        for (int64_t j = 0; j < x->numel; j++) {
            switch (x->kind) {
            case 'u':
                x->v[j] = rng_uniform(-1, 1);
                break;
            case 'p':
                x->v[j] = rng_uniform(0.5, 2);
                break;
            case 'a':
                x->v[j] = rng_sign() * rng_uniform(0.5, 1.5);
                break;
            default:
                x->v[j] = rng_sign() * (0.15 + 0.03 * (double)perm[next++]);
                break;
            }
        }
    }
    free(perm);
}

/* ---- the check ----------------------------------------------------------------------------- */

/* y on `dev` from the current values: leaves (marked when dev is an autodiff device, and stored
 * in leaves[] when given), seen through each input's view, then the op. Scope-owned. */
static cn_tensor *forward(const gc_case *c, cn_device dev, cn_tensor **leaves) {
    cn_tensor *x[GC_MAX_IN];
    for (int i = 0; i < c->n_in; i++) {
        const gc_input *in = &c->in[i];
        cn_tensor *leaf = cn_from_data(in->v, in->shape, in->ndim, CN_F64, dev);
        if (dev.autodiff) leaf = cn_require_grad(leaf);
        if (leaves) leaves[i] = leaf;
        x[i] = in->view == 'T'   ? cn_transpose(leaf, -1, -2)
               : in->view == 'S' ? cn_slice(leaf, -1, 1, in->shape[in->ndim - 1], 2)
                                 : leaf;
        if (!x[i]) return NULL;
    }
    return c->fn(x, c->n_in, c->args);
}

/* Both losses on the concrete CPU device, summed here in double. Returns 0 on failure. */
static int concrete_loss(const gc_case *c, double *loss) {
    cn_scope_begin();
    cn_tensor *y = forward(c, cn_cpu(), NULL);
    int ok = y && cn_dtype_of(y) == CN_F64 && cn_numel(y) == c->n_out &&
             cn_read(y, c->y, sizeof(double) * (size_t)c->n_out) == CN_OK;
    if (ok) {
        double s0 = 0, s1 = 0;
        for (int64_t k = 0; k < c->n_out; k++) {
            s0 += c->r[k] * c->y[k];
            s1 += c->r[k] * c->y[k] * c->y[k];
        }
        loss[0] = s0;
        loss[1] = s1 / 2;
    }
    cn_scope_end();
    return ok;
}

static void fail_case(const gc_case *c, const char *where, const char *what) {
    fprintf(stderr, "gradcheck %s [%s]: %s (last error: %s)\n", c->name, where, what,
            cn_last_error());
    th_checks_failed++;
    cn_clear_error();
}

/* Compares the gradient of leaf i with the numeric one; reports the worst entry. */
static void compare_grad(const gc_case *c, const char *where, int i, cn_tensor *leaf,
                         cn_tensor *grad, const double *num) {
    const gc_input *in = &c->in[i];
    char what[64];
    if (!grad) {
        snprintf(what, sizeof what, "no gradient for x%d", i);
        fail_case(c, where, what);
        return;
    }
    if (cn_dtype_of(grad) != CN_F64 || cn_ndim(grad) != cn_ndim(leaf) ||
        memcmp(cn_shape(grad), cn_shape(leaf), sizeof(int64_t) * (size_t)in->ndim) != 0 ||
        cn_requires_grad(grad)) {
        char a[128], b[128];
        fprintf(stderr, "gradcheck %s [%s]: gradient of x%d is %s, want %s, untracked\n", c->name,
                where, i, cn_tensor_str(grad, a, sizeof a), cn_tensor_str(leaf, b, sizeof b));
        th_checks_failed++;
        return;
    }
    double *got = malloc(sizeof(double) * (size_t)in->numel);
    if (cn_read(grad, got, sizeof(double) * (size_t)in->numel) != CN_OK) {
        fail_case(c, where, "cannot read a gradient");
        free(got);
        return;
    }
    int64_t bad = 0, worst = -1;
    double worst_err = 0;
    for (int64_t j = 0; j < in->numel; j++) {
        double err = fabs(got[j] - num[j]) / (1 + fabs(num[j]));
        if (!(err <= c->tol)) {
            bad++;
            if (worst < 0 || !(err <= worst_err)) {
                worst = j;
                worst_err = err;
            }
        }
    }
    if (bad) {
        fprintf(stderr,
                "gradcheck %s [%s]: dL/dx%d[%lld] = %.12g, numeric %.12g (%lld of %lld "
                "entries off by more than %g)\n",
                c->name, where, i, (long long)worst, got[worst], num[worst], (long long)bad,
                (long long)in->numel, c->tol);
        th_checks_failed++;
    }
    gc_entries += in->numel;
    free(got);
}

/* Runs the op on autodiff device d, backpropagates loss `form`, and checks every leaf's
 * gradient against num. */
static void check_analytic(const gc_case *c, int d, int form, double *const *num, double loss) {
    char where[64];
    snprintf(where, sizeof where, "%s, %s", device_names[d], loss_names[form]);
    cn_scope_begin();
    cn_tensor *leaves[GC_MAX_IN] = {0};
    cn_tensor *y = forward(c, devices[d], leaves);
    cn_tensor *r = y ? cn_from_data(c->r, cn_shape(y), cn_ndim(y), CN_F64, cn_device_of(y)) : NULL;
    cn_tensor *l =
        form == 0 ? cn_sum(cn_mul(y, r)) : cn_mul_scalar(cn_sum(cn_mul(cn_mul(y, y), r)), 0.5);
    double lv = 0;
    if (!l || cn_read(l, &lv, sizeof lv) != CN_OK) {
        fail_case(c, where, "forward failed");
    } else {
        if (!(fabs(lv - loss) <= 1e-12 * (1 + fabs(loss)))) {
            fprintf(stderr, "gradcheck %s [%s]: forward loss %.17g, concrete %.17g\n", c->name,
                    where, lv, loss);
            th_checks_failed++;
        }
        cn_grads *g = cn_backward(l);
        if (!g) fail_case(c, where, "backward failed");
        for (int i = 0; g && i < c->n_in; i++)
            compare_grad(c, where, i, leaves[i], cn_grad(g, leaves[i]), num[i]);
        cn_grads_free(g);
    }
    cn_scope_end();
}

/* Checks the gradients of fn(inputs of `spec`) with `args` on both autodiff devices. */
static void gradcheck(const char *name, gc_fn fn, const gc_args *args, const char *spec) {
    static const gc_args none;
    gc_case c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%s (%s)", name, spec);
    c.fn = fn;
    c.args = args ? args : &none;
    c.eps = c.args->eps > 0 ? c.args->eps : GC_EPS;
    c.tol = c.args->tol > 0 ? c.args->tol : GC_TOL;
    c.n_in = parse_spec(spec, c.in);
    if (c.n_in <= 0) {
        fprintf(stderr, "gradcheck %s: bad input spec\n", c.name);
        th_checks_failed++;
        return;
    }
    gc_cases++;
    int64_t live = cn_live_tensors();
    rng_state = hash_str(c.name);
    for (int i = 0; i < c.n_in; i++)
        c.in[i].v = malloc(sizeof(double) * (size_t)c.in[i].numel);
    fill_values(&c);
    double *num[GC_LOSSES][GC_MAX_IN] = {{0}};

    /* y's size, then R */
    cn_scope_begin();
    cn_tensor *y = forward(&c, cn_cpu(), NULL);
    c.n_out = y ? cn_numel(y) : 0;
    cn_scope_end();
    double loss[GC_LOSSES];
    if (!y || c.n_out == 0) {
        fail_case(&c, "cpu", "forward failed");
        goto done;
    }
    c.r = malloc(sizeof(double) * (size_t)c.n_out);
    c.y = malloc(sizeof(double) * (size_t)c.n_out);
    for (int64_t k = 0; k < c.n_out; k++)
        c.r[k] = rng_uniform(-1, 1);
    if (!concrete_loss(&c, loss)) {
        fail_case(&c, "cpu", "forward failed");
        goto done;
    }

    /* numeric gradients of both losses, from the same perturbed forwards */
    for (int i = 0; i < c.n_in; i++) {
        gc_input *in = &c.in[i];
        for (int f = 0; f < GC_LOSSES; f++)
            num[f][i] = malloc(sizeof(double) * (size_t)in->numel);
        for (int64_t j = 0; j < in->numel; j++) {
            double v = in->v[j], lp[GC_LOSSES], lm[GC_LOSSES];
            in->v[j] = v + c.eps;
            int ok = concrete_loss(&c, lp);
            in->v[j] = v - c.eps;
            ok = ok && concrete_loss(&c, lm);
            in->v[j] = v;
            if (!ok) {
                fail_case(&c, "cpu", "forward failed");
                goto done;
            }
            for (int f = 0; f < GC_LOSSES; f++)
                num[f][i][j] = (lp[f] - lm[f]) / (2 * c.eps);
        }
    }

    for (int d = 0; d < 2; d++)
        for (int f = 0; f < GC_LOSSES; f++)
            check_analytic(&c, d, f, num[f], loss[f]);
done:
    if (cn_live_tensors() != live) {
        fprintf(stderr, "gradcheck %s: %lld tensors leaked\n", c.name,
                (long long)(cn_live_tensors() - live));
        th_checks_failed++;
    }
    for (int i = 0; i < c.n_in; i++) {
        free(c.in[i].v);
        for (int f = 0; f < GC_LOSSES; f++)
            free(num[f][i]);
    }
    free(c.r);
    free(c.y);
}

/* ---- the ops under test -------------------------------------------------------------------- */

static cn_tensor *op_unary(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n;
    return a->un(x[0]);
}

static cn_tensor *op_binary(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n;
    return a->bin(x[0], x[1]);
}

/* The same tensor on both sides: both gradients accumulate into one leaf. */
static cn_tensor *op_binary_self(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n;
    return a->bin(x[0], x[0]);
}

static cn_tensor *gelu_erf(cn_tensor *x) { return cn_gelu(x, CN_GELU_ERF); }
static cn_tensor *gelu_tanh(cn_tensor *x) { return cn_gelu(x, CN_GELU_TANH); }

static cn_tensor *op_add_scalar(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n;
    return cn_add_scalar(x[0], a->s0);
}

static cn_tensor *op_mul_scalar(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n;
    return cn_mul_scalar(x[0], a->s0);
}

static cn_tensor *op_pow_scalar(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n;
    return cn_pow_scalar(x[0], a->s0);
}

static cn_tensor *op_clamp(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n;
    return cn_clamp(x[0], a->s0, a->s1);
}

/* where(cond, x0, x1) with a fixed pattern for cond, of shape a->ints, on x0's device. */
static cn_tensor *op_where(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n;
    double pattern[64];
    int64_t count = 1;
    for (int d = 0; d < a->n_ints; d++)
        count *= a->ints[d];
    for (int64_t k = 0; k < count && k < 64; k++)
        pattern[k] = (k * 7) % 3 != 0;
    cn_tensor *c = cn_from_data(pattern, a->ints, a->n_ints, CN_F64, cn_device_of(x[0]));
    return cn_where(cn_cast(c, CN_BOOL), x[0], x[1]);
}

/* f64 -> f32 -> exp in f32 -> f64 */
static cn_tensor *op_cast_exp(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n, (void)a;
    return cn_cast(cn_exp(cn_cast(x[0], CN_F32)), CN_F64);
}

/* f64(f32(x)) * x: the gradient takes both paths, one through the casts */
static cn_tensor *op_cast_roundtrip(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n, (void)a;
    return cn_mul(cn_cast(cn_cast(x[0], CN_F32), CN_F64), x[0]);
}

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_VAR0, R_VAR1, R_LOGSUMEXP, R_COUNT };

static cn_tensor *op_reduce(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n;
    int d = a->dim, k = a->keepdim;
    switch (a->kind) {
    case R_SUM:
        return a->all ? cn_sum(x[0]) : cn_sum_dim(x[0], d, k);
    case R_MEAN:
        return a->all ? cn_mean(x[0]) : cn_mean_dim(x[0], d, k);
    case R_MAX:
        return a->all ? cn_max(x[0]) : cn_max_dim(x[0], d, k);
    case R_MIN:
        return a->all ? cn_min(x[0]) : cn_min_dim(x[0], d, k);
    case R_PROD:
        return a->all ? cn_prod(x[0]) : cn_prod_dim(x[0], d, k);
    case R_VAR0:
        return a->all ? cn_var(x[0], 0) : cn_var_dim(x[0], d, 0, k);
    case R_VAR1:
        return a->all ? cn_var(x[0], 1) : cn_var_dim(x[0], d, 1, k);
    default:
        return a->all ? cn_logsumexp(x[0]) : cn_logsumexp_dim(x[0], d, k);
    }
}

static cn_tensor *op_softmax(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n;
    return a->kind ? cn_log_softmax(x[0], a->dim) : cn_softmax(x[0], a->dim);
}

static cn_tensor *op_linear(cn_tensor *const *x, int n, const gc_args *a) {
    (void)a;
    return cn_linear(x[0], x[1], n == 3 ? x[2] : NULL);
}

enum {
    V_RESHAPE,
    V_TRANSPOSE,
    V_PERMUTE,
    V_SLICE,
    V_EXPAND,
    V_SQUEEZE,
    V_UNSQUEEZE,
    V_CONTIGUOUS,
    V_CHAIN
};

static cn_tensor *op_view(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n;
    const int64_t *k = a->ints;
    switch (a->kind) {
    case V_RESHAPE:
        return cn_reshape(x[0], k, a->n_ints);
    case V_TRANSPOSE:
        return cn_transpose(x[0], (int)k[0], (int)k[1]);
    case V_PERMUTE: {
        int perm[CN_MAX_DIMS];
        for (int d = 0; d < a->n_ints; d++)
            perm[d] = (int)k[d];
        return cn_permute(x[0], perm);
    }
    case V_SLICE:
        return cn_slice(x[0], a->dim, k[0], k[1], k[2]);
    case V_EXPAND:
        return cn_expand(x[0], k, a->n_ints);
    case V_SQUEEZE:
        return cn_squeeze(x[0], a->dim);
    case V_UNSQUEEZE:
        return cn_unsqueeze(x[0], a->dim);
    case V_CONTIGUOUS:
        return cn_contiguous(x[0]);
    default: {
        /* views and elementwise ops interleaved: [24] -> [3, 8] -> [8, 3] -> rows 1, 4, 7 */
        cn_tensor *t = cn_transpose(cn_reshape(x[0], (int64_t[]){3, 8}, 2), 0, 1);
        cn_tensor *s = cn_slice(cn_sin(t), 0, 1, 8, 3);
        return cn_mul(cn_unsqueeze(cn_exp(s), 0),
                      cn_expand(cn_unsqueeze(cn_sum_dim(t, 0, 0), 0), (int64_t[]){1, 3, 3}, 3));
    }
    }
}

static cn_tensor *op_cat(cn_tensor *const *x, int n, const gc_args *a) {
    return cn_cat(x, n, a->dim);
}

/* The same leaf several times in one cat, once through exp. */
static cn_tensor *op_cat_self(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n;
    cn_tensor *parts[3] = {x[0], cn_exp(x[0]), x[0]};
    return cn_cat(parts, 3, a->dim);
}

static cn_tensor *op_stack(cn_tensor *const *x, int n, const gc_args *a) {
    return cn_stack(x, n, a->dim);
}

/* split (s0 == 0) or chunk (s0 != 0) into pieces of a->ints[0] (size or chunk count) along dim;
 * y is piece a->kind, or with kind -1 all pieces, each through a different op, cat back. */
static cn_tensor *op_pieces(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n;
    cn_tensor *parts[8];
    int count = a->s0 != 0 ? cn_chunk(x[0], (int)a->ints[0], a->dim, parts, 8)
                           : cn_split(x[0], a->ints[0], a->dim, parts, 8);
    if (count < 1 || count > 8) return NULL;
    if (a->kind >= 0) return a->kind < count ? parts[a->kind] : NULL;
    for (int p = 0; p < count; p++)
        parts[p] = p % 2 ? cn_mul_scalar(parts[p], 1.5 + p) : cn_sin(parts[p]);
    return cn_cat(parts, count, a->dim);
}

static cn_tensor *index_on(const gc_args *a, cn_tensor *like) {
    return cn_from_data(a->index, a->index_shape, a->index_ndim, CN_I64, cn_device_of(like));
}

static cn_tensor *op_gather(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n;
    return cn_gather(x[0], a->dim, index_on(a, x[0]));
}

static cn_tensor *op_scatter_add(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n;
    return cn_scatter_add(x[0], a->dim, index_on(a, x[0]), x[1]);
}

static cn_tensor *op_index_select(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n;
    return cn_index_select(x[0], a->dim, index_on(a, x[0]));
}

static cn_tensor *op_conv2d(cn_tensor *const *x, int n, const gc_args *a) {
    return cn_conv2d(x[0], x[1], n == 3 ? x[2] : NULL, &a->conv);
}

static cn_tensor *op_max_pool2d(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n;
    return cn_max_pool2d(x[0], &a->pool);
}

static cn_tensor *op_avg_pool2d(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n;
    return cn_avg_pool2d(x[0], &a->pool);
}

/* A two-layer network with a log-softmax head: x [2,4], w1 [5,4], b1 [5], w2 [3,5]. */
static cn_tensor *op_mlp(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n, (void)a;
    cn_tensor *h = cn_gelu(cn_linear(x[0], x[1], x[2]), CN_GELU_TANH);
    return cn_log_softmax(cn_linear(h, x[3], NULL), -1);
}

/* Layer normalisation over the last dim: (x - mean) * rsqrt(var + 1e-5) * gain. */
static cn_tensor *op_layer_norm(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n, (void)a;
    cn_tensor *centered = cn_sub(x[0], cn_mean_dim(x[0], -1, 1));
    cn_tensor *scale = cn_rsqrt(cn_add_scalar(cn_var_dim(x[0], -1, 0, 1), 1e-5));
    return cn_mul(cn_mul(centered, scale), x[1]);
}

/* ---- tests --------------------------------------------------------------------------------- */

static void test_binary_ops(void) {
    /* indexed by the op: the loops walk the enum and name each case by cn_op_name */
    static const struct {
        cn_tensor *(*f)(cn_tensor *, cn_tensor *);
        char ka, kb; /* value kinds of a and b */
    } ops[CN_OP_COUNT] = {
        [CN_OP_ADD] = {cn_add, 'u', 'u'},     [CN_OP_SUB] = {cn_sub, 'u', 'u'},
        [CN_OP_MUL] = {cn_mul, 'u', 'u'},     [CN_OP_DIV] = {cn_div, 'u', 'p'},
        [CN_OP_POW] = {cn_pow, 'p', 'u'},     [CN_OP_MAXIMUM] = {cn_maximum, 'd', 'd'},
        [CN_OP_MINIMUM] = {cn_minimum, 'd', 'd'},
    };
    /* broadcast [3,1] with [4]; two non-contiguous [3,4]; a 0-d operand on either side;
     * broadcast against a transposed operand */
    static const char *const shapes[] = {"%c[3,1] %c[4]", "%cT[4,3] %cS[3,9]", "%c[2,3] %c[]",
                                         "%c[] %c[2,3]", "%c[2,1,3] %cT[3,2]"};
    char spec[64];
    for (int k = 0; k < CN_OP_COUNT; k++) {
        if (!ops[k].f) continue;
        const char *name = cn_op_name((cn_op)k);
        gc_args a = {.bin = ops[k].f};
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            snprintf(spec, sizeof spec, shapes[s], ops[k].ka, ops[k].kb);
            gradcheck(name, op_binary, &a, spec);
        }
        if (ops[k].ka == 'd') continue; /* maximum(x, x) is all ties */
        snprintf(spec, sizeof spec, "%c[2,3]", ops[k].kb == 'p' ? 'p' : ops[k].ka);
        gradcheck(name, op_binary_self, &a, spec);
    }
}

static void test_unary_ops(void) {
    /* indexed by the op: the loop walks the enum and names each case by cn_op_name; gelu, whose
     * two modes are two functions, comes after it */
    static const struct {
        cn_tensor *(*f)(cn_tensor *);
        char kind;
    } ops[CN_OP_COUNT] = {
        [CN_OP_NEG] = {cn_neg, 'u'},     [CN_OP_ABS] = {cn_abs, 'd'},
        [CN_OP_RELU] = {cn_relu, 'd'},   [CN_OP_EXP] = {cn_exp, 'u'},
        [CN_OP_LOG] = {cn_log, 'p'},     [CN_OP_LOG1P] = {cn_log1p, 'p'},
        [CN_OP_SQRT] = {cn_sqrt, 'p'},   [CN_OP_RSQRT] = {cn_rsqrt, 'p'},
        [CN_OP_SIN] = {cn_sin, 'u'},     [CN_OP_COS] = {cn_cos, 'u'},
        [CN_OP_TANH] = {cn_tanh, 'u'},   [CN_OP_SIGMOID] = {cn_sigmoid, 'u'},
        [CN_OP_SILU] = {cn_silu, 'u'},
    };
    static const struct {
        const char *name;
        cn_tensor *(*f)(cn_tensor *);
    } gelus[] = {{"gelu erf", gelu_erf}, {"gelu tanh", gelu_tanh}};
    static const char *const shapes[] = {"%c[2,3]", "%cT[4,3]", "%cS[3,9]"};
    char spec[32];
    for (int k = 0; k < CN_OP_COUNT; k++) {
        if (!ops[k].f) continue;
        gc_args a = {.un = ops[k].f};
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            snprintf(spec, sizeof spec, shapes[s], ops[k].kind);
            gradcheck(cn_op_name((cn_op)k), op_unary, &a, spec);
        }
    }
    for (size_t k = 0; k < sizeof gelus / sizeof gelus[0]; k++) {
        gc_args a = {.un = gelus[k].f};
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            snprintf(spec, sizeof spec, shapes[s], 'u');
            gradcheck(gelus[k].name, op_unary, &a, spec);
        }
    }
    /* log1p on its whole domain near 0, and the activations on a wider range */
    gc_args log1p = {.un = cn_log1p};
    gradcheck("log1p", op_unary, &log1p, "u[3,4]");
    gc_args wide[] = {
        {.un = cn_tanh}, {.un = cn_sigmoid}, {.un = cn_silu}, {.un = gelu_erf}, {.un = gelu_tanh}};
    for (size_t k = 0; k < sizeof wide / sizeof wide[0]; k++)
        gradcheck("activation, |x| up to 2", op_unary, &wide[k], "d[7,9]");
}

static void test_scalar_ops(void) {
    gradcheck("add_scalar", op_add_scalar, &(gc_args){.s0 = 0.7}, "u[2,3]");
    gradcheck("add_scalar", op_add_scalar, &(gc_args){.s0 = -2.5}, "uT[4,3]");
    gradcheck("mul_scalar", op_mul_scalar, &(gc_args){.s0 = -1.3}, "u[2,3]");
    gradcheck("mul_scalar", op_mul_scalar, &(gc_args){.s0 = 4}, "uS[3,9]");
    gradcheck("pow_scalar 2.5", op_pow_scalar, &(gc_args){.s0 = 2.5}, "p[2,3]");
    gradcheck("pow_scalar -1.5", op_pow_scalar, &(gc_args){.s0 = -1.5}, "pT[4,3]");
    gradcheck("pow_scalar 0.5", op_pow_scalar, &(gc_args){.s0 = 0.5}, "p[2,3]");
    gradcheck("pow_scalar 3, negative base", op_pow_scalar, &(gc_args){.s0 = 3}, "u[2,3]");
    gradcheck("pow_scalar 2", op_pow_scalar, &(gc_args){.s0 = 2}, "uS[3,9]");
    /* bounds halfway between the 'd' magnitudes 0.15 + 0.03 k: values on both sides of each */
    gc_args clamp = {.s0 = -(0.15 + 0.03 * 3.5), .s1 = 0.15 + 0.03 * 6.5};
    gradcheck("clamp", op_clamp, &clamp, "d[3,4]");
    gradcheck("clamp", op_clamp, &clamp, "dT[5,3]");
    gradcheck("clamp", op_clamp, &clamp, "dS[3,9]");
}

static void test_where_and_cast(void) {
    gradcheck("where, broadcast a and b", op_where, &(gc_args){.ints = {3, 4}, .n_ints = 2},
              "u[3,1] u[4]");
    gradcheck("where, non-contiguous", op_where, &(gc_args){.ints = {3, 4}, .n_ints = 2},
              "uT[4,3] uS[3,9]");
    gradcheck("where, broadcast cond", op_where, &(gc_args){.ints = {4}, .n_ints = 1},
              "u[3,1] u[3,4]");
    gc_args loose = {.eps = 1e-3, .tol = 1e-3};
    gradcheck("cast f64->f32, exp, ->f64", op_cast_exp, &loose, "u[3,4]");
    gradcheck("cast f64->f32->f64 times x", op_cast_roundtrip, &loose, "uT[4,3]");
}

static void test_reductions(void) {
    static const struct {
        const char *name;
        int kind;
        char values;
    } ops[] = {
        {"sum", R_SUM, 'u'},
        {"mean", R_MEAN, 'u'},
        {"max", R_MAX, 'd'},
        {"min", R_MIN, 'd'},
        {"prod", R_PROD, 'a'},
        {"var(correction 0)", R_VAR0, 'u'},
        {"var(correction 1)", R_VAR1, 'u'},
        {"logsumexp", R_LOGSUMEXP, 'u'},
    };
    char spec[32], name[64];
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        gc_args all = {.kind = ops[k].kind, .all = 1};
        snprintf(spec, sizeof spec, "%c[2,3,4]", ops[k].values);
        gradcheck(ops[k].name, op_reduce, &all, spec);
        snprintf(spec, sizeof spec, "%cT[2,4,3]", ops[k].values);
        gradcheck(ops[k].name, op_reduce, &all, spec);
        for (int dim = -1; dim < 3; dim++)
            for (int keepdim = 0; keepdim < 2; keepdim++) {
                gc_args a = {.kind = ops[k].kind, .dim = dim, .keepdim = keepdim};
                snprintf(name, sizeof name, "%s_dim(dim %d, keepdim %d)", ops[k].name, dim,
                         keepdim);
                snprintf(spec, sizeof spec, "%c[2,3,4]", ops[k].values);
                gradcheck(name, op_reduce, &a, spec);
                if (dim != 1) continue;
                snprintf(spec, sizeof spec, "%cT[2,4,3]", ops[k].values);
                gradcheck(name, op_reduce, &a, spec);
            }
    }
}

static void test_softmax(void) {
    static const char *const names[2] = {"softmax", "log_softmax"};
    char name[64];
    for (int k = 0; k < 2; k++)
        for (int dim = -1; dim < 3; dim++) {
            gc_args a = {.kind = k, .dim = dim};
            snprintf(name, sizeof name, "%s(dim %d)", names[k], dim);
            gradcheck(name, op_softmax, &a, "u[2,3,4]");
            if (dim == 1 || dim == -1) gradcheck(name, op_softmax, &a, "uT[2,4,3]");
        }
}

/* scans and sorts along a dim: kind picks the op; s0 = k of topk */
enum { S_CUMSUM, S_CUMPROD, S_CUMMAX, S_CUMMIN, S_SORT, S_SORT_DESC, S_TOPK, S_TOPK_SMALL,
       S_MAX_INDICES, S_MIN_INDICES, S_MAX_ABS };
static cn_tensor *op_scan(cn_tensor *const *x, int n, const gc_args *a) {
    (void)n;
    switch (a->kind) {
    case S_CUMSUM: return cn_cumsum(x[0], a->dim);
    case S_CUMPROD: return cn_cumprod(x[0], a->dim);
    case S_CUMMAX: return cn_cummax(x[0], a->dim, NULL);
    case S_CUMMIN: return cn_cummin(x[0], a->dim, NULL);
    case S_SORT: return cn_sort(x[0], a->dim, 0, NULL);
    case S_SORT_DESC: return cn_sort(x[0], a->dim, 1, NULL);
    case S_TOPK: return cn_topk(x[0], (int64_t)a->s0, a->dim, 1, 1, NULL);
    case S_TOPK_SMALL: return cn_topk(x[0], (int64_t)a->s0, a->dim, 0, 1, NULL);
    case S_MAX_INDICES: return cn_max_dim_indices(x[0], a->dim, a->keepdim, NULL);
    case S_MIN_INDICES: return cn_min_dim_indices(x[0], a->dim, a->keepdim, NULL);
    default: return cn_max_abs_dim(x[0], a->dim, a->keepdim);
    }
}

static void test_scans(void) {
    static const struct {
        const char *name;
        int kind;
        char values; /* distinct values where an element is selected: no ties, no kinks */
    } ops[] = {
        {"cumsum", S_CUMSUM, 'u'},           {"cumprod", S_CUMPROD, 'a'},
        {"cummax", S_CUMMAX, 'd'},           {"cummin", S_CUMMIN, 'd'},
        {"sort", S_SORT, 'd'},               {"sort descending", S_SORT_DESC, 'd'},
        {"topk", S_TOPK, 'd'},               {"topk smallest", S_TOPK_SMALL, 'd'},
        {"max_dim_indices", S_MAX_INDICES, 'd'}, {"min_dim_indices", S_MIN_INDICES, 'd'},
        {"max_abs_dim", S_MAX_ABS, 'd'},
    };
    char spec[32], name[96];
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
        for (int dim = -1; dim < 3; dim++) {
            gc_args a = {.kind = ops[k].kind, .dim = dim, .keepdim = dim & 1, .s0 = 2};
            snprintf(name, sizeof name, "%s(dim %d)", ops[k].name, dim);
            snprintf(spec, sizeof spec, "%c[2,3,4]", ops[k].values);
            gradcheck(name, op_scan, &a, spec);
            if (dim != 1 && dim != -1) continue;
            snprintf(spec, sizeof spec, "%cT[2,4,3]", ops[k].values);
            gradcheck(name, op_scan, &a, spec);
            snprintf(spec, sizeof spec, "%cS[2,3,9]", ops[k].values);
            gradcheck(name, op_scan, &a, spec);
        }
}

static void test_matmul(void) {
    gc_args mm = {.bin = cn_matmul};
    static const char *const specs[] = {
        "u[3,4] u[4,5]",       /* 2-D */
        "uT[4,3] uS[4,11]",    /* non-contiguous operands */
        "u[2,1,3,4] u[3,4,2]", /* batched, batch dims broadcast: [2,1] with [3] */
        "u[2,3,4] uT[2,5,4]",  /* batched, transposed right operand */
        "u[4] u[4,5]",         /* 1-D on the left */
        "u[3,4] u[4]",         /* 1-D on the right */
        "u[4] u[4]",           /* both 1-D: a dot product */
        "u[4] u[2,4,3]",       /* 1-D against a batch */
        "u[2,3,4] u[4]",       /* a batch against 1-D */
        "uS[9] uT[2,3,4]",     /* non-contiguous 1-D against a transposed batch */
    };
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++)
        gradcheck("matmul", op_binary, &mm, specs[k]);
    gradcheck("matmul(x, x)", op_binary_self, &mm, "u[3,3]");
}

static void test_linear(void) {
    gradcheck("linear with bias", op_linear, NULL, "u[2,3,4] u[5,4] u[5]");
    gradcheck("linear without bias", op_linear, NULL, "u[3,4] u[2,4]");
    gradcheck("linear, non-contiguous", op_linear, NULL, "uT[4,3] uT[4,2] uS[5]");
    gradcheck("linear, 1-D x", op_linear, NULL, "u[4] u[3,4] u[3]");
}

static void test_views(void) {
    gradcheck("reshape", op_view, &(gc_args){.kind = V_RESHAPE, .ints = {4, 6}, .n_ints = 2},
              "u[2,3,4]");
    gradcheck("reshape -1", op_view, &(gc_args){.kind = V_RESHAPE, .ints = {-1, 2}, .n_ints = 2},
              "u[2,3,4]");
    gradcheck("reshape of a transposed view (copies)", op_view,
              &(gc_args){.kind = V_RESHAPE, .ints = {6, 4}, .n_ints = 2}, "uT[2,4,3]");
    gradcheck("reshape to 0-d", op_view, &(gc_args){.kind = V_RESHAPE, .n_ints = 0}, "u[1,1]");
    gradcheck("transpose", op_view, &(gc_args){.kind = V_TRANSPOSE, .ints = {0, 2}}, "u[2,3,4]");
    gradcheck("transpose", op_view, &(gc_args){.kind = V_TRANSPOSE, .ints = {-1, 0}}, "uS[3,9]");
    gradcheck("permute", op_view, &(gc_args){.kind = V_PERMUTE, .ints = {2, 0, 1}, .n_ints = 3},
              "u[2,3,4]");
    gradcheck("permute", op_view, &(gc_args){.kind = V_PERMUTE, .ints = {1, 2, 0}, .n_ints = 3},
              "uT[2,4,3]");
    gradcheck("slice step 2", op_view, &(gc_args){.kind = V_SLICE, .dim = 1, .ints = {1, 6, 2}},
              "u[3,7]");
    gradcheck("slice negative start, step 2", op_view,
              &(gc_args){.kind = V_SLICE, .dim = 0, .ints = {-3, 100, 2}}, "u[5,2]");
    gradcheck("slice step 3 of a transposed view", op_view,
              &(gc_args){.kind = V_SLICE, .dim = -1, .ints = {0, 7, 3}}, "uT[7,3]");
    gradcheck("expand [3,1] -> [2,3,4]", op_view,
              &(gc_args){.kind = V_EXPAND, .ints = {2, 3, 4}, .n_ints = 3}, "u[3,1]");
    gradcheck("expand [4] -> [3,4]", op_view,
              &(gc_args){.kind = V_EXPAND, .ints = {3, 4}, .n_ints = 2}, "u[4]");
    gradcheck("expand of a transposed view", op_view,
              &(gc_args){.kind = V_EXPAND, .ints = {4, 3}, .n_ints = 2}, "uT[3,1]");
    gradcheck("squeeze", op_view, &(gc_args){.kind = V_SQUEEZE, .dim = 1}, "u[3,1,4]");
    gradcheck("squeeze", op_view, &(gc_args){.kind = V_SQUEEZE, .dim = -2}, "uT[3,1]");
    gradcheck("unsqueeze", op_view, &(gc_args){.kind = V_UNSQUEEZE, .dim = 1}, "u[3,4]");
    gradcheck("unsqueeze", op_view, &(gc_args){.kind = V_UNSQUEEZE, .dim = -1}, "uS[3,9]");
    gradcheck("contiguous", op_view, &(gc_args){.kind = V_CONTIGUOUS}, "uT[4,3]");
    gradcheck("contiguous", op_view, &(gc_args){.kind = V_CONTIGUOUS}, "uS[2,3,7]");
    gradcheck("contiguous of a contiguous leaf", op_view, &(gc_args){.kind = V_CONTIGUOUS},
              "u[3,4]");
    gradcheck("views and elementwise ops chained", op_view, &(gc_args){.kind = V_CHAIN}, "u[24]");
}

static void test_cat_stack_split(void) {
    gradcheck("cat dim 1", op_cat, &(gc_args){.dim = 1}, "u[2,3] uT[4,2] u[2,2]");
    gradcheck("cat dim 0", op_cat, &(gc_args){.dim = 0}, "u[1,3] u[2,3] uS[2,7]");
    gradcheck("cat dim -1", op_cat, &(gc_args){.dim = -1}, "u[2,2,3] u[2,2,1]");
    gradcheck("cat of one leaf three times", op_cat_self, &(gc_args){.dim = 0}, "u[2,3]");
    gradcheck("stack dim 0", op_stack, &(gc_args){.dim = 0}, "u[2,3] uT[3,2] u[2,3]");
    gradcheck("stack dim 2", op_stack, &(gc_args){.dim = 2}, "u[2,3] uS[2,7]");
    gradcheck("stack dim -1", op_stack, &(gc_args){.dim = -1}, "u[3] u[3] u[3]");
    char name[64];
    for (int piece = -1; piece < 3; piece++) {
        gc_args a = {.kind = piece, .dim = 0, .ints = {3}};
        snprintf(name, sizeof name, "split [7,3] by 3, piece %d (-1: all)", piece);
        gradcheck(name, op_pieces, &a, "u[7,3]");
    }
    for (int piece = -1; piece < 2; piece++) {
        gc_args a = {.kind = piece, .dim = 1, .ints = {3}};
        snprintf(name, sizeof name, "split dim 1 by 3, piece %d (-1: all)", piece);
        gradcheck(name, op_pieces, &a, "uT[4,2]");
        a = (gc_args){.kind = piece, .dim = 1, .ints = {2}, .s0 = 1};
        snprintf(name, sizeof name, "chunk [3,5] in 2, piece %d (-1: all)", piece);
        gradcheck(name, op_pieces, &a, "u[3,5]");
        a = (gc_args){.kind = piece, .dim = -2, .ints = {2}, .s0 = 1};
        snprintf(name, sizeof name, "chunk dim -2 in 2, piece %d (-1: all)", piece);
        gradcheck(name, op_pieces, &a, "uS[5,7]");
    }
}

static void test_indexing(void) {
    /* repeated indices, so the backward's scatter must accumulate */
    static const int64_t rows[8] = {2, 0, 1, 2, 0, 0, 2, 1}; /* [2,4], into dim 0 of [3,4] */
    static const int64_t cols[6] = {3, 0, 1, 1, 2, 3};       /* [3,2], into dim 1 of [3,4] */
    static const int64_t narrow[6] = {0, 3, 3, 1, 2, 0};     /* [2,3], into dim 1 of [3,4] */
    gc_args g0 = {.dim = 0, .index = rows, .index_shape = {2, 4}, .index_ndim = 2};
    gc_args g1 = {.dim = 1, .index = cols, .index_shape = {3, 2}, .index_ndim = 2};
    gc_args g2 = {.dim = -1, .index = narrow, .index_shape = {2, 3}, .index_ndim = 2};
    gradcheck("gather dim 0", op_gather, &g0, "u[3,4]");
    gradcheck("gather dim 1", op_gather, &g1, "uT[4,3]");
    gradcheck("gather, index narrower than x", op_gather, &g2, "u[3,4]");
    gradcheck("scatter_add dim 0", op_scatter_add, &g0, "u[3,4] u[2,4]");
    gradcheck("scatter_add dim 1", op_scatter_add, &g1, "uT[4,3] uS[3,5]");
    gradcheck("scatter_add, index narrower than x", op_scatter_add, &g2, "u[3,4] uT[3,2]");
    static const int64_t sel0[4] = {3, 0, 3, 1}, sel1[3] = {2, 2, 0};
    gradcheck("index_select dim 0", op_index_select,
              &(gc_args){.dim = 0, .index = sel0, .index_shape = {4}, .index_ndim = 1}, "u[4,3]");
    gradcheck("index_select dim 1", op_index_select,
              &(gc_args){.dim = 1, .index = sel1, .index_shape = {3}, .index_ndim = 1}, "uT[3,4]");
}

static void test_conv2d(void) {
    gc_args grouped = {.conv = {.stride = {2, 2}, .padding = {1, 1}, .groups = 2}};
    gradcheck("conv2d stride 2, padding 1, groups 2, bias", op_conv2d, &grouped,
              "u[2,4,5,5] u[4,2,3,3] u[4]");
    gc_args dilated = {.conv = {.stride = {1, 2}, .padding = {2, 1}, .dilation = {2, 1}}};
    gradcheck("conv2d stride (1,2), padding (2,1), dilation (2,1)", op_conv2d, &dilated,
              "u[1,2,6,5] u[3,2,2,3]");
    gc_args depthwise = {.conv = {.padding = {1, 0}, .dilation = {1, 2}, .groups = 3}};
    gradcheck("conv2d depthwise, dilation (1,2), non-contiguous", op_conv2d, &depthwise,
              "uT[1,3,6,4] uT[3,1,3,3] uS[7]");
    gc_args plain = {.conv = {{0}}};
    gradcheck("conv2d defaults, bias", op_conv2d, &plain, "u[2,3,4,4] u[2,3,2,2] u[2]");
}

static void test_pooling(void) {
    gc_args overlap = {.pool = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}};
    gc_args uneven = {.pool = {.kernel = {2, 3}, .stride = {1, 2}, .padding = {1, 1}}};
    gc_args tiled = {.pool = {.kernel = {2, 2}}};
    gradcheck("max_pool2d 3x3 stride 2 padding 1", op_max_pool2d, &overlap, "d[1,2,6,6]");
    gradcheck("max_pool2d 2x3 stride (1,2) padding 1", op_max_pool2d, &uneven, "d[2,1,5,7]");
    gradcheck("max_pool2d 2x2, non-contiguous", op_max_pool2d, &tiled, "dT[1,2,4,6]");
    gradcheck("avg_pool2d 3x3 stride 2 padding 1", op_avg_pool2d, &overlap, "u[1,2,6,6]");
    gradcheck("avg_pool2d 2x3 stride (1,2) padding 1", op_avg_pool2d, &uneven, "u[2,1,5,7]");
    gradcheck("avg_pool2d 2x2, non-contiguous", op_avg_pool2d, &tiled, "uT[1,2,4,6]");
}

/* Chains of ops, where checkpointing recomputes memory-bound values from recomputed inputs. */
static void test_composites(void) {
    gradcheck("mlp: linear, gelu, linear, log_softmax", op_mlp, NULL, "u[2,4] u[5,4] u[5] u[3,5]");
    gradcheck("layer norm", op_layer_norm, NULL, "u[3,6] u[6]");
    gradcheck("layer norm, non-contiguous", op_layer_norm, NULL, "uT[6,3] uS[13]");
}

int main(void) {
    devices[0] = cn_autodiff(cn_cpu());
    devices[1] = cn_autodiff_checkpointed(cn_cpu(), CN_CHECKPOINT_BALANCED);
    RUN(test_binary_ops);
    RUN(test_unary_ops);
    RUN(test_scalar_ops);
    RUN(test_where_and_cast);
    RUN(test_reductions);
    RUN(test_softmax);
    RUN(test_scans);
    RUN(test_matmul);
    RUN(test_linear);
    RUN(test_views);
    RUN(test_cat_stack_split);
    RUN(test_indexing);
    RUN(test_conv2d);
    RUN(test_pooling);
    RUN(test_composites);
    printf("%lld cases, %lld gradient entries checked for each of 2 losses on each of 2 "
           "devices\n",
           gc_cases, gc_entries / 4);
    return th_finish();
}
