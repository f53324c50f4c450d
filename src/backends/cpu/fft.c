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
 * f64: kissfft has no double build, and computing f64 in float would lose 9 digits, so f64 is a
 * direct DFT in double: bin k sums x[j] (cos, -sin)(2 pi m / n) over j with m = j k mod n kept
 * exact by integer steps, from one table of n twiddles per call. O(n (n / 2 + 1)) per line:
 * ~1e-15 relative, for checks and short signals (ops.h says so, and points long ones to f32 or
 * CUDA). */
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
    const double *cs; /* f64: cos and sin of 2 pi m / n at [2m], [2m + 1] */
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

/* rfft, f64: the direct DFT in double. */
static void rfft_f64(const fft_job *j, char *buf, int64_t b) {
    const double *x = (const double *)j->in->data + line_offset(j->in, j->in_nd, j->d, b);
    double *y = (double *)j->out->data + line_offset(j->out, j->out_nd, j->d, b);
    int64_t xs = j->in->strides[j->d], ys = j->out->strides[j->d], n = j->n;
    int64_t m = j->lin < n ? j->lin : n;
    double *t = (double *)buf;
    for (int64_t i = 0; i < m; i++)
        t[i] = x[i * xs];
    for (int64_t k = 0; k < j->f; k++) {
        double re = 0, im = 0;
        int64_t p = 0; /* i k mod n */
        for (int64_t i = 0; i < m; i++) {
            re += t[i] * j->cs[2 * p];
            im -= t[i] * j->cs[2 * p + 1];
            p += k;
            if (p >= n) p -= n;
        }
        y[k * ys] = j->scale * re;
        y[k * ys + 1] = nyquist_or_dc(j, k) ? 0.0 : j->scale * im;
    }
}

/* irfft, f64: each sample sums bin 0, twice the real part of each bin that stands for two, and
 * the Nyquist bin once. */
static void irfft_f64(const fft_job *j, char *buf, int64_t b) {
    const double *z = (const double *)j->in->data + line_offset(j->in, j->in_nd, j->d, b);
    double *y = (double *)j->out->data + line_offset(j->out, j->out_nd, j->d, b);
    int64_t zs = j->in->strides[j->d], zi = j->in->strides[j->in_nd], ys = j->out->strides[j->d];
    int64_t n = j->n, f = j->f;
    double *re = (double *)buf, *im = re + f;
    for (int64_t k = 0; k < f; k++) {
        re[k] = k < j->lin ? z[k * zs] : 0.0;
        im[k] = k < j->lin && !nyquist_or_dc(j, k) ? z[k * zs + zi] : 0.0;
    }
    for (int64_t i = 0; i < n; i++) {
        double acc = re[0];
        int64_t p = 0; /* i k mod n */
        for (int64_t k = 1; k < f; k++) {
            p += i;
            if (p >= n) p -= n;
            double w = nyquist_or_dc(j, k) ? 1.0 : 2.0;
            acc += w * (re[k] * j->cs[2 * p] - im[k] * j->cs[2 * p + 1]);
        }
        y[i * ys] = j->scale * acc;
    }
}

static void fft_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    const fft_job *j = ctx;
    char *buf = j->scratch + (size_t)chunk * j->chunk_bytes;
    for (int64_t b = begin; b < end; b++) {
        if (j->in->dtype == CN_F32) {
            if (j->inverse)
                irfft_f32(j, j->plans[chunk], buf, b);
            else
                rfft_f32(j, j->plans[chunk], buf, b);
        } else if (j->inverse) {
            irfft_f64(j, buf, b);
        } else {
            rfft_f64(j, buf, b);
        }
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
    int f32 = j.in->dtype == CN_F32;
    /* work per line: ~5 n log2 n flops for the FFT, 2 n (n / 2 + 1) multiply-adds for the DFT */
    double work = f32 ? 5.0 * (double)j.n * (log2((double)j.n) + 1) : 2.0 * (double)j.n * j.f;
    double total = work * (double)lines;
    int64_t chunks = cpu_chunks(total > 0x1p62 ? INT64_MAX : (int64_t)total, CPU_PARALLEL_GRAIN);
    if (chunks > lines) chunks = lines;
    if (chunks < 1) chunks = 1;
    /* f32: n bins and a line of n complex values; f64: a line of n doubles, or 2 (n / 2 + 1) */
    j.chunk_bytes = f32 ? ((size_t)j.n * 2 * sizeof(kiss_fft_cpx) + 63) & ~(size_t)63
                        : ((size_t)(j.n + 2) * sizeof(double) + 63) & ~(size_t)63;
    cn_status s = CN_OK;
    double *cs = NULL;
    j.scratch = cn__malloc(op, j.chunk_bytes * (size_t)chunks);
    if (f32) {
        j.plans = j.scratch ? cn__calloc(op, (size_t)chunks, sizeof *j.plans) : NULL;
        for (int64_t c = 0; j.plans && c < chunks; c++)
            if (!(j.plans[c] = plan_take(op, (int)j.n, j.inverse))) break;
        if (!j.plans || !j.plans[chunks - 1]) s = cn_last_status();
    } else if (j.scratch) {
        /* m / n in [0, 1): the angles 2 pi m / n, each rounded once */
        cs = cn__malloc(op, sizeof(double) * 2 * (size_t)j.n);
        for (int64_t m = 0; cs && m < j.n; m++) {
            double t = 2.0 * PI * (double)m / (double)j.n;
            cs[2 * m] = cos(t);
            cs[2 * m + 1] = sin(t);
        }
        j.cs = cs;
        if (!cs) s = cn_last_status();
    }
    if (!j.scratch) s = cn_last_status();
    if (s == CN_OK) cpu_parallel(lines, chunks, fft_chunk, &j);
    if (j.plans)
        for (int64_t c = 0; c < chunks; c++)
            plan_give(j.plans[c]);
    cn__free(j.plans);
    cn__free(cs);
    cn__free(j.scratch);
    return s;
}
