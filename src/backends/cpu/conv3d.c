/* CPU 3-D convolutions: conv3d, conv_transpose3d and conv3d's weight gradient.
 *
 * Lowered to GEMM (cpu_gemm) per (image, group), as conv2d is: the receptive fields unroll into
 * a column matrix col [K, P], K = Cg*KD*KH*KW, P = OD*OH*OW (vol2col; zero outside x), and
 *   conv3d:           y[n, group] [Og, P]  = w_g [Og, K] @ col            (+ bias)
 *   weight gradient:  gw_g [Og, K]        += gy[n, group] [Og, P] @ col^T  (over the images)
 *   conv_transpose3d: cols [K, P] = w_g^T @ y[n, group];  out[n, group] = bias + col2vol(cols)
 * (conv_transpose3d's input is the convolution's y-shaped side, its output the x-shaped one:
 * core/conv3d_common.h). Strided operands are packed dense first. When one column matrix would
 * pass CONV3D_COL_BYTES, or a GEMM dim BLAS's int, or is tiny, each output element is computed
 * by its definition instead (core/conv3d_common.h, the arithmetic of the CUDA kernel). */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "core/alloc.h"
#include "core/backend_common.h"
#include "core/conv3d_common.h"

#define CONV3D_COL_BYTES ((size_t)64 << 20)
/* A column matrix this small (K * P) is not worth packing: computed by definition (so the op
 * table's smallest cases run that path, and the others the GEMM one). */
#define CONV3D_DIRECT_KP 128

/* ---- by definition ---------------------------------------------------------------------------- */

typedef struct c3_job {
    const cn_kernel_args *a;
    const cn__conv3d_geom *g;
} c3_job;

static void c3_tasks(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const c3_job *j = ctx;
    const cn_kernel_args *a = j->a;
    const cn_view *b = a->op != CN_OP_CONV3D_BACKWARD_WEIGHT && a->n_in > 2 ? &a->in[2] : NULL;
    for (int64_t i = begin; i < end; i++) {
        double v = cn__conv3d_at(a->op, j->g, &a->in[0], &a->in[1], b, i);
        if (a->out[0].dtype == CN_F32)
            ((float *)a->out[0].data)[i] = (float)v;
        else
            ((double *)a->out[0].data)[i] = v;
    }
}

static void by_definition(const cn_kernel_args *args, const cn__conv3d_geom *g, int64_t total) {
    double per = args->op == CN_OP_CONV3D_BACKWARD_WEIGHT ? (double)g->out_n * (double)g->n
                                                           : (double)g->k_n * (double)g->cg;
    int64_t grain = per >= 4096 ? 1 : (int64_t)(4096 / (per + 1)) + 1;
    c3_job j = {.a = args, .g = g};
    cpu_parallel(total, cpu_chunks(total, grain), c3_tasks, &j);
}

/* ---- lowered to GEMM -------------------------------------------------------------------------- */

/* dst (dense, row-major over `rows` x the view's dims from `from` on) = the view's elements
 * of rows [row0, row0 + rows) of dim from - 1 at index `lead` of the dims before (n for 5-D
 * tensors; none for the weight, from = 1). Read as doubles, written in dt. */
static void pack(const cn_view *v, int64_t lead, int from, int64_t row0, int64_t rows,
                 void *dst) {
    int64_t inner = 1;
    for (int d = from; d < v->ndim; d++) inner *= v->shape[d];
    int64_t base = from == 2 ? lead * v->strides[0] : 0;
    int64_t i = 0, pos[5];
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t e = 0; e < inner; e++, i++) {
            int64_t f = e, off = base + (row0 + r) * v->strides[from - 1];
            for (int d = v->ndim - 1; d >= from; d--) {
                pos[d] = f % v->shape[d];
                f /= v->shape[d];
                off += pos[d] * v->strides[d];
            }
            double x = cn__conv3d_load(v, off);
            if (v->dtype == CN_F32)
                ((float *)dst)[i] = (float)x;
            else
                ((double *)dst)[i] = x;
        }
    }
}

/* col [K, P] of x's channels [c0, c0 + Cg) of image n (x any strides). */
static void vol2col(const cn__conv3d_geom *g, const cn_view *x, int64_t n, int64_t c0,
                    void *col) {
    int64_t kk[3], q[3], P = g->out_n;
    for (int64_t c = 0; c < g->cg; c++)
        for (int64_t t = 0; t < g->k_n; t++) {
            cn__conv3d_unflat(t, g->k, kk);
            int64_t row = (c * g->k_n + t) * P;
            for (int64_t p = 0; p < P; p++) {
                cn__conv3d_unflat(p, g->out, q);
                int64_t off = n * x->strides[0] + (c0 + c) * x->strides[1];
                int inside = 1;
                for (int i = 0; i < 3 && inside; i++) {
                    int64_t at = q[i] * g->s[i] - g->p[i] + kk[i] * g->d[i];
                    inside = at >= 0 && at < g->in[i];
                    off += at * x->strides[2 + i];
                }
                double v = inside ? cn__conv3d_load(x, off) : 0.0;
                if (x->dtype == CN_F32)
                    ((float *)col)[row + p] = (float)v;
                else
                    ((double *)col)[row + p] = v;
            }
        }
}

/* out [Cg, in..] (dense) += col2vol(cols [K, P]): each column entry added where its window tap
 * lands inside. */
static void col2vol(const cn__conv3d_geom *g, const void *cols, cn_dtype dt, void *out) {
    int64_t kk[3], q[3], P = g->out_n;
    for (int64_t c = 0; c < g->cg; c++)
        for (int64_t t = 0; t < g->k_n; t++) {
            cn__conv3d_unflat(t, g->k, kk);
            int64_t row = (c * g->k_n + t) * P;
            for (int64_t p = 0; p < P; p++) {
                cn__conv3d_unflat(p, g->out, q);
                int64_t off = c;
                int inside = 1;
                for (int i = 0; i < 3 && inside; i++) {
                    int64_t at = q[i] * g->s[i] - g->p[i] + kk[i] * g->d[i];
                    inside = at >= 0 && at < g->in[i];
                    off = off * g->in[i] + at;
                }
                if (!inside) continue;
                if (dt == CN_F32)
                    ((float *)out)[off] += ((const float *)cols)[row + p];
                else
                    ((double *)out)[off] += ((const double *)cols)[row + p];
            }
        }
}

typedef struct gemm_job {
    const cn_kernel_args *a;
    const cn__conv3d_geom *g;
    const void *wpack; /* the weight, dense [O, K] */
    char *scratch;     /* per chunk: col [K, P], then a packed y block [Og, P] */
    size_t per_chunk, col_bytes, es;
} gemm_job;

/* (image, group) tasks of conv3d and conv_transpose3d */
static void gemm_tasks(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    const gemm_job *j = ctx;
    const cn__conv3d_geom *g = j->g;
    const cn_kernel_args *a = j->a;
    cn_dtype dt = a->out[0].dtype;
    const cn_view *b = a->n_in > 2 ? &a->in[2] : NULL;
    char *col = j->scratch + j->per_chunk * (size_t)chunk, *blk = col + j->col_bytes;
    int64_t K = g->cg * g->k_n, P = g->out_n;
    const char *wg0 = (const char *)j->wpack;
    for (int64_t t = begin; t < end; t++) {
        int64_t n = t / g->groups, grp = t % g->groups;
        const char *wg = wg0 + (size_t)(grp * g->og * K) * j->es;
        if (a->op == CN_OP_CONV3D) {
            vol2col(g, &a->in[0], n, grp * g->cg, col);
            char *y = (char *)a->out[0].data + (size_t)((n * g->o + grp * g->og) * P) * j->es;
            cpu_gemm(dt, 0, 0, g->og, P, K, wg, K, col, P, 0.0, y, P);
            if (b)
                for (int64_t o = 0; o < g->og; o++) {
                    double bv = cn__conv3d_load(b, (grp * g->og + o) * b->strides[0]);
                    for (int64_t p = 0; p < P; p++) {
                        if (dt == CN_F32)
                            ((float *)y)[o * P + p] += (float)bv;
                        else
                            ((double *)y)[o * P + p] += bv;
                    }
                }
        } else { /* conv_transpose3d: in[0] is y-shaped */
            pack(&a->in[0], n, 2, grp * g->og, g->og, blk);
            cpu_gemm(dt, 1, 0, K, P, g->og, wg, K, blk, P, 0.0, col, P);
            int64_t plane = g->cg * g->in_n;
            char *x = (char *)a->out[0].data + (size_t)((n * g->c + grp * g->cg) * g->in_n) * j->es;
            for (int64_t i = 0; i < plane; i++) {
                double bv = b ? cn__conv3d_load(b, (grp * g->cg + i / g->in_n) * b->strides[0])
                              : 0.0;
                if (dt == CN_F32)
                    ((float *)x)[i] = (float)bv;
                else
                    ((double *)x)[i] = bv;
            }
            col2vol(g, col, dt, x);
        }
    }
}

/* conv3d's weight gradient, one group per task: gw_g = sum over n of gy[n, g] @ col^T */
static void weight_tasks(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    const gemm_job *j = ctx;
    const cn__conv3d_geom *g = j->g;
    const cn_kernel_args *a = j->a;
    cn_dtype dt = a->out[0].dtype;
    char *col = j->scratch + j->per_chunk * (size_t)chunk, *blk = col + j->col_bytes;
    int64_t K = g->cg * g->k_n, P = g->out_n;
    for (int64_t grp = begin; grp < end; grp++) {
        char *gw = (char *)a->out[0].data + (size_t)(grp * g->og * K) * j->es;
        memset(gw, 0, (size_t)(g->og * K) * j->es);
        for (int64_t n = 0; n < g->n; n++) {
            vol2col(g, &a->in[1], n, grp * g->cg, col);
            pack(&a->in[0], n, 2, grp * g->og, g->og, blk);
            cpu_gemm(dt, 0, 1, g->og, K, P, blk, P, col, P, 1.0, gw, K);
        }
    }
}

cn_status cpu_conv3d(const cn_kernel_args *args) {
    cn_dtype dt = args->out[0].dtype;
    if (dt != CN_F32 && dt != CN_F64) /* unreachable through the router: dtypes[op] (backend.c) */
        return cn__kernel_dtype_error("cpu", args->op, dt);
    cn__conv3d_geom g;
    cn__conv3d_geom_of(args, &g);
    int64_t total = cn__view_numel(&args->out[0]);
    if (total == 0) return CN_OK;
    size_t es = cn_dtype_size(dt);
    int64_t K = g.cg * g.k_n, P = g.out_n, kp;
    int wgrad = args->op == CN_OP_CONV3D_BACKWARD_WEIGHT;
    int64_t tasks = wgrad ? g.groups : g.n * g.groups;
    if (tasks == 0 || K == 0 || P == 0 || g.og == 0 || K > INT_MAX || P > INT_MAX ||
        g.og > INT_MAX || __builtin_mul_overflow(K, P, &kp) ||
        (uint64_t)kp > CONV3D_COL_BYTES / es || kp <= CONV3D_DIRECT_KP) {
        by_definition(args, &g, total);
        return CN_OK;
    }
    size_t col_bytes = ((size_t)kp * es + 63) & ~(size_t)63;
    size_t per_chunk = col_bytes + (size_t)(g.og * P) * es;
    int64_t chunks = cpu_chunks(tasks, 1);
    size_t w_bytes = wgrad ? 0 : (size_t)(g.o * K) * es;
    char *scratch = cn__malloc(cn_op_name(args->op), w_bytes + per_chunk * (size_t)chunks);
    if (!scratch) return CN_ERR_OUT_OF_MEMORY;
    if (!wgrad) pack(&args->in[1], 0, 1, 0, g.o, scratch);
    gemm_job j = {.a = args, .g = &g, .wpack = scratch, .scratch = scratch + w_bytes,
                  .per_chunk = per_chunk, .col_bytes = col_bytes, .es = es};
    cpu_parallel(tasks, chunks, wgrad ? weight_tasks : gemm_tasks, &j);
    cn__free(scratch);
    return CN_OK;
}
