/* CUDA fused attention (scaled_dot_product_attention) and its backward: simple and correct, one
 * thread per query row (forward, dq) or key row (dk, dv), in the CPU's formulas (cpu/attention.c):
 * the forward's online softmax writes its running, unnormalised output straight into o and keeps
 * m, l in registers, so no [Lq, Lk] matrix is stored; the backward recomputes each probability
 * P_ij = exp(s_ij - lse_i) where it needs it, with Dr_i = g_i . o_i. f32 and f64; any strides. */
#include <math.h>

#include "backends/cuda/common.cuh"
#include "core/backend_common.h"

/* A [B.., L, C] view: batch dims, then rows and columns (in elements). */
typedef struct sdpa_mat {
    int nb;
    int64_t bshape[CN_MAX_DIMS], bstride[CN_MAX_DIMS];
    int64_t rs, cs;
} sdpa_mat;

static sdpa_mat mat_of(const cn_view *v, int nb) {
    sdpa_mat m;
    memset(&m, 0, sizeof m);
    m.nb = nb;
    for (int d = 0; d < nb; d++) m.bshape[d] = v->shape[d], m.bstride[d] = v->strides[d];
    m.rs = v->strides[nb];
    m.cs = v->ndim > nb + 1 ? v->strides[nb + 1] : 0;
    return m;
}

__device__ __forceinline__ int64_t mat_base(const sdpa_mat &m, int64_t b) {
    int64_t off = 0;
    for (int d = m.nb - 1; d >= 0; d--) {
        int64_t i = b % m.bshape[d];
        b /= m.bshape[d];
        off += i * m.bstride[d];
    }
    return off;
}

typedef struct sdpa_geom {
    sdpa_mat q, k, v, mask, g, o, lse;
    int has_mask, causal;
    double scale;
    int64_t batch, lq, lk, d, dv;
} sdpa_geom;

/* s_ij: scale q_i . k_j + mask_ij, -inf for a causal key past i */
template <typename T>
__device__ T score(const sdpa_geom &G, const T *q, const T *k, const T *mask, int64_t b,
                   int64_t i, int64_t j) {
    if (G.causal && j > i) return (T)-INFINITY;
    const T *qi = q + mat_base(G.q, b) + i * G.q.rs;
    const T *kj = k + mat_base(G.k, b) + j * G.k.rs;
    T s = 0;
    for (int64_t c = 0; c < G.d; c++) s += qi[c * G.q.cs] * kj[c * G.k.cs];
    s *= (T)G.scale;
    if (G.has_mask) s += mask[mat_base(G.mask, b) + i * G.mask.rs + j * G.mask.cs];
    return s;
}

/* one thread per (b, i): o [batch, lq, dv] and lse [batch, lq], contiguous */
template <typename T>
__global__ void sdpa_fwd_kernel(const __grid_constant__ sdpa_geom G, const T *q, const T *k,
                                const T *v, const T *mask, T *o, T *lse) {
    CU_GRID_LOOP(row, G.batch * G.lq) {
        int64_t b = row / G.lq, i = row % G.lq;
        T *oi = o + row * G.dv;
        for (int64_t c = 0; c < G.dv; c++) oi[c] = 0;
        T m = (T)-INFINITY, l = 0;
        const T *vb = v + mat_base(G.v, b);
        for (int64_t j = 0; j < G.lk; j++) {
            T s = score(G, q, k, mask, b, i, j);
            if (s == (T)-INFINITY) continue;
            if (s > m) {
                T alpha = exp(m - s);
                for (int64_t c = 0; c < G.dv; c++) oi[c] *= alpha;
                l *= alpha;
                m = s;
            }
            T p = exp(s - m);
            l += p;
            for (int64_t c = 0; c < G.dv; c++) oi[c] += p * vb[j * G.v.rs + c * G.v.cs];
        }
        T inv = l == 0 ? (T)0 : (T)1 / l;
        for (int64_t c = 0; c < G.dv; c++) oi[c] *= inv;
        lse[row] = l == 0 ? (T)-INFINITY : m + log(l);
    }
}

/* Dr_i = g_i . o_i */
template <typename T>
__device__ T dr_of(const sdpa_geom &G, const T *g, const T *o, int64_t b, int64_t i) {
    const T *gi = g + mat_base(G.g, b) + i * G.g.rs, *oi = o + mat_base(G.o, b) + i * G.o.rs;
    T s = 0;
    for (int64_t c = 0; c < G.dv; c++) s += gi[c * G.g.cs] * oi[c * G.o.cs];
    return s;
}

/* P_ij and dS_ij = P_ij (g_i . v_j - Dr_i) */
template <typename T>
__device__ T dscore(const sdpa_geom &G, const T *q, const T *k, const T *v, const T *mask,
                    const T *g, T lse_i, T dr_i, int64_t b, int64_t i, int64_t j, T *p_out) {
    *p_out = 0;
    if (lse_i == (T)-INFINITY) return 0;
    T s = score(G, q, k, mask, b, i, j);
    if (s == (T)-INFINITY) return 0;
    T p = exp(s - lse_i);
    const T *gi = g + mat_base(G.g, b) + i * G.g.rs, *vj = v + mat_base(G.v, b) + j * G.v.rs;
    T dp = 0;
    for (int64_t c = 0; c < G.dv; c++) dp += gi[c * G.g.cs] * vj[c * G.v.cs];
    *p_out = p;
    return p * (dp - dr_i);
}

/* one thread per (b, i): dq [batch, lq, d]; dmask [batch, lq, lk] when not NULL */
template <typename T>
__global__ void sdpa_bwd_q_kernel(const __grid_constant__ sdpa_geom G, const T *g, const T *q,
                                  const T *k, const T *v, const T *o, const T *lse,
                                  const T *mask, T *dq, T *dmask) {
    CU_GRID_LOOP(row, G.batch * G.lq) {
        int64_t b = row / G.lq, i = row % G.lq;
        T l = lse[mat_base(G.lse, b) + i * G.lse.rs], dr = dr_of(G, g, o, b, i);
        T *dqi = dq + row * G.d;
        for (int64_t c = 0; c < G.d; c++) dqi[c] = 0;
        const T *kb = k + mat_base(G.k, b);
        for (int64_t j = 0; j < G.lk; j++) {
            T p, ds = dscore(G, q, k, v, mask, g, l, dr, b, i, j, &p);
            if (dmask) dmask[row * G.lk + j] = ds;
            for (int64_t c = 0; c < G.d; c++) dqi[c] += ds * kb[j * G.k.rs + c * G.k.cs];
        }
        for (int64_t c = 0; c < G.d; c++) dqi[c] *= (T)G.scale;
    }
}

/* one thread per (b, j): dk [batch, lk, d], dv [batch, lk, dv] */
template <typename T>
__global__ void sdpa_bwd_kv_kernel(const __grid_constant__ sdpa_geom G, const T *g, const T *q,
                                   const T *k, const T *v, const T *o, const T *lse,
                                   const T *mask, T *dk, T *dv) {
    CU_GRID_LOOP(row, G.batch * G.lk) {
        int64_t b = row / G.lk, j = row % G.lk;
        T *dkj = dk + row * G.d, *dvj = dv + row * G.dv;
        for (int64_t c = 0; c < G.d; c++) dkj[c] = 0;
        for (int64_t c = 0; c < G.dv; c++) dvj[c] = 0;
        const T *qb = q + mat_base(G.q, b), *gb = g + mat_base(G.g, b);
        for (int64_t i = G.causal ? j : 0; i < G.lq; i++) {
            T l = lse[mat_base(G.lse, b) + i * G.lse.rs], dr = dr_of(G, g, o, b, i);
            T p, ds = dscore(G, q, k, v, mask, g, l, dr, b, i, j, &p);
            for (int64_t c = 0; c < G.dv; c++) dvj[c] += p * gb[i * G.g.rs + c * G.g.cs];
            for (int64_t c = 0; c < G.d; c++) dkj[c] += ds * qb[i * G.q.rs + c * G.q.cs];
        }
        for (int64_t c = 0; c < G.d; c++) dkj[c] *= (T)G.scale;
    }
}

/* The geometry from q at in[qi] (k, v after it) and the mask at in[mi] when present. */
static sdpa_geom geom_of(const cn_kernel_args *a, int qi, int mi) {
    sdpa_geom G;
    memset(&G, 0, sizeof G);
    const cn_view *q = &a->in[qi], *k = &a->in[qi + 1], *v = &a->in[qi + 2];
    int nb = q->ndim - 2;
    G.q = mat_of(q, nb);
    G.k = mat_of(k, nb);
    G.v = mat_of(v, nb);
    G.has_mask = mi < a->n_in;
    if (G.has_mask) G.mask = mat_of(&a->in[mi], nb);
    G.causal = a->ints[0] != 0;
    G.scale = a->reals[0];
    G.batch = 1;
    for (int d = 0; d < nb; d++) G.batch *= q->shape[d];
    G.lq = q->shape[nb];
    G.lk = k->shape[nb];
    G.d = q->shape[nb + 1];
    G.dv = v->shape[nb + 1];
    return G;
}

extern "C" cn_status cuda_sdpa(const cn_kernel_args *a) {
    const char *name = cn_op_name(a->op);
    sdpa_geom G = geom_of(a, 0, 3);
    if (G.batch * G.lq == 0) return CN_OK;
    cu_dev *d = cu_device(name, a->device);
    if (!d) return cn_last_status();
    const void *mask = G.has_mask ? a->in[3].data : NULL;
    unsigned blocks = cu_blocks(G.batch * G.lq);
    if (a->in[0].dtype == CN_F32)
        sdpa_fwd_kernel<float><<<blocks, CU_THREADS, 0, d->stream>>>(
            G, (const float *)a->in[0].data, (const float *)a->in[1].data,
            (const float *)a->in[2].data, (const float *)mask, (float *)a->out[0].data,
            (float *)a->out[1].data);
    else
        sdpa_fwd_kernel<double><<<blocks, CU_THREADS, 0, d->stream>>>(
            G, (const double *)a->in[0].data, (const double *)a->in[1].data,
            (const double *)a->in[2].data, (const double *)mask, (double *)a->out[0].data,
            (double *)a->out[1].data);
    return cu_check_launch(name, "sdpa_fwd_kernel");
}

template <typename T>
static cn_status sdpa_bwd(const cn_kernel_args *a, cu_dev *d, const sdpa_geom &G) {
    const char *name = cn_op_name(a->op);
    const T *g = (const T *)a->in[0].data, *q = (const T *)a->in[1].data;
    const T *k = (const T *)a->in[2].data, *v = (const T *)a->in[3].data;
    const T *o = (const T *)a->in[4].data, *lse = (const T *)a->in[5].data;
    const T *mask = G.has_mask ? (const T *)a->in[6].data : NULL;
    T *dmask = a->n_out > 3 ? (T *)a->out[3].data : NULL;
    if (G.batch * G.lq > 0) {
        sdpa_bwd_q_kernel<T><<<cu_blocks(G.batch * G.lq), CU_THREADS, 0, d->stream>>>(
            G, g, q, k, v, o, lse, mask, (T *)a->out[0].data, dmask);
        cn_status s = cu_check_launch(name, "sdpa_bwd_q_kernel");
        if (s != CN_OK) return s;
    }
    if (G.batch * G.lk > 0) {
        sdpa_bwd_kv_kernel<T><<<cu_blocks(G.batch * G.lk), CU_THREADS, 0, d->stream>>>(
            G, g, q, k, v, o, lse, mask, (T *)a->out[1].data, (T *)a->out[2].data);
        return cu_check_launch(name, "sdpa_bwd_kv_kernel");
    }
    return CN_OK;
}

extern "C" cn_status cuda_sdpa_backward(const cn_kernel_args *a) {
    sdpa_geom G = geom_of(a, 1, 6);
    G.g = mat_of(&a->in[0], G.q.nb);
    G.o = mat_of(&a->in[4], G.q.nb);
    G.lse = mat_of(&a->in[5], G.q.nb);
    cu_dev *d = cu_device(cn_op_name(a->op), a->device);
    if (!d) return cn_last_status();
    return a->in[0].dtype == CN_F32 ? sdpa_bwd<float>(a, d, G) : sdpa_bwd<double>(a, d, G);
}
