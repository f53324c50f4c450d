/* Backward formulas of the indexing ops of issue 16 (masked_fill, tril, triu, flip, repeat,
 * scatter, slice_assign, index_copy, index_add, unfold, masked_select, gather_nd, scatter_nd),
 * written with the public ops on concrete tensors like those of formulas.c, whose table points
 * here. Each returns input i's gradient. */
#include <string.h>

#include "autodiff/formula_helpers.h"

cn_tensor *ad_grad_masked_fill(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    return cn_masked_fill(g, ad_input_value(n, 1), 0.0);
}
cn_tensor *ad_grad_tril(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    return cn_tril(g, n->ints[0]);
}
cn_tensor *ad_grad_triu(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    return cn_triu(g, n->ints[0]);
}
cn_tensor *ad_grad_flip(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    int dims[CN_MAX_DIMS];
    for (int d = 0; d < n->n_ints; d++) dims[d] = (int)n->ints[d];
    return cn_flip(g, dims, n->n_ints);
}
/* repeat: g summed over the copies, one repeated dim at a time: [before, r * size, after] seen as
 * [before, r, size * after] and summed over r. */
cn_tensor *ad_grad_repeat(ad_node *n, cn_tensor *g, int i) {
    const ad_input *a = &n->in[i];
    int nd = n->n_ints, lead = nd - a->ndim;
    cn_tensor *cur = g;
    for (int d = 0; cur && d < nd; d++) {
        int64_t r = n->ints[d], size = d < lead ? 1 : a->shape[d - lead];
        if (r == 1) continue;
        int64_t shape[CN_MAX_DIMS], before = 1, after = 1;
        memcpy(shape, cn_shape(cur), sizeof(int64_t) * (size_t)nd);
        for (int k = 0; k < d; k++) before *= shape[k];
        for (int k = d + 1; k < nd; k++) after *= shape[k];
        int64_t split[3] = {before, r, size * after};
        shape[d] = size;
        cur = cn_reshape(cn_sum_dim(cn_reshape(cur, split, 3), 1, 0), shape, nd);
    }
    return cur ? cn_reshape(cur, a->shape, a->ndim) : NULL;
}
/* 0, 1, ..., len - 1 along dim of a tensor of `shape` (i64, expanded: a view). */
static cn_tensor *positions(const int64_t *shape, int nd, int dim, cn_device dev) {
    int64_t one[CN_MAX_DIMS];
    for (int d = 0; d < nd; d++) one[d] = d == dim ? shape[d] : 1;
    cn_tensor *pos = cn_arange(0, (double)shape[dim], 1, CN_I64, dev);
    return cn_expand(cn_reshape(pos, one, nd), shape, nd);
}
/* scatter: x's gradient is g with the written positions zeroed; src's is g at the position each
 * entry was written to, where that entry won (the last write along dim), else 0. The winners are
 * found by scattering each entry's position along dim and reading back which one stayed. */
cn_tensor *ad_grad_scatter(ad_node *n, cn_tensor *g, int i) {
    int dim = (int)n->ints[0];
    cn_tensor *idx = ad_input_value(n, 1);
    if (!idx) return NULL;
    if (i == 0) return cn_scatter(g, dim, idx, zeros_of(&n->in[2], g));
    if (cn_ndim(idx) == 0) return cn_gather(g, dim, idx);
    cn_device dev = cn_device_of(g);
    cn_tensor *pos = positions(cn_shape(idx), cn_ndim(idx), dim, dev);
    cn_tensor *none = cn_full(n->in[0].shape, n->in[0].ndim, -1, CN_I64, dev);
    cn_tensor *won = cn_eq(cn_gather(cn_scatter(none, dim, idx, pos), dim, idx), pos);
    return cn_where(won, cn_gather(g, dim, idx), scalar_like(g, 0));
}
cn_tensor *ad_grad_slice_assign(ad_node *n, cn_tensor *g, int i) {
    int dim = (int)n->ints[0];
    int64_t start = n->ints[1], step = n->ints[2], len = n->in[1].shape[dim];
    int64_t end = len ? start + (len - 1) * step + 1 : start;
    if (i == 0) return cn_slice_assign(g, zeros_of(&n->in[1], g), dim, start, end, step);
    return cn_slice(g, dim, start, end, step);
}
/* index_copy: as scatter, the winners among repeated index values found by copying positions. */
cn_tensor *ad_grad_index_copy(ad_node *n, cn_tensor *g, int i) {
    int dim = (int)n->ints[0];
    cn_tensor *idx = ad_input_value(n, 1);
    if (!idx) return NULL;
    if (i == 0) return cn_index_copy(g, dim, idx, zeros_of(&n->in[2], g));
    cn_device dev = cn_device_of(g);
    int64_t len = cn_shape(idx)[0], size = n->in[0].shape[dim];
    cn_tensor *pos = cn_arange(0, (double)len, 1, CN_I64, dev);
    cn_tensor *none = cn_full(&size, 1, -1, CN_I64, dev);
    cn_tensor *won = cn_eq(cn_index_select(cn_index_copy(none, 0, idx, pos), 0, idx), pos);
    int64_t along[CN_MAX_DIMS];
    for (int d = 0; d < n->in[2].ndim; d++) along[d] = d == dim ? len : 1;
    return cn_where(cn_reshape(won, along, n->in[2].ndim), cn_index_select(g, dim, idx),
                    scalar_like(g, 0));
}
cn_tensor *ad_grad_index_add(ad_node *n, cn_tensor *g, int i) {
    return i == 0 ? g : cn_index_select(g, (int)n->ints[0], ad_input_value(n, 1));
}
/* unfold: window w's entry j came from w * step + j along dim; g's last dim is moved next to dim
 * and merged with the windows, then index_add sums it back (overlaps add up). */
cn_tensor *ad_grad_unfold(ad_node *n, cn_tensor *g, int i) {
    const ad_input *a = &n->in[i];
    int dim = (int)n->ints[0], nd = a->ndim;
    int64_t size = n->ints[1], step = n->ints[2], windows = n->shape[dim];
    int perm[CN_MAX_DIMS], k = 0;
    for (int d = 0; d < nd; d++) {
        perm[k++] = d;
        if (d == dim) perm[k++] = nd;
    }
    int64_t merged[CN_MAX_DIMS];
    memcpy(merged, a->shape, sizeof(int64_t) * (size_t)nd);
    merged[dim] = windows * size;
    cn_tensor *src = cn_reshape(cn_permute(g, perm), merged, nd);
    cn_device dev = cn_device_of(g);
    const int64_t col[2] = {windows, 1}, row[2] = {1, size}, flat[1] = {windows * size};
    cn_tensor *starts = cn_reshape(
        cn_mul_scalar(cn_arange(0, (double)windows, 1, CN_I64, dev), (double)step), col, 2);
    cn_tensor *offsets = cn_reshape(cn_arange(0, (double)size, 1, CN_I64, dev), row, 2);
    cn_tensor *idx = cn_reshape(cn_add(starts, offsets), flat, 1);
    return cn_index_add(zeros_of(a, g), dim, idx, src);
}
/* masked_select: g goes back to the selected positions of the broadcast shape (found by nonzero
 * on the flattened mask), then is summed over the dims x was broadcast along. */
cn_tensor *ad_grad_masked_select(ad_node *n, cn_tensor *g, int i) {
    const ad_input *a = &n->in[0], *m = &n->in[1];
    cn_tensor *mask = ad_input_value(n, 1);
    if (!mask) return NULL;
    int nd = a->ndim > m->ndim ? a->ndim : m->ndim;
    int64_t shape[CN_MAX_DIMS], numel = 1;
    for (int d = 0; d < nd; d++) {
        int da = d - (nd - a->ndim), dm = d - (nd - m->ndim);
        int64_t sa = da >= 0 ? a->shape[da] : 1, sm = dm >= 0 ? m->shape[dm] : 1;
        shape[d] = sa == 1 ? sm : sa;
        numel *= shape[d];
    }
    const int64_t flat[1] = {numel}, count[1] = {cn_numel(g)};
    cn_tensor *where = cn_reshape(cn_nonzero(cn_reshape(cn_expand(mask, shape, nd), flat, 1)),
                                  count, 1);
    cn_tensor *spread = cn_index_add(cn_zeros(flat, 1, a->dtype, cn_device_of(g)), 0, where, g);
    return sum_to_input(cn_reshape(spread, shape, nd), &n->in[i]);
}

cn_tensor *ad_grad_gather_nd(ad_node *n, cn_tensor *g, int i) {
    return cn_scatter_nd(zeros_of(&n->in[i], g), ad_input_value(n, 1), g, CN_SCATTER_ADD);
}
/* The number b of the tuple each entry of updates ([B.., slice]) belongs to, as i64. */
static cn_tensor *tuple_numbers(const ad_input *upd, const ad_input *idx, cn_device dev) {
    int bnd = idx->ndim - 1;
    int64_t tuples = 1, shape[CN_MAX_DIMS];
    for (int d = 0; d < bnd; d++) tuples *= idx->shape[d];
    for (int d = 0; d < upd->ndim; d++) shape[d] = d < bnd ? upd->shape[d] : 1;
    cn_tensor *b = cn_reshape(cn_arange(0, (double)tuples, 1, CN_I64, dev), shape, upd->ndim);
    return cn_expand(b, upd->shape, upd->ndim);
}
/* scatter_nd, by reduction (see cn_scatter_nd): x is input 0, updates input 2. */
cn_tensor *ad_grad_scatter_nd(ad_node *n, cn_tensor *g, int i) {
    const ad_input *xa = &n->in[0], *ua = &n->in[2];
    cn_tensor *idx = ad_input_value(n, 1);
    if (!idx) return NULL;
    cn_device dev = cn_device_of(g);
    switch ((cn_scatter_reduce)n->ints[0]) {
    case CN_SCATTER_ADD: return i == 0 ? g : cn_gather_nd(g, idx);
    case CN_SCATTER_ASSIGN: {
        if (i == 0) return cn_scatter_nd(g, idx, zeros_of(ua, g), CN_SCATTER_ASSIGN);
        cn_tensor *b = tuple_numbers(ua, &n->in[1], dev);
        cn_tensor *none = cn_full(xa->shape, xa->ndim, -1, CN_I64, dev);
        cn_tensor *won = cn_eq(cn_gather_nd(cn_scatter_nd(none, idx, b, CN_SCATTER_ASSIGN), idx), b);
        return cn_where(won, cn_gather_nd(g, idx), scalar_like(g, 0));
    }
    case CN_SCATTER_MUL: {
        cn_tensor *x = ad_input_value(n, 0), *u = ad_input_value(n, 2);
        cn_tensor *ones = cn_full(xa->shape, xa->ndim, 1, xa->dtype, dev);
        if (i == 0) return cn_mul(g, cn_scatter_nd(ones, idx, u, CN_SCATTER_MUL));
        /* the product of the other updates of each tuple's slice, as r_prod: with no zero among
         * them p / u, with one zero the product of the nonzeros at the zero and 0 elsewhere */
        cn_tensor *zero = cn_eq(u, scalar_like(u, 0));
        cn_tensor *u1 = cn_where(zero, scalar_like(u, 1), u);
        cn_tensor *zeros = cn_scatter_nd(cn_zeros(xa->shape, xa->ndim, CN_I64, dev), idx,
                                         cn_cast(zero, CN_I64), CN_SCATTER_ADD);
        cn_tensor *zb = cn_gather_nd(zeros, idx);
        cn_tensor *pb = cn_gather_nd(cn_scatter_nd(ones, idx, u1, CN_SCATTER_MUL), idx);
        cn_tensor *alone = cn_logical_and(cn_eq(zb, scalar_like(zb, 1)), zero);
        cn_tensor *others = cn_where(cn_eq(zb, scalar_like(zb, 0)), cn_div(pb, u1),
                                     cn_where(alone, pb, scalar_like(u, 0)));
        return cn_mul(cn_gather_nd(cn_mul(g, x), idx), others);
    }
    default: { /* min, max: to the entries equal to the result, shared among ties */
        cn_tensor *x = ad_input_value(n, 0), *u = ad_input_value(n, 2), *y = ad_output_value(n);
        cn_tensor *hit_x = mask_like(cn_eq(x, y), g);
        cn_tensor *hit_u = mask_like(cn_eq(u, cn_gather_nd(y, idx)), g);
        cn_tensor *count = cn_add(hit_x, cn_scatter_nd(zeros_of(xa, g), idx, hit_u, CN_SCATTER_ADD));
        cn_tensor *share = cn_div(g, cn_maximum(count, scalar_like(g, 1)));
        return i == 0 ? cn_mul(share, hit_x) : cn_mul(cn_gather_nd(share, idx), hit_u);
    }
    }
}
