/* Front-ends of the fused normalisations (cn_layer_norm, cn_rms_norm) and of their backward
 * kernels: the checks, dense operands, the outputs, and the node. x is seen as M rows of the N
 * elements its last k dims hold; the forward kernel also writes each row's mean (layer_norm) and
 * rstd, which the node keeps as inputs beside x: a layer_norm node's inputs are (x, mean, rstd[,
 * w][, b]), an rms_norm node's (x, rstd[, w]). A backend without the fused kernel gets the
 * composed formula instead. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "cinder/ops.h"
#include "core/error_internal.h"
#include "dispatch/backward_ops.h"
#include "dispatch/router.h"

static const char *const LN = "layer_norm";
static const char *const RMS = "rms_norm";

/* Checks x, normalized_shape, weight and bias (NULL when absent) and eps for op; on success
 * *eps_out is the eps to use (rms_norm's default resolved). */
static cn_status check_args(const char *op, cn_tensor *x, const int64_t *shape, int k,
                            cn_tensor *w, cn_tensor *b, double eps, double *eps_out) {
    char a[128], s[128];
    if (k < 1 || k > CN_MAX_DIMS)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "ndim = %d; normalise over 1 to %d trailing "
                            "dims", k, CN_MAX_DIMS);
    for (int d = 0; d < k; d++)
        if (shape[d] < 0)
            return cn_set_error(CN_ERR_INVALID_ARG, op, "normalized_shape[%d] = %lld; sizes must "
                                "be >= 0", d, (long long)shape[d]);
    cn_tensor *t[3] = {x, w, b};
    const char *names[3] = {"x", "weight", "bias"};
    for (int i = 0; i < 3; i++)
        if (t[i] && (cn__check_kind(op, names[i], t[i], CN_KINDS_FLOAT) != CN_OK ||
                     (i && cn__check_same_dtype(op, "x", x, names[i], t[i]) != CN_OK)))
            return cn_last_status();
    int nd = x->ndim;
    if (nd < k || memcmp(x->shape + nd - k, shape, sizeof(int64_t) * (size_t)k) != 0)
        return cn_set_error(CN_ERR_SHAPE, op, "'x' is %s but normalized_shape is %s; x's "
                            "trailing dims (the last %d) must equal it, as in PyTorch",
                            cn_tensor_str(x, a, sizeof a), cn__shape_str(shape, k, s, sizeof s),
                            k);
    for (int i = 1; i < 3; i++)
        if (t[i] && (t[i]->ndim != k ||
                     memcmp(t[i]->shape, shape, sizeof(int64_t) * (size_t)k) != 0))
            return cn_set_error(CN_ERR_SHAPE, op, "'%s' is %s; it must have normalized_shape %s "
                                "(or be NULL)", names[i], cn_tensor_str(t[i], a, sizeof a),
                                cn__shape_str(shape, k, s, sizeof s));
    if (op == RMS && eps == CN_RMS_NORM_EPS_DEFAULT)
        eps = x->dtype == CN_F64 ? DBL_EPSILON : FLT_EPSILON;
    if (!(eps >= 0) || !isfinite(eps))
        return cn_set_error(CN_ERR_INVALID_ARG, op, "eps = %g; it must be finite and >= 0 "
                            "(PyTorch's default: %s)", eps,
                            op == RMS ? "CN_RMS_NORM_EPS_DEFAULT, the dtype's epsilon" : "1e-5");
    *eps_out = eps;
    return CN_OK;
}

/* Dense (row-major) versions of t[0..n) into d (NULL stays NULL); 0 with the error set. */
static int dense_all(cn_tensor *const *t, cn_tensor **d, int n) {
    int ok = 1;
    for (int i = 0; i < n; i++) {
        d[i] = t[i] && ok ? cn_contiguous(t[i]) : NULL;
        ok = ok && (!t[i] || d[i]);
    }
    if (!ok)
        for (int i = 0; i < n; i++) {
            cn_release(d[i]);
            d[i] = NULL;
        }
    return ok;
}

/* The mean of t over its last k dims, kept (a new tensor; NULL with the error set). */
static cn_tensor *trailing_mean(cn_tensor *t, int k) {
    cn_tensor *m = cn_retain(t);
    for (int i = 0; i < k && m; i++) {
        cn_tensor *next = cn_mean_dim(m, t->ndim - 1 - i, 1);
        cn_release(m);
        m = next;
    }
    return m;
}

/* The composed formula through public ops, for a backend without the fused kernel (its
 * arguments checked): y = c rsqrt(mean(c^2) + eps) [w] [+ b], c = x - mean(x) (rms: x). */
static cn_tensor *norm_composed(int rms, cn_tensor *x, int k, cn_tensor *w, cn_tensor *b,
                                double eps) {
    cn_tensor *mean = rms ? NULL : trailing_mean(x, k);
    cn_tensor *c = rms ? cn_retain(x) : mean ? cn_sub(x, mean) : NULL;
    cn_tensor *sq = c ? cn_mul(c, c) : NULL, *ms = sq ? trailing_mean(sq, k) : NULL;
    cn_tensor *var = ms ? cn_add_scalar(ms, eps) : NULL, *rs = var ? cn_rsqrt(var) : NULL;
    cn_tensor *y = rs ? cn_mul(c, rs) : NULL, *yw = y && w ? cn_mul(y, w) : cn_retain(y);
    cn_tensor *out = yw && b ? cn_add(yw, b) : cn_retain(yw);
    cn_tensor *tmp[8] = {mean, c, sq, ms, var, rs, y, yw};
    for (int i = 0; i < 8; i++) cn_release(tmp[i]);
    return out;
}

/* The forward of both: y, and the row statistics into stats[0..n_stats) (layer_norm: mean,
 * rstd; rms_norm: rstd) when stats is not NULL (new concrete tensors), else released. */
static cn_tensor *norm_forward(cn_op kop, cn_tensor *x, const int64_t *shape, int k,
                               cn_tensor *w, cn_tensor *b, double eps, cn_tensor **stats) {
    const char *op = kop == CN_OP_LAYER_NORM ? LN : RMS;
    int rms = kop == CN_OP_RMS_NORM, n_stats = rms ? 1 : 2;
    if (!x || !shape) {
        cn__null_arg(op, !x ? "x" : "normalized_shape");
        return NULL;
    }
    cn_tensor *in[3] = {x}, *given[3] = {x, w, b};
    const char *names[3] = {"x"}, *all_names[3] = {"x", "weight", "bias"};
    int n_in = 1;
    for (int i = 1; i < 3; i++)
        if (given[i]) {
            in[n_in] = given[i];
            names[n_in++] = all_names[i];
        }
    cn_device dev;
    const cn_backend *be = cn__route(op, in, names, n_in, &dev);
    if (!be) return NULL;
    if (check_args(op, x, shape, k, w, b, eps, &eps) != CN_OK) return NULL;
    if (!stats && !cn__has_kernel(kop, x)) return norm_composed(rms, x, k, w, b, eps);
    cn_tensor *d[3], *outs[3] = {NULL, NULL, NULL}, *y = NULL;
    if (!dense_all(in, d, n_in)) return NULL;
    cn_device concrete = dev;
    concrete.autodiff = 0;
    concrete.checkpoint = 0;
    outs[0] = cn__tensor_alloc(op, x->shape, x->ndim, x->dtype, dev);
    int alloc_ok = outs[0] != NULL;
    for (int i = 1; i <= n_stats && alloc_ok; i++)
        alloc_ok = (outs[i] = cn__tensor_alloc(op, x->shape, x->ndim - k, x->dtype, concrete)) !=
                   NULL;
    if (!alloc_ok) goto done;
    cn_view views[3];
    for (int i = 0; i < n_in; i++) cn__tensor_as_view(d[i], &views[i]);
    int64_t ints[3] = {k, w != NULL, b != NULL};
    double reals[1] = {eps};
    if (cn__launch(be, dev, kop, views, n_in, outs, n_stats + 1, ints, rms ? 2 : 3, reals, 1) !=
        CN_OK)
        goto done;
    /* the node: (x, stats.., w, b) */
    cn_tensor *rec[5];
    int n_rec = 0;
    rec[n_rec++] = d[0];
    for (int i = 1; i <= n_stats; i++) rec[n_rec++] = outs[i];
    for (int i = 1; i < n_in; i++) rec[n_rec++] = d[i];
    y = cn__record(kop, outs[0], rec, n_rec, ints, rms ? 2 : 3, reals, 1);
    outs[0] = NULL; /* y, or released by the record */
done:
    for (int i = 0; i < n_in; i++) cn_release(d[i]);
    cn_release(outs[0]);
    for (int i = 1; i <= n_stats; i++) {
        if (y && stats)
            stats[i - 1] = outs[i];
        else
            cn_release(outs[i]);
    }
    return y;
}

cn_tensor *cn_layer_norm(cn_tensor *x, const int64_t *normalized_shape, int ndim,
                         cn_tensor *weight, cn_tensor *bias, double eps) {
    return norm_forward(CN_OP_LAYER_NORM, x, normalized_shape, ndim, weight, bias, eps, NULL);
}

cn_tensor *cn_rms_norm(cn_tensor *x, const int64_t *normalized_shape, int ndim,
                       cn_tensor *weight, double eps) {
    return norm_forward(CN_OP_RMS_NORM, x, normalized_shape, ndim, weight, NULL, eps, NULL);
}

cn_tensor *cn__layer_norm_forward(cn_tensor *x, const int64_t *normalized_shape, int ndim,
                                  cn_tensor *weight, cn_tensor *bias, double eps,
                                  cn_tensor **mean, cn_tensor **rstd) {
    cn_tensor *stats[2] = {NULL, NULL};
    cn_tensor *y = norm_forward(CN_OP_LAYER_NORM, x, normalized_shape, ndim, weight, bias, eps,
                                stats);
    *mean = stats[0];
    *rstd = stats[1];
    return y;
}

cn_tensor *cn__rms_norm_forward(cn_tensor *x, const int64_t *normalized_shape, int ndim,
                                cn_tensor *weight, double eps, cn_tensor **rstd) {
    *rstd = NULL;
    return norm_forward(CN_OP_RMS_NORM, x, normalized_shape, ndim, weight, NULL, eps, rstd);
}

/* ---- the backward kernels -------------------------------------------------------------------- */

/* Both: in = (g, x, stats.., w?) as the kernel takes them; grads[0..3) = dx, dw, db (NULL when not
 * wanted). */
static cn_status norm_backward(cn_op kop, cn_tensor *const *given, int n_given, int k,
                               int want_dw, int want_db, cn_tensor **grads) {
    const char *op = cn_op_name(kop);
    int rms = kop == CN_OP_RMS_NORM_BACKWARD, n_stats = rms ? 1 : 2;
    const char *all_names[5] = {"g", "x", rms ? "rstd" : "mean", rms ? "weight" : "rstd",
                                "weight"};
    for (int i = 0; i < 3; i++) grads[i] = NULL;
    cn_device dev;
    const cn_backend *be = cn__route(op, given, all_names, n_given, &dev);
    if (!be) return cn_last_status();
    cn_tensor *g = given[0], *x = given[1];
    for (int i = 0; i < n_given; i++)
        if (cn__check_kind(op, all_names[i], given[i], CN_KINDS_FLOAT) != CN_OK ||
            cn__check_same_dtype(op, "x", x, all_names[i], given[i]) != CN_OK)
            return cn_last_status();
    int nd = x->ndim, has_w = n_given > 2 + n_stats;
    int ok = k >= 1 && k <= nd && g->ndim == nd &&
             memcmp(g->shape, x->shape, sizeof(int64_t) * (size_t)nd) == 0;
    for (int i = 2; ok && i < 2 + n_stats; i++)
        ok = given[i]->ndim == nd - k &&
             memcmp(given[i]->shape, x->shape, sizeof(int64_t) * (size_t)(nd - k)) == 0;
    if (ok && has_w)
        ok = given[n_given - 1]->ndim == k &&
             memcmp(given[n_given - 1]->shape, x->shape + nd - k, sizeof(int64_t) * (size_t)k) ==
                 0;
    if (!ok)
        return cn_set_error(CN_ERR_SHAPE, op, "g must have x's shape, the row statistics x's "
                            "leading dims and weight x's last %d dims", k);
    cn_tensor *d[5];
    if (!dense_all(given, d, n_given)) return cn_last_status();
    cn_tensor *outs[3] = {cn__tensor_alloc(op, x->shape, nd, x->dtype, dev), NULL, NULL};
    int n_out = 1;
    cn_status s = outs[0] ? CN_OK : cn_last_status();
    int want[2] = {want_dw, want_db && !rms};
    for (int i = 0; i < 2 && s == CN_OK; i++)
        if (want[i]) {
            outs[n_out] = cn__tensor_alloc(op, x->shape + nd - k, k, x->dtype, dev);
            if (!outs[n_out++]) s = cn_last_status();
        }
    if (s == CN_OK) {
        cn_view views[5];
        for (int i = 0; i < n_given; i++) cn__tensor_as_view(d[i], &views[i]);
        int64_t ints[4] = {k, has_w, want[0], want[1]};
        s = cn__launch(be, dev, kop, views, n_given, outs, n_out, ints, rms ? 3 : 4, NULL, 0);
    }
    for (int i = 0; i < n_given; i++) cn_release(d[i]);
    if (s != CN_OK) {
        for (int i = 0; i < 3; i++) cn_release(outs[i]);
        return s;
    }
    int at = 0;
    grads[0] = outs[at++];
    for (int i = 0; i < 2; i++)
        if (want[i]) grads[1 + i] = outs[at++];
    return CN_OK;
}

cn_status cn__layer_norm_backward(cn_tensor *g, cn_tensor *x, cn_tensor *mean, cn_tensor *rstd,
                                  cn_tensor *w, int k, int want_dw, int want_db,
                                  cn_tensor **grads) {
    cn_tensor *in[5] = {g, x, mean, rstd, w};
    return norm_backward(CN_OP_LAYER_NORM_BACKWARD, in, w ? 5 : 4, k, want_dw, want_db, grads);
}

cn_status cn__rms_norm_backward(cn_tensor *g, cn_tensor *x, cn_tensor *rstd, cn_tensor *w, int k,
                                int want_dw, cn_tensor **grads) {
    cn_tensor *in[4] = {g, x, rstd, w};
    return norm_backward(CN_OP_RMS_NORM_BACKWARD, in, w ? 4 : 3, k, want_dw, 0, grads);
}
