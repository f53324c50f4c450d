/* libFuzzer harness: op shapes and attributes. The input is a little program over six tensor
 * registers: make tensors (random dims, including 0, negative and huge ones; every dtype; on
 * cn_cpu() or cn_autodiff(cn_cpu()), sometimes requiring grad), take views of them (slice,
 * transpose, permute, expand, reshape, squeeze, unsqueeze) to reach odd strides, run ops with
 * fuzzed attributes (reduction dims, softmax, conv2d and pools with stride / padding / dilation /
 * groups, cat / stack / split / chunk, gather / scatter_add / index_select / one_hot, clamp, pow,
 * matmul, linear, casts, in-place copies), run a backward now and then, and make the n-th
 * allocation fail. After every call the invariants of fuzz_common.h are checked, and every
 * result is read back whole (so a view whose strides reach outside its storage is an ASan report)
 * and described with cn_tensor_str.
 *
 * Shapes that legitimately need a lot of memory or time are not run: a call is made when its
 * tensors and its result have at most CAP elements (and a matmul, conv or pool at most WORK
 * multiply-adds), or when the result is so big (HUGE elements or more) that its allocation must
 * fail; what lies between is skipped. So huge dims still reach zero-element shapes, views, the
 * size arithmetic and the attribute checks, which is where overflows hide. Byte 0 seeds the
 * generator and bits of byte 1 choose a scope around the program (every result cn_keep'd). */
#include <float.h>
#include <limits.h>
#include <math.h>

#include "fuzz_common.h"

#define NREG 6
#define CAP 65536.0              /* elements of a tensor made, read, or computed */
#define WORK 4.0e6               /* multiply-adds of one matmul, conv or pool */
#define HUGE_ELEMS 1073741824.0  /* 2^30 elements: no allocation of this many can succeed */
#define MAX_STEPS 48

static cn_tensor *reg[NREG];
static cn_generator gen;
static int in_scope; /* results are cn_keep'd out of the input's scope */
static int armed;    /* an allocation failure was asked for during this input */
static int trace;    /* FUZZ_OPS_TRACE=1: each call and its result on stderr (for reproducers) */

/* ---- sizes --------------------------------------------------------------------------------- */

static double numel_d(const int64_t *shape, int nd) {
    double n = 1;
    for (int k = 0; k < nd; k++) {
        if (shape[k] < 0) return -1;
        n *= (double)shape[k];
    }
    return n;
}

static double tnumel(const cn_tensor *t) { return t ? numel_d(cn_shape(t), cn_ndim(t)) : 0; }

/* A result of n elements may be computed: small, or too big to allocate. Negative: invalid. */
static int fits(double n) { return n <= CAP || n >= HUGE_ELEMS; }
static int small(const cn_tensor *t) { return tnumel(t) <= CAP; }

/* ---- reading the program ------------------------------------------------------------------- */

/* A dim or size: mostly small, sometimes 0, negative, or near the limits of int64. */
static int64_t pick_dim(fuzz_in *in) {
    static const int64_t smalls[] = {0, 1, 2, 3, 4, 5, 6, 8};
    uint8_t v = fuzz_u8(in);
    switch (v % 16) {
    case 8: return fuzz_u8(in) % 32;
    case 9: return -1;
    case 10: return -(int64_t)fuzz_u8(in);
    case 11: return INT64_MAX;
    case 12: return INT64_MIN;
    case 13: return (int64_t)1 << (fuzz_u8(in) % 63);
    case 14: return INT64_MAX - fuzz_u8(in);
    case 15: return (int64_t)fuzz_u64(in);
    default: return smalls[(v / 16) % 8];
    }
}

/* A dim index or small int attribute: near the range of a tensor's dims, or far outside it. */
static int pick_axis(fuzz_in *in) {
    uint8_t v = fuzz_u8(in);
    if (v < 224) return (int)(v % 12) - 4; /* -4..7 */
    static const int far[] = {INT_MAX, INT_MIN, 8, 9, -9, 100, -100, 1 << 30};
    return far[v % 8];
}

static double pick_real(fuzz_in *in) {
    static const double reals[] = {0.0, 1.0, -1.0, 0.5, 2.0, -3.0, 1e30, -1e30, INFINITY,
                                   -INFINITY, NAN, 1e-30, DBL_MAX, 3.0, 255.0, 9.3e18};
    uint8_t v = fuzz_u8(in);
    return v < 128 ? reals[v % 16] : (double)(int8_t)fuzz_u8(in) / 4.0;
}

static cn_dtype pick_dtype(fuzz_in *in) {
    uint8_t v = fuzz_u8(in);
    return v < 250 ? (cn_dtype)(v % CN_DTYPE_COUNT) : (cn_dtype)(CN_DTYPE_COUNT + v % 3);
}

static cn_device pick_device(fuzz_in *in) {
    return fuzz_u8(in) & 1 ? cn_autodiff(cn_cpu()) : cn_cpu();
}

/* A register's tensor (may be NULL: the call then must fail with CN_ERR_NULL_ARG). */
static cn_tensor *arg(fuzz_in *in) { return reg[fuzz_pick(in, NREG)]; }

static int pick_shape(fuzz_in *in, int64_t *shape) {
    uint8_t v = fuzz_u8(in);
    int nd = v < 220 ? v % 5 : v % (CN_MAX_DIMS + 2);
    for (int k = 0; k < nd && k < CN_MAX_DIMS + 1; k++)
        shape[k] = pick_dim(in);
    return nd;
}

/* ---- results ------------------------------------------------------------------------------- */

/* Reads t back whole and describes it; a failure is allowed only under allocation failure. */
static void inspect(cn_tensor *t) {
    char desc[256];
    cn_tensor_str(t, desc, sizeof desc);
    int nd = cn_ndim(t);
    if (nd < 0 || nd > CN_MAX_DIMS) FUZZ_FAIL("a result has %d dims", nd);
    double n = tnumel(t);
    if (n < 0) FUZZ_FAIL("a result has a negative dim: %s", desc);
    unsigned __int128 exact = 1; /* saturates at 2^64: past int64 either way */
    for (int k = 0; k < nd; k++) {
        exact *= (uint64_t)cn_shape(t)[k];
        if (exact > UINT64_MAX) exact = (unsigned __int128)UINT64_MAX + 1;
    }
    if (exact > INT64_MAX) FUZZ_FAIL("a result's numel overflows int64: %s", desc);
    if ((unsigned __int128)cn_numel(t) != exact)
        FUZZ_FAIL("cn_numel disagrees with the shape of %s", desc);
    if (n > CAP) return;
    size_t nb = (size_t)n * cn_dtype_size(cn_dtype_of(t));
    static unsigned char buf[(size_t)CAP * 8];
    cn_clear_error();
    if (cn_read(t, buf, nb) != CN_OK) {
        FUZZ_CHECK_FAILED("cn_read");
        if (!armed) FUZZ_FAIL("cn_read of a result failed: %s", cn_last_error());
    }
}

static void put(fuzz_in *in, cn_tensor *t) {
    int r = fuzz_pick(in, NREG);
    if (in_scope) t = cn_keep(t);
    cn_release(reg[r]);
    reg[r] = t;
}

/* A call returning a tensor: a NULL must come with an error; a result is checked and stored. */
static void take(fuzz_in *in, cn_tensor *t, const char *what) {
    if (trace) {
        char desc[256];
        fprintf(stderr, "  %s -> %s\n", what,
                t ? cn_tensor_str(t, desc, sizeof desc) : cn_status_name(cn_last_status()));
    }
    if (!t) {
        FUZZ_CHECK_FAILED(what);
        return;
    }
    inspect(t);
    put(in, t);
}

/* ---- the instructions ---------------------------------------------------------------------- */

/* Values for a new tensor: small integers (so that index tensors and comparisons hit both in-
 * and out-of-range values), made as f64 and cast. */
static void op_make(fuzz_in *in) {
    int64_t shape[CN_MAX_DIMS + 1];
    int nd = pick_shape(in, shape);
    cn_dtype dt = pick_dtype(in);
    cn_device dev = pick_device(in);
    int how = fuzz_pick(in, 5);
    double n = numel_d(shape, nd);
    if (n >= 0 && !fits(n)) return;
    cn_clear_error();
    cn_tensor *t = NULL;
    const char *what = "make";
    if (how == 0 || n < 0 || n > CAP || nd > CN_MAX_DIMS || dt >= CN_DTYPE_COUNT) {
        what = "cn_zeros/cn_full";
        t = how & 1 ? cn_full(shape, nd, pick_real(in), dt, dev) : cn_zeros(shape, nd, dt, dev);
    } else if (how == 1) {
        what = "cn_ones";
        t = cn_ones(shape, nd, dt, dev);
    } else if (how == 2) {
        what = "cn_rand_uniform";
        t = cn_rand_uniform(&gen, shape, nd, -2.0, 2.0, dt, dev);
    } else {
        static double vals[(size_t)CAP];
        int mod = 1 + fuzz_pick(in, 16), off = fuzz_pick(in, 8);
        for (size_t k = 0; k < (size_t)n; k++)
            vals[k] = (double)((int64_t)(k * 7 + (size_t)off) % mod) - off / 2;
        what = "cn_from_data + cn_cast";
        cn_tensor *f = cn_from_data(vals, shape, nd, CN_F64, dev);
        if (!f) {
            FUZZ_CHECK_FAILED("cn_from_data");
            return;
        }
        t = cn_cast(f, dt);
        cn_release(f);
    }
    if (t && cn_dtype_kind(cn_dtype_of(t)) == CN_KIND_FLOAT &&
        cn_device_eq(cn_device_of(t), cn_autodiff(cn_cpu())) && (fuzz_u8(in) & 1)) {
        cn_clear_error();
        if (cn_require_grad(t) != t) { /* t stays the caller's, untracked */
            FUZZ_CHECK_FAILED("cn_require_grad");
            if (!armed) FUZZ_FAIL("cn_require_grad of a float autodiff tensor: %s",
                                  cn_last_error());
        }
    }
    take(in, t, what);
}

/* A 1-D or 2-D i64 index tensor with values from the input (negative and out of range too). */
static void op_index(fuzz_in *in) {
    int64_t shape[2] = {fuzz_pick(in, 9), fuzz_pick(in, 5)};
    int nd = 1 + fuzz_pick(in, 2);
    int64_t vals[64];
    size_t n = (size_t)(shape[0] * (nd == 2 ? shape[1] : 1));
    for (size_t k = 0; k < n; k++) {
        uint8_t v = fuzz_u8(in);
        vals[k] = v < 240 ? v % 6 : v == 255 ? INT64_MAX : v == 254 ? INT64_MIN : -(v % 8);
    }
    cn_clear_error();
    take(in, cn_from_data(vals, shape, nd, CN_I64, pick_device(in)), "cn_from_data (index)");
}

static void op_view(fuzz_in *in) {
    cn_tensor *t = arg(in);
    int nd = t ? cn_ndim(t) : 0;
    int64_t shape[CN_MAX_DIMS + 1];
    cn_clear_error();
    switch (fuzz_pick(in, 9)) {
    case 0: {
        int dim = pick_axis(in);
        int64_t start = pick_dim(in), end = pick_dim(in), step = pick_dim(in);
        take(in, cn_slice(t, dim, start, end, step), "cn_slice");
        break;
    }
    case 1: {
        int d0 = pick_axis(in), d1 = pick_axis(in);
        take(in, cn_transpose(t, d0, d1), "cn_transpose");
        break;
    }
    case 2: {
        int perm[CN_MAX_DIMS];
        for (int k = 0; k < CN_MAX_DIMS; k++)
            perm[k] = k;
        for (int k = nd - 1; k > 0; k--) { /* a permutation, or (sometimes) a repeat */
            int j = fuzz_pick(in, k + 1), tmp = perm[k];
            perm[k] = perm[j];
            perm[j] = tmp;
        }
        if (nd > 0 && fuzz_u8(in) < 32) perm[fuzz_pick(in, nd)] = pick_axis(in);
        take(in, cn_permute(t, perm), "cn_permute");
        break;
    }
    case 3: { /* t's shape with its 1-dims stretched and new dims on the left, or anything */
        int n2 = 0;
        if (fuzz_u8(in) & 1) {
            n2 = pick_shape(in, shape);
        } else {
            int lead = fuzz_pick(in, 3);
            for (int k = 0; k < lead && n2 < CN_MAX_DIMS + 1; k++)
                shape[n2++] = pick_dim(in);
            for (int k = 0; k < nd && n2 < CN_MAX_DIMS + 1; k++, n2++)
                shape[n2] = cn_shape(t)[k] == 1 ? pick_dim(in) : cn_shape(t)[k];
        }
        take(in, cn_expand(t, shape, n2), "cn_expand");
        break;
    }
    case 4: { /* t's numel factored differently (one -1 among them), or anything */
        int n2 = pick_shape(in, shape);
        if (n2 > 0 && n2 <= CN_MAX_DIMS && (fuzz_u8(in) & 1)) shape[fuzz_pick(in, n2)] = -1;
        if (!fits(tnumel(t))) break; /* a copy when the strides do not allow a view */
        take(in, cn_reshape(t, shape, n2), "cn_reshape");
        break;
    }
    case 5: take(in, cn_squeeze(t, pick_axis(in)), "cn_squeeze"); break;
    case 6: take(in, cn_unsqueeze(t, pick_axis(in)), "cn_unsqueeze"); break;
    case 7: take(in, cn_detach(t), "cn_detach"); break;
    default: {
        cn_device dev = pick_device(in);
        take(in, cn_to_device(t, dev), "cn_to_device");
        break;
    }
    }
}

static void op_unary(fuzz_in *in) {
    cn_tensor *x = arg(in);
    int which = fuzz_pick(in, 24);
    if (!fits(tnumel(x))) return;
    cn_tensor *(*const fns[])(cn_tensor *) = {
        cn_neg,  cn_abs,  cn_relu,    cn_exp,     cn_log,      cn_log1p,    cn_sqrt,
        cn_rsqrt, cn_sin, cn_cos,     cn_tanh,    cn_sigmoid,  cn_silu,     cn_logical_not,
        cn_contiguous, cn_clone};
    int nfns = (int)(sizeof fns / sizeof *fns);
    cn_clear_error();
    if (which < nfns)
        take(in, fns[which](x), "unary op");
    else if (which < nfns + 2)
        take(in, cn_gelu(x, (cn_gelu_approx)(which - nfns)), "cn_gelu");
    else if (which < nfns + 4)
        take(in, cn_cast(x, pick_dtype(in)), "cn_cast");
    else if (which == nfns + 4)
        take(in, cn_gelu(x, (cn_gelu_approx)fuzz_u8(in)), "cn_gelu (bad approx)");
    else
        take(in, cn_inner(x), "cn_inner");
}

static void op_scalar(fuzz_in *in) {
    cn_tensor *x = arg(in);
    int which = fuzz_pick(in, 4);
    double a = pick_real(in), b = pick_real(in);
    if (!fits(tnumel(x))) return;
    cn_clear_error();
    switch (which) {
    case 0: take(in, cn_add_scalar(x, a), "cn_add_scalar"); break;
    case 1: take(in, cn_mul_scalar(x, a), "cn_mul_scalar"); break;
    case 2: take(in, cn_pow_scalar(x, a), "cn_pow_scalar"); break;
    default: take(in, cn_clamp(x, a, b), "cn_clamp"); break;
    }
}

/* The numpy broadcast of a and b's shapes: its numel, or -1 when they do not broadcast. */
static double broadcast_numel(const cn_tensor *a, const cn_tensor *b) {
    if (!a || !b) return 0;
    int na = cn_ndim(a), nb = cn_ndim(b), n = na > nb ? na : nb;
    double out = 1;
    for (int k = 0; k < n; k++) {
        int64_t da = k < na ? cn_shape(a)[na - 1 - k] : 1, db = k < nb ? cn_shape(b)[nb - 1 - k] : 1;
        if (da != db && da != 1 && db != 1) return -1;
        out *= (double)(da == 1 ? db : da);
    }
    return out;
}

static void op_binary(fuzz_in *in) {
    cn_tensor *a = arg(in), *b = arg(in);
    int which = fuzz_pick(in, 16);
    if (!fits(tnumel(a)) || !fits(tnumel(b)) || !fits(broadcast_numel(a, b))) return;
    cn_tensor *(*const fns[])(cn_tensor *, cn_tensor *) = {
        cn_add, cn_sub, cn_mul, cn_div, cn_pow, cn_maximum, cn_minimum, cn_eq,
        cn_ne,  cn_lt,  cn_le,  cn_gt,  cn_ge,  cn_logical_and, cn_logical_or};
    cn_clear_error();
    if (which < (int)(sizeof fns / sizeof *fns)) {
        take(in, fns[which](a, b), "binary op");
        return;
    }
    cn_tensor *c = arg(in);
    if (!fits(tnumel(c)) || !fits(broadcast_numel(a, c)) || !fits(broadcast_numel(b, c)))
        return;
    double ab = broadcast_numel(a, b), abc = ab < 0 ? -1 : broadcast_numel(c, a) * ab;
    if (!fits(abc)) return;
    take(in, cn_where(c, a, b), "cn_where");
}

static void op_reduce(fuzz_in *in) {
    cn_tensor *x = arg(in);
    int which = fuzz_pick(in, 20), dim = pick_axis(in), keep = fuzz_pick(in, 3);
    int64_t correction = fuzz_u8(in) < 200 ? fuzz_pick(in, 3) : pick_dim(in);
    if (!small(x)) return;
    cn_tensor *(*const all[])(cn_tensor *) = {cn_sum, cn_mean,   cn_max,    cn_min,
                                              cn_prod, cn_argmax, cn_argmin, cn_logsumexp};
    cn_tensor *(*const by_dim[])(cn_tensor *, int, int) = {
        cn_sum_dim, cn_mean_dim, cn_max_dim, cn_min_dim, cn_prod_dim, cn_argmax_dim,
        cn_argmin_dim, cn_logsumexp_dim};
    cn_clear_error();
    if (which < 8)
        take(in, all[which](x), "reduction");
    else if (which < 16)
        take(in, by_dim[which - 8](x, dim, keep), "reduction over a dim");
    else if (which == 16)
        take(in, cn_var(x, correction), "cn_var");
    else if (which == 17)
        take(in, cn_var_dim(x, dim, correction, keep), "cn_var_dim");
    else if (which == 18)
        take(in, cn_softmax(x, dim), "cn_softmax");
    else
        take(in, cn_log_softmax(x, dim), "cn_log_softmax");
}

/* The result size and multiply-adds of a @ b, as numpy.matmul; *out < 0 when they do not fit. */
static void matmul_cost(const cn_tensor *a, const cn_tensor *b, double *out, double *work) {
    *out = *work = 0;
    if (!a || !b) return;
    int na = cn_ndim(a), nb = cn_ndim(b);
    if (na == 0 || nb == 0) return;
    const int64_t *sa = cn_shape(a), *sb = cn_shape(b);
    double m = na >= 2 ? (double)sa[na - 2] : 1, k = (double)sa[na - 1];
    double n = nb >= 2 ? (double)sb[nb - 1] : 1, kb = (double)sb[nb >= 2 ? nb - 2 : 0];
    if (k != kb) {
        *out = -1;
        return;
    }
    double batch = 1;
    int ba = na > 2 ? na - 2 : 0, bb = nb > 2 ? nb - 2 : 0, nbat = ba > bb ? ba : bb;
    for (int i = 0; i < nbat; i++) {
        int64_t da = i < ba ? sa[ba - 1 - i] : 1, db = i < bb ? sb[bb - 1 - i] : 1;
        if (da != db && da != 1 && db != 1) {
            *out = -1;
            return;
        }
        batch *= (double)(da == 1 ? db : da);
    }
    *out = batch * m * n;
    *work = *out * k;
}

static int affordable(double out, double work) {
    return out < 0 || (out <= CAP && work <= WORK) || out >= HUGE_ELEMS;
}

static void op_matmul(fuzz_in *in) {
    cn_tensor *a = arg(in), *b = arg(in);
    int linear = fuzz_pick(in, 3);
    cn_tensor *bias = fuzz_u8(in) & 1 ? arg(in) : NULL;
    if (!small(a) || !small(b) || !small(bias)) return;
    double out, work;
    if (linear && a && b && cn_ndim(b) == 2 && cn_ndim(a) >= 1) {
        /* x: [..., in], w: [out, in] */
        out = tnumel(a) / (double)cn_shape(a)[cn_ndim(a) - 1] * (double)cn_shape(b)[0];
        if (cn_shape(a)[cn_ndim(a) - 1] == 0) out = 0;
        work = out * (double)cn_shape(b)[1];
    } else {
        matmul_cost(a, b, &out, &work);
    }
    if (!affordable(out, work)) return;
    cn_clear_error();
    if (linear)
        take(in, cn_linear(a, b, bias), "cn_linear");
    else
        take(in, cn_matmul(a, b), "cn_matmul");
}

static void op_join(fuzz_in *in) {
    cn_tensor *ts[5];
    int n = fuzz_pick(in, 5), dim = pick_axis(in), stack = fuzz_u8(in) & 1;
    double total = 0;
    for (int k = 0; k < n; k++) {
        ts[k] = arg(in);
        if (!fits(tnumel(ts[k]))) return;
        total += tnumel(ts[k]);
    }
    if (!fits(total)) return;
    cn_clear_error();
    if (stack)
        take(in, cn_stack(n ? ts : NULL, n, dim), "cn_stack");
    else
        take(in, cn_cat(n ? ts : NULL, n, dim), "cn_cat");
}

static void op_split(fuzz_in *in) {
    cn_tensor *x = arg(in), *parts[4] = {0};
    int chunk = fuzz_u8(in) & 1, dim = pick_axis(in), max_parts = fuzz_pick(in, 5);
    int64_t size = pick_dim(in);
    int chunks = fuzz_u8(in) < 200 ? fuzz_pick(in, 6) : pick_axis(in);
    cn_clear_error();
    int got = chunk ? cn_chunk(x, chunks, dim, parts, max_parts)
                    : cn_split(x, size, dim, parts, max_parts);
    if (got < 0) {
        FUZZ_CHECK_FAILED(chunk ? "cn_chunk" : "cn_split");
        for (int k = 0; k < 4; k++)
            if (parts[k]) FUZZ_FAIL("a failed split wrote a part");
        return;
    }
    int have = got < max_parts ? got : max_parts;
    for (int k = 0; k < 4; k++) {
        if (k < have && !parts[k]) FUZZ_FAIL("split part %d of %d is NULL", k, got);
        if (k >= have && parts[k]) FUZZ_FAIL("split wrote past its max_parts");
    }
    for (int k = 0; k < have; k++) {
        inspect(parts[k]);
        if (k < 2)
            put(in, parts[k]);
        else if (!in_scope)
            cn_release(parts[k]);
    }
}

static void op_index_ops(fuzz_in *in) {
    cn_tensor *x = arg(in), *index = arg(in);
    int which = fuzz_pick(in, 4), dim = pick_axis(in);
    if (!small(x) || !small(index)) return;
    cn_clear_error();
    if (which == 0) {
        take(in, cn_gather(x, dim, index), "cn_gather");
    } else if (which == 1) {
        cn_tensor *src = arg(in);
        if (!small(src)) return;
        take(in, cn_scatter_add(x, dim, index, src), "cn_scatter_add");
    } else if (which == 2) {
        double out = tnumel(index);
        if (x && dim >= 0 && dim < cn_ndim(x))
            for (int k = 0; k < cn_ndim(x); k++)
                if (k != dim) out *= (double)cn_shape(x)[k];
        if (!fits(out)) return;
        take(in, cn_index_select(x, dim, index), "cn_index_select");
    } else {
        int64_t classes = fuzz_u8(in) < 200 ? fuzz_pick(in, 12) - 1 : pick_dim(in);
        if (!fits(tnumel(index) * (double)classes)) return;
        take(in, cn_one_hot(index, classes, pick_dtype(in)), "cn_one_hot");
    }
}

/* Output size along one spatial dim of a conv or pool, as double (< 1: no output). */
static double out_len(double len, double pad, double kernel, double dil, double stride) {
    return floor((len + 2 * pad - dil * (kernel - 1) - 1) / stride) + 1;
}

static int64_t pick_attr(fuzz_in *in) {
    uint8_t v = fuzz_u8(in);
    return v < 200 ? v % 4 : pick_dim(in);
}

static void op_conv(fuzz_in *in) {
    cn_tensor *x = arg(in), *w = arg(in), *b = fuzz_u8(in) & 1 ? arg(in) : NULL;
    cn_conv2d_params p;
    for (int k = 0; k < 2; k++) {
        p.stride[k] = pick_attr(in);
        p.padding[k] = pick_attr(in);
        p.dilation[k] = pick_attr(in);
    }
    p.groups = pick_attr(in);
    if (!small(x) || !small(w) || !small(b)) return;
    double out = -1, work = 0;
    if (x && w && cn_ndim(x) == 4 && cn_ndim(w) == 4) {
        const int64_t *xs = cn_shape(x), *ws = cn_shape(w);
        double o[2];
        for (int k = 0; k < 2; k++) {
            double s = p.stride[k] ? (double)p.stride[k] : 1;
            double d = p.dilation[k] ? (double)p.dilation[k] : 1;
            o[k] = out_len((double)xs[2 + k], (double)p.padding[k], (double)ws[2 + k], d, s);
        }
        if (o[0] >= 1 && o[1] >= 1 && p.padding[0] >= 0 && p.padding[1] >= 0) {
            out = (double)xs[0] * (double)ws[0] * o[0] * o[1];
            /* im2col holds C*KH*KW rows of OH*OW: as big as the work per image */
            work = out * (double)ws[1] * (double)ws[2] * (double)ws[3];
            double cols = (double)xs[1] * (double)ws[2] * (double)ws[3] * o[0] * o[1];
            if (cols > work) work = cols;
            if (cols > CAP && cols < HUGE_ELEMS) return;
        }
    }
    if (!affordable(out, work)) return;
    if (trace)
        fprintf(stderr, "  conv2d stride (%lld, %lld) padding (%lld, %lld) dilation (%lld, %lld) "
                "groups %lld:\n", (long long)p.stride[0], (long long)p.stride[1],
                (long long)p.padding[0], (long long)p.padding[1], (long long)p.dilation[0],
                (long long)p.dilation[1], (long long)p.groups);
    cn_clear_error();
    take(in, cn_conv2d(x, w, b, fuzz_u8(in) < 8 ? NULL : &p), "cn_conv2d");
}

static void op_pool(fuzz_in *in) {
    cn_tensor *x = arg(in);
    int avg = fuzz_u8(in) & 1;
    cn_pool2d_params p;
    for (int k = 0; k < 2; k++) {
        p.kernel[k] = fuzz_u8(in) < 200 ? 1 + fuzz_pick(in, 4) : pick_dim(in);
        p.stride[k] = pick_attr(in);
        p.padding[k] = pick_attr(in);
    }
    if (!small(x)) return;
    double out = -1, work = 0;
    if (x && cn_ndim(x) == 4) {
        const int64_t *xs = cn_shape(x);
        double o[2], win = 1;
        for (int k = 0; k < 2; k++) {
            double kk = (double)p.kernel[k];
            double s = p.stride[k] ? (double)p.stride[k] : kk;
            o[k] = s > 0 ? out_len((double)xs[2 + k], (double)p.padding[k], kk, 1, s) : -1;
            /* the window, clipped to the padded input */
            double span = (double)xs[2 + k] + 2 * (double)p.padding[k];
            win *= kk < span ? kk : span;
        }
        if (o[0] >= 1 && o[1] >= 1) {
            out = (double)xs[0] * (double)xs[1] * o[0] * o[1];
            work = out * win;
        }
    }
    if (!affordable(out, work)) return;
    if (trace)
        fprintf(stderr, "  pool2d kernel (%lld, %lld) stride (%lld, %lld) padding (%lld, %lld):\n",
                (long long)p.kernel[0], (long long)p.kernel[1], (long long)p.stride[0],
                (long long)p.stride[1], (long long)p.padding[0], (long long)p.padding[1]);
    cn_clear_error();
    if (avg)
        take(in, cn_avg_pool2d(x, &p), "cn_avg_pool2d");
    else
        take(in, cn_max_pool2d(x, &p), "cn_max_pool2d");
}

static void op_backward(fuzz_in *in) {
    cn_tensor *root = arg(in);
    if (!small(root)) return;
    cn_clear_error();
    cn_grads *g = cn_backward(root);
    if (!g) {
        FUZZ_CHECK_FAILED("cn_backward");
        return;
    }
    for (int k = 0; k < NREG; k++) {
        cn_tensor *grad = reg[k] ? cn_grad_find(g, reg[k]) : NULL;
        if (grad) inspect(grad);
    }
    cn_grads_free(g);
}

static void op_copy(fuzz_in *in) {
    cn_tensor *dst = arg(in), *src = arg(in);
    int no_grad = fuzz_u8(in) & 1;
    if (!small(dst) || !fits(tnumel(src))) return;
    if (no_grad) cn_no_grad_begin();
    cn_clear_error();
    if (cn_copy_(dst, src) != CN_OK) FUZZ_CHECK_FAILED("cn_copy_");
    if (no_grad) cn_no_grad_end();
}

/* ---- the program --------------------------------------------------------------------------- */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *t = getenv("FUZZ_OPS_TRACE");
    trace = t && t[0] == '1';
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_in in = {data, size, 0};
    gen = cn_generator_new(fuzz_u8(&in));
    uint8_t flags = fuzz_u8(&in);
    fuzz_live before = fuzz_live_now();
    in_scope = (flags & 3) == 3;
    armed = 0;
    if (in_scope && cn_scope_begin() != CN_OK) FUZZ_FAIL("cn_scope_begin");
    for (int step = 0; step < MAX_STEPS && fuzz_more(&in); step++) {
        switch (fuzz_pick(&in, 18)) {
        case 0:
        case 1: op_make(&in); break;
        case 2: op_index(&in); break;
        case 3:
        case 4: op_view(&in); break;
        case 5: op_unary(&in); break;
        case 6: op_scalar(&in); break;
        case 7: op_binary(&in); break;
        case 8: op_reduce(&in); break;
        case 9: op_matmul(&in); break;
        case 10: op_join(&in); break;
        case 11: op_split(&in); break;
        case 12: op_index_ops(&in); break;
        case 13: op_conv(&in); break;
        case 14: op_pool(&in); break;
        case 15: op_backward(&in); break;
        case 16: op_copy(&in); break;
        default:
            armed = 1;
            cn_alloc_fail_after(1 + fuzz_pick(&in, 32));
            break;
        }
    }
    cn_alloc_fail_after(0);
    /* the registers hold references of their own (cn_keep'd out of the scope when one is open);
     * what else the program made belongs to the scope */
    for (int k = 0; k < NREG; k++) {
        cn_release(reg[k]);
        reg[k] = NULL;
    }
    if (in_scope && cn_scope_end() != CN_OK) FUZZ_FAIL("cn_scope_end");
    fuzz_check_live(before);
    return 0;
}
