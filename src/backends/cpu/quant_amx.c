/* The quantized linear of the block schemes (q8_block, q4_block) on the AMX tile unit (amx-int8),
 * for 6 activation rows or more (fewer than 16 padded to a tile): the batch case, where VNNI's
 * per-block scaling costs more than the integer products (docs/benchmarks.md, issue 19).
 *
 * A block of 32 is one tile product: TDPBSSD multiplies a 16 x 32 tile of int8 weights (16 output
 * columns n, one block) by an 8 x 64 tile of int8 activations (the same block of 16 rows m, each
 * row's 4 consecutive bytes in one int32 lane) into a 16 x 16 int32 tile: dot_b[n][m], exact.
 * The tile is stored to memory and scaled in f32 as the VNNI tile kernel does (over b in order: C =
 * fma(f32(dot_b), dw_b, C), then C dx + bias, dx the row's scale), so both give the same bits. The
 * weights need no repacking: a q8 row block is 32 consecutive bytes, so the A tile is read from the
 * weight in place (stride: its row); q4 rows are unpacked per panel of 16 rows as [low nibbles,
 * high nibbles] - 8 (vpermb of a 16-entry table), with the activations quantized in the matching
 * order (quant_block512), into one of two buffers: the next panel's while this one's tiles run, a
 * few units of 4 blocks of a row each step of the block loop (the vector units have room beside the
 * tile unit; unpacking a panel before its tiles cost ~22% of q4's time). The rows of the panel read
 * after that are prefetched into L2 meanwhile. The activations are quantized once per call into the
 * B tiles' layout. Two tiles of activation rows run against each weight tile loaded (32 sums in
 * registers): a tile load of weight rows costs about a third of a block's time.
 *
 * The threads split the panels of 16 output columns; each loads the tile configuration at the
 * start of its chunk and releases the tiles at its end. Linux grants the tile data state only to
 * a process that asks (arch_prctl, Linux 5.16+); cpu_amx_ready asks once, and without it (or
 * without AMX or AVX512_VBMI, which every AMX CPU has) the VNNI kernels run. */
#define _GNU_SOURCE /* syscall */
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "core/alloc.h"

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backends/cpu/quant_x86.h"

#define T_AMX                                                                                      \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni,avx512vbmi,"         \
                          "amx-tile,amx-int8")))

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA  18

static int amx_ok;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void amx_probe(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    if (!((d >> 24) & 1u) || !((d >> 25) & 1u)) return; /* AMX-TILE, AMX-INT8 */
    if (!((c >> 1) & 1u)) return;                       /* AVX512_VBMI (vpermb: the q4 unpacking) */
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) return;
    amx_ok = 1;
}

int cpu_amx_ready(void) {
    pthread_once(&amx_once, amx_probe);
    return amx_ok;
}

/* The tile configuration (palette 1): tiles 0 and 4 the weights (16 rows of 32 bytes), 1 and 5
 * the activations (8 rows of 64 bytes), 2 and 3 the int32 dots (16 rows of 64 bytes); two of each
 * so that the next block's product runs while this one's is scaled. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

typedef struct ajob {
    const cpu_qlinear *q;
    int64_t tiles; /* tiles of 16 activation rows */
    int8_t *xb; /* [tiles][nb][8][64]: lane r of row t of block b holds bytes 4t..4t+3 of row r */
    float *dx;  /* [tiles][16]: the activation rows' scales (0 past M) */
    int failed;
} ajob;

T_AMX static void amx_quantize_rows(void *ctx, int64_t chunk, int64_t m0, int64_t m1) {
    (void)chunk;
    ajob *j = ctx;
    const int64_t nb = j->q->nb;
    const __m256i lanes = _mm256_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112);
    for (int64_t m = m0; m < m1; m++) {
        const float *x = j->q->x + m * 32 * nb;
        int64_t t = m / 16, r = m % 16;
        float id;
        j->dx[t * 16 + r] = quant_row_scale512(x, 32 * nb, &id);
        for (int64_t b = 0; b < nb; b++) {
            const __m256i bytes = quant_block512(x + 32 * b, id, j->q->q4);
            _mm256_i32scatter_epi32(j->xb + (t * nb + b) * 512 + 4 * r, lanes, bytes, 4);
        }
    }
}

/* Block b of the panel's dots (cbuf, [n][m] int32) scaled by the weight rows' scales into acc[n]
 * (lanes m). */
T_AMX static inline __attribute__((always_inline)) void scale_block(__m512 acc[16],
                                                                    const int32_t *cbuf,
                                                                    const float *ws, int64_t nb) {
#pragma GCC unroll 16
    for (int r = 0; r < 16; r++)
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cbuf + 16 * r)),
                                 _mm512_set1_ps(ws[r * nb]), acc[r]);
}

/* A panel's weight rows in tile order: row r's blocks at abuf + r * astride, 32 bytes a block
 * (q4: [low nibbles, high nibbles] - 8), rows past N zeros. Unpacked in units of 4 blocks of a
 * row (row-major: each row read in order), some at a time while the previous panel's tiles run
 * (the vector units have room beside the tile unit, and the weight's reads overlap it). */
typedef struct aunpack {
    const uint8_t *row[16]; /* NULL: a row past N */
    int8_t *abuf;
    int64_t unit, units; /* the next unit; 16 * groups of 4 blocks */
    int64_t r, g;        /* the next unit's row and group */
} aunpack;

/* A 64-byte table: entry i = (i & 15) - 8, a nibble's int8 value by vpermb (6 index bits) */
static const int8_t nib_table[64] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7,
                                     -8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7,
                                     -8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7,
                                     -8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};

/* Units [u->unit, u->unit + count) of the panel (fewer at its end); Q4: the scheme. */
T_AMX static inline __attribute__((always_inline)) void
amx_unpack_some(int Q4, int64_t nb, aunpack *u, int64_t count, int64_t astride) {
    const int64_t ng = (nb + 3) / 4;
    const __m512i tbl = _mm512_loadu_si512(nib_table);
    const __m512i lo01 = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11),
                  lo23 = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
    int64_t r = u->r, g = u->g;
    for (int64_t end = u->unit + count < u->units ? u->unit + count : u->units; u->unit < end;
         u->unit++) {
        const int64_t left = nb - 4 * g;
        int8_t *d = u->abuf + r * astride + 128 * g;
        const uint8_t *src = u->row[r];
        __m512i v0, v1;
        if (!src) {
            v0 = v1 = _mm512_setzero_si512();
        } else if (Q4) {
            src += 64 * g;
            /* a few lines on in this row, toward L1 (the row streams from L2 or beyond) */
            if (g + 8 < ng) _mm_prefetch((const char *)src + 512, _MM_HINT_T0);
            __m512i z = left >= 4 ? _mm512_loadu_si512(src)
                                  : _mm512_maskz_loadu_epi8((1ull << (16 * left)) - 1, src);
            __m512i lo = _mm512_permutexvar_epi8(z, tbl);
            __m512i hi = _mm512_permutexvar_epi8(_mm512_srli_epi16(z, 4), tbl);
            v0 = _mm512_permutex2var_epi64(lo, lo01, hi); /* [lo b, hi b, lo b+1, hi b+1] */
            v1 = _mm512_permutex2var_epi64(lo, lo23, hi);
        } else {
            src += 128 * g;
            if (g + 4 < ng) _mm_prefetch((const char *)src + 512, _MM_HINT_T0);
            v0 = left >= 2 ? _mm512_loadu_si512(src)
                           : _mm512_maskz_loadu_epi8((1ull << (32 * left)) - 1, src);
            v1 = left >= 4   ? _mm512_loadu_si512(src + 64)
                 : left == 3 ? _mm512_maskz_loadu_epi8(0xFFFFFFFFull, src + 64)
                             : _mm512_setzero_si512();
        }
        _mm512_store_si512(d, v0);
        _mm512_store_si512(d + 64, v1);
        if (++g == ng) {
            g = 0;
            r++;
        }
    }
    u->r = r;
    u->g = g;
}

/* Block b of two tiles' dots (c0, c1: [n][m] int32) scaled into acc[n] and acc[16 + n], each
 * as scale_block does (the same bits). */
T_AMX static inline __attribute__((always_inline)) void
scale_block2(__m512 acc[32], const int32_t *c0, const int32_t *c1, const float *ws, int64_t nb) {
#pragma GCC unroll 16 /* the 32 sums stay in registers only when the loop is unrolled */
    for (int r = 0; r < 16; r++) {
        __m512 w = _mm512_set1_ps(ws[r * nb]);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c0 + 16 * r)), w, acc[r]);
        acc[16 + r] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c1 + 16 * r)), w, acc[16 + r]);
    }
}

/* The prefetch into L2 of a panel read later: a few of its rows' lines each step */
typedef struct apf {
    const uint8_t *base;
    int64_t stride, rows, lpr, total, step;
    int64_t at, row, line; /* the next line */
} apf;

static inline __attribute__((always_inline)) void apf_some(apf *p) {
    for (int64_t i = 0; i < p->step && p->at < p->total; i++, p->at++) {
        if (p->row < p->rows)
            _mm_prefetch((const char *)p->base + p->row * p->stride + 64 * p->line, _MM_HINT_T1);
        if (++p->line == p->lpr) {
            p->line = 0;
            p->row++;
        }
    }
}

/* A panel of 16 output columns, as amx_rows runs it against tiles of activation rows */
typedef struct atiles {
    const int8_t *abase; /* the panel's weight rows (block b at abase + 32 b) */
    int64_t astride, nb;
    const float *ws;  /* the rows' block scales, [16][nb] */
    aunpack *next;    /* the next panel's unpacking, some units each step */
    int q4;
    int64_t per_step, ustride;
    apf *pf;
    float *y;
    int64_t M, N, n0, nn;
    __m512 bias; /* lanes n */
} atiles;

/* Tile t of activation rows (their scales at dx0, 16 a tile) against the panel (TWO: tiles t
 * and t + 1, each weight tile loaded once for both) into y. A software pipeline over the blocks:
 * block b + 1's products start before block b's dots are stored, and those are scaled one step
 * later, after block b + 1's stores, so that neither the tile unit nor the vector units wait on
 * the other's latency (tiles 0, 1, 5 and 2, 3 the even blocks; 4, 1 or 5, and 6, 7 the odd ones;
 * cbuf[b % 2]). */
T_AMX static inline __attribute__((always_inline)) void
amx_rows(const int TWO, const atiles *c, const int8_t *xb0, const float *dx0, int64_t t) {
    const int8_t *const abase = c->abase, *const xb1 = xb0 + c->nb * 512;
    const int64_t astride = c->astride, nb = c->nb, per_step = c->per_step, ustride = c->ustride;
    const float *const ws = c->ws;
    const int q4 = c->q4;
    _Alignas(64) int32_t cbuf[2][2][256];
    __m512 acc[32];
#pragma GCC unroll 32
    for (int r = 0; r < 32; r++)
        acc[r] = _mm512_setzero_ps();
/* block b's products: weights into tile ta, the first tile's activations into tb (the second's
 * into 5), the dots into c0 (and c1); a macro because tile numbers are immediates (abase, astride:
 * the panel's weight rows, in place or unpacked) */
#define AMX_ISSUE(ta, tb, c0, c1, b)                                                               \
    do {                                                                                           \
        _tile_loadd(ta, abase + 32 * (b), astride);                                                \
        _tile_zero(c0);                                                                            \
        _tile_loadd(tb, xb0 + (b)*512, 64);                                                        \
        _tile_dpbssd(c0, ta, tb);                                                                  \
        if (TWO) {                                                                                 \
            _tile_zero(c1);                                                                        \
            _tile_loadd(5, xb1 + (b)*512, 64);                                                     \
            _tile_dpbssd(c1, ta, 5);                                                               \
        }                                                                                          \
    } while (0)
#define AMX_SCALE(cb, b)                                                                           \
    do {                                                                                           \
        if (TWO)                                                                                   \
            scale_block2(acc, (cb)[0], (cb)[1], ws + (b), nb);                                     \
        else                                                                                       \
            scale_block(acc, (cb)[0], ws + (b), nb);                                               \
    } while (0)
    AMX_ISSUE(0, 1, 2, 3, 0);
    int64_t b = 0;
    for (; b < nb; b += 2) {
        apf_some(c->pf);
        if (b + 1 < nb) {
            if (TWO)
                AMX_ISSUE(4, 1, 6, 7, b + 1);
            else
                AMX_ISSUE(4, 5, 6, 7, b + 1);
        }
        if (per_step) {
            if (q4)
                amx_unpack_some(1, nb, c->next, per_step, ustride);
            else
                amx_unpack_some(0, nb, c->next, per_step, ustride);
        }
        _tile_stored(2, cbuf[0][0], 64);
        if (TWO) _tile_stored(3, cbuf[0][1], 64);
        if (b > 0) AMX_SCALE(cbuf[1], b - 1);
        if (b + 1 >= nb) {
            AMX_SCALE(cbuf[0], b);
            break;
        }
        if (b + 2 < nb) AMX_ISSUE(0, 1, 2, 3, b + 2);
        _tile_stored(6, cbuf[1][0], 64);
        if (TWO) _tile_stored(7, cbuf[1][1], 64);
        AMX_SCALE(cbuf[0], b);
    }
    if (b == nb) AMX_SCALE(cbuf[1], nb - 1);
#undef AMX_ISSUE
#undef AMX_SCALE
    /* the [n][m] sums into rows m of y */
    const __m512i gather =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(16));
    const __mmask16 k = c->nn == 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << c->nn) - 1u);
    float *tmp = (float *)cbuf; /* [2][256]: the sums times the rows' scales, [n][m] */
    const __m512 d0 = _mm512_loadu_ps(dx0);
#pragma GCC unroll 16
    for (int r = 0; r < 16; r++)
        _mm512_store_ps(tmp + 16 * r, _mm512_mul_ps(acc[r], d0));
    if (TWO) {
        const __m512 d1 = _mm512_loadu_ps(dx0 + 16);
#pragma GCC unroll 16
        for (int r = 0; r < 16; r++)
            _mm512_store_ps(tmp + 256 + 16 * r, _mm512_mul_ps(acc[16 + r], d1));
    }
    for (int u = 0; u < (TWO ? 2 : 1); u++) {
        for (int64_t m = 0; m < 16 && 16 * (t + u) + m < c->M; m++) {
            __m512 v = _mm512_i32gather_ps(_mm512_add_epi32(gather, _mm512_set1_epi32((int)m)),
                                           tmp + 256 * u, 4);
            _mm512_mask_storeu_ps(c->y + (16 * (t + u) + m) * c->N + c->n0, k,
                                  _mm512_add_ps(v, c->bias));
        }
    }
}

/* Panels [p0, p1) of 16 output columns against every tile of activation rows. */
T_AMX static void amx_panels(void *ctx, int64_t chunk, int64_t p0, int64_t p1) {
    (void)chunk;
    ajob *j = ctx;
    const cpu_qlinear *q = j->q;
    const int64_t nb = q->nb, N = q->N, M = q->M, ng = (nb + 3) / 4;
    const int64_t ustride = 128 * ng + 64; /* + a line: rows 4 KiB apart would share L1 sets */
    int8_t *mem = cn__malloc("quant_linear", (size_t)(2 * 16 * ustride + 64));
    float *ws = cn__malloc("quant_linear", (size_t)(16 * nb + 16) * sizeof(float));
    if (!mem || !ws) {
        j->failed = 1; /* the error is set; the caller reports it */
        cn__free(mem);
        cn__free(ws);
        return;
    }
    int8_t *abufs[2] = {(int8_t *)(((uintptr_t)mem + 63) & ~(uintptr_t)63), NULL};
    abufs[1] = abufs[0] + 16 * ustride;
    _Alignas(64) tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        int a = t == 0 || t == 4, b = t == 1 || t == 5;
        cfg.rows[t] = b ? 8 : 16;
        cfg.colsb[t] = a ? 32 : 64;
    }
    _tile_loadconfig(&cfg);
    /* A whole panel of q8 rows is read in place by the tiles (a copy costs more than it saves,
     * measured, even made beside the previous panel's tiles as q4's unpacking: 4.5-4.8 ms
     * against 3.3-3.7 at batch 64, one thread); q4 rows, and the rows of a last partial panel
     * (zeros past N), are unpacked */
#define AMX_DIRECT(p) (!q->q4 && N - 16 * (p) >= 16)
    /* the scheme a constant of each instance: the unpacking's stores (int8) may alias *q */
#define AMX_UNPACK(count)                                                                          \
    do {                                                                                           \
        if (q4)                                                                                    \
            amx_unpack_some(1, nb, &next, count, ustride);                                         \
        else                                                                                       \
            amx_unpack_some(0, nb, &next, count, ustride);                                         \
    } while (0)
    const int q4 = q->q4;
    aunpack next = {.units = 0};
    for (int64_t p = p0; p < p1; p++) {
        const int64_t n0 = 16 * p, nn = N - n0 < 16 ? N - n0 : 16;
        const int direct = AMX_DIRECT(p);
        const int8_t *abase = (const int8_t *)q->w + q->w_off + n0 * q->w_s0;
        int64_t astride = q->w_s0;
        if (!direct) {
            /* the first panel of the chunk (else the previous one unpacked it meanwhile) */
            if (next.units == 0) {
                next.abuf = abufs[p & 1];
                for (int64_t r = 0; r < 16; r++) {
                    int64_t e0 = q->w_off + (n0 + r) * q->w_s0;
                    next.row[r] = r < nn ? q->w + (q->q4 ? e0 >> 1 : e0) : NULL;
                }
                next.unit = next.r = next.g = 0;
                next.units = 16 * ng;
            }
            AMX_UNPACK(next.units);
            abase = abufs[p & 1];
            astride = ustride;
        }
        /* the next panel's, some units each step of this one's tiles */
        next.units = 0;
        if (p + 1 < p1 && !AMX_DIRECT(p + 1)) {
            const int64_t m0 = n0 + 16, mm = N - m0 < 16 ? N - m0 : 16;
            next.abuf = abufs[(p + 1) & 1];
            for (int64_t r = 0; r < 16; r++) {
                int64_t e0 = q->w_off + (m0 + r) * q->w_s0;
                next.row[r] = r < mm ? q->w + (q->q4 ? e0 >> 1 : e0) : NULL;
            }
            next.unit = next.r = next.g = 0;
            next.units = 16 * ng;
        }
        const int64_t steps = (j->tiles + 1) / 2 * ((nb + 1) / 2);
        const int64_t per_step = (next.units + steps - 1) / steps;
        for (int64_t r = 0; r < 16; r++) {
            const uint8_t *sc =
                q->scales + 2 * ((q->w_off + (n0 + (r < nn ? r : 0)) * q->w_s0) / 32);
            for (int64_t g = 0; g < nb; g += 16) {
                __mmask16 k = nb - g >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (nb - g)) - 1u);
                _mm512_mask_storeu_ps(ws + r * nb + g, k,
                                      _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, sc + 2 * g)));
            }
        }
        __m512 bias = _mm512_setzero_ps();
        if (q->bias)
            for (int64_t r = 0; r < nn; r++)
                ((float *)&bias)[r] = q->bias[(n0 + r) * q->bias_stride];
        /* the rows of the panel read next (in place: the next one; unpacked: the one after, as
         * the next one is unpacked meanwhile) fetched into L2, a few lines each step */
        const int64_t pfp = AMX_DIRECT(p + 1) ? p + 1 : p + 2;
        apf pf = {.lpr = ((q->q4 ? 16 : 32) * nb + 63) / 64};
        pf.total = pfp < p1 ? 16 * pf.lpr : 0;
        pf.step = (pf.total + steps - 1) / steps;
        pf.base =
            q->w + (q->q4 ? (q->w_off + 16 * pfp * q->w_s0) >> 1 : q->w_off + 16 * pfp * q->w_s0);
        pf.stride = q->q4 ? q->w_s0 >> 1 : q->w_s0;
        pf.rows = N - 16 * pfp < 16 ? N - 16 * pfp : 16;
        atiles c = {.abase = abase, .astride = astride, .nb = nb, .ws = ws, .next = &next,
                    .q4 = q4, .per_step = per_step, .ustride = ustride, .pf = &pf, .y = q->y,
                    .M = M, .N = N, .n0 = n0, .nn = nn, .bias = bias};
        /* two tiles of activation rows share each weight tile (a load of the weights costs about
         * a third of a product's time); a last odd tile on its own */
        for (int64_t t = 0; t < j->tiles; t += 2)
            if (t + 1 < j->tiles)
                amx_rows(1, &c, j->xb + t * nb * 512, j->dx + t * 16, t);
            else
                amx_rows(0, &c, j->xb + t * nb * 512, j->dx + t * 16, t);
        AMX_UNPACK(next.units); /* what the steps left, if any */
    }
#undef AMX_DIRECT
#undef AMX_UNPACK
    _tile_release();
    cn__free(mem);
    cn__free(ws);
}

cn_status cpu_quant_linear_amx(const cpu_qlinear *q) {
    ajob j = {.q = q, .tiles = (q->M + 15) / 16};
    const int64_t nb = q->nb;
    size_t xbytes = (size_t)(j.tiles * nb * 512);
    j.xb = cn__malloc("quant_linear", xbytes + 64);
    j.dx = j.xb ? cn__malloc("quant_linear", (size_t)(j.tiles * 16 + 16) * sizeof(float)) : NULL;
    if (!j.dx) {
        cn__free(j.xb);
        return CN_ERR_OUT_OF_MEMORY;
    }
    if (q->M % 16) { /* the rows past M: zero activations and scales */
        memset(j.xb, 0, xbytes);
        memset(j.dx, 0, (size_t)(j.tiles * 16) * sizeof(float));
    }
    double work = (double)q->M * 32.0 * (double)nb;
    cpu_parallel(q->M, work >= 65536.0 ? cpu_chunks(q->M, 1 + 65536 / (32 * nb + 1)) : 1,
                 amx_quantize_rows, &j);
    int64_t panels = (q->N + 15) / 16, most = 16 * (int64_t)cpu_threads();
    double macs = work * (double)q->N;
    cpu_parallel(panels, macs >= 262144.0 ? (panels < most ? panels : most) : 1, amx_panels, &j);
    cn__free(j.xb);
    cn__free(j.dx);
    return j.failed ? CN_ERR_OUT_OF_MEMORY : CN_OK;
}

#else

int cpu_amx_ready(void) { return 0; }

cn_status cpu_quant_linear_amx(const cpu_qlinear *q) {
    (void)q;
    return CN_ERR_BACKEND;
}

#endif
