/* Lowering 2-D convolution to GEMM on the CPU: the geometry of one convolution, the column
 * matrix (im2col) and its adjoint (col2im), and weight packing.
 *
 * For one image and group, the receptive fields unroll into col: [K, P] with K = Cg*KH*KW and
 * P = OH*OW:
 *   col[(c*KH + kh)*KW + kw, oh*OW + ow] = x[c, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw]
 * (zero outside the image). Forward: y_g = w_g [Og, K] @ col. The input's gradient is col2im of
 * w_g^T @ g_g, the weight's gradient g_g @ col^T. */
#ifndef CINDER_CPU_IM2COL_H
#define CINDER_CPU_IM2COL_H

#include <stdint.h>

#include "cinder/backend.h"

typedef struct cpu_conv_geom {
    int64_t N, C, H, W;         /* input */
    int64_t O, KH, KW;          /* weights */
    int64_t OH, OW, P;          /* output plane, P = OH * OW */
    int64_t sh, sw, ph, pw, dh, dw, groups;
    int64_t Cg, Og, K;          /* per group: in channels, out channels, K = Cg*KH*KW */
} cpu_conv_geom;

/* Fills g from the call's geometry (args->conv, computed and checked by the router) and the
 * per-group sizes it implies. A call without one is CN_ERR_INVALID_ARG, an output dtype other
 * than f32 or f64 CN_ERR_DTYPE (error set; both unreachable through the router). */
cn_status cpu_conv_geom_init(cpu_conv_geom *g, const cn_kernel_args *args);

/* col = im2col of one group of one image. x points at the group's channel 0; xs = the element
 * strides of x along C, H, W (any). col: dense [K, P]. */
void cpu_im2col_f32(const cpu_conv_geom *g, const float *x, const int64_t *xs, float *col);
void cpu_im2col_f64(const cpu_conv_geom *g, const double *x, const int64_t *xs, double *col);

/* The adjoint: x[c, ih, iw] += col[...] for every column entry that im2col would read from
 * (c, ih, iw). x: dense [Cg, H, W] (one group of one image); col: dense [K, P], scratch: its
 * entries that im2col would take from the padding may be zeroed. */
void cpu_col2im_f32(const cpu_conv_geom *g, float *col, float *x);
void cpu_col2im_f64(const cpu_conv_geom *g, double *col, double *x);

/* The same two on AVX-512 for f32 "same"-width convolutions (im2col512.c): unit stride and
 * dilation, OW == W. cpu_im2col512 says whether they serve g on this CPU (else never call
 * them). cpu_im2col_shifted512 is cpu_im2col_f32 for x's dense rows (xs = {cs, W, 1});
 * cpu_col2im_set512 writes x (dense [Cg, H, W]) = col2im(col), every element, with
 * cpu_col2im_f32's bits on a zeroed x. */
int cpu_im2col512(const cpu_conv_geom *g);
void cpu_im2col_shifted512(const cpu_conv_geom *g, const float *x, int64_t cs, float *col);
void cpu_col2im_set512(const cpu_conv_geom *g, const float *col, float *x);

/* The input's gradient of one image and group: gx (dense [Cg, H, W]) = col2im(wg^T @ gb), wg
 * [Og, K] at row stride w_ld, gb [Og, P] at g_ld. direct: the columns are the plane itself (1x1,
 * stride 1, no padding), written by the GEMM; else col (scratch, [K, P]) then col2im. */
void cpu_conv_input_grad(const cpu_conv_geom *g, cn_dtype dt, const char *wg, int64_t w_ld,
                         const char *gb, int64_t g_ld, int direct, char *col, char *gx);

/* The weight's gradient of one image and group: gw (dense [Og, K]) += gb @ im2col(x[n, grp])^T,
 * gb [Og, P] at g_ld. direct: x's planes are the columns (read in place at col_ld); else col
 * (scratch, [K, P]) receives the im2col. */
void cpu_conv_weight_grad(const cpu_conv_geom *g, cn_dtype dt, const cn_view *xv, int64_t n,
                          int64_t grp, int direct, int64_t col_ld, char *col, const char *gb,
                          int64_t g_ld, char *gw);

/* How many chunks the conv kernels cut their `tasks` (image, group) GEMMs of `mnk` multiply-adds
 * each into, every chunk needing `per_chunk` bytes of scratch (its column buffer and the like).
 * Whole tasks go to the pool's threads, each GEMM on one thread: no barrier per image. Returns 1
 * (the tasks one after another on the caller, each GEMM split over the threads by cpu_gemm) when
 * the work is too small to share, or when the tasks are too few to keep every thread busy, or
 * their scratch too big to hold one per thread (CPU_CONV_SCRATCH_BYTES), while one GEMM is big
 * enough to split. Depends only on its arguments and the pool's size, never on timing. */
#define CPU_CONV_SCRATCH_BYTES ((size_t)64 << 20)
int64_t cpu_conv_chunks(int64_t tasks, double mnk, size_t per_chunk);

/* out[i] = the sum over k < parts of part[k][i] (the parts `stride` bytes apart), in k's order:
 * how conv2d's weight gradient sums its chunks' accumulators (conv_backward.c). */
void cpu_conv_sum_parts(cn_dtype dt, void *out, const char *part, size_t stride, int parts,
                        int64_t n);

/* Non-zero when dims [from, ndim) of v are dense row-major (size-1 dims ignored). */
int cpu_dense_from(const cn_view *v, int from);

/* How a GEMM reads w [O, Cg, KH, KW] as [O, K]: in place when each filter is dense (*ld = the
 * row stride), else packed (returns 0; *ld = K; pack with cpu_pack_weights). */
int cpu_weights_direct(const cn_view *w, int64_t K, int64_t *ld);

/* Copies w [O, Cg, KH, KW] (any strides) into dense [O, Cg*KH*KW]. */
void cpu_pack_weights(const cn_view *w, void *dst);

#endif
