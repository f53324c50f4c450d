/* Sampling from distributions: torch.multinomial, and the next-token sampling of language models
 * (temperature, top-k, top-p), composed from public ops on the tensors' device and drawn from a
 * seeded Philox generator, so the same seed gives the same samples on every backend.
 *
 * With replacement, each draw is u * (the row's total) against the row's cumulative sums: the
 * index is the number of cumulative sums <= that value (the first entry whose sum passes it).
 * Without replacement, the n largest keys log(u) / p (Efraimidis and Spirakis: the same law as
 * drawing one at a time and renormalising). */
#include <math.h>
#include <stdio.h>

#include "core/error_internal.h"
#include "nn/nn_internal.h"

/* A 0-d or 1-element tensor's value as a double (a read from the device); NAN on failure. */
static double scalar_of(cn_tensor *t) {
    double v = NAN;
    cn_tensor *d = t ? cn_cast(t, CN_F64) : NULL;
    if (d && cn_read(d, &v, sizeof v) != CN_OK) v = NAN;
    cn_release(d);
    return v;
}

/* probs as [R, C] (a 1-D one as one row). */
static cn_tensor *as_rows(cn_tensor *t) {
    int nd = cn_ndim(t);
    const int64_t *s = cn_shape(t);
    int64_t rows = 1;
    for (int d = 0; d < nd - 1; d++) rows *= s[d];
    int64_t shape[2] = {rows, s[nd - 1]};
    return cn_reshape(t, shape, 2);
}

/* The checks torch.multinomial makes, on the device's values (three scalar reads: the smallest
 * entry, the smallest row sum, the largest entry). */
static cn_status check_probs(const char *op, cn_tensor *p2) {
    double lo = scalar_of(cn_min(p2));
    double row_min = scalar_of(cn_min(cn_sum_dim(p2, 1, 0)));
    if (!(lo >= 0) || !isfinite(row_min) || !(row_min > 0) ||
        !isfinite(scalar_of(cn_max(p2))))
        return cn_set_error(CN_ERR_INVALID_ARG, op, "the probabilities must be finite and >= 0 "
                            "with a positive sum in every row (smallest entry %g, smallest row "
                            "sum %g); pass softmax(logits), or weights >= 0", lo, row_min);
    return CN_OK;
}

/* The draws of multinomial for p2 [R, C] (checked): i64 [R, n]. */
static cn_tensor *draw(const char *op, cn_tensor *p2, int64_t n, int replacement,
                       cn_generator *gen) {
    const int64_t *s = cn_shape(p2);
    int64_t R = s[0], C = s[1], us[2] = {R, n};
    cn_device dev = cn_device_of(p2);
    cn_dtype dt = cn_dtype_of(p2);
    if (!replacement) {
        /* every row needs n categories of positive probability */
        double fewest = scalar_of(cn_min(cn_sum_dim(cn_cast(cn_gt(p2, cn_zeros(NULL, 0, dt, dev)),
                                                            CN_I64),
                                                    1, 0)));
        if (!(fewest >= (double)n)) {
            cn_set_error(CN_ERR_INVALID_ARG, op, "n = %lld samples without replacement, but a "
                         "row has only %.0f categories of positive probability; ask for fewer, "
                         "or sample with replacement", (long long)n, fewest);
            return NULL;
        }
        /* keys log(1 - u) / p, u in [0, 1): the n largest, -inf where p is 0 */
        int64_t ks[2] = {R, C};
        cn_tensor *u = cn_rand_uniform(gen, ks, 2, 0.0, 1.0, dt, dev);
        cn_tensor *keys = cn_div(cn_log(cn_add_scalar(cn_neg(u), 1.0)), p2);
        cn_tensor *idx = NULL;
        cn_tensor *vals = cn_topk(keys, n, 1, 1, 1, &idx);
        return vals ? idx : NULL;
    }
    cn_tensor *cdf = cn_cumsum(p2, 1);                               /* [R, C] */
    cn_tensor *total = cn_slice(cdf, 1, C - 1, C, 1);                /* [R, 1] */
    cn_tensor *u = cn_mul(cn_rand_uniform(gen, us, 2, 0.0, 1.0, dt, dev), total); /* [R, n] */
    int64_t c3[3] = {R, 1, C}, u3[3] = {R, n, 1};
    cn_tensor *below = cn_le(cn_reshape(cdf, c3, 3), cn_reshape(u, u3, 3)); /* [R, n, C] */
    cn_tensor *idx = cn_sum_dim(cn_cast(below, CN_I64), 2, 0);      /* [R, n] */
    /* a draw that rounds to the total itself: the last category */
    return cn_clamp(idx, 0.0, (double)(C - 1));
}

cn_tensor *cn_multinomial(cn_tensor *probs, int64_t n, int replacement, cn_generator *gen) {
    const char *op = "multinomial";
    if (!probs || !gen) {
        cn__null_arg(op, !probs ? "probs" : "gen");
        return NULL;
    }
    char b[128];
    int nd = cn_ndim(probs);
    if (cn_kind_of(probs) != CN_KIND_FLOAT || nd < 1 || nd > 2 || cn_shape(probs)[nd - 1] < 1) {
        cn_set_error(nd < 1 || nd > 2 ? CN_ERR_SHAPE : CN_ERR_KIND, op,
                     "'probs' is %s; it must be a float tensor [C] or [R, C] with C >= 1",
                     cn_tensor_str(probs, b, sizeof b));
        return NULL;
    }
    if (n < 1 || (!replacement && n > cn_shape(probs)[nd - 1])) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "n = %lld; give 1 <= n%s", (long long)n,
                     replacement ? "" : " <= the number of categories (without replacement)");
        return NULL;
    }
    if (cn_scope_begin() != CN_OK) return NULL;
    cn_tensor *p2 = cn_detach(as_rows(probs)), *out = NULL;
    if (p2 && check_probs(op, p2) == CN_OK) {
        cn_tensor *idx = draw(op, p2, n, replacement, gen);
        if (idx && nd == 1) idx = cn_reshape(idx, &n, 1);
        out = cn_keep(idx);
    }
    cn_scope_end();
    return out;
}

cn_tensor *cn_sample_logits(cn_tensor *logits, double temperature, int64_t top_k, double top_p,
                            cn_generator *gen) {
    const char *op = "sample_logits";
    if (!logits || !gen) {
        cn__null_arg(op, !logits ? "logits" : "gen");
        return NULL;
    }
    char b[128];
    int nd = cn_ndim(logits);
    if (cn_kind_of(logits) != CN_KIND_FLOAT || nd < 1 || cn_shape(logits)[nd - 1] < 1) {
        cn_set_error(nd < 1 ? CN_ERR_SHAPE : CN_ERR_KIND, op,
                     "'logits' is %s; it must be a float tensor [.., V] with V >= 1",
                     cn_tensor_str(logits, b, sizeof b));
        return NULL;
    }
    if (!(temperature >= 0) || !isfinite(temperature) || top_k < 0 || !(top_p > 0) ||
        top_p > 1) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "temperature = %g, top_k = %lld, top_p = %g; give "
                     "temperature >= 0 (0: the most likely token), top_k >= 0 (0: all) and "
                     "0 < top_p <= 1 (1: all)", temperature, (long long)top_k, top_p);
        return NULL;
    }
    int64_t V = cn_shape(logits)[nd - 1];
    int64_t out_shape[CN_MAX_DIMS];
    for (int d = 0; d < nd - 1; d++) out_shape[d] = cn_shape(logits)[d];
    if (cn_scope_begin() != CN_OK) return NULL;
    cn_tensor *z = cn_detach(as_rows(logits)), *idx = NULL;
    if (z && temperature == 0) {
        idx = cn_argmax_dim(z, 1, 0); /* greedy */
    } else if (z) {
        z = cn_mul_scalar(z, 1.0 / temperature);
        cn_tensor *map = NULL; /* candidate j of a row is token map[j] (NULL: j itself) */
        if (top_k > 0 && top_k < V) z = cn_topk(z, top_k, 1, 1, 1, &map);
        cn_tensor *p = cn_softmax(z, 1);
        if (p && top_p < 1) {
            /* nucleus: the most likely tokens until their mass reaches top_p (the first always) */
            cn_tensor *order = NULL;
            cn_tensor *ps = cn_sort(p, 1, 1, &order);
            cn_tensor *before = cn_sub(cn_cumsum(ps, 1), ps); /* the mass ahead of each */
            cn_tensor *keep = cn_lt(before, cn_full(NULL, 0, top_p, cn_dtype_of(ps),
                                                    cn_device_of(ps)));
            p = cn_where(keep, ps, cn_zeros(NULL, 0, cn_dtype_of(ps), cn_device_of(ps)));
            cn_tensor *j = p ? draw(op, p, 1, 1, gen) : NULL;
            idx = j ? cn_gather(order, 1, j) : NULL;
        } else if (p) {
            idx = draw(op, p, 1, 1, gen);
        }
        if (idx && map) idx = cn_gather(map, 1, idx);
    }
    if (idx) idx = cn_reshape(idx, out_shape, nd - 1); /* [R] or [R, 1] -> logits' batch dims */
    cn_tensor *out = cn_keep(idx);
    cn_scope_end();
    return out;
}
