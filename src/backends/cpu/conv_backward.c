/* CPU gradients of 2-D convolution: im2col / col2im + GEMM through OpenBLAS (forward: conv.c).
 *
 * g: [N, O, OH, OW], w: [O, Cg, KH, KW], x: [N, C, H, W], all with any strides. Per image n and
 * group grp, with K = Cg*KH*KW and P = OH*OW (see im2col.h):
 *   input:  cols [K, P] = w_g^T [K, Og] @ g_{n,grp} [Og, P];  gx_{n,grp} = col2im(cols)
 *   weight: gw_g [Og, K] = sum over n of g_{n,grp} [Og, P] @ im2col(x_{n,grp})^T [P, K]
 * Outputs are contiguous and overwritten. A 1x1, stride-1, unpadded convolution skips the column
 * matrix: the GEMM writes gx in place, and reads x in place when its planes are dense. */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/im2col.h"
#include "core/alloc.h"

/* Per-chunk scratch sizes are rounded to cache lines so that threads never share one. */
static size_t round_line(size_t n) { return (n + 63) & ~(size_t)63; }

/* How BLAS reads the output gradient of one (image, group) as [Og, P]: in place when its planes
 * are dense (returns 1, *ld = the channel stride), else packed by pack_grad (*ld = P). */
static int grad_direct(const cn_view *gv, int64_t Og, int64_t P, int64_t *ld) {
    int direct = cpu_dense_from(gv, 2) &&
                 (Og == 1 || (gv->strides[1] >= P && gv->strides[1] <= INT_MAX));
    *ld = direct && Og > 1 ? gv->strides[1] : P;
    return direct;
}

/* dst [Og, OH*OW] dense = g [Og, OH, OW] with element strides gs (the view's dims 1..3). Rows
 * of unit stride are copied and rows of stride 0 (the broadcast g of a sum's backward) filled
 * in loops apart, which the compiler vectorises. */
#define DEFINE_PACK_GRAD(T, name)                                                              \
    static void name(const T *g, const int64_t *gs, int64_t Og, int64_t OH, int64_t OW,        \
                     T *restrict dst) {                                                        \
        for (int64_t o = 0; o < Og; o++)                                                       \
            for (int64_t oh = 0; oh < OH; oh++, dst += OW) {                                   \
                const T *s = g + o * gs[0] + oh * gs[1];                                       \
                if (gs[2] == 1) {                                                              \
                    for (int64_t ow = 0; ow < OW; ow++) dst[ow] = s[ow];                       \
                } else if (gs[2] == 0) {                                                       \
                    const T v = *s;                                                            \
                    for (int64_t ow = 0; ow < OW; ow++) dst[ow] = v;                           \
                } else {                                                                       \
                    for (int64_t ow = 0; ow < OW; ow++) dst[ow] = s[ow * gs[2]];               \
                }                                                                              \
            }                                                                                  \
    }
DEFINE_PACK_GRAD(float, pack_grad_f32)
DEFINE_PACK_GRAD(double, pack_grad_f64)
#undef DEFINE_PACK_GRAD

/* The [Og, P] block of g for image n, group grp: in place, or packed into buf. */
static const char *grad_block(const cn_view *gv, const cpu_conv_geom *g, int direct, int64_t n,
                              int64_t grp, char *buf) {
    size_t es = cn_dtype_size(gv->dtype);
    const char *src = (const char *)gv->data +
                      (n * gv->strides[0] + grp * g->Og * gv->strides[1]) * (int64_t)es;
    if (direct) return src;
    if (gv->dtype == CN_F32)
        pack_grad_f32((const float *)src, gv->strides + 1, g->Og, g->OH, g->OW, (float *)buf);
    else
        pack_grad_f64((const double *)src, gv->strides + 1, g->Og, g->OH, g->OW, (double *)buf);
    return buf;
}

/* Every group's block of g packed once into shared ([groups, Og, P]), for a g whose blocks are
 * the same for every image (shared_bytes, below, says when); returns shared. */
static const char *pack_shared(const cn_view *gv, const cpu_conv_geom *g, char *shared) {
    size_t block = (size_t)(g->Og * g->P) * cn_dtype_size(gv->dtype);
    for (int64_t grp = 0; grp < g->groups; grp++)
        grad_block(gv, g, 0, 0, grp, shared + block * (size_t)grp);
    return shared;
}

/* The block of g for task (n, grp): pack_shared's when there is one (shared), else as
 * grad_block gives it (buf: the task's packing space). */
static const char *task_grad_block(const cn_view *gv, const cpu_conv_geom *g, const char *shared,
                                   int g_direct, int64_t n, int64_t grp, char *buf) {
    if (shared) return shared + (size_t)(grp * g->Og * g->P) * cn_dtype_size(gv->dtype);
    return grad_block(gv, g, g_direct, n, grp, g_direct ? NULL : buf);
}

/* Bytes of pack_shared's buffer for g: 0 unless g is packed (not read in place) and its batch
 * stride is 0 (the broadcast g of a sum's backward), so that one packing serves every image. */
static size_t shared_bytes(const cn_view *gv, const cpu_conv_geom *g, int g_direct) {
    if (g_direct || gv->strides[0] != 0) return 0;
    return round_line((size_t)(g->groups * g->Og * g->P) * cn_dtype_size(gv->dtype));
}

static cn_status gemm_too_big(const char *op, const cpu_conv_geom *g) {
    return cn_set_error(CN_ERR_BACKEND, op,
                        "the per-group GEMM (%lld x %lld x %lld) exceeds BLAS's int range; "
                        "split the batch or the channels",
                        (long long)g->Og, (long long)g->K, (long long)g->P);
}

/* ---- the input's gradient ------------------------------------------------------------------- */

typedef struct input_job {
    const cpu_conv_geom *g;
    const cn_view *gv, *ov;
    cn_dtype dt;
    size_t es;
    const char *wdata; /* weights as [O, K] */
    const char *g_packed; /* pack_shared's blocks, or NULL */
    int64_t w_ld, g_ld, plane;
    int g_direct, direct_cols;
    char *scratch; /* per chunk: columns, then the packed gradient block */
    size_t per_chunk, col_bytes;
} input_job;

/* (image, group) tasks [begin, end): gx[n, group] = col2im(w_group^T @ g[n, group]). */
static void input_tasks(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    const input_job *j = ctx;
    const cpu_conv_geom *g = j->g;
    size_t es = j->es;
    char *mine = j->per_chunk ? j->scratch + j->per_chunk * (size_t)chunk : NULL;
    for (int64_t t = begin; t < end; t++) {
        int64_t n = t / g->groups, grp = t % g->groups;
        const char *gb =
            task_grad_block(j->gv, g, j->g_packed, j->g_direct, n, grp, mine + j->col_bytes);
        const char *wg = j->wdata + (size_t)(grp * g->Og * j->w_ld) * es;
        char *gx = (char *)j->ov->data + (size_t)((n * g->groups + grp) * j->plane) * es;
        cpu_conv_input_grad(g, j->dt, wg, j->w_ld, gb, j->g_ld, j->direct_cols, mine, gx);
    }
}

void cpu_conv_input_grad(const cpu_conv_geom *g, cn_dtype dt, const char *wg, int64_t w_ld,
                         const char *gb, int64_t g_ld, int direct, char *col, char *gx) {
    char *cols = direct ? gx : col;
    cpu_gemm(dt, 1, 0, g->K, g->P, g->Og, wg, w_ld, gb, g_ld, 0.0, cols, g->P);
    if (direct) return;
    if (dt == CN_F32 && cpu_im2col512(g)) { /* writes every element: no memset */
        cpu_col2im_set512(g, (const float *)cols, (float *)gx);
        return;
    }
    memset(gx, 0, (size_t)(g->Cg * g->H * g->W) * cn_dtype_size(dt));
    if (dt == CN_F32)
        cpu_col2im_f32(g, (float *)cols, (float *)gx);
    else
        cpu_col2im_f64(g, (double *)cols, (double *)gx);
}

cn_status cpu_conv2d_backward_input(const cn_kernel_args *args) {
    const char *op = "conv2d_backward_input";
    const cn_view *gv = &args->in[0], *wv = &args->in[1], *ov = &args->out[0];
    cpu_conv_geom g;
    cn_status s = cpu_conv_geom_init(&g, args); /* dtypes: f32 or f64 (backend.c), all alike */
    if (s != CN_OK) return s;
    cn_dtype dt = ov->dtype;
    size_t es = cn_dtype_size(dt);
    int64_t tasks = g.N * g.groups, plane = g.Cg * g.H * g.W;
    if (tasks == 0 || plane == 0) return CN_OK;
    if (g.Og == 0 || g.K == 0) { /* no output channels, or an empty kernel: nothing flows back */
        memset(ov->data, 0, (size_t)(g.N * g.C * g.H * g.W) * es);
        return CN_OK;
    }
    if (g.Og > INT_MAX || g.P > INT_MAX || g.K > INT_MAX) return gemm_too_big(op, &g);

    int64_t w_ld, g_ld;
    int w_direct = cpu_weights_direct(wv, g.K, &w_ld);
    int g_direct = grad_direct(gv, g.Og, g.P, &g_ld);
    /* 1x1, stride 1, no padding: cols [Cg, H*W] is the gradient's group block itself. */
    int direct_cols = g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 &&
                      g.pw == 0;

    size_t w_bytes = w_direct ? 0 : round_line((size_t)(g.O * g.K) * es);
    size_t sh_bytes = shared_bytes(gv, &g, g_direct);
    size_t col_bytes = direct_cols ? 0 : round_line((size_t)(g.K * g.P) * es);
    size_t gpk_bytes = g_direct || sh_bytes ? 0 : round_line((size_t)(g.Og * g.P) * es);
    size_t per_chunk = col_bytes + gpk_bytes;
    int64_t chunks = cpu_conv_chunks(tasks, (double)g.K * (double)g.P * (double)g.Og, per_chunk);
    char *scratch = NULL;
    if (w_bytes + sh_bytes + per_chunk) {
        scratch = cn__malloc(op, w_bytes + sh_bytes + per_chunk * (size_t)chunks);
        if (!scratch) return CN_ERR_OUT_OF_MEMORY;
    }
    const char *wdata = (const char *)wv->data;
    if (!w_direct) {
        cpu_pack_weights(wv, scratch);
        wdata = scratch;
    }
    input_job j = {.g = &g, .gv = gv, .ov = ov, .dt = dt, .es = es, .wdata = wdata,
                   .g_packed = sh_bytes ? pack_shared(gv, &g, scratch + w_bytes) : NULL,
                   .w_ld = w_ld, .g_direct = g_direct, .g_ld = g_ld, .direct_cols = direct_cols,
                   .plane = plane, .scratch = scratch ? scratch + w_bytes + sh_bytes : NULL,
                   .per_chunk = per_chunk, .col_bytes = col_bytes};
    cpu_parallel(tasks, chunks, input_tasks, &j);
    cn__free(scratch);
    return CN_OK;
}

/* ---- the weight's gradient ------------------------------------------------------------------ */

void cpu_conv_sum_parts(cn_dtype dt, void *out, const char *part, size_t stride, int parts,
                       int64_t n) {
    if (dt == CN_F32) {
        float *o = (float *)out;
        for (int64_t i = 0; i < n; i++) o[i] = ((const float *)part)[i];
        for (int k = 1; k < parts; k++)
            for (int64_t i = 0; i < n; i++) o[i] += ((const float *)(part + k * stride))[i];
    } else {
        double *o = (double *)out;
        for (int64_t i = 0; i < n; i++) o[i] = ((const double *)part)[i];
        for (int k = 1; k < parts; k++)
            for (int64_t i = 0; i < n; i++) o[i] += ((const double *)(part + k * stride))[i];
    }
}

typedef struct weight_job {
    const cpu_conv_geom *g;
    const cn_view *gv, *xv, *ov;
    cn_dtype dt;
    size_t es;
    int64_t g_ld, col_ld;
    int g_direct, direct_cols;
    const char *g_packed; /* pack_shared's blocks, or NULL */
    char *scratch; /* per chunk: columns, packed gradient block, accumulator */
    size_t per_chunk, col_bytes, gpk_bytes, acc_bytes;
} weight_job;

/* (image, group) tasks [begin, end): gw_group += g[n, group] @ im2col(x[n, group])^T, into the
 * chunk's accumulator (or straight into out when there is one chunk). */
static void weight_tasks(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    const weight_job *j = ctx;
    const cpu_conv_geom *g = j->g;
    const cn_view *xv = j->xv;
    size_t es = j->es;
    char *mine = j->per_chunk ? j->scratch + j->per_chunk * (size_t)chunk : NULL;
    char *acc = j->acc_bytes ? mine + j->col_bytes + j->gpk_bytes : (char *)j->ov->data;
    for (int64_t t = begin; t < end; t++) {
        int64_t n = t / g->groups, grp = t % g->groups;
        const char *gb =
            task_grad_block(j->gv, g, j->g_packed, j->g_direct, n, grp, mine + j->col_bytes);
        cpu_conv_weight_grad(g, j->dt, xv, n, grp, j->direct_cols, j->col_ld, mine, gb, j->g_ld,
                             acc + (size_t)(grp * g->Og * g->K) * es);
    }
}

void cpu_conv_weight_grad(const cpu_conv_geom *g, cn_dtype dt, const cn_view *xv, int64_t n,
                          int64_t grp, int direct, int64_t col_ld, char *col, const char *gb,
                          int64_t g_ld, char *gw) {
    const int64_t es = (int64_t)cn_dtype_size(dt);
    const int64_t xs[3] = {xv->strides[1], xv->strides[2], xv->strides[3]};
    const char *x =
        (const char *)xv->data + (n * xv->strides[0] + grp * g->Cg * xv->strides[1]) * es;
    const char *cm = x;
    if (!direct) {
        if (dt == CN_F32)
            cpu_im2col_f32(g, (const float *)x, xs, (float *)col);
        else
            cpu_im2col_f64(g, (const double *)x, xs, (double *)col);
        cm = col;
    }
    cpu_gemm(dt, 0, 1, g->Og, g->K, g->P, gb, g_ld, cm, col_ld, 1.0, gw, g->K);
}

cn_status cpu_conv2d_backward_weight(const cn_kernel_args *args) {
    const char *op = "conv2d_backward_weight";
    const cn_view *gv = &args->in[0], *xv = &args->in[1], *ov = &args->out[0];
    cpu_conv_geom g;
    cn_status s = cpu_conv_geom_init(&g, args); /* dtypes: f32 or f64 (backend.c), all alike */
    if (s != CN_OK) return s;
    cn_dtype dt = ov->dtype;
    size_t es = cn_dtype_size(dt);
    int64_t tasks = g.N * g.groups, numel = g.O * g.K;
    if (numel == 0) return CN_OK;
    memset(ov->data, 0, (size_t)numel * es);
    if (tasks == 0) return CN_OK; /* an empty batch: the gradient is zero */
    if (g.Og > INT_MAX || g.P > INT_MAX || g.K > INT_MAX) return gemm_too_big(op, &g);

    int64_t g_ld;
    int g_direct = grad_direct(gv, g.Og, g.P, &g_ld);
    /* A 1x1, stride-1, unpadded convolution of dense planes: x is the column matrix [Cg, P]. */
    int direct_cols = g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 &&
                      g.pw == 0 && cpu_dense_from(xv, 2) &&
                      (g.Cg == 1 || (xv->strides[1] >= g.P && xv->strides[1] <= INT_MAX));
    int64_t col_ld = direct_cols && g.Cg > 1 ? xv->strides[1] : g.P;

    /* Chunks accumulate their images into private copies of gw, summed at the end in chunk
     * order (deterministic: the chunks do not depend on timing); one chunk accumulates into out. */
    size_t sh_bytes = shared_bytes(gv, &g, g_direct);
    size_t col_bytes = direct_cols ? 0 : round_line((size_t)(g.K * g.P) * es);
    size_t gpk_bytes = g_direct || sh_bytes ? 0 : round_line((size_t)(g.Og * g.P) * es);
    size_t numel_bytes = round_line((size_t)numel * es);
    int64_t chunks = cpu_conv_chunks(tasks, (double)g.Og * (double)g.K * (double)g.P,
                                     col_bytes + gpk_bytes + numel_bytes);
    size_t acc_bytes = chunks > 1 ? numel_bytes : 0;
    size_t per_chunk = col_bytes + gpk_bytes + acc_bytes;
    char *scratch = NULL, *chunk_scratch = NULL;
    if (sh_bytes + per_chunk) {
        scratch = cn__malloc(op, sh_bytes + per_chunk * (size_t)chunks);
        if (!scratch) return CN_ERR_OUT_OF_MEMORY;
        chunk_scratch = scratch + sh_bytes;
    }
    for (int64_t k = 0; k < chunks && acc_bytes; k++)
        memset(chunk_scratch + per_chunk * (size_t)k + col_bytes + gpk_bytes, 0, acc_bytes);
    weight_job j = {.g = &g, .gv = gv, .xv = xv, .ov = ov, .dt = dt, .es = es,
                    .g_direct = g_direct, .g_ld = g_ld, .direct_cols = direct_cols,
                    .g_packed = sh_bytes ? pack_shared(gv, &g, scratch) : NULL,
                    .col_ld = col_ld, .scratch = chunk_scratch, .per_chunk = per_chunk,
                    .col_bytes = col_bytes, .gpk_bytes = gpk_bytes, .acc_bytes = acc_bytes};
    cpu_parallel(tasks, chunks, weight_tasks, &j);
    if (acc_bytes)
        cpu_conv_sum_parts(dt, ov->data, chunk_scratch + col_bytes + gpk_bytes, per_chunk,
                           (int)chunks, numel);
    cn__free(scratch);
    return CN_OK;
}
