/* CPU deformable convolution (deform_conv2d) and its backward: deformable im2col + GEMM, as
 * torchvision's CPU kernel lowers it.
 *
 * x: [N, C, H, W], offset: [N, 2 G KH KW, OH, OW], w: [O, Cg, KH, KW], mask: [N, G KH KW, OH, OW]
 * or absent, b: [O] or absent, all with any strides (backend.h). Per image n the samples unroll
 * into a column matrix cols: [C KH KW, P] (P = OH OW):
 *   cols[(c KH + i) KW + j, oh OW + ow] = mask[n, k, oh, ow] * sample of x[n, c] at
 *       (oh sh - ph + i dh + offset[n, 2k, oh, ow], ow sw - pw + j dw + offset[n, 2k + 1, oh, ow])
 * with k = (g KH + i) KW + j, g = c / (C / G), the sample by core/deform_math.h. The rows of a
 * weight group are contiguous, so out[n, group] = w_group [Og, K] @ cols_group [K, P] (+ b), K =
 * Cg KH KW. Backward, per image: gw_group += g_group [Og, P] @ cols_group^T, and the columns'
 * gradient cg = w_group^T @ g_group, which the samples send back to x (each corner's weight), to
 * the offsets (the sample's derivatives) and to the mask (the sample), summed over the channels
 * of each offset group in channel order, in double. Tasks are images, split over the pool; each
 * chunk of images sums its weight gradient privately, and the chunks' sums are added in chunk
 * order (deterministic). Outputs contiguous and overwritten; f32 and f64. */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/im2col.h"
#include "core/alloc.h"
#include "core/backend_common.h"
#include "core/deform_math.h"

/* Per-chunk scratch sizes are rounded to cache lines so that threads never share one. */
static size_t round_line(size_t n) { return (n + 63) & ~(size_t)63; }

typedef struct dc_job {
    const cn_conv_geometry *g;
    const cn_view *x, *off, *mask, *b, *gy; /* gy: the output's gradient (backward) */
    const cn_view *out;                     /* forward: y; backward: gx, goff, gw, gmask */
    cn_dtype dt;
    size_t es;
    int64_t G, Cg, Og, KK, K, P, CK; /* CK = C KH KW, the column rows */
    const char *wdata;               /* w as [O, K] at leading dim w_ld */
    int64_t w_ld;
    int x_plane_dense; /* x's planes are dense rows (stride W, 1) */
    char *scratch;     /* per chunk, per_chunk bytes apart */
    size_t per_chunk, cols_bytes, cg_bytes, gp_bytes, acc_bytes, gxd_bytes, god_bytes;
} dc_job;

static double ld(const cn_view *v, int64_t off) {
    return cpu_load_f((const char *)v->data + off * (int64_t)cn_dtype_size(v->dtype), v->dtype);
}

/* x[n, c] at the corner index `at` (row * W + column). */
static double ld_x(const dc_job *j, int64_t base, int64_t at) {
    const cn_view *x = j->x;
    int64_t W = j->g->w;
    if (j->x_plane_dense) return ld(x, base + at); /* rows W apart: at is the element offset */
    return ld(x, base + (at / W) * x->strides[2] + (at % W) * x->strides[3]);
}

/* The taps of tap row k (offset group and tap (i, j)) at output p of image n, and the mask. */
static void dc_sample_at(const dc_job *j, int64_t n, int64_t k, int64_t i, int64_t jj, int64_t p,
                         cn_dc_taps *t, double *m) {
    const cn_conv_geometry *g = j->g;
    const cn_view *o = j->off;
    int64_t oh = p / g->ow, ow = p % g->ow;
    int64_t base = n * o->strides[0] + oh * o->strides[2] + ow * o->strides[3];
    double dy = ld(o, base + 2 * k * o->strides[1]), dx = ld(o, base + (2 * k + 1) * o->strides[1]);
    double y = cn_dc_pos(oh, g->sh, g->ph, i, g->dh, dy),
           x = cn_dc_pos(ow, g->sw, g->pw, jj, g->dw, dx);
    cn_dc_taps_at(y, x, g->h, g->w, t);
    *m = 1.0;
    if (j->mask) {
        const cn_view *mv = j->mask;
        *m = ld(mv, n * mv->strides[0] + k * mv->strides[1] + oh * mv->strides[2] +
                        ow * mv->strides[3]);
    }
}

/* cols [CK, P] (dense, in dt) of image n. Each sampling position (offset group, tap, output
 * position) is worked out once and read for every channel of its group. */
static void dc_im2col(const dc_job *j, int64_t n, char *cols) {
    const cn_conv_geometry *g = j->g;
    int64_t cpg = g->c / j->G; /* channels per offset group */
    for (int64_t og = 0; og < j->G; og++)
        for (int64_t i = 0; i < g->kh; i++)
            for (int64_t jj = 0; jj < g->kw; jj++) {
                int64_t k = (og * g->kh + i) * g->kw + jj;
                for (int64_t p = 0; p < j->P; p++) {
                    cn_dc_taps t;
                    double m;
                    dc_sample_at(j, n, k, i, jj, p, &t, &m);
                    for (int64_t c = og * cpg; c < (og + 1) * cpg; c++) {
                        int64_t xb = n * j->x->strides[0] + c * j->x->strides[1];
                        int64_t r = (c * g->kh + i) * g->kw + jj;
                        double v = 0;
                        for (int q = 0; q < 4; q++)
                            if (t.w[q] != 0) v += t.w[q] * ld_x(j, xb, t.at[q]);
                        cpu_store_f(cols + (size_t)(r * j->P + p) * j->es, j->dt, m * v);
                    }
                }
            }
}

/* ---- forward --------------------------------------------------------------------------------- */

static void forward_tasks(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    const dc_job *j = ctx;
    const cn_conv_geometry *g = j->g;
    char *cols = j->scratch + j->per_chunk * (size_t)chunk;
    for (int64_t n = begin; n < end; n++) {
        char *y = (char *)j->out[0].data + (size_t)(n * g->o * j->P) * j->es;
        if (j->K > 0) {
            dc_im2col(j, n, cols);
            for (int64_t grp = 0; grp < g->groups; grp++)
                cpu_gemm(j->dt, 0, 0, j->Og, j->P, j->K,
                         j->wdata + (size_t)(grp * j->Og * j->w_ld) * j->es, j->w_ld,
                         cols + (size_t)(grp * j->K * j->P) * j->es, j->P, 0.0,
                         y + (size_t)(grp * j->Og * j->P) * j->es, j->P);
        }
        for (int64_t o = 0; o < g->o; o++) {
            double bias = j->b ? ld(j->b, o * j->b->strides[0]) : 0.0;
            char *row = y + (size_t)(o * j->P) * j->es;
            if (!j->b && j->K > 0) continue;
            for (int64_t p = 0; p < j->P; p++) {
                char *e = row + (size_t)p * j->es;
                cpu_store_f(e, j->dt, (j->K > 0 ? cpu_load_f(e, j->dt) : 0.0) + bias);
            }
        }
    }
}

/* ---- backward -------------------------------------------------------------------------------- */

/* Image n: the weight gradient into acc, and x's, the offsets' and the mask's gradients. */
static void backward_image(const dc_job *j, int64_t n, char *mine, char *acc) {
    const cn_conv_geometry *g = j->g;
    size_t es = j->es;
    int64_t P = j->P, HW = g->h * g->w, cpg = g->c / j->G;
    char *cols = mine, *cg = mine + j->cols_bytes, *gp = cg + j->cg_bytes;
    double *gxd = (double *)(gp + j->gp_bytes), *god = (double *)((char *)gxd + j->gxd_bytes);
    double *gmd = god + 2 * j->G * j->KK * P;
    /* g[n] packed dense [O, P] */
    const cn_view *gv = j->gy;
    for (int64_t o = 0; o < g->o; o++)
        for (int64_t p = 0; p < P; p++)
            cpu_store_f(gp + (size_t)(o * P + p) * es, j->dt,
                        ld(gv, n * gv->strides[0] + o * gv->strides[1] +
                                   (p / g->ow) * gv->strides[2] + (p % g->ow) * gv->strides[3]));
    dc_im2col(j, n, cols);
    if (j->Og == 0) memset(cg, 0, (size_t)(j->CK * P) * es); /* no output: nothing flows back */
    for (int64_t grp = 0; grp < g->groups && j->Og > 0 && j->K > 0; grp++) {
        const char *gpg = gp + (size_t)(grp * j->Og * P) * es;
        cpu_gemm(j->dt, 0, 1, j->Og, j->K, P, gpg, P, cols + (size_t)(grp * j->K * P) * es, P, 1.0,
                 acc + (size_t)(grp * j->Og * j->K) * es, j->K);
        cpu_gemm(j->dt, 1, 0, j->K, P, j->Og, j->wdata + (size_t)(grp * j->Og * j->w_ld) * es,
                 j->w_ld, gpg, P, 0.0, cg + (size_t)(grp * j->K * P) * es, P);
    }
    /* per sampling position, the sums over its group's channels (in channel order) */
    memset(gxd, 0, j->gxd_bytes);
    for (int64_t og = 0; og < j->G; og++)
        for (int64_t i = 0; i < g->kh; i++)
            for (int64_t jj = 0; jj < g->kw; jj++) {
                int64_t k = (og * g->kh + i) * g->kw + jj;
                for (int64_t p = 0; p < P; p++) {
                    cn_dc_taps t;
                    double m, s = 0, sy = 0, sx = 0;
                    dc_sample_at(j, n, k, i, jj, p, &t, &m);
                    for (int64_t c = og * cpg; c < (og + 1) * cpg; c++) {
                        int64_t xb = n * j->x->strides[0] + c * j->x->strides[1];
                        int64_t r = (c * g->kh + i) * g->kw + jj;
                        double d = cpu_load_f(cg + (size_t)(r * P + p) * es, j->dt);
                        double v = 0, vy = 0, vx = 0;
                        for (int q = 0; q < 4; q++) {
                            if (t.at[q] < 0) continue;
                            double xv = ld_x(j, xb, t.at[q]);
                            gxd[c * HW + t.at[q]] += m * d * t.w[q];
                            v += t.w[q] * xv;
                            vy += t.wy[q] * xv;
                            vx += t.wx[q] * xv;
                        }
                        s += d * v;
                        sy += m * d * vy;
                        sx += m * d * vx;
                    }
                    god[2 * k * P + p] = sy;
                    god[(2 * k + 1) * P + p] = sx;
                    gmd[k * P + p] = s;
                }
            }
    /* the contiguous outputs' image n */
    char *gx = (char *)j->out[0].data + (size_t)(n * g->c * HW) * es;
    for (int64_t e = 0; e < g->c * HW; e++)
        cpu_store_f(gx + (size_t)e * es, j->dt, gxd[e]);
    int64_t no = 2 * j->G * j->KK * P;
    char *go = (char *)j->out[1].data + (size_t)(n * no) * es;
    for (int64_t e = 0; e < no; e++)
        cpu_store_f(go + (size_t)e * es, j->dt, god[e]);
    if (j->mask) {
        char *gm = (char *)j->out[3].data + (size_t)(n * no / 2) * es;
        for (int64_t e = 0; e < no / 2; e++)
            cpu_store_f(gm + (size_t)e * es, j->dt, gmd[e]);
    }
}

static void backward_tasks(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    const dc_job *j = ctx;
    char *mine = j->scratch + j->per_chunk * (size_t)chunk;
    /* the chunk's weight-gradient sum: its own, or the output itself when there is one chunk */
    char *acc = j->acc_bytes ? mine + j->per_chunk - j->acc_bytes : (char *)j->out[2].data;
    for (int64_t n = begin; n < end; n++)
        backward_image(j, n, mine, acc);
}

/* ---- the kernel ------------------------------------------------------------------------------ */

cn_status cpu_deform_conv2d(const cn_kernel_args *args) {
    const char *op = cn_op_name(args->op);
    const cn_conv_geometry *g = cn__kernel_geometry("cpu", args);
    if (!g) return CN_ERR_INVALID_ARG;
    int bwd = args->op == CN_OP_DEFORM_CONV2D_BACKWARD, has_mask = (int)args->ints[8];
    const cn_view *in = args->in + bwd; /* x, offset, w[, mask][, b] */
    cn_dtype dt = args->out[0].dtype;
    if (dt != CN_F32 && dt != CN_F64) /* unreachable through the router: dtypes[op] (backend.c) */
        return cn__kernel_dtype_error("cpu", args->op, dt);
    dc_job j = {.g = g,
                .x = &in[0],
                .off = &in[1],
                .mask = has_mask ? &in[3] : NULL,
                .b = !bwd && args->n_in > 3 + has_mask ? &in[3 + has_mask] : NULL,
                .gy = bwd ? &args->in[0] : NULL,
                .out = args->out,
                .dt = dt,
                .es = cn_dtype_size(dt),
                .G = args->ints[7],
                .Cg = g->c / g->groups,
                .Og = g->o / g->groups,
                .KK = g->kh * g->kw,
                .P = g->oh * g->ow};
    size_t es = j.es;
    j.x_plane_dense = cpu_dense_from(j.x, 2);
    /* sizes of tensors that exist (their element counts fit): only the column matrix is new */
    j.K = j.Cg * j.KK;
    j.CK = g->c * j.KK;
    int64_t ckp;
    if (__builtin_mul_overflow(j.CK, j.P, &ckp) || (uint64_t)ckp > SIZE_MAX / 8 / es)
        return cn_set_error(CN_ERR_OUT_OF_MEMORY, op,
                            "the column matrix (%lld x %lld elements) "
                            "exceeds the address space; split the batch or the channels",
                            (long long)j.CK, (long long)j.P);
    if (j.Og > INT_MAX || j.P > INT_MAX || j.K > INT_MAX)
        return cn_set_error(CN_ERR_BACKEND, op,
                            "the per-group GEMM (%lld x %lld x %lld) exceeds "
                            "BLAS's int range; split the batch or the channels",
                            (long long)j.Og, (long long)j.K, (long long)j.P);
    const cn_view *wv = &in[2];
    int w_direct = cpu_weights_direct(wv, j.K, &j.w_ld);
    size_t w_bytes = w_direct ? 0 : round_line((size_t)(g->o * j.K) * es);
    j.cols_bytes = round_line((size_t)ckp * es);
    if (bwd) {
        j.cg_bytes = j.cols_bytes;
        j.gp_bytes = round_line((size_t)(g->o * j.P) * es);
        j.gxd_bytes = round_line((size_t)(g->c * g->h * g->w) * sizeof(double));
        j.god_bytes = round_line((size_t)(3 * j.G * j.KK * j.P) * sizeof(double));
    }
    size_t base = j.cols_bytes + j.cg_bytes + j.gp_bytes + j.gxd_bytes + j.god_bytes;
    size_t wg_bytes = bwd ? round_line((size_t)(g->o * j.K) * es) : 0;
    double mnk = (double)g->o * (double)j.K * (double)j.P * (bwd ? 2.0 : 1.0);
    int64_t chunks = cpu_conv_chunks(g->n, mnk, base + wg_bytes);
    if (chunks < 1) chunks = 1; /* an empty batch (the backward's weight gradient is zero) */
    j.acc_bytes = bwd && chunks > 1 ? wg_bytes : 0;
    j.per_chunk = base + j.acc_bytes;
    if (j.per_chunk > SIZE_MAX / 4 / (size_t)chunks)
        return cn_set_error(CN_ERR_OUT_OF_MEMORY, op,
                            "the scratch of %lld images exceeds the "
                            "address space; split the batch",
                            (long long)chunks);
    char *scratch = cn__malloc(op, w_bytes + j.per_chunk * (size_t)chunks);
    if (!scratch) return CN_ERR_OUT_OF_MEMORY;
    j.wdata = (const char *)wv->data;
    if (!w_direct) {
        cpu_pack_weights(wv, scratch);
        j.wdata = scratch;
    }
    j.scratch = scratch + w_bytes;
    if (!bwd) {
        cpu_parallel(g->n, chunks, forward_tasks, &j);
    } else {
        int64_t nw = g->o * j.K;
        memset(args->out[2].data, 0, (size_t)nw * es);
        for (int64_t c = 0; c < chunks && j.acc_bytes; c++)
            memset(j.scratch + j.per_chunk * (size_t)(c + 1) - j.acc_bytes, 0, j.acc_bytes);
        cpu_parallel(g->n, chunks, backward_tasks, &j);
        for (int64_t c = 0; c < chunks && j.acc_bytes; c++) {
            const char *part = j.scratch + j.per_chunk * (size_t)(c + 1) - j.acc_bytes;
            char *gw = (char *)args->out[2].data;
            for (int64_t e = 0; e < nw; e++)
                cpu_store_f(gw + (size_t)e * es, dt,
                            cpu_load_f(gw + (size_t)e * es, dt) +
                                cpu_load_f(part + (size_t)e * es, dt));
        }
    }
    cn__free(scratch);
    return CN_OK;
}
