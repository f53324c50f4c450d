/* The fused attention (cn_scaled_dot_product_attention) beyond the op table's small PyTorch cases
 * (tests/test_op_table.c): sizes that span several of the CPU kernel's 64 x 64 tiles, causal with
 * Lq > Lk and Lq < Lk, masks broadcast over batch dims, strided inputs, f32 and f64, few and many
 * batch indices (the CPU backward's two passes and its single pass), each against
 * the composed attention softmax(scale q k^T + mask) v through public ops (an independent path:
 * matmul, softmax, masked_fill), values and gradients (q, k, v and the mask), and empty
 * feature sizes; the backward's memory (a backend that counts its bytes shows that no
 * [B, H, Lq, Lk] tensor is allocated, while the composed version does allocate one); and every
 * misuse. ctc_loss likewise: against the brute-force sum over every path of C^T (collapse
 * repeats, drop blanks), with no input steps, and its misuse. */
#include <math.h>

#include "harness.h"

/* ---- helpers -------------------------------------------------------------------------------- */

static cn_tensor *randn(uint64_t seed, const int64_t *shape, int nd, cn_dtype dt) {
    cn_generator g = cn_generator_new(seed);
    return cn_rand_normal(&g, shape, nd, 0.0, 1.0, dt, cn_cpu());
}

static cn_tensor *leaf(cn_tensor *t) {
    return cn_require_grad(cn_from_inner(t, cn_autodiff(cn_cpu())));
}

/* softmax(scale q k^T + mask, causal keys j > i left out) v through public ops. */
static cn_tensor *composed(cn_tensor *q, cn_tensor *k, cn_tensor *v, cn_tensor *mask, int causal,
                           double scale) {
    int nd = cn_ndim(q);
    cn_tensor *s = cn_mul_scalar(cn_matmul(q, cn_transpose(k, -1, -2)), scale);
    if (mask) s = cn_add(s, mask);
    if (causal) {
        int64_t lq = cn_shape(q)[nd - 2], lk = cn_shape(k)[nd - 2];
        int64_t sh[2] = {lq, lk};
        cn_tensor *ones = cn_full(sh, 2, 1, CN_BOOL, cn_cpu());
        cn_tensor *past = cn_triu(ones, 1); /* j > i */
        s = cn_masked_fill(s, past, -INFINITY);
    }
    return cn_matmul(cn_softmax(s, -1), v);
}


/* The fused op against the composed one on q [shape.., Lq, D] etc., values and the gradients of
 * L = sum(out * r) for q, k, v and the mask (when given, shape mshape). permuted 1: q, k, v are
 * made as [B, L, H, D] and permuted to [B, H, L, D] (strided views whose rows are dense, which
 * the kernel reads in place); 2: made as [B, H, D, L] and transposed (rows not dense: packed). */
static void compare(int64_t B, int64_t H, int64_t lq, int64_t lk, int64_t d, int64_t dv,
                    const int64_t *mshape, int mnd, int causal, double scale, cn_dtype dt,
                    double tol, int permuted) {
    cn_scope_begin();
    int64_t qs[4] = {B, lq, H, d}, ks[4] = {B, lk, H, d}, vs[4] = {B, lk, H, dv};
    int perm[4] = {0, 2, 1, 3};
    if (permuted == 2) {
        int64_t q2[4] = {B, H, d, lq}, k2[4] = {B, H, d, lk}, v2[4] = {B, H, dv, lk};
        memcpy(qs, q2, sizeof qs), memcpy(ks, k2, sizeof ks), memcpy(vs, v2, sizeof vs);
        perm[1] = 1, perm[2] = 3, perm[3] = 2;
    }
    cn_tensor *x[4];
    cn_tensor *raw[3] = {randn(1, qs, 4, dt), randn(2, ks, 4, dt), randn(3, vs, 4, dt)};
    for (int i = 0; i < 3; i++) {
        cn_tensor *t = cn_permute(raw[i], perm);
        x[i] = permuted ? t : cn_contiguous(t);
    }
    x[3] = mshape ? randn(4, mshape, mnd, dt) : NULL;
    int n_in = mshape ? 4 : 3;
    double sc = scale != 0 ? scale : d > 0 ? 1 / sqrt((double)d) : 1.0; /* as documented */
    /* values */
    cn_tensor *got = cn_scaled_dot_product_attention(x[0], x[1], x[2], x[3], causal, scale);
    cn_tensor *want = composed(x[0], x[1], x[2], x[3], causal, sc);
    th_check_close("out", got, want, tol);
    /* gradients, in each path on leaves of the same values */
    int64_t os[4] = {B, H, lq, dv};
    cn_tensor *r = randn(5, os, 4, dt);
    cn_tensor *gf[4] = {0}, *gc[4] = {0};
    for (int path = 0; path < 2; path++) {
        cn_tensor *l[4] = {0};
        for (int i = 0; i < n_in; i++) l[i] = leaf(x[i]);
        cn_tensor *y = path ? composed(l[0], l[1], l[2], l[3], causal, sc)
                            : cn_scaled_dot_product_attention(l[0], l[1], l[2], l[3], causal,
                                                              scale);
        cn_grads *g = cn_backward(cn_sum(cn_mul(y, r)));
        CHECK(g != NULL);
        for (int i = 0; g && i < n_in; i++) {
            cn_tensor *gi = cn_grad(g, l[i]);
            (path ? gc : gf)[i] = gi ? cn_clone(gi) : NULL;
        }
        cn_grads_free(g);
    }
    const char *names[4] = {"dq", "dk", "dv", "dmask"};
    for (int i = 0; i < n_in; i++) th_check_close(names[i], gf[i], gc[i], tol);
    cn_scope_end();
}

/* ---- against the composed attention --------------------------------------------------------- */

/* Several 64-row tiles each way, ragged last tiles, no mask. */
static void test_tiles_match_the_composed_attention(void) {
    compare(2, 3, 70, 130, 16, 8, NULL, 0, 0, 0.0, CN_F64, 1e-11, 0);
}

/* Causal, top-left aligned: Lq > Lk (rows past Lk see every key) and Lq < Lk, across tiles. */
static void test_causal_across_tiles(void) {
    compare(1, 2, 150, 70, 8, 12, NULL, 0, 1, 0.0, CN_F64, 1e-11, 0);
    compare(1, 2, 70, 150, 8, 12, NULL, 0, 1, 0.25, CN_F64, 1e-11, 0);
}

/* A mask [Lq, Lk] broadcast over B and H (its gradient summed back), another [B, 1, Lq, Lk]; with
 * and without causal; strided q, k, v. */
static void test_masks_and_strided_inputs(void) {
    const int64_t m2[2] = {67, 90}, m4[4] = {2, 1, 67, 90};
    compare(2, 2, 67, 90, 8, 8, m2, 2, 0, 0.0, CN_F64, 1e-11, 1);
    compare(2, 2, 67, 90, 8, 8, m4, 4, 1, 0.0, CN_F64, 1e-11, 1);
    compare(2, 2, 67, 90, 8, 8, m4, 4, 1, 0.0, CN_F64, 1e-11, 2);
    const int64_t m3[2] = {80, 100};
    compare(1, 2, 80, 100, 32, 16, m3, 2, 1, 0.0, CN_F32, 2e-5, 2);
}

/* f32: the kernel's vectorised exp and float GEMM, within float's precision. */
static void test_f32_matches(void) {
    const int64_t m2[2] = {80, 100};
    compare(1, 2, 80, 100, 32, 16, m2, 2, 1, 0.0, CN_F32, 2e-5, 0);
}

/* Many batch indices (B * H = 32: at least two per thread up to 16 threads), which the CPU
 * backward runs in one pass per batch index instead of its two passes (the cases above with
 * B * H <= 2 take the two passes): causal across tiles with a mask and its gradient, and the
 * GPT's shape (one 64 x 64 tile, q, k, v strided views of [B, T, H, hs]) in f32. */
static void test_many_batch_indices(void) {
    const int64_t m4[4] = {8, 1, 100, 90};
    compare(8, 4, 100, 90, 8, 12, m4, 4, 1, 0.0, CN_F64, 1e-11, 0);
    compare(8, 4, 70, 130, 8, 8, NULL, 0, 0, 0.0, CN_F64, 1e-11, 2);
    compare(8, 4, 64, 64, 32, 32, NULL, 0, 1, 0.0, CN_F32, 2e-5, 1);
}

/* On the CPU the outputs take q's layout (o, and in the backward dq; dk and dv k's and v's): from
 * q, k, v that are [B, T, H, hs] seen as [B, H, T, hs] (a transformer's heads), o seen back as
 * [B, T, H, hs] is dense, so that merging the heads is a view, not a copy; from dense inputs,
 * dense outputs. The values, and the gradients written in those layouts, are compare()'s
 * business (permuted 1 and 2 above). */
static void test_outputs_take_the_inputs_layout(void) {
    cn_scope_begin();
    const int64_t s[4] = {3, 64, 4, 8};
    const int perm[4] = {0, 2, 1, 3};
    cn_tensor *l[3];
    for (int i = 0; i < 3; i++) l[i] = leaf(cn_permute(randn(10 + i, s, 4, CN_F32), perm));
    cn_tensor *o = cn_scaled_dot_product_attention(l[0], l[1], l[2], NULL, 1, 0.0);
    CHECK(o && !cn_is_contiguous(o) && cn_is_contiguous(cn_transpose(o, 1, 2)));
    cn_tensor *d[3];
    for (int i = 0; i < 3; i++) d[i] = leaf(randn(20 + i, (int64_t[]){3, 4, 64, 8}, 4, CN_F32));
    o = cn_scaled_dot_product_attention(d[0], d[1], d[2], NULL, 1, 0.0);
    CHECK(o && cn_is_contiguous(o));
    cn_grads *g = cn_backward(cn_sum(o));
    for (int i = 0; g && i < 3; i++) CHECK(cn_is_contiguous(cn_grad(g, d[i])));
    cn_grads_free(g);
    cn_scope_end();
}

/* Empty feature sizes: D = 0 (every score 0: the mean of the visible values) and Dv = 0. */
static void test_empty_feature_sizes(void) {
    compare(1, 2, 5, 7, 0, 3, NULL, 0, 1, 0.0, CN_F64, 1e-12, 0);
    compare(1, 2, 5, 7, 4, 0, NULL, 0, 0, 0.0, CN_F64, 1e-12, 0);
}

/* A row whose keys are all -inf gives zeros and no gradient (PyTorch >= 2.5), and Lk = 0 gives
 * zeros. */
static void test_rows_with_no_key_give_zeros(void) {
    cn_scope_begin();
    const int64_t qs[2] = {3, 2}, ks[2] = {2, 2}, ms[2] = {3, 2};
    const double qv[6] = {1, 2, 3, 4, 5, 6}, kv[4] = {1, 0, 0, 1}, vv[4] = {1, 2, 3, 4};
    const double mv[6] = {0, 0, -INFINITY, -INFINITY, 0, -INFINITY};
    cn_tensor *q = leaf(th_tensor(qv, qs, 2, CN_F64)), *k = th_tensor(kv, ks, 2, CN_F64);
    cn_tensor *v = th_tensor(vv, ks, 2, CN_F64), *m = th_tensor(mv, ms, 2, CN_F64);
    cn_tensor *y = cn_scaled_dot_product_attention(q, k, v, m, 0, 1.0);
    double out[6];
    CHECK(th_read(y, out) == 6);
    CHECK(out[2] == 0 && out[3] == 0);          /* row 1: no key */
    CHECK_NEAR(out[4], 1, 1e-15);               /* row 2: key 0 alone */
    CHECK_NEAR(out[5], 2, 1e-15);
    cn_grads *g = cn_backward(cn_sum(y));
    double gq[6];
    CHECK(g && th_read(cn_grad(g, q), gq) == 6);
    CHECK(gq[2] == 0 && gq[3] == 0 && gq[4] == 0 && gq[5] == 0); /* one key: constant output */
    cn_grads_free(g);
    const int64_t k0[2] = {0, 2};
    cn_tensor *e = cn_zeros(k0, 2, CN_F64, cn_cpu());
    cn_tensor *z = cn_scaled_dot_product_attention(cn_inner(q), e, e, NULL, 0, 0.0);
    CHECK(z && cn_shape(z)[0] == 3 && cn_shape(z)[1] == 2);
    CHECK(th_read(z, out) == 6);
    for (int i = 0; i < 6; i++) CHECK(out[i] == 0);
    cn_scope_end();
}

/* ---- memory: a backend that counts its bytes ------------------------------------------------- */

static const cn_backend *cpu;
static int64_t live_bytes, peak_bytes;
#define HDR 64 /* each block's size, kept before it (keeps the CPU's alignment) */

static cn_status peak_alloc(void *ctx, int device, size_t nbytes, void **ptr) {
    void *p = NULL;
    cn_status s = cpu->alloc(ctx, device, nbytes + HDR, &p);
    if (s != CN_OK) return s;
    *(size_t *)p = nbytes;
    live_bytes += (int64_t)nbytes;
    if (live_bytes > peak_bytes) peak_bytes = live_bytes;
    *ptr = (char *)p + HDR;
    return CN_OK;
}

static void peak_free(void *ctx, int device, void *ptr) {
    if (!ptr) return;
    char *p = (char *)ptr - HDR;
    live_bytes -= (int64_t)*(size_t *)p;
    cpu->free(ctx, device, p);
}

static cn_device peak_device(void) {
    static int id = -1;
    if (id < 0) {
        cpu = cn_backend_get(CN_BACKEND_CPU);
        cn_backend b = *cpu;
        b.name = "attention_peak";
        b.alloc = peak_alloc;
        b.free = peak_free;
        id = cn_backend_register(&b);
    }
    cn_device d = {(int16_t)id, 0, 0, 0};
    return d;
}

/* The peak of live bytes on the counting backend over forward and backward of L = sum(y * r),
 * from leaves q, k, v [B, H, L, D] (f32). */
static int64_t attention_peak(int fused, int64_t B, int64_t H, int64_t L, int64_t D) {
    cn_scope_begin();
    cn_device dev = peak_device(), ad = cn_autodiff(dev);
    int64_t sh[4] = {B, H, L, D};
    cn_tensor *x[3];
    for (int i = 0; i < 3; i++)
        x[i] = cn_require_grad(cn_from_inner(cn_to_device(randn(10 + i, sh, 4, CN_F32), dev), ad));
    cn_tensor *r = cn_to_device(randn(20, sh, 4, CN_F32), dev);
    int64_t before = live_bytes;
    peak_bytes = live_bytes;
    cn_scope_begin();
    cn_tensor *y = fused ? cn_scaled_dot_product_attention(x[0], x[1], x[2], NULL, 0, 0.0)
                         : composed(x[0], x[1], x[2], NULL, 0, 1 / sqrt((double)D));
    cn_grads *g = cn_backward(cn_sum(cn_mul(y, r)));
    CHECK(g && cn_grad(g, x[0]) && cn_grad(g, x[1]) && cn_grad(g, x[2]));
    cn_grads_free(g);
    cn_scope_end();
    int64_t peak = peak_bytes - before;
    cn_scope_end();
    return peak;
}

/* B * H * Lq * Lk floats: 4 * 512 * 512 * 4 bytes = 4 MiB. The fused op's forward and backward
 * together stay below it (inputs, output, lse and gradients: about 1 MiB); the composed one, the
 * check's control, goes above it (it keeps the probabilities). */
static void test_backward_keeps_no_attention_matrix(void) {
    int64_t B = 2, H = 2, L = 512, D = 16;
    int64_t matrix = B * H * L * L * (int64_t)sizeof(float);
    int64_t fused = attention_peak(1, B, H, L, D), plain = attention_peak(0, B, H, L, D);
    printf("     peak bytes: fused %lld, composed %lld, one attention matrix %lld\n",
           (long long)fused, (long long)plain, (long long)matrix);
    CHECK(fused > 0 && fused < matrix / 2);
    CHECK(plain >= matrix);
}

/* ---- misuse ---------------------------------------------------------------------------------- */

static void test_misuse(void) {
    cn_scope_begin();
    const int64_t s234[3] = {2, 3, 4}, s254[3] = {2, 5, 4}, s253[3] = {2, 5, 3};
    const int64_t s264[3] = {2, 6, 4}, s154[3] = {1, 5, 4}, s4[1] = {4}, s25[2] = {2, 5};
    const int64_t s35[2] = {3, 5}, s245[3] = {2, 4, 5};
    cn_tensor *q = randn(1, s234, 3, CN_F64), *k = randn(2, s254, 3, CN_F64);
    cn_tensor *v = randn(3, s253, 3, CN_F64), *m = randn(4, s35, 2, CN_F64);
    cn_tensor *qf = cn_cast(q, CN_F32), *qi = cn_cast(q, CN_I64);
    cn_tensor *k6 = randn(5, s264, 3, CN_F64), *kb = randn(6, s154, 3, CN_F64);
    cn_tensor *k3 = randn(7, s253, 3, CN_F64), *v1 = randn(8, s4, 1, CN_F64);
    cn_tensor *m25 = randn(9, s25, 2, CN_F64), *m245 = randn(9, s245, 3, CN_F64);
    const char *op = "scaled_dot_product_attention";
    CHECK_FAILS(cn_scaled_dot_product_attention(NULL, k, v, NULL, 0, 0), CN_ERR_NULL_ARG, op);
    CHECK_FAILS(cn_scaled_dot_product_attention(qi, k, v, NULL, 0, 0), CN_ERR_KIND, "'q'");
    CHECK_FAILS(cn_scaled_dot_product_attention(qf, k, v, NULL, 0, 0), CN_ERR_DTYPE, "'k'");
    CHECK_FAILS(cn_scaled_dot_product_attention(q, k, v1, NULL, 0, 0), CN_ERR_SHAPE,
                "at least 2 dims");
    CHECK_FAILS(cn_scaled_dot_product_attention(q, kb, v, NULL, 0, 0), CN_ERR_SHAPE,
                "different batch dims");
    CHECK_FAILS(cn_scaled_dot_product_attention(q, k3, v, NULL, 0, 0), CN_ERR_SHAPE,
                "feature sizes D");
    CHECK_FAILS(cn_scaled_dot_product_attention(q, k6, v, NULL, 0, 0), CN_ERR_SHAPE,
                "lengths Lk");
    CHECK_FAILS(cn_scaled_dot_product_attention(q, k, v, m25, 0, 0), CN_ERR_SHAPE,
                "'attn_mask'");
    CHECK_FAILS(cn_scaled_dot_product_attention(q, k, v, m245, 0, 0), CN_ERR_SHAPE,
                "does not broadcast");
    CHECK_FAILS(cn_scaled_dot_product_attention(q, k, v, qi, 0, 0), CN_ERR_KIND, "'attn_mask'");
    CHECK_FAILS(cn_scaled_dot_product_attention(q, k, v, m, 0, NAN), CN_ERR_INVALID_ARG,
                "scale");
    CHECK_FAILS(cn_scaled_dot_product_attention(q, k, v, m, 0, INFINITY), CN_ERR_INVALID_ARG,
                "finite");
    /* the inputs are untouched and usable */
    CHECK(cn_scaled_dot_product_attention(q, k, v, m, 1, 0) != NULL);
    cn_scope_end();
}

/* ---- ctc_loss: against every path ------------------------------------------------------------ */

/* -log of the summed probability of the paths over C classes and T steps that collapse to tg[0..L)
 * (repeats merged, then blanks dropped), from lp [T, C] row-major. */
static double ctc_brute(const double *lp, int64_t T, int64_t C, const int64_t *tg, int64_t L,
                        int64_t blank) {
    int64_t paths = 1;
    for (int64_t t = 0; t < T; t++) paths *= C;
    double total = 0;
    for (int64_t p = 0; p < paths; p++) {
        int64_t path[16], q = p, out[16], n = 0;
        for (int64_t t = 0; t < T; t++) path[t] = q % C, q /= C;
        double logp = 0;
        for (int64_t t = 0; t < T; t++) {
            logp += lp[t * C + path[t]];
            if (path[t] != blank && (t == 0 || path[t] != path[t - 1])) out[n++] = path[t];
        }
        int same = n == L;
        for (int64_t i = 0; same && i < L; i++) same = out[i] == tg[i];
        if (same) total += exp(logp);
    }
    return -log(total);
}

/* N = 4 samples of T = 6 steps over C = 3 classes (729 paths each), input lengths 6, 5, 4, 6,
 * targets with repeats, an empty one, blank 1; f64 and f32; reduction none */
static void test_ctc_matches_every_path(void) {
    cn_scope_begin();
    const int64_t T = 6, N = 4, C = 3, S = 3;
    const int64_t lps[3] = {T, N, C}, ts[2] = {N, S}, ns[1] = {N};
    const double tgv[12] = {0, 2, 2, 2, 0, 0, 0, 0, 0, 2, 0, 2};
    const double ilv[4] = {6, 5, 4, 6}, tlv[4] = {3, 1, 0, 3};
    cn_tensor *lp = cn_log_softmax(randn(30, lps, 3, CN_F64), 2);
    cn_tensor *tg = th_tensor(tgv, ts, 2, CN_I64), *il = th_tensor(ilv, ns, 1, CN_I64);
    cn_tensor *tl = th_tensor(tlv, ns, 1, CN_I64);
    double lpv[72];
    CHECK(th_read(lp, lpv) == 72);
    for (int f32 = 0; f32 < 2; f32++) {
        cn_tensor *x = f32 ? cn_cast(lp, CN_F32) : lp;
        cn_tensor *loss = cn_ctc_loss(x, tg, il, tl, 1, CN_REDUCTION_NONE, 0);
        double got[4];
        CHECK(th_read(loss, got) == 4);
        for (int64_t n = 0; n < N; n++) {
            double row[18];
            int64_t tgn[3];
            for (int64_t t = 0; t < (int64_t)ilv[n]; t++)
                for (int64_t c = 0; c < C; c++) row[t * C + c] = lpv[(t * N + n) * C + c];
            for (int64_t s = 0; s < S; s++) tgn[s] = (int64_t)tgv[n * S + s];
            double want = ctc_brute(row, (int64_t)ilv[n], C, tgn, (int64_t)tlv[n], 1);
            CHECK_NEAR(got[n], want, f32 ? 1e-5 : 1e-12);
        }
    }
    cn_scope_end();
}

/* No input steps: an empty target has loss 0, another +inf (PyTorch's [0, inf]); 0 with
 * zero_infinity. */
static void test_ctc_without_steps(void) {
    cn_scope_begin();
    const int64_t lps[3] = {3, 2, 4}, ts[2] = {2, 1}, ns[1] = {2};
    const double tgv[2] = {1, 2}, ilv[2] = {0, 0}, tlv[2] = {0, 1};
    cn_tensor *lp = cn_log_softmax(randn(40, lps, 3, CN_F64), 2);
    cn_tensor *tg = th_tensor(tgv, ts, 2, CN_I64), *il = th_tensor(ilv, ns, 1, CN_I64);
    cn_tensor *tl = th_tensor(tlv, ns, 1, CN_I64);
    double got[2];
    CHECK(th_read(cn_ctc_loss(lp, tg, il, tl, 0, CN_REDUCTION_NONE, 0), got) == 2);
    CHECK(got[0] == 0 && got[1] == INFINITY);
    CHECK(th_read(cn_ctc_loss(lp, tg, il, tl, 0, CN_REDUCTION_NONE, 1), got) == 2);
    CHECK(got[0] == 0 && got[1] == 0);
    cn_scope_end();
}

static void test_ctc_misuse(void) {
    cn_scope_begin();
    const int64_t lps[3] = {5, 2, 4}, ts[2] = {2, 3}, ns[1] = {2}, n3[1] = {3}, c4[1] = {4};
    const double tgv[6] = {1, 2, 3, 1, 1, 0}, ilv[2] = {5, 4}, tlv[2] = {3, 2};
    const double il_big[2] = {6, 4}, tl_big[2] = {4, 2}, tg_blank[6] = {1, 0, 3, 1, 1, 0};
    const double tg_c[6] = {1, 4, 3, 1, 1, 0}, cat[4] = {1, 2, 3, 1};
    cn_tensor *lp = randn(1, lps, 3, CN_F64), *tg = th_tensor(tgv, ts, 2, CN_I64);
    cn_tensor *il = th_tensor(ilv, ns, 1, CN_I64), *tl = th_tensor(tlv, ns, 1, CN_I64);
    cn_tensor *lpi = cn_cast(lp, CN_I64), *tgf = cn_cast(tg, CN_F64);
    cn_tensor *il3 = th_tensor((const double[]){5, 5, 5}, n3, 1, CN_I64);
    cn_tensor *ilb = th_tensor(il_big, ns, 1, CN_I64), *tlb = th_tensor(tl_big, ns, 1, CN_I64);
    cn_tensor *tgb = th_tensor(tg_blank, ts, 2, CN_I64), *tgc = th_tensor(tg_c, ts, 2, CN_I64);
    cn_tensor *tgcat = th_tensor(cat, c4, 1, CN_I64), *lp1 = cn_reshape(lp, (int64_t[]){40}, 1);
    const cn_reduction mean = CN_REDUCTION_MEAN;
    CHECK_FAILS(cn_ctc_loss(NULL, tg, il, tl, 0, mean, 0), CN_ERR_NULL_ARG, "ctc_loss");
    CHECK_FAILS(cn_ctc_loss(lpi, tg, il, tl, 0, mean, 0), CN_ERR_KIND, "'log_probs'");
    CHECK_FAILS(cn_ctc_loss(lp, tgf, il, tl, 0, mean, 0), CN_ERR_KIND, "'targets'");
    CHECK_FAILS(cn_ctc_loss(lp1, tg, il, tl, 0, mean, 0), CN_ERR_SHAPE, "[T, N, C]");
    CHECK_FAILS(cn_ctc_loss(lp, tg, il3, tl, 0, mean, 0), CN_ERR_SHAPE, "'input_lengths'");
    CHECK_FAILS(cn_ctc_loss(lp, tg, ilb, tl, 0, mean, 0), CN_ERR_INVALID_ARG,
                "input_lengths[0] = 6");
    CHECK_FAILS(cn_ctc_loss(lp, tg, il, tlb, 0, mean, 0), CN_ERR_INVALID_ARG,
                "target_lengths[0] = 4");
    CHECK_FAILS(cn_ctc_loss(lp, tgb, il, tl, 0, mean, 0), CN_ERR_INDEX, "differ from blank");
    CHECK_FAILS(cn_ctc_loss(lp, tgc, il, tl, 0, mean, 0), CN_ERR_INDEX, "is 4");
    CHECK_FAILS(cn_ctc_loss(lp, tgcat, il, tl, 0, mean, 0), CN_ERR_SHAPE, "sum");
    CHECK_FAILS(cn_ctc_loss(lp, tg, il, tl, 4, mean, 0), CN_ERR_INVALID_ARG, "blank = 4");
    CHECK_FAILS(cn_ctc_loss(lp, tg, il, tl, -1, mean, 0), CN_ERR_INVALID_ARG, "blank = -1");
    CHECK_FAILS(cn_ctc_loss(lp, tg, il, tl, 0, (cn_reduction)7, 0), CN_ERR_INVALID_ARG,
                "reduction");
    /* the inputs are untouched and usable */
    CHECK(cn_ctc_loss(lp, tg, il, tl, 0, mean, 0) != NULL);
    cn_scope_end();
}

int main(void) {
    RUN(test_tiles_match_the_composed_attention);
    RUN(test_causal_across_tiles);
    RUN(test_masks_and_strided_inputs);
    RUN(test_f32_matches);
    RUN(test_many_batch_indices);
    RUN(test_outputs_take_the_inputs_layout);
    RUN(test_empty_feature_sizes);
    RUN(test_rows_with_no_key_give_zeros);
    RUN(test_backward_keeps_no_attention_matrix);
    RUN(test_misuse);
    RUN(test_ctc_matches_every_path);
    RUN(test_ctc_without_steps);
    RUN(test_ctc_misuse);
    return th_finish();
}
