/* Shared by the file readers and writers of src/nn (safetensors, IDX): the CN_ERR_IO message, byte
 * order, and the parsed safetensors header. */
#ifndef CINDER_NN_IO_INTERNAL_H
#define CINDER_NN_IO_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cinder/error.h"
#include "cinder/tensor.h"

#if defined(__GNUC__)
#define CN_IO_PRINTF(fmt_arg) __attribute__((format(printf, fmt_arg, fmt_arg + 1)))
#else
#define CN_IO_PRINTF(fmt_arg)
#endif

/* CN_ERR_IO: "<op>: <phrase>: '<path>': <detail>". The detail says what is wrong where (a byte
 * offset, a field) and the way out. */
static inline cn_status cn__io_error(const char *op, const char *path, const char *fmt, ...)
    CN_IO_PRINTF(3);
static inline cn_status cn__io_error(const char *op, const char *path, const char *fmt, ...) {
    char detail[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return cn_set_error(CN_ERR_IO, op, "'%s': %s", path, detail);
}

static inline int cn__host_is_little_endian(void) {
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* Reverses the bytes of each `es`-byte element of data[0, nbytes): converts between the host's
 * byte order and the other one. */
static inline void cn__swap_elements(void *data, size_t nbytes, size_t es) {
    unsigned char *p = (unsigned char *)data;
    if (es < 2) return;
    for (size_t at = 0; at + es <= nbytes; at += es)
        for (size_t k = 0; k < es / 2; k++) {
            unsigned char c = p[at + k];
            p[at + k] = p[at + es - 1 - k];
            p[at + es - 1 - k] = c;
        }
}

/* ---- the safetensors header (safetensors_header.c) ----------------------------------------- */

typedef struct st_entry {
    char *name;
    cn_dtype dtype;
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    uint64_t begin, end; /* data_offsets, relative to the data section */
    size_t at;           /* header offset of the entry's name, for messages */
} st_entry;

typedef struct st_meta {
    char *key, *value;
} st_meta;

typedef struct st_header {
    st_entry *entries; /* sorted by offset once parsed */
    int count, cap;
    st_meta *meta;     /* "__metadata__", in header order */
    int n_meta, meta_cap;
} st_header;

/* Parses the N-byte header `text` of a file of file_size bytes (its data section starts at
 * 8 + n) and validates it against the format: strict JSON, known dtypes, at most CN_MAX_DIMS
 * dims, sizes that match the offsets, no repeated name, offsets that tile the data section.
 * Fills *h (empty on entry; header_free it, also after a failure); CN_ERR_IO naming `path` and
 * the byte offset, or CN_ERR_OUT_OF_MEMORY. */
cn_status cn__st_parse_header(const char *op, const char *path, const char *text, size_t n,
                              int64_t file_size, st_header *h);
void cn__st_header_free(st_header *h);

/* "F32", "BF16", ... for cinder's dtypes; NULL for others. */
const char *cn__st_dtype_name(cn_dtype dt);

/* Non-zero when the NUL-terminated s is valid UTF-8. */
int cn__utf8_valid(const char *s);

#endif
