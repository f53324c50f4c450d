/* libFuzzer harness: IDX loading, plain and gzip-compressed (cn_idx_load, cn_fashion_mnist_load).
 *
 * Input: byte 0 chooses what is done with the rest, bytes 1-2 are a parameter, the rest is the
 * content C (an IDX file, or anything):
 *   mode & 3 == 0   C is written as it is (a plain file, or a gzip file from the corpus)
 *   mode & 3 == 1   C is gzip-compressed first (valid gzip of fuzzed content)
 *   mode & 3 == 2   ... and one byte of the compressed file, at the parameter, is flipped
 *   mode & 3 == 3   ... and the compressed file is cut at the parameter
 *   mode & 4        C is cut at the parameter into an images and a labels file, loaded as
 *                   Fashion-MNIST's training split (plain files)
 *   mode & 8        the parameter's low byte + 1 is the allocation that fails
 *                   (cn_alloc_fail_after), to walk the loaders' out-of-memory paths
 * Where C is known exactly (plain C that does not start like gzip, or compressed C left intact),
 * the result is checked against an independent reading of C: it loads exactly when C is a
 * well-formed IDX file, with its dims, dtype and values. */
#include <sys/stat.h>
#include <zlib.h>

#include "fuzz_common.h"

/* ---- the oracle ---------------------------------------------------------------------------- */

typedef struct idx_expect {
    int valid;
    cn_dtype dtype;
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    size_t numel, es; /* elements, bytes per element in the file */
    const uint8_t *data;
} idx_expect;

static idx_expect expect_of(const uint8_t *c, size_t n) {
    idx_expect e = {0};
    if (n < 4 || c[0] != 0 || c[1] != 0 || c[3] < 1 || c[3] > CN_MAX_DIMS) return e;
    switch (c[2]) {
    case 0x08: e.dtype = CN_U8, e.es = 1; break;
    case 0x09: e.dtype = CN_I32, e.es = 1; break;
    case 0x0B: e.dtype = CN_I32, e.es = 2; break;
    case 0x0C: e.dtype = CN_I32, e.es = 4; break;
    case 0x0D: e.dtype = CN_F32, e.es = 4; break;
    case 0x0E: e.dtype = CN_F64, e.es = 8; break;
    default: return e;
    }
    e.ndim = c[3];
    if (n < 4 + 4 * (size_t)e.ndim) return e;
    /* the element count, saturated at the loader's limit (2^63 / 8, past which a header is
     * corrupt): a product of u32 dims can wrap even 128 bits (five dims of 2^26 are 2^130) */
    const unsigned __int128 limit = (unsigned __int128)(INT64_MAX / 8);
    unsigned __int128 numel = 1;
    int empty = 0, too_big = 0;
    for (int k = 0; k < e.ndim; k++) {
        const uint8_t *b = c + 4 + 4 * k;
        e.shape[k] = (int64_t)((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 |
                               b[3]);
        empty |= e.shape[k] == 0;
        if (!too_big) numel *= (uint64_t)e.shape[k];
        too_big |= numel > limit;
    }
    if (empty) numel = 0;
    else if (too_big) return e;
    size_t head = 4 + 4 * (size_t)e.ndim;
    if (numel * e.es != (unsigned __int128)(n - head)) return e;
    e.numel = (size_t)numel;
    e.data = c + head;
    e.valid = 1;
    return e;
}

static int64_t be(const uint8_t *b, size_t es) {
    uint64_t v = 0;
    for (size_t k = 0; k < es; k++)
        v = v << 8 | b[k];
    return (int64_t)v;
}

/* t must be what e describes, value for value. */
static void check_against(cn_tensor *t, const idx_expect *e) {
    if (cn_dtype_of(t) != e->dtype || cn_ndim(t) != e->ndim)
        FUZZ_FAIL("loaded %s with %d dims; the file says %s with %d", cn_dtype_name(cn_dtype_of(t)),
                  cn_ndim(t), cn_dtype_name(e->dtype), e->ndim);
    for (int k = 0; k < e->ndim; k++)
        if (cn_shape(t)[k] != e->shape[k]) FUZZ_FAIL("dim %d differs from the file's", k);
    size_t os = cn_dtype_size(e->dtype), nb = e->numel * os;
    unsigned char *got = malloc(nb ? nb : 1), *want = malloc(nb ? nb : 1);
    if (!got || !want) FUZZ_FAIL("out of memory in the harness");
    if (cn_read(t, got, nb) != CN_OK) FUZZ_FAIL("cn_read of a loaded tensor: %s", cn_last_error());
    for (size_t i = 0; i < e->numel; i++) {
        const uint8_t *b = e->data + i * e->es;
        uint64_t bits = (uint64_t)be(b, e->es);
        if (e->dtype == CN_U8) {
            want[i] = b[0];
        } else if (e->dtype == CN_I32) {
            int32_t v = e->es == 1 ? (int8_t)b[0] : e->es == 2 ? (int16_t)(uint16_t)bits
                                                               : (int32_t)(uint32_t)bits;
            memcpy(want + 4 * i, &v, 4);
        } else if (e->dtype == CN_F32) {
            uint32_t v = (uint32_t)bits;
            memcpy(want + 4 * i, &v, 4);
        } else {
            memcpy(want + 8 * i, &bits, 8);
        }
    }
    if (memcmp(got, want, nb) != 0) FUZZ_FAIL("the loaded values differ from the file's");
    free(got);
    free(want);
}

/* ---- gzip ---------------------------------------------------------------------------------- */

/* C gzip-compressed, in a new buffer. */
static uint8_t *gzip_of(const uint8_t *c, size_t n, size_t *out_n) {
    z_stream z = {0};
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        FUZZ_FAIL("deflateInit2");
    size_t cap = deflateBound(&z, (uLong)n) + 32;
    uint8_t *out = malloc(cap);
    if (!out) FUZZ_FAIL("out of memory in the harness");
    z.next_in = (Bytef *)c;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END) FUZZ_FAIL("deflate");
    *out_n = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

/* ---- the harness --------------------------------------------------------------------------- */

static void load_one(const uint8_t *c, size_t n, int mode, unsigned param) {
    const char *path = fuzz_scratch_path("data.idx");
    int container = mode & 3;
    const idx_expect e = expect_of(c, n);
    int known = container == 1 || (container == 0 && !(n >= 2 && c[0] == 0x1f && c[1] == 0x8b));
    if (container == 0) {
        fuzz_write_file(path, c, n);
    } else {
        size_t gn;
        uint8_t *gz = gzip_of(c, n, &gn);
        if (container == 2) gz[param % gn] ^= (uint8_t)(1u << (param >> 13));
        if (container == 3) gn = param % gn;
        fuzz_write_file(path, gz, gn);
        free(gz);
    }
    if (mode & 8) cn_alloc_fail_after((param & 0xff) + 1);
    cn_clear_error();
    cn_tensor *t = (cn_tensor *)&t;
    cn_status s = cn_idx_load(path, cn_cpu(), &t);
    int injected = (mode & 8) != 0;
    cn_alloc_fail_after(0);
    if (s != CN_OK) {
        FUZZ_CHECK_FAILED("cn_idx_load");
        if (t) FUZZ_FAIL("a failed cn_idx_load left *out set");
        if (known && e.valid && !(injected && s == CN_ERR_OUT_OF_MEMORY))
            FUZZ_FAIL("cn_idx_load refused a well-formed file: %s", cn_last_error());
        return;
    }
    if (!t) FUZZ_FAIL("cn_idx_load returned CN_OK and no tensor");
    if (known && !e.valid) FUZZ_FAIL("cn_idx_load accepted a malformed file");
    if (known) check_against(t, &e);
    cn_release(t);
}

static void load_fashion_mnist(const uint8_t *c, size_t n, int mode, unsigned param) {
    const char *dir = fuzz_scratch_path("fashion-mnist");
    char images[300], labels[300];
    mkdir(dir, 0700);
    snprintf(images, sizeof images, "%s/train-images-idx3-ubyte", dir);
    snprintf(labels, sizeof labels, "%s/train-labels-idx1-ubyte", dir);
    size_t cut = param % (n + 1);
    fuzz_write_file(images, c, cut);
    fuzz_write_file(labels, c + cut, n - cut);
    if (mode & 8) cn_alloc_fail_after((param & 0xff) + 1);
    cn_clear_error();
    cn_tensor *x = (cn_tensor *)&x, *y = (cn_tensor *)&y;
    cn_status s = cn_fashion_mnist_load(dir, cn_cpu(), &x, &y, NULL, NULL);
    cn_alloc_fail_after(0);
    if (s != CN_OK) {
        FUZZ_CHECK_FAILED("cn_fashion_mnist_load");
        if (x || y) FUZZ_FAIL("a failed cn_fashion_mnist_load left an output set");
        return;
    }
    if (!x || !y || cn_ndim(x) != 2 || cn_shape(x)[1] != 784 || cn_dtype_of(x) != CN_F32 ||
        cn_ndim(y) != 1 || cn_dtype_of(y) != CN_I64 || cn_shape(y)[0] != cn_shape(x)[0])
        FUZZ_FAIL("cn_fashion_mnist_load gave tensors of the wrong shapes");
    cn_release(x);
    cn_release(y);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    int mode = data[0];
    unsigned param = (unsigned)data[1] << 8 | data[2];
    fuzz_live before = fuzz_live_now();
    if (mode & 4)
        load_fashion_mnist(data + 3, size - 3, mode, param);
    else
        load_one(data + 3, size - 3, mode, param);
    fuzz_check_live(before);
    return 0;
}
