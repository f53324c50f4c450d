/* IDX files (the format of MNIST and Fashion-MNIST), plain or gzip-compressed, and the
 * Fashion-MNIST loader built on them.
 *
 * Files are read through zlib's gz* functions, which read a plain file as it is, so one path
 * serves both. A file is read completely, and checked to end where its dims say, before any
 * tensor is handed out. Offsets in messages count bytes of the (decompressed) content.
 *
 * Fashion-MNIST's images are decompressed straight into their f32 tensor, through a 1 MB staging
 * buffer and a table of the 256 pixel values, so the loader holds one copy of the images it
 * keeps (60000 of them are 188 MB) and never their u8 bytes (47 MB) beside it. */
#define _POSIX_C_SOURCE 200809L /* stat */

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "cinder/interop.h"
#include "cinder/io.h"
#include "core/alloc.h"
#include "core/error_internal.h"
#include "core/tensor_impl.h"
#include "nn/io_internal.h"

/* ---- the format ----------------------------------------------------------------------------- */

typedef struct idx_type {
    unsigned char code; /* byte 2 of the file */
    const char *name;
    size_t size;        /* bytes per element in the file */
    cn_dtype dtype;     /* what cinder makes of it */
} idx_type;

static const idx_type idx_types[] = {
    {0x08, "unsigned byte", 1, CN_U8}, {0x09, "signed byte", 1, CN_I32},
    {0x0B, "i16", 2, CN_I32},          {0x0C, "i32", 4, CN_I32},
    {0x0D, "f32", 4, CN_F32},          {0x0E, "f64", 8, CN_F64},
};

/* A file's content: its type, dims, and elements as the file has them (big-endian). */
typedef struct idx_data {
    const idx_type *type;
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    int64_t numel;
    unsigned char *bytes; /* numel * type->size bytes; cn__free it */
} idx_data;

/* ---- reading -------------------------------------------------------------------------------- */

typedef struct idx_reader {
    gzFile f;
    const char *op, *path;
    int64_t at; /* bytes of content read so far */
} idx_reader;

/* Reads up to n bytes; returns how many, or -1 with the error set when zlib or the system fails
 * (a corrupt gzip stream, an I/O error). A short count without error means the content ended. */
static int64_t read_some(idx_reader *r, void *dst, size_t n) {
    size_t got = 0;
    while (got < n) {
        size_t want = n - got < (size_t)(INT_MAX / 2) ? n - got : (size_t)(INT_MAX / 2);
        int k = gzread(r->f, (char *)dst + got, (unsigned)want);
        if (k > 0) got += (size_t)k;
        int err = Z_OK;
        const char *msg = gzerror(r->f, &err);
        if (k < 0 || err == Z_DATA_ERROR || err == Z_MEM_ERROR || err == Z_ERRNO) {
            int64_t where = r->at + (int64_t)got;
            if (err == Z_ERRNO)
                cn__io_error(r->op, r->path, "cannot read it at byte %lld: %s; check the file",
                             (long long)where, strerror(errno));
            else
                cn__io_error(r->op, r->path, "the gzip stream is corrupt near byte %lld of its "
                             "content (zlib: %s); download the file again", (long long)where,
                             msg ? msg : "unknown error");
            return -1;
        }
        if (k == 0 || err == Z_BUF_ERROR) break; /* the end, or a stream cut short */
    }
    r->at += (int64_t)got;
    return (int64_t)got;
}

/* Reads exactly n bytes of `what`, or fails naming the byte where the content ends. */
static cn_status read_exact(idx_reader *r, void *dst, size_t n, const char *what) {
    int64_t start = r->at;
    int64_t got = read_some(r, dst, n);
    if (got < 0) return cn_last_status();
    if ((size_t)got < n)
        return cn__io_error(r->op, r->path, "the file is truncated at byte %lld: expected %s "
                            "(%zu bytes from byte %lld); download or copy it again",
                            (long long)r->at, what, n, (long long)start);
    return CN_OK;
}

static void shape_text(const int64_t *shape, int ndim, char *buf, size_t size) {
    cn__shape_str(shape, ndim, buf, size);
}

/* The error for data that end after `have` of their nbytes, which began at byte `start`. */
static cn_status data_truncated(const idx_reader *r, const idx_data *d, size_t nbytes,
                                int64_t start, size_t have) {
    char shape[160];
    shape_text(d->shape, d->ndim, shape, sizeof shape);
    return cn__io_error(r->op, r->path, "the file is truncated at byte %lld: expected %zu bytes "
                        "of data from byte %lld (dims %s of %s) but it has %zu; download or copy "
                        "it again", (long long)r->at, nbytes, (long long)start, shape,
                        d->type->name, have);
}

/* Reads the data: the buffer grows as bytes arrive, so a header whose dims promise more than the
 * file holds fails as truncated instead of allocating the promise. */
static cn_status read_data(idx_reader *r, idx_data *d, size_t nbytes) {
    size_t cap = nbytes < ((size_t)1 << 20) ? nbytes : (size_t)1 << 20, have = 0;
    unsigned char *buf = cn__malloc(r->op, cap ? cap : 1);
    if (!buf) return CN_ERR_OUT_OF_MEMORY;
    int64_t start = r->at;
    while (have < nbytes) {
        if (have == cap) {
            size_t bigger_cap = cap * 2 < nbytes && cap * 2 > cap ? cap * 2 : nbytes;
            unsigned char *bigger = cn__malloc(r->op, bigger_cap);
            if (!bigger) {
                cn__free(buf);
                return CN_ERR_OUT_OF_MEMORY;
            }
            memcpy(bigger, buf, have);
            cn__free(buf);
            buf = bigger;
            cap = bigger_cap;
        }
        size_t want = cap - have;
        int64_t got = read_some(r, buf + have, want);
        if (got < 0) {
            cn__free(buf);
            return cn_last_status();
        }
        have += (size_t)got;
        if ((size_t)got < want) break; /* the content ended */
    }
    if (have < nbytes) {
        cn__free(buf);
        return data_truncated(r, d, nbytes, start, have);
    }
    d->bytes = buf;
    return CN_OK;
}

/* Takes bytes [at, at + n) of a file's data, in order (at counts from the data's first byte). */
typedef void (*idx_take_fn)(void *ctx, const unsigned char *bytes, size_t at, size_t n);

/* Reads the nbytes of data a chunk at a time into `take`, which puts them where they belong, so
 * they are never held whole. Fails as read_data does. */
static cn_status stream_data(idx_reader *r, const idx_data *d, size_t nbytes, idx_take_fn take,
                             void *ctx) {
    const size_t chunk = (size_t)1 << 20;
    unsigned char *buf = cn__malloc(r->op, nbytes < chunk ? (nbytes ? nbytes : 1) : chunk);
    if (!buf) return CN_ERR_OUT_OF_MEMORY;
    int64_t start = r->at;
    size_t have = 0;
    while (have < nbytes) {
        size_t want = nbytes - have < chunk ? nbytes - have : chunk;
        int64_t got = read_some(r, buf, want);
        if (got < 0) {
            cn__free(buf);
            return cn_last_status();
        }
        take(ctx, buf, have, (size_t)got);
        have += (size_t)got;
        if ((size_t)got < want) break; /* the content ended */
    }
    cn__free(buf);
    return have < nbytes ? data_truncated(r, d, nbytes, start, have) : CN_OK;
}

/* Opens the file at `path` and reads its header into d (type, dims, numel; no data yet). On
 * success the reader is open at the data's first byte; on failure it is closed. */
static cn_status idx_open(const char *op, const char *path, idx_reader *r, idx_data *d) {
    memset(d, 0, sizeof *d);
    errno = 0;
    *r = (idx_reader){.f = gzopen(path, "rb"), .op = op, .path = path, .at = 0};
    if (!r->f)
        return cn__io_error(op, path, "cannot open it: %s; check the path",
                            errno ? strerror(errno) : "out of memory");
    gzbuffer(r->f, 1u << 17); /* fewer, larger reads than zlib's default 8 KB */
    unsigned char magic[4], dims[4 * CN_MAX_DIMS];
    cn_status s = read_exact(r, magic, 4, "the 4-byte magic number");
    if (!s && (magic[0] != 0 || magic[1] != 0))
        s = cn__io_error(op, path, "bytes 0-1 are 0x%02X 0x%02X where an IDX file has 0x00 0x00 "
                         "(bad magic): this is not an IDX file, or a gzip file that lost its "
                         "header", magic[0], magic[1]);
    for (size_t k = 0; !s && !d->type && k < sizeof idx_types / sizeof *idx_types; k++)
        if (idx_types[k].code == magic[2]) d->type = &idx_types[k];
    if (!s && !d->type)
        s = cn__io_error(op, path, "byte 2 is the type 0x%02X, which IDX does not define (0x08 "
                         "u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64): bad magic, the "
                         "file is corrupt", magic[2]);
    if (!s && (magic[3] < 1 || magic[3] > CN_MAX_DIMS))
        s = cn__io_error(op, path, "byte 3 gives %d dims; cinder reads 1 to %d: the file is "
                         "corrupt or not IDX", magic[3], CN_MAX_DIMS);
    if (!s) {
        d->ndim = magic[3];
        char what[64];
        snprintf(what, sizeof what, "%d big-endian u32 dims", d->ndim);
        s = read_exact(r, dims, 4 * (size_t)d->ndim, what);
    }
    uint64_t numel = 1;
    int empty = 0; /* a 0 dim: no elements, however big the others */
    for (int k = 0; !s && k < d->ndim; k++) {
        const unsigned char *b = dims + 4 * k;
        d->shape[k] = (int64_t)((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
                                (uint32_t)b[2] << 8 | b[3]);
        empty |= d->shape[k] == 0;
    }
    for (int k = 0; !s && !empty && k < d->ndim; k++) {
        if (numel > (uint64_t)(INT64_MAX / 8) / (uint64_t)d->shape[k]) {
            char shape[160];
            shape_text(d->shape, k + 1, shape, sizeof shape);
            s = cn__io_error(op, path, "the dims %s... (bytes 4-%d) hold more elements than 64 "
                             "bits count: the header is corrupt", shape, 3 + 4 * (k + 1));
        }
        numel *= (uint64_t)d->shape[k];
    }
    if (empty) numel = 0;
    if (s) {
        gzclose(r->f);
        return s;
    }
    d->numel = (int64_t)numel;
    return CN_OK;
}

/* After the data: checks that the content ends there (reading on also checks the gzip trailer's
 * CRC), closes the reader, and on failure frees d's bytes. Returns s when it is already an
 * error. */
static cn_status idx_close(idx_reader *r, idx_data *d, cn_status s) {
    if (!s) {
        unsigned char extra;
        int64_t end = r->at, got = read_some(r, &extra, 1);
        if (got < 0) {
            s = cn_last_status();
        } else if (got > 0) {
            char shape[160];
            shape_text(d->shape, d->ndim, shape, sizeof shape);
            s = cn__io_error(r->op, r->path, "the data of dims %s end at byte %lld but the file "
                             "goes on: the dims in the header are wrong, or the file is corrupt",
                             shape, (long long)end);
        }
    }
    gzclose(r->f);
    if (s) {
        cn__free(d->bytes);
        d->bytes = NULL;
    }
    return s;
}

/* Reads and checks the whole file at `path`. */
static cn_status idx_read(const char *op, const char *path, idx_data *d) {
    idx_reader r;
    cn_status s = idx_open(op, path, &r, d);
    if (s) return s;
    s = read_data(&r, d, (size_t)d->numel * d->type->size);
    return idx_close(&r, d, s);
}

/* ---- IDX to tensor -------------------------------------------------------------------------- */

/* A tensor of d's content in its cinder dtype: big-endian elements are swapped on little-endian
 * hosts, and i8 and i16 are widened to i32. */
static cn_tensor *idx_tensor(const char *op, const idx_data *d, cn_device device) {
    size_t n = (size_t)d->numel, es = d->type->size;
    if (d->type->dtype != CN_I32 || es == 4) {
        if (cn__host_is_little_endian()) cn__swap_elements(d->bytes, n * es, es);
        return cn_from_data(d->bytes, d->shape, d->ndim, d->type->dtype, device);
    }
    int32_t *wide = cn__malloc(op, n ? n * sizeof *wide : 1);
    if (!wide) return NULL;
    for (size_t k = 0; k < n; k++) {
        const unsigned char *b = d->bytes + k * es;
        wide[k] = es == 1 ? (int32_t)(int8_t)b[0] : (int32_t)(int16_t)(uint16_t)(b[0] << 8 | b[1]);
    }
    cn_tensor *t = cn_from_data(wide, d->shape, d->ndim, CN_I32, device);
    cn__free(wide);
    return t;
}

cn_status cn_idx_load(const char *path, cn_device device, cn_tensor **out) {
    const char *op = "idx_load";
    if (out) *out = NULL;
    if (!path || !out) {
        cn__null_arg(op, !path ? "path" : "out");
        return cn_last_status();
    }
    idx_data d;
    cn_status s = idx_read(op, path, &d);
    if (s) return s;
    *out = idx_tensor(op, &d, device);
    cn__free(d.bytes);
    return *out ? CN_OK : cn_last_status();
}

/* ---- Fashion-MNIST -------------------------------------------------------------------------- */

enum { FM_TRAIN_X, FM_TRAIN_Y, FM_TEST_X, FM_TEST_Y, FM_FILES };

static const char *const fm_files[FM_FILES] = {
    "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",  "t10k-labels-idx1-ubyte",
};

#define FM_SIDE 28
#define FM_CLASSES 10

/* How the loader makes the tensors: the f32 value of each pixel byte, the rows each split keeps,
 * the device. */
typedef struct fm_plan {
    float pixel[256];
    int64_t limit[2]; /* train, test; 0: all */
    cn_device device;
} fm_plan;

/* The rows of part `which` (whose file holds n) that the plan keeps. */
static int64_t fm_keep(const fm_plan *plan, int which, int64_t n) {
    int64_t limit = plan->limit[which == FM_TEST_X || which == FM_TEST_Y];
    return limit > 0 && limit < n ? limit : n;
}

/* t, moved to the plan's device when that is not the CPU (t is released); NULL on failure. */
static cn_tensor *fm_to_device(cn_tensor *t, cn_device device) {
    if (!t || cn_device_eq(device, cn_cpu())) return t;
    cn_tensor *moved = cn_to_device(t, device);
    cn_release(t);
    return moved;
}

/* A CPU f32 [rows, 784] tensor for images, and its elements in *pixels. */
static cn_tensor *fm_images_new(int64_t rows, float **pixels) {
    const int64_t shape[2] = {rows, FM_SIDE * FM_SIDE};
    cn_tensor *t = cn_empty(shape, 2, CN_F32, cn_cpu());
    *pixels = t ? cn_data_ptr(t) : NULL;
    return t;
}

/* Where streamed image bytes go: element e < keep of the data becomes out[e] = pixel[byte]. */
typedef struct fm_sink {
    const float *pixel;
    float *out;
    size_t keep;
} fm_sink;

static void fm_take_pixels(void *ctx, const unsigned char *bytes, size_t at, size_t n) {
    const fm_sink *k = ctx;
    size_t end = at + n < k->keep ? at + n : k->keep;
    for (size_t e = at; e < end; e++)
        k->out[e] = k->pixel[bytes[e - at]];
}

/* Whether the file at path can hold `content` bytes of content (header and data), judged from
 * its size: a plain file must have them all; a gzip file, whose content is at most 1032 times its
 * size (deflate's limit), must end with their count (mod 2^32), as a single gzip member does.
 * Only then do its images stream into a tensor of the size its header gives; otherwise the data
 * are read as they come, and a header that promises more than the file holds fails as truncated
 * without allocating the promise. */
static int fm_data_all_there(const char *path, int plain, uint64_t content) {
    struct stat st;
    if (stat(path, &st) != 0 || st.st_size <= 0) return 0;
    uint64_t size = (uint64_t)st.st_size;
    if (plain) return size >= content;
    if (content / 1032 > size) return 0;
    FILE *f = fopen(path, "rb");
    unsigned char b[4] = {0};
    int ok = f && fseek(f, -4, SEEK_END) == 0 && fread(b, 1, 4, f) == 4;
    if (f) fclose(f);
    uint32_t isize = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                     (uint32_t)b[3] << 24; /* gzip's ISIZE, little-endian */
    return ok && isize == (uint32_t)content;
}

/* Whether d's header is that of Fashion-MNIST images (u8 [N, 28, 28]) or labels (u8 [N]). */
static int fm_header_ok(int images, const idx_data *d) {
    return d->type->code == 0x08 && (images ? d->ndim == 3 && d->shape[1] == FM_SIDE &&
                                                  d->shape[2] == FM_SIDE
                                            : d->ndim == 1);
}

/* The checks of part `which`, read whole into d: its header, and its labels' classes. */
static cn_status fm_check(const char *op, const char *path, int which, const idx_data *d) {
    int images = which == FM_TRAIN_X || which == FM_TEST_X;
    if (!fm_header_ok(images, d)) {
        char shape[160];
        shape_text(d->shape, d->ndim, shape, sizeof shape);
        return cn__io_error(op, path, "holds %s of %s where Fashion-MNIST %s are %s of unsigned "
                            "byte; this is another data set, or the files were renamed", shape,
                            d->type->name, images ? "images" : "labels",
                            images ? "[N, 28, 28]" : "[N]");
    }
    for (int64_t k = 0; !images && k < d->numel; k++)
        if (d->bytes[k] >= FM_CLASSES)
            return cn__io_error(op, path, "byte %lld is the label %d; Fashion-MNIST classes are "
                                "0 to 9: the file is corrupt", (long long)(8 + k), d->bytes[k]);
    return CN_OK;
}

/* The tensor of part `which` from its bytes: images f32 [keep, 784] of the plan's pixel values,
 * labels i64 [keep]. */
static cn_tensor *fm_tensor(const char *op, const fm_plan *plan, int which, const idx_data *d) {
    int64_t keep = fm_keep(plan, which, d->shape[0]);
    if (which == FM_TRAIN_X || which == FM_TEST_X) {
        float *pixels = NULL;
        cn_tensor *t = fm_images_new(keep, &pixels);
        if (!t) return NULL;
        fm_sink sink = {plan->pixel, pixels, (size_t)keep * FM_SIDE * FM_SIDE};
        fm_take_pixels(&sink, d->bytes, 0, sink.keep);
        return fm_to_device(t, plan->device);
    }
    int64_t *labels = cn__malloc(op, keep ? (size_t)keep * sizeof *labels : 1);
    if (!labels) return NULL;
    for (int64_t k = 0; k < keep; k++)
        labels[k] = d->bytes[k];
    cn_tensor *t = cn_from_data(labels, &keep, 1, CN_I64, plan->device);
    cn__free(labels);
    return t;
}

/* Reads part `which` from dir (name.gz, else name), checks its type, dims and labels, and makes
 * its tensor in *out. d receives the header (its bytes are freed here). */
static cn_status fm_read(const char *op, const char *dir, int which, const fm_plan *plan,
                         idx_data *d, char *path, size_t size, cn_tensor **out) {
    int images = which == FM_TRAIN_X || which == FM_TEST_X;
    int len = snprintf(path, size, "%s/%s.gz", dir, fm_files[which]);
    if (len < 0 || (size_t)len >= size)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "dir '%.64s...' is too long for a path", dir);
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        path[len - 3] = '\0'; /* without ".gz" */
        probe = fopen(path, "rb");
    }
    if (!probe)
        return cn__io_error(op, path, "cannot open it (nor its .gz): %s; install Fashion-MNIST "
                            "with `apt-get install dataset-fashion-mnist` (or scripts/demo.sh), "
                            "which puts it in " CN_FASHION_MNIST_DIR ", or pass the directory "
                            "that holds its four files", strerror(errno));
    fclose(probe);
    idx_reader r;
    cn_status s = idx_open(op, path, &r, d);
    if (s) return s;
    size_t nbytes = (size_t)d->numel * d->type->size;
    uint64_t content = 4 + 4 * (uint64_t)d->ndim + nbytes;
    if (images && fm_header_ok(images, d) && fm_data_all_there(path, gzdirect(r.f), content)) {
        /* straight into the tensor: no u8 copy of the images is ever held */
        float *pixels = NULL;
        int64_t keep = fm_keep(plan, which, d->shape[0]);
        cn_tensor *t = fm_images_new(keep, &pixels);
        fm_sink sink = {plan->pixel, pixels, (size_t)keep * FM_SIDE * FM_SIDE};
        s = t ? stream_data(&r, d, nbytes, fm_take_pixels, &sink) : cn_last_status();
        s = idx_close(&r, d, s);
        if (!s) t = fm_to_device(t, plan->device);
        if (!s && !t) s = cn_last_status();
        if (s) cn_release(t);
        *out = s ? NULL : t;
        return s;
    }
    s = idx_close(&r, d, read_data(&r, d, nbytes));
    if (!s) s = fm_check(op, path, which, d);
    if (!s && !(*out = fm_tensor(op, plan, which, d))) s = cn_last_status();
    cn__free(d->bytes);
    d->bytes = NULL;
    return s;
}

cn_status cn_fashion_mnist_load(const char *dir, cn_device device, cn_tensor **train_x,
                                cn_tensor **train_y, cn_tensor **test_x, cn_tensor **test_y) {
    return cn_fashion_mnist_load_with(dir, device, NULL, train_x, train_y, test_x, test_y);
}

cn_status cn_fashion_mnist_load_with(const char *dir, cn_device device,
                                     const cn_fashion_mnist_options *opt, cn_tensor **train_x,
                                     cn_tensor **train_y, cn_tensor **test_x,
                                     cn_tensor **test_y) {
    const char *op = "fashion_mnist_load";
    cn_tensor **outs[FM_FILES] = {train_x, train_y, test_x, test_y};
    for (int k = 0; k < FM_FILES; k++)
        if (outs[k]) *outs[k] = NULL;
    const cn_fashion_mnist_options none = {0};
    if (!opt) opt = &none;
    if (opt->train_limit < 0 || opt->test_limit < 0)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "%s_limit = %lld; give 0 (every sample) or "
                            "a positive count", opt->train_limit < 0 ? "train" : "test",
                            (long long)(opt->train_limit < 0 ? opt->train_limit
                                                             : opt->test_limit));
    if (!(opt->std >= 0) || !isfinite(opt->std) || !isfinite(opt->mean))
        return cn_set_error(CN_ERR_INVALID_ARG, op, "mean = %g, std = %g; normalising needs a "
                            "finite mean and std > 0 (std = 0: no normalising)", opt->mean,
                            opt->std);
    fm_plan plan = {.limit = {opt->train_limit, opt->test_limit}, .device = device};
    /* each step rounded to f32 as cn_add_scalar(x, -mean) then cn_mul_scalar(x, 1 / std) round
     * it (their kernels take the scalar as f32), so the values are theirs bit for bit */
    const float shift = (float)-opt->mean, scale = opt->std > 0 ? (float)(1.0 / opt->std) : 1.0f;
    for (int v = 0; v < 256; v++) {
        float x = (float)v / 255.0f;
        if (opt->std > 0) {
            x = x + shift;
            x = x * scale;
        }
        plan.pixel[v] = x;
    }
    int64_t count[FM_FILES] = {-1, -1, -1, -1};
    char paths[FM_FILES][4096];
    if (!dir) dir = CN_FASHION_MNIST_DIR;
    cn_status s = CN_OK;
    for (int k = 0; k < FM_FILES && !s; k++) {
        if (!outs[k]) continue;
        idx_data d;
        s = fm_read(op, dir, k, &plan, &d, paths[k], sizeof paths[k], outs[k]);
        if (s) break;
        count[k] = d.shape[0];
        int pair = k ^ 1; /* images <-> labels of the same split */
        if (count[pair] >= 0 && count[pair] != count[k])
            s = cn__io_error(op, paths[k], "holds %lld samples but '%s' holds %lld; the two "
                             "files come from different data sets", (long long)count[k],
                             paths[pair], (long long)count[pair]);
    }
    if (s)
        for (int k = 0; k < FM_FILES; k++)
            if (outs[k]) {
                cn_release(*outs[k]);
                *outs[k] = NULL;
            }
    return s;
}
