/* IDX files and batches: files whose bytes the test writes by hand (plain, and gzip through
 * zlib's gzwrite) read back in every type; truncated, corrupt and mis-sized files rejected with
 * CN_ERR_IO naming the file and the offset; Fashion-MNIST loaded from a small copy made here and,
 * when installed, from the real data set; and the batch iterator's coverage, reproducibility and
 * edge batches, its order checked against the algorithm that io.h specifies. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, rmdir */

#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/philox.h"
#include "harness.h"

static char dir[64];

static const char *tmp_path(char *buf, size_t size, const char *name) {
    snprintf(buf, size, "%s/%s", dir, name);
    return buf;
}

/* Writes bytes to path, gzip-compressed through zlib when gz is set. */
static int write_file(const char *path, const void *data, size_t n, int gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb");
        if (!f) return -1;
        int w = n ? gzwrite(f, data, (unsigned)n) : 0;
        return gzclose(f) == Z_OK && (size_t)w == n ? 0 : -1;
    }
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* cn_idx_load of path fails with CN_ERR_IO, *out NULL, and a message naming the file and holding
 * needle. */
static void check_rejected(const char *path, const char *needle) {
    cn_tensor *t = (cn_tensor *)&t;
    cn_clear_error();
    CHECK(cn_idx_load(path, cn_cpu(), &t) == CN_ERR_IO);
    CHECK(t == NULL);
    const char *msg = cn_last_error();
    if (!strstr(msg, "idx_load: ") || !strstr(msg, path) || !strstr(msg, needle)) {
        fprintf(stderr, "message \"%s\" lacks the path or \"%s\"\n", msg, needle);
        th_checks_failed++;
    }
    cn_clear_error();
}

/* ---- reading IDX ---------------------------------------------------------------------------- */

/* u8 [2, 3] = 0, 1, 2, 250, 254, 255: magic 00 00 08 02, dims 2 and 3 big-endian, the bytes. */
static const unsigned char u8_file[] = {0x00, 0x00, 0x08, 0x02, 0, 0, 0, 2, 0, 0, 0, 3,
                                        0,    1,    2,    250,  254, 255};

static void test_reads_u8_plain_and_gzip(void) {
    const int64_t shape[2] = {2, 3};
    const double want[6] = {0, 1, 2, 250, 254, 255};
    char path[128];
    for (int gz = 0; gz < 2; gz++) {
        tmp_path(path, sizeof path, gz ? "u8.idx.gz" : "u8.idx");
        CHECK(write_file(path, u8_file, sizeof u8_file, gz) == 0);
        cn_tensor *t = NULL;
        CHECK(cn_idx_load(path, cn_cpu(), &t) == CN_OK);
        CHECK(t && cn_dtype_of(t) == CN_U8);
        th_check_shape(path, t, shape, 2);
        th_check_values(path, t, want, 6, 0);
        cn_release(t);
        remove(path);
    }
}

static void test_reads_every_type_big_endian(void) {
    static const struct {
        unsigned char type;
        unsigned char data[16];
        size_t n_data;
        cn_dtype dtype;
        double want[2];
    } cases[] = {
        {0x09, {0xFF, 0x80}, 2, CN_I32, {-1, -128}},                       /* i8 */
        {0x0B, {0x01, 0x02, 0xFF, 0xFE}, 4, CN_I32, {258, -2}},            /* i16 */
        {0x0C, {0x01, 0x02, 0x03, 0x04, 0xFF, 0xFF, 0xFF, 0xFB}, 8, CN_I32, {16909060, -5}},
        {0x0D, {0x3F, 0xC0, 0, 0, 0xC1, 0x20, 0, 0}, 8, CN_F32, {1.5, -10}}, /* f32 */
        {0x0E, {0xC0, 0x04, 0, 0, 0, 0, 0, 0, 0x3F, 0xF0, 0, 0, 0, 0, 0, 0}, 16, CN_F64,
         {-2.5, 1}},                                                       /* f64 */
    };
    char path[128];
    tmp_path(path, sizeof path, "typed.idx.gz");
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        unsigned char file[32] = {0, 0, cases[c].type, 1, 0, 0, 0, 2};
        memcpy(file + 8, cases[c].data, cases[c].n_data);
        CHECK(write_file(path, file, 8 + cases[c].n_data, 1) == 0);
        cn_tensor *t = NULL;
        CHECK(cn_idx_load(path, cn_cpu(), &t) == CN_OK);
        CHECK(t && cn_dtype_of(t) == cases[c].dtype);
        th_check_values("typed", t, cases[c].want, 2, 0);
        cn_release(t);
    }
    remove(path);
}

static void test_truncated_files_name_the_offset(void) {
    char path[128];
    for (int gz = 0; gz < 2; gz++) {
        tmp_path(path, sizeof path, gz ? "cut.idx.gz" : "cut.idx");
        for (size_t len = 0; len < sizeof u8_file; len++) {
            CHECK(write_file(path, u8_file, len, gz) == 0);
            char needle[96];
            const char *what = len < 4    ? "the 4-byte magic"
                               : len < 12 ? "2 big-endian u32 dims (8 bytes from byte 4)"
                                          : "6 bytes of data from byte 12 (dims [2, 3] of unsigned "
                                            "byte)";
            snprintf(needle, sizeof needle, "truncated at byte %zu: expected %s", len, what);
            check_rejected(path, needle);
        }
        remove(path);
    }
    /* a gzip stream cut short (not only its content): zlib reports the end, we name the byte */
    tmp_path(path, sizeof path, "cutgz.idx.gz");
    unsigned char big[12 + 4000] = {0, 0, 8, 2, 0, 0, 0, 40, 0, 0, 0, 100};
    for (int k = 0; k < 4000; k++)
        big[12 + k] = (unsigned char)(k * 7919 % 251);
    CHECK(write_file(path, big, sizeof big, 1) == 0);
    size_t n = 0;
    unsigned char *gzbytes = th_read_file(path, &n);
    CHECK(gzbytes && n > 100);
    CHECK(write_file(path, gzbytes, n / 2, 0) == 0);
    check_rejected(path, "truncated at byte");
    free(gzbytes);
    remove(path);
}

static void test_bad_magic_type_and_dims_are_rejected(void) {
    char path[128];
    tmp_path(path, sizeof path, "bad.idx");
    unsigned char f[sizeof u8_file];
    memcpy(f, u8_file, sizeof f);
    f[0] = 0x01;
    CHECK(write_file(path, f, sizeof f, 0) == 0);
    check_rejected(path, "bytes 0-1 are 0x01 0x00 where an IDX file has 0x00 0x00 (bad magic)");
    memcpy(f, u8_file, sizeof f);
    f[2] = 0x0A;
    CHECK(write_file(path, f, sizeof f, 0) == 0);
    check_rejected(path, "byte 2 is the type 0x0A");
    f[2] = 0x08;
    f[3] = 0;
    CHECK(write_file(path, f, sizeof f, 0) == 0);
    check_rejected(path, "byte 3 gives 0 dims");
    f[3] = 9;
    CHECK(write_file(path, f, sizeof f, 0) == 0);
    check_rejected(path, "byte 3 gives 9 dims");
    /* wrong dims: fewer elements than the data holds, then more */
    memcpy(f, u8_file, sizeof f);
    f[11] = 2; /* [2, 2]: 4 bytes, but 6 follow */
    CHECK(write_file(path, f, sizeof f, 0) == 0);
    check_rejected(path, "the data of dims [2, 2] end at byte 16 but the file goes on");
    f[11] = 4; /* [2, 4]: 8 bytes, but 6 follow */
    CHECK(write_file(path, f, sizeof f, 1) == 0);
    check_rejected(path, "truncated at byte 18: expected 8 bytes of data from byte 12");
    /* dims whose product would be astronomic fail as truncated, not as an allocation */
    const unsigned char huge[] = {0, 0, 0x0E, 2, 0, 0, 0xFF, 0xFF, 0, 0, 0xFF, 0xFF, 1}; /* 34 GB */
    CHECK(write_file(path, huge, sizeof huge, 0) == 0);
    check_rejected(path, "truncated at byte 13");
    const unsigned char over[] = {0, 0, 0x0E, 3, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                  0xFF, 0xFF, 0xFF, 0xFF};
    CHECK(write_file(path, over, sizeof over, 0) == 0);
    check_rejected(path, "more elements than 64 bits count");
    remove(path);
}

/* A 0 dim makes an empty tensor however big the other dims are (found by fuzz/fuzz_idx.c: the
 * dims' product was checked for overflow before the 0 was seen). */
static void test_zero_dim_beside_huge_dims_loads_empty(void) {
    char path[128];
    tmp_path(path, sizeof path, "empty.idx");
    const unsigned char f[] = {0, 0, 0x0D, 4, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0x80, 0, 0, 0,
                               0, 0, 0, 0};
    CHECK(write_file(path, f, sizeof f, 0) == 0);
    cn_tensor *t = NULL;
    cn_clear_error();
    cn_status s = cn_idx_load(path, cn_cpu(), &t);
    CHECK(s == CN_OK);
    const int64_t shape[4] = {2147483648LL, 2147483648LL, 2147483648LL, 0};
    if (t) th_check_shape(path, t, shape, 4);
    CHECK(t && cn_numel(t) == 0);
    cn_release(t);
    cn_clear_error();
    remove(path);
}

static void test_corrupt_gzip_and_missing_files_are_rejected(void) {
    char path[128];
    tmp_path(path, sizeof path, "crc.idx.gz");
    CHECK(write_file(path, u8_file, sizeof u8_file, 1) == 0);
    size_t n = 0;
    unsigned char *gz = th_read_file(path, &n);
    CHECK(gz && n > 20);
    gz[n - 8] ^= 0x55; /* the CRC-32 of the trailer */
    CHECK(write_file(path, gz, n, 0) == 0);
    check_rejected(path, "gzip stream is corrupt");
    gz[n - 8] ^= 0x55;
    gz[12] ^= 0xFF; /* inside the deflate data */
    CHECK(write_file(path, gz, n, 0) == 0);
    cn_tensor *t = NULL;
    cn_clear_error();
    CHECK(cn_idx_load(path, cn_cpu(), &t) == CN_ERR_IO && t == NULL);
    CHECK(strstr(cn_last_error(), path) != NULL);
    cn_clear_error();
    free(gz);
    remove(path);

    tmp_path(path, sizeof path, "absent.idx");
    check_rejected(path, "cannot open it: No such file or directory");
    cn_clear_error();
    CHECK(cn_idx_load(NULL, cn_cpu(), &t) == CN_ERR_NULL_ARG);
    cn_clear_error();
}

/* ---- Fashion-MNIST -------------------------------------------------------------------------- */

/* An IDX u8 file of n images (28 x 28, pixel k of image i = (i + k) % 256) or n labels. */
static int write_fm(const char *path, int64_t n, int images, const unsigned char *labels, int gz) {
    size_t header = images ? 16 : 8, size = header + (size_t)n * (images ? 784 : 1);
    unsigned char *b = calloc(size, 1);
    b[2] = 0x08;
    b[3] = images ? 3 : 1;
    b[7] = (unsigned char)n;
    if (images) b[11] = b[15] = 28;
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < (images ? 784 : 1); k++)
            b[header + (size_t)(i * (images ? 784 : 1) + k)] =
                images ? (unsigned char)((i + k) % 256) : labels[i];
    int r = write_file(path, b, size, gz);
    free(b);
    return r;
}

static void test_fashion_mnist_from_a_small_copy(void) {
    char sub[96], path[160];
    snprintf(sub, sizeof sub, "%s/fm", dir);
    CHECK(mkdir(sub, 0700) == 0);
    const unsigned char train_labels[3] = {9, 0, 4}, test_labels[2] = {1, 7};
    /* train gzip-compressed, test plain: both names are accepted */
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", sub);
    CHECK(write_fm(path, 3, 1, NULL, 1) == 0);
    snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte.gz", sub);
    CHECK(write_fm(path, 3, 0, train_labels, 1) == 0);
    snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte", sub);
    CHECK(write_fm(path, 2, 1, NULL, 0) == 0);
    snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte", sub);
    CHECK(write_fm(path, 2, 0, test_labels, 0) == 0);

    cn_tensor *tx = NULL, *ty = NULL, *vx = NULL, *vy = NULL;
    CHECK(cn_fashion_mnist_load(sub, cn_cpu(), &tx, &ty, &vx, &vy) == CN_OK);
    const int64_t sx[2] = {3, 784}, sy[1] = {3}, svx[2] = {2, 784};
    th_check_shape("train_x", tx, sx, 2);
    th_check_shape("train_y", ty, sy, 1);
    th_check_shape("test_x", vx, svx, 2);
    CHECK(tx && cn_dtype_of(tx) == CN_F32 && ty && cn_dtype_of(ty) == CN_I64);
    const double wy[3] = {9, 0, 4}, wvy[2] = {1, 7};
    th_check_values("train_y", ty, wy, 3, 0);
    th_check_values("test_y", vy, wvy, 2, 0);
    double *px = malloc(sizeof(double) * 3 * 784);
    CHECK(th_read(tx, px) == 3 * 784);
    int exact = 1;
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 784; k++)
            exact &= px[i * 784 + k] == (double)((float)((i + k) % 256) / 255.0f);
    CHECK(exact);
    free(px);
    cn_release(tx), cn_release(ty), cn_release(vx), cn_release(vy);

    /* only what is asked for is loaded */
    CHECK(cn_fashion_mnist_load(sub, cn_cpu(), NULL, NULL, NULL, &vy) == CN_OK);
    th_check_values("test_y alone", vy, wvy, 2, 0);
    cn_release(vy);

    /* a label out of 0..9, and counts that disagree: everything is released */
    const unsigned char bad_labels[2] = {1, 12};
    snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte", sub);
    CHECK(write_fm(path, 2, 0, bad_labels, 0) == 0);
    cn_clear_error();
    CHECK(cn_fashion_mnist_load(sub, cn_cpu(), &tx, &ty, &vx, &vy) == CN_ERR_IO);
    CHECK(tx == NULL && ty == NULL && vx == NULL && vy == NULL);
    CHECK(strstr(cn_last_error(), "byte 9 is the label 12") != NULL);
    CHECK(write_fm(path, 3, 0, train_labels, 0) == 0);
    cn_clear_error();
    CHECK(cn_fashion_mnist_load(sub, cn_cpu(), NULL, NULL, &vx, &vy) == CN_ERR_IO);
    CHECK(strstr(cn_last_error(), "holds 3 samples but") != NULL);
    CHECK(vx == NULL && vy == NULL);
    /* images of the wrong size */
    snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte", sub);
    CHECK(write_file(path, u8_file, sizeof u8_file, 0) == 0);
    cn_clear_error();
    CHECK(cn_fashion_mnist_load(sub, cn_cpu(), NULL, NULL, &vx, NULL) == CN_ERR_IO);
    CHECK(strstr(cn_last_error(), "holds [2, 3] of unsigned byte where Fashion-MNIST images are "
                                  "[N, 28, 28]") != NULL);
    cn_clear_error();

    const char *names[4] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                            "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    for (int k = 0; k < 4; k++) {
        snprintf(path, sizeof path, "%s/%s", sub, names[k]);
        remove(path);
    }
    rmdir(sub);
}

static void test_fashion_mnist_missing_says_how_to_install(void) {
    char missing[96];
    snprintf(missing, sizeof missing, "%s/no-such-dir", dir);
    cn_tensor *tx = NULL, *ty = NULL;
    cn_clear_error();
    CHECK(cn_fashion_mnist_load(missing, cn_cpu(), &tx, &ty, NULL, NULL) == CN_ERR_IO);
    CHECK(tx == NULL && ty == NULL);
    const char *msg = cn_last_error();
    CHECK(strstr(msg, "fashion_mnist_load: ") == msg);
    CHECK(strstr(msg, "no-such-dir/train-images-idx3-ubyte") != NULL);
    CHECK(strstr(msg, "apt-get install dataset-fashion-mnist") != NULL);
    CHECK(strstr(msg, "scripts/demo.sh") != NULL);
    cn_clear_error();
}

/* The real data set, when installed (Debian: dataset-fashion-mnist); skipped otherwise. The
 * 60000 training images are read as u8 through cn_idx_load (their f32 copy would be 188 MB, too
 * slow under the sanitizers); the loader's conversion is checked on the 10000 test images. */
static void test_fashion_mnist_installed(void) {
    struct stat st;
    if (stat(CN_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", &st) != 0) {
        printf("skip test_fashion_mnist_installed: " CN_FASHION_MNIST_DIR " is absent "
               "(apt-get install dataset-fashion-mnist)\n");
        return;
    }
    cn_tensor *train_u8 = NULL, *ty = NULL, *vx = NULL, *vy = NULL;
    CHECK(cn_idx_load(CN_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", cn_cpu(), &train_u8) ==
          CN_OK);
    CHECK(cn_fashion_mnist_load(NULL, cn_cpu(), NULL, &ty, &vx, &vy) == CN_OK);
    const int64_t s_u8[3] = {60000, 28, 28}, sy[1] = {60000}, svx[2] = {10000, 784};
    const int64_t svy[1] = {10000};
    th_check_shape("train images", train_u8, s_u8, 3);
    CHECK(train_u8 && cn_dtype_of(train_u8) == CN_U8);
    th_check_shape("train_y", ty, sy, 1);
    th_check_shape("test_x", vx, svx, 2);
    th_check_shape("test_y", vy, svy, 1);
    double lo = -1, hi = -1;
    cn_tensor *r;
    th_read(r = cn_min(vx), &lo), cn_release(r);
    th_read(r = cn_max(vx), &hi), cn_release(r);
    CHECK(lo == 0 && hi == 1); /* black and white pixels both occur, scaled to [0, 1] */
    cn_tensor *ys[2] = {ty, vy};
    const double per_class[2] = {6000, 1000};
    for (int k = 0; k < 2; k++) { /* labels 0..9, and the classes are balanced */
        cn_tensor *hot = cn_one_hot(ys[k], 10, CN_I64), *counts = cn_sum_dim(hot, 0, 0);
        double c[10] = {0};
        CHECK(th_read(counts, c) == 10);
        for (int i = 0; i < 10; i++)
            CHECK(c[i] == per_class[k]);
        cn_release(hot);
        cn_release(counts);
    }
    cn_release(train_u8), cn_release(ty), cn_release(vx), cn_release(vy);
}

/* ---- batches -------------------------------------------------------------------------------- */

/* images [n, 2] with row i = (i, -i); labels [n] = i. */
static void make_data(int64_t n, cn_tensor **images, cn_tensor **labels) {
    double *x = malloc(sizeof(double) * (size_t)(2 * n + 1));
    for (int64_t i = 0; i < n; i++) {
        x[2 * i] = (double)i;
        x[2 * i + 1] = -(double)i;
    }
    const int64_t sx[2] = {n, 2};
    *images = th_tensor(x, sx, 2, CN_F32);
    *labels = cn_arange(0, (double)n, 1, CN_I64, cn_cpu());
    free(x);
}

/* Runs one epoch, checks every batch's images match its labels, and writes the sample order into
 * order (returns how many samples, and the number of batches in *batches). */
static int64_t run_epoch(cn_batches *b, int64_t *order, int64_t cap, int64_t *batches,
                         int64_t *last_size) {
    int64_t seen = 0;
    *batches = 0;
    cn_tensor *x, *y;
    while (cn_batches_next(b, &x, &y) == 1) {
        int64_t k = cn_shape(y)[0];
        double *xv = malloc(sizeof(double) * (size_t)(2 * k));
        double *yv = malloc(sizeof(double) * (size_t)k);
        CHECK(cn_ndim(x) == 2 && cn_shape(x)[0] == k && cn_shape(x)[1] == 2);
        th_read(x, xv);
        th_read(y, yv);
        for (int64_t j = 0; j < k; j++) {
            CHECK(xv[2 * j] == yv[j] && xv[2 * j + 1] == -yv[j]);
            if (seen < cap) order[seen] = (int64_t)yv[j];
            seen++;
        }
        free(xv);
        free(yv);
        *last_size = k;
        (*batches)++;
        cn_release(x);
        cn_release(y);
    }
    return seen;
}

/* The order io.h specifies, computed here from its text. */
static void reference_order(int64_t *order, int64_t n, uint64_t seed, uint64_t epoch) {
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        uint32_t ctr[4] = {(uint32_t)i, (uint32_t)((uint64_t)i >> 32), (uint32_t)epoch,
                           (uint32_t)(epoch >> 32)};
        uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, w[4];
        cn_philox4x32_10(ctr, key, w);
        uint64_t j = ((uint64_t)w[0] | (uint64_t)w[1] << 32) % (uint64_t)(i + 1);
        int64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

static void test_batches_cover_every_sample_once_per_epoch(void) {
    cn_tensor *images, *labels;
    make_data(10, &images, &labels);
    cn_batches *b = cn_batches_new(images, labels, 3, 1, 42, 0);
    CHECK(b && cn_batches_count(b) == 4);
    int64_t order[3][10], batches = 0, last = 0;
    for (int e = 0; e < 3 && b; e++) {
        cn_batches_reset(b, (uint64_t)e);
        CHECK(run_epoch(b, order[e], 10, &batches, &last) == 10);
        CHECK(batches == 4 && last == 1); /* 3 + 3 + 3 + the last partial batch of 1 */
        int seen[10] = {0};
        for (int i = 0; i < 10; i++)
            seen[order[e][i]]++;
        for (int i = 0; i < 10; i++)
            CHECK(seen[i] == 1);
        int64_t want[10];
        reference_order(want, 10, 42, (uint64_t)e);
        CHECK(memcmp(order[e], want, sizeof want) == 0);
        /* after the epoch's end, next keeps returning 0 */
        cn_tensor *x = images, *y = labels;
        CHECK(cn_batches_next(b, &x, &y) == 0 && x == NULL && y == NULL);
    }
    CHECK(memcmp(order[0], order[1], sizeof order[0]) != 0); /* each epoch reshuffles */
    CHECK(memcmp(order[1], order[2], sizeof order[0]) != 0);
    cn_batches_free(b);
    cn_release(images);
    cn_release(labels);
}

static void test_batches_are_reproducible_from_the_seed(void) {
    cn_tensor *images, *labels;
    make_data(50, &images, &labels);
    cn_batches *a = cn_batches_new(images, labels, 7, 1, 1234, 0);
    cn_batches *b = cn_batches_new(images, labels, 7, 1, 1234, 0);
    cn_batches *c = cn_batches_new(images, labels, 7, 1, 1235, 0);
    int64_t oa[50], ob[50], oc[50], n, last;
    run_epoch(a, oa, 50, &n, &last);
    run_epoch(b, ob, 50, &n, &last);
    run_epoch(c, oc, 50, &n, &last);
    CHECK(memcmp(oa, ob, sizeof oa) == 0);
    CHECK(memcmp(oa, oc, sizeof oa) != 0);
    /* reset to an earlier epoch gives that epoch's order again */
    cn_batches_reset(a, 5);
    run_epoch(a, oa, 50, &n, &last);
    cn_batches_reset(b, 4);
    run_epoch(b, ob, 50, &n, &last);
    cn_batches_reset(b, 5);
    run_epoch(b, ob, 50, &n, &last);
    CHECK(memcmp(oa, ob, sizeof oa) == 0);
    cn_batches_free(a);
    cn_batches_free(b);
    cn_batches_free(c);
    cn_release(images);
    cn_release(labels);
}

static void test_drop_last_and_unshuffled_order(void) {
    cn_tensor *images, *labels;
    make_data(10, &images, &labels);
    cn_batches *b = cn_batches_new(images, labels, 3, 1, 7, 1);
    CHECK(b && cn_batches_count(b) == 3);
    int64_t order[10], batches, last;
    CHECK(run_epoch(b, order, 10, &batches, &last) == 9);
    CHECK(batches == 3 && last == 3);
    int seen[10] = {0};
    for (int i = 0; i < 9; i++)
        seen[order[i]]++;
    for (int i = 0; i < 10; i++)
        CHECK(seen[i] <= 1);
    cn_batches_free(b);

    /* without shuffling: 0..n-1 every epoch, and a batch larger than the data set */
    b = cn_batches_new(images, labels, 4, 0, 7, 0);
    for (int e = 0; e < 2; e++) {
        cn_batches_reset(b, (uint64_t)e);
        CHECK(run_epoch(b, order, 10, &batches, &last) == 10);
        CHECK(batches == 3 && last == 2);
        for (int i = 0; i < 10; i++)
            CHECK(order[i] == i);
    }
    cn_batches_free(b);
    b = cn_batches_new(images, labels, 64, 1, 7, 1);
    CHECK(cn_batches_count(b) == 0 && run_epoch(b, order, 10, &batches, &last) == 0);
    cn_batches_free(b);
    b = cn_batches_new(images, labels, 64, 1, 7, 0);
    CHECK(cn_batches_count(b) == 1 && run_epoch(b, order, 10, &batches, &last) == 10);
    cn_batches_free(b);
    cn_release(images);
    cn_release(labels);
}

/* cn_batches_new_sharded: 3 ranks over 11 samples each take 3 (11 / 3; the last 2 positions of
 * each epoch's order are left out), rank r the positions r, r + 3, r + 6 of the order io.h
 * specifies (computed here), and batch i of the 3 ranks together is batch i of one process
 * with 3 times the batch. */
static void test_sharded_batches_deal_out_the_epoch(void) {
    cn_tensor *images, *labels;
    make_data(11, &images, &labels);
    const int world = 3;
    int64_t want[11], got[3][11], batches, last;
    for (uint64_t e = 0; e < 2; e++) {
        reference_order(want, 11, 99, e);
        for (int r = 0; r < world; r++) {
            cn_batches *b = cn_batches_new_sharded(images, labels, 2, 1, 99, 0, r, world);
            CHECK(b && cn_batches_count(b) == 2);
            cn_batches_reset(b, e);
            CHECK(run_epoch(b, got[r], 11, &batches, &last) == 3);
            CHECK(batches == 2 && last == 1);
            for (int i = 0; i < 3; i++) CHECK(got[r][i] == want[i * world + r]);
            cn_batches_free(b);
        }
        /* batch 0 of the ranks = the first 6 of one process's order with batch 6 */
        cn_batches *one = cn_batches_new(images, labels, 6, 1, 99, 0);
        int64_t whole[11];
        cn_batches_reset(one, e);
        run_epoch(one, whole, 11, &batches, &last);
        int seen[11] = {0};
        for (int r = 0; r < world; r++)
            for (int i = 0; i < 2; i++) seen[got[r][i]]++;
        for (int i = 0; i < 6; i++) CHECK(seen[whole[i]] == 1);
        cn_batches_free(one);
    }
    /* rank 0 of 1 is cn_batches_new; a rank outside the world is refused */
    cn_clear_error();
    CHECK(cn_batches_new_sharded(images, labels, 2, 1, 0, 0, 3, 3) == NULL);
    CHECK(cn_last_status() == CN_ERR_INVALID_ARG && strstr(cn_last_error(), "0 <= rank < world"));
    cn_clear_error();
    CHECK(cn_batches_new_sharded(images, labels, 2, 1, 0, 0, 0, 0) == NULL);
    CHECK(cn_last_status() == CN_ERR_INVALID_ARG);
    cn_clear_error();
    cn_release(images);
    cn_release(labels);
}

static void test_batches_without_labels_in_scopes_and_errors(void) {
    cn_tensor *images, *labels;
    make_data(5, &images, &labels);
    cn_scope_begin();
    cn_batches *b = cn_batches_new(images, NULL, 2, 0, 0, 0);
    cn_tensor *x = NULL, *y = images;
    CHECK(cn_batches_next(b, &x, &y) == 1 && x && y == NULL);
    CHECK(cn_batches_next(b, &x, NULL) == 1); /* batches belong to the scope */
    cn_scope_end();
    /* the iterator keeps its own references */
    cn_release(images);
    CHECK(cn_batches_next(b, &x, NULL) == 1 && cn_shape(x)[0] == 1);
    const double row4[2] = {4, -4};
    th_check_values("last row", x, row4, 2, 0);
    cn_release(x);
    cn_batches_free(b);
    cn_batches_free(NULL);
    CHECK(cn_batches_count(NULL) == 0);
    cn_release(labels);
    cn_clear_error();
    make_data(5, &images, &labels);

    cn_clear_error();
    CHECK(cn_batches_new(images, labels, 0, 1, 0, 0) == NULL);
    CHECK(cn_last_status() == CN_ERR_INVALID_ARG);
    cn_tensor *short_labels = cn_arange(0, 4, 1, CN_I64, cn_cpu());
    cn_clear_error();
    CHECK(cn_batches_new(images, short_labels, 2, 1, 0, 0) == NULL);
    CHECK(cn_last_status() == CN_ERR_SHAPE && strstr(cn_last_error(), "differ in dim 0"));
    cn_tensor *scalar = cn_sum(labels);
    cn_clear_error();
    CHECK(cn_batches_new(scalar, NULL, 2, 1, 0, 0) == NULL);
    CHECK(cn_last_status() == CN_ERR_SHAPE);
    cn_clear_error();
    CHECK(cn_batches_new(NULL, labels, 2, 1, 0, 0) == NULL);
    CHECK(cn_last_status() == CN_ERR_NULL_ARG);
    cn_clear_error();
    cn_release(short_labels);
    cn_release(scalar);
    cn_release(images);
    cn_release(labels);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/cinder-idx-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_reads_u8_plain_and_gzip);
    RUN(test_reads_every_type_big_endian);
    RUN(test_truncated_files_name_the_offset);
    RUN(test_bad_magic_type_and_dims_are_rejected);
    RUN(test_zero_dim_beside_huge_dims_loads_empty);
    RUN(test_corrupt_gzip_and_missing_files_are_rejected);
    RUN(test_fashion_mnist_from_a_small_copy);
    RUN(test_fashion_mnist_missing_says_how_to_install);
    RUN(test_fashion_mnist_installed);
    RUN(test_batches_cover_every_sample_once_per_epoch);
    RUN(test_batches_are_reproducible_from_the_seed);
    RUN(test_drop_last_and_unshuffled_order);
    RUN(test_batches_without_labels_in_scopes_and_errors);
    RUN(test_sharded_batches_deal_out_the_epoch);
    rmdir(dir);
    return th_finish();
}
