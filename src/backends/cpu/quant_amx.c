/* The quantized linear of the block schemes (q8_block, q4_block) on the AMX tile unit (amx-int8),
 * for 6 activation rows or more (fewer than 16 padded to a tile): the batch case, where VNNI's
 * per-block scaling costs more than the integer products (docs/benchmarks.md, issue 19).
 *
 * A block of 32 is one tile product: TDPBSSD multiplies a 16 x 32 tile of int8 weights (16 output
 * columns n, one block) by an 8 x 64 tile of int8 activations (the same block of 16 rows m, each
 * row's 4 consecutive bytes in one int32 lane) into a 16 x 16 int32 tile: dot_b[n][m], exact.
 * The tile is stored to memory and scaled in f32 as the VNNI tile kernel does (over b in order:
 * C = fma(f32(dot_b), dw_b * dx_b, C), then + bias), so both give the same bits. The weights need
 * no repacking: a q8 row block is 32 consecutive bytes, so the A tile is read from the weight in
 * place (stride: its row); q4 rows are unpacked per panel of 16 rows as [low nibbles, high
 * nibbles] - 8, with the activations quantized in the matching order (quant_block512). The next
 * panel's rows are prefetched into L2 while a panel computes. The
 * activations are quantized once per call into the B tiles' layout.
 *
 * The threads split the panels of 16 output columns; each loads the tile configuration at the
 * start of its chunk and releases the tiles at its end. Linux grants the tile data state only to
 * a process that asks (arch_prctl, Linux 5.16+); cpu_amx_ready asks once, and without it (or
 * without AMX) the VNNI kernels run. */
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
    __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni,amx-tile,amx-"       \
                          "int8")))

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA  18

static int amx_ok;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void amx_probe(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    if (!((d >> 24) & 1u) || !((d >> 25) & 1u)) return; /* AMX-TILE, AMX-INT8 */
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
    float *dx;  /* [tiles][nb][16]: the activation block scales (0 past M) */
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
        for (int64_t b = 0; b < nb; b++) {
            __m512i i0, i1;
            float d = quant_block512(x + 32 * b, j->q->q4, &i0, &i1);
            __m256i bytes = _mm256_inserti128_si256(
                _mm256_castsi128_si256(_mm512_cvtepi32_epi8(i0)), _mm512_cvtepi32_epi8(i1), 1);
            _mm256_i32scatter_epi32(j->xb + (t * nb + b) * 512 + 4 * r, lanes, bytes, 4);
            j->dx[(t * nb + b) * 16 + r] = d;
        }
    }
}

/* Block b of the panel's dots (cbuf, [n][m] int32) scaled into acc[n] (lanes m). */
T_AMX static inline __attribute__((always_inline)) void
scale_block(__m512 acc[16], const int32_t *cbuf, const float *dx, const float *ws, int64_t nb) {
    __m512 d = _mm512_loadu_ps(dx);
    for (int r = 0; r < 16; r++) {
        __m512 s = _mm512_mul_ps(_mm512_set1_ps(ws[r * nb]), d);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cbuf + 16 * r)), s, acc[r]);
    }
}

#define AMX_AHEAD 32 /* blocks ahead that the panel's copy prefetches */

/* Block b's product into tile tc (tiles ta, tb: its weights and activations; abase/astride or
 * abuf, xb: the panel's); a macro because the tile numbers are immediates of the instructions. */
#define AMX_ISSUE(ta, tb, tc, b)                                                                   \
    do {                                                                                           \
        _tile_zero(tc);                                                                            \
        if (direct)                                                                                \
            _tile_loadd(ta, abase + 32 * (b), astride);                                            \
        else                                                                                       \
            _tile_loadd(ta, abuf + 512 * (b), 32);                                                 \
        _tile_loadd(tb, xb + (b)*512, 64);                                                         \
        _tile_dpbssd(tc, ta, tb);                                                                  \
    } while (0)

/* Panels [p0, p1) of 16 output columns against every tile of activation rows. */
T_AMX static void amx_panels(void *ctx, int64_t chunk, int64_t p0, int64_t p1) {
    (void)chunk;
    ajob *j = ctx;
    const cpu_qlinear *q = j->q;
    const int64_t nb = q->nb, kx = 32 * nb, N = q->N, M = q->M;
    int8_t *abuf = cn__malloc("quant_linear", (size_t)(16 * kx + 64));
    float *ws = cn__malloc("quant_linear", (size_t)(16 * nb + 16) * sizeof(float));
    if (!abuf || !ws) {
        j->failed = 1; /* the error is set; the caller reports it */
        cn__free(abuf);
        cn__free(ws);
        return;
    }
    _Alignas(64) int32_t cbuf[2][256];
    _Alignas(64) float tmp[256];
    _Alignas(64) tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 6; t++) {
        int a = t == 0 || t == 4, b = t == 1 || t == 5;
        cfg.rows[t] = b ? 8 : 16;
        cfg.colsb[t] = a ? 32 : 64;
    }
    _tile_loadconfig(&cfg);
    const __m512i gather =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(16));
    for (int64_t p = p0; p < p1; p++) {
        const int64_t n0 = 16 * p, nn = N - n0 < 16 ? N - n0 : 16;
        /* A whole panel of q8 rows is read in place by the tiles (a copy costs more than it
         * saves, measured); q4 rows, and the rows of a last partial panel (zeros past N), are
         * copied as int8 in tile order, [block][row][32] */
        const int direct = !q->q4 && nn == 16;
        const int8_t *abase = (const int8_t *)q->w + q->w_off + n0 * q->w_s0;
        const int64_t astride = q->w_s0;
        const uint8_t *wrow[16];
        for (int64_t r = 0; r < 16; r++) {
            int64_t e0 = q->w_off + (n0 + (r < nn ? r : 0)) * q->w_s0;
            wrow[r] = q->w + (q->q4 ? e0 >> 1 : e0);
        }
        for (int64_t b = 0; !direct && b < nb; b += 2) {
            int two = b + 1 < nb;
            for (int64_t r = 0; r < 16; r++) {
                /* the rows come from the last-level cache or memory: each is a stream the
                 * hardware prefetcher follows only within its 4 KiB page */
                _mm_prefetch((const char *)wrow[r] + (q->q4 ? 16 : 32) * (b + AMX_AHEAD),
                             _MM_HINT_T0);
                __m512i v;
                if (r >= nn)
                    v = _mm512_setzero_si512();
                else if (q->q4)
                    v = _mm512_sub_epi8(quant_q4_pair512(wrow[r] + 16 * b, two),
                                        _mm512_set1_epi8(8));
                else
                    v = two ? _mm512_loadu_si512(wrow[r] + 32 * b)
                            : _mm512_castsi256_si512(
                                  _mm256_loadu_si256((const __m256i *)(wrow[r] + 32 * b)));
                _mm256_storeu_si256((__m256i *)(abuf + (b * 16 + r) * 32),
                                    _mm512_castsi512_si256(v));
                if (two)
                    _mm256_storeu_si256((__m256i *)(abuf + ((b + 1) * 16 + r) * 32),
                                        _mm512_extracti64x4_epi64(v, 1));
            }
        }
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
        /* the next panel's rows fetched into L2 meanwhile, a few lines each step */
        const int64_t lpr = ((q->q4 ? 16 : 32) * nb + 63) / 64,
                      pf_total = p + 1 < p1 ? 16 * lpr : 0;
        const int64_t pf_step =
            (pf_total + j->tiles * ((nb + 1) / 2) - 1) / (j->tiles * ((nb + 1) / 2));
        int64_t pf = 0;
        const uint8_t *pf_base =
            q->w + (q->q4 ? (q->w_off + (n0 + 16) * q->w_s0) >> 1 : q->w_off + (n0 + 16) * q->w_s0);
        const int64_t pf_stride = q->q4 ? q->w_s0 >> 1 : q->w_s0;
        const int64_t pf_rows = N - (n0 + 16) < 16 ? N - (n0 + 16) : 16;
        for (int64_t t = 0; t < j->tiles; t++) {
            const int8_t *xb = j->xb + t * nb * 512;
            const float *dx = j->dx + t * nb * 16;
            __m512 acc[16];
            for (int r = 0; r < 16; r++)
                acc[r] = _mm512_setzero_ps();
            /* A software pipeline over the blocks: block b + 1's product starts before block b's
             * dots are stored, and those are scaled one step later, after block b + 1's store,
             * so that neither the tile unit nor the vector units wait on the other's latency
             * (tiles 0-2 the even blocks, 4, 5, 3 the odd ones; cbuf[b % 2]). */
            AMX_ISSUE(0, 1, 2, 0);
            int64_t b = 0;
            for (; b < nb; b += 2) {
                for (int64_t i = 0; i < pf_step && pf < pf_total; i++, pf++)
                    if (pf / lpr < pf_rows)
                        _mm_prefetch((const char *)pf_base + (pf / lpr) * pf_stride +
                                         64 * (pf % lpr),
                                     _MM_HINT_T1);
                if (b + 1 < nb) AMX_ISSUE(4, 5, 3, b + 1);
                _tile_stored(2, cbuf[0], 64);
                if (b > 0) scale_block(acc, cbuf[1], dx + 16 * (b - 1), ws + b - 1, nb);
                if (b + 1 >= nb) {
                    scale_block(acc, cbuf[0], dx + 16 * b, ws + b, nb);
                    break;
                }
                if (b + 2 < nb) AMX_ISSUE(0, 1, 2, b + 2);
                _tile_stored(3, cbuf[1], 64);
                scale_block(acc, cbuf[0], dx + 16 * b, ws + b, nb);
            }
            if (b == nb) scale_block(acc, cbuf[1], dx + 16 * (nb - 1), ws + nb - 1, nb);
            for (int r = 0; r < 16; r++)
                _mm512_store_ps(tmp + 16 * r, acc[r]);
            const __mmask16 k = nn == 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nn) - 1u);
            for (int64_t m = 0; m < 16 && 16 * t + m < M; m++) {
                __m512 v = _mm512_i32gather_ps(_mm512_add_epi32(gather, _mm512_set1_epi32((int)m)),
                                               tmp, 4);
                _mm512_mask_storeu_ps(q->y + (16 * t + m) * N + n0, k, _mm512_add_ps(v, bias));
            }
        }
    }
    _tile_release();
    cn__free(abuf);
    cn__free(ws);
}

cn_status cpu_quant_linear_amx(const cpu_qlinear *q) {
    ajob j = {.q = q, .tiles = (q->M + 15) / 16};
    const int64_t nb = q->nb;
    size_t xbytes = (size_t)(j.tiles * nb * 512);
    j.xb = cn__malloc("quant_linear", xbytes + 64);
    j.dx =
        j.xb ? cn__malloc("quant_linear", (size_t)(j.tiles * nb * 16 + 16) * sizeof(float)) : NULL;
    if (!j.dx) {
        cn__free(j.xb);
        return CN_ERR_OUT_OF_MEMORY;
    }
    if (q->M % 16) { /* the rows past M: zero activations and scales */
        memset(j.xb, 0, xbytes);
        memset(j.dx, 0, (size_t)(j.tiles * nb * 16) * sizeof(float));
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
