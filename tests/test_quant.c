/* Quantized tensors (issue 19, cinder/quant.h): the four schemes by hand (ggml's Q8_0 and Q4_0
 * rounding, PyTorch's ties to even for the per-tensor / per-channel int8), round trips against a
 * double-precision bound, the packed layout through cn_quant_parts, views that keep blocks
 * whole, transfers, printing, safetensors round trips bit for bit, and every misuse: a clear
 * status and message, the inputs untouched and nothing leaked. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "harness.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static const cn_dtype schemes[4] = {CN_Q8_TENSOR, CN_Q8_CHANNEL, CN_Q8_BLOCK, CN_Q4_BLOCK};

/* The packed bytes and the scales of q, read through cn_quant_parts (sizes in *nv, *ns). */
static void parts_of(cn_tensor *q, uint8_t *v, int64_t *nv, uint8_t *s, int64_t *ns) {
    cn_tensor *values = NULL, *scales = NULL;
    CHECK(cn_quant_parts(q, &values, &scales) == CN_OK);
    if (!values || !scales) return;
    *nv = cn_numel(values);
    *ns = cn_numel(scales) * (int64_t)cn_dtype_size(cn_dtype_of(scales));
    CHECK(cn_read(values, v, (size_t)*nv) == CN_OK);
    CHECK(cn_read(scales, s, (size_t)*ns) == CN_OK);
    cn_release(values);
    cn_release(scales);
}

/* got and want (both made here, released here) hold the same values, exactly. */
static void check_same(const char *what, cn_tensor *got, cn_tensor *want) {
    CHECK(got && want);
    if (got && want) {
        CHECK(cn_numel(got) == cn_numel(want));
        double *w = th_values(want);
        th_check_values(what, got, w, cn_numel(want), 0);
        free(w);
    }
    cn_release(got);
    cn_release(want);
}

static uint16_t half_bits(const uint8_t *s, int i) { return (uint16_t)(s[2 * i] | s[2 * i + 1] << 8); }

/* IEEE half to double, by the definition (independent of the library's conversion). */
static double half_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

/* ---- the schemes by hand --------------------------------------------------------------------- */

/* One block of 32 with amax 127: d = 1 exactly (f16 0x3c00), id = 1, and q = roundf(x): ties go
 * away from zero (0.5 -> 1, -0.5 -> -1, 2.5 -> 3), as ggml's quantize_row_q8_0_ref. */
static void test_q8_block_by_hand(void) {
    cn_scope_begin();
    double x[32] = {127, -127, 0.5, -0.5, 1.5, 2.5, -2.5, 0.49, -0.51, 3.2, 100.5};
    const int8_t want[11] = {127, -127, 1, -1, 2, 3, -3, 0, -1, 3, 101};
    const int64_t s[2] = {1, 32};
    cn_tensor *q = cn_quantize(th_tensor(x, s, 2, CN_F32), CN_Q8_BLOCK);
    CHECK(q && cn_dtype_of(q) == CN_Q8_BLOCK && cn_kind_of(q) == CN_KIND_QUANTIZED);
    th_check_shape("q8_block shape", q, s, 2);
    uint8_t v[64], sc[8];
    int64_t nv = 0, ns = 0;
    parts_of(q, v, &nv, sc, &ns);
    CHECK(nv == 32 && ns == 2);
    for (int i = 0; i < 11; i++) CHECK((int8_t)v[i] == want[i]);
    for (int i = 11; i < 32; i++) CHECK(v[i] == 0);
    CHECK(half_bits(sc, 0) == 0x3c00);
    double deq[32] = {0};
    for (int i = 0; i < 11; i++) deq[i] = want[i];
    th_check_values("q8_block dequantized", cn_dequantize(q, CN_F64), deq, 32, 0);
    /* amax 1: d = 1/127 in f32 (0.0078740157), stored as f16 0x2008 (2^-7 + 8 * 2^-17, the
     * nearest half: 0.0078740157 - 2^-7 = 8.06 steps of 2^-17), and q = roundf(x * 127) */
    double y[32] = {1, -1, 0.5};
    cn_tensor *q2 = cn_quantize(th_tensor(y, s, 2, CN_F32), CN_Q8_BLOCK);
    parts_of(q2, v, &nv, sc, &ns);
    CHECK(half_bits(sc, 0) == 0x2008);
    CHECK((int8_t)v[0] == 127 && (int8_t)v[1] == -127 && (int8_t)v[2] == 64); /* 63.5 -> 64 */
    double want2[32] = {127 * half_value(0x2008), -127 * half_value(0x2008),
                        64 * half_value(0x2008)};
    th_check_values("q8_block f16 scale", cn_dequantize(q2, CN_F64), want2, 32, 0);
    cn_scope_end();
}

/* Per tensor and per channel: scale = amax / 127, q = nearbyint(x / scale), ties to even as
 * PyTorch's quantize_per_tensor (0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -2.5 -> -2). */
static void test_q8_tensor_and_channel_by_hand(void) {
    cn_scope_begin();
    const double x[8] = {127, 0.5, 1.5, 2.5, -2.5, -0.5, 3.5, -127};
    const int8_t want[8] = {127, 0, 2, 2, -2, 0, 4, -127};
    const int64_t s[2] = {2, 4};
    cn_tensor *q = cn_quantize(th_tensor(x, s, 2, CN_F64), CN_Q8_TENSOR);
    uint8_t v[8], sc[8];
    int64_t nv = 0, ns = 0;
    parts_of(q, v, &nv, sc, &ns);
    CHECK(nv == 8 && ns == 4);
    for (int i = 0; i < 8; i++) CHECK((int8_t)v[i] == want[i]);
    float scale;
    memcpy(&scale, sc, 4);
    CHECK(scale == 1.0f);
    /* per channel: row 0 amax 127 (scale 1), row 1 amax 254 (scale 2: 2.5 / 2 = 1.25 -> 1,
     * -5 / 2 = -2.5 -> -2, 1 / 2 = 0.5 -> 0, -254 / 2 -> -127) */
    const double y[8] = {127, 0.5, 1.5, 2.5, 2.5, -5, 1, -254};
    const int8_t want_c[8] = {127, 0, 2, 2, 1, -2, 0, -127};
    cn_tensor *qc = cn_quantize(th_tensor(y, s, 2, CN_F32), CN_Q8_CHANNEL);
    parts_of(qc, v, &nv, sc, &ns);
    CHECK(nv == 8 && ns == 8);
    for (int i = 0; i < 8; i++) CHECK((int8_t)v[i] == want_c[i]);
    float sc2[2];
    memcpy(sc2, sc, 8);
    CHECK(sc2[0] == 1.0f && sc2[1] == 2.0f);
    const double deq[8] = {127, 0, 2, 2, 2, -4, 0, -254};
    th_check_values("q8_channel dequantized", cn_dequantize(qc, CN_F64), deq, 8, 0);
    /* an all-zero tensor: scale 0, values 0 */
    const double z[4] = {0};
    const int64_t s4[1] = {4};
    th_check_values("zeros", cn_dequantize(cn_quantize(th_tensor(z, s4, 1, CN_F32), CN_Q8_TENSOR),
                                           CN_F32), z, 4, 0);
    cn_scope_end();
}

/* Q4_0: m = the element of largest magnitude with its sign, d = m / -8, q = min(15, (int)(x / d +
 * 8.5)) - 8. With m = -8: d = 1, so x -> floor(x + 8.5) - 8 (ties up: 0.5 -> 1, -0.5 -> 0,
 * -2.5 -> -2), 7.9 -> 16 clamped to 15 (q = 7). With m = +8: d = -1 (x = 8 -> q = -8, value 8).
 * Element 2j is the low nibble of byte j, as q + 8. */
static void test_q4_block_by_hand(void) {
    cn_scope_begin();
    double x[64] = {-8, 7, 0.5, -0.5, 1.49, 1.5, -1.5, -2.5, 7.9, 3};
    double y[32] = {8, -7, 0.5, -0.5, 2.5};
    for (int i = 0; i < 32; i++) x[32 + i] = y[i];
    const int want[10] = {-8, 7, 1, 0, 1, 2, -1, -2, 7, 3};
    const int want_y[5] = {-8, 7, 0, 1, -2}; /* x / -1 + 8.5: 0.5 -> 8 (0), -0.5 -> 9 (1) */
    const int64_t s[2] = {2, 32};
    cn_tensor *q = cn_quantize(th_tensor(x, s, 2, CN_F32), CN_Q4_BLOCK);
    uint8_t v[32], sc[8];
    int64_t nv = 0, ns = 0;
    parts_of(q, v, &nv, sc, &ns);
    CHECK(nv == 32 && ns == 4);
    for (int i = 0; i < 10; i++) {
        int nib = i & 1 ? v[i / 2] >> 4 : v[i / 2] & 15;
        CHECK(nib - 8 == want[i]);
    }
    for (int i = 0; i < 5; i++) {
        int nib = i & 1 ? v[16 + i / 2] >> 4 : v[16 + i / 2] & 15;
        CHECK(nib - 8 == want_y[i]);
    }
    CHECK(half_bits(sc, 0) == 0x3c00 && half_bits(sc, 1) == 0xbc00); /* 1 and -1 */
    /* elements beyond the hand cases are 0: 0 / d + 8.5 -> 8, q = 0 */
    double deq[64] = {0};
    for (int i = 0; i < 10; i++) deq[i] = want[i];
    for (int i = 0; i < 5; i++) deq[32 + i] = -want_y[i];
    th_check_values("q4_block dequantized", cn_dequantize(q, CN_F64), deq, 64, 0);
    cn_scope_end();
}

/* ---- round trips against the bound ----------------------------------------------------------- */

/* x of shape [6, 96] from a fixed generator; every scheme's dequantized values within the stated
 * bound of x, computed in double from the stored scales: scale / 2 (q8 with f32 scales), and for
 * the blocks (scales computed in f32 and stored as f16, as ggml) |s16| / 2 + |q| * |d - s16|
 * (q4: an element clipped to q = 7 is |x - 7 s16| away, up to a full step). */
static void test_round_trip_within_bound(void) {
    cn_scope_begin();
    enum { R = 6, C = 96, N = R * C };
    double x[N];
    uint64_t st = 7;
    for (int i = 0; i < N; i++) {
        x[i] = ((double)th_lcg(&st) / 2147483648.0 - 0.5) * (1 + i % 7);
        x[i] = (float)x[i]; /* the input is f32: the bound is about its values */
    }
    const int64_t s[2] = {R, C};
    cn_tensor *xt = th_tensor(x, s, 2, CN_F32);
    for (int k = 0; k < 4; k++) {
        cn_tensor *q = cn_quantize(xt, schemes[k]);
        double *got = th_values(cn_dequantize(q, CN_F64));
        int group = schemes[k] == CN_Q8_TENSOR ? N : schemes[k] == CN_Q8_CHANNEL ? C : 32;
        double worst = 0;
        for (int g = 0; g < N / group; g++) {
            float amax = 0, m = 0;
            for (int j = 0; j < group; j++)
                if (fabsf((float)x[g * group + j]) > amax)
                    amax = fabsf((float)x[g * group + j]), m = (float)x[g * group + j];
            float d = schemes[k] == CN_Q4_BLOCK ? m / -8.0f : amax / 127.0f;
            double stored = d, extra = 0;
            if (schemes[k] == CN_Q8_BLOCK || schemes[k] == CN_Q4_BLOCK) {
                /* the nearest half (binary search is overkill: round through the definition) */
                int e;
                frexp(fabs(d), &e);
                double ulp = ldexp(1, e - 11 > -24 ? e - 11 : -24);
                stored = nearbyint(d / ulp) * ulp;
                extra = (schemes[k] == CN_Q4_BLOCK ? 8 : 127) * fabs(d - stored);
            }
            for (int j = 0; j < group; j++) {
                int i = g * group + j;
                double err = fabs(got[i] - x[i]), bound = fabs(stored) / 2 + extra + 1e-7 * fabs(x[i]);
                /* Q4_0 clips q at 7: an element of the sign opposite to m's, of magnitude above
                 * 7.5 |d|, lands on 7 d, up to a full step away */
                if (schemes[k] == CN_Q4_BLOCK && x[i] / d > 7.5)
                    bound = fabs(x[i] - 7 * stored) + extra + 1e-7 * fabs(x[i]);
                if (err > bound) {
                    fprintf(stderr, "%s element %d: |%g - %g| > %g\n", cn_dtype_name(schemes[k]), i,
                            got[i], x[i], bound);
                    th_checks_failed++;
                    g = N;
                    break;
                }
                if (err > worst) worst = err;
            }
        }
        printf("     %s: worst error %.3g\n", cn_dtype_name(schemes[k]), worst);
        free(got);
        /* f32 dequantization is the f64 one rounded once */
        double *g32 = th_values(cn_dequantize(q, CN_F32)), *g64 = th_values(cn_dequantize(q, CN_F64));
        for (int i = 0; i < N; i++) CHECK(g32[i] == (double)(float)g64[i]);
        free(g32);
        free(g64);
    }
    cn_scope_end();
}

/* ---- views, transfers, printing ----------------------------------------------------------------- */

static void test_views_keep_blocks(void) {
    cn_scope_begin();
    enum { R = 4, C = 64 };
    double x[R * C];
    for (int i = 0; i < R * C; i++) x[i] = sin(i * 0.37) * (1 + i / 64);
    const int64_t s[2] = {R, C};
    cn_tensor *xt = th_tensor(x, s, 2, CN_F32);
    for (int k = 0; k < 4; k++) {
        cn_tensor *q = cn_quantize(xt, schemes[k]);
        cn_tensor *full = cn_dequantize(q, CN_F64);
        /* rows 1..3 (a slice along the outer dim) */
        cn_tensor *rows = cn_slice(q, 0, 1, 3, 1);
        CHECK(rows && cn_dtype_of(rows) == schemes[k]);
        check_same("slice rows", cn_dequantize(rows, CN_F64), cn_contiguous(cn_slice(full, 0, 1, 3, 1)));
        /* every other row */
        cn_tensor *odd = cn_slice(q, 0, 1, 4, 2);
        check_same("slice step 2", cn_dequantize(odd, CN_F64), cn_contiguous(cn_slice(full, 0, 1, 4, 2)));
        /* reshape keeping the last dim, and a 3-D view */
        const int64_t s3[3] = {2, 2, C};
        cn_tensor *r3 = cn_reshape(q, s3, 3);
        th_check_shape("reshape", r3, s3, 3);
        check_same("reshape", cn_dequantize(r3, CN_F64), cn_contiguous(full));
        if (schemes[k] == CN_Q8_BLOCK || schemes[k] == CN_Q4_BLOCK) {
            /* [8, 32] keeps the blocks too; [64, 4], a transpose or a cut inside a block do not */
            const int64_t s832[2] = {8, 32}, s644[2] = {64, 4};
            CHECK(cn_reshape(q, s832, 2) != NULL);
            CHECK_FAILS(cn_reshape(q, s644, 2), CN_ERR_INVALID_ARG, "not a multiple of 32");
            CHECK_FAILS(cn_transpose(q, 0, 1), CN_ERR_INVALID_ARG, "blocks of 32");
            CHECK_FAILS(cn_slice(q, 1, 16, 64, 1), CN_ERR_INVALID_ARG, "would split them");
            CHECK_FAILS(cn_slice(q, 1, 0, 64, 2), CN_ERR_INVALID_ARG, "not contiguous");
            CHECK_FAILS(cn_unsqueeze(q, 2), CN_ERR_INVALID_ARG, "cn_dequantize");
            CHECK(cn_slice(q, 1, 32, 64, 1) != NULL); /* the second block of each row */
        } else {
            /* any view: a scale follows its element */
            cn_tensor *tq = cn_transpose(q, 0, 1);
            check_same("transpose", cn_dequantize(tq, CN_F64), cn_contiguous(cn_transpose(full, 0, 1)));
            CHECK_FAILS(cn_contiguous(tq), CN_ERR_INVALID_ARG, "never copied");
            const int64_t flat[1] = {R * C};
            CHECK_FAILS(cn_reshape(tq, flat, 1), CN_ERR_INVALID_ARG, "cn_dequantize it");
        }
        /* transfers: onto the autodiff device (shared, untracked) and back */
        cn_tensor *ad = cn_to_device(q, cn_autodiff(cn_cpu()));
        CHECK(ad && !cn_requires_grad(ad) && cn_dtype_of(ad) == schemes[k]);
        check_same("to autodiff", cn_dequantize(cn_to_device(ad, cn_cpu()), CN_F64), cn_contiguous(full));
    }
    th_release_owned();
    cn_scope_end();
}

static void test_printing(void) {
    cn_scope_begin();
    const double x[32] = {127, -1, 2.5};
    const int64_t s[1] = {32};
    cn_tensor *q = cn_quantize(th_tensor(x, s, 1, CN_F32), CN_Q8_BLOCK);
    char buf[512];
    CHECK(strcmp(cn_tensor_str(q, buf, sizeof buf), "[32] q8_block cpu:0") == 0);
    CHECK(cn_format(q, buf, sizeof buf) > 0);
    if (strstr(buf, "tensor([127.,  -1.,   3.,   0.,") != buf) { /* 2.5 -> 3 (ties away) */
        fprintf(stderr, "printed: %s\n", buf);
        th_checks_failed++;
    }
    CHECK(strstr(buf, "dtype=q8_block") != NULL);
    cn_scope_end();
}

/* ---- files ------------------------------------------------------------------------------------ */

static void test_safetensors_bit_identical(void) {
    cn_scope_begin();
    enum { R = 3, C = 64 };
    double x[R * C];
    for (int i = 0; i < R * C; i++) x[i] = (float)(cos(i * 0.11) * (i % 5 + 1)); /* f32 values */
    const int64_t s[2] = {R, C};
    cn_tensor *xt = th_tensor(x, s, 2, CN_F32);
    cn_tensor *t[6];
    const char *names[6] = {"a.tensor", "b.channel", "c.block", "d.q4", "e.float", "f.rows"};
    for (int k = 0; k < 4; k++) t[k] = cn_quantize(xt, schemes[k]);
    t[4] = xt;
    t[5] = cn_slice(t[3], 0, 1, 3, 1); /* a view: saved as its own rows */
    char path[64];
    snprintf(path, sizeof path, "/tmp/cinder_test_quant_%d.safetensors", (int)getpid());
    const char *keys[1] = {"note"}, *vals[1] = {"kept"};
    CHECK(cn_safetensors_save_metadata(path, names, t, 6, keys, vals, 1) == CN_OK);
    cn_safetensors *h = NULL;
    CHECK(cn_safetensors_load(path, cn_cpu(), &h) == CN_OK);
    if (h) {
        CHECK(strcmp(cn_safetensors_metadata(h, "note"), "kept") == 0);
        CHECK(strcmp(cn_safetensors_metadata(h, "cinder.quant.d.q4"), "q4_block") == 0);
        for (int k = 0; k < 6; k++) {
            cn_tensor *back = cn_safetensors_get(h, names[k]);
            CHECK(back && cn_dtype_of(back) == cn_dtype_of(t[k]));
            if (!back) continue;
            th_check_shape("reloaded shape", back, cn_shape(t[k]), cn_ndim(t[k]));
            if (k == 4) {
                th_check_values("float", back, x, R * C, 0);
            } else {
                uint8_t v0[R * C], v1[R * C], s0[64], s1[64];
                int64_t nv0 = 0, nv1 = 0, ns0 = 0, ns1 = 0;
                parts_of(t[k], v0, &nv0, s0, &ns0);
                parts_of(back, v1, &nv1, s1, &ns1);
                CHECK(nv0 == nv1 && ns0 == ns1 && !memcmp(v0, v1, (size_t)nv0) &&
                      !memcmp(s0, s1, (size_t)ns0));
            }
            cn_release(back);
        }
        cn_safetensors_free(h);
    }
    remove(path);
    /* a strided per-tensor view cannot be written as parts */
    cn_tensor *tq = cn_transpose(t[0], 0, 1);
    const char *one[1] = {"w"};
    CHECK_STATUS_FAILS(cn_safetensors_save(path, one, &tq, 1), CN_ERR_INVALID_ARG,
                       "not contiguous");
    CHECK(access(path, F_OK) != 0);
    cn_scope_end();
}

/* ---- the quantized linear ------------------------------------------------------------------- */

/* x [M, K] and the float weight [N, K] in double; the weight quantized with scheme; y =
 * cn_quant_linear(x, wq, bias) against the product of x and the dequantized weight in double.
 * The bound is the activation quantization error the kernel adds: x is quantized per row (every
 * scheme) with step dx = amax / 127 and rounding error <= dx / 2 per element, so
 * |y - y_ref| <= dx / 2 * sum_k |Wq[n, k]| (plus f32 rounding: 1e-5 of sum |x W|).
 * The kernel's own arithmetic error is checked too: against the double evaluation of the same
 * products (x quantized here as the kernel does, in f32: dx = amax / 127, q = roundf(x * (1 /
 * dx))), the result is within 1e-5 of the sum of |dx q W| (f32 accumulation).
 * The results of every ISA path are returned in *out (M * N) for comparison, with each output's
 * sum of |x W| in *mag_out (when not NULL). The worst errors seen are kept in worst[0] (against
 * the exact product, as a fraction of the bound) and worst[1] (against the same int8 products,
 * as a fraction of the sum of |dx q W|) when worst is not NULL. */
static void check_linear(cn_dtype scheme, int64_t M, int64_t N, int64_t K, int with_bias,
                         uint64_t seed, float *out, double *mag_out, double *worst) {
    double *x = th_alloc_doubles(M * K), *w = th_alloc_doubles(N * K), *bias = th_alloc_doubles(N);
    for (int64_t i = 0; i < M * K; i++)
        x[i] = (float)(((double)th_lcg(&seed) / 2147483648.0 - 0.5) * 4);
    for (int64_t i = 0; i < N * K; i++)
        w[i] = ((double)th_lcg(&seed) / 2147483648.0 - 0.5) * (1 + i % 3);
    for (int64_t i = 0; i < N; i++) bias[i] = (float)(i * 0.25 - 1);
    const int64_t xs[2] = {M, K}, ws[2] = {N, K}, bs[1] = {N};
    cn_tensor *xt = th_tensor(x, xs, 2, CN_F32), *wt = th_tensor(w, ws, 2, CN_F32);
    cn_tensor *bt = with_bias ? th_tensor(bias, bs, 1, CN_F32) : NULL;
    cn_tensor *wq = cn_quantize(wt, scheme);
    double *wd = th_values(cn_dequantize(wq, CN_F64));
    cn_tensor *y = cn_quant_linear(xt, wq, bt);
    CHECK(y != NULL);
    double *got = y ? th_values(y) : NULL;
    const int64_t per = K; /* the activations' scales: one a row */
    for (int64_t m = 0; got && m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double ref = with_bias ? bias[n] : 0, bound = 1e-6, mag = 0;
            double ref_q = ref, mag_q = 0;
            for (int64_t g = 0; g * per < K || (K == 0 && g == 0); g++) {
                int64_t k1 = (g + 1) * per < K ? (g + 1) * per : K;
                float amax = 0;
                for (int64_t k = g * per; k < k1; k++) amax = fmaxf(amax, fabsf((float)x[m * K + k]));
                double dx = amax / 127.0f;
                float id = amax / 127.0f != 0.0f ? 1.0f / (amax / 127.0f) : 0.0f;
                for (int64_t k = g * per; k < k1; k++) {
                    float r = roundf((float)x[m * K + k] * id);
                    double q = r > 127 ? 127 : r < -127 ? -127 : r;
                    ref_q += q * dx * wd[n * K + k];
                    mag_q += fabs(q * dx * wd[n * K + k]);
                    ref += x[m * K + k] * wd[n * K + k];
                    bound += dx / 2 * fabs(wd[n * K + k]);
                    mag += fabs(x[m * K + k] * wd[n * K + k]);
                }
                if (K == 0) break;
            }
            bound += 1e-5 * mag;
            double err = fabs(got[m * N + n] - ref);
            double err_q = fabs(got[m * N + n] - ref_q);
            if (worst && err / bound > worst[0]) worst[0] = err / bound;
            if (worst && err_q / (mag_q + 1e-30) > worst[1]) worst[1] = err_q / (mag_q + 1e-30);
            if (mag_out) mag_out[m * N + n] = mag;
            if (!(err <= bound) || !(err_q <= 1e-5 * mag_q + 1e-6)) {
                fprintf(stderr,
                        "%s [%lld, %lld, %lld] (%s) y[%lld, %lld] = %.9g, want %.9g "
                        "within %.3g (the same int8 products: %.9g within %.3g)\n",
                        cn_dtype_name(scheme), (long long)M, (long long)N, (long long)K,
                        cn_cpu_quant_isa(), (long long)m, (long long)n, got[m * N + n], ref, bound,
                        ref_q, 1e-5 * mag_q + 1e-6);
                th_checks_failed++;
                m = M;
                break;
            }
            if (out) out[m * N + n] = (float)got[m * N + n];
        }
    free(got);
    free(wd);
    free(x);
    free(w);
    free(bias);
    cn_release(y);
    cn_release(wq);
}

/* Every scheme on every ISA path this CPU has (CINDER_QUANT_ISA forces the narrower ones), at odd
 * sizes: N and K not multiples of the vector width nor of the VNNI tiles (48 columns x 16-64
 * rows; K a multiple of 32 for the blocks), one row (the decode case), 1-5 rows (the VNNI row
 * kernel, whole groups of 16 blocks and a partial one) and 6 or more (its broadcast kernel: 1-4
 * groups of 16 rows a tile, partial groups: 6, 17, 33, 65; two units of 128 rows: 136), K up to
 * 4096, products big
 * enough to run on the pool's threads. The paths agree: exactly for q8_tensor / q8_channel (the
 * int dots are exact and scaled alike), within f32 rounding of the block sums (1e-5 of the sum of
 * |x W|) for the blocks. The worst error against the double reference, as a fraction of the
 * bound, is printed per scheme. */
#define NSIZES 16
static void test_linear_every_isa(void) {
    cn_scope_begin();
    const char *isas[4] = {"c", "avx2", "vnni", "amx"};
    /* the last two for AMX's unpacking of the next panel's weight rows while a panel runs (units of
     * 4 blocks): 5 and 7 blocks a row (a partial unit), a partial last panel, several panels a
     * chunk, on one thread (6 x 40) and on the pool's (33 x 580: more panels than chunks) */
    const int64_t sizes[NSIZES][3] = {{1, 7, 64},    {5, 13, 96},   {3, 33, 160},  {4, 300, 256},
                                      {2, 1, 32},    {17, 50, 64},  {64, 33, 32},  {65, 20, 4096},
                                      {1, 50, 4096}, {3, 49, 4096}, {4, 97, 32},   {65, 16, 96},
                                      {2, 19, 608},  {6, 40, 160},  {33, 580, 224},
                                      {136, 53, 96}};
    const int64_t row_k[NSIZES] = {37,   100,  1,  64, 333, 64,  32,  4096,
                                   4096, 4095, 31, 97, 600, 150, 223, 95};
    float *res[4];
    double *mag = malloc(sizeof(double) * 65 * 300), worst[4][2] = {{0}};
    for (int i = 0; i < 4; i++)
        res[i] = malloc(sizeof(float) * 65 * 300);
    for (int k = 0; k < 4; k++)
        for (int z = 0; z < NSIZES; z++) {
            int64_t M = sizes[z][0], N = sizes[z][1];
            int64_t K = schemes[k] == CN_Q8_BLOCK || schemes[k] == CN_Q4_BLOCK ? sizes[z][2]
                                                                                : row_k[z];
            int ran[4] = {0};
            for (int i = 0; i < 4; i++) {
                setenv("CINDER_QUANT_ISA", isas[i], 1);
                if (strcmp(cn_cpu_quant_isa(), isas[i]) != 0) continue; /* the CPU lacks it */
                ran[i] = 1;
                check_linear(schemes[k], M, N, K, z % 2, 11 + (uint64_t)z, res[i], mag, worst[k]);
            }
            /* AMX (from 16 rows) and the AVX2 tiles (from 4) compute the same int32 dots as the
             * VNNI tile kernel (from 6) and scale them in the same order: the same bits */
            int blocks = schemes[k] == CN_Q8_BLOCK || schemes[k] == CN_Q4_BLOCK;
            for (int i = 1; i < 4; i += 2) {
                if (!ran[2] || !ran[i] || (i == 1 && (!blocks || M < 6))) continue;
                for (int64_t e = 0; e < M * N; e++)
                    if (memcmp(&res[2][e], &res[i][e], sizeof(float)) != 0) {
                        fprintf(stderr, "%s [%lld, %lld, %lld]: %s %.9g vs vnni %.9g at %lld\n",
                                cn_dtype_name(schemes[k]), (long long)M, (long long)N,
                                (long long)K, isas[i], res[i][e], res[2][e], (long long)e);
                        th_checks_failed++;
                        break;
                    }
            }
            for (int i = 1; i < 4; i++) {
                if (!ran[i] || !ran[0]) continue;
                for (int64_t e = 0; e < M * N; e++) {
                    double a = res[0][e], b = res[i][e];
                    int same = schemes[k] == CN_Q8_BLOCK || schemes[k] == CN_Q4_BLOCK
                                   ? fabs(a - b) <= 1e-5 * mag[e] + 1e-30
                                   : a == b;
                    if (!same) {
                        fprintf(stderr, "%s: %s %.9g vs c %.9g at %lld\n",
                                cn_dtype_name(schemes[k]), isas[i], b, a, (long long)e);
                        th_checks_failed++;
                        break;
                    }
                }
            }
            if (k == 0 && z == 0)
                printf("     paths run here: c%s%s%s\n", ran[1] ? ", avx2" : "",
                       ran[2] ? ", vnni" : "", ran[3] ? ", amx" : "");
        }
    unsetenv("CINDER_QUANT_ISA");
    for (int k = 0; k < 4; k++)
        printf("     %s: worst error %.3g of the bound; against the same int8 products, %.3g of "
               "the sum of |dx q W|\n",
               cn_dtype_name(schemes[k]), worst[k][0], worst[k][1]);
    for (int i = 0; i < 4; i++) free(res[i]);
    free(mag);
    cn_scope_end();
}

/* Values at the ends of the int8 range on every ISA path: rows of x all +1, all -1 or +-1
 * alternating (each quantizes to +-127), weight rows all +1, all -1, alternating, or ramps, so
 * the q4 nibbles sit at 0 and 15 and every sum the kernels keep in int16 (the AVX2 tiles' q4
 * blocks: up to 30480) is at its largest. Against the double product of x and the dequantized
 * weight (x is exact after quantization), within 1e-5 of the sum of |x w|; 1 row (the row
 * kernels) and 9 (the tiles, and a partial one). */
static void test_linear_extremes_every_isa(void) {
    cn_scope_begin();
    const char *isas[4] = {"c", "avx2", "vnni", "amx"};
    const cn_dtype blk[3] = {CN_Q8_BLOCK, CN_Q4_BLOCK, CN_Q8_CHANNEL};
    enum { M = 9, N = 20, K = 256 };
    static double x[M * K], w[N * K], wd[N * K], want[M * N], mag[M * N];
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++)
            x[m * K + k] = m % 3 == 0 ? 1.0 : m % 3 == 1 ? -1.0 : (k % 2 ? -1.0 : 1.0);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            w[n * K + k] = n % 4 == 0   ? 1.0
                           : n % 4 == 1 ? -1.0
                           : n % 4 == 2 ? (k % 2 ? 1.0 : -1.0)
                                        : (double)(k % 32) / 31.0 - 0.5;
    const int64_t xs[2] = {M, K}, ws[2] = {N, K}, x1[2] = {1, K};
    for (int s = 0; s < 3; s++) {
        cn_tensor *wq = cn_quantize(th_tensor(w, ws, 2, CN_F32), blk[s]);
        cn_tensor *deq = cn_dequantize(wq, CN_F32);
        float wf[N * K];
        CHECK(deq && cn_read(deq, wf, sizeof wf) == CN_OK);
        for (int e = 0; e < N * K; e++) wd[e] = wf[e];
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double acc = 0, a = 0;
                for (int k = 0; k < K; k++) {
                    acc += x[m * K + k] * wd[n * K + k];
                    a += fabs(x[m * K + k] * wd[n * K + k]);
                }
                want[m * N + n] = acc, mag[m * N + n] = a;
            }
        for (int i = 0; i < 4; i++) {
            setenv("CINDER_QUANT_ISA", isas[i], 1);
            if (strcmp(cn_cpu_quant_isa(), isas[i]) != 0) continue;
            for (int rows = 1; rows <= M; rows += M - 1) {
                cn_tensor *y = cn_quant_linear(th_tensor(x, rows == 1 ? x1 : xs, 2, CN_F32), wq,
                                               NULL);
                float got[M * N];
                CHECK(y && cn_read(y, got, sizeof(float) * (size_t)(rows * N)) == CN_OK);
                for (int e = 0; y && e < rows * N; e++)
                    if (fabs(got[e] - want[e]) > 1e-5 * mag[e] + 1e-30) {
                        fprintf(stderr, "%s on %s, %d rows: %.9g, want %.9g at %d\n",
                                cn_dtype_name(blk[s]), isas[i], rows, got[e], want[e], e);
                        th_checks_failed++;
                        break;
                    }
            }
        }
    }
    unsetenv("CINDER_QUANT_ISA");
    cn_scope_end();
}

/* The outputs of the products below, each scheme on each ISA path this CPU has, into out
 * (THREADS_FLOATS floats); returns how many were written. */
#define THREADS_FLOATS (2 * 4 * (65 * 20 + 3 * 50 + 17 * 97 + 20 * 600))
static int64_t thread_products(float *out) {
    const char *isas[4] = {"c", "avx2", "vnni", "amx"};
    const cn_dtype blk[2] = {CN_Q8_BLOCK, CN_Q4_BLOCK};
    /* the last: 38 panels of 16 columns, two or three in a chunk (AMX unpacks a panel's q4 rows
     * while the chunk's previous panel runs), 5 blocks a row */
    const int64_t sizes[4][3] = {{65, 20, 4096}, {3, 50, 4096}, {17, 97, 256}, {20, 600, 160}};
    int64_t at = 0;
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < 4; i++) {
            setenv("CINDER_QUANT_ISA", isas[i], 1);
            if (strcmp(cn_cpu_quant_isa(), isas[i]) != 0) continue;
            for (int z = 0; z < 4; z++) {
                int64_t M = sizes[z][0], N = sizes[z][1], K = sizes[z][2];
                uint64_t seed = 5 + (uint64_t)z;
                float *x = malloc(sizeof(float) * (size_t)(M * K)),
                      *w = malloc(sizeof(float) * (size_t)(N * K));
                for (int64_t e = 0; e < M * K; e++)
                    x[e] = (float)((double)th_lcg(&seed) / 2147483648.0 - 0.5);
                for (int64_t e = 0; e < N * K; e++)
                    w[e] = (float)((double)th_lcg(&seed) / 2147483648.0 - 0.5);
                const int64_t xs[2] = {M, K}, ws[2] = {N, K};
                cn_tensor *xt = cn_from_data(x, xs, 2, CN_F32, cn_cpu());
                cn_tensor *wt = cn_from_data(w, ws, 2, CN_F32, cn_cpu());
                cn_tensor *wq = cn_quantize(wt, blk[s]);
                cn_tensor *y = cn_quant_linear(xt, wq, NULL);
                if (y && cn_read(y, out + at, sizeof(float) * (size_t)(M * N)) == CN_OK)
                    at += M * N;
                cn_release(y);
                cn_release(wq);
                cn_release(wt);
                cn_release(xt);
                free(x);
                free(w);
            }
        }
    unsetenv("CINDER_QUANT_ISA");
    return at;
}

/* The results do not depend on the number of threads: a child process runs the products on a
 * pool of one thread, this one on two (each chunking the work its own way), and the outputs
 * are the same bits. Runs first, before any CPU op starts the pool. */
static void test_linear_threads(void) {
    int fd[2];
    CHECK(pipe(fd) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        float *out = malloc(sizeof(float) * THREADS_FLOATS);
        int64_t n = cn_cpu_set_threads(1) == CN_OK ? thread_products(out) : -1;
        ssize_t ok = write(fd[1], &n, sizeof n);
        for (int64_t at = 0; ok > 0 && at < n * (int64_t)sizeof(float);) {
            ok = write(fd[1], (char *)out + at, (size_t)(n * (int64_t)sizeof(float) - at));
            at += ok;
        }
        _exit(ok > 0 ? 0 : 1);
    }
    close(fd[1]);
    CHECK(cn_cpu_set_threads(2) == CN_OK);
    float *mine = malloc(sizeof(float) * THREADS_FLOATS),
          *theirs = malloc(sizeof(float) * THREADS_FLOATS);
    int64_t n = thread_products(mine), m = -1;
    CHECK(n > 0 && n <= THREADS_FLOATS);
    FILE *f = fdopen(fd[0], "rb");
    CHECK(f && fread(&m, sizeof m, 1, f) == 1);
    CHECK(m == n);
    if (f && m == n) {
        CHECK(fread(theirs, sizeof(float), (size_t)n, f) == (size_t)n);
        CHECK(memcmp(mine, theirs, sizeof(float) * (size_t)n) == 0);
    }
    if (f) fclose(f);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    printf("     %lld outputs, 1 thread and 2: the same bits\n", (long long)n);
    free(mine);
    free(theirs);
}

/* Hand case: x = [[1, 2, ..., 32]] (amax 32: dx = 32 / 127, x quantized to round(127 k / 32)),
 * W = one row of 1s in q8_block (d = 1/127 stored as f16 0x2008, q = 127). y = dx * s16 *
 * 127 * sum_k round(127 k / 32), computed here by hand, and within the bound of 528. */
static void test_linear_by_hand(void) {
    cn_scope_begin();
    double x[32], w[32];
    int64_t qsum = 0;
    for (int k = 0; k < 32; k++) {
        x[k] = k + 1;
        w[k] = 1;
        qsum += (int64_t)lround(127.0 * (k + 1) / 32.0);
    }
    const int64_t s[2] = {1, 32};
    cn_tensor *wq = cn_quantize(th_tensor(w, s, 2, CN_F32), CN_Q8_BLOCK);
    double want = (double)(32.0f / 127.0f) * half_value(0x2008) * 127.0 * (double)qsum;
    cn_tensor *y = cn_quant_linear(th_tensor(x, s, 2, CN_F32), wq, NULL);
    th_check_values("by hand", y, &want, 1, 1e-6);
    CHECK(fabs(want - 528 * 127 * half_value(0x2008)) < 0.5);
    cn_scope_end();
}

/* Views of the weight and of x: rows of a block weight (a slice, every other row), a 3-D x, a
 * transposed x; against the same product on the dense copies. */
static void test_linear_views(void) {
    cn_scope_begin();
    enum { N = 6, K = 64 };
    double w[N * K], x[3 * 2 * K];
    for (int i = 0; i < N * K; i++) w[i] = sin(i * 0.7);
    for (int i = 0; i < 3 * 2 * K; i++) x[i] = cos(i * 0.3);
    const int64_t ws[2] = {N, K}, x3[3] = {3, 2, K}, x2[2] = {6, K};
    cn_tensor *wq = cn_quantize(th_tensor(w, ws, 2, CN_F32), CN_Q4_BLOCK);
    cn_tensor *rows = cn_slice(wq, 0, 1, 6, 2); /* rows 1, 3, 5 */
    cn_tensor *xt3 = th_tensor(x, x3, 3, CN_F32);
    cn_tensor *y = cn_quant_linear(xt3, rows, NULL);
    const int64_t ys[3] = {3, 2, 3};
    th_check_shape("3-D x", y, ys, 3);
    /* the same rows quantized on their own give the same bits (blocks are independent) */
    double wr[3 * K];
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < K; k++) wr[r * K + k] = (float)w[(2 * r + 1) * K + k];
    const int64_t wrs[2] = {3, K};
    cn_tensor *wq2 = cn_quantize(th_tensor(wr, wrs, 2, CN_F32), CN_Q4_BLOCK);
    const int64_t y2[2] = {6, 3};
    check_same("weight rows", cn_reshape(y, y2, 2),
               cn_quant_linear(th_tensor(x, x2, 2, CN_F32), wq2, NULL));
    /* a transposed x: [K, 6] seen as [6, K] */
    double xt[K * 6];
    for (int r = 0; r < 6; r++)
        for (int k = 0; k < K; k++) xt[k * 6 + r] = x[r * K + k];
    const int64_t ts[2] = {K, 6};
    check_same("transposed x", cn_quant_linear(cn_transpose(th_tensor(xt, ts, 2, CN_F32), 0, 1), wq2, NULL),
               cn_quant_linear(th_tensor(x, x2, 2, CN_F32), wq2, NULL));
    /* K = 0: the output is the bias */
    const int64_t e2[2] = {2, 0}, z2[2] = {3, 0}, b1[1] = {3};
    const double bias[3] = {1, 2, 3}, want0[6] = {1, 2, 3, 1, 2, 3};
    cn_tensor *wq0 = cn_quantize(th_own(cn_zeros(z2, 2, CN_F32, cn_cpu())), CN_Q8_CHANNEL);
    th_check_values("K = 0", cn_quant_linear(th_own(cn_zeros(e2, 2, CN_F32, cn_cpu())), wq0,
                                             th_tensor(bias, b1, 1, CN_F32)), want0, 6, 0);
    th_release_owned();
    cn_scope_end();
}

/* Row slices (an offset and a stride) of block weights, on the VNNI row kernel (1 and 3 rows)
 * and its tile kernel (17 rows), on AMX (17 rows: a whole panel of 16 weight rows read in place,
 * then a partial one) and on the other paths: the same bits as the sliced rows quantized on
 * their own. */
static void test_linear_weight_slices(void) {
    cn_scope_begin();
    enum { N = 40, K = 96, R = 19 }; /* R rows: one whole tile panel of 16 and a part */
    static double w[N * K], x[17 * K], wr[R * K];
    for (int i = 0; i < N * K; i++)
        w[i] = sin(i * 0.37) * (1 + i % 5);
    for (int i = 0; i < 17 * K; i++)
        x[i] = cos(i * 0.11) * 3;
    for (int r = 0; r < R; r++)
        for (int k = 0; k < K; k++)
            wr[r * K + k] = (float)w[(2 * r + 3) * K + k];
    const int64_t ws[2] = {N, K}, wrs[2] = {R, K};
    const char *isas[4] = {"c", "avx2", "vnni", "amx"};
    const int64_t rows[3] = {1, 3, 17};
    for (int i = 0; i < 4; i++) {
        setenv("CINDER_QUANT_ISA", isas[i], 1);
        if (strcmp(cn_cpu_quant_isa(), isas[i]) != 0) continue;
        for (int s = 2; s < 4; s++) {
            cn_tensor *wq = cn_quantize(th_tensor(w, ws, 2, CN_F32), schemes[s]);
            cn_tensor *part = cn_slice(wq, 0, 3, N, 2); /* rows 3, 5, .., 39 */
            cn_tensor *alone = cn_quantize(th_tensor(wr, wrs, 2, CN_F32), schemes[s]);
            for (int r = 0; r < 3; r++) {
                const int64_t xs[2] = {rows[r], K};
                cn_tensor *xt = th_tensor(x, xs, 2, CN_F32);
                check_same("weight rows", cn_quant_linear(xt, part, NULL),
                           cn_quant_linear(xt, alone, NULL));
            }
        }
    }
    unsetenv("CINDER_QUANT_ISA");
    cn_scope_end();
}

/* Gradients with the quantized weight constant: L = sum(G * quant_linear(x, Wq, b)) on the
 * autodiff device; dL/dx and dL/db against central finite differences, in double, of the same
 * loss with the dequantized weight (the straight-through estimator: the activations' rounding
 * is not differentiated), for a 3-D x and a q4 and a q8 channel weight. */
static double dequant_loss(const double *x, const double *wd, const double *b, const double *G,
                           int64_t M, int64_t N, int64_t K) {
    double l = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double y = b[n];
            for (int64_t k = 0; k < K; k++) y += x[m * K + k] * wd[n * K + k];
            l += G[m * N + n] * y;
        }
    return l;
}

static void test_linear_gradients(void) {
    cn_scope_begin();
    enum { M = 6, N = 5, K = 64 };
    const cn_dtype sch[2] = {CN_Q4_BLOCK, CN_Q8_CHANNEL};
    double x[M * K], w[N * K], b[N], G[M * N];
    for (int i = 0; i < M * K; i++) x[i] = sin(0.1 * i);
    for (int i = 0; i < N * K; i++) w[i] = cos(0.05 * i + 0.3);
    for (int i = 0; i < N; i++) b[i] = 0.5 * i;
    for (int i = 0; i < M * N; i++) G[i] = (i % 7) - 3;
    const int64_t xs3[3] = {2, 3, K}, ws[2] = {N, K}, bs[1] = {N}, gs3[3] = {2, 3, N};
    cn_device ad = cn_autodiff(cn_cpu());
    for (int s = 0; s < 2; s++) {
        cn_tensor *wq = cn_quantize(th_tensor(w, ws, 2, CN_F32), sch[s]);
        double *wd = th_values(cn_dequantize(wq, CN_F64));
        cn_tensor *xt = cn_require_grad(cn_from_inner(th_tensor(x, xs3, 3, CN_F32), ad));
        cn_tensor *bt = cn_require_grad(cn_from_inner(th_tensor(b, bs, 1, CN_F32), ad));
        cn_tensor *y = cn_quant_linear(xt, wq, bt);
        CHECK(y && cn_requires_grad(y));
        cn_grads *g = y ? cn_backward(cn_sum(cn_mul(y, th_tensor(G, gs3, 3, CN_F32)))) : NULL;
        CHECK(g != NULL);
        double gx[M * K] = {0}, gb[N] = {0};
        if (g) {
            CHECK(th_read(cn_grad(g, xt), gx) == M * K);
            CHECK(th_read(cn_grad(g, bt), gb) == N);
            cn_grads_free(g);
        }
        double xv[M * K], bv[N];
        for (int i = 0; i < M * K; i++) xv[i] = (float)x[i];
        for (int i = 0; i < N; i++) bv[i] = b[i];
        const double e = 1e-3; /* the loss is linear: the differences are exact up to rounding */
        for (int i = 0; i < M * K; i++) {
            double keep = xv[i];
            xv[i] = keep + e;
            double lp = dequant_loss(xv, wd, bv, G, M, N, K);
            xv[i] = keep - e;
            double lm = dequant_loss(xv, wd, bv, G, M, N, K);
            xv[i] = keep;
            CHECK_NEAR(gx[i], (lp - lm) / (2 * e), 1e-5);
        }
        for (int i = 0; i < N; i++) {
            double keep = bv[i];
            bv[i] = keep + e;
            double lp = dequant_loss(xv, wd, bv, G, M, N, K);
            bv[i] = keep - e;
            double lm = dequant_loss(xv, wd, bv, G, M, N, K);
            bv[i] = keep;
            CHECK_NEAR(gb[i], (lp - lm) / (2 * e), 1e-6);
        }
        free(wd);
    }
    /* the weight is never tracked, and a graph without tracked input records nothing */
    cn_tensor *wq = cn_quantize(th_tensor(w, ws, 2, CN_F32), CN_Q8_BLOCK);
    cn_tensor *xa = cn_from_inner(th_tensor(x, xs3, 3, CN_F32), ad);
    cn_tensor *y = cn_quant_linear(xa, cn_to_device(wq, ad), NULL);
    CHECK(y && !cn_requires_grad(y) && cn_device_of(y).autodiff);
    cn_scope_end();
}

static void test_linear_misuse(void) {
    cn_scope_begin();
    double v[4 * 64];
    for (int i = 0; i < 4 * 64; i++) v[i] = i % 9 - 4;
    const int64_t s[2] = {4, 64}, s1[1] = {64}, b4[1] = {4}, b5[1] = {5}, s832[2] = {8, 32};
    cn_tensor *x = th_tensor(v, s, 2, CN_F32), *w = th_tensor(v, s, 2, CN_F32);
    cn_tensor *wq = cn_quantize(w, CN_Q8_BLOCK), *wt = cn_quantize(w, CN_Q8_TENSOR);
    cn_tensor *wc = cn_quantize(w, CN_Q8_CHANNEL);
    cn_tensor *x64 = th_tensor(v, s, 2, CN_F64), *xi = th_tensor(v, s, 2, CN_I64);
    cn_tensor *b = th_tensor(v, b4, 1, CN_F32), *bb = th_tensor(v, b5, 1, CN_F32);
    cn_tensor *b64 = th_tensor(v, b4, 1, CN_F64), *w1 = cn_quantize(th_tensor(v, s1, 1, CN_F32),
                                                                     CN_Q8_BLOCK);
    cn_tensor *tq = cn_transpose(wt, 0, 1), *wc8 = cn_reshape(wc, s832, 2);
    cn_tensor *x32 = cn_slice(x, 1, 0, 32, 1), *x4 = cn_slice(x, 1, 0, 4, 1);
    int64_t live = cn_live_tensors();
    CHECK_FAILS(cn_quant_linear(NULL, wq, NULL), CN_ERR_NULL_ARG, "x");
    CHECK_FAILS(cn_quant_linear(x, NULL, NULL), CN_ERR_NULL_ARG, "wq");
    CHECK_FAILS(cn_quant_linear(x, w, NULL), CN_ERR_KIND, "cn_quantize(w, CN_Q8_BLOCK)");
    CHECK_FAILS(cn_quant_linear(xi, wq, NULL), CN_ERR_KIND, "'x'");
    CHECK_FAILS(cn_quant_linear(x64, wq, NULL), CN_ERR_DTYPE, "cn_cast(x, CN_F32)");
    CHECK_FAILS(cn_quant_linear(x, wq, b64), CN_ERR_DTYPE, "cn_cast(bias, CN_F32)");
    CHECK_FAILS(cn_quant_linear(x, wq, bb), CN_ERR_SHAPE, "shape [4]");
    CHECK_FAILS(cn_quant_linear(x, w1, NULL), CN_ERR_SHAPE, "2-D");
    CHECK_FAILS(cn_quant_linear(x32, wq, NULL), CN_ERR_SHAPE, "K = 64");
    CHECK_FAILS(cn_quant_linear(x4, tq, NULL), CN_ERR_INVALID_ARG, "transposed");
    CHECK_FAILS(cn_quant_linear(x32, wc8, NULL), CN_ERR_INVALID_ARG, "channels");
    CHECK_FAILS(cn_quant_linear(wq, wq, NULL), CN_ERR_KIND, "cn_dequantize");
    cn_clear_error();
    CHECK(cn_live_tensors() == live);
    th_check_values("x untouched", x, v, 4 * 64, 0);
    CHECK(cn_quant_linear(x, wq, b) != NULL);
    cn_scope_end();
}

/* ---- misuse ----------------------------------------------------------------------------------- */

static void test_misuse(void) {
    cn_scope_begin();
    int64_t live = cn_live_tensors();
    double x[64];
    for (int i = 0; i < 64; i++) x[i] = i - 20.5;
    const int64_t s[2] = {2, 32}, s48[2] = {1, 48}, s1[1] = {4};
    cn_tensor *xt = th_tensor(x, s, 2, CN_F32);
    cn_tensor *q = cn_quantize(xt, CN_Q8_BLOCK);
    cn_tensor *xi = th_tensor(x, s, 2, CN_I64);
    cn_tensor *x48 = th_tensor(x, s48, 2, CN_F32);
    cn_tensor *x0 = cn_sum(xt); /* 0-d */
    double bad[4] = {1, NAN, 2, 3};
    cn_tensor *xn = th_tensor(bad, s1, 1, CN_F32);
    live = cn_live_tensors();

    CHECK_FAILS(cn_quantize(NULL, CN_Q8_BLOCK), CN_ERR_NULL_ARG, "x");
    CHECK_FAILS(cn_quantize(xi, CN_Q8_BLOCK), CN_ERR_KIND, "'x'");
    CHECK_FAILS(cn_quantize(xt, CN_F32), CN_ERR_INVALID_ARG, "CN_Q8_BLOCK");
    CHECK_FAILS(cn_quantize(xt, (cn_dtype)99), CN_ERR_INVALID_ARG, "not a quantized dtype");
    CHECK_FAILS(cn_quantize(x48, CN_Q4_BLOCK), CN_ERR_SHAPE, "multiple of 32");
    CHECK_FAILS(cn_quantize(x0, CN_Q8_BLOCK), CN_ERR_SHAPE, "multiple of 32");
    CHECK_FAILS(cn_quantize(xn, CN_Q8_TENSOR), CN_ERR_INVALID_ARG, "non-finite");
    CHECK_FAILS(cn_quantize(q, CN_Q8_BLOCK), CN_ERR_KIND, "cn_dequantize");
    CHECK_FAILS(cn_dequantize(xt, CN_F32), CN_ERR_KIND, "not quantized");
    CHECK_FAILS(cn_dequantize(q, CN_I32), CN_ERR_DTYPE, "float dtype");
    CHECK_FAILS(cn_dequantize(NULL, CN_F32), CN_ERR_NULL_ARG, "q");
    /* ops that take floats refuse the quantized kind, naming cn_dequantize */
    CHECK_FAILS(cn_add(q, xt), CN_ERR_KIND, "cn_dequantize(a, CN_F32)");
    CHECK_FAILS(cn_relu(q), CN_ERR_KIND, "cn_dequantize");
    CHECK_FAILS(cn_matmul(xt, q), CN_ERR_KIND, "cn_dequantize");
    CHECK_FAILS(cn_sum(q), CN_ERR_KIND, "cn_dequantize");
    CHECK_FAILS(cn_cast(q, CN_F32), CN_ERR_KIND, "cn_dequantize");
    double host[64];
    CHECK_STATUS_FAILS(cn_read(q, host, sizeof host), CN_ERR_KIND, "cn_dequantize");
    cn_clear_error();
    CHECK(cn_to_dlpack(q) == NULL && cn_last_status() == CN_ERR_KIND); /* no packed DLPack dtype */
    CHECK(strstr(cn_last_error(), "cn_dequantize") != NULL);
    cn_clear_error();
    /* never tracked */
    cn_tensor *qa = cn_quantize(th_own(cn_to_device(xt, cn_autodiff(cn_cpu()))), CN_Q8_TENSOR);
    CHECK(qa && !cn_requires_grad(qa));
    CHECK_FAILS(cn_require_grad(qa), CN_ERR_AUTODIFF_NONFLOAT, "only float tensors");
    CHECK_FAILS(cn_require_grad(q), CN_ERR_AUTODIFF_NONFLOAT, "only float tensors");
    cn_release(qa);
    /* quantized dtypes are made by cn_quantize only */
    CHECK_FAILS(cn_empty(s, 2, CN_Q8_BLOCK, cn_cpu()), CN_ERR_DTYPE, "cn_quantize");
    CHECK_FAILS(cn_from_data(x, s, 2, CN_Q4_BLOCK, cn_cpu()), CN_ERR_DTYPE, "cn_quantize");
    CHECK(cn_dtype_size(CN_Q8_BLOCK) == 0 && cn_dtype_kind(CN_Q4_BLOCK) == CN_KIND_QUANTIZED);
    CHECK(strcmp(cn_dtype_name(CN_Q8_CHANNEL), "q8_channel") == 0);
    /* parts */
    cn_tensor *pv = NULL, *ps = NULL;
    CHECK_STATUS_FAILS(cn_quant_parts(xt, &pv, &ps), CN_ERR_KIND, "cn_quantize");
    CHECK(pv == NULL && ps == NULL);
    CHECK(cn_quant_parts(q, &pv, &ps) == CN_OK);
    const int64_t wrong[2] = {2, 64};
    CHECK_FAILS(cn_quant_from_parts(pv, ps, CN_Q8_BLOCK, wrong, 2), CN_ERR_SHAPE, "cn_quant_parts");
    CHECK_FAILS(cn_quant_from_parts(ps, ps, CN_Q8_BLOCK, s, 2), CN_ERR_DTYPE, "needs values u8");
    CHECK_FAILS(cn_quant_from_parts(pv, ps, CN_F32, s, 2), CN_ERR_INVALID_ARG, "not a quantized");
    cn_tensor *again = cn_quant_from_parts(pv, ps, CN_Q8_BLOCK, s, 2);
    check_same("from parts", cn_dequantize(again, CN_F64), cn_dequantize(q, CN_F64));
    cn_release(again);
    cn_release(pv);
    cn_release(ps);
    th_release_owned();
    cn_clear_error();
    /* nothing leaked; inputs untouched; still usable */
    CHECK(cn_live_tensors() == live);
    th_check_values("x untouched", xt, x, 64, 0);
    CHECK(cn_dequantize(q, CN_F32) != NULL);
    cn_scope_end();
}

int main(void) {
    RUN(test_linear_threads); /* first: it sets the pool's size */
    RUN(test_q8_block_by_hand);
    RUN(test_q8_tensor_and_channel_by_hand);
    RUN(test_q4_block_by_hand);
    RUN(test_round_trip_within_bound);
    RUN(test_views_keep_blocks);
    RUN(test_printing);
    RUN(test_safetensors_bit_identical);
    RUN(test_misuse);
    RUN(test_linear_by_hand);
    RUN(test_linear_every_isa);
    RUN(test_linear_extremes_every_isa);
    RUN(test_linear_views);
    RUN(test_linear_weight_slices);
    RUN(test_linear_gradients);
    RUN(test_linear_misuse);
    return th_finish();
}
