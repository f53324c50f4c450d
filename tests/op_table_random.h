/* The random ops of tests/test_op_table.c, checked by their statistics: their values cannot
 * match PyTorch's generator, so each draw is held to what its distribution says (range, mean,
 * variance, histogram or the share within one standard deviation), and to the generator's
 * contract (the same seed gives the same values, another seed others, and the generator
 * advances). Included once, by test_op_table.c. */
#ifndef CINDER_TESTS_OP_TABLE_RANDOM_H
#define CINDER_TESTS_OP_TABLE_RANDOM_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "harness.h"

/* ---- the random ops: statistics ------------------------------------------------------------ */

#define RAND_N      4096
#define RAND_SIGMAS 5.0

/* Draws n values with seed on dev (uniform when `normal` is 0), as doubles; NULL on failure. */
static double *draw(int normal, uint64_t seed, double a, double b, cn_dtype dt, cn_device dev,
                    cn_generator *gen_out) {
    cn_generator gen = cn_generator_new(seed);
    int64_t shape[2] = {RAND_N / 64, 64};
    cn_tensor *t = normal ? cn_rand_normal(&gen, shape, 2, a, b, dt, dev)
                          : cn_rand_uniform(&gen, shape, 2, a, b, dt, dev);
    if (gen_out) *gen_out = gen;
    if (!t) return NULL;
    int ok = cn_dtype_of(t) == dt && cn_numel(t) == RAND_N;
    double *v = th_values(t);
    cn_release(t);
    if (!ok) {
        free(v);
        return NULL;
    }
    return v;
}

static void check_within(const char *what, const char *stat, double got, double want,
                         double sigma) {
    if (!(fabs(got - want) <= RAND_SIGMAS * sigma)) {
        fprintf(stderr, "%s: %s %.6g, want %.6g +- %g\n", what, stat, got, want,
                RAND_SIGMAS * sigma);
        th_checks_failed++;
    }
}

/* Same seed: the same values; another seed: others; the generator advanced; another backend:
 * the CPU's values. */
static void check_stream(const char *what, int normal, double a, double b, cn_dtype dt,
                         cn_device dev, const double *v) {
    cn_generator gen;
    double *same = draw(normal, 1234, a, b, dt, dev, &gen);
    double *other = draw(normal, 4321, a, b, dt, dev, NULL);
    CHECK(same && other);
    if (same && other) {
        if (memcmp(v, same, sizeof(double) * RAND_N) != 0) {
            fprintf(stderr, "%s: the same seed gave other values\n", what);
            th_checks_failed++;
        }
        int differ = 0;
        for (int k = 0; k < RAND_N; k++)
            differ += v[k] != other[k];
        if (differ < RAND_N / 2) {
            fprintf(stderr, "%s: another seed gave %d of %d values the same\n", what,
                    RAND_N - differ, RAND_N);
            th_checks_failed++;
        }
        CHECK(gen.offset > 0);
    }
    if (dev.backend != CN_BACKEND_CPU) {
        double *cpu = draw(normal, 1234, a, b, dt, cn_cpu(), NULL);
        if (!cpu || memcmp(v, cpu, sizeof(double) * RAND_N) != 0) {
            fprintf(stderr, "%s: values differ from the CPU's for the same generator\n", what);
            th_checks_failed++;
        }
        free(cpu);
    }
    free(same);
    free(other);
}

/* Uniform in [-2, 3): every value in range; mean, variance and ten bins within five standard
 * errors of the uniform distribution's. */
static void check_rand_uniform(cn_device dev, const char *backend) {
    const double lo = -2, hi = 3, w = hi - lo;
    for (int k = 0; k < 2; k++) {
        cn_dtype dt = k ? CN_F32 : CN_F64;
        char what[96];
        snprintf(what, sizeof what, "op 'rand_uniform' on %s in %s", backend, cn_dtype_name(dt));
        double *v = draw(0, 1234, lo, hi, dt, dev, NULL);
        if (!v) {
            fprintf(stderr, "%s: failed (%s)\n", what, cn_last_error());
            th_checks_failed++;
            continue;
        }
        double sum = 0, sq = 0;
        int64_t bins[10] = {0}, out = 0;
        for (int i = 0; i < RAND_N; i++) {
            if (!(v[i] >= lo && v[i] < hi))
                out++;
            else
                bins[(int)((v[i] - lo) / w * 10) % 10]++;
            sum += v[i];
        }
        double mean = sum / RAND_N;
        for (int i = 0; i < RAND_N; i++)
            sq += (v[i] - mean) * (v[i] - mean);
        double var = sq / (RAND_N - 1), n = RAND_N;
        if (out) {
            fprintf(stderr, "%s: %lld values outside [%g, %g)\n", what, (long long)out, lo, hi);
            th_checks_failed++;
        }
        check_within(what, "mean", mean, (lo + hi) / 2, w / sqrt(12.0) / sqrt(n));
        /* var of the sample variance: (mu4 - sigma^4) / n, mu4 = w^4 / 80, sigma^4 = w^4 / 144 */
        check_within(what, "variance", var, w * w / 12, w * w * sqrt((1.0 / 80 - 1.0 / 144) / n));
        for (int b = 0; b < 10; b++)
            check_within(what, "bin count", (double)bins[b], n / 10, sqrt(n * 0.1 * 0.9));
        check_stream(what, 0, lo, hi, dt, dev, v);
        free(v);
    }
}

/* Normal(1.5, 2): mean, variance and the mass within one standard deviation within five standard
 * errors of the normal distribution's. */
static void check_rand_normal(cn_device dev, const char *backend) {
    const double mu = 1.5, sd = 2, p1 = 0.68268949213708585; /* erf(1 / sqrt 2) */
    for (int k = 0; k < 2; k++) {
        cn_dtype dt = k ? CN_F32 : CN_F64;
        char what[96];
        snprintf(what, sizeof what, "op 'rand_normal' on %s in %s", backend, cn_dtype_name(dt));
        double *v = draw(1, 1234, mu, sd, dt, dev, NULL);
        if (!v) {
            fprintf(stderr, "%s: failed (%s)\n", what, cn_last_error());
            th_checks_failed++;
            continue;
        }
        double sum = 0, sq = 0, n = RAND_N;
        int64_t within = 0, bad = 0;
        for (int i = 0; i < RAND_N; i++) {
            bad += !isfinite(v[i]);
            within += fabs(v[i] - mu) < sd;
            sum += v[i];
        }
        double mean = sum / n;
        for (int i = 0; i < RAND_N; i++)
            sq += (v[i] - mean) * (v[i] - mean);
        double var = sq / (n - 1);
        CHECK(bad == 0);
        check_within(what, "mean", mean, mu, sd / sqrt(n));
        /* var of the sample variance: 2 sigma^4 / (n - 1) */
        check_within(what, "variance", var, sd * sd, sd * sd * sqrt(2 / (n - 1)));
        check_within(what, "mass within one sd", (double)within / n, p1, sqrt(p1 * (1 - p1) / n));
        check_stream(what, 1, mu, sd, dt, dev, v);
        free(v);
    }
}

#endif
