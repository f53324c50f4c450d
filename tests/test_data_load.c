/* cn_fashion_mnist_load_with: images limited and normalised as they are decompressed. The values
 * are checked bit for bit against the ops they stand for (the [0, 1] pixels, computed here from
 * the bytes written, through cn_slice, cn_add_scalar and cn_mul_scalar), on both ways a file is
 * read (streamed into the tensor when its size shows the data are all there: a plain file, a
 * single-member gzip file; read whole first otherwise: a gzip file of two members); bad options,
 * cut and corrupt files, and every allocation failing in turn leave every output NULL and nothing
 * live. With the data set installed, its test split is checked the same way. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, rmdir */

#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "harness.h"

#define PIXELS 784
#define MEAN   0.2860 /* Fashion-MNIST's, as `cinder train` normalises */
#define STD    0.3530

static char dir[64];

/* The byte of pixel k of image i in the files written here. */
static unsigned char pixel_of(int64_t i, int64_t k) { return (unsigned char)((7 * i + k) % 256); }

/* The content of an IDX file of n images (or n labels: i % 10). */
static unsigned char *fm_content(int64_t n, int images, size_t *size) {
    size_t header = images ? 16 : 8, per = images ? PIXELS : 1;
    *size = header + (size_t)n * per;
    unsigned char *b = calloc(*size, 1);
    b[2] = 0x08;
    b[3] = images ? 3 : 1;
    b[6] = (unsigned char)(n >> 8);
    b[7] = (unsigned char)n;
    if (images) b[11] = b[15] = 28;
    for (int64_t i = 0; i < n; i++)
        for (size_t k = 0; k < per; k++)
            b[header + (size_t)i * per + k] =
                images ? pixel_of(i, (int64_t)k) : (unsigned char)(i % 10);
    return b;
}

/* How a file is written: plain, one gzip member, two gzip members (header, then data), or as
 * given (bytes that are gzip already). */
enum { PLAIN, GZIP, GZIP2, GZIP_AS_IS /* bytes already compressed, written to name.gz */ };

static int write_bytes(const char *path, const unsigned char *b, size_t size, int how) {
    if (how == PLAIN || how == GZIP_AS_IS) {
        FILE *f = fopen(path, "wb");
        if (!f) return -1;
        size_t w = fwrite(b, 1, size, f);
        return fclose(f) == 0 && w == size ? 0 : -1;
    }
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t cut = how == GZIP2 ? 16 : size, parts[2][2] = {{0, cut}, {cut, size}};
    int ok = 1;
    for (int p = 0; p < (how == GZIP2 ? 2 : 1) && ok; p++) { /* each part its own member */
        size_t len = parts[p][1] - parts[p][0];
        uLongf cap = compressBound(len) + 32;
        unsigned char *z = malloc(cap);
        z_stream s = {0};
        ok = deflateInit2(&s, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;
        s.next_in = (unsigned char *)b + parts[p][0];
        s.avail_in = (uInt)len;
        s.next_out = z;
        s.avail_out = (uInt)cap;
        ok = ok && deflate(&s, Z_FINISH) == Z_STREAM_END;
        ok = ok && fwrite(z, 1, s.total_out, f) == s.total_out;
        deflateEnd(&s);
        free(z);
    }
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* Writes the four files into sub: n_train and n_test samples, images written `how`. */
static void write_set(const char *sub, int64_t n_train, int64_t n_test, int how) {
    const char *names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                            "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    const int64_t counts[4] = {n_train, n_train, n_test, n_test};
    for (int k = 0; k < 4; k++) {
        char path[160], other[160];
        int images = k % 2 == 0, file_how = images ? how : PLAIN;
        snprintf(path, sizeof path, "%s/%s%s", sub, names[k], file_how == PLAIN ? "" : ".gz");
        snprintf(other, sizeof other, "%s/%s%s", sub, names[k], file_how == PLAIN ? ".gz" : "");
        remove(other); /* the loader prefers name.gz: leave one of the two */
        size_t size;
        unsigned char *b = fm_content(counts[k], images, &size);
        CHECK(write_bytes(path, b, size, file_how) == 0);
        free(b);
    }
}

static void remove_set(const char *sub) {
    const char *names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                            "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    for (int k = 0; k < 4; k++) {
        char path[160];
        snprintf(path, sizeof path, "%s/%s", sub, names[k]);
        remove(path);
        snprintf(path, sizeof path, "%s/%s.gz", sub, names[k]);
        remove(path);
    }
    rmdir(sub);
}

/* The oracle: images [n, 784] of the bytes written, as cn_fashion_mnist_load documents them
 * ((float)p / 255), their first `keep` rows, normalised through the ops when norm is set. */
static cn_tensor *oracle_images(int64_t n, int64_t keep, int norm) {
    float *v = malloc(sizeof *v * (size_t)(n * PIXELS) + 1);
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < PIXELS; k++)
            v[i * PIXELS + k] = (float)pixel_of(i, k) / 255.0f;
    const int64_t shape[2] = {n, PIXELS};
    cn_tensor *all = cn_from_data(v, shape, 2, CN_F32, cn_cpu());
    free(v);
    cn_tensor *kept = cn_slice(all, 0, 0, keep, 1);
    cn_tensor *shifted = norm ? cn_add_scalar(kept, -MEAN) : cn_contiguous(kept);
    cn_tensor *out = norm ? cn_mul_scalar(shifted, 1.0 / STD) : cn_retain(shifted);
    cn_release(all), cn_release(kept), cn_release(shifted);
    return out;
}

/* Whether t holds exactly want's f32 bits. */
static int same_bits(cn_tensor *t, cn_tensor *want) {
    if (!t || !want || cn_numel(t) != cn_numel(want) || cn_dtype_of(t) != CN_F32) return 0;
    size_t n = (size_t)cn_numel(t) * sizeof(float);
    float *a = malloc(n + 1), *b = malloc(n + 1);
    int same = cn_read(t, a, n) == CN_OK && cn_read(want, b, n) == CN_OK && memcmp(a, b, n) == 0;
    free(a), free(b);
    return same;
}

static void check_labels(cn_tensor *y, int64_t keep) {
    CHECK(y && cn_dtype_of(y) == CN_I64 && cn_ndim(y) == 1 && cn_shape(y)[0] == keep);
    double *v = malloc(sizeof *v * (size_t)keep + 1);
    CHECK(th_read(y, v) == keep);
    for (int64_t i = 0; i < keep; i++)
        CHECK(v[i] == (double)(i % 10));
    free(v);
}

/* ---- values --------------------------------------------------------------------------------- */

static void test_limited_and_normalised_bit_for_bit_on_every_read_path(void) {
    const int hows[3] = {PLAIN, GZIP, GZIP2};
    for (int h = 0; h < 3; h++) {
        char sub[96];
        snprintf(sub, sizeof sub, "%s/set%d", dir, h);
        CHECK(mkdir(sub, 0700) == 0);
        write_set(sub, 9, 5, hows[h]);
        const cn_fashion_mnist_options opt = {
            .train_limit = 4, .test_limit = 50, .mean = MEAN, .std = STD};
        cn_tensor *tx = NULL, *ty = NULL, *vx = NULL, *vy = NULL;
        CHECK(cn_fashion_mnist_load_with(sub, cn_cpu(), &opt, &tx, &ty, &vx, &vy) == CN_OK);
        const int64_t stx[2] = {4, PIXELS}, svx[2] = {5, PIXELS}; /* a limit past N keeps all */
        th_check_shape("train_x", tx, stx, 2);
        th_check_shape("test_x", vx, svx, 2);
        cn_tensor *want_tx = oracle_images(9, 4, 1), *want_vx = oracle_images(5, 5, 1);
        CHECK(same_bits(tx, want_tx));
        CHECK(same_bits(vx, want_vx));
        check_labels(ty, 4);
        check_labels(vy, 5);
        cn_release(tx), cn_release(ty), cn_release(vx), cn_release(vy);
        cn_release(want_tx), cn_release(want_vx);

        /* no options: cn_fashion_mnist_load's [0, 1] pixels, every sample */
        CHECK(cn_fashion_mnist_load_with(sub, cn_cpu(), NULL, &tx, NULL, NULL, NULL) == CN_OK);
        cn_tensor *want = oracle_images(9, 9, 0);
        CHECK(same_bits(tx, want));
        cn_release(tx), cn_release(want);
        CHECK(cn_fashion_mnist_load(sub, cn_cpu(), NULL, NULL, &vx, NULL) == CN_OK);
        want = oracle_images(5, 5, 0);
        CHECK(same_bits(vx, want));
        cn_release(vx), cn_release(want);
        remove_set(sub);
    }
}

static void test_bad_options_are_rejected_with_every_output_null(void) {
    const cn_fashion_mnist_options bad[4] = {
        {.train_limit = -1}, {.test_limit = -5}, {.mean = 0.5, .std = -1}, {.mean = NAN, .std = 1}};
    const char *needles[4] = {"train_limit = -1", "test_limit = -5", "std = -1", "mean = nan"};
    for (int k = 0; k < 4; k++) {
        cn_tensor *tx = (cn_tensor *)&tx, *vy = (cn_tensor *)&vy;
        CHECK_STATUS_FAILS(cn_fashion_mnist_load_with(dir, cn_cpu(), &bad[k], &tx, NULL, NULL, &vy),
                           CN_ERR_INVALID_ARG, needles[k]);
        CHECK(tx == NULL && vy == NULL);
    }
}

/* ---- bad files ------------------------------------------------------------------------------ */

/* The train images of sub replaced by `content` written `how`; loading fails with CN_ERR_IO
 * holding needle, every output NULL, nothing live. */
static void check_images_rejected(const char *sub, const unsigned char *content, size_t size,
                                  int how, const char *needle) {
    char path[160];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", sub);
    remove(path);
    if (how == PLAIN) path[strlen(path) - 3] = '\0';
    CHECK(write_bytes(path, content, size, how) == 0);
    int64_t live = cn_live_tensors();
    cn_tensor *tx = NULL, *ty = NULL, *vx = NULL, *vy = NULL;
    const cn_fashion_mnist_options opt = {.mean = MEAN, .std = STD};
    CHECK_STATUS_FAILS(cn_fashion_mnist_load_with(sub, cn_cpu(), &opt, &tx, &ty, &vx, &vy),
                       CN_ERR_IO, needle);
    CHECK(!tx && !ty && !vx && !vy && cn_live_tensors() == live);
    remove(path);
}

static void test_cut_long_and_corrupt_images_are_rejected(void) {
    char sub[96];
    snprintf(sub, sizeof sub, "%s/bad", dir);
    CHECK(mkdir(sub, 0700) == 0);
    write_set(sub, 4, 2, PLAIN);
    size_t size;
    unsigned char *b = fm_content(4, 1, &size);
    /* cut short: the header promises 4 images, the file holds 3 and a half */
    check_images_rejected(sub, b, size - 400, PLAIN, "truncated at byte 2752");
    check_images_rejected(sub, b, size - 400, GZIP, "truncated at byte 2752");
    check_images_rejected(sub, b, size - 400, GZIP2, "truncated at byte 2752");
    /* bytes after the data: the plain file streams, and its end is still checked */
    unsigned char *longer = malloc(size + 3);
    memcpy(longer, b, size);
    memset(longer + size, 1, 3);
    check_images_rejected(sub, longer, size + 3, PLAIN, "the file goes on");
    check_images_rejected(sub, longer, size + 3, GZIP, "the file goes on");
    free(longer);
    /* a corrupt deflate stream whose trailer still gives the right size: streamed, then caught
     * after the header (400 images of noise, so the damage lies past zlib's first 256 KB) */
    size_t noisy_size;
    unsigned char *noisy = fm_content(400, 1, &noisy_size);
    uint64_t state = 1;
    for (size_t k = 16; k < noisy_size; k++)
        noisy[k] = (unsigned char)(th_lcg(&state) >> 7);
    char path[160];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", sub);
    CHECK(write_bytes(path, noisy, noisy_size, GZIP) == 0);
    free(noisy);
    size_t zsize = 0;
    unsigned char *z = th_read_file(path, &zsize);
    CHECK(z && zsize > 300000);
    if (z && zsize > 300000) {
        for (size_t k = zsize - zsize / 16; k < zsize - 12; k += 7) /* not the trailer */
            z[k] ^= 0x5A;
        check_images_rejected(sub, z, zsize, GZIP_AS_IS, "the gzip stream is corrupt near byte");
    }
    free(z);
    /* a header promising 2^16 - 1 images in a small gzip file: read as it comes, not allocated */
    b[6] = b[7] = 0xFF;
    check_images_rejected(sub, b, size, GZIP, "truncated");
    free(b);
    remove_set(sub);
}

/* ---- allocation failures -------------------------------------------------------------------- */

static void test_every_allocation_failure_is_clean(void) {
    const int hows[2] = {GZIP, GZIP2}; /* streamed, and read whole first */
    for (int h = 0; h < 2; h++) {
        char sub[96];
        snprintf(sub, sizeof sub, "%s/alloc%d", dir, h);
        CHECK(mkdir(sub, 0700) == 0);
        write_set(sub, 6, 3, hows[h]);
        const cn_fashion_mnist_options opt = {.train_limit = 4, .mean = MEAN, .std = STD};
        int64_t live = cn_live_tensors(), bytes = cn_live_bytes();
        cn_tensor *t[4] = {NULL, NULL, NULL, NULL};
        cn_status st = CN_ERR_OUT_OF_MEMORY;
        int points = 0, clean = 0;
        for (int64_t k = 1; st != CN_OK && k < 10000; k++) {
            cn_clear_error();
            cn_alloc_fail_after(k);
            st = cn_fashion_mnist_load_with(sub, cn_cpu(), &opt, &t[0], &t[1], &t[2], &t[3]);
            cn_alloc_fail_after(0);
            if (st == CN_OK) break;
            points++;
            clean += st == CN_ERR_OUT_OF_MEMORY && !t[0] && !t[1] && !t[2] && !t[3] &&
                     cn_live_tensors() == live && cn_live_bytes() == bytes;
        }
        CHECK(st == CN_OK);
        cn_tensor *want = oracle_images(6, 4, 1);
        CHECK(same_bits(t[0], want));
        cn_release(want);
        for (int k = 0; k < 4; k++)
            cn_release(t[k]);
        printf("     %s: %d points, %d clean\n", h ? "read whole" : "streamed", points, clean);
        CHECK(points >= 8 && clean == points);
        remove_set(sub);
    }
}

/* ---- the real data set ---------------------------------------------------------------------- */

static void test_installed_data_set_as_the_ops_make_it(void) {
    struct stat st;
    if (stat(CN_FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz", &st) != 0) {
        printf("skip test_installed_data_set_as_the_ops_make_it: " CN_FASHION_MNIST_DIR
               " is absent (apt-get install dataset-fashion-mnist)\n");
        return;
    }
    cn_tensor *vx = NULL, *nx = NULL, *tx = NULL, *ty = NULL;
    const cn_fashion_mnist_options opt = {.train_limit = 1000, .mean = MEAN, .std = STD};
    CHECK(cn_fashion_mnist_load(NULL, cn_cpu(), NULL, NULL, &vx, NULL) == CN_OK);
    CHECK(cn_fashion_mnist_load_with(NULL, cn_cpu(), &opt, &tx, &ty, &nx, NULL) == CN_OK);
    cn_tensor *shifted = cn_add_scalar(vx, -MEAN), *want = cn_mul_scalar(shifted, 1.0 / STD);
    CHECK(same_bits(nx, want));
    const int64_t stx[2] = {1000, PIXELS}, sty[1] = {1000};
    th_check_shape("train_x", tx, stx, 2);
    th_check_shape("train_y", ty, sty, 1);
    cn_release(vx), cn_release(nx), cn_release(tx), cn_release(ty);
    cn_release(shifted), cn_release(want);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/cinder-data-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_limited_and_normalised_bit_for_bit_on_every_read_path);
    RUN(test_bad_options_are_rejected_with_every_output_null);
    RUN(test_cut_long_and_corrupt_images_are_rejected);
    RUN(test_every_allocation_failure_is_clean);
    RUN(test_installed_data_set_as_the_ops_make_it);
    rmdir(dir);
    return th_finish();
}
