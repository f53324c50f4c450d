/* The header of a safetensors file: a strict JSON parser written for it (no dependency), and the
 * format's rules checked on what it parsed. Every violation is CN_ERR_IO naming the file, the
 * byte offset in the header and in the file, and the field. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error_internal.h"
#include "core/tensor_impl.h"
#include "nn/io_internal.h"

/* JSON nesting accepted inside values the format does not define (ignored fields). */
#define MAX_JSON_DEPTH 64

/* ---- dtypes --------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    cn_dtype dtype;
} st_dtypes[] = {
    {"F32", CN_F32}, {"F64", CN_F64}, {"F16", CN_F16}, {"BF16", CN_BF16},
    {"I32", CN_I32}, {"I64", CN_I64}, {"U8", CN_U8},   {"BOOL", CN_BOOL},
};

#define N_ST_DTYPES (sizeof st_dtypes / sizeof *st_dtypes)

const char *cn__st_dtype_name(cn_dtype dt) {
    for (size_t i = 0; i < N_ST_DTYPES; i++)
        if (st_dtypes[i].dtype == dt) return st_dtypes[i].name;
    return NULL;
}

/* ---- UTF-8 ---------------------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s (at most `avail` bytes), or 0 if it is not one
 * (overlong forms, surrogates and code points above U+10FFFF are invalid). */
static size_t utf8_sequence(const unsigned char *s, size_t avail) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; /* range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (avail < len || s[1] < lo || s[1] > hi) return 0;
    for (size_t k = 2; k < len; k++)
        if (s[k] < 0x80 || s[k] > 0xBF) return 0;
    return len;
}

int cn__utf8_valid(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t k = utf8_sequence(p + i, n - i);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

static size_t utf8_encode(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- the header: a strict JSON parser for it ------------------------------------------------ */

typedef struct parser {
    const char *s; /* the header's N bytes (not NUL-terminated) */
    size_t n, i;
    const char *op, *path;
} parser;

/* An error at header offset `at`, followed by `way_out`. */
static cn_status header_error(const parser *p, size_t at, const char *way_out, const char *fmt,
                              va_list ap) {
    char what[512];
    vsnprintf(what, sizeof what, fmt, ap);
    return cn__io_error(p->op, p->path, "header byte %zu (file byte %zu): %s; %s", at, at + 8, what,
                        way_out);
}

/* A syntax or format error: the file is damaged, or not safetensors. */
static cn_status bad_header(const parser *p, size_t at, const char *fmt, ...) CN_IO_PRINTF(3);
static cn_status bad_header(const parser *p, size_t at, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cn_status s = header_error(p, at, "the file is corrupt or not safetensors: re-save it", fmt,
                               ap);
    va_end(ap);
    return s;
}

/* A valid file that holds what cinder cannot represent. */
static cn_status unsupported(const parser *p, size_t at, const char *fmt, ...) CN_IO_PRINTF(3);
static cn_status unsupported(const parser *p, size_t at, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cn_status s = header_error(p, at, "convert that tensor where the file was made, then re-save "
                               "it", fmt, ap);
    va_end(ap);
    return s;
}

static void skip_ws(parser *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
                           p->s[p->i] == '\r'))
        p->i++;
}

/* What is at the cursor, for messages: "'x'" or "the end of the header". */
static const char *here(const parser *p, char *buf, size_t size) {
    if (p->i >= p->n) return "the end of the header";
    unsigned char c = (unsigned char)p->s[p->i];
    if (c >= 0x20 && c < 0x7F)
        snprintf(buf, size, "'%c'", c);
    else
        snprintf(buf, size, "byte 0x%02X", c);
    return buf;
}

static cn_status expect(parser *p, char c, const char *context) {
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == c) {
        p->i++;
        return CN_OK;
    }
    char buf[16];
    return bad_header(p, p->i, "expected '%c' %s, found %s", c, context, here(p, buf, sizeof buf));
}

static int hex4(const parser *p, size_t at, uint32_t *v) {
    if (at + 4 > p->n) return 0;
    *v = 0;
    for (size_t k = 0; k < 4; k++) {
        char c = p->s[at + k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return 0;
        *v = *v * 16 + (uint32_t)d;
    }
    return 1;
}

/* Decodes the string at the cursor into out (NULL: only validates) and moves past it; *len gets
 * the decoded length. JSON strings: no raw control characters, valid UTF-8, the standard escapes,
 * surrogate pairs joined; U+0000 is refused because C strings cannot hold it. */
static cn_status decode_string(parser *p, char *out, size_t *len) {
    size_t start = p->i, k = 0;
    if (p->i >= p->n || p->s[p->i] != '"') {
        char buf[16];
        return bad_header(p, p->i, "expected a string, found %s", here(p, buf, sizeof buf));
    }
    p->i++;
    for (;;) {
        if (p->i >= p->n)
            return bad_header(p, start, "the string starting here has no closing '\"'");
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') {
            p->i++;
            break;
        }
        if (c < 0x20)
            return bad_header(p, p->i, "raw control byte 0x%02X inside a string (JSON needs "
                              "it escaped)", c);
        if (c != '\\') {
            size_t m = utf8_sequence((const unsigned char *)p->s + p->i, p->n - p->i);
            if (!m) return bad_header(p, p->i, "invalid UTF-8 inside a string");
            if (out) memcpy(out + k, p->s + p->i, m);
            k += m;
            p->i += m;
            continue;
        }
        size_t esc = p->i++;
        char e = p->i < p->n ? p->s[p->i++] : '\0';
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char decoded[] = "\"\\/\b\f\n\r\t";
            if (out) out[k] = decoded[simple - "\"\\/bfnrt"];
            k++;
            continue;
        }
        uint32_t cp, lo;
        if (e != 'u' || !hex4(p, p->i, &cp))
            return bad_header(p, esc, "invalid escape sequence in a string");
        p->i += 4;
        if (cp >= 0xDC00 && cp <= 0xDFFF)
            return bad_header(p, esc, "\\u%04X is a lone low surrogate", (unsigned)cp);
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (p->i + 6 > p->n || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u' ||
                !hex4(p, p->i + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                return bad_header(p, esc, "\\u%04X is a high surrogate without its low half",
                                  (unsigned)cp);
            p->i += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (cp == 0) return bad_header(p, esc, "\\u0000 (a NUL character) in a string");
        char tmp[4];
        size_t m = utf8_encode(cp, tmp);
        if (out) memcpy(out + k, tmp, m);
        k += m;
    }
    *len = k;
    return CN_OK;
}

/* Parses the string at the cursor into a new NUL-terminated copy (*out, cn__free it). */
static cn_status parse_string(parser *p, char **out) {
    size_t start = p->i, len;
    cn_status s = decode_string(p, NULL, &len);
    if (s) return s;
    char *str = cn__malloc(p->op, len + 1);
    if (!str) return CN_ERR_OUT_OF_MEMORY;
    p->i = start;
    decode_string(p, str, &len); /* validated above */
    str[len] = '\0';
    *out = str;
    return CN_OK;
}

/* A non-negative integer (shape entries, offsets): JSON's grammar without sign, fraction or
 * exponent, and at most INT64_MAX. */
static cn_status parse_count(parser *p, const char *what, uint64_t *v) {
    skip_ws(p);
    size_t start = p->i;
    char buf[16];
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
        return bad_header(p, p->i, "expected a non-negative integer for %s, found %s", what,
                          here(p, buf, sizeof buf));
    uint64_t x = 0;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
        uint64_t d = (uint64_t)(p->s[p->i] - '0');
        if (x > ((uint64_t)INT64_MAX - d) / 10)
            return bad_header(p, start, "%s does not fit in 63 bits", what);
        x = x * 10 + d;
        p->i++;
    }
    if (p->s[start] == '0' && p->i - start > 1)
        return bad_header(p, start, "%s has a leading zero (not JSON)", what);
    if (p->i < p->n && (p->s[p->i] == '.' || p->s[p->i] == 'e' || p->s[p->i] == 'E'))
        return bad_header(p, start, "%s must be an integer", what);
    *v = x;
    return CN_OK;
}

/* Skips any JSON value (fields the format does not define are ignored, but must be JSON). */
static cn_status skip_value(parser *p, int depth) {
    skip_ws(p);
    char buf[16];
    if (depth > MAX_JSON_DEPTH)
        return bad_header(p, p->i, "values nested deeper than %d levels", MAX_JSON_DEPTH);
    if (p->i >= p->n) return bad_header(p, p->i, "expected a value, found the end of the header");
    char c = p->s[p->i];
    size_t len;
    if (c == '"') return decode_string(p, NULL, &len);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        p->i++;
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == close) {
            p->i++;
            return CN_OK;
        }
        for (;;) {
            skip_ws(p);
            cn_status s;
            if (c == '{') {
                if ((s = decode_string(p, NULL, &len)) || (s = expect(p, ':', "after a key")))
                    return s;
            }
            if ((s = skip_value(p, depth + 1))) return s;
            skip_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                continue;
            }
            return expect(p, close, "or ',' in a list of values");
        }
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int w = 0; w < 3; w++) {
        size_t k = strlen(words[w]);
        if (p->i + k <= p->n && memcmp(p->s + p->i, words[w], k) == 0) {
            p->i += k;
            return CN_OK;
        }
    }
    /* a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
    size_t start = p->i;
    if (p->s[p->i] == '-') p->i++;
    size_t digits = p->i;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
        p->i++;
    int ok = p->i > digits && !(p->s[digits] == '0' && p->i - digits > 1);
    if (ok && p->i < p->n && p->s[p->i] == '.') {
        size_t f = ++p->i;
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
        ok = p->i > f;
    }
    if (ok && p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        size_t f = p->i;
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
        ok = p->i > f;
    }
    if (!ok) {
        p->i = start;
        return bad_header(p, start, "expected a JSON value, found %s", here(p, buf, sizeof buf));
    }
    return CN_OK;
}

/* {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]} for the tensor e->name. */
static cn_status parse_entry(parser *p, st_entry *e) {
    cn_status s = expect(p, '{', "to open the tensor's entry");
    if (s) return s;
    int seen_dtype = 0, seen_shape = 0, seen_offsets = 0;
    skip_ws(p);
    int empty = p->i < p->n && p->s[p->i] == '}';
    if (empty) p->i++;
    while (!empty) {
        skip_ws(p);
        size_t key_at = p->i;
        char *key = NULL;
        if ((s = parse_string(p, &key))) return s;
        int is_dtype = !strcmp(key, "dtype"), is_shape = !strcmp(key, "shape");
        int is_offsets = !strcmp(key, "data_offsets");
        cn__free(key);
        if ((is_dtype && seen_dtype++) || (is_shape && seen_shape++) ||
            (is_offsets && seen_offsets++))
            return bad_header(p, key_at, "tensor '%s' repeats a field", e->name);
        if ((s = expect(p, ':', "after a key"))) return s;
        skip_ws(p);
        if (is_dtype) {
            size_t at = p->i;
            char *name = NULL;
            if ((s = parse_string(p, &name))) return s;
            int found = 0;
            for (size_t d = 0; d < N_ST_DTYPES && !found; d++)
                if (!strcmp(name, st_dtypes[d].name)) {
                    e->dtype = st_dtypes[d].dtype;
                    found = 1;
                }
            if (!found) {
                s = unsupported(p, at, "tensor '%s' has dtype \"%.32s\", which cinder does not "
                                "have (it reads F32, F64, F16, BF16, I32, I64, U8, BOOL)",
                                e->name, name);
            }
            cn__free(name);
            if (s) return s;
        } else if (is_shape || is_offsets) {
            size_t at = p->i;
            uint64_t v[CN_MAX_DIMS];
            int k = 0;
            if ((s = expect(p, '[', is_shape ? "to open 'shape'" : "to open 'data_offsets'")))
                return s;
            skip_ws(p);
            int closed = p->i < p->n && p->s[p->i] == ']';
            if (closed) p->i++;
            while (!closed) {
                if (is_shape && k == CN_MAX_DIMS)
                    return unsupported(p, at, "tensor '%s' has more than %d dims, cinder's "
                                       "limit", e->name, CN_MAX_DIMS);
                if (is_offsets && k == 2)
                    return bad_header(p, at, "tensor '%s': data_offsets must be [begin, end]",
                                      e->name);
                if ((s = parse_count(p, is_shape ? "a shape entry" : "a data offset", &v[k++])))
                    return s;
                skip_ws(p);
                if (p->i < p->n && p->s[p->i] == ',') {
                    p->i++;
                    continue;
                }
                if ((s = expect(p, ']', "or ',' in a list of integers"))) return s;
                closed = 1;
            }
            if (is_shape) {
                e->ndim = k;
                for (int d = 0; d < k; d++)
                    e->shape[d] = (int64_t)v[d];
            } else {
                if (k != 2)
                    return bad_header(p, at, "tensor '%s': data_offsets must be [begin, end]",
                                      e->name);
                e->begin = v[0];
                e->end = v[1];
            }
        } else if ((s = skip_value(p, 1))) {
            return s;
        }
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if ((s = expect(p, '}', "or ',' after a field of a tensor's entry"))) return s;
        break;
    }
    if (!seen_dtype || !seen_shape || !seen_offsets)
        return bad_header(p, e->at, "tensor '%s' lacks \"%s\"", e->name,
                          !seen_dtype ? "dtype" : !seen_shape ? "shape" : "data_offsets");
    return CN_OK;
}

void cn__st_header_free(st_header *h) {
    for (int i = 0; i < h->count; i++)
        cn__free(h->entries[i].name);
    for (int i = 0; i < h->n_meta; i++) {
        cn__free(h->meta[i].key);
        cn__free(h->meta[i].value);
    }
    cn__free(h->entries);
    cn__free(h->meta);
    memset(h, 0, sizeof *h);
}

/* Doubles *items (of `size` bytes each, *cap of them) when full. */
static cn_status grow(const char *op, void **items, int count, int *cap, size_t size) {
    if (count < *cap) return CN_OK;
    int new_cap = *cap ? *cap * 2 : 16;
    void *bigger = cn__malloc(op, size * (size_t)new_cap);
    if (!bigger) return CN_ERR_OUT_OF_MEMORY;
    if (count) memcpy(bigger, *items, size * (size_t)count);
    cn__free(*items);
    *items = bigger;
    *cap = new_cap;
    return CN_OK;
}

/* {"key": "value", ...} of "__metadata__". */
static cn_status parse_metadata(parser *p, st_header *h) {
    cn_status s = expect(p, '{', "to open \"__metadata__\"");
    if (s) return s;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == '}') {
        p->i++;
        return CN_OK;
    }
    for (;;) {
        skip_ws(p);
        size_t at = p->i;
        char *key = NULL, *value = NULL;
        if ((s = parse_string(p, &key))) return s;
        for (int i = 0; i < h->n_meta && !s; i++)
            if (!strcmp(h->meta[i].key, key))
                s = bad_header(p, at, "metadata key \"%.64s\" appears twice", key);
        if (!s) s = grow(p->op, (void **)&h->meta, h->n_meta, &h->meta_cap, sizeof(st_meta));
        if (s) {
            cn__free(key);
            return s;
        }
        if ((s = expect(p, ':', "after a key")) == CN_OK) {
            skip_ws(p);
            if (p->i < p->n && p->s[p->i] != '"')
                s = bad_header(p, p->i, "metadata value of \"%.64s\" must be a string", key);
            else
                s = parse_string(p, &value);
        }
        if (s) {
            cn__free(key);
            return s;
        }
        h->meta[h->n_meta].key = key;
        h->meta[h->n_meta++].value = value;
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        return expect(p, '}', "or ',' in \"__metadata__\"");
    }
}

/* The whole header: one object of tensor entries and an optional "__metadata__", then only
 * white space (the padding). */
static cn_status parse_header(parser *p, st_header *h) {
    char buf[16];
    if (p->n == 0 || p->s[0] != '{')
        return bad_header(p, 0, "the header must start with '{', found %s", here(p, buf,
                          sizeof buf));
    p->i = 1;
    skip_ws(p);
    int seen_meta = 0;
    cn_status s;
    if (p->i < p->n && p->s[p->i] == '}') {
        p->i++;
    } else {
        for (;;) {
            skip_ws(p);
            size_t at = p->i;
            char *key = NULL;
            if ((s = parse_string(p, &key))) return s;
            if (!strcmp(key, "__metadata__")) {
                cn__free(key);
                if (seen_meta++) return bad_header(p, at, "\"__metadata__\" appears twice");
                if ((s = expect(p, ':', "after a key")) || (s = parse_metadata(p, h))) return s;
            } else {
                if ((s = grow(p->op, (void **)&h->entries, h->count, &h->cap, sizeof(st_entry)))) {
                    cn__free(key);
                    return s;
                }
                st_entry *e = &h->entries[h->count++];
                memset(e, 0, sizeof *e);
                e->name = key;
                e->at = at;
                if ((s = expect(p, ':', "after a tensor's name")) || (s = parse_entry(p, e)))
                    return s;
            }
            skip_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                continue;
            }
            if ((s = expect(p, '}', "or ',' after a tensor's entry"))) return s;
            break;
        }
    }
    skip_ws(p);
    if (p->i < p->n)
        return bad_header(p, p->i, "%s after the header's closing '}' (only spaces may pad it)",
                          here(p, buf, sizeof buf));
    return CN_OK;
}

/* ---- validating the layout ------------------------------------------------------------------ */

static int by_name(const void *a, const void *b) {
    return strcmp((*(const st_entry *const *)a)->name, (*(const st_entry *const *)b)->name);
}

static int by_offset(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* Checks each entry's size, that no name repeats, and that the entries tile the data section
 * [0, data_len) of the file; sorts the entries by offset. data_start = 8 + N. */
static cn_status validate_layout(const parser *p, st_header *h, int64_t file_size,
                                 int64_t data_start) {
    uint64_t data_len = (uint64_t)(file_size - data_start);
    uint64_t max_end = 0;
    const st_entry *last = NULL;
    for (int i = 0; i < h->count; i++) {
        st_entry *e = &h->entries[i];
        char shape[160];
        cn__shape_str(e->shape, e->ndim, shape, sizeof shape);
        uint64_t numel = 1, es = cn_dtype_size(e->dtype);
        int overflow = 0;
        for (int d = 0; d < e->ndim; d++) {
            uint64_t dim = (uint64_t)e->shape[d];
            if (dim && numel > (uint64_t)INT64_MAX / dim) overflow = 1;
            else numel *= dim;
        }
        if (overflow || numel > (uint64_t)INT64_MAX / es)
            return bad_header(p, e->at, "tensor '%s' has shape %s, whose size overflows 64 bits",
                              e->name, shape);
        if (e->end < e->begin)
            return bad_header(p, e->at, "tensor '%s' has data_offsets [%llu, %llu], which end "
                              "before they begin", e->name, (unsigned long long)e->begin,
                              (unsigned long long)e->end);
        if (e->end - e->begin != numel * es)
            return bad_header(p, e->at, "tensor '%s' has data_offsets [%llu, %llu] (%llu bytes) "
                              "but shape %s of %s needs %llu bytes", e->name,
                              (unsigned long long)e->begin, (unsigned long long)e->end,
                              (unsigned long long)(e->end - e->begin), shape,
                              cn__st_dtype_name(e->dtype), (unsigned long long)(numel * es));
        if (!last || e->end > max_end) {
            max_end = e->end;
            last = e;
        }
    }
    if (max_end > data_len)
        return cn__io_error(p->op, p->path, "the file is truncated at byte %lld: expected %llu "
                            "bytes (the header's %lld and %llu bytes of tensor data, up to the "
                            "end of tensor '%s'); re-save it or copy it again",
                            (long long)file_size,
                            (unsigned long long)(data_start + (int64_t)max_end),
                            (long long)data_start, (unsigned long long)max_end, last->name);
    if (h->count > 1) {
        const st_entry **sorted = cn__malloc(p->op, sizeof *sorted * (size_t)h->count);
        if (!sorted) return CN_ERR_OUT_OF_MEMORY;
        for (int i = 0; i < h->count; i++)
            sorted[i] = &h->entries[i];
        qsort(sorted, (size_t)h->count, sizeof *sorted, by_name);
        cn_status s = CN_OK;
        for (int i = 1; i < h->count && !s; i++)
            if (!strcmp(sorted[i - 1]->name, sorted[i]->name))
                s = bad_header(p, sorted[i - 1]->at > sorted[i]->at ? sorted[i - 1]->at
                                                                      : sorted[i]->at,
                               "tensor name '%s' appears twice", sorted[i]->name);
        cn__free(sorted);
        if (s) return s;
    }
    if (h->count > 1) qsort(h->entries, (size_t)h->count, sizeof *h->entries, by_offset);
    uint64_t covered = 0;
    for (int i = 0; i < h->count; i++) {
        const st_entry *e = &h->entries[i];
        if (e->begin < covered)
            return bad_header(p, e->at, "tensor '%s' has data_offsets [%llu, %llu], which "
                              "overlap the tensor before it (ending at data byte %llu)",
                              e->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                              (unsigned long long)covered);
        if (e->begin > covered)
            return bad_header(p, e->at, "tensor '%s' has data_offsets [%llu, %llu], which leave "
                              "data bytes [%llu, %llu) to no tensor", e->name,
                              (unsigned long long)e->begin, (unsigned long long)e->end,
                              (unsigned long long)covered, (unsigned long long)e->begin);
        covered = e->end;
    }
    if (covered < data_len)
        return cn__io_error(p->op, p->path, "%llu bytes follow the last tensor (from file byte "
                            "%lld to %lld) that the header does not describe; the file is "
                            "corrupt: re-save it", (unsigned long long)(data_len - covered),
                            (long long)(data_start + (int64_t)covered), (long long)file_size);
    return CN_OK;
}

/* ---- the whole check ------------------------------------------------------------------------ */

cn_status cn__st_parse_header(const char *op, const char *path, const char *text, size_t n,
                              int64_t file_size, st_header *h) {
    parser p = {.s = text, .n = n, .i = 0, .op = op, .path = path};
    cn_status s = parse_header(&p, h);
    return s ? s : validate_layout(&p, h, file_size, 8 + (int64_t)n);
}
