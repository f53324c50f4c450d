/* Front-ends of matmul and linear: numpy.matmul promotion of 1-D operands, batch broadcasting. */
#include <string.h>

#include "cinder/ops.h"
#include "core/error_internal.h"
#include "dispatch/backward_ops.h"
#include "dispatch/router.h"

cn_tensor *cn_matmul(cn_tensor *a, cn_tensor *b) {
    const char *op = "matmul";
    cn_tensor *in[2] = {a, b};
    const char *names[2] = {"a", "b"};
    cn_device dev;
    const cn_backend *be = cn__route(op, in, names, 2, &dev);
    if (!be || cn__check_kind(op, "a", a, CN_KINDS_NUMERIC) != CN_OK ||
        cn__check_kind(op, "b", b, CN_KINDS_NUMERIC) != CN_OK ||
        cn__check_same_dtype(op, "a", a, "b", b) != CN_OK)
        return NULL;
    char x[128], y[128];
    if (a->ndim == 0 || b->ndim == 0) {
        cn_set_error(CN_ERR_SHAPE, op, "'%s' is 0-d (%s); matmul needs at least 1-D operands "
                     "(use cn_mul for scalars)", a->ndim == 0 ? "a" : "b",
                     cn_tensor_str(a->ndim == 0 ? a : b, x, sizeof x));
        return NULL;
    }
    /* views of a as [..., M, K] and b as [..., K, N], promoting 1-D operands */
    cn_view va = {0}, vb = {0}; /* zeroed: the compiler cannot see ndim >= 1 below */
    cn__tensor_as_view(a, &va);
    cn__tensor_as_view(b, &vb);
    int a_vec = a->ndim == 1, b_vec = b->ndim == 1;
    if (a_vec) {
        va.ndim = 2;
        va.shape[1] = a->shape[0];
        va.strides[1] = a->strides[0];
        va.shape[0] = 1;
        va.strides[0] = 0;
    }
    if (b_vec) {
        vb.ndim = 2;
        vb.shape[1] = 1;
        vb.strides[1] = 0;
    }
    int64_t M = va.shape[va.ndim - 2], K = va.shape[va.ndim - 1];
    int64_t K2 = vb.shape[vb.ndim - 2], N = vb.shape[vb.ndim - 1];
    if (K != K2) {
        cn_set_error(CN_ERR_SHAPE, op, "inner dims differ: 'a' %s has K = %lld but 'b' %s has "
                     "K = %lld; transpose or reshape one so a's last dim equals b's second to "
                     "last", cn_tensor_str(a, x, sizeof x), (long long)K,
                     cn_tensor_str(b, y, sizeof y), (long long)K2);
        return NULL;
    }
    /* broadcast the batch dims */
    int ba = va.ndim - 2, bb = vb.ndim - 2, nb = ba > bb ? ba : bb;
    int64_t shape[CN_MAX_DIMS];
    cn_view xa = va, xb = vb;
    xa.ndim = xb.ndim = nb + 2;
    for (int i = 0; i < nb; i++) {
        int da = ba - nb + i, db = bb - nb + i;
        int64_t sa = da >= 0 ? va.shape[da] : 1, sb = db >= 0 ? vb.shape[db] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            cn_set_error(CN_ERR_SHAPE, op, "batch dims of 'a' %s and 'b' %s do not broadcast "
                         "(%lld vs %lld); make them equal or 1", cn_tensor_str(a, x, sizeof x),
                         cn_tensor_str(b, y, sizeof y), (long long)sa, (long long)sb);
            return NULL;
        }
        shape[i] = sa == 1 ? sb : sa;
        xa.shape[i] = xb.shape[i] = shape[i];
        xa.strides[i] = (da >= 0 && va.shape[da] == shape[i]) ? va.strides[da] : 0;
        xb.strides[i] = (db >= 0 && vb.shape[db] == shape[i]) ? vb.strides[db] : 0;
    }
    xa.shape[nb] = M;
    xa.shape[nb + 1] = K;
    xa.strides[nb] = va.strides[ba];
    xa.strides[nb + 1] = va.strides[ba + 1];
    xb.shape[nb] = K;
    xb.shape[nb + 1] = N;
    xb.strides[nb] = vb.strides[bb];
    xb.strides[nb + 1] = vb.strides[bb + 1];
    shape[nb] = M;
    shape[nb + 1] = N;

    cn_tensor *out = cn__tensor_alloc(op, shape, nb + 2, a->dtype, dev);
    if (!out) return NULL;
    cn_view views[2] = {xa, xb};
    if (cn__launch(be, dev, CN_OP_MATMUL, views, 2, &out, 1, NULL, 0, NULL, 0) != CN_OK) {
        cn_release(out);
        return NULL;
    }
    /* drop the promoted dims again (size 1, so the header stays contiguous) */
    if (a_vec && b_vec) {
        out->ndim -= 2;
    } else if (b_vec) {
        out->ndim--;
    } else if (a_vec) {
        out->shape[out->ndim - 2] = out->shape[out->ndim - 1];
        out->strides[out->ndim - 2] = out->strides[out->ndim - 1];
        out->ndim--;
    }
    return cn__record(CN_OP_MATMUL, out, in, 2, NULL, 0, NULL, 0);
}

/* x's leading dims folded into *rows, and the output's shape (x's leading dims, then n) into
 * shape; 0 with the error when the rows number past int64. */
static int linear_rows(const char *op, cn_tensor *x, int64_t n, int64_t *rows, int64_t *shape) {
    int64_t m = 1;
    for (int d = 0; d < x->ndim - 1; d++) {
        if (__builtin_mul_overflow(m, x->shape[d], &m)) { /* possible only when K is 0 */
            char buf[128];
            cn_set_error(CN_ERR_OVERFLOW, op, "'x' is %s: its rows number past int64; give it "
                         "fewer", cn_tensor_str(x, buf, sizeof buf));
            return 0;
        }
        shape[d] = x->shape[d];
    }
    shape[x->ndim - 1] = n;
    *rows = m;
    return 1;
}

/* The linear kernel (gelu: linear_gelu's, with approx; r: linear_add's, r folded to [M, N]) on
 * x [.., K] folded to [M, K] (a view, or a copy when its leading dims do not fold), recorded as
 * one node; the result is viewed back as [.., N]. linear_add's node is (x, w, r[, b]);
 * linear_gelu's node is (x, w, d[, b]), d = gelu' that the kernel wrote beside y,
 * asked for only when the node will be recorded (grad mode on and an input tracked). */
static cn_tensor *linear_fused(cn_tensor *x, cn_tensor *w, cn_tensor *b, cn_tensor *r, int gelu,
                               cn_gelu_approx approx) {
    const char *op = gelu ? "linear_gelu" : r ? "linear_add" : "linear";
    /* the kernel's inputs: x, w[, r][, b] */
    cn_tensor *in[4] = {x, w, r ? r : b, r ? b : NULL};
    const char *names[4] = {"x", "w", r ? "r" : "b", "b"};
    int n = 2 + (r != NULL) + (b != NULL);
    cn_device dev;
    const cn_backend *be = cn__route_floats(op, in, names, n, 0, &dev);
    if (!be) return NULL;
    int64_t K = w->shape[1], N = w->shape[0], M, shape[CN_MAX_DIMS];
    if (!linear_rows(op, x, N, &M, shape)) return NULL;
    const int64_t flat[2] = {M, K}, out_shape[2] = {M, N};
    cn_tensor *x2 = cn_reshape(x, flat, 2), *r2 = x2 && r ? cn_reshape(r, out_shape, 2) : NULL;
    cn_tensor *out = x2 && (r2 || !r) ? cn__tensor_alloc(op, out_shape, 2, x->dtype, dev) : NULL;
    cn_view views[4];
    cn_tensor *args[4] = {x2, w, r ? r2 : b, r ? b : NULL};
    for (int i = 0; out && i < n; i++) cn__tensor_as_view(args[i], &views[i]);
    if (!gelu) {
        cn_op kop = r ? CN_OP_LINEAR_ADD : CN_OP_LINEAR;
        if (out && cn__launch(be, dev, kop, views, n, &out, 1, NULL, 0, NULL, 0) != CN_OK) {
            cn_release(out);
            out = NULL;
        }
        out = out ? cn__record(kop, out, args, n, NULL, 0, NULL, 0) : NULL;
    } else if (out) {
        int want_d = cn__will_record(dev, args, n);
        cn_device concrete = dev;
        concrete.autodiff = 0;
        concrete.checkpoint = 0;
        cn_tensor *outs[2] = {out, want_d ? cn__tensor_alloc(op, out_shape, 2, x->dtype, concrete)
                                          : NULL};
        int64_t ints[2] = {approx, want_d};
        if ((want_d && !outs[1]) || cn__launch(be, dev, CN_OP_LINEAR_GELU, views, n, outs,
                                               1 + want_d, ints, 2, NULL, 0) != CN_OK) {
            cn_release(out);
            out = NULL;
        } else if (want_d) {
            cn_tensor *rec[4] = {x2, w, outs[1], b};
            const int64_t node_ints[2] = {approx, b != NULL};
            out = cn__record(CN_OP_LINEAR_GELU, out, rec, n + 1, node_ints, 2, NULL, 0);
        }
        cn_release(outs[1]); /* the node keeps its own reference */
    }
    cn_release(x2);
    cn_release(r2);
    cn_tensor *y = out ? cn_reshape(out, shape, x->ndim) : NULL;
    cn_release(out);
    return y;
}

/* w is 2-D [out, in] and b, when given, [out]; else the error, naming op. */
static int linear_w_b_fit(const char *op, cn_tensor *w, cn_tensor *b) {
    char s[128];
    if (w->ndim != 2) {
        cn_set_error(CN_ERR_SHAPE, op, "'w' is %s; it must be 2-D [out, in]",
                     cn_tensor_str(w, s, sizeof s));
        return 0;
    }
    if (b && (b->ndim != 1 || b->shape[0] != w->shape[0])) {
        cn_set_error(CN_ERR_SHAPE, op, "'b' is %s; it must be 1-D [out] = [%lld] to match 'w'",
                     cn_tensor_str(b, s, sizeof s), (long long)w->shape[0]);
        return 0;
    }
    return 1;
}

/* cn_linear and cn_linear_gelu (gelu: after the linear, with approx). */
static cn_tensor *linear_op(cn_tensor *x, cn_tensor *w, cn_tensor *b, int gelu,
                            cn_gelu_approx approx) {
    const char *op = gelu ? "linear_gelu" : "linear";
    if (!x || !w) {
        cn__null_arg(op, !x ? "x" : "w");
        return NULL;
    }
    if (!linear_w_b_fit(op, w, b)) return NULL;
    if (gelu && approx != CN_GELU_ERF && approx != CN_GELU_TANH) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "approx = %d; use CN_GELU_ERF or CN_GELU_TANH",
                     (int)approx);
        return NULL;
    }
    cn_op kop = gelu ? CN_OP_LINEAR_GELU : CN_OP_LINEAR;
    if (x->ndim >= 1 && x->shape[x->ndim - 1] == w->shape[1] && cn__has_kernel(kop, x))
        return linear_fused(x, w, b, NULL, gelu, approx);
    /* matmul's checks (and errors) for anything else, and a backend without the kernel */
    cn_tensor *wt = cn_transpose(w, 0, 1);
    cn_tensor *y = cn_matmul(x, wt);
    cn_release(wt);
    cn_tensor *out = y && b ? cn_add(y, b) : cn_retain(y);
    cn_release(y);
    if (!out || !gelu) return out;
    cn_tensor *h = cn_gelu(out, approx);
    cn_release(out);
    return h;
}

cn_tensor *cn_linear(cn_tensor *x, cn_tensor *w, cn_tensor *b) {
    return linear_op(x, w, b, 0, CN_GELU_ERF);
}

cn_tensor *cn_linear_gelu(cn_tensor *x, cn_tensor *w, cn_tensor *b, cn_gelu_approx approx) {
    return linear_op(x, w, b, 1, approx);
}

/* cn_linear_add: r's shape checked, then the linear_add kernel through linear_fused; a backend
 * without the kernel gets linear, then add. */
cn_tensor *cn_linear_add(cn_tensor *x, cn_tensor *w, cn_tensor *b, cn_tensor *r) {
    const char *op = "linear_add";
    if (!x || !w || !r) {
        cn__null_arg(op, !x ? "x" : !w ? "w" : "r");
        return NULL;
    }
    char s[128], s2[128];
    if (!linear_w_b_fit(op, w, b)) return NULL;
    int fits = x->ndim >= 1 && x->shape[x->ndim - 1] == w->shape[1];
    int same = x->ndim >= 1 && r->ndim == x->ndim && r->shape[r->ndim - 1] == w->shape[0];
    for (int d = 0; same && d < x->ndim - 1; d++) same = r->shape[d] == x->shape[d];
    if (fits && !same) {
        cn_set_error(CN_ERR_SHAPE, op, "'r' is %s; it must have the output's shape, x's leading "
                     "dims and [out] = [%lld] (x is %s): expand it first if it broadcasts",
                     cn_tensor_str(r, s, sizeof s), (long long)w->shape[0],
                     cn_tensor_str(x, s2, sizeof s2));
        return NULL;
    }
    if (!fits || !cn__has_kernel(CN_OP_LINEAR_ADD, x)) { /* linear's errors, or no kernel */
        cn_tensor *y = cn_linear(x, w, b);
        cn_tensor *out = y ? cn_add(y, r) : NULL;
        cn_release(y);
        return out;
    }
    return linear_fused(x, w, b, r, 0, CN_GELU_ERF);
}
