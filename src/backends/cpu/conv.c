/* CPU 2-D convolution: im2col + GEMM through OpenBLAS.
 *
 * x: [N, C, H, W] (any strides), w: [O, C/g, KH, KW] (any strides), b: [O] or absent
 * -> out: [N, O, OH, OW] contiguous; conv2d_relu: the same, then relu; conv2d_max_pool2d: each
 * image's output pooled (pool_index.c) while it is in cache, never written out.
 * For each image n and group g the receptive fields are unrolled into a column matrix
 * col: [C/g*KH*KW, OH*OW], and out[n, group g] = w_g [O/g, C/g*KH*KW] @ col, plus the bias.
 * A 1x1 convolution with unit stride and no padding reads x in place as the column matrix. */
#include <limits.h>
#include <stdint.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/im2col.h"
#include "backends/cpu/pool512.h"
#include "core/backend_common.h"
#include "core/alloc.h"

/* Per-thread scratch sizes are rounded to cache lines so that threads never share one. */
static size_t round_line(size_t n) { return (n + 63) & ~(size_t)63; }

/* out rows [Og, P] += b[o] (or = b[o] when k_empty, the GEMM having written nothing), then
 * relu when asked (conv2d_relu): one pass over rows the GEMM has just left in cache. relu as
 * its kernel computes it (v < 0 ? 0 : v: NaN and -0 stay), so the fused op's values are the
 * two ops' bit for bit. */
#define DEFINE_EPILOGUE(T, name)                                                                \
    static void name(T *out, const cn_view *b, int64_t o0, int64_t Og, int64_t P, int k_empty,  \
                     int relu) {                                                                \
        for (int64_t o = 0; o < Og; o++) {                                                      \
            T *row = out + o * P;                                                               \
            T v = b ? ((const T *)b->data)[(o0 + o) * b->strides[0]] : (T)0;                    \
            if (k_empty)                                                                        \
                for (int64_t p = 0; p < P; p++) row[p] = v;                                     \
            else if (b)                                                                         \
                for (int64_t p = 0; p < P; p++) row[p] += v;                                    \
            if (relu)                                                                           \
                for (int64_t p = 0; p < P; p++) row[p] = row[p] < 0 ? (T)0 : row[p];            \
        }                                                                                       \
    }
DEFINE_EPILOGUE(float, epilogue_f32)
DEFINE_EPILOGUE(double, epilogue_f64)
#undef DEFINE_EPILOGUE

static void epilogue(cn_dtype dt, void *out, const cn_view *b, int64_t o0, int64_t Og, int64_t P,
                     int k_empty, int relu) {
    if (dt == CN_F32)
        epilogue_f32((float *)out, b, o0, Og, P, k_empty, relu);
    else
        epilogue_f64((double *)out, b, o0, Og, P, k_empty, relu);
}

/* ---- the kernel ----------------------------------------------------------------------------- */

typedef struct conv_job {
    const cpu_conv_geom *g;
    const cn_view *xv, *ov, *bv;
    cn_dtype dt;
    size_t es;
    const char *wdata;   /* weights as [O, K] */
    int64_t w_ld;
    int direct_cols;     /* x is the column matrix itself */
    int relu;            /* conv2d_relu */
    int64_t col_ld;
    char *cols;          /* a column buffer per chunk, col_bytes apart */
    size_t col_bytes;
    /* conv2d_max_pool2d: each task's output [Og, P] goes to a buffer per chunk (z_bytes apart),
     * then the k x k pool of its planes to out[0] (and the choices to out[1] when present) */
    int64_t pool, PH, PW;
    int pool_bias; /* f32, k = 2, AVX-512: the bias is added in the pool, not the epilogue */
    char *zs;
    size_t z_bytes;
    const cn_view *iv;
} conv_job;

/* The pool of one task's output z [Og, OH, OW] (dense) into its planes of out[0] and out[1];
 * with j->pool_bias, z is the GEMM's product and the pool adds the bias to it (pool512.c). */
static void pool_task(const conv_job *j, const char *z, int64_t n, int64_t grp) {
    const cpu_conv_geom *g = j->g;
    for (int64_t o = 0; o < g->Og; o++) {
        int64_t plane = n * g->O + grp * g->Og + o, pp = j->PH * j->PW;
        uint8_t *idx = j->iv ? (uint8_t *)j->iv->data + plane * pp : NULL;
        char *out = (char *)j->ov->data + (size_t)(plane * pp) * j->es;
        const char *zp = z + (size_t)(o * g->P) * j->es;
        if (j->pool_bias) {
            const cn_view *b = j->bv;
            const float *bias = (const float *)b->data + (grp * g->Og + o) * b->strides[0];
            cpu_pool2_plane512_f32((const float *)zp, g->OW, j->PH, j->PW, bias, (float *)out,
                                   idx);
        } else if (j->dt == CN_F32)
            cpu_pool_index_plane_f32((const float *)zp, g->OW, j->pool, j->PH, j->PW,
                                     (float *)out, idx);
        else
            cpu_pool_index_plane_f64((const double *)zp, g->OW, j->pool, j->PH, j->PW,
                                     (double *)out, idx);
    }
}

/* (image, group) tasks [begin, end): out[n, group] = w_group @ im2col(x[n, group]) + b. */
static void conv_tasks(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    const conv_job *j = ctx;
    const cpu_conv_geom *g = j->g;
    const cn_view *xv = j->xv;
    size_t es = j->es;
    const int64_t xs[3] = {xv->strides[1], xv->strides[2], xv->strides[3]};
    for (int64_t t = begin; t < end; t++) {
        int64_t n = t / g->groups, grp = t % g->groups;
        char *out = j->pool ? j->zs + j->z_bytes * (size_t)chunk
                            : (char *)j->ov->data + (size_t)((n * g->O + grp * g->Og) * g->P) * es;
        if (g->K == 0) { /* no input channels: the output is the bias (conv2d_max_pool2d) */
            epilogue(j->dt, out, j->bv, grp * g->Og, g->Og, g->P, 1, j->relu);
            pool_task(j, out, n, grp);
            continue;
        }
        const char *x = (const char *)xv->data +
                        (n * xv->strides[0] + grp * g->Cg * xv->strides[1]) * (int64_t)es;
        const void *col = x;
        if (!j->direct_cols) {
            char *mine = j->cols + j->col_bytes * (size_t)chunk;
            if (j->dt == CN_F32)
                cpu_im2col_f32(g, (const float *)x, xs, (float *)mine);
            else
                cpu_im2col_f64(g, (const double *)x, xs, (double *)mine);
            col = mine;
        }
        const char *wg = j->wdata + (size_t)(grp * g->Og * j->w_ld) * es;
        cpu_gemm(j->dt, 0, 0, g->Og, g->P, g->K, wg, j->w_ld, col, j->col_ld, 0.0, out, g->P);
        if ((j->bv && !j->pool_bias) || j->relu)
            epilogue(j->dt, out, j->bv, grp * g->Og, g->Og, g->P, 0, j->relu);
        if (j->pool) pool_task(j, out, n, grp);
    }
}

cn_status cpu_conv2d(const cn_kernel_args *args) {
    const cn_view *xv = &args->in[0], *wv = &args->in[1], *ov = &args->out[0];
    const cn_view *bv = args->n_in > 2 ? &args->in[2] : NULL;
    cn_dtype dt = ov->dtype;
    if (dt != CN_F32 && dt != CN_F64) /* unreachable through the router: dtypes[op] (backend.c) */
        return cn__kernel_dtype_error("cpu", args->op, dt);
    size_t es = cn_dtype_size(dt);
    int relu = args->op == CN_OP_CONV2D_RELU;
    int64_t pool = args->op == CN_OP_CONV2D_MAX_POOL2D ? args->ints[7] : 0;
    cpu_conv_geom g;
    cn_status st = cpu_conv_geom_init(&g, args);
    if (st != CN_OK) return st;
    int64_t tasks = g.N * g.groups;
    if (tasks == 0 || g.Og == 0 || g.P == 0) return CN_OK;
    if (g.K == 0 && !pool) { /* no input channels: the output is the bias */
        for (int64_t n = 0; n < g.N; n++)
            epilogue(dt, (char *)ov->data + (size_t)(n * g.O * g.P) * es, bv, 0, g.O, g.P, 1,
                     relu);
        return CN_OK;
    }
    if (g.Og > INT_MAX || g.P > INT_MAX || g.K > INT_MAX)
        return cn_set_error(CN_ERR_BACKEND, "conv2d",
                            "the per-group GEMM (%lld x %lld x %lld) exceeds BLAS's int range; "
                            "split the batch or the channels",
                            (long long)g.Og, (long long)g.K, (long long)g.P);

    /* Weights as [O, K] with leading dim w_ld: in place when each filter is dense. */
    int64_t w_ld;
    int w_direct = cpu_weights_direct(wv, g.K, &w_ld);

    /* A 1x1, stride-1, unpadded convolution of dense planes: x itself is the column matrix,
     * [Cg, P] with leading dim xs[1]. */
    int direct_cols = g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 &&
                      g.pw == 0 && cpu_dense_from(xv, 2) &&
                      (g.Cg == 1 || (xv->strides[1] >= g.P && xv->strides[1] <= INT_MAX));
    int64_t col_ld = direct_cols && g.Cg > 1 ? xv->strides[1] : g.P;

    int64_t kp;
    int too_big = __builtin_mul_overflow(g.K, g.P, &kp) || (uint64_t)kp > SIZE_MAX / 4 / es;
    size_t w_bytes = w_direct ? 0 : round_line((size_t)(g.O * g.K) * es);
    size_t col_bytes = direct_cols || too_big || g.K == 0 ? 0 : round_line((size_t)kp * es);
    /* conv2d_max_pool2d: a task's output [Og, P] per chunk (sizes of a tensor already made) */
    size_t z_bytes = pool ? round_line((size_t)(g.Og * g.P) * es) : 0;
    /* A range of (image, group) tasks per chunk, each with its column buffer; or the tasks one
     * after another, each GEMM split over the threads by cpu_gemm (cpu_conv_chunks). */
    int64_t chunks = cpu_conv_chunks(tasks, (double)g.Og * (double)g.P * (double)g.K,
                                     col_bytes + z_bytes);
    if (too_big || col_bytes + z_bytes > SIZE_MAX / 2 / (size_t)chunks)
        return cn_set_error(CN_ERR_OUT_OF_MEMORY, "conv2d",
                            "the column buffer (%lld x %lld elements) exceeds the address space; "
                            "split the batch or the channels",
                            (long long)g.K, (long long)g.P);
    char *scratch = NULL;
    if (w_bytes + col_bytes + z_bytes) {
        scratch = cn__malloc(cn_op_name(args->op),
                             w_bytes + (col_bytes + z_bytes) * (size_t)chunks);
        if (!scratch) return CN_ERR_OUT_OF_MEMORY;
    }
    const char *wdata = (const char *)wv->data;
    if (!w_direct) {
        cpu_pack_weights(wv, scratch);
        wdata = scratch;
    }
    conv_job j = {.g = &g, .xv = xv, .ov = ov, .bv = bv, .dt = dt, .es = es, .wdata = wdata,
                  .w_ld = w_ld, .direct_cols = direct_cols, .relu = relu, .col_ld = col_ld,
                  .cols = scratch ? scratch + w_bytes : NULL, .col_bytes = col_bytes,
                  .pool = pool, .PH = pool ? g.OH / pool : 0, .PW = pool ? g.OW / pool : 0,
                  .pool_bias = pool == 2 && bv && !relu && g.K > 0 && dt == CN_F32 &&
                               cpu_pool512(),
                  .zs = scratch ? scratch + w_bytes + col_bytes * (size_t)chunks : NULL,
                  .z_bytes = z_bytes, .iv = args->n_out > 1 ? &args->out[1] : NULL};
    cpu_parallel(tasks, chunks, conv_tasks, &j);
    cn__free(scratch);
    return CN_OK;
}
