/* CPU fused attention (scaled_dot_product_attention) and its backward, FlashAttention style.
 *
 * Shapes (backend.h): q [B.., Lq, D], k [B.., Lk, D], v [B.., Lk, Dv], mask [B.., Lq, Lk] (a
 * broadcast view, strides may be 0), o [B.., Lq, Dv], lse [B.., Lq]; B.. flattened to one batch
 * index b. o, dq, dk and dv are written through their views' strides (the front-end gives them
 * the layout of q, k and v); lse and the mask's gradient are dense. The scores of query block i
 * and key block j are
 *     S = scale * Q_i K_j^T + mask_ij   (key j > query i left out as -inf when causal)
 * computed in tiles of BQ x BK by GEMM on the rows in place (or on packed copies when a row's
 * elements are not adjacent), so no [Lq, Lk] matrix exists.
 *
 * Forward, one item per (b, query block), on the pool: an online softmax over the key blocks,
 * keeping per row the running max m, the running sum l of exp(s - m) and the unnormalised output
 * acc, rescaled by exp(m_old - m_new) when the max grows; at the end o = acc / l and
 * lse = m + log(l). A row with every key left out (m = -inf) gets o = 0, lse = -inf.
 *
 * Backward, from lse and Dr_i = sum_c g_ic o_ic (the standard FlashAttention-2 identities, with
 * P = exp(S - lse) recomputed per tile):
 *     dV = P^T G,   dP = G V^T,   dS = P * (dP - Dr),   dQ = scale dS K,   dK = scale dS^T Q
 * in two passes so that no two threads write one row: pass 1 over (b, query block) gives dQ
 * (and dS into the mask's gradient when it is asked for), pass 2 over (b, key block) gives dK
 * and dV. Each pass recomputes P; the memory is the tiles' per chunk, and Dr ([B, Lq]). With at
 * least two batch indices per thread and few enough keys, one pass per batch index does both
 * (bwd_one_pass_items: P and dS once per tile, dK and dV of its keys in the chunk's scratch). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_math.h"
#include "core/alloc.h"
#include "core/backend_common.h"

#define BQ 64 /* query rows per tile */
#define BK 64 /* key rows per tile */
/* The backward's single pass (bwd_one_pass_items): at most this many keys, and dK and dV of one
 * batch index (keys x (D + Dv) elements) at most ONE_PASS_ELEMS in the scratch */
#define ONE_PASS_KEYS  512
#define ONE_PASS_ELEMS (64 * 1024)

/* The scratch elements of one query block of the backward (query_block): the Q, G and O tiles,
 * the K and V tiles, P, W, dQ and lse. */
static int64_t query_block_elems(int64_t D, int64_t Dv) {
    return BQ * D + 2 * BQ * Dv + BK * D + BK * Dv + 2 * BQ * BK + BQ * D + BQ;
}

#define EXP_f32(x) exp_f32(x)
#define EXP_f64(x) exp(x)

/* The geometry every item reads. */
typedef struct sdpa_geom {
    const cn_kernel_args *a;
    int nb;                      /* batch dims */
    int64_t batch, lq, lk, d, dv;
    int causal;
    double scale;
    const cn_view *q, *k, *v, *mask, *g, *o, *lse;
    int64_t nqb, nkb;            /* query and key blocks */
    size_t chunk_bytes;          /* scratch per chunk */
    char *scratch;
    void *dr;                    /* backward: Dr [batch, lq] */
} sdpa_geom;

/* Element offset of batch index b (row-major over the first nb dims) in v. */
static int64_t batch_off(const cn_view *v, int nb, int64_t b) {
    int64_t off = 0;
    for (int d = nb - 1; d >= 0; d--) {
        int64_t i = b % v->shape[d];
        b /= v->shape[d];
        off += i * v->strides[d];
    }
    return off;
}

/* a [m, k] (ta: stored [k, m]) @ b [k, n] (tb: stored [n, k]) + beta c, on this thread; rows
 * of a, b and c lda, ldb and ldc elements apart. The sizes were checked against the GEMM's ints
 * once, so it cannot fail. */
static void mm(cn_dtype dt, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *a,
               int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
    if (m == 0 || n == 0) return;
    if (k == 0) {
        if (beta == 0)
            for (int64_t r = 0; r < m; r++)
                memset((char *)c + (size_t)(r * ldc) * (dt == CN_F32 ? 4 : 8), 0,
                       (size_t)n * (dt == CN_F32 ? 4 : 8));
        return;
    }
    cn_cpu_gemm(dt, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

/* Lanes of the row maxima: a running maximum per lane vectorises, one running scalar is a chain
 * of dependent compares (a third of the forward's time at 64 keys). */
#define MAX_LANES 16

/* The keys of row r of a tile (query i0 + r, keys from j0, bk of them) that a causal mask leaves
 * in, rounded up to a multiple of MAX_LANES within bk: the row's exp, max and sum loops stop
 * there. The keys past it are -inf, whose exp is 0 (exp_f32 gives +0 below -104): the row's max,
 * and its sum in each lane, are the values the whole row gives, in the same bits. */
static int64_t row_keys(const sdpa_geom *G, int64_t i0, int64_t r, int64_t j0, int64_t bk) {
    if (!G->causal) return bk;
    int64_t n = i0 + r + 1 - j0;
    if (n <= 0) return 0;
    n = (n + MAX_LANES - 1) / MAX_LANES * MAX_LANES;
    return n < bk ? n : bk;
}

/* The keys of row r of a tile that a causal mask leaves in, exactly (row_keys rounds them up). */
static int64_t row_keys_exact(const sdpa_geom *G, int64_t i0, int64_t r, int64_t j0, int64_t bk) {
    if (!G->causal) return bk;
    int64_t n = i0 + r + 1 - j0;
    return n <= 0 ? 0 : n < bk ? n : bk;
}

/* exp_sub512 (nonpos 0) of the one vector x[0, 16) whose lanes [n, 16) (0 <= n < 16) are -inf,
 * the keys a causal mask left out: those lanes give +0 in y and add +0 into lane, as exp_sub512
 * gives them, without computing their exp. exp of -inf (clamped to -104) ends in a product that
 * underflows to 0, and an underflowing product takes a microcode assist of some hundred cycles
 * on Intel's cores: once per row at the mask's edge, it made a vector 6x as slow as one without
 * (measured), and the attention forward's exp a tenth of the GPT's forward. */
#if CPU_EXP512
__attribute__((target("avx512f"))) static void exp_sub512_head(const float *x, float *y,
                                                               int64_t n, float m, float *lane) {
    __mmask16 k = (__mmask16)((1u << n) - 1);
    /* the lanes left out are 0 here: exp(0) cannot underflow, and the mask zeroes its result */
    __m512 v = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, x), _mm512_set1_ps(m));
    __m512 e = _mm512_maskz_mov_ps(k, exp512(v));
    _mm512_storeu_ps(y, e);
    if (lane) _mm512_storeu_ps(lane, _mm512_add_ps(_mm512_loadu_ps(lane), e));
}
#else
static void exp_sub512_head(const float *x, float *y, int64_t n, float m, float *lane) {
    (void)x, (void)y, (void)n, (void)m, (void)lane;
}
#endif

/* exp_sub512 of s[0, n) (n from row_keys) whose keys from ne on (row_keys_exact) are -inf,
 * with the vector that holds the mask's edge taken by exp_sub512_head; returns how many leading
 * elements it did (the caller's loop does the rest, as after exp_sub512). */
static int64_t exp_sub512_row(float *s, int64_t n, int64_t ne, float m, float *lane) {
    int64_t c = exp_sub512(s, s, ne, m, lane, 0);
    if (c + 16 <= n) { /* the vector with the edge (n - ne < 16); else the caller's loop's */
        exp_sub512_head(s + c, s + c, ne - c, m, lane);
        c += 16;
    }
    return c;
}

/* The forward's row of a score tile in one pass, f32 on AVX-512, for tiles without an attn_mask
 * whose bk is a multiple of 16: s holds the row's q.k (scores_ left it unscaled and without the
 * causal -inf); its first ne keys are the row's (ne >= 1). Scales them, takes their maximum with
 * start, and writes exp(s - max) to the ne keys and 0 to the rest of the bk; *mx_out gets the
 * maximum and *sum_out the sum of the exps. The values of scores_, row_max, exp_sum and the zero
 * fill, in the same bits (the same products, the same maximum, the same 16 lane sums added in
 * the same order), with the row held in registers instead of four passes over it and three
 * calls. Returns 0 when the maximum is -inf (no key yet: the caller zeroes the row). */
#if CPU_EXP512
__attribute__((target("avx512f"))) static int fwd_row512(float *s, int64_t bk, int64_t ne,
                                                         float scale, float start, float *mx_out,
                                                         float *sum_out) {
    const __m512 vs = _mm512_set1_ps(scale);
    __m512 v[BK / 16];
    __mmask16 k[BK / 16];
    const int nv = (int)((ne + 15) / 16);
    __m512 lmax = _mm512_set1_ps(start);
    for (int i = 0; i < nv; i++) {
        int64_t left = ne - 16 * i;
        k[i] = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        v[i] = _mm512_mul_ps(_mm512_maskz_loadu_ps(k[i], s + 16 * i), vs);
        /* the row's lanes only; max gives its second operand for a NaN: NaNs are passed over */
        lmax = _mm512_mask_max_ps(lmax, k[i], v[i], lmax);
    }
    float mx = _mm512_reduce_max_ps(lmax);
    if (mx == -INFINITY) return 0;
    const __m512 vm = _mm512_set1_ps(mx);
    __m512 acc = _mm512_setzero_ps();
    for (int i = 0; i < nv; i++) { /* lanes past ne: exp of 0, zeroed (see exp_sub512_head) */
        __m512 e = _mm512_maskz_mov_ps(k[i], exp512(_mm512_maskz_sub_ps(k[i], v[i], vm)));
        _mm512_storeu_ps(s + 16 * i, e);
        acc = _mm512_add_ps(acc, e);
    }
    for (int64_t c = 16 * (int64_t)nv; c < bk; c += 16)
        _mm512_storeu_ps(s + c, _mm512_setzero_ps());
    float lane[16], sum = 0;
    _mm512_storeu_ps(lane, acc);
    for (int j = 0; j < 16; j++) sum += lane[j];
    *mx_out = mx;
    *sum_out = sum;
    return 1;
}
#else
static int fwd_row512(float *s, int64_t bk, int64_t ne, float scale, float start, float *mx_out,
                      float *sum_out) {
    (void)s, (void)bk, (void)ne, (void)scale, (void)start, (void)mx_out, (void)sum_out;
    return 0;
}
#endif

/* The body of each kernel, per dtype. Tiles are read in place where the rows are dense (a row's
 * elements adjacent: q, k, v split from one projection and transposed are still that), else
 * packed into the chunk's scratch; each tile carries its row distance (ld). The row loops are
 * compiled for AVX-512 and AVX2 as well (CPU_CLONES_512; CPU_CLONES_EXP where they run exp_f32). */
#define DEF_SDPA(T, SUF)                                                                           \
    /* rows [r0, r0 + nr) of view v of batch b: in place (*ld = the row stride) when each row is   \
     * dense and the stride fits the GEMM's int, else packed into dst (*ld = the row's length) */  \
    static const T *tile_##SUF(const sdpa_geom *G, const cn_view *v, int64_t b, int64_t r0,        \
                               int64_t nr, T *dst, int64_t *ld) {                                  \
        int nb = G->nb;                                                                            \
        int64_t rs = v->strides[nb], cs = v->strides[nb + 1], C = v->shape[nb + 1];                \
        const T *base = (const T *)v->data + batch_off(v, nb, b) + r0 * rs;                        \
        if ((cs == 1 || C <= 1) && rs >= C && rs <= INT32_MAX) {                                   \
            *ld = rs;                                                                              \
            return base;                                                                           \
        }                                                                                          \
        for (int64_t r = 0; r < nr; r++)                                                           \
            for (int64_t c = 0; c < C; c++) dst[r * C + c] = base[r * rs + c * cs];                \
        *ld = C;                                                                                   \
        return dst;                                                                                \
    }                                                                                              \
    /* rows [r0, r0 + nr) of batch b of output view v (any strides) = src [nr, C] dense, times s  \
     * when scaled */                                                                             \
    static void store_rows_##SUF(const sdpa_geom *G, const cn_view *v, int64_t b, int64_t r0,      \
                                 int64_t nr, const T *src, T s, int scaled) {                      \
        int nb = G->nb;                                                                            \
        int64_t rs = v->strides[nb], cs = v->strides[nb + 1], C = v->shape[nb + 1];                \
        T *base = (T *)v->data + batch_off(v, nb, b) + r0 * rs;                                    \
        for (int64_t r = 0; r < nr; r++)                                                           \
            for (int64_t c = 0; c < C; c++)                                                        \
                base[r * rs + c * cs] = scaled ? src[r * C + c] * s : src[r * C + c];              \
    }                                                                                              \
    /* S [bq, bk] = scale * Q K^T + mask, causal keys left out as -inf (raw: Q K^T alone, which   \
     * fwd_row512 scales and cuts) */                                                             \
    CPU_CLONES_512 static void scores_##SUF(const sdpa_geom *G, int64_t b, int64_t i0, int64_t bq, \
                                            int64_t j0, int64_t bk, const T *Q, int64_t ldq,       \
                                            const T *K, int64_t ldk, T *S, int raw) {              \
        mm(G->q->dtype, 0, 1, bq, bk, G->d, Q, ldq, K, ldk, 0.0, S, bk);                           \
        if (raw) return;                                                                           \
        const T scale = (T)G->scale, ninf = (T)-INFINITY;                                          \
        const cn_view *mv = G->mask;                                                               \
        const T *mb = mv ? (const T *)mv->data + batch_off(mv, G->nb, b) : NULL;                   \
        int64_t mrs = mv ? mv->strides[G->nb] : 0, mcs = mv ? mv->strides[G->nb + 1] : 0;          \
        for (int64_t r = 0; r < bq; r++) {                                                         \
            T *s = S + r * bk;                                                                     \
            for (int64_t c = 0; c < bk; c++) s[c] *= scale;                                        \
            if (mb) {                                                                              \
                const T *mrow = mb + (i0 + r) * mrs + j0 * mcs;                                    \
                for (int64_t c = 0; c < bk; c++) s[c] += mrow[c * mcs];                            \
            }                                                                                      \
            if (G->causal)                                                                         \
                for (int64_t c = i0 + r + 1 - j0 > 0 ? i0 + r + 1 - j0 : 0; c < bk; c++)           \
                    s[c] = ninf;                                                                   \
        }                                                                                          \
    }                                                                                              \
    /* P = exp(S - lse) per row, in place (0 where lse is -inf: a row with no key, and past the    \
     * causal mask's row_keys) */                                                                 \
    CPU_CLONES_EXP static void probs_##SUF(const sdpa_geom *G, int64_t i0, int64_t j0, int64_t bq, \
                                           int64_t bk, const T *lse, T *S) {                       \
        for (int64_t r = 0; r < bq; r++) {                                                         \
            T *s = S + r * bk, l = lse[r];                                                         \
            int64_t n = l == (T)-INFINITY ? 0 : row_keys(G, i0, r, j0, bk);                        \
            int64_t ne = row_keys_exact(G, i0, r, j0, bk);                                         \
            ne = ne < n ? ne : n;                                                                  \
            /* f32 on AVX-512: the 16-lane part by exp_sub512 (the same bits) */                   \
            int64_t c0 = CPU_EXP512_##SUF && cpu_has_avx512()                                      \
                             ? exp_sub512_row((float *)s, n, ne, (float)l, NULL)                   \
                             : 0;                                                                  \
            for (int64_t c = c0; c < n; c++) s[c] = EXP_##SUF(s[c] - l);                           \
            for (int64_t c = n; c < bk; c++) s[c] = 0;                                             \
        }                                                                                          \
    }                                                                                              \
    /* the largest of s[0, n) and start (NaNs are passed over: exp of NaN - max is NaN anyway) */  \
    CPU_CLONES_512 static T row_max_##SUF(const T *s, int64_t n, T start) {                        \
        T lane[MAX_LANES];                                                                         \
        for (int j = 0; j < MAX_LANES; j++) lane[j] = start;                                       \
        int64_t c = 0;                                                                             \
        for (; c + MAX_LANES <= n; c += MAX_LANES)                                                 \
            for (int j = 0; j < MAX_LANES; j++) lane[j] = s[c + j] > lane[j] ? s[c + j] : lane[j]; \
        T mx = start;                                                                              \
        for (int j = 0; j < MAX_LANES; j++) mx = lane[j] > mx ? lane[j] : mx;                      \
        for (; c < n; c++) mx = s[c] > mx ? s[c] : mx;                                             \
        return mx;                                                                                 \
    }                                                                                              \
    /* s[c] = exp(s[c] - mx) for c < n, and their sum, added in MAX_LANES lanes (one running sum   \
     * is a chain of dependent scalar adds that keeps the exp loop from vectorising) */            \
    CPU_CLONES_EXP static T exp_sum_##SUF(T *s, int64_t n, int64_t ne, T mx) {                     \
        T lane[MAX_LANES];                                                                         \
        for (int j = 0; j < MAX_LANES; j++) lane[j] = 0;                                           \
        int64_t c = CPU_EXP512_##SUF && cpu_has_avx512()                                           \
                        ? exp_sub512_row((float *)s, n, ne, (float)mx, (float *)lane)              \
                        : 0;                                                                       \
        for (; c + MAX_LANES <= n; c += MAX_LANES)                                                 \
            for (int j = 0; j < MAX_LANES; j++) {                                                  \
                s[c + j] = EXP_##SUF(s[c + j] - mx);                                               \
                lane[j] += s[c + j];                                                               \
            }                                                                                      \
        T sum = 0;                                                                                 \
        for (; c < n; c++) {                                                                       \
            s[c] = EXP_##SUF(s[c] - mx);                                                           \
            sum += s[c];                                                                           \
        }                                                                                          \
        for (int j = 0; j < MAX_LANES; j++) sum += lane[j];                                        \
        return sum;                                                                                \
    }                                                                                              \
    /* keys [0, kend) of query block [i0, i0 + bq): all, or up to the last row when causal */      \
    static int64_t key_end_##SUF(const sdpa_geom *G, int64_t i0, int64_t bq) {                     \
        return G->causal && i0 + bq < G->lk ? i0 + bq : G->lk;                                     \
    }                                                                                              \
    CPU_CLONES_EXP static void fwd_items_##SUF(void *ctx, int64_t chunk, int64_t begin,            \
                                               int64_t end) {                                      \
        const sdpa_geom *G = ctx;                                                                  \
        cn_dtype dt = G->q->dtype;                                                                 \
        int64_t D = G->d, Dv = G->dv, ldq, ldk, ldv;                                               \
        T *Qp = (T *)(G->scratch + (size_t)chunk * G->chunk_bytes);                                \
        T *Kp = Qp + BQ * D, *Vp = Kp + BK * D, *S = Vp + BK * Dv, *acc = S + BQ * BK;             \
        T *m = acc + BQ * Dv, *l = m + BQ;                                                         \
        for (int64_t it = begin; it < end; it++) {                                                 \
            int64_t b = it / G->nqb, i0 = (it % G->nqb) * BQ;                                      \
            int64_t bq = G->lq - i0 < BQ ? G->lq - i0 : BQ, kend = key_end_##SUF(G, i0, bq);       \
            const T *Q = tile_##SUF(G, G->q, b, i0, bq, Qp, &ldq);                                 \
            for (int64_t r = 0; r < bq; r++) m[r] = (T)-INFINITY, l[r] = 0;                        \
            memset(acc, 0, sizeof(T) * (size_t)(bq * Dv));                                         \
            for (int64_t j0 = 0; j0 < kend; j0 += BK) {                                            \
                int64_t bk = kend - j0 < BK ? kend - j0 : BK;                                      \
                const T *K = tile_##SUF(G, G->k, b, j0, bk, Kp, &ldk);                             \
                const T *V = tile_##SUF(G, G->v, b, j0, bk, Vp, &ldv);                             \
                /* f32 on AVX-512 without a mask, whole vectors: each row in one pass */          \
                int row512 = CPU_EXP512_##SUF && !G->mask && bk % 16 == 0 && cpu_has_avx512();     \
                scores_##SUF(G, b, i0, bq, j0, bk, Q, ldq, K, ldk, S, row512);                     \
                for (int64_t r = 0; r < bq; r++) {                                                 \
                    int64_t n = row_keys(G, i0, r, j0, bk), ne = row_keys_exact(G, i0, r, j0, bk); \
                    T *s = S + r * bk, mx, sum = 0;                                                \
                    if (row512 && ne > 0) {                                                        \
                        float fmx = 0, fsum = 0;                                                   \
                        int any = fwd_row512((float *)s, bk, ne, (float)G->scale, (float)m[r],     \
                                             &fmx, &fsum);                                         \
                        mx = any ? (T)fmx : (T)-INFINITY;                                          \
                        sum = (T)fsum;                                                             \
                    } else                                                                         \
                        mx = row_max_##SUF(s, row512 ? 0 : n, m[r]);                               \
                    if (mx == (T)-INFINITY) { /* no key yet in this row */                         \
                        for (int64_t c = 0; c < bk; c++) s[c] = 0;                                 \
                        continue;                                                                  \
                    }                                                                              \
                    /* exp(-inf) is +0: not computed (an underflow, see exp_sub512_head) */        \
                    T alpha = m[r] == (T)-INFINITY ? 0 : EXP_##SUF(m[r] - mx);                     \
                    if (!row512) sum = exp_sum_##SUF(s, n, ne, mx);                                \
                    l[r] = l[r] * alpha + sum;                                                     \
                    if (row512) n = ne > 0 ? bk : 0; /* fwd_row512 zeroed past ne */               \
                    for (int64_t c = n; c < bk; c++) s[c] = 0;                                     \
                    if (alpha != 1)                                                                \
                        for (int64_t c = 0; c < Dv; c++) acc[r * Dv + c] *= alpha;                 \
                    m[r] = mx;                                                                     \
                }                                                                                  \
                mm(dt, 0, 0, bq, Dv, bk, S, bk, V, ldv, 1.0, acc, Dv);                             \
            }                                                                                      \
            const cn_view *ov = &G->a->out[0]; /* any strides (the front-end's layout) */          \
            int64_t ors = ov->strides[G->nb], ocs = ov->strides[G->nb + 1];                        \
            T *o = (T *)ov->data + batch_off(ov, G->nb, b) + i0 * ors;                             \
            T *lse = (T *)G->a->out[1].data + b * G->lq + i0;                                      \
            for (int64_t r = 0; r < bq; r++) {                                                     \
                T inv = l[r] == 0 ? 0 : 1 / l[r];                                                  \
                for (int64_t c = 0; c < Dv; c++) o[r * ors + c * ocs] = acc[r * Dv + c] * inv;     \
                lse[r] = l[r] == 0 ? (T)-INFINITY : m[r] + (T)log((double)l[r]);                   \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    /* lse of rows [i0, i0 + bq) of batch b, packed */                                             \
    static void pack_lse_##SUF(const sdpa_geom *G, int64_t b, int64_t i0, int64_t bq, T *dst) {    \
        const cn_view *lv = G->lse;                                                                \
        const T *base = (const T *)lv->data + batch_off(lv, G->nb, b);                             \
        for (int64_t r = 0; r < bq; r++) dst[r] = base[(i0 + r) * lv->strides[G->nb]];             \
    }                                                                                              \
    /* dS = P * (G V^T - Dr) in place of P; dP's tile in W */                                      \
    CPU_CLONES_512 static void dscores_##SUF(const sdpa_geom *G, int64_t b, int64_t i0,            \
                                             int64_t bq, int64_t bk, const T *Gt, int64_t ldg,     \
                                             const T *V, int64_t ldv, T *P, T *W) {                \
        mm(G->q->dtype, 0, 1, bq, bk, G->dv, Gt, ldg, V, ldv, 0.0, W, bk);                         \
        const T *dr = (const T *)G->dr + b * G->lq + i0;                                           \
        for (int64_t r = 0; r < bq; r++)                                                           \
            for (int64_t c = 0; c < bk; c++)                                                       \
                P[r * bk + c] = P[r * bk + c] * (W[r * bk + c] - dr[r]);                           \
    }                                                                                              \
    /* The gradients from query block i0 of batch b over its keys: Dr of its rows, dQ (stored),    \
     * the mask's gradient rows when asked for, and, when dK and dV are given (the single pass),   \
     * this block's share added to dK and dV of all the keys. The scratch at Qp: the Q, G and O    \
     * tiles, K and V tiles, P, W, dQ, lse (the layout run_items sized). */                        \
    CPU_CLONES_512 static void query_block_##SUF(const sdpa_geom *G, T *Qp, int64_t b, int64_t i0, \
                                                 T *dK, T *dV) {                                   \
        const cn_kernel_args *a = G->a;                                                            \
        cn_dtype dt = G->q->dtype;                                                                 \
        int64_t D = G->d, Dv = G->dv, lk = G->lk, ldq, ldg, ldo, ldk, ldv;                         \
        T *Gp = Qp + BQ * D, *Op = Gp + BQ * Dv, *Kp = Op + BQ * Dv, *Vp = Kp + BK * D;            \
        T *P = Vp + BK * Dv, *W = P + BQ * BK, *dQ = W + BQ * BK, *lse = dQ + BQ * D;              \
        T *dmask = a->n_out > 3 ? (T *)a->out[3].data : NULL;                                      \
        int64_t bq = G->lq - i0 < BQ ? G->lq - i0 : BQ, kend = key_end_##SUF(G, i0, bq);           \
        const T *Q = tile_##SUF(G, G->q, b, i0, bq, Qp, &ldq);                                     \
        const T *Gt = tile_##SUF(G, G->g, b, i0, bq, Gp, &ldg);                                    \
        const T *O = tile_##SUF(G, G->o, b, i0, bq, Op, &ldo);                                     \
        pack_lse_##SUF(G, b, i0, bq, lse);                                                         \
        T *dr = (T *)G->dr + b * G->lq + i0;                                                       \
        for (int64_t r = 0; r < bq; r++) {                                                         \
            T s = 0;                                                                               \
            for (int64_t c = 0; c < Dv; c++) s += Gt[r * ldg + c] * O[r * ldo + c];                \
            dr[r] = s;                                                                             \
        }                                                                                          \
        T *dm = dmask ? dmask + (b * G->lq + i0) * lk : NULL;                                      \
        if (dm) memset(dm, 0, sizeof(T) * (size_t)(bq * lk));                                      \
        memset(dQ, 0, sizeof(T) * (size_t)(bq * D));                                               \
        for (int64_t j0 = 0; j0 < kend; j0 += BK) {                                                \
            int64_t bk = kend - j0 < BK ? kend - j0 : BK;                                          \
            const T *K = tile_##SUF(G, G->k, b, j0, bk, Kp, &ldk);                                 \
            const T *V = tile_##SUF(G, G->v, b, j0, bk, Vp, &ldv);                                 \
            scores_##SUF(G, b, i0, bq, j0, bk, Q, ldq, K, ldk, P, 0);                              \
            probs_##SUF(G, i0, j0, bq, bk, lse, P);                                                \
            if (dV) mm(dt, 1, 0, bk, Dv, bq, P, bk, Gt, ldg, 1.0, dV + j0 * Dv, Dv);               \
            dscores_##SUF(G, b, i0, bq, bk, Gt, ldg, V, ldv, P, W);                                \
            if (dm)                                                                                \
                for (int64_t r = 0; r < bq; r++)                                                   \
                    memcpy(dm + r * lk + j0, P + r * bk, sizeof(T) * (size_t)bk);                  \
            mm(dt, 0, 0, bq, D, bk, P, bk, K, ldk, 1.0, dQ, D);                                    \
            if (dK) mm(dt, 1, 0, bk, D, bq, P, bk, Q, ldq, 1.0, dK + j0 * D, D);                   \
        }                                                                                          \
        store_rows_##SUF(G, &a->out[0], b, i0, bq, dQ, (T)G->scale, 1);                            \
    }                                                                                              \
    /* pass 1: Dr, dQ and the mask's gradient, per (b, query block) */                             \
    CPU_CLONES_512 static void bwd_q_items_##SUF(void *ctx, int64_t chunk, int64_t begin,          \
                                                 int64_t end) {                                    \
        const sdpa_geom *G = ctx;                                                                  \
        T *Qp = (T *)(G->scratch + (size_t)chunk * G->chunk_bytes);                                \
        for (int64_t it = begin; it < end; it++)                                                   \
            query_block_##SUF(G, Qp, it / G->nqb, (it % G->nqb) * BQ, NULL, NULL);                 \
    }                                                                                              \
    /* pass 2: dK and dV, per (b, key block) */                                                    \
    CPU_CLONES_512 static void bwd_kv_items_##SUF(void *ctx, int64_t chunk, int64_t begin,         \
                                                  int64_t end) {                                   \
        const sdpa_geom *G = ctx;                                                                  \
        const cn_kernel_args *a = G->a;                                                            \
        cn_dtype dt = G->q->dtype;                                                                 \
        int64_t D = G->d, Dv = G->dv, ldq, ldg, ldk, ldv;                                          \
        T *Qp = (T *)(G->scratch + (size_t)chunk * G->chunk_bytes);                                \
        T *Gp = Qp + BQ * D, *Kp = Gp + BQ * Dv, *Vp = Kp + BK * D, *P = Vp + BK * Dv;             \
        T *W = P + BQ * BK, *dK = W + BQ * BK, *dV = dK + BK * D, *lse = dV + BK * Dv;             \
        for (int64_t it = begin; it < end; it++) {                                                 \
            int64_t b = it / G->nkb, j0 = (it % G->nkb) * BK;                                      \
            int64_t bk = G->lk - j0 < BK ? G->lk - j0 : BK;                                        \
            const T *K = tile_##SUF(G, G->k, b, j0, bk, Kp, &ldk);                                 \
            const T *V = tile_##SUF(G, G->v, b, j0, bk, Vp, &ldv);                                 \
            memset(dK, 0, sizeof(T) * (size_t)(bk * D));                                           \
            memset(dV, 0, sizeof(T) * (size_t)(bk * Dv));                                          \
            /* causal: only queries i >= j0 see these keys */                                      \
            for (int64_t i0 = G->causal ? j0 / BQ * BQ : 0; i0 < G->lq; i0 += BQ) {                \
                int64_t bq = G->lq - i0 < BQ ? G->lq - i0 : BQ;                                    \
                const T *Q = tile_##SUF(G, G->q, b, i0, bq, Qp, &ldq);                             \
                const T *Gt = tile_##SUF(G, G->g, b, i0, bq, Gp, &ldg);                            \
                pack_lse_##SUF(G, b, i0, bq, lse);                                                 \
                scores_##SUF(G, b, i0, bq, j0, bk, Q, ldq, K, ldk, P, 0);                          \
                probs_##SUF(G, i0, j0, bq, bk, lse, P);                                            \
                mm(dt, 1, 0, bk, Dv, bq, P, bk, Gt, ldg, 1.0, dV, Dv);                             \
                dscores_##SUF(G, b, i0, bq, bk, Gt, ldg, V, ldv, P, W);                            \
                mm(dt, 1, 0, bk, D, bq, P, bk, Q, ldq, 1.0, dK, D);                                \
            }                                                                                      \
            store_rows_##SUF(G, &a->out[1], b, j0, bk, dK, (T)G->scale, 1);                        \
            store_rows_##SUF(G, &a->out[2], b, j0, bk, dV, 1, 0);                                  \
        }                                                                                          \
    }                                                                                              \
    /* both passes in one, per batch index b (enough of them for every thread): P and dS of each   \
     * tile computed once and used for dQ, dK and dV, whose sums over a batch index's tiles are    \
     * this chunk's alone (dK and dV of all its keys in the scratch). The same tiles as the two    \
     * passes, and the same order of the sums over query blocks. */                                \
    CPU_CLONES_512 static void bwd_one_pass_items_##SUF(void *ctx, int64_t chunk, int64_t begin,   \
                                                        int64_t end) {                             \
        const sdpa_geom *G = ctx;                                                                  \
        const cn_kernel_args *a = G->a;                                                            \
        int64_t D = G->d, Dv = G->dv, lk = G->lk;                                                  \
        T *Qp = (T *)(G->scratch + (size_t)chunk * G->chunk_bytes);                                \
        /* after query_block's scratch: dK and dV of all the keys */                               \
        T *dK = Qp + query_block_elems(D, Dv), *dV = dK + lk * D;                                  \
        for (int64_t b = begin; b < end; b++) {                                                    \
            memset(dK, 0, sizeof(T) * (size_t)(lk * D));                                           \
            memset(dV, 0, sizeof(T) * (size_t)(lk * Dv));                                          \
            for (int64_t i0 = 0; i0 < G->lq; i0 += BQ) query_block_##SUF(G, Qp, b, i0, dK, dV);    \
            store_rows_##SUF(G, &a->out[1], b, 0, lk, dK, (T)G->scale, 1);                         \
            store_rows_##SUF(G, &a->out[2], b, 0, lk, dV, 1, 0);                                   \
        }                                                                                          \
    }

DEF_SDPA(float, f32)
DEF_SDPA(double, f64)

/* Fills the geometry from q (in[qi]), k, v and the mask (in[mi], or none); checks that the
 * tiles' sizes fit the GEMM's ints and size_t. */
static cn_status geom_of(const cn_kernel_args *a, int qi, int mi, sdpa_geom *G) {
    memset(G, 0, sizeof *G);
    G->a = a;
    G->q = &a->in[qi];
    G->k = &a->in[qi + 1];
    G->v = &a->in[qi + 2];
    G->mask = mi < a->n_in ? &a->in[mi] : NULL;
    G->nb = G->q->ndim - 2;
    G->batch = 1;
    for (int d = 0; d < G->nb; d++) G->batch *= G->q->shape[d];
    G->lq = G->q->shape[G->nb];
    G->lk = G->k->shape[G->nb];
    G->d = G->q->shape[G->nb + 1];
    G->dv = G->v->shape[G->nb + 1];
    G->causal = a->ints[0] != 0;
    G->scale = a->reals[0];
    G->nqb = (G->lq + BQ - 1) / BQ;
    G->nkb = (G->lk + BK - 1) / BK;
    if (G->d > INT32_MAX / (2 * BQ) || G->dv > INT32_MAX / (2 * BQ))
        return cn_set_error(CN_ERR_OVERFLOW, cn_op_name(a->op), "the feature sizes (D %lld, Dv "
                            "%lld) exceed the GEMM's int sizes; split them",
                            (long long)G->d, (long long)G->dv);
    return CN_OK;
}

/* Runs fn over n items on the pool, each chunk with `elems` elements of scratch. */
static cn_status run_items(sdpa_geom *G, int64_t n, int64_t work_per_item, int64_t elems,
                           cpu_range_fn fn) {
    size_t es = G->q->dtype == CN_F32 ? sizeof(float) : sizeof(double);
    int64_t chunks = cpu_chunks(n * (work_per_item > 0 ? work_per_item : 1), CPU_PARALLEL_GRAIN);
    if (chunks > n) chunks = n;
    if (chunks < 1) chunks = 1;
    G->chunk_bytes = ((size_t)elems * es + 63) / 64 * 64; /* no two chunks share a cache line */
    G->scratch = cn__malloc(cn_op_name(G->a->op), G->chunk_bytes * (size_t)chunks);
    if (!G->scratch) return CN_ERR_OUT_OF_MEMORY;
    cpu_parallel(n, chunks, fn, G);
    cn__free(G->scratch);
    G->scratch = NULL;
    return CN_OK;
}

cn_status cpu_sdpa(const cn_kernel_args *a) {
    sdpa_geom G;
    cn_status s = geom_of(a, 0, 3, &G);
    if (s != CN_OK) return s;
    int64_t D = G.d, Dv = G.dv;
    /* Q, K, V, S, acc, m, l */
    int64_t elems = BQ * D + BK * D + BK * Dv + BQ * BK + BQ * Dv + 2 * BQ;
    int64_t work = BQ * G.lk * (D + Dv);
    return run_items(&G, G.batch * G.nqb, work, elems,
                     a->in[0].dtype == CN_F32 ? fwd_items_f32 : fwd_items_f64);
}

cn_status cpu_sdpa_backward(const cn_kernel_args *a) {
    sdpa_geom G;
    cn_status s = geom_of(a, 1, 6, &G);
    if (s != CN_OK) return s;
    G.g = &a->in[0];
    G.o = &a->in[4];
    G.lse = &a->in[5];
    int f32 = a->in[0].dtype == CN_F32;
    size_t es = f32 ? sizeof(float) : sizeof(double);
    G.dr = cn__malloc(cn_op_name(a->op), (size_t)(G.batch * G.lq) * es + 1);
    if (!G.dr) return CN_ERR_OUT_OF_MEMORY;
    int64_t D = G.d, Dv = G.dv;
    int64_t work = BQ * G.lk * (2 * D + 2 * Dv);
    /* one pass per batch index when there are enough of them for the threads and a batch
     * index's dK and dV fit the scratch (as the GPT's [B, heads, T, hs] with T <= 512): P and dS
     * are computed once instead of once per pass. Scratch: pass 1's, and dK, dV of all keys */
    int64_t e0 = query_block_elems(D, Dv) + G.lk * (D + Dv);
    if (G.lk > 0 && G.batch >= 2 * (int64_t)cpu_threads() && G.lk <= ONE_PASS_KEYS &&
        G.lk * (D + Dv) <= ONE_PASS_ELEMS) {
        s = run_items(&G, G.batch, work * G.nqb, e0,
                      f32 ? bwd_one_pass_items_f32 : bwd_one_pass_items_f64);
        cn__free(G.dr);
        return s;
    }
    int64_t e1 = query_block_elems(D, Dv); /* pass 1 */
    s = run_items(&G, G.batch * G.nqb, work, e1, f32 ? bwd_q_items_f32 : bwd_q_items_f64);
    /* pass 2: Q, G, K, V, P, W, dK, dV, lse */
    int64_t e2 = BQ * D + BQ * Dv + 2 * BK * D + 2 * BK * Dv + 2 * BQ * BK + BQ;
    if (s == CN_OK && G.lk > 0)
        s = run_items(&G, G.batch * G.nkb, work, e2, f32 ? bwd_kv_items_f32 : bwd_kv_items_f64);
    cn__free(G.dr);
    return s;
}
