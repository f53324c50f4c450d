/* A tensor's values as text, the way PyTorch's repr(tensor) writes them with its default print
 * options (torch/_tensor_str.py): precision 4, lines of at most 80 columns, and, past 1000
 * elements, only the first and last 3 entries of each dim longer than 6, with "..." between.
 *
 * The values are read with public ops only (cn_slice and cn_cat keep the summarised entries on
 * the tensor's own device, cn_cast widens them, cn_read brings them to the host), so any device,
 * backend and layout (views, transposes, broadcasts) is printed the same way. Only the suffixes
 * differ from PyTorch's: cinder's dtype and device names (see cn_format in tensor.h).
 *
 * The text is written through a sink that counts every character and stores what fits, which
 * gives cn_format snprintf's contract. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cinder/autodiff.h"
#include "cinder/format.h"
#include "cinder/ops.h"
#include "cinder/quant.h"
#include "cinder/tensor.h"
#include "core/alloc.h"
#include "core/error_internal.h"

#define OP "format"

/* PyTorch's default print options */
#define PRECISION 4
#define THRESHOLD 1000 /* more elements than this are summarised */
#define EDGEITEMS 3
#define LINEWIDTH 80

/* ---- the sink ------------------------------------------------------------------------------- */

typedef struct sink {
    char *buf; /* may be NULL when size is 0 */
    size_t size;
    size_t len;      /* characters produced so far, stored or not */
    size_t line_len; /* characters since the last newline */
} sink;

static void put_n(sink *s, const char *text, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (s->len + 1 < s->size) s->buf[s->len] = text[i];
        s->len++;
        s->line_len = text[i] == '\n' ? 0 : s->line_len + 1;
    }
}

static void put(sink *s, const char *text) { put_n(s, text, strlen(text)); }

static void put_spaces(sink *s, int n) {
    for (int i = 0; i < n; i++)
        put_n(s, " ", 1);
}

/* ---- the formatter: one width and one notation for every value (PyTorch's _Formatter) ---------
 */

typedef struct values {
    cn_kind kind;
    const double *f;  /* floats, widened to f64 */
    const int64_t *i; /* ints, widened to i64 */
    const uint8_t *b; /* bools */
    int64_t n;
} values;

typedef struct formatter {
    int int_mode; /* floats that are all whole numbers: "3." */
    int sci_mode; /* "1.0000e+05" */
    int width;    /* every value is right-aligned to this many columns */
} formatter;

/* The text of value k without padding; returns its length. */
static int value_text(const formatter *f, const values *v, int64_t k, char *out, size_t size) {
    if (v->kind == CN_KIND_BOOL) return snprintf(out, size, "%s", v->b[k] ? "True" : "False");
    if (v->kind != CN_KIND_FLOAT) return snprintf(out, size, "%lld", (long long)v->i[k]);
    double x = v->f[k];
    if (isnan(x)) return snprintf(out, size, "nan"); /* never "-nan" */
    if (isinf(x)) return snprintf(out, size, "%s", x > 0 ? "inf" : "-inf");
    if (f->sci_mode) return snprintf(out, size, "%.*e", PRECISION, x);
    if (f->int_mode) return snprintf(out, size, "%.0f.", x);
    return snprintf(out, size, "%.*f", PRECISION, x);
}

/* Chooses the notation and the width from the values that will be shown (PyTorch looks at the
 * summarised data only, as here): for floats, the non-zero finite ones decide. */
static formatter formatter_make(const values *v) {
    formatter f = {1, 0, 1};
    char text[64];
    if (v->kind != CN_KIND_FLOAT) {
        for (int64_t k = 0; k < v->n; k++) {
            int len = value_text(&f, v, k, text, sizeof text);
            if (len > f.width) f.width = len;
        }
        return f;
    }
    double lo = INFINITY, hi = 0;
    int64_t count = 0;
    for (int64_t k = 0; k < v->n; k++) {
        double x = v->f[k];
        if (!isfinite(x) || x == 0) continue;
        count++;
        if (fabs(x) < lo) lo = fabs(x);
        if (fabs(x) > hi) hi = fabs(x);
        if (x != ceil(x)) f.int_mode = 0;
    }
    if (count == 0) return f;
    f.sci_mode = hi / lo > 1000.0 || hi > 1.0e8 || (!f.int_mode && lo < 1.0e-4);
    for (int64_t k = 0; k < v->n; k++) {
        double x = v->f[k];
        if (!isfinite(x) || x == 0) continue;
        int len = value_text(&f, v, k, text, sizeof text);
        if (len > f.width) f.width = len;
    }
    return f;
}

static void put_value(sink *s, const formatter *f, const values *v, int64_t k) {
    char text[64];
    int len = value_text(f, v, k, text, sizeof text);
    put_spaces(s, f->width - len);
    put(s, text);
}

/* ---- the layout (PyTorch's _tensor_str_with_formatter and _vector_str) ------------------------
 */

/* What is printed: the values of the summarised tensor, row-major, and per dim its length there
 * and whether entries were left out between its first and last EDGEITEMS. */
typedef struct layout {
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    int elided[CN_MAX_DIMS];
    int64_t stride[CN_MAX_DIMS]; /* row-major strides of the summarised values */
} layout;

static void put_vector(sink *s, const formatter *f, const values *v, const layout *l, int64_t at,
                       int indent) {
    int d = l->ndim - 1;
    int per_line = (LINEWIDTH - indent) / (f->width + 2);
    if (per_line < 1) per_line = 1;
    int64_t n = l->shape[d] + (l->elided[d] ? 1 : 0); /* the "..." is an element of its own */
    put(s, "[");
    for (int64_t e = 0, k = 0; e < n; e++) {
        if (e > 0) {
            if (e % per_line == 0) {
                put(s, ",\n");
                put_spaces(s, indent + 1);
            } else {
                put(s, ", ");
            }
        }
        if (l->elided[d] && e == EDGEITEMS)
            put(s, " ...");
        else
            put_value(s, f, v, at + k++);
    }
    put(s, "]");
}

static void put_dims(sink *s, const formatter *f, const values *v, const layout *l, int d,
                     int64_t at, int indent) {
    if (d == l->ndim) {
        put_value(s, f, v, at);
        return;
    }
    if (d == l->ndim - 1) {
        put_vector(s, f, v, l, at, indent);
        return;
    }
    put(s, "[");
    int64_t n = l->shape[d] + (l->elided[d] ? 1 : 0);
    for (int64_t e = 0, k = 0; e < n; e++) {
        if (e > 0) {
            put(s, ",");
            for (int nl = 0; nl < l->ndim - d - 1; nl++)
                put(s, "\n");
            put_spaces(s, indent + 1);
        }
        if (l->elided[d] && e == EDGEITEMS)
            put(s, "...");
        else
            put_dims(s, f, v, l, d + 1, at + l->stride[d] * k++, indent + 1);
    }
    put(s, "]");
}

/* PyTorch's _add_suffixes: a suffix goes on the same line unless that line would pass the width.
 * `measure` is its count of the last line, kept as it keeps it: it starts at
 * len - rfind("\n") + 1 (the line's length plus 2) and then adds what each suffix adds. */
static void put_suffix(sink *s, size_t *measure, const char *suffix, int indent) {
    size_t n = strlen(suffix);
    if (*measure + n + 2 > LINEWIDTH) {
        put(s, ",\n");
        put_spaces(s, indent);
        *measure = (size_t)indent + n;
    } else {
        put(s, ", ");
        *measure += n + 2;
    }
    put(s, suffix);
}

/* ---- reading the values --------------------------------------------------------------------- */

/* The entries that will be shown, on t's device: each dim longer than 2 * EDGEITEMS cut to its
 * first and last EDGEITEMS when summarising. A new reference, or NULL with the error set. */
static cn_tensor *summarised(cn_tensor *t, layout *l) {
    int summarise = cn_numel(t) > THRESHOLD;
    cn_tensor *r = cn_retain(t);
    l->ndim = cn_ndim(t);
    for (int d = 0; d < l->ndim && r; d++) {
        int64_t n = cn_shape(t)[d];
        l->elided[d] = summarise && n > 2 * EDGEITEMS;
        l->shape[d] = l->elided[d] ? 2 * EDGEITEMS : n;
        if (!l->elided[d]) continue;
        cn_tensor *ends[2] = {cn_slice(r, d, 0, EDGEITEMS, 1), cn_slice(r, d, -EDGEITEMS, n, 1)};
        cn_tensor *cut = ends[0] && ends[1] ? cn_cat(ends, 2, d) : NULL;
        cn_release(ends[0]);
        cn_release(ends[1]);
        cn_release(r);
        r = cut;
    }
    int64_t stride = 1;
    for (int d = l->ndim - 1; d >= 0; d--) {
        l->stride[d] = stride;
        stride *= l->shape[d];
    }
    return r;
}

/* Reads the summarised entries of t (concrete) to the host, widened: f64, i64 or bool bytes. The
 * block is *host (cn__free it), also on failure. */
static cn_status read_values(cn_tensor *t, layout *l, values *v, void **host) {
    *host = NULL;
    cn_tensor *r = summarised(t, l);
    cn_kind kind = cn_kind_of(t);
    cn_dtype want = kind == CN_KIND_FLOAT ? CN_F64 : kind == CN_KIND_BOOL ? CN_BOOL : CN_I64;
    cn_tensor *w = r && cn_dtype_of(r) != want ? cn_cast(r, want) : cn_retain(r);
    cn_release(r);
    if (!w) return cn_last_status();
    size_t nbytes = (size_t)cn_numel(w) * cn_dtype_size(want);
    *host = cn__malloc(OP, nbytes ? nbytes : 1);
    cn_status s = *host ? cn_read(w, *host, nbytes) : cn_last_status();
    v->kind = kind;
    v->n = cn_numel(w);
    v->f = *host;
    v->i = *host;
    v->b = *host;
    cn_release(w);
    return s;
}

/* ---- the public functions ------------------------------------------------------------------- */

/* Writes the whole repr into s; CN_OK or the error (set). */
static cn_status format_into(const cn_tensor *t, sink *s) {
    const int indent = (int)strlen("tensor(");
    cn_device dev = cn_device_of(t), concrete = dev;
    concrete.autodiff = 0;
    concrete.checkpoint = 0;
    /* an untracked tensor on the concrete device sharing t's data: reading records nothing */
    cn_tensor *c = cn_to_device((cn_tensor *)t, concrete);
    if (!c) return cn_last_status();
    /* a quantized tensor shows its dequantized values, and its scheme as the dtype */
    cn_dtype shown = cn_dtype_of(t);
    if (cn_dtype_kind(shown) == CN_KIND_QUANTIZED) {
        cn_tensor *f = cn_dequantize(c, CN_F32);
        cn_release(c);
        if (!(c = f)) return cn_last_status();
    }

    put(s, "tensor(");
    int64_t numel = cn_numel(c);
    if (numel == 0) {
        put(s, "[]");
    } else {
        layout l;
        values v;
        void *host;
        cn_status st = read_values(c, &l, &v, &host);
        if (st != CN_OK) {
            cn__free(host);
            cn_release(c);
            return st;
        }
        formatter f = formatter_make(&v);
        put_dims(s, &f, &v, &l, 0, 0, indent);
        cn__free(host);
    }

    char suffix[160];
    size_t measure = s->line_len + 2;
    if (concrete.backend != CN_BACKEND_CPU) {
        char name[96];
        snprintf(suffix, sizeof suffix, "device='%s'", cn_device_str(concrete, name, sizeof name));
        put_suffix(s, &measure, suffix, indent);
    }
    cn_dtype dt = shown;
    if (numel == 0 && cn_ndim(c) != 1) {
        int n = snprintf(suffix, sizeof suffix, "size=(");
        for (int d = 0; d < cn_ndim(c); d++)
            n += snprintf(suffix + n, sizeof suffix - (size_t)n, "%s%lld", d ? ", " : "",
                          (long long)cn_shape(c)[d]);
        snprintf(suffix + n, sizeof suffix - (size_t)n, ")");
        put_suffix(s, &measure, suffix, indent);
    }
    /* PyTorch names the dtype unless it is the default float (f32), or, with values shown, i64 or
     * bool, which the values already tell apart */
    if (dt != CN_F32 && (numel == 0 || (dt != CN_I64 && dt != CN_BOOL))) {
        snprintf(suffix, sizeof suffix, "dtype=%s", cn_dtype_name(dt));
        put_suffix(s, &measure, suffix, indent);
    }
    if (dev.autodiff && cn_requires_grad(t)) put_suffix(s, &measure, "requires_grad=True", indent);
    put(s, ")");
    cn_release(c);
    return CN_OK;
}

int cn_format(const cn_tensor *t, char *buf, size_t size) {
    if (!t) {
        cn__null_arg(OP, "t");
        return -1;
    }
    if (!buf && size > 0) {
        cn_set_error(CN_ERR_NULL_ARG, OP,
                     "buf is NULL but size is %zu; pass size 0 to measure the text first", size);
        return -1;
    }
    sink s = {buf, size, 0, 0};
    cn_status st = format_into(t, &s);
    if (size > 0) buf[s.len < size ? s.len : size - 1] = '\0';
    if (st != CN_OK) return -1;
    if (s.len > (size_t)INT32_MAX) {
        cn_set_error(CN_ERR_INVALID_ARG, OP,
                     "the text needs %zu characters, more than an int "
                     "holds",
                     s.len);
        return -1;
    }
    return (int)s.len;
}

cn_status cn_print(const cn_tensor *t, FILE *f) {
    if (!t || !f) {
        cn__null_arg("print", !t ? "t" : "f");
        return cn_last_status();
    }
    int n = cn_format(t, NULL, 0);
    if (n < 0) return cn_last_status();
    char *text = cn__malloc("print", (size_t)n + 1);
    if (!text) return cn_last_status();
    cn_status st = cn_format(t, text, (size_t)n + 1) == n ? CN_OK : cn_last_status();
    if (st == CN_OK && (fputs(text, f) == EOF || fputc('\n', f) == EOF))
        st = cn_set_error(CN_ERR_IO, "print", "writing the text failed (%s)",
                          ferror(f) ? "a write error on the stream" : "end of file");
    cn__free(text);
    return st;
}
