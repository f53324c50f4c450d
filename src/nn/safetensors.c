/* Checkpoints in the safetensors format (include/cinder/io.h describes the layout): loading,
 * the handle, loading into existing tensors, and saving.
 *
 * Loading validates the whole header (safetensors_header.c) before it makes a tensor, so a bad
 * file leaves nothing half-loaded. Saving writes a temporary file and renames it over the target,
 * so an existing checkpoint survives a failed save. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinder/autodiff.h"
#include "cinder/io.h"
#include "cinder/quant.h"
#include "core/alloc.h"
#include "core/error_internal.h"
#include "core/tensor_impl.h"
#include "nn/io_internal.h"

/* A header larger than this is taken for garbage (the reference implementation's limit). */
#define MAX_HEADER_BYTES ((uint64_t)100 * 1000 * 1000)

/* ---- reading a file ------------------------------------------------------------------------- */

typedef struct st_file {
    FILE *f;
    const char *op, *path;
    int64_t size, data_start;
    st_header h;
} st_file;

static cn_status read_at(const st_file *sf, int64_t at, void *dst, size_t n) {
    if (n == 0) return CN_OK;
    errno = 0;
    if (fseek(sf->f, (long)at, SEEK_SET) != 0 || fread(dst, 1, n, sf->f) != n)
        return cn__io_error(sf->op, sf->path, "cannot read %zu bytes at byte %lld: %s; check "
                            "that it is a regular file and that nothing else writes it", n,
                            (long long)at, errno ? strerror(errno) : "the file ended early");
    return CN_OK;
}

static void st_close(st_file *sf) {
    if (sf->f) fclose(sf->f);
    cn__st_header_free(&sf->h);
    sf->f = NULL;
}

/* Opens `path` and reads and validates its header; on failure everything is closed. */
static cn_status st_open(st_file *sf, const char *op, const char *path) {
    memset(sf, 0, sizeof *sf);
    sf->op = op;
    sf->path = path;
    errno = 0;
    sf->f = fopen(path, "rb");
    if (!sf->f)
        return cn__io_error(op, path, "cannot open it: %s; check the path (checkpoints are "
                            "written by cn_safetensors_save)",
                            errno ? strerror(errno) : "unknown reason");
    long size = -1;
    if (fseek(sf->f, 0, SEEK_END) == 0) size = ftell(sf->f);
    cn_status s = CN_OK;
    if (size < 0)
        s = cn__io_error(op, path, "cannot find its size: %s; is it a regular file?",
                         strerror(errno));
    sf->size = size;
    unsigned char len_bytes[8];
    if (!s && size < 8)
        s = cn__io_error(op, path, "the file is truncated at byte %ld: expected at least 8 bytes "
                         "(the header length); re-save it", size);
    if (!s) s = read_at(sf, 0, len_bytes, 8);
    uint64_t n = 0;
    for (int k = 7; k >= 0 && !s; k--)
        n = n << 8 | len_bytes[k];
    if (!s && n > MAX_HEADER_BYTES)
        s = cn__io_error(op, path, "bytes 0-7 give a header length of %llu, over the 100 MB "
                         "limit: this is not a safetensors file, or its start is corrupt",
                         (unsigned long long)n);
    if (!s && n > (uint64_t)(size - 8))
        s = cn__io_error(op, path, "the file is truncated at byte %ld: expected %llu bytes of "
                         "header after the 8-byte length (at least %llu bytes in all); re-save it",
                         size, (unsigned long long)n, (unsigned long long)(n + 8));
    char *text = NULL;
    if (!s) {
        text = cn__malloc(op, n ? (size_t)n : 1);
        if (!text) s = CN_ERR_OUT_OF_MEMORY;
    }
    if (!s) s = read_at(sf, 8, text, (size_t)n);
    if (!s) {
        sf->data_start = 8 + (int64_t)n;
        s = cn__st_parse_header(op, path, text, (size_t)n, sf->size, &sf->h);
    }
    cn__free(text);
    if (s) st_close(sf);
    return s;
}

/* A new tensor on `device` from entry e of the file. */
static cn_tensor *st_read_tensor(const st_file *sf, const st_entry *e, cn_device device) {
    size_t nbytes = (size_t)(e->end - e->begin);
    unsigned char *host = cn__malloc(sf->op, nbytes ? nbytes : 1);
    if (!host) return NULL;
    int64_t at = sf->data_start + (int64_t)e->begin;
    cn_tensor *t = NULL;
    if (read_at(sf, at, host, nbytes) == CN_OK) {
        size_t bad = nbytes;
        if (e->dtype == CN_BOOL)
            for (size_t k = 0; k < nbytes && bad == nbytes; k++)
                if (host[k] > 1) bad = k;
        if (bad < nbytes) {
            cn__io_error(sf->op, sf->path, "byte %lld (element %zu of BOOL tensor '%s') is "
                         "0x%02X; a BOOL is 0 or 1: the file is corrupt, re-save it",
                         (long long)(at + (int64_t)bad), bad, e->name, host[bad]);
        } else {
            if (!cn__host_is_little_endian())
                cn__swap_elements(host, nbytes, cn_dtype_size(e->dtype));
            t = cn_from_data(host, e->shape, e->ndim, e->dtype, device);
        }
    }
    cn__free(host);
    return t;
}

/* ---- the handle ----------------------------------------------------------------------------- */

struct cn_safetensors {
    int count;
    char **names;
    cn_tensor **tensors; /* references owned by the handle, in no scope */
    st_meta *meta;
    int n_meta;
};

void cn_safetensors_free(cn_safetensors *h) {
    if (!h) return;
    for (int i = 0; i < h->count; i++) {
        cn__free(h->names[i]);
        cn_release(h->tensors[i]);
    }
    for (int i = 0; i < h->n_meta; i++) {
        cn__free(h->meta[i].key);
        cn__free(h->meta[i].value);
    }
    cn__free(h->names);
    cn__free(h->tensors);
    cn__free(h->meta);
    cn__free(h);
}

cn_status cn_safetensors_load(const char *path, cn_device device, cn_safetensors **out) {
    const char *op = "safetensors_load";
    if (out) *out = NULL;
    if (!path || !out) {
        cn__null_arg(op, !path ? "path" : "out");
        return cn_last_status();
    }
    st_file sf;
    cn_status s = st_open(&sf, op, path);
    if (s) return s;
    cn_safetensors *h = cn__calloc(op, 1, sizeof *h);
    int n = sf.h.count;
    if (h) {
        h->names = cn__calloc(op, n ? (size_t)n : 1, sizeof *h->names);
        h->tensors = h->names ? cn__calloc(op, n ? (size_t)n : 1, sizeof *h->tensors) : NULL;
    }
    if (!h || !h->tensors) s = CN_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < n && !s; i++) {
        cn_tensor *t = st_read_tensor(&sf, &sf.h.entries[i], device);
        if (!t) {
            s = cn_last_status();
            break;
        }
        cn__scope_forget(t); /* the handle owns it, not the caller's scope */
        h->tensors[i] = t;
        h->names[i] = sf.h.entries[i].name; /* moved */
        sf.h.entries[i].name = NULL;
        h->count = i + 1;
    }
    if (!s) { /* move the metadata */
        h->n_meta = sf.h.n_meta;
        h->meta = sf.h.meta;
        sf.h.n_meta = 0;
        sf.h.meta = NULL;
    }
    st_close(&sf);
    if (s) {
        cn_safetensors_free(h);
        return s;
    }
    *out = h;
    return CN_OK;
}

/* ---- quantized tensors (cinder/io.h): <name> holds the packed values (u8), <name>.__qscales
 * the scales, and the metadata key "cinder.quant.<name>" the scheme's dtype name --------------- */

#define QKEY "cinder.quant."
#define QSCALES ".__qscales"

/* The quantized dtype recorded for tensor `name`, or CN_DTYPE_COUNT. */
static cn_dtype quant_scheme_of(const cn_safetensors *h, const char *name) {
    char key[512];
    if (snprintf(key, sizeof key, QKEY "%s", name) >= (int)sizeof key) return CN_DTYPE_COUNT;
    const char *v = cn_safetensors_metadata(h, key);
    for (int dt = 0; v && dt < CN_DTYPE_COUNT; dt++)
        if (cn_dtype_kind((cn_dtype)dt) == CN_KIND_QUANTIZED && !strcmp(v, cn_dtype_name(dt)))
            return (cn_dtype)dt;
    return CN_DTYPE_COUNT;
}

static cn_tensor *quant_rebuild(const char *op, const cn_safetensors *h, const char *name,
                                cn_tensor *values, cn_dtype scheme) {
    char sname[512];
    snprintf(sname, sizeof sname, "%s" QSCALES, name);
    cn_tensor *scales = NULL;
    for (int i = 0; i < h->count && !scales; i++)
        if (!strcmp(h->names[i], sname)) scales = h->tensors[i];
    if (!scales) {
        cn__io_error(op, name, "the metadata says '%s' is %s but the file has no '%s'; the file "
                     "is damaged or was not written by cn_safetensors_save", name,
                     cn_dtype_name(scheme), sname);
        return NULL;
    }
    int64_t shape[CN_MAX_DIMS];
    int nd = cn_ndim(values);
    for (int d = 0; d < nd; d++) shape[d] = cn_shape(values)[d];
    if (scheme == CN_Q4_BLOCK && nd > 0) shape[nd - 1] *= 2;
    return cn_quant_from_parts(values, scales, scheme, shape, nd);
}

int cn_safetensors_count(const cn_safetensors *h) { return h ? h->count : 0; }

const char *cn_safetensors_name(const cn_safetensors *h, int i) {
    return h && i >= 0 && i < h->count ? h->names[i] : NULL;
}

cn_tensor *cn_safetensors_get(const cn_safetensors *h, const char *name) {
    const char *op = "safetensors_get";
    if (!h || !name) {
        cn__null_arg(op, !h ? "h" : "name");
        return NULL;
    }
    for (int i = 0; i < h->count; i++)
        if (!strcmp(h->names[i], name)) {
            cn_dtype q = quant_scheme_of(h, name);
            if (q == CN_DTYPE_COUNT) return cn_detach(h->tensors[i]); /* a new header */
            return quant_rebuild(op, h, name, h->tensors[i], q);
        }
    cn_set_error(CN_ERR_INVALID_ARG, op, "the checkpoint has no tensor '%s' (it has %d%s%s%s); "
                 "list them with cn_safetensors_name", name, h->count,
                 h->count ? ", the first '" : "", h->count ? h->names[0] : "",
                 h->count ? "'" : "");
    return NULL;
}

const char *cn_safetensors_metadata(const cn_safetensors *h, const char *key) {
    if (!h || !key) return NULL;
    for (int i = 0; i < h->n_meta; i++)
        if (!strcmp(h->meta[i].key, key)) return h->meta[i].value;
    return NULL;
}

/* The scheme recorded for tensor `name` in a file's header (quantized), or NULL. */
static const char *file_scheme(const st_header *h, const char *name) {
    const size_t len = strlen(QKEY);
    for (int i = 0; i < h->n_meta; i++)
        if (!strncmp(h->meta[i].key, QKEY, len) && !strcmp(h->meta[i].key + len, name))
            return h->meta[i].value;
    return NULL;
}

cn_status cn_safetensors_load_into(const char *path, const char *const *names,
                                   cn_tensor *const *tensors, int n) {
    const char *op = "safetensors_load_into";
    if (!path || (n > 0 && (!names || !tensors))) {
        cn__null_arg(op, !path ? "path" : !names ? "names" : "tensors");
        return cn_last_status();
    }
    if (n < 0) return cn_set_error(CN_ERR_INVALID_ARG, op, "n = %d; it must be >= 0", n);
    for (int i = 0; i < n; i++) {
        if (!names[i] || !tensors[i]) {
            char arg[32];
            snprintf(arg, sizeof arg, "%s[%d]", !names[i] ? "names" : "tensors", i);
            cn__null_arg(op, arg);
            return cn_last_status();
        }
    }
    st_file sf;
    cn_status s = st_open(&sf, op, path);
    if (s) return s;
    const st_entry **found = cn__calloc(op, n ? (size_t)n : 1, sizeof *found);
    if (!found) s = CN_ERR_OUT_OF_MEMORY;
    /* check everything before writing anything */
    for (int i = 0; i < n && !s; i++) {
        for (int k = 0; k < sf.h.count && !found[i]; k++)
            if (!strcmp(sf.h.entries[k].name, names[i])) found[i] = &sf.h.entries[k];
        const st_entry *e = found[i];
        char want[128], got[160];
        cn_tensor_str(tensors[i], want, sizeof want);
        const char *scheme = e ? file_scheme(&sf.h, names[i]) : NULL;
        if (cn_kind_of(tensors[i]) == CN_KIND_QUANTIZED) {
            s = cn_set_error(CN_ERR_INVALID_ARG, op, "tensors[%d] is quantized (%s); load_into "
                             "copies into plain tensors: read a quantized tensor with "
                             "cn_safetensors_load and cn_safetensors_get (which rebuild it bit "
                             "for bit)", i, want);
        } else if (scheme) {
            s = cn_set_error(CN_ERR_DTYPE, op, "tensor '%s' in '%s' is %s: read it with "
                             "cn_safetensors_load and cn_safetensors_get, then cn_dequantize it "
                             "into tensors[%d] (%s)", names[i], path, scheme, i, want);
        } else if (!e) {
            s = cn_set_error(CN_ERR_INVALID_ARG, op, "'%s' has no tensor '%s' (names[%d]; it "
                             "holds %d); save the model with the same names", path, names[i], i,
                             sf.h.count);
        } else if (e->dtype != cn_dtype_of(tensors[i])) {
            s = cn_set_error(CN_ERR_DTYPE, op, "tensor '%s' in '%s' is %s but tensors[%d] is %s; "
                             "load it with cn_safetensors_load and cn_cast it", names[i], path,
                             cn__st_dtype_name(e->dtype), i, want);
        } else if (e->ndim != cn_ndim(tensors[i]) ||
                   memcmp(e->shape, cn_shape(tensors[i]), sizeof(int64_t) * (size_t)e->ndim)) {
            s = cn_set_error(CN_ERR_SHAPE, op, "tensor '%s' in '%s' has shape %s but tensors[%d] "
                             "is %s; build the model with the checkpoint's sizes", names[i], path,
                             cn__shape_str(e->shape, e->ndim, got, sizeof got), i, want);
        }
    }
    /* read (and check) every tensor before writing any: a corrupt byte or a failed allocation
     * in the last one must not follow writes to the first */
    cn_tensor **src = s ? NULL : cn__calloc(op, n ? (size_t)n : 1, sizeof *src);
    if (!s && !src) s = CN_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < n && !s; i++)
        if (!(src[i] = st_read_tensor(&sf, found[i], cn_device_of(tensors[i]))))
            s = cn_last_status();
    /* commit: copies between tensors checked to match, on one device; no allocation */
    cn_no_grad_begin();
    for (int i = 0; i < n && !s; i++)
        s = cn_copy_(tensors[i], src[i]);
    cn_no_grad_end();
    for (int i = 0; src && i < n; i++)
        cn_release(src[i]);
    cn__free(src);
    cn__free(found);
    st_close(&sf);
    return s;
}

/* ---- saving --------------------------------------------------------------------------------- */

/* A growing text buffer; `failed` is set (with the error) when an allocation fails. */
typedef struct text {
    char *data;
    size_t len, cap;
    int failed;
    const char *op;
} text;

static void put(text *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *bigger = cn__malloc(b->op, cap);
        if (!bigger) {
            b->failed = 1;
            return;
        }
        if (b->len) memcpy(bigger, b->data, b->len);
        cn__free(b->data);
        b->data = bigger;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void put_str(text *b, const char *s) { put(b, s, strlen(s)); }

static void put_u64(text *b, uint64_t v) {
    char buf[32];
    put(b, buf, (size_t)snprintf(buf, sizeof buf, "%llu", (unsigned long long)v));
}

/* A JSON string: quotes, backslashes and control characters escaped; UTF-8 passes through. */
static void put_json_string(text *b, const char *s) {
    put(b, "\"", 1);
    for (const char *c = s; *c; c++) {
        unsigned char u = (unsigned char)*c;
        if (u == '"' || u == '\\') {
            char esc[2] = {'\\', (char)u};
            put(b, esc, 2);
        } else if (u < 0x20) {
            char esc[8];
            put(b, esc, (size_t)snprintf(esc, sizeof esc, "\\u%04x", u));
        } else {
            put(b, c, 1);
        }
    }
    put(b, "\"", 1);
}

static cn_status check_save_args(const char *op, const char *path, const char *const *names,
                                 cn_tensor *const *tensors, int n) {
    if (!path || (n > 0 && (!names || !tensors))) {
        cn__null_arg(op, !path ? "path" : !names ? "names" : "tensors");
        return cn_last_status();
    }
    if (n < 0) return cn_set_error(CN_ERR_INVALID_ARG, op, "n = %d; it must be >= 0", n);
    for (int i = 0; i < n; i++) {
        if (!names[i] || !tensors[i]) {
            char arg[32];
            snprintf(arg, sizeof arg, "%s[%d]", !names[i] ? "names" : "tensors", i);
            cn__null_arg(op, arg);
            return cn_last_status();
        }
        if (!strcmp(names[i], "__metadata__"))
            return cn_set_error(CN_ERR_INVALID_ARG, op, "names[%d] is \"__metadata__\", which the "
                                "format reserves; rename the tensor", i);
        if (!cn__utf8_valid(names[i]))
            return cn_set_error(CN_ERR_INVALID_ARG, op, "names[%d] is not valid UTF-8, which "
                                "the JSON header needs; use a UTF-8 (or ASCII) name", i);
        for (int k = 0; k < i; k++)
            if (!strcmp(names[k], names[i]))
                return cn_set_error(CN_ERR_INVALID_ARG, op, "names[%d] and names[%d] are both "
                                    "'%s'; each tensor needs its own name", k, i, names[i]);
    }
    return CN_OK;
}

/* The metadata pairs must be strings that JSON can hold, with distinct keys, none "format". */
static cn_status check_metadata(const char *op, const char *const *keys,
                                const char *const *values, int n_meta) {
    if (n_meta > 0 && (!keys || !values)) {
        cn__null_arg(op, !keys ? "keys" : "values");
        return cn_last_status();
    }
    if (n_meta < 0)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "n_meta = %d; it must be >= 0", n_meta);
    for (int i = 0; i < n_meta; i++) {
        if (!keys[i] || !values[i]) {
            char arg[32];
            snprintf(arg, sizeof arg, "%s[%d]", !keys[i] ? "keys" : "values", i);
            cn__null_arg(op, arg);
            return cn_last_status();
        }
        if (!strcmp(keys[i], "format"))
            return cn_set_error(CN_ERR_INVALID_ARG, op, "keys[%d] is \"format\", which the save "
                                "writes itself (\"pt\", for Hugging Face's loaders); use "
                                "another key", i);
        if (!cn__utf8_valid(keys[i]) || !cn__utf8_valid(values[i]))
            return cn_set_error(CN_ERR_INVALID_ARG, op, "%s[%d] is not valid UTF-8, which the "
                                "JSON header needs; use UTF-8 (or ASCII) text",
                                !cn__utf8_valid(keys[i]) ? "keys" : "values", i);
        for (int k = 0; k < i; k++)
            if (!strcmp(keys[k], keys[i]))
                return cn_set_error(CN_ERR_INVALID_ARG, op, "keys[%d] and keys[%d] are both "
                                    "'%s'; each metadata key is given once", k, i, keys[i]);
    }
    return CN_OK;
}

/* The header: {"__metadata__":{"format":"pt",<key>:<value>...},"name":{"dtype":...,
 * "shape":[...],"data_offsets":[b,e]},...} padded with spaces to a multiple of 8 bytes. */
static cn_status build_header(text *b, const char *const *names, cn_tensor *const *tensors,
                              int n, const char *const *keys, const char *const *values,
                              int n_meta) {
    put_str(b, "{\"__metadata__\":{\"format\":\"pt\"");
    for (int i = 0; i < n_meta; i++) {
        put_str(b, ",");
        put_json_string(b, keys[i]);
        put_str(b, ":");
        put_json_string(b, values[i]);
    }
    put_str(b, "}");
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
        const cn_tensor *t = tensors[i];
        uint64_t nbytes = (uint64_t)cn_numel(t) * cn_dtype_size(cn_dtype_of(t));
        put_str(b, ",");
        put_json_string(b, names[i]);
        put_str(b, ":{\"dtype\":\"");
        put_str(b, cn__st_dtype_name(cn_dtype_of(t)));
        put_str(b, "\",\"shape\":[");
        for (int d = 0; d < cn_ndim(t); d++) {
            if (d) put_str(b, ",");
            put_u64(b, (uint64_t)cn_shape(t)[d]);
        }
        put_str(b, "],\"data_offsets\":[");
        put_u64(b, offset);
        put_str(b, ",");
        put_u64(b, offset + nbytes);
        put_str(b, "]}");
        offset += nbytes;
    }
    put_str(b, "}");
    while (!b->failed && b->len % 8 != 0)
        put_str(b, " ");
    return b->failed ? CN_ERR_OUT_OF_MEMORY : CN_OK;
}

/* Writes the file at tmp. */
static cn_status write_file(const char *op, const char *path, const char *tmp, const text *header,
                            cn_tensor *const *tensors, int n) {
    errno = 0;
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return cn__io_error(op, path, "cannot create '%s' to write it: %s; check that the "
                            "directory exists and is writable", tmp,
                            errno ? strerror(errno) : "unknown reason");
    unsigned char len_bytes[8];
    for (int k = 0; k < 8; k++)
        len_bytes[k] = (unsigned char)((uint64_t)header->len >> (8 * k));
    int ok = fwrite(len_bytes, 1, 8, f) == 8 &&
             fwrite(header->data, 1, header->len, f) == header->len;
    int err = ok ? 0 : errno;
    cn_status s = CN_OK;
    for (int i = 0; i < n && ok && !s; i++) {
        size_t es = cn_dtype_size(cn_dtype_of(tensors[i]));
        size_t nbytes = (size_t)cn_numel(tensors[i]) * es;
        if (nbytes == 0) continue;
        void *host = cn__malloc(op, nbytes);
        if (!host) {
            s = CN_ERR_OUT_OF_MEMORY;
            break;
        }
        s = cn_read(tensors[i], host, nbytes);
        if (!s) {
            if (!cn__host_is_little_endian()) cn__swap_elements(host, nbytes, es);
            ok = fwrite(host, 1, nbytes, f) == nbytes;
            if (!ok) err = errno;
        }
        cn__free(host);
    }
    errno = 0;
    if (fclose(f) != 0) {
        ok = 0;
        if (!err) err = errno;
    }
    if (!ok && !s)
        s = cn__io_error(op, path, "cannot write '%s': %s; check the free disk space", tmp,
                         err ? strerror(err) : "short write");
    return s;
}

/* Saves with each quantized tensor written as its parts (values, scales) and its scheme in the
 * metadata (the layout at the top of the quantized section above). */
static cn_status save_quantized(const char *op, const char *path, const char *const *names,
                                cn_tensor *const *tensors, int n, const char *const *keys,
                                const char *const *values, int n_meta, int nq) {
    size_t nn = (size_t)n + (size_t)nq, nm = (size_t)n_meta + (size_t)nq;
    const char **names2 = cn__calloc(op, nn, sizeof *names2);
    cn_tensor **tensors2 = cn__calloc(op, nn, sizeof *tensors2);
    const char **keys2 = cn__calloc(op, nm, sizeof *keys2), **values2 =
                                                                cn__calloc(op, nm, sizeof *values2);
    char **owned = cn__calloc(op, 2 * (size_t)nq, sizeof *owned);
    cn_status s = names2 && tensors2 && keys2 && values2 && owned ? CN_OK : CN_ERR_OUT_OF_MEMORY;
    int k = n, m = n_meta, o = 0;
    for (int i = 0; i < n_meta && !s; i++) {
        keys2[i] = keys[i];
        values2[i] = values[i];
    }
    for (int i = 0; i < n && !s; i++) {
        names2[i] = names[i];
        if (cn_kind_of(tensors[i]) != CN_KIND_QUANTIZED) {
            tensors2[i] = cn_retain(tensors[i]);
            continue;
        }
        size_t len = strlen(names[i]) + sizeof QKEY + sizeof QSCALES;
        char *sname = cn__malloc(op, len), *key = sname ? cn__malloc(op, len) : NULL;
        if (sname) owned[o++] = sname;
        if (key) owned[o++] = key;
        if (!key) {
            s = CN_ERR_OUT_OF_MEMORY;
            break;
        }
        snprintf(sname, len, "%s" QSCALES, names[i]);
        snprintf(key, len, QKEY "%s", names[i]);
        s = cn_quant_parts(tensors[i], &tensors2[i], &tensors2[k]);
        names2[k++] = sname;
        keys2[m] = key;
        values2[m++] = cn_dtype_name(cn_dtype_of(tensors[i]));
    }
    if (!s)
        s = cn_safetensors_save_metadata(path, names2, tensors2, (int)nn, keys2, values2,
                                         (int)nm);
    for (size_t i = 0; tensors2 && i < nn; i++) cn_release(tensors2[i]);
    for (int i = 0; i < o; i++) cn__free(owned[i]);
    cn__free(owned);
    cn__free(names2);
    cn__free(tensors2);
    cn__free(keys2);
    cn__free(values2);
    return s;
}

cn_status cn_safetensors_save(const char *path, const char *const *names,
                              cn_tensor *const *tensors, int n) {
    return cn_safetensors_save_metadata(path, names, tensors, n, NULL, NULL, 0);
}

cn_status cn_safetensors_save_metadata(const char *path, const char *const *names,
                                       cn_tensor *const *tensors, int n, const char *const *keys,
                                       const char *const *values, int n_meta) {
    const char *op = n_meta ? "safetensors_save_metadata" : "safetensors_save";
    cn_status s = check_save_args(op, path, names, tensors, n);
    if (!s) s = check_metadata(op, keys, values, n_meta);
    if (s) return s;
    int nq = 0;
    for (int i = 0; i < n; i++) nq += cn_kind_of(tensors[i]) == CN_KIND_QUANTIZED;
    if (nq) return save_quantized(op, path, names, tensors, n, keys, values, n_meta, nq);
    text header = {.op = op};
    text tmp = {.op = op};
    put_str(&tmp, path);
    put_str(&tmp, ".tmp");
    s = tmp.failed ? CN_ERR_OUT_OF_MEMORY
                   : build_header(&header, names, tensors, n, keys, values, n_meta);
    if (!s) s = write_file(op, path, tmp.data, &header, tensors, n);
    if (!s && rename(tmp.data, path) != 0)
        s = cn__io_error(op, path, "cannot rename '%s' to it: %s; check the directory's "
                         "permissions", tmp.data, strerror(errno));
    if (s && tmp.data) remove(tmp.data);
    cn__free(header.data);
    cn__free(tmp.data);
    return s;
}
