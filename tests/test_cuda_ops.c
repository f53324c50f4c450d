/* The CUDA backend against the CPU backend, op by op (as ggml's test-backend-ops does): every op
 * of cn_op runs on both with the same inputs, contiguous, transposed, strided and broadcast,
 * and the results must agree within a tolerance per dtype:
 *   f64 1e-10, f32 2e-5, f16 4e-3, bf16 3e-2 (relative to max(1, |want|)); ints and bools exact.
 * f16 and bf16, which most CPU kernels do not take, are checked against the CPU computing in f32
 * on the same (exactly widened) values, rounded to the dtype at the end. Random numbers must be
 * bit-identical. Then: the autodiff oracle cases and a small network's gradients on
 * cn_autodiff(cuda), to_device round trips, out-of-memory and allocation-failure errors, the
 * allocator's statistics, and clean errors for bad indices and integer division by zero.
 *
 * Without a GPU (or without the CUDA backend in this build) it prints "cuda: no device,
 * skipping" and exits 77, which ctest reports as skipped.
 *
 * CINDER_TEST_GPU_DEVICE=<name> compares another device with the CPU instead (e.g. "cpu", to
 * check this harness itself on a machine without a GPU; cases whose dtype that device lacks are
 * then skipped, as are the CUDA-only sections). */
#include "harness.h"

#include <stdarg.h>
#include <stdint.h>

#include "cinder/cuda.h"
#include "dispatch/backward_ops.h"

/* The CUDA driver and AddressSanitizer both want the low address range: without this the
 * sanitizer build sees no GPU. The driver's own allocations at exit are not cinder's leaks. */
__attribute__((used)) const char *__asan_default_options(void);
__attribute__((used)) const char *__asan_default_options(void) {
    return "protect_shadow_gap=0:detect_leaks=0";
}

static cn_device cpu, gpu;
static int selftest;             /* gpu is not CUDA: the harness checking itself */
static int covered[CN_OP_COUNT]; /* ops compared at least once */
static cn_generator gen;         /* inputs */

/* ---- helpers ------------------------------------------------------------------------------------ */

static int is_half(cn_dtype dt) { return dt == CN_F16 || dt == CN_BF16; }

static double tol_for(cn_dtype dt) {
    switch (dt) {
    case CN_F64: return 1e-10;
    case CN_F32: return 2e-5;
    case CN_F16: return 4e-3;
    case CN_BF16: return 3e-2;
    default: return 0;
    }
}

static const char *label(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *label(const char *fmt, ...) {
    static char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}

#define FAIL(...)                                                                              \
    do {                                                                                       \
        fprintf(stderr, __VA_ARGS__);                                                          \
        fprintf(stderr, "\n");                                                                 \
        th_checks_failed++;                                                                    \
    } while (0)

/* A CPU tensor with values uniform in [lo, hi), converted to dt (ints truncate; bool: lo, hi are
 * ignored and the values are 0 or 1). */
static cn_tensor *cpu_rand(const int64_t *shape, int nd, cn_dtype dt, double lo, double hi) {
    if (dt == CN_BOOL) lo = 0, hi = 2;
    cn_tensor *f = cn_rand_uniform(&gen, shape, nd, lo, hi, CN_F64, cpu);
    if (!f || dt == CN_F64) return f;
    cn_tensor *t;
    if (dt == CN_BOOL) {
        cn_tensor *i = cn_cast(f, CN_I32);
        t = cn_cast(i, CN_BOOL);
        cn_release(i);
    } else {
        t = cn_cast(f, dt);
    }
    cn_release(f);
    return t;
}

/* The same tensor on the CPU and on the GPU. */
typedef struct pair {
    cn_tensor *c, *g;
} pair;

static pair pair_of(cn_tensor *c) {
    pair p = {c, c ? cn_to_device(c, gpu) : NULL};
    if (c && !p.g) FAIL("to_device failed: %s", cn_last_error());
    return p;
}

static void pair_free(pair p) {
    cn_release(p.c);
    cn_release(p.g);
}

static pair pair_from(const double *v, const int64_t *shape, int nd, cn_dtype dt) {
    return pair_of(th_tensor(v, shape, nd, dt));
}

enum { CONTIG, TRANSPOSED, STRIDED, BROADCAST, N_LAYOUTS };
static const char *const layout_names[N_LAYOUTS] = {"contiguous", "transposed", "strided",
                                                    "broadcast"};

static cn_tensor *view_as(cn_tensor *t, int layout, const int64_t *shape, int nd) {
    if (!t) return NULL;
    if (layout == TRANSPOSED && nd >= 2) return cn_transpose(t, nd - 2, nd - 1);
    if (layout == STRIDED && nd >= 1) return cn_slice(t, nd - 1, 0, INT64_MAX, 2);
    if (layout == BROADCAST && nd >= 1) return cn_expand(t, shape, nd);
    return cn_retain(t);
}

/* A random input of `shape` laid out as `layout` (transposed: the last two dims swapped in
 * memory; strided: every other element of the last dim; broadcast: dim 0 has stride 0), holding
 * the same values on both devices. */
static pair input(const int64_t *shape, int nd, cn_dtype dt, double lo, double hi, int layout) {
    int64_t base[CN_MAX_DIMS];
    memcpy(base, shape, sizeof(int64_t) * (size_t)nd);
    if (layout == TRANSPOSED && nd >= 2) {
        base[nd - 2] = shape[nd - 1];
        base[nd - 1] = shape[nd - 2];
    } else if (layout == STRIDED && nd >= 1) {
        base[nd - 1] = 2 * shape[nd - 1];
    } else if (layout == BROADCAST && nd >= 1) {
        base[0] = 1;
    }
    pair b = pair_of(cpu_rand(base, nd, dt, lo, hi));
    pair r = {view_as(b.c, layout, shape, nd), view_as(b.g, layout, shape, nd)};
    pair_free(b);
    return r;
}

/* The values of t (any device) as doubles, read through the CPU; NULL on failure. */
static double *read_all(cn_tensor *t, int64_t *n) {
    cn_tensor *h = cn_to_device(t, cpu);
    if (!h) return NULL;
    *n = cn_numel(h);
    double *v = malloc(sizeof(double) * (size_t)(*n ? *n : 1));
    if (th_read(h, v) != *n) {
        free(v);
        v = NULL;
    }
    cn_release(h);
    return v;
}

/* got (from the GPU) against want (from the CPU): device, shape, dtype, then every value within
 * tol * max(1, |want|); NaN matches NaN and infinities must be equal. */
static void expect_close(const char *what, cn_tensor *got, cn_tensor *want, double tol) {
    if (!got || !want) {
        FAIL("%s: %s is NULL (%s)", what, got ? "the CPU result" : "the GPU result",
             cn_last_error());
        return;
    }
    if (cn_device_of(got).backend != gpu.backend) FAIL("%s: the result left the GPU", what);
    if (cn_ndim(got) != cn_ndim(want) ||
        memcmp(cn_shape(got), cn_shape(want), sizeof(int64_t) * (size_t)cn_ndim(got)) != 0) {
        char a[128], b[128];
        FAIL("%s: shape %s, want %s", what, cn_tensor_str(got, a, sizeof a),
             cn_tensor_str(want, b, sizeof b));
        return;
    }
    if (cn_dtype_of(got) != cn_dtype_of(want)) {
        FAIL("%s: dtype %s, want %s", what, cn_dtype_name(cn_dtype_of(got)),
             cn_dtype_name(cn_dtype_of(want)));
        return;
    }
    int64_t n = 0, m = 0;
    double *g = read_all(got, &n), *w = read_all(want, &m);
    if (!g || !w || n != m) {
        FAIL("%s: reading the results failed (%s)", what, cn_last_error());
    } else {
        for (int64_t i = 0; i < n; i++) {
            double s = fabs(w[i]) > 1.0 ? fabs(w[i]) : 1.0;
            int ok = (isnan(g[i]) && isnan(w[i])) || (isinf(w[i]) && g[i] == w[i]) ||
                     (!isinf(w[i]) && fabs(g[i] - w[i]) <= tol * s);
            if (!ok) {
                FAIL("%s: element %lld is %.17g, want %.17g (tol %g)", what, (long long)i, g[i],
                     w[i], tol);
                break;
            }
        }
    }
    free(g);
    free(w);
}

/* ---- the comparison --------------------------------------------------------------------------- */

typedef cn_tensor *(*op_fn)(cn_tensor *const *x, const void *arg);

/* Runs f on the GPU inputs and on the CPU inputs and compares the results. When an input is
 * f16/bf16 the CPU runs on f32 copies and its result is rounded to the GPU result's dtype. The
 * tolerance is tol_for(result dtype) * scale. */
static void check_op(const char *what, cn_op op, op_fn f, const void *arg, const pair *in, int n,
                     double scale) {
    covered[op] = 1;
    cn_tensor *cx[8], *gx[8];
    int ref32 = 0;
    for (int i = 0; i < n; i++)
        if (in[i].c && is_half(cn_dtype_of(in[i].c))) ref32 = 1;
    for (int i = 0; i < n; i++) {
        gx[i] = in[i].g;
        cx[i] = ref32 && in[i].c && is_half(cn_dtype_of(in[i].c)) ? cn_cast(in[i].c, CN_F32)
                                                                  : cn_retain(in[i].c);
    }
    cn_clear_error();
    cn_tensor *got = f(gx, arg);
    if (!got && selftest && cn_last_status() == CN_ERR_DTYPE) { /* the stand-in lacks it */
        cn_clear_error();
        for (int i = 0; i < n; i++) cn_release(cx[i]);
        return;
    }
    char gpu_error[512] = "";
    if (!got) snprintf(gpu_error, sizeof gpu_error, "%s", cn_last_error());
    cn_tensor *want = f(cx, arg);
    if (want && got && cn_dtype_of(want) != cn_dtype_of(got)) {
        cn_tensor *r = cn_cast(want, cn_dtype_of(got));
        cn_release(want);
        want = r;
    }
    if (!got) {
        FAIL("%s: the GPU op failed: %s", what, gpu_error);
    } else {
        expect_close(what, got, want, tol_for(cn_dtype_of(got)) * scale);
    }
    cn_release(got);
    cn_release(want);
    for (int i = 0; i < n; i++) cn_release(cx[i]);
    cn_clear_error();
}

/* s with every "<gpu device>" replaced by "cpu:0" (messages name the inputs' device). */
static void as_cpu_message(const char *s, char *out, size_t size) {
    char dev[64];
    cn_device_str(gpu, dev, sizeof dev);
    size_t len = strlen(dev), o = 0;
    while (*s && o + 6 < size) {
        if (strncmp(s, dev, len) == 0) {
            memcpy(out + o, "cpu:0", 5);
            o += 5;
            s += len;
        } else {
            out[o++] = *s++;
        }
    }
    out[o] = '\0';
}

/* Both devices must fail with the same status and the same message (up to the device's name). */
static void check_same_error(const char *what, op_fn f, const void *arg, const pair *in, int n) {
    cn_tensor *cx[8], *gx[8];
    for (int i = 0; i < n; i++) cx[i] = in[i].c, gx[i] = in[i].g;
    cn_clear_error();
    cn_tensor *w = f(cx, arg);
    cn_status ws = cn_last_status();
    char want[1024];
    snprintf(want, sizeof want, "%s", cn_last_error());
    cn_clear_error();
    cn_tensor *g = f(gx, arg);
    if (w || g || ws == CN_OK) FAIL("%s: expected both devices to fail", what);
    if (cn_last_status() != ws) FAIL("%s: status %s, want %s", what,
                                     cn_status_name(cn_last_status()), cn_status_name(ws));
    char got[1024];
    as_cpu_message(cn_last_error(), got, sizeof got);
    if (strcmp(got, want) != 0)
        FAIL("%s: message\n  \"%s\"\nwant\n  \"%s\"", what, cn_last_error(), want);
    cn_release(w);
    cn_release(g);
    cn_clear_error();
}

/* The arguments of the small op functions below. */
typedef struct args {
    cn_tensor *(*u)(cn_tensor *);
    cn_tensor *(*b)(cn_tensor *, cn_tensor *);
    cn_tensor *(*r)(cn_tensor *, int, int);
    cn_tensor *(*sc)(cn_tensor *, double);
    double s0, s1;
    int64_t i0, i1;
    const int64_t *ints;
    const int64_t *shape;
} args;

#define A(a) ((const args *)(a))
static cn_tensor *f_unary(cn_tensor *const *x, const void *a) { return A(a)->u(x[0]); }
static cn_tensor *f_binary(cn_tensor *const *x, const void *a) { return A(a)->b(x[0], x[1]); }
static cn_tensor *f_gelu(cn_tensor *const *x, const void *a) {
    return cn_gelu(x[0], (cn_gelu_approx)A(a)->i0);
}
static cn_tensor *f_add_scalar(cn_tensor *const *x, const void *a) {
    return cn_add_scalar(x[0], A(a)->s0);
}
static cn_tensor *f_mul_scalar(cn_tensor *const *x, const void *a) {
    return cn_mul_scalar(x[0], A(a)->s0);
}
static cn_tensor *f_pow_scalar(cn_tensor *const *x, const void *a) {
    return cn_pow_scalar(x[0], A(a)->s0);
}
static cn_tensor *f_clamp(cn_tensor *const *x, const void *a) {
    return cn_clamp(x[0], A(a)->s0, A(a)->s1);
}
static cn_tensor *f_where(cn_tensor *const *x, const void *a) {
    (void)a;
    return cn_where(x[0], x[1], x[2]);
}
static cn_tensor *f_cast(cn_tensor *const *x, const void *a) {
    return cn_cast(x[0], (cn_dtype)A(a)->i0);
}
static cn_tensor *f_contiguous(cn_tensor *const *x, const void *a) {
    (void)a;
    return cn_contiguous(x[0]);
}
static cn_tensor *f_cat(cn_tensor *const *x, const void *a) {
    return cn_cat(x, 2, (int)A(a)->i0);
}
static cn_tensor *f_reduce_dim(cn_tensor *const *x, const void *a) {
    return A(a)->r(x[0], (int)A(a)->i0, (int)A(a)->i1);
}
static cn_tensor *f_var_dim(cn_tensor *const *x, const void *a) {
    return cn_var_dim(x[0], (int)A(a)->i0, A(a)->i1, 0);
}
static cn_tensor *f_softmax(cn_tensor *const *x, const void *a) {
    return cn_softmax(x[0], (int)A(a)->i0);
}
static cn_tensor *f_log_softmax(cn_tensor *const *x, const void *a) {
    return cn_log_softmax(x[0], (int)A(a)->i0);
}
static cn_tensor *f_matmul(cn_tensor *const *x, const void *a) {
    (void)a;
    return cn_matmul(x[0], x[1]);
}
/* a: the number of inputs (3: with the bias) */
static cn_tensor *f_linear(cn_tensor *const *x, const void *a) {
    return cn_linear(x[0], x[1], *(const int *)a > 2 ? x[2] : NULL);
}

/* a[0] = inputs (2: no bias), a[1] = cn_gelu_approx */
static cn_tensor *f_linear_gelu(cn_tensor *const *x, const void *a) {
    const int *p = a;
    return cn_linear_gelu(x[0], x[1], p[0] > 2 ? x[2] : NULL, (cn_gelu_approx)p[1]);
}
/* a: the number of inputs (4: with the bias); x = x, w, r[, b] */
static cn_tensor *f_linear_add(cn_tensor *const *x, const void *a) {
    return cn_linear_add(x[0], x[1], *(const int *)a > 3 ? x[3] : NULL, x[2]);
}
static cn_tensor *f_gather(cn_tensor *const *x, const void *a) {
    return cn_gather(x[0], (int)A(a)->i0, x[1]);
}
static cn_tensor *f_scatter_add(cn_tensor *const *x, const void *a) {
    return cn_scatter_add(x[0], (int)A(a)->i0, x[1], x[2]);
}
static cn_tensor *f_index_select(cn_tensor *const *x, const void *a) {
    return cn_index_select(x[0], (int)A(a)->i0, x[1]);
}
static cn_tensor *f_one_hot(cn_tensor *const *x, const void *a) {
    return cn_one_hot(x[0], A(a)->i0, (cn_dtype)A(a)->i1);
}
/* indexing of issue 16: i0 = dim or diagonal, ints = flip dims / repeats (i1 of them), s0 =
 * masked_fill's value; slice_assign: ints = dim, start, end, step */
static cn_tensor *f_masked_fill(cn_tensor *const *x, const void *a) {
    return cn_masked_fill(x[0], x[1], A(a)->s0);
}
static cn_tensor *f_tril(cn_tensor *const *x, const void *a) { return cn_tril(x[0], A(a)->i0); }
static cn_tensor *f_triu(cn_tensor *const *x, const void *a) { return cn_triu(x[0], A(a)->i0); }
static cn_tensor *f_flip(cn_tensor *const *x, const void *a) {
    int dims[CN_MAX_DIMS];
    for (int i = 0; i < (int)A(a)->i1; i++) dims[i] = (int)A(a)->ints[i];
    return cn_flip(x[0], dims, (int)A(a)->i1);
}
static cn_tensor *f_repeat(cn_tensor *const *x, const void *a) {
    return cn_repeat(x[0], A(a)->ints, (int)A(a)->i1);
}
static cn_tensor *f_scatter(cn_tensor *const *x, const void *a) {
    return cn_scatter(x[0], (int)A(a)->i0, x[1], x[2]);
}
static cn_tensor *f_slice_assign(cn_tensor *const *x, const void *a) {
    const int64_t *k = A(a)->ints;
    return cn_slice_assign(x[0], x[1], (int)k[0], k[1], k[2], k[3]);
}
static cn_tensor *f_index_copy(cn_tensor *const *x, const void *a) {
    return cn_index_copy(x[0], (int)A(a)->i0, x[1], x[2]);
}
static cn_tensor *f_index_add(cn_tensor *const *x, const void *a) {
    return cn_index_add(x[0], (int)A(a)->i0, x[1], x[2]);
}
static cn_tensor *f_unfold(cn_tensor *const *x, const void *a) {
    return cn_unfold(x[0], (int)A(a)->i0, A(a)->ints[0], A(a)->ints[1]);
}
static cn_tensor *f_nonzero(cn_tensor *const *x, const void *a) {
    (void)a;
    return cn_nonzero(x[0]);
}
static cn_tensor *f_masked_select(cn_tensor *const *x, const void *a) {
    (void)a;
    return cn_masked_select(x[0], x[1]);
}
static cn_tensor *f_gather_nd(cn_tensor *const *x, const void *a) {
    (void)a;
    return cn_gather_nd(x[0], x[1]);
}
static cn_tensor *f_scatter_nd(cn_tensor *const *x, const void *a) {
    return cn_scatter_nd(x[0], x[1], x[2], (cn_scatter_reduce)A(a)->i0);
}
static cn_tensor *f_conv2d(cn_tensor *const *x, const void *a) {
    const int64_t *k = A(a)->ints;
    cn_conv2d_params p = {{k[0], k[1]}, {k[2], k[3]}, {k[4], k[5]}, k[6]};
    return cn_conv2d(x[0], x[1], A(a)->i0 ? x[2] : NULL, &p);
}
static cn_tensor *f_conv2d_relu(cn_tensor *const *x, const void *a) {
    const int64_t *k = A(a)->ints;
    cn_conv2d_params p = {{k[0], k[1]}, {k[2], k[3]}, {k[4], k[5]}, k[6]};
    return cn_conv2d_relu(x[0], x[1], A(a)->i0 ? x[2] : NULL, &p);
}
static cn_tensor *f_conv2d_max_pool2d(cn_tensor *const *x, const void *a) {
    const int64_t *k = A(a)->ints;
    cn_conv2d_params p = {{k[0], k[1]}, {k[2], k[3]}, {k[4], k[5]}, k[6]};
    return cn_conv2d_max_pool2d(x[0], x[1], A(a)->i0 ? x[2] : NULL, &p, A(a)->i1);
}
/* issue 16's convolutions: ints as their op table rows (backend.h) */
static cn_tensor *f_conv_transpose2d(cn_tensor *const *x, const void *a) {
    const int64_t *k = A(a)->ints;
    cn_conv_transpose2d_params p = {{k[0], k[1]}, {k[2], k[3]}, {k[4], k[5]}, {k[6], k[7]}, k[8]};
    return cn_conv_transpose2d(x[0], x[1], A(a)->i0 ? x[2] : NULL, &p);
}
static cn_tensor *f_conv1d(cn_tensor *const *x, const void *a) {
    const int64_t *k = A(a)->ints;
    cn_conv1d_params p = {k[0], k[1], k[2], k[3]};
    return cn_conv1d(x[0], x[1], A(a)->i0 ? x[2] : NULL, &p);
}
static cn_tensor *f_conv_transpose1d(cn_tensor *const *x, const void *a) {
    const int64_t *k = A(a)->ints;
    cn_conv_transpose1d_params p = {k[0], k[1], k[2], k[3], k[4]};
    return cn_conv_transpose1d(x[0], x[1], A(a)->i0 ? x[2] : NULL, &p);
}
static cn_tensor *f_conv3d(cn_tensor *const *x, const void *a) {
    const int64_t *k = A(a)->ints;
    cn_conv3d_params p = {{k[0], k[1], k[2]}, {k[3], k[4], k[5]}, {k[6], k[7], k[8]}, k[9]};
    return cn_conv3d(x[0], x[1], A(a)->i0 ? x[2] : NULL, &p);
}
static cn_tensor *f_conv_transpose3d(cn_tensor *const *x, const void *a) {
    const int64_t *k = A(a)->ints;
    cn_conv_transpose3d_params p = {{k[0], k[1], k[2]},  {k[3], k[4], k[5]}, {k[6], k[7], k[8]},
                                    {k[9], k[10], k[11]}, k[12]};
    return cn_conv_transpose3d(x[0], x[1], A(a)->i0 ? x[2] : NULL, &p);
}
static cn_tensor *f_conv3d_bw_weight(cn_tensor *const *x, const void *a) {
    return cn__conv3d_backward_weight(x[0], x[1], A(a)->shape, A(a)->ints);
}
static cn_tensor *f_max_pool_bw_index(cn_tensor *const *x, const void *a) {
    return cn__max_pool2d_backward_index(x[0], x[1], A(a)->shape, A(a)->i1);
}
/* conv2d_max_pool2d_backward with every output asked for; returns output i0 (gx, gw, gb) */
static cn_tensor *f_conv_pool_bw(cn_tensor *const *x, const void *a) {
    const int want[3] = {1, 1, 1};
    cn_tensor *g[3];
    if (cn__conv2d_max_pool2d_backward(x[0], x[1], x[2], x[3], A(a)->ints, want, g) != CN_OK)
        return NULL;
    for (int i = 0; i < 3; i++)
        if (i != A(a)->i0) cn_release(g[i]);
    return g[A(a)->i0];
}
static cn_tensor *f_conv_bw_input(cn_tensor *const *x, const void *a) {
    return cn__conv2d_backward_input(x[0], x[1], A(a)->shape, A(a)->ints);
}
static cn_tensor *f_conv_bw_weight(cn_tensor *const *x, const void *a) {
    return cn__conv2d_backward_weight(x[0], x[1], A(a)->shape, A(a)->ints);
}
static cn_tensor *f_pool(cn_tensor *const *x, const void *a) {
    const int64_t *k = A(a)->ints;
    cn_pool2d_params p = {{k[0], k[1]}, {k[2], k[3]}, {k[4], k[5]}};
    return A(a)->i0 ? cn_max_pool2d(x[0], &p) : cn_avg_pool2d(x[0], &p);
}
static cn_tensor *f_max_pool_bw(cn_tensor *const *x, const void *a) {
    return cn__max_pool2d_backward(x[0], x[1], A(a)->ints);
}
static cn_tensor *f_avg_pool_bw(cn_tensor *const *x, const void *a) {
    return cn__avg_pool2d_backward(x[0], A(a)->shape, A(a)->ints);
}

/* padding and pooling of issue 16: pad (ints = the tuple, i1 entries; i0 = the mode; s0 = the
 * constant), its backward (ints = dim, left, right, x's size; i0 = the mode), the adaptive pools
 * (i0 = k, ints = the output sizes) and their backward (shape = x's, i1 = its ndim) */
static cn_tensor *f_pad(cn_tensor *const *x, const void *a) {
    return cn_pad(x[0], A(a)->ints, (int)A(a)->i1, (cn_pad_mode)A(a)->i0, A(a)->s0);
}
static cn_tensor *f_pad_bw(cn_tensor *const *x, const void *a) {
    const int64_t *i = A(a)->ints;
    return cn__pad_backward(x[0], (int)i[0], i[1], i[2], (int)A(a)->i0, i[3]);
}
static cn_tensor *f_adaptive(cn_tensor *const *x, const void *a) {
    const int64_t *o = A(a)->ints;
    switch (A(a)->i0) {
    case 1: return cn_adaptive_avg_pool1d(x[0], o[0]);
    case 2: return cn_adaptive_avg_pool2d(x[0], o[0], o[1]);
    default: return cn_adaptive_avg_pool3d(x[0], o[0], o[1], o[2]);
    }
}
/* ints: max_pool2d_ex's kernel h, w, stride h, w, padding h, w, dilation h, w, ceil_mode; i0:
 * 1 for the indices */
static cn_tensor *f_max_pool_ex(cn_tensor *const *x, const void *a) {
    const int64_t *k = A(a)->ints;
    cn_max_pool2d_params p = {{k[0], k[1]}, {k[2], k[3]}, {k[4], k[5]}, {k[6], k[7]}, (int)k[8]};
    cn_tensor *idx = NULL, *v = cn_max_pool2d_ex(x[0], &p, &idx);
    if (!v) return NULL;
    cn_tensor *keep = A(a)->i0 ? idx : v;
    cn_release(A(a)->i0 ? v : idx);
    return keep;
}
/* ints: kernel h, w, dilation h, w, padding h, w, stride h, w; fold4d's output size: shape */
static cn_tensor *f_unfold4d(cn_tensor *const *x, const void *a) {
    const int64_t *k = A(a)->ints;
    cn_fold_params p = {{k[0], k[1]}, {k[2], k[3]}, {k[4], k[5]}, {k[6], k[7]}};
    return cn_unfold4d(x[0], &p);
}
static cn_tensor *f_fold4d(cn_tensor *const *x, const void *a) {
    const int64_t *k = A(a)->ints;
    cn_fold_params p = {{k[0], k[1]}, {k[2], k[3]}, {k[4], k[5]}, {k[6], k[7]}};
    return cn_fold4d(x[0], A(a)->shape[2], A(a)->shape[3], &p);
}
static cn_tensor *f_adaptive_bw(cn_tensor *const *x, const void *a) {
    return cn__adaptive_avg_pool_backward(x[0], A(a)->shape, (int)A(a)->i1, (int)A(a)->i0);
}

static const cn_dtype float_dtypes[] = {CN_F32, CN_F64, CN_F16, CN_BF16};
#define N_FLOAT 4

/* ---- elementwise ------------------------------------------------------------------------------ */

static void test_unary(void) {
    static const struct {
        cn_op op;
        cn_tensor *(*f)(cn_tensor *);
        double lo, hi;
        int ints;
    } ops[] = {
        {CN_OP_NEG, cn_neg, -3, 3, 1},        {CN_OP_ABS, cn_abs, -3, 3, 1},
        {CN_OP_RELU, cn_relu, -3, 3, 1},      {CN_OP_EXP, cn_exp, -4, 4, 0},
        {CN_OP_LOG, cn_log, 0.05, 5, 0},      {CN_OP_LOG1P, cn_log1p, -0.9, 5, 0},
        {CN_OP_SQRT, cn_sqrt, 0, 5, 0},       {CN_OP_RSQRT, cn_rsqrt, 0.05, 5, 0},
        {CN_OP_SIN, cn_sin, -6, 6, 0},        {CN_OP_COS, cn_cos, -6, 6, 0},
        {CN_OP_TANH, cn_tanh, -4, 4, 0},      {CN_OP_SIGMOID, cn_sigmoid, -30, 30, 0},
        {CN_OP_SILU, cn_silu, -8, 8, 0},      {CN_OP_ERF, cn_erf, -3, 3, 0},
        {CN_OP_FLOOR, cn_floor, -4, 4, 1},    {CN_OP_CEIL, cn_ceil, -4, 4, 1},
        {CN_OP_ROUND, cn_round, -4, 4, 1},    {CN_OP_TRUNC, cn_trunc, -4, 4, 1},
        {CN_OP_SIGN, cn_sign, -3, 3, 1},      {CN_OP_RECIPROCAL, cn_reciprocal, 0.1, 5, 0},
        {CN_OP_TAN, cn_tan, -1.4, 1.4, 0},    {CN_OP_ASIN, cn_asin, -1, 1, 0},
        {CN_OP_ACOS, cn_acos, -1, 1, 0},      {CN_OP_ATAN, cn_atan, -6, 6, 0},
        {CN_OP_SINH, cn_sinh, -5, 5, 0},      {CN_OP_COSH, cn_cosh, -5, 5, 0},
        {CN_OP_ASINH, cn_asinh, -6, 6, 0},    {CN_OP_ACOSH, cn_acosh, 1, 6, 0},
        {CN_OP_ATANH, cn_atanh, -0.99, 0.99, 0},
    };
    const int64_t shape[3] = {3, 37, 45};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
        args a = {.u = ops[k].f};
        for (int d = 0; d < 6; d++) {
            cn_dtype dt = d < N_FLOAT ? float_dtypes[d] : (d == 4 ? CN_I32 : CN_I64);
            if (d >= N_FLOAT && !ops[k].ints) continue;
            for (int l = 0; l < N_LAYOUTS; l++) {
                pair x = input(shape, 3, dt, ops[k].lo, ops[k].hi, l);
                check_op(label("%s %s %s", cn_op_name(ops[k].op), cn_dtype_name(dt),
                               layout_names[l]),
                         ops[k].op, f_unary, &a, &x, 1, 1);
                pair_free(x);
            }
        }
    }
    for (int approx = 0; approx < 2; approx++)
        for (int d = 0; d < N_FLOAT; d++) {
            args a = {.i0 = approx};
            pair x = input(shape, 3, float_dtypes[d], -5, 5, TRANSPOSED);
            check_op(label("gelu(%d) %s", approx, cn_dtype_name(float_dtypes[d])), CN_OP_GELU,
                     f_gelu, &a, &x, 1, 1);
            pair_free(x);
        }
    /* special values pass through as on the CPU */
    const double sv[8] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e-30, -1e30, 88.0};
    int64_t n = 8;
    for (int d = 0; d < 2; d++) {
        pair x = pair_from(sv, &n, 1, float_dtypes[d]);
        for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
            args a = {.u = ops[k].f};
            check_op(label("%s %s specials", cn_op_name(ops[k].op), cn_dtype_name(float_dtypes[d])),
                     ops[k].op, f_unary, &a, &x, 1, 1);
        }
        pair_free(x);
    }
}

static void test_scalar_ops(void) {
    const int64_t shape[2] = {41, 33};
    for (int d = 0; d < 6; d++) {
        cn_dtype dt = d < N_FLOAT ? float_dtypes[d] : (d == 4 ? CN_I32 : CN_I64);
        int is_int = d >= N_FLOAT;
        for (int l = 0; l < N_LAYOUTS; l++) {
            pair x = input(shape, 2, dt, is_int ? -100 : 0.1, is_int ? 100 : 3, l);
            const char *dn = cn_dtype_name(dt), *ln = layout_names[l];
            args add = {.s0 = is_int ? 7 : 2.5}, mul = {.s0 = is_int ? -3 : -1.5};
            args pw = {.s0 = 2.7}, cl = {.s0 = is_int ? -2.5 : 0.5, .s1 = is_int ? 30.5 : 2.2};
            check_op(label("add_scalar %s %s", dn, ln), CN_OP_ADD_SCALAR, f_add_scalar, &add, &x,
                     1, 1);
            check_op(label("mul_scalar %s %s", dn, ln), CN_OP_MUL_SCALAR, f_mul_scalar, &mul, &x,
                     1, 1);
            if (!is_int)
                check_op(label("pow_scalar %s %s", dn, ln), CN_OP_POW_SCALAR, f_pow_scalar, &pw,
                         &x, 1, 2);
            check_op(label("clamp %s %s", dn, ln), CN_OP_CLAMP, f_clamp, &cl, &x, 1, 1);
            pair_free(x);
        }
    }
    /* integers wrap like the CPU's */
    const double big[4] = {2147483600.0, -2147483600.0, 2147483647.0, 5};
    int64_t n = 4;
    for (int d = 0; d < 2; d++) {
        cn_dtype dt = d ? CN_I64 : CN_I32;
        pair x = pair_from(big, &n, 1, dt);
        /* the scalar itself must convert to the dtype (the front-ends refuse it otherwise): 2e9
         * is an i32, and its products with the values above wrap */
        args add = {.s0 = 100}, mul = {.s0 = d ? 4e9 : 2e9}, cl = {.s0 = -1e300, .s1 = 1e300};
        check_op(label("add_scalar wraps %s", cn_dtype_name(dt)), CN_OP_ADD_SCALAR, f_add_scalar,
                 &add, &x, 1, 1);
        check_op(label("mul_scalar wraps %s", cn_dtype_name(dt)), CN_OP_MUL_SCALAR, f_mul_scalar,
                 &mul, &x, 1, 1);
        check_op(label("clamp saturates its bounds %s", cn_dtype_name(dt)), CN_OP_CLAMP, f_clamp,
                 &cl, &x, 1, 1);
        /* a scalar outside the dtype: the same refusal on both devices */
        args out_of_range = {.s0 = d ? 1e19 : 4e9}, nan = {.s0 = NAN};
        check_same_error(label("mul_scalar refuses a scalar outside %s", cn_dtype_name(dt)),
                         f_mul_scalar, &out_of_range, &x, 1);
        check_same_error(label("add_scalar refuses NaN for %s", cn_dtype_name(dt)), f_add_scalar,
                         &nan, &x, 1);
        pair_free(x);
    }
}

static void test_binary(void) {
    static const struct {
        cn_op op;
        cn_tensor *(*f)(cn_tensor *, cn_tensor *);
        double alo, ahi, blo, bhi;
        int ints;
    } ops[] = {
        {CN_OP_ADD, cn_add, -3, 3, -3, 3, 1},      {CN_OP_SUB, cn_sub, -3, 3, -3, 3, 1},
        {CN_OP_MUL, cn_mul, -3, 3, -3, 3, 1},      {CN_OP_DIV, cn_div, -3, 3, 0.5, 3, 1},
        {CN_OP_POW, cn_pow, 0.1, 3, -2, 2, 0},     {CN_OP_MAXIMUM, cn_maximum, -3, 3, -3, 3, 1},
        {CN_OP_MINIMUM, cn_minimum, -3, 3, -3, 3, 1}, {CN_OP_ATAN2, cn_atan2, -3, 3, -3, 3, 0},
    };
    const int64_t shape[3] = {6, 4, 29}, bshape[2] = {4, 29}, col[3] = {6, 1, 29};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
        args a = {.b = ops[k].f};
        for (int d = 0; d < 6; d++) {
            cn_dtype dt = d < N_FLOAT ? float_dtypes[d] : (d == 4 ? CN_I32 : CN_I64);
            int is_int = d >= N_FLOAT;
            if (is_int && !ops[k].ints) continue;
            double s = is_int ? 30 : 1; /* ints: a wider range, divisors >= 15 */
            const char *on = cn_op_name(ops[k].op), *dn = cn_dtype_name(dt);
            for (int l = 0; l < N_LAYOUTS; l++) {
                pair in[2] = {input(shape, 3, dt, ops[k].alo * s, ops[k].ahi * s, l),
                              input(shape, 3, dt, ops[k].blo * s, ops[k].bhi * s, (l + 1) % 3)};
                check_op(label("%s %s %s", on, dn, layout_names[l]), ops[k].op, f_binary, &a, in,
                         2, 2);
                pair_free(in[0]);
                pair_free(in[1]);
            }
            /* broadcasting: [6, 4, 29] op [4, 29], and [6, 1, 29] op [4, 29] */
            pair in[2] = {input(shape, 3, dt, ops[k].alo * s, ops[k].ahi * s, CONTIG),
                          input(bshape, 2, dt, ops[k].blo * s, ops[k].bhi * s, TRANSPOSED)};
            check_op(label("%s %s broadcast", on, dn), ops[k].op, f_binary, &a, in, 2, 2);
            pair_free(in[0]);
            in[0] = input(col, 3, dt, ops[k].alo * s, ops[k].ahi * s, STRIDED);
            check_op(label("%s %s broadcast both", on, dn), ops[k].op, f_binary, &a, in, 2, 2);
            pair_free(in[0]);
            pair_free(in[1]);
        }
    }
    /* dense f32 (the float4 path): 1031 elements (a tail of 3), then views one element in (dense
     * but not 16-byte aligned: the general kernel) */
    const int64_t len = 1031, one_in = 1030;
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
        args a = {.b = ops[k].f};
        const char *on = cn_op_name(ops[k].op);
        pair in[2] = {input(&len, 1, CN_F32, ops[k].alo, ops[k].ahi, CONTIG),
                      input(&len, 1, CN_F32, ops[k].blo, ops[k].bhi, CONTIG)};
        check_op(label("%s f32 dense 1031", on), ops[k].op, f_binary, &a, in, 2, 2);
        pair sl[2];
        for (int i = 0; i < 2; i++)
            sl[i] = (pair){cn_slice(in[i].c, 0, 1, len, 1), cn_slice(in[i].g, 0, 1, len, 1)};
        CHECK(sl[0].g && cn_numel(sl[0].g) == one_in);
        check_op(label("%s f32 dense unaligned", on), ops[k].op, f_binary, &a, sl, 2, 2);
        for (int i = 0; i < 2; i++) {
            pair_free(sl[i]);
            pair_free(in[i]);
        }
    }

    /* integer division: truncation, x / -1 at the minimum, and signs */
    const double x[8] = {7, -7, 7, -7, -2147483648.0, 0, 100, -3};
    const double y[8] = {2, 2, -2, -2, -1, 5, -7, 1};
    int64_t n = 8;
    for (int d = 0; d < 2; d++) {
        pair in[2] = {pair_from(x, &n, 1, d ? CN_I64 : CN_I32),
                      pair_from(y, &n, 1, d ? CN_I64 : CN_I32)};
        args a = {.b = cn_div};
        check_op("div ints truncate", CN_OP_DIV, f_binary, &a, in, 2, 1);
        pair_free(in[1]);
        const double z[8] = {1, 2, 3, 0, 5, 6, 7, 8};
        in[1] = pair_from(z, &n, 1, d ? CN_I64 : CN_I32);
        check_same_error("div by an integer zero", f_binary, &a, in, 2);
        pair_free(in[0]);
        pair_free(in[1]);
    }
    /* NaN propagates through maximum and minimum */
    const double p[4] = {NAN, 1, NAN, -2}, q[4] = {0, NAN, NAN, 3};
    n = 4;
    pair in[2] = {pair_from(p, &n, 1, CN_F32), pair_from(q, &n, 1, CN_F32)};
    args mx = {.b = cn_maximum}, mn = {.b = cn_minimum};
    check_op("maximum NaN", CN_OP_MAXIMUM, f_binary, &mx, in, 2, 1);
    check_op("minimum NaN", CN_OP_MINIMUM, f_binary, &mn, in, 2, 1);
    pair_free(in[0]);
    pair_free(in[1]);
    /* atan2 at its special points: signed zeros pick the quadrant, infinities, NaN */
    const double ay[12] = {0, -0.0, 0, -0.0, 1, -1, INFINITY, -INFINITY, INFINITY, NAN, 1,
                           -INFINITY};
    const double ax[12] = {0, 0, -0.0, -0.0, INFINITY, -INFINITY, INFINITY, INFINITY, -INFINITY,
                           1, NAN, -2};
    n = 12;
    for (int d = 0; d < 2; d++) {
        pair at[2] = {pair_from(ay, &n, 1, float_dtypes[d]), pair_from(ax, &n, 1, float_dtypes[d])};
        args a2 = {.b = cn_atan2};
        check_op(label("atan2 specials %s", cn_dtype_name(float_dtypes[d])), CN_OP_ATAN2,
                 f_binary, &a2, at, 2, 1);
        pair_free(at[0]);
        pair_free(at[1]);
    }
    /* a launch larger than one grid (the kernels stride over the rest) */
    const int64_t huge[2] = {5000, 4001};
    pair h[2] = {input(huge, 2, CN_F32, -1, 1, CONTIG), input(huge, 2, CN_F32, -1, 1, TRANSPOSED)};
    args add = {.b = cn_add};
    check_op("add 20M elements", CN_OP_ADD, f_binary, &add, h, 2, 1);
    pair_free(h[0]);
    pair_free(h[1]);
}

static void test_compare_logic_where(void) {
    static const struct {
        cn_op op;
        cn_tensor *(*f)(cn_tensor *, cn_tensor *);
    } cmp[] = {{CN_OP_EQ, cn_eq}, {CN_OP_NE, cn_ne}, {CN_OP_LT, cn_lt},
               {CN_OP_LE, cn_le}, {CN_OP_GT, cn_gt}, {CN_OP_GE, cn_ge}};
    const cn_dtype all[8] = {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I32, CN_I64, CN_U8, CN_BOOL};
    const int64_t shape[2] = {17, 23}, row[1] = {23};
    for (int d = 0; d < 8; d++) {
        /* small integer values, so that many pairs are equal */
        pair a = input(shape, 2, all[d], 0, 4, TRANSPOSED), b = input(row, 1, all[d], 0, 4, CONTIG);
        pair in[2] = {a, b};
        for (size_t k = 0; k < sizeof cmp / sizeof *cmp; k++) {
            args ar = {.b = cmp[k].f};
            check_op(label("%s %s", cn_op_name(cmp[k].op), cn_dtype_name(all[d])), cmp[k].op,
                     f_binary, &ar, in, 2, 1);
        }
        pair_free(a);
        pair_free(b);
    }
    const double p[5] = {NAN, 1, NAN, -2, INFINITY}, q[5] = {0, NAN, NAN, -2, INFINITY};
    int64_t n = 5;
    pair nan_in[2] = {pair_from(p, &n, 1, CN_F64), pair_from(q, &n, 1, CN_F64)};
    for (size_t k = 0; k < sizeof cmp / sizeof *cmp; k++) {
        args ar = {.b = cmp[k].f};
        check_op(label("%s NaN", cn_op_name(cmp[k].op)), cmp[k].op, f_binary, &ar, nan_in, 2, 1);
    }
    pair_free(nan_in[0]);
    pair_free(nan_in[1]);

    pair l[2] = {input(shape, 2, CN_BOOL, 0, 0, STRIDED), input(row, 1, CN_BOOL, 0, 0, CONTIG)};
    args and_ = {.b = cn_logical_and}, or_ = {.b = cn_logical_or}, not_ = {.u = cn_logical_not};
    check_op("logical_and", CN_OP_LOGICAL_AND, f_binary, &and_, l, 2, 1);
    check_op("logical_or", CN_OP_LOGICAL_OR, f_binary, &or_, l, 2, 1);
    check_op("logical_not", CN_OP_LOGICAL_NOT, f_unary, &not_, l, 1, 1);
    pair_free(l[0]);
    pair_free(l[1]);

    const int64_t cs[3] = {4, 1, 6}, as[2] = {5, 6}, bs[3] = {4, 5, 6};
    for (int d = 0; d < 8; d++) {
        pair in[3] = {input(cs, 3, CN_BOOL, 0, 0, CONTIG), input(as, 2, all[d], -50, 50, TRANSPOSED),
                      input(bs, 3, all[d], -50, 50, STRIDED)};
        check_op(label("where %s", cn_dtype_name(all[d])), CN_OP_WHERE, f_where, NULL, in, 3, 1);
        for (int i = 0; i < 3; i++) pair_free(in[i]);
    }
}

/* ---- data movement and creation -------------------------------------------------------------- */

/* issue 16's remaining elementwise ops: remainder and fmod (divisors of both signs), hypot, the
 * NaN/inf tests on specials and ints, the bitwise ops with shift counts past both ends, bool xor;
 * the scalar forms through the scalar kernel. */
static cn_tensor *f_scalar_op(cn_tensor *const *x, const void *a) {
    return A(a)->sc(x[0], A(a)->s0);
}

static cn_tensor *f_softplus(cn_tensor *const *x, const void *a) {
    return cn_softplus(x[0], A(a)->s0, A(a)->s1);
}

static void test_more_elementwise(void) {
    static const struct {
        cn_op op;
        cn_tensor *(*f)(cn_tensor *, cn_tensor *);
        double alo, ahi, blo, bhi; /* floats; ints: times 30 */
        int floats, ints;
    } ops[] = {
        {CN_OP_REMAINDER, cn_remainder, -3, 3, 0.5, 3, 1, 1},
        {CN_OP_REMAINDER, cn_remainder, -3, 3, -3, -0.5, 1, 1},
        {CN_OP_FMOD, cn_fmod, -3, 3, 0.5, 3, 1, 1},
        {CN_OP_FMOD, cn_fmod, -3, 3, -3, -0.5, 1, 1},
        {CN_OP_HYPOT, cn_hypot, -3, 3, -3, 3, 1, 0},
        {CN_OP_BITWISE_AND, cn_bitwise_and, -30, 30, -30, 30, 0, 1},
        {CN_OP_BITWISE_OR, cn_bitwise_or, -30, 30, -30, 30, 0, 1},
        {CN_OP_BITWISE_XOR, cn_bitwise_xor, -30, 30, -30, 30, 0, 1},
        /* counts from -3 to 70: negative, within, and past both widths */
        {CN_OP_BITWISE_LEFT_SHIFT, cn_bitwise_left_shift, -30, 30, -0.1, 2.34, 0, 1},
        {CN_OP_BITWISE_RIGHT_SHIFT, cn_bitwise_right_shift, -30, 30, -0.1, 2.34, 0, 1},
    };
    const int64_t shape[3] = {6, 4, 29}, bshape[2] = {4, 29};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
        args a = {.b = ops[k].f};
        for (int d = 0; d < 6; d++) {
            cn_dtype dt = d < N_FLOAT ? float_dtypes[d] : (d == 4 ? CN_I32 : CN_I64);
            int is_int = d >= N_FLOAT;
            if (is_int ? !ops[k].ints : !ops[k].floats) continue;
            double s = is_int ? 30 : 1;
            const char *on = cn_op_name(ops[k].op), *dn = cn_dtype_name(dt);
            for (int l = 0; l < N_LAYOUTS; l++) {
                pair in[2] = {input(shape, 3, dt, ops[k].alo * s, ops[k].ahi * s, l),
                              input(shape, 3, dt, ops[k].blo * s, ops[k].bhi * s, (l + 1) % 3)};
                check_op(label("%s %s %s", on, dn, layout_names[l]), ops[k].op, f_binary, &a, in,
                         2, 2);
                pair_free(in[0]);
                pair_free(in[1]);
            }
            pair in[2] = {input(shape, 3, dt, ops[k].alo * s, ops[k].ahi * s, CONTIG),
                          input(bshape, 2, dt, ops[k].blo * s, ops[k].bhi * s, TRANSPOSED)};
            check_op(label("%s %s broadcast", on, dn), ops[k].op, f_binary, &a, in, 2, 2);
            pair_free(in[0]);
            pair_free(in[1]);
        }
    }
    /* the integer edges: x % -1 at the minimum, a zero divisor refused alike, shift counts */
    const double x[8] = {-2147483648.0, 7, -7, 2147483647.0, -1, 1, -5, 5};
    const double y[8] = {-1, -3, 3, 31, 32, 63, 64, -1};
    int64_t n = 8;
    for (int d = 0; d < 2; d++) {
        cn_dtype dt = d ? CN_I64 : CN_I32;
        pair in[2] = {pair_from(x, &n, 1, dt), pair_from(y, &n, 1, dt)};
        args rem = {.b = cn_remainder}, fm = {.b = cn_fmod};
        args shl = {.b = cn_bitwise_left_shift}, shr = {.b = cn_bitwise_right_shift};
        check_op("remainder int edges", CN_OP_REMAINDER, f_binary, &rem, in, 2, 1);
        check_op("fmod int edges", CN_OP_FMOD, f_binary, &fm, in, 2, 1);
        check_op("left shift counts", CN_OP_BITWISE_LEFT_SHIFT, f_binary, &shl, in, 2, 1);
        check_op("right shift counts", CN_OP_BITWISE_RIGHT_SHIFT, f_binary, &shr, in, 2, 1);
        pair_free(in[1]);
        const double z[8] = {1, 2, 3, 0, 5, 6, 7, 8};
        in[1] = pair_from(z, &n, 1, dt);
        check_same_error("remainder by an integer zero", f_binary, &rem, in, 2);
        check_same_error("fmod by an integer zero", f_binary, &fm, in, 2);
        pair_free(in[0]);
        pair_free(in[1]);
    }
    /* is_nan, is_inf on specials (floats) and on ints; bitwise_not on ints */
    const double sv[8] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e-30, -1e30, 88.0};
    n = 8;
    args isnan_ = {.u = cn_is_nan}, isinf_ = {.u = cn_is_inf}, not_ = {.u = cn_bitwise_not};
    for (int d = 0; d < N_FLOAT; d++) {
        pair v = pair_from(sv, &n, 1, float_dtypes[d]);
        check_op(label("is_nan %s", cn_dtype_name(float_dtypes[d])), CN_OP_IS_NAN, f_unary,
                 &isnan_, &v, 1, 1);
        check_op(label("is_inf %s", cn_dtype_name(float_dtypes[d])), CN_OP_IS_INF, f_unary,
                 &isinf_, &v, 1, 1);
        pair_free(v);
    }
    for (int d = 0; d < 2; d++) {
        cn_dtype dt = d ? CN_I64 : CN_I32;
        pair v = input(shape, 3, dt, -1000, 1000, TRANSPOSED);
        check_op(label("is_nan %s", cn_dtype_name(dt)), CN_OP_IS_NAN, f_unary, &isnan_, &v, 1, 1);
        check_op(label("is_inf %s", cn_dtype_name(dt)), CN_OP_IS_INF, f_unary, &isinf_, &v, 1, 1);
        check_op(label("bitwise_not %s", cn_dtype_name(dt)), CN_OP_BITWISE_NOT, f_unary, &not_,
                 &v, 1, 1);
        pair_free(v);
    }
    /* the scalar forms */
    static const struct {
        cn_op op;
        cn_tensor *(*f)(cn_tensor *, double);
        double s;
        int floats;
    } sc[] = {
        {CN_OP_REMAINDER_SCALAR, cn_remainder_scalar, -7, 1},
        {CN_OP_REMAINDER_SCALAR, cn_remainder_scalar, 3, 1},
        {CN_OP_BITWISE_AND_SCALAR, cn_bitwise_and_scalar, 0x5a, 0},
        {CN_OP_BITWISE_OR_SCALAR, cn_bitwise_or_scalar, -6, 0},
        {CN_OP_BITWISE_XOR_SCALAR, cn_bitwise_xor_scalar, 1234, 0},
        {CN_OP_BITWISE_LEFT_SHIFT_SCALAR, cn_bitwise_left_shift_scalar, 5, 0},
        {CN_OP_BITWISE_LEFT_SHIFT_SCALAR, cn_bitwise_left_shift_scalar, 40, 0},
        {CN_OP_BITWISE_RIGHT_SHIFT_SCALAR, cn_bitwise_right_shift_scalar, 3, 0},
        {CN_OP_BITWISE_RIGHT_SHIFT_SCALAR, cn_bitwise_right_shift_scalar, -1, 0},
    };
    for (size_t k = 0; k < sizeof sc / sizeof *sc; k++) {
        args a = {.sc = sc[k].f, .s0 = sc[k].s};
        for (int d = 0; d < 6; d++) {
            cn_dtype dt = d < N_FLOAT ? float_dtypes[d] : (d == 4 ? CN_I32 : CN_I64);
            if (d < N_FLOAT && !sc[k].floats) continue;
            pair v = input(shape, 3, dt, -1000, 1000, STRIDED);
            check_op(label("%s(%g) %s", cn_op_name(sc[k].op), sc[k].s, cn_dtype_name(dt)),
                     sc[k].op, f_scalar_op, &a, &v, 1, 2);
            pair_free(v);
        }
    }
    /* the activations: unary ones on ranges past their kinks, those with attributes through the
     * scalar kernel, prelu with a weight per channel */
    static const struct {
        cn_op op;
        cn_tensor *(*f)(cn_tensor *);
        double lo, hi;
    } act[] = {
        {CN_OP_HARD_SIGMOID, cn_hard_sigmoid, -5, 5},
        {CN_OP_HARD_SWISH, cn_hard_swish, -5, 5},
        {CN_OP_LOG_SIGMOID, cn_log_sigmoid, -100, 100},
    };
    for (size_t k = 0; k < sizeof act / sizeof *act; k++) {
        args a = {.u = act[k].f};
        for (int d = 0; d < N_FLOAT; d++) {
            pair v = input(shape, 3, float_dtypes[d], act[k].lo, act[k].hi, TRANSPOSED);
            check_op(label("%s %s", cn_op_name(act[k].op), cn_dtype_name(float_dtypes[d])),
                     act[k].op, f_unary, &a, &v, 1, 1);
            pair_free(v);
        }
    }
    args leaky = {.sc = cn_leaky_relu, .s0 = 0.2}, elu = {.sc = cn_elu, .s0 = 1.5};
    args sp = {.s0 = 2, .s1 = 3};
    for (int d = 0; d < N_FLOAT; d++) {
        const char *dn = cn_dtype_name(float_dtypes[d]);
        pair v = input(shape, 3, float_dtypes[d], -4, 4, STRIDED);
        check_op(label("leaky_relu %s", dn), CN_OP_LEAKY_RELU, f_scalar_op, &leaky, &v, 1, 1);
        check_op(label("elu %s", dn), CN_OP_ELU, f_scalar_op, &elu, &v, 1, 2);
        check_op(label("softplus %s", dn), CN_OP_SOFTPLUS, f_softplus, &sp, &v, 1, 2);
        const int64_t wshape[1] = {4};
        pair w = input(wshape, 1, float_dtypes[d], 0.05, 0.5, CONTIG);
        pair in[2] = {v, w};
        args pr = {.b = cn_prelu};
        check_op(label("prelu %s", dn), CN_OP_PRELU, f_binary, &pr, in, 2, 1);
        pair_free(w);
        pair_free(v);
    }
    /* comparisons with a scalar: floats on eighths with ties (s exact in every float dtype),
     * ints against whole, fractional and out-of-range scalars */
    static const struct {
        cn_op op;
        cn_tensor *(*f)(cn_tensor *, double);
    } cmp[] = {{CN_OP_EQ_SCALAR, cn_eq_scalar}, {CN_OP_NE_SCALAR, cn_ne_scalar},
               {CN_OP_LT_SCALAR, cn_lt_scalar}, {CN_OP_LE_SCALAR, cn_le_scalar},
               {CN_OP_GT_SCALAR, cn_gt_scalar}, {CN_OP_GE_SCALAR, cn_ge_scalar}};
    const double eighths[8] = {-1, -0.25, 0.25, 0.25, 0.5, 0.875, NAN, 0.25};
    const double ints_s[4] = {3, 2.5, -1e30, NAN};
    for (size_t k = 0; k < sizeof cmp / sizeof *cmp; k++) {
        for (int d = 0; d < N_FLOAT; d++) {
            n = 8;
            pair v = pair_from(eighths, &n, 1, float_dtypes[d]);
            args a = {.sc = cmp[k].f, .s0 = 0.25};
            check_op(label("%s %s", cn_op_name(cmp[k].op), cn_dtype_name(float_dtypes[d])),
                     cmp[k].op, f_scalar_op, &a, &v, 1, 1);
            pair_free(v);
        }
        for (int d = 0; d < 2; d++) {
            cn_dtype dt = d ? CN_I64 : CN_I32;
            pair v = input(shape, 3, dt, -5, 5, TRANSPOSED);
            for (int j = 0; j < 4; j++) {
                args a = {.sc = cmp[k].f, .s0 = ints_s[j]};
                check_op(label("%s(%g) %s", cn_op_name(cmp[k].op), ints_s[j], cn_dtype_name(dt)),
                         cmp[k].op, f_scalar_op, &a, &v, 1, 1);
            }
            pair_free(v);
        }
    }
    /* integer powers: negative bases and exponents, wrapping */
    for (int d = 0; d < 2; d++) {
        cn_dtype dt = d ? CN_I64 : CN_I32;
        pair in[2] = {input(shape, 3, dt, -9, 9, TRANSPOSED), input(bshape, 2, dt, -3, 25, CONTIG)};
        args pw = {.b = cn_pow};
        check_op(label("pow %s", cn_dtype_name(dt)), CN_OP_POW, f_binary, &pw, in, 2, 1);
        args ps = {.sc = cn_pow_scalar, .s0 = 13};
        check_op(label("pow_scalar %s", cn_dtype_name(dt)), CN_OP_POW_SCALAR, f_scalar_op, &ps,
                 in, 1, 1);
        pair_free(in[0]);
        pair_free(in[1]);
    }
    /* bool xor, broadcast */
    const int64_t row[1] = {29}, bs[2] = {4, 29};
    pair l[2] = {input(bs, 2, CN_BOOL, 0, 0, STRIDED), input(row, 1, CN_BOOL, 0, 0, CONTIG)};
    args xor_ = {.b = cn_logical_xor};
    check_op("logical_xor", CN_OP_LOGICAL_XOR, f_binary, &xor_, l, 2, 1);
    pair_free(l[0]);
    pair_free(l[1]);
}

static void test_cast_copy(void) {
    const double v[] = {0.0,   -0.0,  1,     -1,           0.5,         1.5,          2.5,
                        -2.5,  3.7,   -3.7,  255,          256,         300,          -129,
                        65504, 65520, 1e10,  -1e10,        3e38,        1e-8,         6e-8,
                        1e-40, NAN,   -NAN,  INFINITY,     -INFINITY,   2147483647.0, 2147483648.0,
                        -2147483649.0, 9.3e18, -9.3e18, 123456789.0, 0.1, 1.0000001, 7e-46};
    int64_t n = sizeof v / sizeof *v;
    const cn_dtype all[8] = {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I32, CN_I64, CN_U8, CN_BOOL};
    for (int s = 0; s < 8; s++) {
        pair src = pair_from(v, &n, 1, all[s]);
        for (int t = 0; t < 8; t++) {
            args a = {.i0 = all[t]};
            check_op(label("cast %s -> %s", cn_dtype_name(all[s]), cn_dtype_name(all[t])),
                     CN_OP_CAST, f_cast, &a, &src, 1, 0);
        }
        pair_free(src);
    }
    /* strided sources and destinations: contiguous copies, concatenation into slices */
    const int64_t shape[3] = {5, 7, 9};
    for (int d = 0; d < 8; d++) {
        for (int l = 1; l < N_LAYOUTS; l++) {
            pair x = input(shape, 3, all[d], -100, 100, l);
            check_op(label("copy %s %s", cn_dtype_name(all[d]), layout_names[l]), CN_OP_COPY,
                     f_contiguous, NULL, &x, 1, 0);
            args a = {.i0 = all[(d + 3) % 8]};
            check_op(label("cast strided %s", cn_dtype_name(all[d])), CN_OP_CAST, f_cast, &a, &x,
                     1, 1);
            pair_free(x);
        }
        pair in[2] = {input(shape, 3, all[d], -9, 9, TRANSPOSED), input(shape, 3, all[d], -9, 9,
                                                                        STRIDED)};
        args a = {.i0 = 1};
        check_op(label("cat %s", cn_dtype_name(all[d])), CN_OP_COPY, f_cat, &a, in, 2, 0);
        pair_free(in[0]);
        pair_free(in[1]);
    }
    /* a copy between overlapping dense views of one tensor reads the values from before the
     * copy (memmove), whichever way it shifts */
    int64_t n40 = 40;
    for (int forward = 0; forward < 2; forward++) {
        pair x = input(&n40, 1, CN_F32, -5, 5, CONTIG);
        cn_tensor *c = x.c, *g = x.g;
        int64_t from = forward ? 0 : 10, to = forward ? 10 : 0;
        cn_tensor *cs = cn_slice(c, 0, from, from + 30, 1), *cd = cn_slice(c, 0, to, to + 30, 1);
        cn_tensor *gs = cn_slice(g, 0, from, from + 30, 1), *gd = cn_slice(g, 0, to, to + 30, 1);
        CHECK(cn_copy_(cd, cs) == CN_OK && cn_copy_(gd, gs) == CN_OK);
        expect_close(label("overlapping copy %s", forward ? "forward" : "backward"), g, c, 0);
        cn_release(cs);
        cn_release(cd);
        cn_release(gs);
        cn_release(gd);
        pair_free(x);
    }
}

/* Whether the fill value v converts to dt (cn_full's rule): an integer dtype holds v after
 * truncation toward zero, and no NaN; float and bool dtypes take any value. */
static int fits_dtype(double v, cn_dtype dt) {
    switch (dt) {
    case CN_I32: return v > -2147483649.0 && v < 2147483648.0;
    case CN_I64: return v >= -0x1p63 && v < 0x1p63;
    case CN_U8: return v > -1.0 && v < 256.0;
    default: return 1;
    }
}

static void test_fill(void) {
    const cn_dtype all[8] = {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I32, CN_I64, CN_U8, CN_BOOL};
    /* each dtype fills with the values it holds (the integers' extremes included); the others
     * must be refused alike on both devices */
    const double values[] = {0.0,  -0.0, 1.5,   -2.75, 1e6, 300, NAN, -INFINITY, 70000,
                             255.9, -0.5, 2147483647.0, -2147483648.0, 1e19};
    const int64_t shape[2] = {33, 65};
    for (int d = 0; d < 8; d++) {
        for (size_t k = 0; k < sizeof values / sizeof *values; k++) {
            covered[CN_OP_FILL] = 1;
            const char *what = label("full(%g) %s", values[k], cn_dtype_name(all[d]));
            cn_clear_error();
            cn_tensor *g = cn_full(shape, 2, values[k], all[d], gpu);
            cn_status gs = cn_last_status();
            char gerr[512];
            snprintf(gerr, sizeof gerr, "%s", cn_last_error());
            cn_clear_error();
            cn_tensor *c = cn_full(shape, 2, values[k], all[d], cpu);
            if (fits_dtype(values[k], all[d])) {
                expect_close(what, g, c, 0);
            } else if (g || c || gs != CN_ERR_INVALID_ARG ||
                       cn_last_status() != CN_ERR_INVALID_ARG ||
                       strcmp(gerr, cn_last_error()) != 0) {
                FAIL("%s: expected both devices to refuse the value alike; got \"%s\" and "
                     "\"%s\"", what, gerr, cn_last_error());
            }
            cn_release(g);
            cn_release(c);
            cn_clear_error();
        }
        /* a strided fill: the diagonal */
        cn_tensor *g = cn_eye(7, 11, all[d], gpu), *c = cn_eye(7, 11, all[d], cpu);
        expect_close(label("eye %s", cn_dtype_name(all[d])), g, c, 0);
        cn_release(g);
        cn_release(c);
    }
}

static int same_bytes(const char *what, cn_tensor *g, cn_tensor *c) {
    if (!g || !c) {
        FAIL("%s: NULL result (%s)", what, cn_last_error());
        return 0;
    }
    size_t nb = (size_t)cn_numel(c) * cn_dtype_size(cn_dtype_of(c));
    unsigned char *a = malloc(nb ? nb : 1), *b = malloc(nb ? nb : 1);
    int ok = cn_read(g, a, nb) == CN_OK && cn_read(c, b, nb) == CN_OK && memcmp(a, b, nb) == 0;
    if (!ok) FAIL("%s: the GPU's bytes differ from the CPU's (%s)", what, cn_last_error());
    free(a);
    free(b);
    return ok;
}

static void test_random_bit_identical(void) {
    const int64_t sizes[] = {1, 999, (1 << 20) + 3};
    const uint64_t seeds[] = {0, 42, 0xDEADBEEFCAFEBABEull};
    const double ranges[][2] = {{0, 1}, {-3, 5}, {2, 2.0000001}};
    const double normals[][2] = {{0, 1}, {5, 0.1}};
    for (int d = 0; d < N_FLOAT; d++) {
        cn_dtype dt = float_dtypes[d];
        for (size_t si = 0; si < 3; si++) {
            for (size_t k = 0; k < 3; k++) {
                cn_generator a = cn_generator_new(seeds[k]), b = a;
                if (k == 2) a.offset = b.offset = UINT64_MAX - 100; /* the counter wraps */
                int64_t n = sizes[si];
                for (int r = 0; r < 3; r++) {
                    covered[CN_OP_RAND_UNIFORM] = 1;
                    cn_tensor *g = cn_rand_uniform(&a, &n, 1, ranges[r][0], ranges[r][1], dt, gpu);
                    cn_tensor *c = cn_rand_uniform(&b, &n, 1, ranges[r][0], ranges[r][1], dt, cpu);
                    same_bytes(label("rand_uniform %s n=%lld seed %zu range %d", cn_dtype_name(dt),
                                     (long long)n, k, r),
                               g, c);
                    cn_release(g);
                    cn_release(c);
                }
                for (int r = 0; r < 2; r++) {
                    covered[CN_OP_RAND_NORMAL] = 1;
                    cn_tensor *g = cn_rand_normal(&a, &n, 1, normals[r][0], normals[r][1], dt, gpu);
                    cn_tensor *c = cn_rand_normal(&b, &n, 1, normals[r][0], normals[r][1], dt, cpu);
                    same_bytes(label("rand_normal %s n=%lld seed %zu", cn_dtype_name(dt),
                                     (long long)n, k),
                               g, c);
                    cn_release(g);
                    cn_release(c);
                }
                CHECK(a.seed == b.seed && a.offset == b.offset);
            }
        }
    }
}

/* ---- reductions -------------------------------------------------------------------------------- */

static void test_reductions(void) {
    static const struct {
        cn_op op;
        cn_tensor *(*f)(cn_tensor *, int, int);
        int ints; /* integer dtypes too (the router keeps bool away from reductions) */
    } ops[] = {
        {CN_OP_SUM, cn_sum_dim, 1},       {CN_OP_MEAN, cn_mean_dim, 0},
        {CN_OP_MAX, cn_max_dim, 1},       {CN_OP_MIN, cn_min_dim, 1},
        {CN_OP_PROD, cn_prod_dim, 1},     {CN_OP_ARGMAX, cn_argmax_dim, 1},
        {CN_OP_ARGMIN, cn_argmin_dim, 1}, {CN_OP_LOGSUMEXP, cn_logsumexp_dim, 0},
    };
    /* the shapes pick both kernels: one thread per output (short or column reductions) and one
     * block per output (long rows; few long columns) */
    static const struct {
        int nd;
        int64_t shape[3];
    } shapes[] = {{3, {7, 30, 5}}, {2, {3, 1000}}, {2, {2000, 3}}, {1, {150001}}};
    const cn_dtype dts[] = {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I32, CN_I64, CN_U8};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
        for (size_t di = 0; di < sizeof dts / sizeof *dts; di++) {
            cn_dtype dt = dts[di];
            if (di >= 4 && !ops[k].ints) continue;
            for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
                int nd = shapes[si].nd;
                const int64_t *shape = shapes[si].shape;
                /* products stay short, so that f32's rounding does not grow with n */
                if (ops[k].op == CN_OP_PROD && si > 0 && di < 4) continue;
                double lo = di >= 4 ? -5 : (ops[k].op == CN_OP_PROD ? 0.8 : -2);
                double hi = di >= 4 ? 5 : (ops[k].op == CN_OP_PROD ? 1.25 : 2);
                if (dt == CN_U8) lo = 0, hi = 7;
                for (int l = 0; l < 3; l++) {
                    if (l > 0 && nd < 2) continue;
                    pair x = input(shape, nd, dt, lo, hi, l);
                    for (int dim = 0; dim < nd; dim++) {
                        args a = {.r = ops[k].f, .i0 = dim, .i1 = dim & 1};
                        check_op(label("%s %s [%lld..] dim %d %s", cn_op_name(ops[k].op),
                                       cn_dtype_name(dt), (long long)shape[0], dim,
                                       layout_names[l]),
                                 ops[k].op, f_reduce_dim, &a, &x, 1, 5);
                    }
                    pair_free(x);
                }
            }
        }
    }
    for (int d = 0; d < N_FLOAT; d++)
        for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
            pair x = input(shapes[si].shape, shapes[si].nd, float_dtypes[d], -3, 3, CONTIG);
            for (int dim = 0; dim < shapes[si].nd; dim++)
                for (int corr = 0; corr < 2; corr++) {
                    args a = {.i0 = dim, .i1 = corr};
                    check_op(label("var %s dim %d correction %d", cn_dtype_name(float_dtypes[d]),
                                   dim, corr),
                             CN_OP_VAR, f_var_dim, &a, &x, 1, 5);
                }
            pair_free(x);
        }
    /* NaN, infinities, ties */
    const double v[12] = {1, NAN, 3, 3, -INFINITY, 2, 5, 5, NAN, 0, INFINITY, INFINITY};
    const int64_t s34[2] = {3, 4};
    pair x = pair_from(v, s34, 2, CN_F32);
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        for (int dim = 0; dim < 2; dim++) {
            args a = {.r = ops[k].f, .i0 = dim};
            check_op(label("%s specials dim %d", cn_op_name(ops[k].op), dim), ops[k].op,
                     f_reduce_dim, &a, &x, 1, 1);
        }
    pair_free(x);
    /* an empty reduced dim: sums are 0, and max has no value on either device */
    const int64_t e[2] = {4, 0};
    x = input(e, 2, CN_F32, 0, 1, CONTIG);
    args sum1 = {.r = cn_sum_dim, .i0 = 1}, max1 = {.r = cn_max_dim, .i0 = 1};
    check_op("sum of nothing", CN_OP_SUM, f_reduce_dim, &sum1, &x, 1, 1);
    check_same_error("max of nothing", f_reduce_dim, &max1, &x, 1);
    pair_free(x);
}

static cn_tensor *f_softmax_bw(cn_tensor *const *x, const void *a) {
    return cn__softmax_backward(x[0], x[1], (int)A(a)->i0, (int)A(a)->i1);
}
static cn_tensor *f_act_bw(cn_tensor *const *x, const void *a) {
    return cn__activation_backward(x[0], x[1], (cn_op)A(a)->i0, (int)A(a)->i1);
}

/* The fused backward kernels: softmax's and log_softmax's along each dim (g and y random: the
 * kernel's arithmetic does not need y to be a softmax), and every activation's. */
static void test_fused_backward(void) {
    const int64_t s3[3] = {4, 9, 6};
    for (int d = 0; d < N_FLOAT; d++) {
        cn_dtype dt = float_dtypes[d];
        pair in[2] = {input(s3, 3, dt, -2, 2, STRIDED), input(s3, 3, dt, -2, 2, TRANSPOSED)};
        for (int dim = 0; dim < 3; dim++)
            for (int log = 0; log < 2; log++) {
                args a = {.i0 = dim, .i1 = log};
                check_op(label("%s_backward %s dim %d", log ? "log_softmax" : "softmax",
                               cn_dtype_name(dt), dim),
                         CN_OP_SOFTMAX_BACKWARD, f_softmax_bw, &a, in, 2, 4);
            }
        const cn_op acts[5] = {CN_OP_RELU, CN_OP_TANH, CN_OP_SIGMOID, CN_OP_SILU, CN_OP_GELU};
        for (int k = 0; k < 5; k++)
            for (int approx = 0; approx < (acts[k] == CN_OP_GELU ? 2 : 1); approx++) {
                args a = {.i0 = acts[k], .i1 = approx};
                check_op(label("activation_backward %s %s", cn_op_name(acts[k]),
                               cn_dtype_name(dt)),
                         CN_OP_ACTIVATION_BACKWARD, f_act_bw, &a, in, 2, 4);
            }
        pair_free(in[0]);
        pair_free(in[1]);
    }
}

static void test_softmax(void) {
    static const struct {
        int nd;
        int64_t shape[3];
    } shapes[] = {{3, {4, 9, 6}}, {2, {3, 1000}}, {2, {700, 2}}};
    for (int d = 0; d < N_FLOAT; d++)
        for (size_t si = 0; si < 3; si++)
            for (int l = 0; l < 3; l++) {
                pair x = input(shapes[si].shape, shapes[si].nd, float_dtypes[d], -6, 6, l);
                for (int dim = 0; dim < shapes[si].nd; dim++) {
                    args a = {.i0 = dim};
                    const char *w = label("softmax %s dim %d %s", cn_dtype_name(float_dtypes[d]),
                                          dim, layout_names[l]);
                    check_op(w, CN_OP_SOFTMAX, f_softmax, &a, &x, 1, 2);
                    check_op(w, CN_OP_LOG_SOFTMAX, f_log_softmax, &a, &x, 1, 2);
                }
                pair_free(x);
            }
    const double v[12] = {1, NAN, 3, 3, -INFINITY, -INFINITY, 5, 5, 1000, 0, INFINITY, -1000};
    const int64_t s34[2] = {3, 4};
    pair x = pair_from(v, s34, 2, CN_F64);
    for (int dim = 0; dim < 2; dim++) {
        args a = {.i0 = dim};
        check_op("softmax specials", CN_OP_SOFTMAX, f_softmax, &a, &x, 1, 1);
        check_op("log_softmax specials", CN_OP_LOG_SOFTMAX, f_log_softmax, &a, &x, 1, 1);
    }
    pair_free(x);
    /* the same specials in long f32 rows (the one-read kernel of contiguous f32 rows): a plain
     * row, one with a NaN, one with a +inf, one of -inf only; and rows of 8192 and 8193 (its
     * limit, and the general kernel past it) */
    const int64_t s4k[2] = {4, 1000};
    double *w = malloc(sizeof(double) * 4000);
    uint64_t st = 77;
    th_fill_eighths(&st, w, 4000);
    w[1000 + 17] = NAN;
    w[2000 + 500] = INFINITY;
    for (int k = 0; k < 1000; k++) w[3000 + k] = -INFINITY;
    x = pair_from(w, s4k, 2, CN_F32);
    args last = {.i0 = 1};
    check_op("softmax f32 rows specials", CN_OP_SOFTMAX, f_softmax, &last, &x, 1, 1);
    check_op("log_softmax f32 rows specials", CN_OP_LOG_SOFTMAX, f_log_softmax, &last, &x, 1, 1);
    pair_free(x);
    free(w);
    for (int64_t n = 8192; n <= 8193; n++) {
        const int64_t sh[2] = {3, n};
        x = input(sh, 2, CN_F32, -6, 6, CONTIG);
        check_op(label("softmax f32 rows of %lld", (long long)n), CN_OP_SOFTMAX, f_softmax, &last,
                 &x, 1, 2);
        check_op(label("log_softmax f32 rows of %lld", (long long)n), CN_OP_LOG_SOFTMAX,
                 f_log_softmax, &last, &x, 1, 2);
        pair_free(x);
    }
}

/* ---- scans and sorts, any / all ------------------------------------------------------------------ */

static cn_tensor *f_cumsum(cn_tensor *const *x, const void *a) {
    return A(a)->i1 ? cn__cumsum_reverse(x[0], (int)A(a)->i0) : cn_cumsum(x[0], (int)A(a)->i0);
}
static cn_tensor *f_cumprod(cn_tensor *const *x, const void *a) {
    return cn_cumprod(x[0], (int)A(a)->i0);
}
static cn_tensor *f_cumprod_bwd(cn_tensor *const *x, const void *a) {
    return cn__cumprod_backward(x[0], x[1], (int)A(a)->i0);
}
/* i1: 0 values, 1 indices; ints[0]: the op (cummax, cummin, sort), ints[1]: descending */
static cn_tensor *f_select(cn_tensor *const *x, const void *a) {
    cn_tensor *idx = NULL, *v;
    int dim = (int)A(a)->i0;
    switch (A(a)->ints[0]) {
    case CN_OP_CUMMAX: v = cn_cummax(x[0], dim, &idx); break;
    case CN_OP_CUMMIN: v = cn_cummin(x[0], dim, &idx); break;
    default: v = cn_sort(x[0], dim, (int)A(a)->ints[1], &idx); break;
    }
    cn_tensor *keep = A(a)->i1 ? idx : v;
    cn_release(A(a)->i1 ? v : idx);
    return keep;
}

static void test_scans(void) {
    static const struct {
        int nd;
        int64_t shape[3];
    } shapes[] = {{3, {4, 9, 6}}, {2, {3, 700}}, {2, {300, 2}}};
    const cn_dtype dts[] = {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I32, CN_I64, CN_U8};
    for (size_t di = 0; di < sizeof dts / sizeof *dts; di++) {
        cn_dtype dt = dts[di];
        int is_int = di >= 4;
        for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
            int nd = shapes[si].nd;
            const int64_t *shape = shapes[si].shape;
            for (int l = 0; l < 3; l++) {
                /* ints: few values, so ties (stable order, last index of cummax) are common */
                pair x = input(shape, nd, dt, is_int ? (dt == CN_U8 ? 0 : -4) : -2,
                               is_int ? 4 : 2, l);
                pair p = input(shape, nd, dt, is_int ? 1 : 0.9, is_int ? 2 : 1.1, l);
                for (int dim = 0; dim < nd; dim++) {
                    const char *w = label("%s [%lld..] dim %d %s", cn_dtype_name(dt),
                                          (long long)shape[0], dim, layout_names[l]);
                    for (int rev = 0; rev < 2; rev++) {
                        args a = {.i0 = dim, .i1 = rev};
                        check_op(label("cumsum%s %s", rev ? " reverse" : "", w), CN_OP_CUMSUM,
                                 f_cumsum, &a, &x, 1, 5);
                    }
                    args a = {.i0 = dim};
                    check_op(label("cumprod %s", w), CN_OP_CUMPROD, f_cumprod, &a, &p, 1, 5);
                    const int64_t sel[4][2] = {{CN_OP_CUMMAX, 0}, {CN_OP_CUMMIN, 0},
                                               {CN_OP_SORT, 0}, {CN_OP_SORT, 1}};
                    for (int k = 0; k < 4; k++)
                        for (int which = 0; which < 2; which++) {
                            args b = {.i0 = dim, .i1 = which, .ints = sel[k]};
                            check_op(label("%s%s %s %s", cn_op_name((cn_op)sel[k][0]),
                                           sel[k][1] ? " descending" : "",
                                           which ? "indices" : "values", w),
                                     (cn_op)sel[k][0], f_select, &b, &x, 1, 1);
                        }
                    args r = {.r = cn_any_dim, .i0 = dim, .i1 = dim & 1};
                    check_op(label("any %s", w), CN_OP_ANY, f_reduce_dim, &r, &x, 1, 1);
                    r.r = cn_all_dim;
                    check_op(label("all %s", w), CN_OP_ALL, f_reduce_dim, &r, &x, 1, 1);
                    if (!is_int && dt != CN_BF16 && dt != CN_F16) {
                        pair gx[2] = {x, p};
                        check_op(label("cumprod_backward %s", w), CN_OP_CUMPROD_BACKWARD,
                                 f_cumprod_bwd, &a, gx, 2, 5);
                    }
                }
                pair_free(p);
                pair_free(x);
            }
        }
    }
    /* NaN (sorts as the largest; cummax takes it over), signed zeros, infinities, zeros in
     * cumprod's backward */
    const double v[12] = {1, NAN, 3, 3, -INFINITY, 0, -0.0, 5, NAN, 0, INFINITY, INFINITY};
    const int64_t s34[2] = {3, 4};
    pair x = pair_from(v, s34, 2, CN_F32);
    for (int dim = 0; dim < 2; dim++) {
        const int64_t sel[4][2] = {{CN_OP_CUMMAX, 0}, {CN_OP_CUMMIN, 0}, {CN_OP_SORT, 0},
                                   {CN_OP_SORT, 1}};
        for (int k = 0; k < 4; k++)
            for (int which = 0; which < 2; which++) {
                args b = {.i0 = dim, .i1 = which, .ints = sel[k]};
                check_op(label("%s specials dim %d", cn_op_name((cn_op)sel[k][0]), dim),
                         (cn_op)sel[k][0], f_select, &b, &x, 1, 1);
            }
        args r = {.r = cn_any_dim, .i0 = dim};
        check_op("any specials", CN_OP_ANY, f_reduce_dim, &r, &x, 1, 1);
    }
    pair_free(x);
    const double z[12] = {2, 0, -1.5, 0.5, 0, 1.25, 0, -2, 0.75, 1.5, -0.5, 2};
    pair zx[2] = {input(s34, 2, CN_F64, -1, 1, CONTIG), pair_from(z, s34, 2, CN_F64)};
    args a1 = {.i0 = 1};
    check_op("cumprod_backward with zeros", CN_OP_CUMPROD_BACKWARD, f_cumprod_bwd, &a1, zx, 2, 1);
    pair_free(zx[0]);
    pair_free(zx[1]);
    /* an empty dim: any is false, all is true, the scans give empty results */
    const int64_t e[2] = {4, 0};
    x = input(e, 2, CN_F32, 0, 1, CONTIG);
    args any1 = {.r = cn_any_dim, .i0 = 1}, all1 = {.r = cn_all_dim, .i0 = 1};
    check_op("any of nothing", CN_OP_ANY, f_reduce_dim, &any1, &x, 1, 1);
    check_op("all of nothing", CN_OP_ALL, f_reduce_dim, &all1, &x, 1, 1);
    pair_free(x);
}

/* ---- matmul ------------------------------------------------------------------------------------- */

static void matmul_case(const char *name, const int64_t *as, int an, int al, const int64_t *bs,
                        int bn, int bl, cn_dtype dt) {
    double r = dt == CN_I32 || dt == CN_I64 ? 60 : 1; /* ints: values -59 .. 59 */
    pair in[2] = {input(as, an, dt, -r, r, al), input(bs, bn, dt, -r, r, bl)};
    /* f16/bf16: the sum of K products is rounded once more than the CPU's f32 reference */
    check_op(label("matmul %s %s (%s @ %s)", name, cn_dtype_name(dt), layout_names[al],
                   layout_names[bl]),
             CN_OP_MATMUL, f_matmul, NULL, in, 2, 2);
    pair_free(in[0]);
    pair_free(in[1]);
}

static void test_matmul(void) {
    for (int d = 0; d < N_FLOAT; d++) {
        cn_dtype dt = float_dtypes[d];
        const int64_t a[2] = {33, 17}, b[2] = {17, 45};
        for (int al = 0; al < 3; al++)
            for (int bl = 0; bl < 3; bl++) matmul_case("2-d", a, 2, al, b, 2, bl, dt);
        const int64_t ba[3] = {3, 33, 17}, bb[3] = {3, 17, 45};
        matmul_case("batched", ba, 3, CONTIG, bb, 3, TRANSPOSED, dt);
        matmul_case("batched, a broadcast", ba, 3, BROADCAST, bb, 3, CONTIG, dt);
        matmul_case("batched, b broadcast", ba, 3, STRIDED, bb, 3, BROADCAST, dt);
        const int64_t b4[4] = {2, 1, 8, 5}, b3[3] = {3, 5, 7};
        matmul_case("batch broadcast", b4, 4, TRANSPOSED, b3, 3, CONTIG, dt);
        matmul_case("batch into a shared b", ba, 3, CONTIG, b, 2, TRANSPOSED, dt);
        const int64_t v[1] = {17};
        matmul_case("vector @ matrix", v, 1, CONTIG, b, 2, CONTIG, dt);
        matmul_case("matrix @ vector", a, 2, TRANSPOSED, v, 1, STRIDED, dt);
        matmul_case("vector @ vector", v, 1, STRIDED, v, 1, CONTIG, dt);
        const int64_t e1[2] = {4, 0}, e2[2] = {0, 5};
        matmul_case("K = 0", e1, 2, CONTIG, e2, 2, CONTIG, dt);
        const int64_t big_a[2] = {300, 257}, big_b[2] = {257, 129};
        matmul_case("larger", big_a, 2, TRANSPOSED, big_b, 2, CONTIG, dt);
        /* linear: x @ w^T + b, one kernel (CN_OP_LINEAR), x and w in each layout, with and
         * without the bias */
        const int64_t xs[3] = {2, 5, 16}, ws[2] = {24, 16}, bs[1] = {24};
        for (int l = 0; l < 3; l++)
            for (int nb = 2; nb <= 3; nb++) {
                pair in[3] = {input(xs, 3, dt, -1, 1, l), input(ws, 2, dt, -1, 1, 2 - l),
                              input(bs, 1, dt, -1, 1, CONTIG)};
                check_op(label("linear %s %s%s", cn_dtype_name(dt), layout_names[l],
                               nb == 3 ? " bias" : ""),
                         CN_OP_LINEAR, f_linear, &nb, in, nb, 2);
                for (int i = 0; i < 3; i++) pair_free(in[i]);
            }
        /* linear_gelu (f32 and f64 on CUDA): both forms, with and without the bias */
        for (int form = 0; form < 2 && (dt == CN_F32 || dt == CN_F64); form++)
            for (int nb = 2; nb <= 3; nb++) {
                pair in[3] = {input(xs, 3, dt, -1, 1, CONTIG), input(ws, 2, dt, -1, 1, CONTIG),
                              input(bs, 1, dt, -1, 1, CONTIG)};
                const int arg[2] = {nb, form};
                check_op(label("linear_gelu %s %s%s", cn_dtype_name(dt), form ? "tanh" : "erf",
                               nb == 3 ? " bias" : ""),
                         CN_OP_LINEAR_GELU, f_linear_gelu, arg, in, nb, 2);
                for (int i = 0; i < 3; i++) pair_free(in[i]);
            }
        /* linear_add (f32 and f64 on CUDA): x in each layout, with and without the bias */
        const int64_t rs[3] = {2, 5, 24};
        for (int l = 0; l < 3 && (dt == CN_F32 || dt == CN_F64); l++)
            for (int nb = 3; nb <= 4; nb++) {
                pair in[4] = {input(xs, 3, dt, -1, 1, l), input(ws, 2, dt, -1, 1, CONTIG),
                              input(rs, 3, dt, -1, 1, CONTIG), input(bs, 1, dt, -1, 1, CONTIG)};
                check_op(label("linear_add %s %s%s", cn_dtype_name(dt), layout_names[l],
                               nb == 4 ? " bias" : ""),
                         CN_OP_LINEAR_ADD, f_linear_add, &nb, in, nb, 2);
                for (int i = 0; i < 4; i++) pair_free(in[i]);
            }
    }
    /* i32 and i64: exact, as the CPU's loop */
    const cn_dtype ints[2] = {CN_I32, CN_I64};
    for (int d = 0; d < 2; d++) {
        const int64_t a[2] = {33, 17}, b[2] = {17, 45}, ba[3] = {3, 33, 17}, bb[3] = {3, 17, 45};
        matmul_case("2-d", a, 2, CONTIG, b, 2, TRANSPOSED, ints[d]);
        matmul_case("batched, a broadcast", ba, 3, BROADCAST, bb, 3, STRIDED, ints[d]);
    }
}

/* ---- indexing ----------------------------------------------------------------------------------- */

static void test_indexing(void) {
    const int64_t xs[3] = {5, 7, 4};
    const cn_dtype dts[5] = {CN_F32, CN_F16, CN_I64, CN_U8, CN_BOOL};
    for (int d = 0; d < 5; d++) {
        for (int dim = 0; dim < 3; dim++) {
            for (int l = 0; l < 3; l++) {
                pair x = input(xs, 3, dts[d], -9, 9, l);
                int64_t is[3] = {4, 6, 3};
                is[dim] = 9; /* more picks than entries along dim: repeats */
                pair idx = input(is, 3, CN_I64, 0, (double)xs[dim], (l + 1) % 3);
                pair in[2] = {x, idx};
                args a = {.i0 = dim};
                check_op(label("gather %s dim %d %s", cn_dtype_name(dts[d]), dim, layout_names[l]),
                         CN_OP_GATHER, f_gather, &a, in, 2, 0);
                int64_t n1 = 8;
                pair sel = input(&n1, 1, CN_I64, 0, (double)xs[dim], l == 2 ? STRIDED : CONTIG);
                in[1] = sel;
                check_op(label("index_select %s dim %d %s", cn_dtype_name(dts[d]), dim,
                               layout_names[l]),
                         CN_OP_INDEX_SELECT, f_index_select, &a, in, 2, 0);
                pair_free(sel);
                pair_free(idx);
                pair_free(x);
            }
        }
    }
    const cn_dtype sdts[6] = {CN_F32, CN_F64, CN_I32, CN_I64, CN_F16, CN_BF16};
    for (int d = 0; d < 6; d++)
        for (int dim = 0; dim < 2; dim++) {
            const int64_t x2[2] = {5, 7};
            int64_t is[2] = {5, 7};
            is[dim] = 10; /* duplicates: additions land on the same entries */
            pair in[3] = {input(x2, 2, sdts[d], -3, 3, TRANSPOSED),
                          input(is, 2, CN_I64, 0, (double)x2[dim], CONTIG),
                          input(is, 2, sdts[d], -3, 3, STRIDED)};
            args a = {.i0 = dim};
            check_op(label("scatter_add %s dim %d", cn_dtype_name(sdts[d]), dim),
                     CN_OP_SCATTER_ADD, f_scatter_add, &a, in, 3, 2);
            for (int i = 0; i < 3; i++) pair_free(in[i]);
        }
    const cn_dtype idts[3] = {CN_I64, CN_I32, CN_U8};
    const cn_dtype odts[4] = {CN_F32, CN_I64, CN_BOOL, CN_F16};
    for (int i = 0; i < 3; i++)
        for (int o = 0; o < 4; o++) {
            const int64_t s[2] = {3, 4};
            pair idx = input(s, 2, idts[i], 0, 6, i == 1 ? TRANSPOSED : CONTIG);
            args a = {.i0 = 6, .i1 = odts[o]};
            check_op(label("one_hot %s -> %s", cn_dtype_name(idts[i]), cn_dtype_name(odts[o])),
                     CN_OP_ONE_HOT, f_one_hot, &a, &idx, 1, 0);
            pair_free(idx);
        }
    /* out-of-range indices: the same error, word for word */
    const double xv[6] = {1, 2, 3, 4, 5, 6}, bad[4] = {0, 2, 3, 1}, neg[2] = {1, -1};
    const int64_t s23[2] = {2, 3}, s22[2] = {2, 2}, s2[1] = {2};
    pair in[2] = {pair_from(xv, s23, 2, CN_F32), pair_from(bad, s22, 2, CN_I64)};
    args a1 = {.i0 = 1};
    check_same_error("gather out of range", f_gather, &a1, in, 2);
    pair_free(in[1]);
    in[1] = pair_from(neg, s2, 1, CN_I64);
    check_same_error("index_select negative", f_index_select, &a1, in, 2);
    args oh = {.i0 = 2, .i1 = CN_F32};
    check_same_error("one_hot beyond num_classes", f_one_hot, &oh, &in[1], 1);
    pair_free(in[0]);
    pair_free(in[1]);
}

/* ---- indexing of issue 16: masks, triangles, flips, repeats and assignments -------------------- */

static void test_index_ops(void) {
    const cn_dtype dts[5] = {CN_F32, CN_F16, CN_I64, CN_U8, CN_BOOL};
    const int64_t xs[3] = {3, 5, 6}, ms[2] = {1, 6};
    for (int d = 0; d < 5; d++)
        for (int l = 0; l < 3; l++) {
            const char *dn = cn_dtype_name(dts[d]), *ln = layout_names[l];
            pair x = input(xs, 3, dts[d], -9, 9, l);
            pair m[2] = {x, input(ms, 2, CN_BOOL, 0, 2, CONTIG)}; /* mask broadcast over dims 0, 1 */
            args fill = {.s0 = 2.5};
            /* f16: against the CPU in f32 (which has no f16 masked_fill), rounded */
            check_op(label("masked_fill %s %s", dn, ln), CN_OP_MASKED_FILL, f_masked_fill, &fill,
                     m, 2, 0);
            pair_free(m[1]);
            for (int64_t k = -2; k <= 2; k += 2) {
                args diag = {.i0 = k};
                check_op(label("tril %s %s k %lld", dn, ln, (long long)k), CN_OP_TRIL, f_tril,
                         &diag, &x, 1, 0);
                check_op(label("triu %s %s k %lld", dn, ln, (long long)k), CN_OP_TRIU, f_triu,
                         &diag, &x, 1, 0);
            }
            const int64_t dims[2] = {0, 2}, reps[4] = {2, 1, 3, 2};
            args flip = {.ints = dims, .i1 = 2}, rep = {.ints = reps, .i1 = 4};
            check_op(label("flip %s %s", dn, ln), CN_OP_FLIP, f_flip, &flip, &x, 1, 0);
            check_op(label("repeat %s %s", dn, ln), CN_OP_REPEAT, f_repeat, &rep, &x, 1, 0);
            /* slice_assign: rows 1 and 3 of dim 1 */
            const int64_t vs[3] = {3, 2, 6}, sl[4] = {1, 1, 5, 2};
            pair sa[2] = {x, input(vs, 3, dts[d], -9, 9, (l + 1) % 3)};
            args slice = {.ints = sl};
            check_op(label("slice_assign %s %s", dn, ln), CN_OP_SLICE_ASSIGN, f_slice_assign,
                     &slice, sa, 2, 0);
            pair_free(sa[1]);
            for (int dim = 0; dim < 3; dim++) {
                /* scatter with repeated index values: both backends keep the last write */
                int64_t is[3] = {2, 4, 5};
                is[dim] = 7;
                pair in[3] = {x, input(is, 3, CN_I64, 0, (double)xs[dim], CONTIG),
                              input(is, 3, dts[d], -9, 9, l)};
                args a = {.i0 = dim};
                check_op(label("scatter %s dim %d %s", dn, dim, ln), CN_OP_SCATTER, f_scatter, &a,
                         in, 3, 0);
                pair_free(in[1]);
                pair_free(in[2]);
                int64_t n1 = 8, ss[3] = {3, 5, 6};
                ss[dim] = n1;
                pair ic[3] = {x, input(&n1, 1, CN_I64, 0, (double)xs[dim], l == 2 ? STRIDED : CONTIG),
                              input(ss, 3, dts[d], -9, 9, l)};
                check_op(label("index_copy %s dim %d %s", dn, dim, ln), CN_OP_INDEX_COPY,
                         f_index_copy, &a, ic, 3, 0);
                if (dts[d] != CN_U8 && dts[d] != CN_BOOL)
                    check_op(label("index_add %s dim %d %s", dn, dim, ln), CN_OP_INDEX_ADD,
                             f_index_add, &a, ic, 3, 4);
                pair_free(ic[1]);
                pair_free(ic[2]);
            }
            /* unfold: overlapping windows along each dim; nonzero and masked_select (the
             * GPU's block compaction against the CPU's pass) on a mask broadcast over dim 0 */
            for (int dim = 0; dim < 3; dim++) {
                const int64_t win[2] = {2, 1 + dim % 2};
                args a = {.i0 = dim, .ints = win};
                check_op(label("unfold %s dim %d %s", dn, dim, ln), CN_OP_UNFOLD, f_unfold, &a,
                         &x, 1, 0);
            }
            check_op(label("nonzero %s %s", dn, ln), CN_OP_NONZERO, f_nonzero, NULL, &x, 1, 0);
            const int64_t bm[3] = {1, 5, 6};
            pair sel[2] = {x, input(bm, 3, CN_BOOL, 0, 2, l)};
            check_op(label("masked_select %s %s", dn, ln), CN_OP_MASKED_SELECT, f_masked_select,
                     NULL, sel, 2, 0);
            pair_free(sel[1]);
            pair_free(x);
        }
    {
        /* a compaction longer than the block's 1024 threads take one position each */
        const int64_t big[2] = {300, 70};
        pair x = input(big, 2, CN_F32, -1, 1, CONTIG);
        pair m[2] = {x, input(big, 2, CN_BOOL, 0, 2, TRANSPOSED)};
        check_op("masked_select 21000 entries", CN_OP_MASKED_SELECT, f_masked_select, NULL, m, 2,
                 0);
        check_op("nonzero of a 21000-entry mask", CN_OP_NONZERO, f_nonzero, NULL, &m[1], 1, 0);
        pair_free(m[1]);
        pair_free(x);
    }
    /* gather_nd / scatter_nd: tuples of K = 1, 2, 3 coordinates into x [4, 5, 3], repeated tuples
     * (scatter_nd applies them in order on both), every reduction on the float and int dtypes */
    const cn_dtype ndts[6] = {CN_F32, CN_F64, CN_I32, CN_I64, CN_F16, CN_BOOL};
    for (int d = 0; d < 6; d++)
        for (int k = 1; k <= 3; k++) {
            const int64_t xs3[3] = {4, 5, 3}, is[3] = {6, 2, k};
            int64_t us[CN_MAX_DIMS] = {6, 2};
            for (int j = k; j < 3; j++) us[2 + j - k] = xs3[j];
            pair x = input(xs3, 3, ndts[d], -3, 3, d % 2 ? TRANSPOSED : CONTIG);
            /* coordinates in [0, 3): valid for every dim of x */
            pair idx = input(is, 3, CN_I64, 0, 3, CONTIG);
            pair gin[2] = {x, idx};
            const char *dn = cn_dtype_name(ndts[d]);
            check_op(label("gather_nd %s K %d", dn, k), CN_OP_GATHER_ND, f_gather_nd, NULL, gin,
                     2, 0);
            pair upd = input(us, 2 + 3 - k, ndts[d], -3, 3, CONTIG);
            pair sin[3] = {x, idx, upd};
            int numeric = ndts[d] != CN_BOOL && ndts[d] != CN_F16;
            for (int r = CN_SCATTER_ASSIGN; r <= (numeric ? CN_SCATTER_MAX : CN_SCATTER_ASSIGN);
                 r++) {
                args a = {.i0 = r};
                check_op(label("scatter_nd %s K %d reduce %d", dn, k, r), CN_OP_SCATTER_ND,
                         f_scatter_nd, &a, sin, 3, r == CN_SCATTER_MUL ? 8 : 2);
            }
            pair_free(upd);
            pair_free(idx);
            pair_free(x);
        }
    /* out-of-range indices: the same error, word for word */
    const double xv[6] = {1, 2, 3, 4, 5, 6}, bad[2] = {0, 3}, src[6] = {7, 8, 9, 7, 8, 9};
    const int64_t s23[2] = {2, 3}, s13[2] = {1, 3}, s2[1] = {2};
    const double row[3] = {4, 1, 3};
    pair sc[3] = {pair_from(xv, s23, 2, CN_F32), pair_from(row, s13, 2, CN_I64),
                  pair_from(src, s13, 2, CN_F32)};
    args a1 = {.i0 = 1};
    check_same_error("scatter out of range", f_scatter, &a1, sc, 3);
    pair_free(sc[1]);
    pair_free(sc[2]);
    sc[1] = pair_from(bad, s2, 1, CN_I64);
    sc[2] = pair_from(src, s23, 2, CN_F32);
    check_same_error("index_copy out of range", f_index_copy, &a1, sc, 3);
    check_same_error("index_add out of range", f_index_add, &a1, sc, 3);
    const double tuples[4] = {1, 2, 0, 3};
    const int64_t s22t[2] = {2, 2};
    pair nd[2] = {sc[0], pair_from(tuples, s22t, 2, CN_I64)};
    check_same_error("gather_nd out of range", f_gather_nd, NULL, nd, 2);
    pair_free(nd[1]);
    for (int i = 0; i < 3; i++) pair_free(sc[i]);
}

/* ---- convolution and pooling -------------------------------------------------------------------- */

typedef struct conv_case {
    const char *name;
    int64_t N, C, H, W, O, KH, KW;
    int64_t ints[7]; /* stride h, w, padding h, w, dilation h, w, groups */
    int bias;
} conv_case;

static int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* x laid out NHWC in memory (a permuted view) when `nhwc`. */
static pair conv_input(const int64_t *nchw, cn_dtype dt, int nhwc) {
    if (!nhwc) return input(nchw, 4, dt, -1, 1, CONTIG);
    int64_t nhwc_shape[4] = {nchw[0], nchw[2], nchw[3], nchw[1]};
    pair b = input(nhwc_shape, 4, dt, -1, 1, CONTIG);
    const int perm[4] = {0, 3, 1, 2};
    pair r = {cn_permute(b.c, perm), cn_permute(b.g, perm)};
    pair_free(b);
    return r;
}

static void run_conv_case(const conv_case *k, cn_dtype dt, int strided) {
    const int64_t *p = k->ints;
    int64_t xs[4] = {k->N, k->C, k->H, k->W}, ws[4] = {k->O, k->C / p[6], k->KH, k->KW};
    int64_t OH = conv_out(k->H, k->KH, p[0], p[2], p[4]), OW = conv_out(k->W, k->KW, p[1], p[3], p[5]);
    int64_t gs[4] = {k->N, k->O, OH, OW}, bs[1] = {k->O};
    pair in[3] = {conv_input(xs, dt, strided), input(ws, 4, dt, -1, 1, strided ? TRANSPOSED : CONTIG),
                  input(bs, 1, dt, -1, 1, CONTIG)};
    args a = {.ints = p, .i0 = k->bias};
    const char *l = strided ? "strided" : "contiguous";
    check_op(label("conv2d %s %s %s", k->name, cn_dtype_name(dt), l), CN_OP_CONV2D, f_conv2d, &a,
             in, 3, 4);
    check_op(label("conv2d_relu %s %s %s", k->name, cn_dtype_name(dt), l), CN_OP_CONV2D_RELU,
             f_conv2d_relu, &a, in, 3, 4);
    /* conv2d then a 2x2 max pool at stride 2, and that pool's backward from random choices */
    int64_t zs[4] = {k->N, k->O, OH, OW}, ps[4] = {k->N, k->O, OH / 2, OW / 2};
    args ap = {.ints = p, .i0 = k->bias, .i1 = 2, .shape = zs};
    check_op(label("conv2d_max_pool2d %s %s %s", k->name, cn_dtype_name(dt), l),
             CN_OP_CONV2D_MAX_POOL2D, f_conv2d_max_pool2d, &ap, in, 3, 4);
    pair pin[2] = {input(ps, 4, dt, -1, 1, strided ? STRIDED : CONTIG),
                   input(ps, 4, CN_U8, 0, 4, CONTIG)};
    check_op(label("max_pool2d_backward_index %s %s %s", k->name, cn_dtype_name(dt), l),
             CN_OP_MAX_POOL2D_BACKWARD_INDEX, f_max_pool_bw_index, &ap, pin, 2, 1);
    /* the whole backward of conv2d_max_pool2d from the same g and choices: gx, gw, gb */
    int64_t p8[8];
    memcpy(p8, p, sizeof(int64_t) * 7);
    p8[7] = 2;
    pair cp[4] = {pin[0], pin[1], in[0], in[1]};
    for (int o = 0; o < 3; o++) {
        args ac = {.ints = p8, .i0 = o};
        check_op(label("conv2d_max_pool2d_backward %s %s %s output %d", k->name,
                       cn_dtype_name(dt), l, o),
                 CN_OP_CONV2D_MAX_POOL2D_BACKWARD, f_conv_pool_bw, &ac, cp, 4, 8);
    }
    pair_free(pin[0]);
    pair_free(pin[1]);
    pair g = conv_input(gs, dt, strided);
    pair bi[2] = {g, in[1]}, bw[2] = {g, in[0]};
    args ai = {.ints = p, .shape = xs}, aw = {.ints = p, .shape = ws};
    check_op(label("conv2d_backward_input %s %s %s", k->name, cn_dtype_name(dt), l),
             CN_OP_CONV2D_BACKWARD_INPUT, f_conv_bw_input, &ai, bi, 2, 4);
    check_op(label("conv2d_backward_weight %s %s %s", k->name, cn_dtype_name(dt), l),
             CN_OP_CONV2D_BACKWARD_WEIGHT, f_conv_bw_weight, &aw, bw, 2, 8);
    pair_free(g);
    for (int i = 0; i < 3; i++) pair_free(in[i]);
}

static void test_conv(void) {
    static const conv_case cases[] = {
        {"3x3 pad 1", 2, 4, 9, 8, 6, 3, 3, {1, 1, 1, 1, 1, 1, 1}, 1},
        {"3x2 stride (2,1) dilation (2,1) groups 2", 3, 4, 11, 10, 4, 3, 2, {2, 1, 0, 1, 2, 1, 2}, 0},
        {"1x1", 2, 8, 5, 5, 4, 1, 1, {1, 1, 0, 0, 1, 1, 1}, 1},
        {"depthwise 3x3", 2, 4, 7, 6, 4, 3, 3, {1, 1, 1, 1, 1, 1, 4}, 1},
        {"5x5 stride 3 pad 2", 2, 3, 16, 13, 5, 5, 5, {3, 3, 2, 2, 1, 1, 1}, 1},
    };
    int with_cudnn = !selftest && cn_cuda_cudnn_compiled();
    for (int use = with_cudnn; use >= 0; use--) {
        if (!selftest) cn_cuda_set_cudnn_enabled(use);
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
            for (int d = 0; d < N_FLOAT; d++)
                for (int s = 0; s < 2; s++) run_conv_case(&cases[c], float_dtypes[d], s);
    }
    if (!selftest) cn_cuda_set_cudnn_enabled(1);
}

/* conv_transpose2d (x [N, C, H, W], w [C, O/groups, KH, KW]), conv1d (w [O, C/groups, K]) and
 * conv_transpose1d (w [C, O/groups, K]): groups, bias, output_padding below the stride and past
 * it (below the dilation), channels-last / transposed / strided operands; conv1d with cuDNN on
 * and off (it runs conv2d's kernel) */
static void test_conv_more(void) {
    static const struct {
        const char *name;
        int64_t N, C, H, W, Og, KH, KW;
        int64_t ints[9]; /* stride h, w, padding h, w, output_padding h, w, dilation h, w, groups */
        int bias;
    } t2[] = {
        {"3x3 stride 2 pad 1 outpad 1", 2, 4, 5, 6, 3, 3, 3, {2, 2, 1, 1, 1, 1, 1, 1, 1}, 1},
        {"groups 2 outpad past the stride", 2, 4, 4, 5, 2, 2, 3, {1, 2, 0, 1, 2, 1, 3, 2, 2}, 0},
    };
    for (size_t c = 0; c < sizeof t2 / sizeof *t2; c++)
        for (int d = 0; d < N_FLOAT; d++)
            for (int s = 0; s < 2; s++) {
                cn_dtype dt = float_dtypes[d];
                const int64_t *p = t2[c].ints;
                int64_t xs[4] = {t2[c].N, t2[c].C, t2[c].H, t2[c].W};
                int64_t ws[4] = {t2[c].C, t2[c].Og, t2[c].KH, t2[c].KW}, bs[1] = {t2[c].Og * p[8]};
                pair in[3] = {conv_input(xs, dt, s), input(ws, 4, dt, -1, 1, s ? TRANSPOSED : CONTIG),
                              input(bs, 1, dt, -1, 1, s ? STRIDED : CONTIG)};
                args a = {.ints = p, .i0 = t2[c].bias};
                check_op(label("conv_transpose2d %s %s %s", t2[c].name, cn_dtype_name(dt),
                               s ? "strided" : "contiguous"),
                         CN_OP_CONV_TRANSPOSE2D, f_conv_transpose2d, &a, in, 3, 4);
                for (int i = 0; i < 3; i++) pair_free(in[i]);
            }
    static const struct {
        const char *name;
        int64_t N, C, L, O, K; /* O: conv1d's output channels; conv_transpose1d's per group */
        int64_t c1[4];         /* conv1d: stride, padding, dilation, groups */
        int64_t t1[5];         /* conv_transpose1d: stride, padding, output_padding, dilation, groups */
        int bias;
    } k1[] = {
        {"k3 stride 2 groups 2", 2, 4, 11, 6, 3, {2, 1, 2, 2}, {2, 1, 1, 1, 2}, 1},
        {"k2 dilation 3", 3, 3, 9, 2, 2, {1, 0, 3, 1}, {1, 2, 2, 3, 1}, 0},
    };
    int with_cudnn = !selftest && cn_cuda_cudnn_compiled();
    for (int use = with_cudnn; use >= 0; use--) {
        if (!selftest) cn_cuda_set_cudnn_enabled(use);
        for (size_t c = 0; c < sizeof k1 / sizeof *k1; c++)
            for (int d = 0; d < N_FLOAT; d++)
                for (int s = 0; s < 2; s++) {
                    cn_dtype dt = float_dtypes[d];
                    int lay = s ? TRANSPOSED : CONTIG;
                    int64_t xs[3] = {k1[c].N, k1[c].C, k1[c].L};
                    int64_t ws[3] = {k1[c].O, k1[c].C / k1[c].c1[3], k1[c].K}, bs[1] = {k1[c].O};
                    pair in[3] = {input(xs, 3, dt, -1, 1, lay), input(ws, 3, dt, -1, 1, lay),
                                  input(bs, 1, dt, -1, 1, CONTIG)};
                    args a = {.ints = k1[c].c1, .i0 = k1[c].bias};
                    const char *l = s ? "transposed" : "contiguous";
                    check_op(label("conv1d %s %s %s", k1[c].name, cn_dtype_name(dt), l),
                             CN_OP_CONV1D, f_conv1d, &a, in, 3, 4);
                    for (int i = 1; i < 3; i++) pair_free(in[i]);
                    int64_t wt[3] = {k1[c].C, k1[c].O, k1[c].K}, bt[1] = {k1[c].O * k1[c].t1[4]};
                    in[1] = input(wt, 3, dt, -1, 1, lay);
                    in[2] = input(bt, 1, dt, -1, 1, CONTIG);
                    args at = {.ints = k1[c].t1, .i0 = k1[c].bias};
                    check_op(label("conv_transpose1d %s %s %s", k1[c].name, cn_dtype_name(dt), l),
                             CN_OP_CONV_TRANSPOSE1D, f_conv_transpose1d, &at, in, 3, 4);
                    for (int i = 0; i < 3; i++) pair_free(in[i]);
                }
    }
    if (!selftest) cn_cuda_set_cudnn_enabled(1);

    /* 3-D (f32, f64): conv3d and its weight gradient, conv_transpose3d with an output_padding
     * past the stride on one dim; transposed operands (the last two dims swapped in memory) */
    const int64_t c3[10] = {2, 1, 1, 1, 0, 1, 1, 2, 1, 2};
    const int64_t t3[13] = {1, 2, 1, 0, 1, 0, 2, 1, 0, 3, 1, 1, 2};
    const int64_t xs[5] = {2, 4, 5, 6, 4}, ws[5] = {6, 2, 2, 3, 2}, bs[1] = {6};
    const int64_t OD = conv_out(5, 2, 2, 1, 1), OH = conv_out(6, 3, 1, 0, 2);
    const int64_t gs[5] = {2, 6, OD, OH, conv_out(4, 2, 1, 1, 1)};
    const int64_t wt[5] = {4, 3, 2, 2, 2}, bt[1] = {6};
    const cn_dtype dts[2] = {CN_F32, CN_F64};
    for (int d = 0; d < 2; d++)
        for (int s = 0; s < 2; s++) {
            cn_dtype dt = dts[d];
            int lay = s ? TRANSPOSED : CONTIG;
            const char *l = s ? "transposed" : "contiguous";
            pair in[3] = {input(xs, 5, dt, -1, 1, lay), input(ws, 5, dt, -1, 1, lay),
                          input(bs, 1, dt, -1, 1, CONTIG)};
            args a = {.ints = c3, .i0 = 1, .shape = ws};
            check_op(label("conv3d %s %s", cn_dtype_name(dt), l), CN_OP_CONV3D, f_conv3d, &a, in,
                     3, 4);
            pair g = input(gs, 5, dt, -1, 1, lay);
            pair bw[2] = {g, in[0]};
            check_op(label("conv3d_backward_weight %s %s", cn_dtype_name(dt), l),
                     CN_OP_CONV3D_BACKWARD_WEIGHT, f_conv3d_bw_weight, &a, bw, 2, 8);
            pair_free(g);
            pair_free(in[1]);
            pair_free(in[2]);
            in[1] = input(wt, 5, dt, -1, 1, lay);
            in[2] = input(bt, 1, dt, -1, 1, CONTIG);
            args at = {.ints = t3, .i0 = 1};
            check_op(label("conv_transpose3d %s %s", cn_dtype_name(dt), l),
                     CN_OP_CONV_TRANSPOSE3D, f_conv_transpose3d, &at, in, 3, 4);
            for (int i = 0; i < 3; i++) pair_free(in[i]);
        }
}

static void test_pool(void) {
    static const int64_t cfgs[][6] = {
        {3, 3, 2, 2, 1, 1}, {2, 2, 2, 2, 0, 0}, {3, 2, 1, 2, 1, 0}, {2, 3, 1, 1, 1, 1}};
    const int64_t xs[4] = {2, 3, 9, 10};
    for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++)
        for (int d = 0; d < N_FLOAT; d++)
            for (int s = 0; s < 2; s++) {
                cn_dtype dt = float_dtypes[d];
                const int64_t *k = cfgs[c];
                int64_t OH = (xs[2] + 2 * k[4] - k[0]) / k[2] + 1;
                int64_t OW = (xs[3] + 2 * k[5] - k[1]) / k[3] + 1;
                int64_t gs[4] = {xs[0], xs[1], OH, OW};
                /* integer-valued x: windows hold ties, and the first maximum must win */
                pair x;
                if (s) {
                    x = conv_input(xs, dt, 1);
                } else {
                    cn_tensor *r = cpu_rand(xs, 4, CN_I32, -3, 4);
                    cn_tensor *f = cn_cast(r, dt);
                    cn_release(r);
                    x = pair_of(f);
                }
                pair g = conv_input(gs, dt, s);
                for (int mx = 0; mx < 2; mx++) {
                    args a = {.ints = k, .i0 = mx, .shape = xs};
                    cn_op op = mx ? CN_OP_MAX_POOL2D : CN_OP_AVG_POOL2D;
                    check_op(label("%s cfg %zu %s %s", cn_op_name(op), c, cn_dtype_name(dt),
                                   s ? "strided" : "ties"),
                             op, f_pool, &a, &x, 1, 2);
                    pair in[2] = {g, x};
                    if (mx)
                        check_op(label("max_pool2d_backward cfg %zu %s", c, cn_dtype_name(dt)),
                                 CN_OP_MAX_POOL2D_BACKWARD, f_max_pool_bw, &a, in, 2, 2);
                    else
                        check_op(label("avg_pool2d_backward cfg %zu %s", c, cn_dtype_name(dt)),
                                 CN_OP_AVG_POOL2D_BACKWARD, f_avg_pool_bw, &a, in, 1, 2);
                }
                pair_free(g);
                pair_free(x);
            }
    /* a NaN in a window wins the max, and takes its gradient */
    double v[16];
    for (int i = 0; i < 16; i++) v[i] = i % 5;
    v[5] = NAN;
    const int64_t s[4] = {1, 1, 4, 4}, gs[4] = {1, 1, 2, 2};
    const int64_t k[6] = {2, 2, 2, 2, 0, 0};
    pair x = pair_from(v, s, 4, CN_F32), g = input(gs, 4, CN_F32, -1, 1, CONTIG);
    args a = {.ints = k, .i0 = 1};
    check_op("max_pool2d NaN", CN_OP_MAX_POOL2D, f_pool, &a, &x, 1, 1);
    pair in[2] = {g, x};
    check_op("max_pool2d_backward NaN", CN_OP_MAX_POOL2D_BACKWARD, f_max_pool_bw, &a, in, 2, 1);
    pair_free(g);
    pair_free(x);
}

/* ---- the fused optimizer step ---------------------------------------------------------------- */

typedef struct sgd_args {
    cn_sgd_hyper h;
    int first;
} sgd_args;

/* sgd_step in place on x = (p, g[, buf]) (each device's own copies), returning p and buf
 * flattened one after the other. */
static cn_tensor *f_sgd_step(cn_tensor *const *x, const void *a) {
    const sgd_args *s = a;
    cn_tensor *buf = s->h.momentum != 0 ? x[2] : NULL;
    if (cn_sgd_step_(x[0], x[1], buf, &s->h, s->first) != CN_OK) return NULL;
    int64_t n = cn_numel(x[0]);
    cn_tensor *parts[2] = {cn_contiguous(x[0]), buf ? cn_contiguous(buf) : NULL};
    cn_tensor *flat[2] = {cn_reshape(parts[0], &n, 1), buf ? cn_reshape(parts[1], &n, 1) : NULL};
    cn_tensor *out = buf ? cn_cat(flat, 2, 0) : cn_retain(flat[0]);
    for (int i = 0; i < 2; i++) {
        cn_release(parts[i]);
        cn_release(flat[i]);
    }
    return out;
}

typedef struct adamw_args {
    cn_adamw_hyper h;
    int first;
} adamw_args;

/* adamw_step in place on x = (p, g, exp_avg, exp_avg_sq) (each device's own copies; exp_avg_sq
 * made non-negative first, as an average of squares is), returning p and the two averages
 * flattened one after the other. */
static cn_tensor *f_adamw_step(cn_tensor *const *x, const void *a) {
    const adamw_args *s = a;
    cn_tensor *v = cn_abs(x[3]);
    cn_status st = v ? cn_copy_(x[3], v) : cn_last_status();
    cn_release(v);
    if (st != CN_OK || cn_adamw_step_(x[0], x[1], x[2], x[3], &s->h, s->first) != CN_OK)
        return NULL;
    int64_t n = cn_numel(x[0]);
    cn_tensor *flat[3] = {NULL, NULL, NULL};
    const int which[3] = {0, 2, 3};
    for (int i = 0; i < 3; i++) {
        cn_tensor *c = cn_contiguous(x[which[i]]);
        flat[i] = cn_reshape(c, &n, 1);
        cn_release(c);
    }
    cn_tensor *out = cn_cat(flat, 3, 0);
    for (int i = 0; i < 3; i++) cn_release(flat[i]);
    return out;
}

/* input(), with the two sides in memory of their own even when the "GPU" is the CPU (where
 * cn_to_device shares the data): the step writes its operands in place. */
static pair writable_input(const int64_t *shape, int nd, cn_dtype dt, int layout) {
    pair r = input(shape, nd, dt, -1, 1, layout);
    if (selftest && r.g) {
        /* a copy of the memory under the view, viewed the same way */
        int64_t base[CN_MAX_DIMS];
        memcpy(base, shape, sizeof(int64_t) * (size_t)nd);
        if (layout == TRANSPOSED) {
            base[nd - 2] = shape[nd - 1];
            base[nd - 1] = shape[nd - 2];
        } else if (layout == STRIDED) {
            base[nd - 1] = 2 * shape[nd - 1];
        }
        cn_tensor *mem = cn_empty(base, nd, dt, gpu), *view = view_as(mem, layout, shape, nd);
        if (!view || cn_copy_(view, r.g) != CN_OK) FAIL("writable_input: %s", cn_last_error());
        cn_release(mem);
        cn_release(r.g);
        r.g = view;
    }
    return r;
}

/* Every case of SGD (momentum's first and later steps, dampening, Nesterov, weight decay) with p
 * and buf contiguous, transposed or strided, and g in every layout, broadcast included. */
/* ---- resampling of issue 16 ------------------------------------------------------------------ */

/* interpolate: i0 = mode, i1 = align_corners, ints = the output sizes (or NULL), shape = x's
 * shape (the backward's), s0, s1 = the scale factors (when ints is NULL). */
static cn_tensor *f_interpolate(cn_tensor *const *x, const void *a) {
    const double sc[2] = {A(a)->s0, A(a)->s1};
    return cn_interpolate(x[0], cn_ndim(x[0]) - 2, A(a)->ints, A(a)->ints ? NULL : sc,
                          (cn_interp_mode)A(a)->i0, (int)A(a)->i1);
}
static cn_tensor *f_interpolate_bw(cn_tensor *const *x, const void *a) {
    const int64_t ints[2] = {A(a)->i0, A(a)->i1};
    const double sc[2] = {A(a)->ints ? 0 : A(a)->s0, A(a)->ints ? 0 : A(a)->s1};
    return cn__interpolate_backward(x[0], A(a)->shape, cn_ndim(x[0]), ints, sc);
}

/* grid_sample_2d: i0 = mode, i1 = padding, s0 = align_corners; backward: s1 = which */
static cn_tensor *f_grid_sample(cn_tensor *const *x, const void *a) {
    return cn_grid_sample_2d(x[0], x[1], (cn_grid_mode)A(a)->i0, (cn_grid_padding)A(a)->i1,
                             (int)A(a)->s0);
}
static cn_tensor *f_grid_sample_bw(cn_tensor *const *x, const void *a) {
    const int64_t ints[3] = {A(a)->i0, A(a)->i1, (int64_t)A(a)->s0};
    return cn__grid_sample_2d_backward(x[0], x[1], x[2], ints, (int)A(a)->s1);
}

/* Every mode on [N, C, H, W] (up in one dim, down in the other; 2x; a scale factor) and on
 * [N, C, L], in every float dtype and layout, with align_corners on and off; the backward on
 * the forward's output shape. */
static void test_resample(void) {
    static const struct {
        int mode, align, nd;
        int64_t size[2];
        double scale[2];
    } cfgs[] = {{0, 0, 2, {13, 4}, {0}}, {0, 0, 2, {14, 12}, {0}}, {0, 0, 2, {0}, {1.7, 0.45}},
                {1, 0, 2, {13, 4}, {0}}, {1, 1, 2, {13, 4}, {0}}, {1, 0, 2, {0}, {2.5, 0.8}},
                {2, 0, 2, {13, 4}, {0}}, {2, 1, 2, {5, 19}, {0}}, {2, 0, 2, {0}, {1.3, 3.0}},
                {0, 0, 1, {11}, {0}},    {1, 1, 1, {23}, {0}},    {1, 0, 1, {0}, {0.6}}};
    for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++)
        for (int d = 0; d < N_FLOAT; d++)
            for (int l = CONTIG; l <= STRIDED; l++) {
                cn_dtype dt = float_dtypes[d];
                int nd = cfgs[c].nd + 2;
                const int64_t xs[4] = {2, 3, 7, 6}, xs1[3] = {2, 3, 9};
                const int64_t *shape = nd == 4 ? xs : xs1;
                const int64_t *size = cfgs[c].size[0] ? cfgs[c].size : NULL;
                args a = {.i0 = cfgs[c].mode, .i1 = cfgs[c].align, .ints = size, .shape = shape,
                          .s0 = cfgs[c].scale[0], .s1 = cfgs[c].scale[1]};
                pair x = input(shape, nd, dt, -2, 2, l);
                check_op(label("interpolate cfg %zu %s %s", c, cn_dtype_name(dt), layout_names[l]),
                         CN_OP_INTERPOLATE, f_interpolate, &a, &x, 1, 2);
                cn_tensor *x64 = cn_cast(x.c, CN_F64), *y = f_interpolate(&x64, &a);
                cn_release(x64);
                if (!y) {
                    FAIL("interpolate cfg %zu: %s", c, cn_last_error());
                } else {
                    pair g = input(cn_shape(y), nd, dt, -2, 2, l);
                    check_op(label("interpolate_backward cfg %zu %s %s", c, cn_dtype_name(dt),
                                   layout_names[l]),
                             CN_OP_INTERPOLATE_BACKWARD, f_interpolate_bw, &a, &g, 1, 4);
                    pair_free(g);
                }
                cn_release(y);
                pair_free(x);
            }
    /* grid_sample_2d: every mode, padding and align_corners, grid points inside and outside x
     * ([-1.3, 1.3]); the backward (both gradients) in f32 and f64 */
    const int64_t xs[4] = {2, 3, 5, 7}, gs[4] = {2, 4, 6, 2}, ys[4] = {2, 3, 4, 6};
    for (int mode = 0; mode < 2; mode++)
        for (int pad = 0; pad < 3; pad++)
            for (int align = 0; align < 2; align++)
                for (int d = 0; d < N_FLOAT; d++)
                    for (int l = CONTIG; l <= STRIDED; l++) {
                        cn_dtype dt = float_dtypes[d];
                        pair in[3] = {input(ys, 4, dt, -1, 1, l), input(xs, 4, dt, -2, 2, l),
                                      input(gs, 4, dt, -1.3, 1.3, l)};
                        args a = {.i0 = mode, .i1 = pad, .s0 = align};
                        check_op(label("grid_sample_2d %d %d %d %s %s", mode, pad, align,
                                       cn_dtype_name(dt), layout_names[l]),
                                 CN_OP_GRID_SAMPLE_2D, f_grid_sample, &a, in + 1, 2, 2);
                        for (int which = 0; which < 2 && !is_half(dt); which++) {
                            a.s1 = which;
                            check_op(label("grid_sample_2d_backward %d %d %d %d %s %s", mode,
                                           pad, align, which, cn_dtype_name(dt),
                                           layout_names[l]),
                                     CN_OP_GRID_SAMPLE_2D_BACKWARD, f_grid_sample_bw, &a, in, 3,
                                     4);
                        }
                        for (int i = 0; i < 3; i++) pair_free(in[i]);
                    }
}

/* deform_conv2d: ints = stride h, w, padding h, w, dilation h, w, groups, offset_groups,
 * has_mask (i0: with a bias); the inputs (x, offset, w[, mask][, b]) */
static cn_tensor *f_deform(cn_tensor *const *x, const void *a) {
    const int64_t *k = A(a)->ints;
    cn_deform_conv2d_params p = {{k[0], k[1]}, {k[2], k[3]}, {k[4], k[5]}, k[6], k[7]};
    return cn_deform_conv2d(x[0], x[1], x[2], k[8] ? x[3] : NULL, A(a)->i0 ? x[3 + k[8]] : NULL,
                            &p);
}
/* its backward kernel: inputs (g, x, offset, w[, mask]), i1 = which gradient */
static cn_tensor *f_deform_bw(cn_tensor *const *x, const void *a) {
    cn_tensor *grads[4];
    if (cn__deform_conv2d_backward(x[0], x[1], x[2], x[3], A(a)->ints[8] ? x[4] : NULL,
                                   A(a)->ints, grads) != CN_OK)
        return NULL;
    for (int i = 0; i < 4; i++)
        if (i != A(a)->i1) cn_release(grads[i]);
    return grads[A(a)->i1];
}

/* DCNv1 with a bias and DCNv2 with weight and offset groups, strides, paddings and dilations;
 * offsets in [-3, 3] (samples inside, across and outside x's edges), every float dtype, the
 * layouts; the backward kernel's four gradients in f32 and f64 */
static void test_deform_conv(void) {
    static const struct {
        int64_t x[4], w[4], ints[9];
        int bias;
    } cfgs[] = {{{2, 3, 5, 6}, {4, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 0}, 1},
                {{1, 4, 6, 5}, {4, 2, 2, 3}, {2, 1, 1, 2, 1, 2, 2, 2, 1}, 0},
                {{2, 4, 5, 5}, {2, 4, 3, 2}, {1, 2, 0, 1, 2, 1, 1, 4, 1}, 1}};
    for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++)
        for (int d = 0; d < N_FLOAT; d++)
            for (int l = CONTIG; l <= STRIDED; l++) {
                cn_dtype dt = float_dtypes[d];
                const int64_t *xs = cfgs[c].x, *ws = cfgs[c].w, *k = cfgs[c].ints;
                int64_t oh = (xs[2] + 2 * k[2] - k[4] * (ws[2] - 1) - 1) / k[0] + 1;
                int64_t ow = (xs[3] + 2 * k[3] - k[5] * (ws[3] - 1) - 1) / k[1] + 1;
                int64_t taps = k[7] * ws[2] * ws[3];
                const int64_t os[4] = {xs[0], 2 * taps, oh, ow}, ms[4] = {xs[0], taps, oh, ow};
                const int64_t bs[1] = {ws[0]}, gs[4] = {xs[0], ws[0], oh, ow};
                pair in[6] = {input(gs, 4, dt, -1, 1, l), input(xs, 4, dt, -2, 2, l),
                              input(os, 4, dt, -3, 3, l), input(ws, 4, dt, -1, 1, l),
                              input(ms, 4, dt, -1, 1, l), input(bs, 1, dt, -1, 1, CONTIG)};
                args a = {.i0 = cfgs[c].bias, .ints = k};
                pair fwd[5] = {in[1], in[2], in[3], in[4], in[5]};
                if (!k[8]) fwd[3] = in[5];
                check_op(label("deform_conv2d cfg %zu %s %s", c, cn_dtype_name(dt),
                               layout_names[l]),
                         CN_OP_DEFORM_CONV2D, f_deform, &a, fwd, 3 + (int)k[8] + cfgs[c].bias, 4);
                for (int which = 0; which < 3 + k[8] && !is_half(dt); which++) {
                    a.i1 = which;
                    check_op(label("deform_conv2d_backward cfg %zu %d %s %s", c, which,
                                   cn_dtype_name(dt), layout_names[l]),
                             CN_OP_DEFORM_CONV2D_BACKWARD, f_deform_bw, &a, in,
                             4 + (int)k[8], 8);
                }
                for (int i = 0; i < 6; i++) pair_free(in[i]);
            }
}

static void test_sgd_step(void) {
    const cn_sgd_hyper cases[] = {
        {0.1, 0, 0, 0, 0},    {0.05, 0.9, 0, 0, 0}, {0.05, 0.9, 0.3, 0, 0},
        {0.05, 0.9, 0, 0, 1}, {0.1, 0, 0, 0.2, 0},  {0.05, 0.5, 0, 0.1, 1},
    };
    const cn_dtype dts[2] = {CN_F32, CN_F64};
    const int64_t shapes[2][2] = {{7, 9}, {301, 517}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        for (int d = 0; d < 2; d++)
            for (int z = 0; z < 2; z++)
                for (int pl = CONTIG; pl <= STRIDED; pl++)
                    for (int gl = 0; gl < N_LAYOUTS; gl++)
                        for (int first = 0; first < 2; first++) {
                            if (cases[k].momentum == 0 && !first) continue; /* no buffer */
                            const int64_t *shape = shapes[z];
                            pair in[3] = {writable_input(shape, 2, dts[d], pl),
                                          input(shape, 2, dts[d], -1, 1, gl),
                                          writable_input(shape, 2, dts[d], pl)};
                            sgd_args a = {cases[k], first};
                            check_op(label("sgd_step case %zu %s [%lld, %lld] p %s g %s%s", k,
                                           cn_dtype_name(dts[d]), (long long)shape[0],
                                           (long long)shape[1], layout_names[pl], layout_names[gl],
                                           first ? " first" : ""),
                                     CN_OP_SGD_STEP, f_sgd_step, &a, in, 3, 1);
                            for (int i = 0; i < 3; i++)
                                pair_free(in[i]);
                        }
}

static void test_adamw_step(void) {
    const cn_adamw_hyper cases[] = {
        {1e-3, 0.9, 0.999, 1e-8, 0.01, 1},
        {0.05, 0.8, 0.99, 1e-3, 0.0, 3},
        {0.1, 0.0, 0.5, 0, 0.2, 7},
    };
    const cn_dtype dts[2] = {CN_F32, CN_F64};
    const int64_t shapes[2][2] = {{7, 9}, {301, 517}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        for (int d = 0; d < 2; d++)
            for (int z = 0; z < 2; z++)
                for (int pl = CONTIG; pl <= STRIDED; pl++)
                    for (int first = 0; first < 2; first++) {
                        const int64_t *shape = shapes[z];
                        pair in[4] = {writable_input(shape, 2, dts[d], pl),
                                      input(shape, 2, dts[d], -1, 1, pl),
                                      writable_input(shape, 2, dts[d], pl),
                                      writable_input(shape, 2, dts[d], pl)};
                        adamw_args a = {cases[k], first};
                        check_op(label("adamw_step case %zu %s [%lld, %lld] %s%s", k,
                                       cn_dtype_name(dts[d]), (long long)shape[0],
                                       (long long)shape[1], layout_names[pl],
                                       first ? " first" : ""),
                                 CN_OP_ADAMW_STEP, f_adamw_step, &a, in, 4, 1);
                        for (int i = 0; i < 4; i++) pair_free(in[i]);
                    }
}

/* ---- autodiff on the GPU ------------------------------------------------------------------------ */

static cn_tensor *leaf(cn_device dev, const double *v, int64_t r, int64_t c) {
    int64_t shape[2] = {r, c};
    float f[16];
    for (int64_t i = 0; i < r * c; i++) f[i] = (float)v[i];
    return cn_require_grad(cn_from_data(f, shape, 2, CN_F32, dev));
}

static void check_grad(const char *what, cn_grads *g, cn_tensor *t, const double *want, int n) {
    cn_tensor *gt = g ? cn_grad(g, t) : NULL;
    if (gt && cn_device_of(gt).backend != gpu.backend) FAIL("%s: the gradient left the GPU", what);
    th_check_values(what, gt, want, n, 1e-4);
}

/* The reference cases of tests/test_autodiff.c (gradients from burn's test suite). */
static void test_autodiff_oracle(void) {
    cn_device devs[2] = {cn_autodiff(gpu), cn_autodiff_checkpointed(gpu, CN_CHECKPOINT_BALANCED)};
    for (int k = 0; k < 2; k++) {
        cn_device d = devs[k];
        cn_scope_begin();
        cn_tensor *a = leaf(d, (double[]){2, 5}, 1, 2), *b = leaf(d, (double[]){4, 1}, 1, 2);
        cn_grads *g = cn_backward(cn_add(a, b));
        check_grad("1 add", g, a, (double[]){1, 1}, 2);
        cn_grads_free(g);
        g = cn_backward(cn_sub(a, b));
        check_grad("2 sub", g, b, (double[]){-1, -1}, 2);
        cn_grads_free(g);
        cn_tensor *m1 = leaf(d, (double[]){1, 7}, 1, 2), *m2 = leaf(d, (double[]){4, 7}, 1, 2);
        g = cn_backward(cn_mul(m1, m2));
        check_grad("3 mul", g, m1, (double[]){4, 7}, 2);
        check_grad("3 mul", g, m2, (double[]){1, 7}, 2);
        cn_grads_free(g);
        g = cn_backward(cn_div(m1, m2));
        check_grad("4 div", g, m1, (double[]){0.25, 0.14285715}, 2);
        check_grad("4 div", g, m2, (double[]){-0.0625, -0.14285715}, 2);
        cn_grads_free(g);

        cn_tensor *A = leaf(d, (double[]){1, 7, 2, 3}, 2, 2), *B = leaf(d, (double[]){4, 7, 2, 3}, 2, 2);
        g = cn_backward(cn_matmul(A, B));
        check_grad("5 matmul gA", g, A, (double[]){11, 5, 11, 5}, 4);
        check_grad("5 matmul gB", g, B, (double[]){3, 3, 10, 10}, 4);
        cn_grads_free(g);

        cn_tensor *d1 = leaf(d, (double[]){1, 7, 13, -3}, 2, 2);
        cn_tensor *d2 = leaf(d, (double[]){4, 7, 2, 3}, 2, 2);
        cn_tensor *d3 = leaf(d, (double[]){2, 2, 2, 2}, 2, 2);
        g = cn_backward(cn_mul(d1, cn_mul(cn_mul(d1, d2), d3)));
        check_grad("6 mul chain g1", g, d1, (double[]){16, 196, 104, -36}, 4);
        check_grad("6 mul chain g2", g, d2, (double[]){2, 98, 338, 18}, 4);
        cn_grads_free(g);
        g = cn_backward(cn_div(cn_div(d1, d2), d3));
        check_grad("7 div chain g1", g, d1, (double[]){0.125, 0.07142857, 0.25, 0.16666667}, 4);
        check_grad("7 div chain g2", g, d2, (double[]){-0.03125, -0.07142857, -1.625, 0.16666667},
                   4);
        check_grad("7 div chain g3", g, d3, (double[]){-0.0625, -0.25, -1.625, 0.25}, 4);
        cn_grads_free(g);

        cn_tensor *X = leaf(d, (double[]){1, 7, -2, -3}, 2, 2);
        cn_tensor *W = leaf(d, (double[]){4, -7, 2, 3}, 2, 2);
        g = cn_backward(cn_matmul(cn_relu(cn_matmul(X, W)), W));
        check_grad("8 relu gX", g, X, (double[]){-47, 9, -35, 15}, 4);
        check_grad("8 relu gW", g, W, (double[]){15, 13, -2, 39}, 4);
        cn_grads_free(g);
        int64_t one[2] = {1, 1};
        g = cn_backward(cn_mul(X, cn_reshape(cn_mean(cn_matmul(X, W)), one, 2)));
        check_grad("9 mean gX", g, X, (double[]){3.5, 9.5, 3.5, 9.5}, 4);
        check_grad("9 mean gW", g, W, (double[]){-0.75, -0.75, 3, 3}, 4);
        cn_grads_free(g);

        cn_tensor *e = leaf(d, (double[]){-90, 1.5}, 1, 2);
        g = cn_backward(cn_sigmoid(e));
        double s = 1 / (1 + exp(-1.5));
        check_grad("sigmoid at -90 is 0, not NaN", g, e, (double[]){0, s * (1 - s)}, 2);
        cn_grads_free(g);

        cn_tensor *br = leaf(d, (double[]){1, 2, 3, 4, 5, 6}, 2, 3);
        cn_tensor *bc = leaf(d, (double[]){10, 20, 30}, 1, 3);
        g = cn_backward(cn_mul(br, bc));
        check_grad("broadcast gb sums rows", g, bc, (double[]){5, 7, 9}, 3);
        cn_grads_free(g);
        cn_scope_end();
    }
}

/* ---- attention (issue 16) ------------------------------------------------------------------ */

/* x = (q, k, v[, mask]); i0 = causal, i1 = with the mask, s0 = scale */
static cn_tensor *f_sdpa(cn_tensor *const *x, const void *a) {
    return cn_scaled_dot_product_attention(x[0], x[1], x[2], A(a)->i1 ? x[3] : NULL,
                                           (int)A(a)->i0, A(a)->s0);
}

/* x = (g, q, k, v[, mask]); i0 = causal, i1 = with the mask, s1 = which gradient (0 dq, 1 dk,
 * 2 dv, 3 the scores'), s0 = scale */
static cn_tensor *f_sdpa_bwd(cn_tensor *const *x, const void *a) {
    cn_tensor *mask = A(a)->i1 ? x[4] : NULL, *lse = NULL, *grads[4];
    int which = (int)A(a)->s1;
    cn_tensor *o = cn__sdpa_forward(x[1], x[2], x[3], mask, (int)A(a)->i0, A(a)->s0, &lse);
    if (!o) return NULL;
    cn_status s = cn__sdpa_backward(x[0], x[1], x[2], x[3], o, lse, mask, (int)A(a)->i0,
                                    A(a)->s0, which == 3, grads);
    cn_release(o);
    cn_release(lse);
    if (s != CN_OK) return NULL;
    for (int i = 0; i < 4; i++)
        if (i != which) cn_release(grads[i]);
    return grads[which];
}

/* Lq != Lk both ways, causal, a mask broadcast over the batch, strided q; f32 and f64 */
static void test_attention(void) {
    const cn_dtype dts[2] = {CN_F32, CN_F64};
    const int64_t lens[2][2] = {{70, 33}, {20, 90}};
    for (int d = 0; d < 2; d++)
        for (int l = 0; l < 2; l++)
            for (int variant = 0; variant < 4; variant++) {
                int causal = variant & 1, masked = variant >> 1;
                int64_t lq = lens[l][0], lk = lens[l][1];
                const int64_t qs[3] = {3, lq, 8}, ks[3] = {3, lk, 8}, vs[3] = {3, lk, 5};
                const int64_t gs[3] = {3, lq, 5}, ms[2] = {lq, lk};
                pair in[5] = {input(gs, 3, dts[d], -1, 1, CONTIG),
                              input(qs, 3, dts[d], -1, 1, l ? TRANSPOSED : CONTIG),
                              input(ks, 3, dts[d], -1, 1, CONTIG),
                              input(vs, 3, dts[d], -1, 1, CONTIG),
                              input(ms, 2, dts[d], -2, 1, CONTIG)};
                const char *dn = cn_dtype_name(dts[d]);
                args a = {.i0 = causal, .i1 = masked, .s0 = 0.3};
                pair fwd[4] = {in[1], in[2], in[3], in[4]};
                check_op(label("sdpa %s %lldx%lld causal %d mask %d", dn, (long long)lq,
                               (long long)lk, causal, masked),
                         CN_OP_SDPA, f_sdpa, &a, fwd, masked ? 4 : 3, 4);
                for (int which = 0; which < (masked ? 4 : 3); which++) {
                    args b = a;
                    b.s1 = which;
                    check_op(label("sdpa backward %s %lldx%lld causal %d mask %d grad %d", dn,
                                   (long long)lq, (long long)lk, causal, masked, which),
                             CN_OP_SDPA_BACKWARD, f_sdpa_bwd, &b, in, masked ? 5 : 4, 8);
                }
                for (int i = 0; i < 5; i++) pair_free(in[i]);
            }
}

/* x = (x, w, b); i0 = k, i1 = bits: 1 weight, 2 bias, 4 rms_norm; s0 = eps */
static cn_tensor *f_norm(cn_tensor *const *x, const void *a) {
    int k = (int)A(a)->i0, bits = (int)A(a)->i1;
    const int64_t *shape = cn_shape(x[0]) + cn_ndim(x[0]) - k;
    cn_tensor *w = bits & 1 ? x[1] : NULL, *b = bits & 2 ? x[2] : NULL;
    if (bits & 4) return cn_rms_norm(x[0], shape, k, w, A(a)->s0);
    return cn_layer_norm(x[0], shape, k, w, b, A(a)->s0);
}

/* x = (g, x, w); as f_norm, s1 = which gradient (0 dx, 1 dw, 2 db) */
static cn_tensor *f_norm_bwd(cn_tensor *const *x, const void *a) {
    int k = (int)A(a)->i0, bits = (int)A(a)->i1, which = (int)A(a)->s1;
    const int64_t *shape = cn_shape(x[1]) + cn_ndim(x[1]) - k;
    cn_tensor *w = bits & 1 ? x[2] : NULL, *mean = NULL, *rstd = NULL, *grads[3];
    cn_tensor *y = bits & 4 ? cn__rms_norm_forward(x[1], shape, k, w, A(a)->s0, &rstd)
                            : cn__layer_norm_forward(x[1], shape, k, w, NULL, A(a)->s0, &mean,
                                                     &rstd);
    cn_status s = !y ? cn_last_status()
                  : bits & 4 ? cn__rms_norm_backward(x[0], x[1], rstd, w, k, 1, grads)
                             : cn__layer_norm_backward(x[0], x[1], mean, rstd, w, k, 1, 1, grads);
    cn_release(y);
    cn_release(mean);
    cn_release(rstd);
    if (s != CN_OK) return NULL;
    for (int i = 0; i < 3; i++)
        if (i != which) cn_release(grads[i]);
    return grads[which];
}

/* layer_norm and rms_norm, forward and backward: rows longer than a block (300), normalised
 * over 1 and 2 dims, with and without weight and bias, x transposed; f32 and f64 */
static void test_norm(void) {
    const cn_dtype dts[2] = {CN_F32, CN_F64};
    const int64_t shapes[2][3] = {{6, 2, 300}, {4, 5, 7}};
    for (int d = 0; d < 2; d++)
        for (int sh = 0; sh < 2; sh++)
            for (int bits = 0; bits < 8; bits++) {
                int k = sh ? 2 : 1, rms = bits & 4;
                if (rms && (bits & 2)) continue; /* rms_norm has no bias */
                const int64_t *xs = shapes[sh], *ns = xs + 3 - k;
                pair in[3] = {input(xs, 3, dts[d], -2, 2, sh ? TRANSPOSED : CONTIG),
                              input(ns, k, dts[d], 0.5, 1.5, CONTIG),
                              input(ns, k, dts[d], -1, 1, CONTIG)};
                pair bw[3] = {input(xs, 3, dts[d], -1, 1, CONTIG), in[0], in[1]};
                const char *dn = cn_dtype_name(dts[d]), *name = rms ? "rms_norm" : "layer_norm";
                args a = {.i0 = k, .i1 = bits, .s0 = 1e-5};
                check_op(label("%s %s k %d w %d b %d", name, dn, k, bits & 1, bits >> 1 & 1),
                         rms ? CN_OP_RMS_NORM : CN_OP_LAYER_NORM, f_norm, &a, in, 3, 4);
                for (int which = 0; which < (rms ? 2 : 3); which++) {
                    args b = a;
                    b.s1 = which;
                    check_op(label("%s backward %s k %d w %d grad %d", name, dn, k, bits & 1,
                                   which),
                             rms ? CN_OP_RMS_NORM_BACKWARD : CN_OP_LAYER_NORM_BACKWARD,
                             f_norm_bwd, &b, bw, 3, 8);
                }
                pair_free(bw[0]);
                for (int i = 0; i < 3; i++) pair_free(in[i]);
            }
}

/* x = (log_probs, targets, input_lengths, target_lengths); i0 = blank, i1 = reduction */
static cn_tensor *f_ctc(cn_tensor *const *x, const void *a) {
    return cn_ctc_loss(x[0], x[1], x[2], x[3], A(a)->i0, (cn_reduction)A(a)->i1, 1);
}

/* x = (g, log_probs, targets, input_lengths, target_lengths); ints = blank, concat, zero_inf */
static cn_tensor *f_ctc_bwd(cn_tensor *const *x, const void *a) {
    return cn__ctc_loss_backward(x[0], x[1], x[2], x[3], x[4], A(a)->ints);
}

/* padded and concatenated targets (T 30, N 4, C 6), a transposed log_probs, an impossible
 * sample (zero_infinity), f32 and f64 */
static void test_ctc(void) {
    const cn_dtype dts[2] = {CN_F32, CN_F64};
    const double padded[12] = {1, 2, 2, 3, 4, 0, 5, 5, 5, 1, 0, 0};
    const double concat[9] = {1, 2, 2, 4, 5, 5, 5, 1, 3};
    const double il[4] = {30, 25, 2, 17}, tl[4] = {3, 2, 3, 1};
    const int64_t lps[3] = {30, 4, 6}, ps[2] = {4, 3}, cs[1] = {9}, ns[1] = {4};
    for (int d = 0; d < 2; d++)
        for (int concatenated = 0; concatenated < 2; concatenated++) {
            pair in[5] = {input(ns, 1, dts[d], -1, 1, CONTIG),
                          input(lps, 3, dts[d], -3, 0, concatenated ? TRANSPOSED : CONTIG),
                          concatenated ? pair_from(concat, cs, 1, CN_I64)
                                       : pair_from(padded, ps, 2, CN_I64),
                          pair_from(il, ns, 1, CN_I64), pair_from(tl, ns, 1, CN_I64)};
            const char *dn = cn_dtype_name(dts[d]);
            for (int r = 0; r < 3; r++) {
                args a = {.i0 = 0, .i1 = r};
                check_op(label("ctc_loss %s concatenated %d reduction %d", dn, concatenated, r),
                         CN_OP_CTC_LOSS, f_ctc, &a, in + 1, 4, 4);
            }
            const int64_t ints[3] = {0, concatenated, 1};
            args b = {.ints = ints};
            check_op(label("ctc_loss_backward %s concatenated %d", dn, concatenated),
                     CN_OP_CTC_LOSS_BACKWARD, f_ctc_bwd, &b, in, 5, 8);
            for (int i = 0; i < 5; i++) pair_free(in[i]);
        }
}

/* conv -> relu -> max_pool -> linear -> log_softmax -> pick the targets: every gradient on the
 * GPU matches the CPU's. */
static cn_tensor *small_net_loss(cn_tensor *const *p, cn_tensor *x, cn_tensor *target) {
    cn_conv2d_params cp = {{1, 1}, {1, 1}, {1, 1}, 1};
    cn_pool2d_params pp = {{2, 2}, {2, 2}, {0, 0}};
    cn_tensor *h = cn_max_pool2d(cn_relu(cn_conv2d(x, p[0], p[1], &cp)), &pp); /* [4, 6, 3, 3] */
    int64_t flat[2] = {4, 54};
    cn_tensor *logits = cn_linear(cn_reshape(h, flat, 2), p[2], p[3]);      /* [4, 5] */
    cn_tensor *lp = cn_log_softmax(cn_gelu(logits, CN_GELU_TANH), 1);
    return cn_neg(cn_mean(cn_gather(lp, 1, target)));
}

static void test_network_gradients(void) {
    const int64_t shapes[4][4] = {{6, 3, 3, 3}, {6}, {5, 54}, {5}};
    const int nds[4] = {4, 1, 2, 1};
    const int64_t xs[4] = {4, 3, 6, 6}, ts[2] = {4, 1};
    cn_scope_begin();
    cn_tensor *pc[4], *pg[4];
    for (int i = 0; i < 4; i++) {
        cn_tensor *v = cpu_rand(shapes[i], nds[i], CN_F32, -0.5, 0.5);
        pc[i] = cn_require_grad(cn_to_device(v, cn_autodiff(cpu)));
        pg[i] = cn_require_grad(cn_to_device(v, cn_autodiff(gpu)));
    }
    cn_tensor *x = cpu_rand(xs, 4, CN_F32, -1, 1);
    cn_tensor *t = cpu_rand(ts, 2, CN_I64, 0, 5);
    cn_tensor *xg = cn_to_device(x, gpu), *tg = cn_to_device(t, gpu);
    cn_grads *gc = cn_backward(small_net_loss(pc, x, t));
    cn_grads *gg = cn_backward(small_net_loss(pg, xg, tg));
    CHECK(gc && gg);
    for (int i = 0; gc && gg && i < 4; i++) {
        cn_tensor *a = cn_grad(gg, pg[i]), *b = cn_grad(gc, pc[i]);
        cn_tensor *ai = cn_inner(a), *bi = cn_inner(b);
        expect_close(label("network gradient %d", i), ai, bi, 1e-4);
    }
    cn_grads_free(gc);
    cn_grads_free(gg);
    cn_scope_end();
}

/* ---- memory ------------------------------------------------------------------------------------- */

static void test_round_trips(void) {
    const cn_dtype all[8] = {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I32, CN_I64, CN_U8, CN_BOOL};
    /* sizes around the pinned staging path: below it, one chunk, several chunks plus a tail */
    const int64_t sizes[] = {0, 1, 4097, 300000, 5000003};
    for (int d = 0; d < 8; d++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            if (sizes[s] > 300000 && d != 0 && d != 6) continue; /* the big ones: two dtypes */
            cn_tensor *c = cpu_rand(&sizes[s], 1, all[d], -1000, 1000);
            cn_tensor *g = cn_to_device(c, gpu);
            cn_tensor *back = cn_to_device(g, cpu);
            same_bytes(label("round trip %s n=%lld", cn_dtype_name(all[d]), (long long)sizes[s]),
                       back, c);
            cn_tensor *again = cn_to_device(g, gpu); /* already there: a new header, same data */
            CHECK(again && again != g && cn_device_eq(cn_device_of(again), gpu));
            same_bytes("to_device onto its own device", again, c);
            cn_release(again);
            cn_release(back);
            cn_release(g);
            cn_release(c);
        }
    /* strided sources on either side */
    const int64_t shape[3] = {40, 50, 30};
    pair x = input(shape, 3, CN_F64, -1, 1, TRANSPOSED);
    cn_tensor *g = cn_to_device(x.c, gpu), *back = cn_to_device(x.g, cpu);
    same_bytes("strided cpu -> gpu", g, x.c);
    same_bytes("strided gpu -> cpu", back, x.c);
    cn_release(g);
    cn_release(back);
    /* between two GPUs, where there are two */
    cn_device second;
    if (!selftest && cn_backend_device_count("cuda") > 1 &&
        cn_device_parse("cuda:1", &second) == CN_OK) {
        cn_tensor *on1 = cn_to_device(x.g, second);
        CHECK(on1 && cn_device_eq(cn_device_of(on1), second));
        same_bytes("cuda:0 -> cuda:1", on1, x.c);
        cn_tensor *sum1 = cn_add(on1, on1), *sum0 = cn_add(x.c, x.c);
        same_bytes("an op on cuda:1", sum1, sum0);
        cn_release(sum1);
        cn_release(sum0);
        cn_release(on1);
    }
    cn_clear_error();
    pair_free(x);
}

static void test_out_of_memory(void) {
    cn_cuda_memory_stats_t before, after;
    CHECK(cn_cuda_memory_stats(gpu.index, &before) == CN_OK);
    int64_t absurd[2] = {(int64_t)1 << 22, (int64_t)1 << 22}; /* 64 TiB of f32 */
    CHECK_FAILS(cn_empty(absurd, 2, CN_F32, gpu), CN_ERR_OUT_OF_MEMORY, "cuda:");
    CHECK(cn_cuda_memory_stats(gpu.index, &after) == CN_OK);
    CHECK(after.oom_count == before.oom_count + 1);
    CHECK(after.bytes_in_use == before.bytes_in_use);
    /* the allocation-failure test mode covers device allocations: failing each allocation of a
     * creation in turn fails it cleanly, and one of them is the device's */
    int64_t n = 1000;
    cn_release(cn_empty(&n, 1, CN_F32, gpu)); /* the first use makes the allocator's tables */
    int64_t count = cn_alloc_count();
    cn_tensor *t = cn_empty(&n, 1, CN_F32, gpu);
    count = cn_alloc_count() - count;
    cn_release(t);
    int device_failures = 0;
    for (int64_t k = 1; k <= count; k++) {
        cn_clear_error();
        cn_alloc_fail_after(k);
        t = cn_empty(&n, 1, CN_F32, gpu);
        cn_alloc_fail_after(0);
        CHECK(t == NULL && cn_last_status() == CN_ERR_OUT_OF_MEMORY);
        if (strstr(cn_last_error(), "cuda:")) device_failures++;
        cn_release(t);
    }
    CHECK(device_failures == 1);
    cn_clear_error();
    /* and the allocator still works */
    t = cn_full(&n, 1, 3.0, CN_F32, gpu);
    double want[1000];
    for (int i = 0; i < 1000; i++) want[i] = 3;
    th_check_values("after an OOM", t, want, 1000, 0);
    cn_release(t);
}

static void test_memory_stats(void) {
    cn_cuda_memory_stats_t s0, s1, s2, s3, s4;
    CHECK(cn_cuda_synchronize(gpu.index) == CN_OK);
    CHECK(cn_cuda_empty_cache(gpu.index) == CN_OK);
    CHECK(cn_cuda_memory_stats(gpu.index, &s0) == CN_OK);
    CHECK(s0.bytes_cached == 0 && s0.bytes_reserved >= s0.bytes_in_use);
    int64_t n = 1 << 18; /* 1 MiB of f32 */
    cn_tensor *t = cn_zeros(&n, 1, CN_F32, gpu);
    CHECK(cn_cuda_memory_stats(gpu.index, &s1) == CN_OK);
    CHECK(s1.bytes_in_use >= s0.bytes_in_use + (1 << 20));
    CHECK(s1.peak_bytes_in_use >= s1.bytes_in_use);
    CHECK(s1.driver_allocs > s0.driver_allocs);
    cn_release(t);
    CHECK(cn_cuda_memory_stats(gpu.index, &s2) == CN_OK);
    CHECK(s2.bytes_in_use == s0.bytes_in_use && s2.bytes_cached >= (1 << 20));
    t = cn_zeros(&n, 1, CN_F32, gpu); /* the same size class: from the cache */
    CHECK(cn_cuda_memory_stats(gpu.index, &s3) == CN_OK);
    CHECK(s3.cache_hits > s2.cache_hits && s3.driver_allocs == s2.driver_allocs);
    cn_release(t);
    CHECK(cn_cuda_empty_cache(gpu.index) == CN_OK);
    CHECK(cn_cuda_reset_peak_memory_stats(gpu.index) == CN_OK);
    CHECK(cn_cuda_memory_stats(gpu.index, &s4) == CN_OK);
    CHECK(s4.bytes_cached == 0 && s4.driver_frees > s3.driver_frees);
    CHECK(s4.peak_bytes_in_use == s4.bytes_in_use);
    /* devices that do not exist */
    cn_device bad;
    cn_clear_error();
    CHECK(cn_device_parse("cuda:99", &bad) == CN_ERR_DEVICE_UNAVAILABLE);
    cn_clear_error();
    CHECK(cn_cuda_memory_stats(99, &s0) == CN_ERR_DEVICE_UNAVAILABLE);
    cn_clear_error();
}

/* ---- padding and pooling of issue 16 ------------------------------------------------------- */

static void test_pad_pool(void) {
    const cn_dtype dts[5] = {CN_F32, CN_F16, CN_I64, CN_U8, CN_BOOL};
    const int64_t xs[3] = {3, 5, 6};
    /* every mode on two dims; crops of 3 dims (constant) and of one (circular) */
    static const int64_t grow[4] = {2, 1, 1, 3}, crop3[6] = {-1, 2, 0, 1, 1, -1},
                         crop1[2] = {-2, 1};
    for (int d = 0; d < 5; d++)
        for (int l = 0; l < 3; l++) {
            const char *dn = cn_dtype_name(dts[d]), *ln = layout_names[l];
            pair x = input(xs, 3, dts[d], -9, 9, l);
            for (int m = 0; m < 4; m++) {
                args a = {.ints = grow, .i1 = 4, .i0 = m, .s0 = 1};
                check_op(label("pad mode %d %s %s", m, dn, ln), CN_OP_PAD, f_pad, &a, &x, 1, 0);
            }
            args c3 = {.ints = crop3, .i1 = 6, .i0 = CN_PAD_CONSTANT, .s0 = 1};
            check_op(label("pad crop %s %s", dn, ln), CN_OP_PAD, f_pad, &c3, &x, 1, 0);
            args c1 = {.ints = crop1, .i1 = 2, .i0 = CN_PAD_CIRCULAR};
            check_op(label("pad circular crop %s %s", dn, ln), CN_OP_PAD, f_pad, &c1, &x, 1, 0);
            pair_free(x);
        }
    /* the backward along one dim: grown in every mode, cropped in constant and circular */
    static const int64_t bws[][5] = {{0, 2, 2, 3, 6}, {1, 2, 2, 3, 6}, {2, 2, 2, 3, 6},
                                     {3, 2, 2, 3, 6}, {0, 1, -1, 2, 5}, {3, 1, 1, -2, 5}};
    const int64_t as[4] = {2, 3, 9, 10};
    for (int d = 0; d < N_FLOAT; d++)
        for (int l = 0; l < 3; l++) {
            cn_dtype dt = float_dtypes[d];
            const char *dn = cn_dtype_name(dt), *ln = layout_names[l];
            for (size_t b = 0; b < sizeof bws / sizeof *bws; b++) {
                int64_t gs[3] = {3, 5, 6};
                int dim = (int)bws[b][1];
                gs[dim] = bws[b][4] + bws[b][2] + bws[b][3];
                pair g = input(gs, 3, dt, -1, 1, l);
                args a = {.ints = bws[b] + 1, .i0 = bws[b][0]};
                check_op(label("pad_backward %zu %s %s", b, dn, ln), CN_OP_PAD_BACKWARD,
                         f_pad_bw, &a, &g, 1, 2);
                pair_free(g);
            }
            /* adaptive pools of 1 to 3 dims, shrinking (overlapping windows) and growing */
            pair x = input(as, 4, dt, -1, 1, l);
            static const int64_t outs[3][3] = {{4}, {4, 7}, {2, 4, 13}};
            for (int k = 1; k <= 3; k++) {
                args a = {.ints = outs[k - 1], .i0 = k, .shape = as, .i1 = 4};
                check_op(label("adaptive_avg_pool%dd %s %s", k, dn, ln),
                         CN_OP_ADAPTIVE_AVG_POOL, f_adaptive, &a, &x, 1, 2);
                int64_t gs[4] = {2, 3, 9, 10};
                for (int i = 0; i < k; i++) gs[4 - k + i] = outs[k - 1][i];
                pair g = input(gs, 4, dt, -1, 1, l);
                check_op(label("adaptive_avg_pool%dd backward %s %s", k, dn, ln),
                         CN_OP_ADAPTIVE_AVG_POOL_BACKWARD, f_adaptive_bw, &a, &g, 1, 2);
                pair_free(g);
            }
            pair_free(x);
        }
    /* max pooling with indices: dilation, padding, ceil mode; integer-valued inputs (ties: the
     * first maximum's index on both) and random ones */
    static const int64_t mp[3][9] = {{3, 2, 2, 1, 1, 1, 1, 2, 0}, {2, 3, 2, 2, 0, 1, 2, 1, 1},
                                     {2, 2, 2, 2, 1, 1, 1, 1, 1}};
    for (int d = 0; d < N_FLOAT; d++)
        for (int l = 0; l < 3; l++)
            for (int s = 0; s < 2; s++) {
                cn_dtype dt = float_dtypes[d];
                pair x;
                if (s) {
                    x = input(as, 4, dt, -1, 1, l);
                } else {
                    cn_tensor *r = cpu_rand(as, 4, CN_I32, -3, 4);
                    x = pair_of(cn_cast(r, dt));
                    cn_release(r);
                }
                for (int c = 0; c < 3; c++)
                    for (int which = 0; which < 2; which++) {
                        args a = {.ints = mp[c], .i0 = which};
                        check_op(label("max_pool2d_with_indices %d %s %s %s %s", c,
                                       cn_dtype_name(dt), layout_names[l],
                                       s ? "random" : "ties", which ? "indices" : "values"),
                                 CN_OP_MAX_POOL2D_WITH_INDICES, f_max_pool_ex, &a, &x, 1, 0);
                    }
                pair_free(x);
            }
    /* unfold4d and fold4d: plain, and dilated, padded, strided with overlapping blocks */
    static const int64_t fk[2][8] = {{3, 2, 1, 1, 0, 0, 1, 1}, {3, 2, 2, 1, 1, 1, 2, 1}};
    for (int d = 0; d < N_FLOAT; d++)
        for (int l = 0; l < 3; l++)
            for (int c = 0; c < 2; c++) {
                cn_dtype dt = float_dtypes[d];
                const char *dn = cn_dtype_name(dt), *ln = layout_names[l];
                const int64_t *k = fk[c];
                int64_t oh = (as[2] + 2 * k[4] - k[2] * (k[0] - 1) - 1) / k[6] + 1;
                int64_t ow = (as[3] + 2 * k[5] - k[3] * (k[1] - 1) - 1) / k[7] + 1;
                const int64_t cs[3] = {as[0], as[1] * k[0] * k[1], oh * ow};
                args a = {.ints = k, .shape = as};
                pair x = input(as, 4, dt, -1, 1, l), cols = input(cs, 3, dt, -1, 1, l);
                check_op(label("unfold4d %d %s %s", c, dn, ln), CN_OP_UNFOLD4D, f_unfold4d, &a,
                         &x, 1, 0);
                check_op(label("fold4d %d %s %s", c, dn, ln), CN_OP_FOLD4D, f_fold4d, &a, &cols,
                         1, 2);
                pair_free(x);
                pair_free(cols);
            }
    /* the same errors on both devices */
    pair x = input(xs, 3, CN_F32, -1, 1, CONTIG);
    static const int64_t far[2] = {6, 0};
    args bad = {.ints = far, .i1 = 2, .i0 = CN_PAD_REFLECT};
    check_same_error("reflect padding past the size", f_pad, &bad, &x, 1);
    pair_free(x);
}

/* ---- the real FFT of issue 16 ------------------------------------------------------------------ */

/* i0 = n (-1: the default), i1 = dim, s0 = norm */
static cn_tensor *f_rfft(cn_tensor *const *x, const void *a) {
    return cn_rfft(x[0], A(a)->i0, (int)A(a)->i1, (cn_fft_norm)A(a)->s0);
}
static cn_tensor *f_irfft(cn_tensor *const *x, const void *a) {
    return cn_irfft(x[0], A(a)->i0, (int)A(a)->i1, (cn_fft_norm)A(a)->s0);
}

/* cuFFT against the CPU (kissfft in f32, the direct DFT in f64): even, odd and prime lengths,
 * n = 1, the input cut and zero-padded, every norm, along the last dim and the others, f32 and
 * f64 in every layout (the spectrum's imaginary parts strided too); a batch larger than one
 * chunk of lines; f16 is refused on both with the same status. */
static void test_fft(void) {
    static const struct {
        int64_t n;
        int dim, norm;
    } cfgs[] = {{-1, -1, 0}, {16, 1, 1}, {7, 1, 2}, {5, -1, 0}, {1, 1, 0},
                {12, 0, 2},  {17, -1, 1}, {64, 2, 0}};
    const int64_t xs[3] = {4, 9, 6}, zs[4] = {4, 9, 6, 2};
    for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++)
        for (int d = 0; d < 2; d++)
            for (int l = CONTIG; l <= STRIDED; l++) {
                cn_dtype dt = float_dtypes[d];
                args a = {.i0 = cfgs[c].n, .i1 = cfgs[c].dim, .s0 = cfgs[c].norm};
                pair x = input(xs, 3, dt, -2, 2, l), z = input(zs, 4, dt, -2, 2, l);
                check_op(label("rfft cfg %zu %s %s", c, cn_dtype_name(dt), layout_names[l]),
                         CN_OP_RFFT, f_rfft, &a, &x, 1, 8);
                check_op(label("irfft cfg %zu %s %s", c, cn_dtype_name(dt), layout_names[l]),
                         CN_OP_IRFFT, f_irfft, &a, &z, 1, 8);
                pair_free(x);
                pair_free(z);
            }
    /* 4200 lines of 4000: two chunks of cuFFT's batch (2^24 / (n + 2) = 4192 lines each) */
    const int64_t big[2] = {4200, 4000};
    args a = {.i0 = -1, .i1 = 1, .s0 = 0};
    pair x = input(big, 2, CN_F32, -1, 1, CONTIG);
    check_op("rfft many lines", CN_OP_RFFT, f_rfft, &a, &x, 1, 8);
    pair_free(x);
    const int64_t zbig[3] = {4200, 2001, 2};
    pair z = input(zbig, 3, CN_F32, -1, 1, CONTIG);
    check_op("irfft many lines", CN_OP_IRFFT, f_irfft, &a, &z, 1, 8);
    pair_free(z);
    if (!selftest) {
        pair h = input(xs, 3, CN_F16, -1, 1, CONTIG);
        cn_clear_error();
        cn_tensor *y = f_rfft(&h.g, &a);
        CHECK(y == NULL && cn_last_status() == CN_ERR_DTYPE);
        cn_release(y);
        cn_clear_error();
        pair_free(h);
    }
}

/* x = (x, w float, bias); i0 = the scheme; i1 = has bias. The weight is quantized on each device
 * (the same bits: cn_quantize works on the host), then the quantized linear runs there. */
static cn_tensor *f_quant_linear(cn_tensor *const *x, const void *a) {
    cn_tensor *wq = cn_quantize(x[1], (cn_dtype)A(a)->i0);
    cn_tensor *y = wq ? cn_quant_linear(x[0], wq, A(a)->i1 ? x[2] : NULL) : NULL;
    cn_release(wq);
    return y;
}

/* the quantized linear (issue 19): the four schemes, odd sizes, a 3-D and a transposed x, with
 * and without bias */
static void test_quant_linear(void) {
    const cn_dtype schemes[4] = {CN_Q8_TENSOR, CN_Q8_CHANNEL, CN_Q8_BLOCK, CN_Q4_BLOCK};
    for (int s = 0; s < 4; s++)
        for (int v = 0; v < 2; v++) {
            int64_t K = s >= 2 ? 96 : 37, N = v ? 33 : 7;
            const int64_t xs[3] = {2, 5, K}, ws[2] = {N, K}, bs[1] = {N};
            pair in[3] = {input(xs, 3, CN_F32, -2, 2, v ? TRANSPOSED : CONTIG),
                          input(ws, 2, CN_F32, -1, 1, CONTIG), input(bs, 1, CN_F32, -1, 1, CONTIG)};
            args a = {.i0 = schemes[s], .i1 = v};
            check_op(label("quant_linear %s N %lld bias %d", cn_dtype_name(schemes[s]),
                           (long long)N, v),
                     CN_OP_QUANT_LINEAR, f_quant_linear, &a, in, 3, 64);
            for (int i = 0; i < 3; i++) pair_free(in[i]);
        }
}

static void test_every_op_has_a_kernel_and_a_check(void) {
    const cn_backend *b = cn_backend_get(gpu.backend);
    CHECK(b != NULL);
    for (int op = 0; b && op < CN_OP_COUNT; op++) {
        if (!b->kernels[op]) FAIL("the cuda backend has no kernel for %s", cn_op_name((cn_op)op));
        if (!covered[op]) FAIL("no case compared %s", cn_op_name((cn_op)op));
    }
}

int main(void) {
    const char *name = getenv("CINDER_TEST_GPU_DEVICE");
    if (!name || !*name) name = "cuda";
    selftest = strcmp(name, "cuda") != 0;
    if (!selftest && (cn_backend_load("cuda") < 0 || cn_backend_device_count("cuda") == 0)) {
        printf("cuda: no device, skipping\n(%s)\n", cn_cuda_unavailable_reason());
        return 77;
    }
    cpu = cn_cpu();
    if (cn_device_parse(name, &gpu) != CN_OK) {
        fprintf(stderr, "%s\n", cn_last_error());
        return 1;
    }
    gen = cn_generator_new(20261130);
    RUN(test_unary);
    RUN(test_scalar_ops);
    RUN(test_binary);
    RUN(test_compare_logic_where);
    RUN(test_more_elementwise);
    RUN(test_cast_copy);
    RUN(test_fill);
    RUN(test_random_bit_identical);
    RUN(test_reductions);
    RUN(test_softmax);
    RUN(test_fused_backward);
    RUN(test_scans);
    RUN(test_matmul);
    RUN(test_indexing);
    RUN(test_index_ops);
    RUN(test_conv);
    RUN(test_conv_more);
    RUN(test_pool);
    RUN(test_resample);
    RUN(test_deform_conv);
    RUN(test_pad_pool);
    RUN(test_fft);
    RUN(test_sgd_step);
    RUN(test_adamw_step);
    RUN(test_attention);
    RUN(test_norm);
    RUN(test_quant_linear);
    RUN(test_ctc);
    RUN(test_autodiff_oracle);
    RUN(test_network_gradients);
    RUN(test_round_trips);
    if (!selftest) {
        RUN(test_out_of_memory);
        RUN(test_memory_stats);
    }
    RUN(test_every_op_has_a_kernel_and_a_check);
    return th_finish();
}
