/* im2col and col2im of "same"-width f32 convolutions on AVX-512 (see im2col.h).
 *
 * Unit stride and dilation, output rows as wide as the input's (padding (KW-1)/2 on each side),
 * dense rows: column row (c, kh, kw), output row oh, is input row oh - ph + kh shifted by
 * kw - pw columns, zero where that falls outside the image. im2col.c's shifted loops copy each
 * column row as one block and then zero its edge columns one row at a time; on the CNN's planes
 * (rows of 14 and 28) those short loops, and the memcpy call per column row, cost several times
 * the bytes moved. Here each output row is one or two masked loads (the edge columns' lanes
 * masked off, read as zero) and masked stores, with the masks made once per call.
 *
 * col2im (the input's gradient) is made the other way round: each input row's 16 columns sum
 * their contributions from every (kh, kw) in a register, in im2col.c's order (kh, then kw, from
 * +0), and are stored once. The sums are the same bit for bit as adding each column row into a
 * zeroed plane: a lane whose (kh, kw) falls outside the image adds +0, which changes no sum
 * that starts from +0 (no sum of such terms is -0). No memset of the plane first. */
#include "backends/cpu/im2col.h"

#include "backends/cpu/cpu_math.h"

/* Column chunks of 16 per row, times KW, at most: the masks' table (on the stack). */
#define MASKS 64

#if CPU_EXP512 /* cpu_math.h: AVX-512 intrinsics compiled (gcc, x86-64 Linux, not TSan) */

int cpu_im2col512(const cpu_conv_geom *g) {
    return g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 && g->OW == g->W && g->W > 0 &&
           g->KW <= MASKS && (g->W + 15) / 16 * g->KW <= MASKS && cpu_has_avx512();
}

/* The first c lanes, c clipped to [0, 16]. */
static inline __mmask16 first(int64_t c) {
    return (__mmask16)(c <= 0 ? 0u : c >= 16 ? 0xffffu : (1u << c) - 1u);
}

/* valid[kw * chunks + q]: the lanes of columns [16 q, 16 q + 16) of a row whose column
 * i + sign (kw - pw) lies in [0, W) (lanes past W off): sign 1, the output columns that read the
 * image (im2col); sign -1, the input columns that an output column reads (col2im). */
static void shift_masks(const cpu_conv_geom *g, int64_t chunks, int sign, __mmask16 *valid) {
    for (int64_t kw = 0; kw < g->KW; kw++) {
        int64_t s = sign * (kw - g->pw);
        for (int64_t q = 0; q < chunks; q++) {
            int64_t ow = 16 * q;
            valid[kw * chunks + q] = (__mmask16)(first(g->W - ow) & first(g->W - s - ow) &
                                                 (__mmask16)~first(-s - ow));
        }
    }
}

__attribute__((target("avx512f,prfchw"))) void cpu_im2col_shifted512(const cpu_conv_geom *g,
                                                                      const float *x,
                                                                      int64_t cs, float *col) {
    const int64_t W = g->W, H = g->H, OH = g->OH, chunks = (W + 15) / 16;
    __mmask16 valid[MASKS];
    shift_masks(g, chunks, 1, valid);
    const __m512 zero = _mm512_setzero_ps();
    float *dst = col;
    for (int64_t c = 0; c < g->Cg; c++) {
        const float *plane = x + c * cs;
        for (int64_t kh = 0; kh < g->KH; kh++) {
            /* the output rows whose input row oh - ph + kh lies in the image: [oh0, oh1) */
            int64_t oh0 = g->ph - kh > 0 ? g->ph - kh : 0;
            int64_t oh1 = H + g->ph - kh < OH ? H + g->ph - kh : OH;
            if (oh0 > OH) oh0 = OH;
            if (oh1 < oh0) oh1 = oh0;
            for (int64_t kw = 0; kw < g->KW; kw++, dst += g->P) {
                const __mmask16 *m = valid + kw * chunks;
                /* input row oh0 - ph + kh, shifted: only the masked lanes are read (none when
                 * no output row reads the image) */
                const float *src = oh0 < oh1 ? plane + (oh0 - g->ph + kh) * W + (kw - g->pw)
                                             : plane;
                for (int64_t i = 0; i < oh0 * W; i += 16)
                    _mm512_mask_storeu_ps(dst + i, first(oh0 * W - i), zero);
                for (int64_t i = oh1 * W; i < g->P; i += 16)
                    _mm512_mask_storeu_ps(dst + i, first(g->P - i), zero);
                float *d = dst + oh0 * W;
                if (chunks == 1) { /* rows of at most 16: one load and store each */
                    const __mmask16 lm = m[0], sm = first(W);
                    for (int64_t oh = oh0; oh < oh1; oh++, src += W, d += W) {
                        /* the column row after next, for writing (its lines come from L2) */
                        __builtin_prefetch(d + 2 * g->P, 1, 3);
                        _mm512_mask_storeu_ps(d, sm, _mm512_maskz_loadu_ps(lm, src));
                    }
                    continue;
                }
                for (int64_t oh = oh0; oh < oh1; oh++, src += W, d += W)
                    for (int64_t q = 0; q < chunks; q++)
                        _mm512_mask_storeu_ps(d + 16 * q, first(W - 16 * q),
                                              _mm512_maskz_loadu_ps(m[q], src + 16 * q));
            }
        }
    }
}

/* col2im's loops with the kernel's size as arguments: given as constants (3x3, rows of at most
 * 16), the compiler unrolls the taps and keeps the masks in registers. */
__attribute__((target("avx512f"), always_inline)) static inline void
col2im_rows(const cpu_conv_geom *g, const float *col, float *x, const __mmask16 *valid,
            int64_t chunks, int64_t KH, int64_t KW) {
    const int64_t W = g->W, H = g->H, OH = g->OH, P = g->P;
    for (int64_t c = 0; c < g->Cg; c++) {
        const float *cc = col + c * KH * KW * P;
        float *plane = x + c * H * W;
        for (int64_t ih = 0; ih < H; ih++) {
            /* the next channel's rows for this ih: the column rows are short streams that the
             * hardware prefetcher does not follow */
            if (c + 1 < g->Cg)
                for (int64_t k = 0; k < KH * KW; k++)
                    _mm_prefetch((const char *)(cc + (KH * KW + k) * P + ih * W + 16), _MM_HINT_T0);
            for (int64_t q = 0; q < chunks; q++) {
                __m512 acc = _mm512_setzero_ps();
                for (int64_t kh = 0; kh < KH; kh++) {
                    int64_t oh = ih + g->ph - kh;
                    if (oh < 0 || oh >= OH) continue;
                    /* x[ih, iw] takes col[(kh, kw), oh, iw - (kw - pw)] where that column
                     * is in the row: im2col's entries read from (ih, iw) */
                    const float *r = cc + kh * KW * P + oh * W + g->pw + 16 * q;
                    for (int64_t kw = 0; kw < KW; kw++, r += P - 1)
                        acc = _mm512_add_ps(acc,
                                            _mm512_maskz_loadu_ps(valid[kw * chunks + q], r));
                }
                _mm512_mask_storeu_ps(plane + ih * W + 16 * q, first(W - 16 * q), acc);
            }
        }
    }
}

__attribute__((target("avx512f"))) void cpu_col2im_set512(const cpu_conv_geom *g,
                                                           const float *col, float *x) {
    const int64_t chunks = (g->W + 15) / 16;
    __mmask16 valid[MASKS];
    shift_masks(g, chunks, -1, valid);
    if (g->KH == 3 && g->KW == 3 && chunks == 1)
        col2im_rows(g, col, x, valid, 1, 3, 3);
    else
        col2im_rows(g, col, x, valid, chunks, g->KH, g->KW);
}

#else

int cpu_im2col512(const cpu_conv_geom *g) {
    (void)g;
    return 0;
}

/* never called: cpu_im2col512 is 0 */
void cpu_im2col_shifted512(const cpu_conv_geom *g, const float *x, int64_t cs, float *col) {
    (void)g, (void)x, (void)cs, (void)col;
}

void cpu_col2im_set512(const cpu_conv_geom *g, const float *col, float *x) {
    (void)g, (void)col, (void)x;
}

#endif
