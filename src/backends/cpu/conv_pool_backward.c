/* CPU gradient of conv2d_max_pool2d in one kernel (conv2d_max_pool2d_backward, backend.h).
 *
 * The unfused backward writes the convolution's output gradient gz [N, O, OH, OW] in full
 * (max_pool2d_backward_index), then reads it back three times: the input's gradient, the
 * weight's and the bias's sum. Here each (image, group) task makes its gz block [Og, OH * OW] in
 * a buffer of its chunk from g and the kept choices, and while it is in cache sums its planes
 * (the bias), adds gz @ im2col(x)^T to the chunk's weight accumulator and writes
 * col2im(w^T @ gz) to the input's gradient. Each step is the unfused kernel's own code on the
 * same data: the plane expansion (pool_index.c), the row sums (reduce.c), the GEMMs with the
 * same sizes and leading dims, and the weight gradient's chunks (cpu_conv_chunks with the weight
 * kernel's arguments, accumulators summed in chunk order), so the values are the unfused
 * calls' bit for bit. */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/im2col.h"
#include "core/alloc.h"
#include "core/backend_common.h"

/* Per-chunk scratch sizes are rounded to cache lines so that threads never share one. */
static size_t round_line(size_t n) { return (n + 63) & ~(size_t)63; }

typedef struct pool_back_job {
    const cpu_conv_geom *g;
    const cn_view *gv, *iv, *xv;
    const cn_view *gx, *gw, *gb; /* the wanted outputs, else NULL */
    cn_dtype dt;
    size_t es;
    int64_t k, PH, PW;
    const char *wdata; /* weights as [O, K] */
    int64_t w_ld, col_ld;
    int direct_w;      /* the weight's GEMM reads x in place as the column matrix */
    int direct_i;      /* the input's GEMM writes gx in place (1x1, stride 1, unpadded) */
    int gemms;         /* K > 0: there is a product to make */
    char *scratch;     /* per chunk: gz block, columns, weight accumulator */
    size_t per_chunk, z_bytes, col_bytes, acc_bytes;
} pool_back_job;

/* gz [Og, P] of image n, group grp: each plane expanded from g's plane and its choices. */
static void expand(const pool_back_job *j, int64_t n, int64_t grp, char *z) {
    const cpu_conv_geom *g = j->g;
    const cn_view *gv = j->gv;
    int64_t pp = j->PH * j->PW;
    for (int64_t o = 0; o < g->Og; o++) {
        int64_t c = grp * g->Og + o;
        const char *gp = (const char *)gv->data +
                         (n * gv->strides[0] + c * gv->strides[1]) * (int64_t)j->es;
        const uint8_t *idx = (const uint8_t *)j->iv->data + (n * g->O + c) * pp;
        char *zp = z + (size_t)(o * g->P) * j->es;
        if (j->dt == CN_F32)
            cpu_pool_index_back_plane_f32((const float *)gp, gv->strides[2], gv->strides[3], idx,
                                          g->OH, g->OW, j->PH, j->PW, j->k, (float *)zp);
        else
            cpu_pool_index_back_plane_f64((const double *)gp, gv->strides[2], gv->strides[3],
                                          idx, g->OH, g->OW, j->PH, j->PW, j->k, (double *)zp);
    }
}

/* (image, group) tasks [begin, end) of chunk `chunk`. */
static void pool_back_tasks(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    const pool_back_job *j = ctx;
    const cpu_conv_geom *g = j->g;
    const cn_view *xv = j->xv;
    size_t es = j->es;
    char *z = j->scratch + j->per_chunk * (size_t)chunk;
    char *col = z + j->z_bytes;
    char *acc = j->acc_bytes ? col + j->col_bytes : j->gw ? (char *)j->gw->data : NULL;
    int64_t plane = g->Cg * g->H * g->W;
    for (int64_t t = begin; t < end; t++) {
        int64_t n = t / g->groups, grp = t % g->groups;
        expand(j, n, grp, z);
        if (j->gb) {
            char *b = (char *)j->gb->data + (size_t)(n * g->O + grp * g->Og) * es;
            if (j->dt == CN_F32)
                cpu_sum_rows_f32((const float *)z, g->Og, g->P, g->N * g->O, (float *)b);
            else
                cpu_sum_rows_f64((const double *)z, g->Og, g->P, g->N * g->O, (double *)b);
        }
        if (!j->gemms) continue;
        if (j->gw) { /* gw_group += gz @ im2col(x[n, group])^T */
            cpu_conv_weight_grad(g, j->dt, xv, n, grp, j->direct_w, j->col_ld, col, z, g->P,
                                 acc + (size_t)(grp * g->Og * g->K) * es);
        }
        if (j->gx) { /* gx[n, group] = col2im(w_group^T @ gz) */
            const char *wg = j->wdata + (size_t)(grp * g->Og * j->w_ld) * es;
            char *gx = (char *)j->gx->data + (size_t)((n * g->groups + grp) * plane) * es;
            cpu_conv_input_grad(g, j->dt, wg, j->w_ld, z, g->P, j->direct_i, col, gx);
        }
    }
}

cn_status cpu_conv2d_max_pool2d_backward(const cn_kernel_args *args) {
    const char *op = "conv2d_max_pool2d_backward";
    cpu_conv_geom g;
    cn_status s = cpu_conv_geom_init(&g, args); /* dtypes: f32 or f64 (backend.c), all alike */
    if (s != CN_OK) return s;
    const cn_view *gv = &args->in[0], *iv = &args->in[1], *xv = &args->in[2], *wv = &args->in[3];
    const cn_view *outs[3] = {NULL, NULL, NULL};
    for (int i = 0, o = 0; i < 3; i++)
        if (args->ints[8 + i]) outs[i] = o < args->n_out ? &args->out[o++] : NULL;
    const cn_view *gxv = outs[0], *gwv = outs[1], *gbv = outs[2];
    cn_dtype dt = gv->dtype;
    size_t es = cn_dtype_size(dt);
    int64_t tasks = g.N * g.groups, k = args->ints[7];
    int gemms = g.K > 0 && g.Og > 0;
    if (gwv) memset(gwv->data, 0, (size_t)(g.O * g.K) * es); /* the sum over no image is 0 */
    if (gxv && !gemms) memset(gxv->data, 0, (size_t)(g.N * g.C * g.H * g.W) * es);
    if (tasks == 0 || g.Og == 0 || g.P == 0) return CN_OK;
    if (g.Og > INT_MAX || g.P > INT_MAX || g.K > INT_MAX)
        return cn_set_error(CN_ERR_BACKEND, op, "the per-group GEMM (%lld x %lld x %lld) exceeds "
                            "BLAS's int range; split the batch or the channels", (long long)g.Og,
                            (long long)g.K, (long long)g.P);
    int64_t kp;
    if (__builtin_mul_overflow(g.K, g.P, &kp) || (uint64_t)kp > SIZE_MAX / 4 / es)
        return cn_set_error(CN_ERR_OUT_OF_MEMORY, op, "the column buffer (%lld x %lld elements) "
                            "exceeds the address space; split the batch or the channels",
                            (long long)g.K, (long long)g.P);

    int64_t w_ld = g.K > 0 ? g.K : 1;
    int w_direct = gxv && gemms ? cpu_weights_direct(wv, g.K, &w_ld) : 1;
    int one = g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
    int direct_w = one && cpu_dense_from(xv, 2) &&
                   (g.Cg == 1 || (xv->strides[1] >= g.P && xv->strides[1] <= INT_MAX));
    int64_t col_ld = direct_w && g.Cg > 1 ? xv->strides[1] : g.P;

    /* The chunks: the weight kernel's (its accumulators decide the sums' order), else the input
     * kernel's (each image's values do not depend on them). */
    size_t kp_bytes = round_line((size_t)kp * es);
    size_t numel_bytes = round_line((size_t)(g.O * g.K) * es);
    int64_t chunks = 1;
    if (gemms && gwv)
        chunks = cpu_conv_chunks(tasks, (double)g.Og * (double)g.K * (double)g.P,
                                 (direct_w ? 0 : kp_bytes) + numel_bytes);
    else if (gemms && gxv)
        chunks = cpu_conv_chunks(tasks, (double)g.K * (double)g.P * (double)g.Og,
                                 one ? 0 : kp_bytes);
    else /* the bias's sums only: by images, as the pool's backward shares its planes */
        chunks = (double)tasks * (double)(g.Og * g.P) < 2.0 * CPU_PARALLEL_GRAIN
                     ? 1
                     : cpu_chunks(tasks, 1);
    size_t w_bytes = w_direct ? 0 : round_line((size_t)(g.O * g.K) * es);
    size_t z_bytes = round_line((size_t)(g.Og * g.P) * es);
    size_t col_bytes = gemms && ((gwv && !direct_w) || (gxv && !one)) ? kp_bytes : 0;
    size_t acc_bytes = gemms && gwv && chunks > 1 ? numel_bytes : 0;
    size_t per_chunk = z_bytes + col_bytes + acc_bytes;
    if (per_chunk > (SIZE_MAX - w_bytes) / 2 / (size_t)chunks)
        return cn_set_error(CN_ERR_OUT_OF_MEMORY, op, "the scratch (%lld chunks of %zu bytes) "
                            "exceeds the address space; split the batch or the channels",
                            (long long)chunks, per_chunk);
    char *scratch = cn__malloc(op, w_bytes + per_chunk * (size_t)chunks);
    if (!scratch) return CN_ERR_OUT_OF_MEMORY;
    const char *wdata = (const char *)wv->data;
    if (!w_direct) {
        cpu_pack_weights(wv, scratch);
        wdata = scratch;
    }
    char *chunk0 = scratch + w_bytes;
    for (int64_t c = 0; c < chunks && acc_bytes; c++)
        memset(chunk0 + per_chunk * (size_t)c + z_bytes + col_bytes, 0, acc_bytes);
    pool_back_job j = {.g = &g, .gv = gv, .iv = iv, .xv = xv, .gx = gxv, .gw = gwv, .gb = gbv,
                       .dt = dt, .es = es, .k = k, .PH = g.OH / k, .PW = g.OW / k,
                       .wdata = wdata, .w_ld = w_ld, .col_ld = col_ld, .direct_w = direct_w,
                       .direct_i = one, .gemms = gemms, .scratch = chunk0,
                       .per_chunk = per_chunk, .z_bytes = z_bytes, .col_bytes = col_bytes,
                       .acc_bytes = acc_bytes};
    cpu_parallel(tasks, chunks, pool_back_tasks, &j);
    if (acc_bytes)
        cpu_conv_sum_parts(dt, gwv->data, chunk0 + z_bytes + col_bytes, per_chunk, (int)chunks,
                           g.O * g.K);
    cn__free(scratch);
    return CN_OK;
}
