/* Quantized tensors (cinder/quant.h): cn_quantize and cn_dequantize (on the host, the packed
 * storage moved to and from the device once), the view rule, transfers, and the quantized
 * linear's front-end. The layout is core/quant.h's. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cinder/ops.h"
#include "cinder/quant.h"
#include "core/alloc.h"
#include "core/error_internal.h"
#include "core/quant.h"
#include "dispatch/registry.h"
#include "dispatch/router.h"

/* The layout of a new contiguous quantized tensor of `shape`. */
typedef struct qlayout {
    int64_t numel, group, n_scales, per; /* per: elements of a group (group: at least 1) */
    size_t data_bytes, scales_at, total;
} qlayout;

static qlayout layout_of(cn_dtype s, const int64_t *shape, int ndim, int64_t numel) {
    qlayout l = {.numel = numel};
    int64_t per;
    if (cn__quant_is_block(s)) {
        l.n_scales = numel / CN__QBLOCK;
        per = CN__QBLOCK;
    } else if (s == CN_Q8_CHANNEL && ndim > 0) {
        l.n_scales = shape[0];
        per = shape[0] ? numel / shape[0] : 0;
    } else {
        l.n_scales = 1;
        per = numel;
    }
    l.per = per;
    l.group = per > 0 ? per : 1;
    l.data_bytes = s == CN_Q4_BLOCK ? (size_t)numel / 2 : (size_t)numel;
    l.scales_at = (l.data_bytes + 15) & ~(size_t)15;
    /* numel elements already exist as floats of >= 2 bytes: these sums cannot overflow */
    l.total = l.scales_at + (size_t)l.n_scales * (size_t)cn__quant_scale_size(s);
    return l;
}

/* ---- the schemes on the host ----------------------------------------------------------------- */

static void put_scale(cn_dtype s, uint8_t *scales, int64_t i, float d) {
    if (cn__quant_is_block(s)) {
        uint16_t h = cn__f32_to_f16(d);
        memcpy(scales + 2 * i, &h, 2);
    } else {
        memcpy(scales + 4 * i, &d, 4);
    }
}

/* Group g of n elements x (storage elements g*n ..) into buf's values and scale g. */
static void quantize_group(cn_dtype s, const float *x, int64_t n, int64_t first, uint8_t *data,
                           uint8_t *scales, int64_t g) {
    float amax = 0.0f, max = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        float a = fabsf(x[j]);
        if (amax < a) {
            amax = a;
            max = x[j];
        }
    }
    if (s == CN_Q4_BLOCK) { /* ggml's quantize_row_q4_0_ref */
        const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int64_t j = 0; j < n; j++) {
            int v = (int)(int8_t)(x[j] * id + 8.5f);
            uint8_t q = (uint8_t)(v < 15 ? v : 15);
            int64_t e = first + j;
            if (e & 1)
                data[e >> 1] = (uint8_t)((data[e >> 1] & 0x0f) | (q << 4));
            else
                data[e >> 1] = (uint8_t)((data[e >> 1] & 0xf0) | q);
        }
        put_scale(s, scales, g, d);
        return;
    }
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int64_t j = 0; j < n; j++) {
        /* ggml's Q8_0 rounds ties away from zero (roundf); PyTorch ties to even (nearbyint) */
        float r = s == CN_Q8_BLOCK ? roundf(x[j] * id) : nearbyintf(x[j] * id);
        if (r > 127.0f) r = 127.0f;
        if (r < -127.0f) r = -127.0f;
        data[first + j] = (uint8_t)(int8_t)r;
    }
    put_scale(s, scales, g, d);
}

/* The storage bytes of quantized t on the host (cn__free them); NULL with the error set. */
static uint8_t *storage_to_host(const char *op, const cn_tensor *t) {
    const cn_storage *st = t->storage;
    uint8_t *host = cn__malloc(op, st->q_nbytes ? (size_t)st->q_nbytes : 1);
    if (!host) return NULL;
    const cn_backend *b = cn__backend(st->device.backend);
    cn_status s = CN_OK;
    if (b->synchronize) s = b->synchronize(b->ctx, st->device.index);
    if (s == CN_OK && st->q_nbytes)
        s = b->copy_to_host(b->ctx, st->device.index, host, st->data, (size_t)st->q_nbytes);
    if (s != CN_OK) {
        cn__free(host);
        return NULL;
    }
    return host;
}

/* A tensor of dtype s and the given geometry over a new storage on `device` holding the nbytes
 * of host (values, then scales at scales_at, group elements per scale). */
static cn_tensor *make_quant(const char *op, cn_dtype s, const uint8_t *host, size_t nbytes,
                             size_t scales_at, int64_t group, const int64_t *shape,
                             const int64_t *strides, int ndim, int64_t offset, int64_t numel,
                             cn_device device) {
    cn_device concrete = device;
    concrete.autodiff = 0;
    concrete.checkpoint = 0;
    int64_t n = (int64_t)nbytes;
    cn_tensor *t = cn__tensor_alloc(op, &n, 1, CN_U8, concrete);
    if (!t) return NULL;
    const cn_backend *b = cn__backend(concrete.backend);
    if (nbytes && b->copy_from_host(b->ctx, concrete.index, t->storage->data, host, nbytes) !=
                      CN_OK) {
        cn_release(t);
        return NULL;
    }
    t->dtype = s;
    t->ndim = ndim;
    for (int d = 0; d < CN_MAX_DIMS; d++) {
        t->shape[d] = d < ndim ? shape[d] : 0;
        t->strides[d] = d < ndim ? strides[d] : 0;
    }
    t->numel = numel;
    t->offset = offset;
    t->device = device; /* on an autodiff device: a constant, never tracked */
    t->storage->q_scales_at = (int64_t)scales_at;
    t->storage->q_group = group;
    t->storage->q_nbytes = (int64_t)nbytes;
    return t;
}

cn_tensor *cn_quantize(cn_tensor *x, cn_dtype scheme) {
    const char *op = "quantize";
    CN__CHECK_LIVE(op, x);
    if (!x) {
        cn__null_arg(op, "x");
        return NULL;
    }
    char buf[128];
    if (!cn__is_quant(scheme)) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "scheme %d (%s) is not a quantized dtype; use "
                     "CN_Q8_TENSOR, CN_Q8_CHANNEL, CN_Q8_BLOCK or CN_Q4_BLOCK", (int)scheme,
                     cn_dtype_name(scheme));
        return NULL;
    }
    if (cn__check_kind(op, "x", x, CN_KINDS_FLOAT) != CN_OK) return NULL;
    if (cn__quant_is_block(scheme) && (x->ndim == 0 || x->shape[x->ndim - 1] % CN__QBLOCK)) {
        cn_set_error(CN_ERR_SHAPE, op, "'x' is %s but %s quantizes blocks of %d along the last "
                     "dim, which must be a multiple of %d; pad the last dim (cn_pad) or use "
                     "CN_Q8_CHANNEL / CN_Q8_TENSOR", cn_tensor_str(x, buf, sizeof buf),
                     cn_dtype_name(scheme), CN__QBLOCK, CN__QBLOCK);
        return NULL;
    }
    qlayout l = layout_of(scheme, x->shape, x->ndim, x->numel);
    float *xs = cn__malloc(op, (size_t)(l.numel ? l.numel : 1) * sizeof(float));
    uint8_t *host = xs ? cn__calloc(op, l.total ? l.total : 1, 1) : NULL;
    cn_tensor *out = NULL;
    if (!host) goto done;
    cn_tensor *xf = x->dtype == CN_F32 ? cn_retain(x) : cn_cast(x, CN_F32);
    cn_status s = xf ? cn_read(xf, xs, (size_t)l.numel * sizeof(float)) : cn_last_status();
    cn_release(xf);
    if (s != CN_OK) goto done;
    for (int64_t i = 0; i < l.numel; i++)
        if (!isfinite(xs[i])) {
            cn_set_error(CN_ERR_INVALID_ARG, op, "'x' %s has a non-finite element (%g at flat "
                         "index %lld); quantization needs finite values: clean it first (e.g. "
                         "cn_nan_to_num)", cn_tensor_str(x, buf, sizeof buf), (double)xs[i],
                         (long long)i);
            goto done;
        }
    for (int64_t g = 0; g < l.n_scales; g++)
        quantize_group(scheme, xs + g * l.per, l.per, g * l.per, host, host + l.scales_at, g);
    int64_t strides[CN_MAX_DIMS], numel;
    cn__contiguous_strides(x->shape, x->ndim, strides, &numel);
    out = make_quant(op, scheme, host, l.total, l.scales_at, l.group, x->shape, strides, x->ndim,
                     0, l.numel, x->device);
done:
    cn__free(host);
    cn__free(xs);
    return out;
}

cn_tensor *cn_dequantize(cn_tensor *q, cn_dtype dtype) {
    const char *op = "dequantize";
    CN__CHECK_LIVE(op, q);
    if (!q) {
        cn__null_arg(op, "q");
        return NULL;
    }
    char buf[128];
    if (!cn__is_quant(q->dtype)) {
        cn_set_error(CN_ERR_KIND, op, "'q' is %s, not quantized; cn_dequantize reads the "
                     "tensors cn_quantize makes (use cn_cast for a float or int tensor)",
                     cn_tensor_str(q, buf, sizeof buf));
        return NULL;
    }
    if ((unsigned)dtype >= CN_DTYPE_COUNT || cn__dtype_kind(dtype) != CN_KIND_FLOAT) {
        cn_set_error(CN_ERR_DTYPE, op, "dtype %s is not a float dtype; dequantize to CN_F32, "
                     "CN_F64, CN_F16 or CN_BF16", cn_dtype_name(dtype));
        return NULL;
    }
    uint8_t *host = storage_to_host(op, q);
    double *vals = host ? cn__malloc(op, (size_t)(q->numel ? q->numel : 1) * sizeof(double))
                        : NULL;
    cn_tensor *out = NULL;
    if (vals) {
        const uint8_t *scales = host + q->storage->q_scales_at;
        int64_t idx[CN_MAX_DIMS] = {0}, group = q->storage->q_group;
        for (int64_t i = 0; i < q->numel; i++) {
            int64_t e = q->offset;
            for (int d = 0; d < q->ndim; d++) e += idx[d] * q->strides[d];
            vals[i] = (double)cn__quant_q(q->dtype, host, e) *
                      (double)cn__quant_scale(q->dtype, scales, e / group);
            for (int d = q->ndim - 1; d >= 0 && ++idx[d] == q->shape[d]; d--) idx[d] = 0;
        }
        cn_tensor *f = cn_from_data(vals, q->shape, q->ndim, CN_F64, q->device);
        out = f && dtype != CN_F64 ? cn_cast(f, dtype) : cn_retain(f);
        cn_release(f);
    }
    cn__free(vals);
    cn__free(host);
    return out;
}

/* ---- views and transfers ------------------------------------------------------------------- */

cn_status cn__quant_view_check(const char *op, const cn_tensor *t, const int64_t *shape,
                               const int64_t *strides, int ndim, int64_t offset) {
    if (!cn__quant_is_block(t->dtype)) return CN_OK;
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) numel = shape[d] == 0 ? 0 : numel;
    if (numel == 0 && ndim > 0) return CN_OK; /* no element: no block to split */
    const char *why = NULL;
    if (ndim == 0)
        why = "a 0-d view has no last dim to hold blocks";
    else if (shape[ndim - 1] % CN__QBLOCK)
        why = "its last dim is not a multiple of 32";
    else if (strides[ndim - 1] != 1)
        why = "its last dim is not contiguous (stride 1)";
    else if (offset % CN__QBLOCK)
        why = "it starts inside a block";
    else
        for (int d = 0; d < ndim - 1 && !why; d++)
            if (shape[d] > 1 && strides[d] % CN__QBLOCK) why = "an outer stride splits a block";
    if (!why) return CN_OK;
    char a[128], b[128];
    return cn_set_error(CN_ERR_INVALID_ARG, op, "'t' is %s, whose blocks of 32 along the last "
                        "dim must stay whole, but the view %s would split them: %s; keep the last "
                        "dim (reshape the outer dims, slice along them) or cn_dequantize first",
                        cn_tensor_str(t, a, sizeof a), cn__shape_str(shape, ndim, b, sizeof b),
                        why);
}

cn_status cn__quant_no_copy(const char *op, const cn_tensor *t, const char *why) {
    char a[128];
    return cn_set_error(CN_ERR_INVALID_ARG, op, "'t' is %s: %s, and a quantized tensor is never "
                        "copied into a new layout; cn_dequantize it, rearrange, and cn_quantize "
                        "again", cn_tensor_str(t, a, sizeof a), why);
}

cn_tensor *cn__quant_to_device(const char *op, cn_tensor *t, cn_device device) {
    uint8_t *host = storage_to_host(op, t);
    if (!host) return NULL;
    const cn_storage *st = t->storage;
    cn_tensor *out = make_quant(op, t->dtype, host, (size_t)st->q_nbytes, (size_t)st->q_scales_at,
                                st->q_group, t->shape, t->strides, t->ndim, t->offset, t->numel,
                                device);
    cn__free(host);
    return out;
}

/* ---- parts ----------------------------------------------------------------------------------- */

/* The shapes of the parts of a quantized tensor of dtype s and logical shape. */
static void parts_shapes(cn_dtype s, const int64_t *shape, int ndim, int64_t *vs, int *vn,
                         int64_t *ss, int *sn) {
    for (int d = 0; d < ndim; d++) vs[d] = ss[d] = shape[d];
    *vn = ndim;
    if (s == CN_Q4_BLOCK) vs[ndim - 1] = shape[ndim - 1] / 2;
    if (cn__quant_is_block(s)) {
        ss[ndim - 1] = shape[ndim - 1] / CN__QBLOCK;
        *sn = ndim;
    } else {
        ss[0] = s == CN_Q8_CHANNEL && ndim > 0 ? shape[0] : 1;
        *sn = 1;
    }
}

cn_status cn_quant_parts(cn_tensor *q, cn_tensor **values, cn_tensor **scales) {
    const char *op = "quant_parts";
    CN__CHECK_LIVE(op, q);
    if (values) *values = NULL;
    if (scales) *scales = NULL;
    if (!q || !values || !scales) {
        cn__null_arg(op, !q ? "q" : !values ? "values" : "scales");
        return cn_last_status();
    }
    char buf[128];
    if (!cn__is_quant(q->dtype))
        return cn_set_error(CN_ERR_KIND, op, "'q' is %s, not quantized; make one with "
                            "cn_quantize", cn_tensor_str(q, buf, sizeof buf));
    const cn_storage *st = q->storage;
    int64_t group = st->q_group, first = q->offset;
    /* contiguous, and whole groups: a per-tensor scale is one whatever the view */
    int whole = cn_is_contiguous(q) &&
                (q->dtype == CN_Q8_TENSOR ||
                 (q->numel > 0 && first % group == 0 && q->numel % group == 0) ||
                 (q->numel == 0 && first == 0 && q->storage->q_nbytes == (int64_t)layout_of(
                      q->dtype, q->shape, q->ndim, 0).total));
    if (!whole)
        return cn__quant_no_copy(op, q, "it is not contiguous over whole scale groups");
    if (q->dtype == CN_Q8_CHANNEL && q->numel > 0 &&
        q->numel / group != (q->ndim > 0 ? q->shape[0] : 1))
        return cn__quant_no_copy(op, q, "its dim 0 is not the channels it was quantized along");
    int64_t vs[CN_MAX_DIMS], ss[CN_MAX_DIMS];
    int vn, sn;
    parts_shapes(q->dtype, q->shape, q->ndim, vs, &vn, ss, &sn);
    uint8_t *host = storage_to_host(op, q);
    if (!host) return cn_last_status();
    int ssize = cn__quant_scale_size(q->dtype);
    size_t vfirst = q->dtype == CN_Q4_BLOCK ? (size_t)first / 2 : (size_t)first;
    int64_t sfirst = q->dtype == CN_Q8_TENSOR ? 0 : first / group;
    const uint8_t *sp = host + st->q_scales_at + sfirst * ssize;
    cn_device dev = q->device;
    *values = cn_from_data(host + vfirst, vs, vn, CN_U8, dev);
    *scales = *values ? cn_from_data(sp, ss, sn, ssize == 2 ? CN_F16 : CN_F32, dev) : NULL;
    cn__free(host);
    if (!*scales) {
        cn_release(*values);
        *values = NULL;
        return cn_last_status();
    }
    return CN_OK;
}

cn_tensor *cn_quant_from_parts(cn_tensor *values, cn_tensor *scales, cn_dtype scheme,
                               const int64_t *shape, int ndim) {
    const char *op = "quant_from_parts";
    CN__CHECK_LIVE(op, values);
    CN__CHECK_LIVE(op, scales);
    if (!values || !scales || (!shape && ndim > 0)) {
        cn__null_arg(op, !values ? "values" : !scales ? "scales" : "shape");
        return NULL;
    }
    char a[128], b[128], c[128];
    if (!cn__is_quant(scheme)) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "scheme %s is not a quantized dtype; use "
                     "CN_Q8_TENSOR, CN_Q8_CHANNEL, CN_Q8_BLOCK or CN_Q4_BLOCK",
                     cn_dtype_name(scheme));
        return NULL;
    }
    int64_t strides[CN_MAX_DIMS], numel = 0;
    if (ndim < 0 || ndim > CN_MAX_DIMS ||
        cn__contiguous_strides(shape, ndim, strides, &numel) != CN_OK) {
        cn_set_error(CN_ERR_SHAPE, op, "shape (ndim %d) is not a valid tensor shape", ndim);
        return NULL;
    }
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0) {
            cn_set_error(CN_ERR_SHAPE, op, "shape %s has a negative size",
                         cn__shape_str(shape, ndim, a, sizeof a));
            return NULL;
        }
    if (cn__quant_is_block(scheme) && (ndim == 0 || shape[ndim - 1] % CN__QBLOCK)) {
        cn_set_error(CN_ERR_SHAPE, op, "shape %s: %s needs a last dim that is a multiple of 32",
                     cn__shape_str(shape, ndim, a, sizeof a), cn_dtype_name(scheme));
        return NULL;
    }
    int64_t vs[CN_MAX_DIMS], ss[CN_MAX_DIMS];
    int vn, sn;
    parts_shapes(scheme, shape, ndim, vs, &vn, ss, &sn);
    cn_dtype sdt = cn__quant_scale_size(scheme) == 2 ? CN_F16 : CN_F32;
    int vok = values->dtype == CN_U8 && values->ndim == vn, sok = scales->dtype == sdt &&
                                                                 scales->ndim == sn;
    for (int d = 0; d < vn && vok; d++) vok = values->shape[d] == vs[d];
    for (int d = 0; d < sn && sok; d++) sok = scales->shape[d] == ss[d];
    if (!vok || !sok) {
        cn_set_error(values->dtype != CN_U8 || scales->dtype != sdt ? CN_ERR_DTYPE : CN_ERR_SHAPE,
                     op, "%s %s needs values u8 %s and scales %s %s, but got values %s and "
                     "scales %s; pass the parts cn_quant_parts gives", cn_dtype_name(scheme),
                     cn__shape_str(shape, ndim, a, sizeof a),
                     cn__shape_str(vs, vn, b, sizeof b), cn_dtype_name(sdt),
                     cn__shape_str(ss, sn, c, sizeof c), cn_tensor_str(values, a, sizeof a),
                     cn_tensor_str(scales, b, sizeof b));
        return NULL;
    }
    qlayout l = layout_of(scheme, shape, ndim, numel);
    uint8_t *host = cn__calloc(op, l.total ? l.total : 1, 1);
    if (!host) return NULL;
    cn_tensor *out = NULL;
    size_t sbytes = (size_t)scales->numel * cn__dtype_size(sdt);
    if ((l.data_bytes == 0 || cn_read(values, host, l.data_bytes) == CN_OK) &&
        (sbytes == 0 || cn_read(scales, host + l.scales_at, sbytes) == CN_OK) &&
        (size_t)l.n_scales * cn__dtype_size(sdt) == sbytes)
        out = make_quant(op, scheme, host, l.total, l.scales_at, l.group, shape, strides, ndim, 0,
                         numel, values->device);
    else if (cn_last_status() == CN_OK)
        cn_set_error(CN_ERR_SHAPE, op, "the scales do not match the shape's groups");
    cn__free(host);
    return out;
}

/* ---- the quantized linear -------------------------------------------------------------------- */

cn_tensor *cn_quant_linear(cn_tensor *x, cn_tensor *wq, cn_tensor *bias) {
    const char *op = "quant_linear";
    CN__CHECK_LIVE(op, x);
    CN__CHECK_LIVE(op, wq);
    CN__CHECK_LIVE(op, bias);
    if (!x || !wq) {
        cn__null_arg(op, !x ? "x" : "wq");
        return NULL;
    }
    char a[128], b[128];
    if (!cn__is_quant(wq->dtype)) {
        cn_set_error(CN_ERR_KIND, op, "'wq' is %s, not quantized; quantize the weight first, "
                     "e.g. cn_quantize(w, CN_Q8_BLOCK) (or use cn_linear with a float weight)",
                     cn_tensor_str(wq, a, sizeof a));
        return NULL;
    }
    if (cn__check_kind(op, "x", x, CN_KINDS_FLOAT) != CN_OK ||
        (bias && cn__check_kind(op, "bias", bias, CN_KINDS_FLOAT) != CN_OK))
        return NULL;
    if (x->dtype != CN_F32 || (bias && bias->dtype != CN_F32)) {
        cn_tensor *t = x->dtype != CN_F32 ? x : bias;
        cn_set_error(CN_ERR_DTYPE, op, "'%s' is %s; the quantized linear takes f32 "
                     "activations and bias: cast it, e.g. cn_cast(%s, CN_F32)",
                     t == x ? "x" : "bias", cn_tensor_str(t, a, sizeof a), t == x ? "x" : "bias");
        return NULL;
    }
    if (wq->ndim != 2) {
        cn_set_error(CN_ERR_SHAPE, op, "'wq' is %s; the weight must be 2-D [N, K] (reshape a "
                     "weight of more dims keeping its last dim)", cn_tensor_str(wq, a, sizeof a));
        return NULL;
    }
    int64_t N = wq->shape[0], K = wq->shape[1];
    if (x->ndim < 1 || x->shape[x->ndim - 1] != K) {
        cn_set_error(CN_ERR_SHAPE, op, "'x' is %s but 'wq' is %s: x's last dim must be K = "
                     "%lld, wq's second", cn_tensor_str(x, a, sizeof a),
                     cn_tensor_str(wq, b, sizeof b), (long long)K);
        return NULL;
    }
    if (bias && (bias->ndim != 1 || bias->shape[0] != N)) {
        cn_set_error(CN_ERR_SHAPE, op, "'bias' is %s but 'wq' has N = %lld output features; "
                     "pass a bias of shape [%lld] or NULL", cn_tensor_str(bias, a, sizeof a),
                     (long long)N, (long long)N);
        return NULL;
    }
    /* the kernels read each weight row as one run of K elements with its scales */
    const cn_storage *st = wq->storage;
    int64_t off = wq->offset, s0 = wq->strides[0], group = st->q_group;
    const char *why = NULL;
    if (K > 1 && wq->strides[1] != 1)
        why = "its rows are not contiguous (a transposed view)";
    else if (wq->dtype == CN_Q8_CHANNEL && K > 0 && N > 0 &&
             (group != K || off % K || (N > 1 && s0 % K)))
        why = "its rows are not the channels it was quantized along (quantize the [N, K] "
              "weight itself)";
    if (why) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "'wq' is %s: %s", cn_tensor_str(wq, a, sizeof a),
                     why);
        return NULL;
    }
    cn_tensor *in[2] = {x, bias};
    const char *names[2] = {"x", "bias"};
    cn_device dev;
    const cn_backend *be = cn__route(op, in, names, bias ? 2 : 1, &dev);
    if (!be) return NULL;
    if (wq->device.backend != dev.backend || wq->device.index != dev.index) {
        cn_set_error(CN_ERR_DEVICE_MISMATCH, op, "'x' is %s but 'wq' is %s; move one with "
                     "cn_to_device so both live on one device", cn_tensor_str(x, a, sizeof a),
                     cn_tensor_str(wq, b, sizeof b));
        return NULL;
    }
    cn_tensor *xc = cn_contiguous(x);
    if (!xc) return NULL;
    int64_t shape[CN_MAX_DIMS];
    for (int d = 0; d < x->ndim - 1; d++) shape[d] = x->shape[d];
    shape[x->ndim - 1] = N;
    cn_tensor *out = cn__tensor_alloc_routed(op, be, shape, x->ndim, CN_F32, dev);
    if (!out) {
        cn_release(xc);
        return NULL;
    }
    cn_view views[3];
    cn__tensor_as_view(xc, &views[0]);
    views[0].ndim = 2;
    int64_t M = 1; /* the rows: out has M * N elements, so M fits unless out is empty */
    for (int d = 0; d < x->ndim - 1; d++)
        if (__builtin_mul_overflow(M, x->shape[d], &M)) M = 0;
    views[0].shape[0] = out->numel ? M : 0;
    views[0].shape[1] = K;
    views[0].strides[0] = K;
    views[0].strides[1] = 1;
    memset(&views[1], 0, sizeof views[1]);
    views[1].data = st->data;
    views[1].dtype = wq->dtype;
    views[1].ndim = 2;
    views[1].shape[0] = N;
    views[1].shape[1] = K;
    views[1].strides[0] = s0;
    views[1].strides[1] = 1;
    if (bias) cn__tensor_as_view(bias, &views[2]);
    const int64_t ints[4] = {bias != NULL, off, group, st->q_scales_at};
    cn_status s = cn__launch(be, dev, CN_OP_QUANT_LINEAR, views, bias ? 3 : 2, &out, 1, ints, 4,
                             NULL, 0);
    cn_release(xc);
    if (s != CN_OK) {
        cn_release(out);
        return NULL;
    }
    cn_tensor *rec[3] = {x, wq, bias};
    return cn__record(CN_OP_QUANT_LINEAR, out, rec, bias ? 3 : 2, ints, 4, NULL, 0);
}

cn_status cn_quant_layout(const cn_tensor *q, int64_t *offset, int64_t *group,
                          int64_t *scales_at) {
    const char *op = "quant_layout";
    CN__CHECK_LIVE(op, q);
    if (!q || !offset || !group || !scales_at) {
        cn__null_arg(op, !q ? "q" : !offset ? "offset" : !group ? "group" : "scales_at");
        return cn_last_status();
    }
    char buf[128];
    if (!cn__is_quant(q->dtype))
        return cn_set_error(CN_ERR_KIND, op, "'q' is %s, not quantized; make one with "
                            "cn_quantize", cn_tensor_str(q, buf, sizeof buf));
    *offset = q->offset;
    *group = q->storage->q_group;
    *scales_at = q->storage->q_scales_at;
    return CN_OK;
}
