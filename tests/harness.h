/* A small test harness: CHECK macros that record failures, a runner that also checks each test
 * leaves no live tensor behind, helpers to build tensors and read them back as doubles, and the
 * small helpers several tests share (a pool of tensors released together, deterministic values,
 * reading a file whole). One copy of each lives here; a test adds only what is its own. */
#ifndef CINDER_TESTS_HARNESS_H
#define CINDER_TESTS_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinder/cinder.h"

static int th_checks_failed;
static int th_tests_passed, th_tests_failed;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK(%s) failed (last error: %s)\n", __FILE__,   \
                    __LINE__, #cond, cn_last_error());                               \
            th_checks_failed++;                                                      \
        }                                                                            \
    } while (0)

/* |got - want| <= tol * max(1, |want|) */
#define CHECK_NEAR(got, want, tol)                                                   \
    do {                                                                             \
        double g_ = (double)(got), w_ = (double)(want);                              \
        double s_ = fabs(w_) > 1.0 ? fabs(w_) : 1.0;                                 \
        if (!(fabs(g_ - w_) <= (tol) * s_) && !(isnan(g_) && isnan(w_))) {           \
            fprintf(stderr, "%s:%d: %s = %.17g, want %.17g (tol %g)\n", __FILE__,       \
                    __LINE__, #got, g_, w_, (double)(tol));                          \
            th_checks_failed++;                                                      \
        }                                                                            \
    } while (0)

/* Checks an op failed with `status` and a message containing `needle`, then clears the error. */
#define CHECK_FAILS(expr, status, needle)                                            \
    do {                                                                             \
        cn_clear_error();                                                            \
        cn_tensor *r_ = (expr);                                                      \
        CHECK(r_ == NULL);                                                           \
        if (r_) cn_release(r_);                                                      \
        CHECK(cn_last_status() == (status));                                         \
        if (!strstr(cn_last_error(), (needle))) {                                    \
            fprintf(stderr, "%s:%d: message \"%s\" lacks \"%s\"\n", __FILE__, __LINE__,  \
                    cn_last_error(), (needle));                                      \
            th_checks_failed++;                                                      \
        }                                                                            \
        cn_clear_error();                                                            \
    } while (0)

/* Checks a status-returning call failed with `status` and a message containing needle. */
#define CHECK_STATUS_FAILS(expr, status, needle)                                                   \
    do {                                                                                           \
        cn_clear_error();                                                                          \
        cn_status s_ = (expr);                                                                     \
        CHECK(s_ == (status));                                                                     \
        CHECK(cn_last_status() == (status));                                                       \
        if (!strstr(cn_last_error(), (needle))) {                                                  \
            fprintf(stderr, "%s:%d: message \"%s\" lacks \"%s\"\n", __FILE__, __LINE__,            \
                    cn_last_error(), (needle));                                                    \
            th_checks_failed++;                                                                    \
        }                                                                                          \
        cn_clear_error();                                                                          \
    } while (0)

typedef void (*th_fn)(void);

/* CINDER_TEST_ONLY=a,b runs only the tests named (one at a time in their own processes, say, so
 * that a crash in one hides none of the others: scripts/gpu-check.sh does this). */
static inline int th_selected(const char *name) {
    const char *only = getenv("CINDER_TEST_ONLY");
    if (!only || !*only) return 1;
    size_t n = strlen(name);
    for (const char *p = only; (p = strstr(p, name)) != NULL; p += n)
        if ((p == only || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return 1;
    return 0;
}

static inline void th_run(const char *name, th_fn fn) {
    if (!th_selected(name)) return;
    int before = th_checks_failed;
    int64_t live = cn_live_tensors();
    cn_clear_error();
    fn();
    if (cn_live_tensors() != live) {
        fprintf(stderr, "%s: %lld tensors leaked\n", name,
                (long long)(cn_live_tensors() - live));
        th_checks_failed++;
    }
    if (th_checks_failed == before) {
        th_tests_passed++;
        printf("ok   %s\n", name);
    } else {
        th_tests_failed++;
        printf("FAIL %s\n", name);
    }
}

#define RUN(fn) th_run(#fn, fn)

static inline int th_finish(void) {
    printf("%d passed, %d failed\n", th_tests_passed, th_tests_failed);
    return th_tests_failed ? 1 : 0;
}

/* A tensor of `dtype` on the CPU from doubles (converted element by element). */
static inline cn_tensor *th_tensor(const double *v, const int64_t *shape, int ndim, cn_dtype dtype) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    cn_tensor *f64 = cn_from_data(v, shape, ndim, CN_F64, cn_cpu());
    if (dtype == CN_F64) return f64;
    cn_tensor *t = cn_cast(f64, dtype);
    cn_release(f64);
    (void)n;
    return t;
}

/* Reads any tensor as doubles into out (numel entries); returns numel, or -1 on error. */
static inline int64_t th_read(cn_tensor *t, double *out) {
    if (!t) return -1;
    cn_tensor *d = cn_cast(t, CN_F64);
    if (!d) return -1;
    int64_t n = cn_numel(d);
    cn_status s = cn_read(d, out, (size_t)n * sizeof(double));
    cn_release(d);
    return s == CN_OK ? n : -1;
}

/* Checks t's values against want (numel entries) within tol; releases nothing. */
static inline void th_check_values(const char *what, cn_tensor *t, const double *want, int64_t n,
                            double tol) {
    if (!t) {
        fprintf(stderr, "%s: tensor is NULL (%s)\n", what, cn_last_error());
        th_checks_failed++;
        return;
    }
    if (cn_numel(t) != n) {
        fprintf(stderr, "%s: numel %lld, want %lld\n", what, (long long)cn_numel(t),
                (long long)n);
        th_checks_failed++;
        return;
    }
    double *got = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (th_read(t, got) != n) {
        fprintf(stderr, "%s: read failed (%s)\n", what, cn_last_error());
        th_checks_failed++;
    } else {
        for (int64_t i = 0; i < n; i++) {
            double s = fabs(want[i]) > 1.0 ? fabs(want[i]) : 1.0;
            int both_nan = isnan(got[i]) && isnan(want[i]);
            int same_inf = isinf(got[i]) && got[i] == want[i];
            if (!both_nan && !same_inf && !(fabs(got[i] - want[i]) <= tol * s)) {
                fprintf(stderr, "%s[%lld] = %.17g, want %.17g\n", what, (long long)i, got[i],
                        want[i]);
                th_checks_failed++;
                break;
            }
        }
    }
    free(got);
}

/* Checks t's shape. */
static inline void th_check_shape(const char *what, cn_tensor *t, const int64_t *shape, int ndim) {
    if (!t || cn_ndim(t) != ndim || memcmp(cn_shape(t), shape, sizeof(int64_t) * ndim) != 0) {
        fprintf(stderr, "%s: wrong shape\n", what);
        th_checks_failed++;
    }
}

/* t's elements as doubles in the row-major order of its shape (whatever its strides), malloc'd
 * (the caller frees); when t is NULL or cannot be read, a recorded failure and NaNs. */
static inline double *th_values(cn_tensor *t) {
    int64_t n = t ? cn_numel(t) : 0;
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!t || th_read(t, v) != n) {
        fprintf(stderr, "th_values: cannot read (%s)\n", cn_last_error());
        th_checks_failed++;
        for (int64_t i = 0; i < n; i++)
            v[i] = NAN;
    }
    return v;
}

/* got against want element by element, within tol relative to max(1, |want|); the first few
 * differences are printed and counted as failed checks. */
static inline void th_check_close(const char *what, cn_tensor *got, cn_tensor *want, double tol) {
    CHECK(got && want);
    if (!got || !want) return;
    int64_t n = cn_numel(want);
    CHECK(cn_numel(got) == n);
    double *g = th_values(got), *w = th_values(want);
    int bad = 0;
    for (int64_t i = 0; i < n && bad < 3; i++) {
        double s = fabs(w[i]) > 1 ? fabs(w[i]) : 1;
        if (!(fabs(g[i] - w[i]) <= tol * s)) {
            fprintf(stderr, "%s[%lld] = %.17g, want %.17g\n", what, (long long)i, g[i], w[i]);
            bad++;
            th_checks_failed++;
        }
    }
    free(g);
    free(w);
}

/* n zeroed doubles (at least one, so that empty tensors need no special case); caller frees. */
static inline double *th_alloc_doubles(int64_t n) {
    return calloc((size_t)(n > 0 ? n : 1), sizeof(double));
}

/* Tensors made in a test, released together at its end by th_release_owned. */
static cn_tensor *th_owned[256];
static int th_n_owned;

static inline cn_tensor *th_own(cn_tensor *t) {
    if (t && th_n_owned < (int)(sizeof th_owned / sizeof *th_owned)) th_owned[th_n_owned++] = t;
    return t;
}

static inline void th_release_owned(void) {
    while (th_n_owned) cn_release(th_owned[--th_n_owned]);
}

/* The next value of a 64-bit LCG (Knuth's MMIX constants) at *state, as its top 31 bits. */
static inline uint64_t th_lcg(uint64_t *state) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return *state >> 33;
}

/* n values k/8 for k in [-16, 16] from the LCG at *state: exact in f32, so products and short
 * sums are too. */
static inline void th_fill_eighths(uint64_t *state, double *v, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)((int)(th_lcg(state) % 33) - 16) / 8.0;
}

/* The tolerance for results of exact inputs through short sums: f32 rounding, else f64's. */
static inline double th_tol_of(cn_dtype dt) { return dt == CN_F32 ? 1e-5 : 1e-12; }

/* A whole file in a malloc'd buffer, followed by a NUL (so a text file is a string); *n, unless
 * n is NULL, gets its size. NULL when it cannot be opened. */
static inline unsigned char *th_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    size_t want = size > 0 ? (size_t)size : 0, got = 0;
    unsigned char *buf = malloc(want + 1);
    if (buf) {
        got = fread(buf, 1, want, f);
        buf[got] = '\0';
    }
    fclose(f);
    if (n) *n = got;
    return buf;
}

#endif
