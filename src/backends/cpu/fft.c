/* CPU kernels of the real FFT (issue 16): rfft and irfft along one dim, f32 and f64.
 *
 * The tensor is a batch of 1-D lines along dim (every other dim, and irfft's trailing 2 aside);
 * each line is gathered into a dense buffer (cut or zero-padded to n), transformed, scaled and
 * written out, one chunk of lines per task on the backend's pool.
 *
 * f32: kissfft (Debian's libkissfft, float only). Even n runs its real transform (kiss_fftr /
 * kiss_fftri, which need an even length); odd n its complex one on the line with zero imaginary
 * parts (rfft), or on the whole Hermitian spectrum (irfft), keeping the real parts. A kissfft plan
 * keeps scratch of its own (kiss_fftr writes it), so one plan serves one thread at a time: each
 * chunk takes a plan from the cache below and gives it back after, so plans are made once per
 * (n, direction) and never shared while in use.
 *
 * f64: kissfft has no double build, and computing f64 in float would lose 9 digits, so f64 is the
 * DFT by its definition in double, as products of the lines with matrices of twiddles on OpenBLAS
 * (fft_f64 below). O(n (n / 2 + 1)) per line, at GEMM speed: ~1e-15 relative, for checks and
 * signals up to a few thousand points (ops.h says so, and points long ones to f32 or CUDA). */
#include <kiss_fft.h>
#include <kiss_fftr.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>

#include "backends/cpu/cpu_internal.h"
#include "core/alloc.h"

#define PI 3.14159265358979323846

/* ---- kissfft plans, cached ------------------------------------------------------------------- */

typedef struct fft_plan {
    struct fft_plan *next;
    int n, inverse;
    void *cfg; /* kiss_fftr_cfg (even n) or kiss_fft_cfg (odd n), in this block after the header */
} fft_plan;

/* The header rounded up so that kissfft's state after it is aligned for any of its fields. */
#define PLAN_HEADER    ((sizeof(fft_plan) + 15) & ~(size_t)15)
#define PLAN_CACHE_MAX 32

static pthread_mutex_t plan_lock = PTHREAD_MUTEX_INITIALIZER;
static fft_plan *plan_cache; /* idle plans, the most recently given back first */
static int plan_cached;

/* A plan for n points (inverse: irfft's direction) that no other thread uses until plan_give;
 * NULL with the error set when it cannot be made. */
static fft_plan *plan_take(const char *op, int n, int inverse) {
    pthread_mutex_lock(&plan_lock);
    fft_plan **pp = &plan_cache;
    while (*pp && ((*pp)->n != n || (*pp)->inverse != inverse))
        pp = &(*pp)->next;
    fft_plan *p = *pp;
    if (p) {
        *pp = p->next;
        plan_cached--;
    }
    pthread_mutex_unlock(&plan_lock);
    if (p) return p;
    /* kissfft reports the bytes it needs when given none, then builds the plan in ours */
    size_t need = 0;
    if (n % 2 == 0)
        kiss_fftr_alloc(n, inverse, NULL, &need);
    else
        kiss_fft_alloc(n, inverse, NULL, &need);
    p = cn__malloc(op, PLAN_HEADER + need);
    if (!p) return NULL;
    void *mem = (char *)p + PLAN_HEADER;
    size_t got = need;
    p->n = n;
    p->inverse = inverse;
    p->next = NULL;
    p->cfg = n % 2 == 0 ? (void *)kiss_fftr_alloc(n, inverse, mem, &got)
                        : (void *)kiss_fft_alloc(n, inverse, mem, &got);
    if (!p->cfg || got > need) {
        cn__free(p);
        cn_set_error(CN_ERR_BACKEND, op, "kissfft could not plan a transform of %d points", n);
        return NULL;
    }
    return p;
}

/* Returns p to the cache; past PLAN_CACHE_MAX idle plans the least recently used is freed. */
static void plan_give(fft_plan *p) {
    if (!p) return;
    fft_plan *drop = NULL;
    pthread_mutex_lock(&plan_lock);
    p->next = plan_cache;
    plan_cache = p;
    if (++plan_cached > PLAN_CACHE_MAX) {
        fft_plan **pp = &plan_cache;
        while ((*pp)->next)
            pp = &(*pp)->next;
        drop = *pp;
        *pp = NULL;
        plan_cached--;
    }
    pthread_mutex_unlock(&plan_lock);
    cn__free(drop);
}

/* ---- the lines ------------------------------------------------------------------------------- */

typedef struct fft_job {
    const cn_view *in, *out;
    int d;             /* the transformed dim */
    int in_nd, out_nd; /* the dims that index lines (irfft's input, rfft's output: less the 2) */
    int64_t n, f;      /* the length, and its bins n / 2 + 1 */
    int64_t lin;       /* the input's size along d (rfft: samples; irfft: bins) */
    double scale;
    int inverse;
    fft_plan **plans; /* f32: one per chunk */
    char *scratch;    /* chunk c's buffers at c * chunk_bytes */
    size_t chunk_bytes;
} fft_job;

/* The element offset in v of line b: b's row-major position over v's first nd dims without d. */
static int64_t line_offset(const cn_view *v, int nd, int d, int64_t b) {
    int64_t off = 0;
    for (int k = nd - 1; k >= 0; k--) {
        if (k == d) continue;
        int64_t i = b % v->shape[k];
        b /= v->shape[k];
        off += i * v->strides[k];
    }
    return off;
}

static inline int nyquist_or_dc(const fft_job *j, int64_t k) {
    return k == 0 || (j->n % 2 == 0 && k == j->n / 2);
}

/* rfft, f32: x[.., 0..n) -> bins 0..n/2 through kissfft. */
static void rfft_f32(const fft_job *j, fft_plan *plan, char *buf, int64_t b) {
    const float *x = (const float *)j->in->data + line_offset(j->in, j->in_nd, j->d, b);
    float *y = (float *)j->out->data + line_offset(j->out, j->out_nd, j->d, b);
    int64_t xs = j->in->strides[j->d], ys = j->out->strides[j->d], n = j->n;
    int64_t m = j->lin < n ? j->lin : n;
    kiss_fft_cpx *c = (kiss_fft_cpx *)buf, *line = c + n; /* n bins, then the line */
    if (n % 2 == 0) {
        float *t = (float *)line;
        for (int64_t i = 0; i < m; i++)
            t[i] = x[i * xs];
        for (int64_t i = m; i < n; i++)
            t[i] = 0;
        kiss_fftr((kiss_fftr_cfg)plan->cfg, t, c);
    } else {
        for (int64_t i = 0; i < n; i++)
            line[i] = (kiss_fft_cpx){i < m ? x[i * xs] : 0.0f, 0.0f};
        kiss_fft((kiss_fft_cfg)plan->cfg, line, c);
    }
    for (int64_t k = 0; k < j->f; k++) {
        y[k * ys] = (float)(j->scale * c[k].r);
        y[k * ys + 1] = nyquist_or_dc(j, k) ? 0.0f : (float)(j->scale * c[k].i);
    }
}

/* irfft, f32: bins 0..n/2 (cut or zero-padded from the input's) -> the real line. */
static void irfft_f32(const fft_job *j, fft_plan *plan, char *buf, int64_t b) {
    const float *z = (const float *)j->in->data + line_offset(j->in, j->in_nd, j->d, b);
    float *y = (float *)j->out->data + line_offset(j->out, j->out_nd, j->d, b);
    int64_t zs = j->in->strides[j->d], zi = j->in->strides[j->in_nd], ys = j->out->strides[j->d];
    int64_t n = j->n, f = j->f;
    kiss_fft_cpx *c = (kiss_fft_cpx *)buf, *res = c + n;
    for (int64_t k = 0; k < f; k++)
        c[k] = k < j->lin ? (kiss_fft_cpx){z[k * zs], nyquist_or_dc(j, k) ? 0.0f : z[k * zs + zi]}
                          : (kiss_fft_cpx){0.0f, 0.0f};
    if (n % 2 == 0) {
        float *t = (float *)res;
        kiss_fftri((kiss_fftr_cfg)plan->cfg, c, t);
        for (int64_t i = 0; i < n; i++)
            y[i * ys] = (float)(j->scale * t[i]);
    } else {
        for (int64_t k = 1; k < f; k++)
            c[n - k] = (kiss_fft_cpx){c[k].r, -c[k].i};
        kiss_fft((kiss_fft_cfg)plan->cfg, c, res);
        for (int64_t i = 0; i < n; i++)
            y[i * ys] = (float)(j->scale * res[i].r);
    }
}

/* ---- f64: the DFT as products with twiddle matrices ------------------------------------------ *
 * rfft: the lines X [lines, kin] (their first kin = min(size, n) samples: the padding adds
 * nothing) times, for each block of bins k, C [kin, cols] = cos theta and S = -sin theta,
 * theta = 2 pi (j k mod n) / n: Re Y = X C, Im Y = X S. irfft: the lines' bins Re, Im
 * [lines, kin] (kin = min(F, n / 2 + 1): the bins past F are zero; the imaginary parts of bin 0
 * and the Nyquist bin zeroed), for each block of samples j: x = Re C + Im S with C = m_k cos
 * theta, S = -m_k sin theta (m_k = 1 for bin 0 and the Nyquist bin, 2 for the others). The
 * products run on cpu_gemm (OpenBLAS, split over the pool); the angles come from one table of n,
 * their index j k mod n kept exact by integer steps. The lines are packed once (a copy of the
 * input); each block of columns keeps its twiddles and products to about F64_BLOCK doubles. */
#define F64_BLOCK ((int64_t)1 << 19)

static cn_status fft_f64(const fft_job *j, int64_t lines, const char *op) {
    int64_t n = j->n, inv = j->inverse;
    int64_t kin = inv ? (j->lin < j->f ? j->lin : j->f) : (j->lin < n ? j->lin : n);
    int64_t nout = inv ? n : j->f; /* output entries per line */
    int64_t wide = kin > lines ? kin : lines, cb = F64_BLOCK / (wide > 0 ? wide : 1);
    if (cb < 1) cb = 1;
    if (cb > nout) cb = nout;
    /* A (irfft: and A2) the packed lines; W, W2 a block's twiddles; T, T2 its products */
    size_t na = (size_t)(lines * kin), na2 = inv ? na : 0, nw = (size_t)(kin * cb);
    size_t nt = (size_t)(lines * cb);
    double *cs = cn__malloc(op, sizeof(double) * (2 * (size_t)n + na + na2 + 2 * (nw + nt) + 1));
    if (!cs) return cn_last_status();
    double *A = cs + 2 * n, *A2 = A + na, *W = A2 + na2, *W2 = W + nw, *T = W2 + nw, *T2 = T + nt;
    for (int64_t m = 0; m < n; m++) { /* m / n in [0, 1): each angle rounded once */
        double t = 2.0 * PI * (double)m / (double)n;
        cs[2 * m] = cos(t);
        cs[2 * m + 1] = sin(t);
    }
    const double *in = j->in->data;
    double *out = j->out->data;
    int64_t is = j->in->strides[j->d], ii = inv ? j->in->strides[j->in_nd] : 0;
    int64_t os = j->out->strides[j->d], oi = inv ? 0 : j->out->strides[j->out_nd];
    for (int64_t b = 0; b < lines; b++) {
        const double *x = in + line_offset(j->in, j->in_nd, j->d, b);
        for (int64_t i = 0; i < kin; i++) {
            A[b * kin + i] = x[i * is];
            if (inv) A2[b * kin + i] = nyquist_or_dc(j, i) ? 0.0 : x[i * is + ii];
        }
    }
    for (int64_t c0 = 0; c0 < nout; c0 += cb) {
        int64_t cols = nout - c0 < cb ? nout - c0 : cb;
        for (int64_t c = 0; c < cols; c++) {
            int64_t step = c0 + c, p = 0; /* i (c0 + c) mod n */
            for (int64_t i = 0; i < kin; i++) {
                double w = inv && !nyquist_or_dc(j, i) ? 2.0 : 1.0;
                W[i * cols + c] = w * cs[2 * p];
                W2[i * cols + c] = -w * cs[2 * p + 1];
                p += step;
                if (p >= n) p -= n;
            }
        }
        /* cpu_gemm takes up to INT_MAX rows a call */
        for (int64_t r0 = 0; r0 < lines; r0 += INT32_MAX) {
            int64_t rows = lines - r0 < INT32_MAX ? lines - r0 : INT32_MAX;
            double *t = T + r0 * cols, *t2 = T2 + r0 * cols;
            const double *a = A + r0 * kin, *a2 = A2 + r0 * kin;
            if (kin == 0) {
                memset(t, 0, sizeof(double) * (size_t)(rows * cols));
                memset(t2, 0, sizeof(double) * (size_t)(rows * cols));
            } else if (!inv) {
                cpu_gemm(CN_F64, 0, 0, rows, cols, kin, a, kin, W, cols, 0.0, t, cols);
                cpu_gemm(CN_F64, 0, 0, rows, cols, kin, a, kin, W2, cols, 0.0, t2, cols);
            } else {
                cpu_gemm(CN_F64, 0, 0, rows, cols, kin, a, kin, W, cols, 0.0, t, cols);
                cpu_gemm(CN_F64, 0, 0, rows, cols, kin, a2, kin, W2, cols, 1.0, t, cols);
            }
        }
        for (int64_t b = 0; b < lines; b++) {
            double *y = out + line_offset(j->out, j->out_nd, j->d, b);
            for (int64_t c = 0; c < cols; c++) {
                y[(c0 + c) * os] = j->scale * T[b * cols + c];
                if (!inv)
                    y[(c0 + c) * os + oi] =
                        nyquist_or_dc(j, c0 + c) ? 0.0 : j->scale * T2[b * cols + c];
            }
        }
    }
    cn__free(cs);
    return CN_OK;
}

static void fft_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    const fft_job *j = ctx;
    char *buf = j->scratch + (size_t)chunk * j->chunk_bytes;
    for (int64_t b = begin; b < end; b++) {
        if (j->inverse)
            irfft_f32(j, j->plans[chunk], buf, b);
        else
            rfft_f32(j, j->plans[chunk], buf, b);
    }
}

/* rfft: in = x, out = [.., n / 2 + 1, .., 2]; irfft: in = [.., F, .., 2], out = [.., n, ..].
 * ints = dim, n, norm; reals[0] = the scale. The router checked kinds, dims and n (1 to
 * INT_MAX), and computed the output's shape. */
cn_status cpu_fft(const cn_kernel_args *a) {
    const char *op = cn_op_name(a->op);
    fft_job j = {.in = &a->in[0],
                 .out = &a->out[0],
                 .d = (int)a->ints[0],
                 .n = a->ints[1],
                 .scale = a->reals[0],
                 .inverse = a->op == CN_OP_IRFFT};
    j.f = j.n / 2 + 1;
    j.in_nd = j.inverse ? j.in->ndim - 1 : j.in->ndim;
    j.out_nd = j.inverse ? j.out->ndim : j.out->ndim - 1;
    j.lin = j.in->shape[j.d];
    int64_t lines = 1;
    for (int k = 0; k < j.out_nd; k++)
        if (k != j.d) lines *= j.out->shape[k];
    if (j.in->dtype == CN_F64) return fft_f64(&j, lines, op);
    /* ~5 n log2 n flops a line */
    double total = 5.0 * (double)j.n * (log2((double)j.n) + 1) * (double)lines;
    int64_t chunks = cpu_chunks(total > 0x1p62 ? INT64_MAX : (int64_t)total, CPU_PARALLEL_GRAIN);
    if (chunks > lines) chunks = lines;
    if (chunks < 1) chunks = 1;
    /* per chunk: n bins and a line of n complex values */
    j.chunk_bytes = ((size_t)j.n * 2 * sizeof(kiss_fft_cpx) + 63) & ~(size_t)63;
    cn_status s = CN_OK;
    j.scratch = cn__malloc(op, j.chunk_bytes * (size_t)chunks);
    j.plans = j.scratch ? cn__calloc(op, (size_t)chunks, sizeof *j.plans) : NULL;
    for (int64_t c = 0; j.plans && c < chunks; c++)
        if (!(j.plans[c] = plan_take(op, (int)j.n, j.inverse))) break;
    if (!j.plans || !j.plans[chunks - 1]) s = cn_last_status();
    if (s == CN_OK) cpu_parallel(lines, chunks, fft_chunk, &j);
    if (j.plans)
        for (int64_t c = 0; c < chunks; c++)
            plan_give(j.plans[c]);
    cn__free(j.plans);
    cn__free(j.scratch);
    return s;
}
