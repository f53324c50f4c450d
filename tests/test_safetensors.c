/* Checkpoints in the safetensors format: round trips of every dtype and of awkward shapes, the
 * exact bytes of a tiny file against a hand-written oracle, hand-written files read back, and
 * rejection (CN_ERR_IO naming the file and the offset, nothing leaked) of truncated and corrupt
 * files. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, rmdir */

#include <stdint.h>
#include <unistd.h>

#include "harness.h"

static char dir[64];

/* dir/name into buf (a static per call site is enough for these tests). */
static const char *tmp_path(char *buf, size_t size, const char *name) {
    snprintf(buf, size, "%s/%s", dir, name);
    return buf;
}

static int write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* A safetensors file from a header written by hand and its data: the 8-byte little-endian length
 * is computed here, everything else is taken as given. */
static int write_st(const char *path, const char *header, const void *data, size_t n_data) {
    size_t n = strlen(header);
    unsigned char *buf = malloc(8 + n + n_data + 1);
    for (int k = 0; k < 8; k++)
        buf[k] = (unsigned char)((uint64_t)n >> (8 * k));
    memcpy(buf + 8, header, n);
    if (n_data) memcpy(buf + 8 + n, data, n_data);
    int r = write_bytes(path, buf, 8 + n + n_data);
    free(buf);
    return r;
}

/* The raw bytes of t (row-major), malloc'd. */
static unsigned char *raw(cn_tensor *t, size_t *n) {
    *n = (size_t)cn_numel(t) * cn_dtype_size(cn_dtype_of(t));
    unsigned char *buf = malloc(*n ? *n : 1);
    if (cn_read(t, buf, *n) != CN_OK) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* got and want agree in dtype, shape and every byte. */
static void check_same(const char *what, cn_tensor *got, cn_tensor *want) {
    if (!got) {
        fprintf(stderr, "%s: NULL (%s)\n", what, cn_last_error());
        th_checks_failed++;
        return;
    }
    CHECK(cn_dtype_of(got) == cn_dtype_of(want));
    th_check_shape(what, got, cn_shape(want), cn_ndim(want));
    size_t ng, nw;
    unsigned char *g = raw(got, &ng), *w = raw(want, &nw);
    if (!g || !w || ng != nw || memcmp(g, w, nw) != 0) {
        fprintf(stderr, "%s: the bytes differ\n", what);
        th_checks_failed++;
    }
    free(g);
    free(w);
}

/* Loading `path` fails with CN_ERR_IO, a message naming the file and containing `needle`, and
 * no handle. */
static void check_rejected(const char *path, const char *needle) {
    cn_safetensors *h = (cn_safetensors *)&h; /* must be reset to NULL */
    cn_clear_error();
    cn_status s = cn_safetensors_load(path, cn_cpu(), &h);
    CHECK(s == CN_ERR_IO);
    CHECK(cn_last_status() == CN_ERR_IO);
    CHECK(h == NULL);
    if (s == CN_OK) cn_safetensors_free(h);
    const char *msg = cn_last_error();
    if (!strstr(msg, path) || !strstr(msg, needle) || !strstr(msg, "safetensors_load: ")) {
        fprintf(stderr, "message \"%s\" lacks the path or \"%s\"\n", msg, needle);
        th_checks_failed++;
    }
    cn_clear_error();
}

/* ---- round trips ---------------------------------------------------------------------------- */

static void test_round_trip_of_every_dtype_and_shape(void) {
    cn_scope_begin();
    const double v6[6] = {1.5, -2.25, 3, 0.5, -0.125, 65504};
    const int64_t s23[2] = {2, 3}, s6[1] = {6}, s302[3] = {3, 0, 2}, s0[1] = {0};
    const int64_t s3[1] = {3}, s32[2] = {3, 2};
    const double scalar = 3.141592653589793;
    cn_tensor *f32 = th_tensor(v6, s23, 2, CN_F32);
    cn_tensor *ts[] = {
        f32,
        cn_from_data(&scalar, NULL, 0, CN_F64, cn_cpu()), /* 0-d */
        th_tensor(v6, s6, 1, CN_F16),
        th_tensor(v6, s32, 2, CN_BF16),
        th_tensor(v6, s23, 2, CN_I32),
        th_tensor(v6, s6, 1, CN_I64),
        th_tensor(v6 + 2, s3, 1, CN_U8),
        cn_gt(th_tensor(v6, s23, 2, CN_F32), cn_zeros(s23, 2, CN_F32, cn_cpu())), /* bool */
        cn_zeros(s302, 3, CN_F32, cn_cpu()),                                     /* empty */
        cn_zeros(s0, 1, CN_I64, cn_cpu()),                                       /* empty */
        cn_transpose(f32, 0, 1), /* strided: saved row-major */
    };
    const char *names[] = {"f32", "f64 scalar", "f16", "bf16", "i32", "i64",
                           "u8",  "bool",       "e0",  "e1",   "f32.T"};
    int n = (int)(sizeof ts / sizeof *ts);
    char path[128];
    tmp_path(path, sizeof path, "all.safetensors");
    CHECK(cn_safetensors_save(path, names, ts, n) == CN_OK);

    cn_safetensors *h = NULL;
    CHECK(cn_safetensors_load(path, cn_cpu(), &h) == CN_OK);
    CHECK(cn_safetensors_count(h) == n);
    for (int i = 0; i < n && h; i++) {
        CHECK(strcmp(cn_safetensors_name(h, i), names[i]) == 0); /* the order saved */
        cn_tensor *t = cn_safetensors_get(h, names[i]);
        check_same(names[i], t, ts[i]);
        CHECK(cn_numel(t) == 0 || cn_is_contiguous(t));
    }
    CHECK(cn_safetensors_name(h, n) == NULL);
    CHECK(cn_safetensors_name(h, -1) == NULL);
    CHECK(h && strcmp(cn_safetensors_metadata(h, "format"), "pt") == 0);
    CHECK(cn_safetensors_metadata(h, "nope") == NULL);
    cn_safetensors_free(h);

    /* onto an autodiff device: the tensors live there, untracked */
    CHECK(cn_safetensors_load(path, cn_autodiff(cn_cpu()), &h) == CN_OK);
    cn_tensor *t = cn_safetensors_get(h, "f32");
    CHECK(t && cn_device_eq(cn_device_of(t), cn_autodiff(cn_cpu())) && !cn_requires_grad(t));
    check_same("f32 on autodiff", t, f32);
    cn_safetensors_free(h);
    cn_scope_end();
    remove(path);
}

static void test_names_are_escaped_and_round_trip(void) {
    const int64_t s1[1] = {1};
    const double one = 1;
    cn_tensor *t = th_tensor(&one, s1, 1, CN_F32);
    const char *names[] = {"a\"quote", "back\\slash", "new\nline\t", "caf\xc3\xa9",
                           "\xf0\x9f\x94\xa5 fire", "", "model.layers.0.weight"};
    cn_tensor *ts[7] = {t, t, t, t, t, t, t};
    char path[128];
    tmp_path(path, sizeof path, "names.safetensors");
    CHECK(cn_safetensors_save(path, names, ts, 7) == CN_OK);
    cn_safetensors *h = NULL;
    CHECK(cn_safetensors_load(path, cn_cpu(), &h) == CN_OK);
    CHECK(cn_safetensors_count(h) == 7);
    for (int i = 0; i < 7 && h; i++) {
        CHECK(strcmp(cn_safetensors_name(h, i), names[i]) == 0);
        cn_tensor *g = cn_safetensors_get(h, names[i]);
        check_same(names[i], g, t);
        cn_release(g);
    }
    cn_safetensors_free(h);
    cn_release(t);
    remove(path);
}

/* ---- the bytes, against hand-written oracles ------------------------------------------------ */

/* One F32 tensor "x" of shape [2] holding {1, 2}: the header is 85 bytes of JSON padded with 3
 * spaces to 88 (0x58), so the data starts at byte 96; 1.0f = 0x3F800000, 2.0f = 0x40000000,
 * little-endian. */
static const char expected_header[] =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}   ";

static void test_file_bytes_match_a_hand_written_file(void) {
    unsigned char want[8 + 88 + 8] = {0x58, 0, 0, 0, 0, 0, 0, 0};
    CHECK(strlen(expected_header) == 88);
    memcpy(want + 8, expected_header, 88);
    const unsigned char data[8] = {0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0x40};
    memcpy(want + 96, data, 8);

    const float v[2] = {1, 2};
    const int64_t s2[1] = {2};
    cn_tensor *x = cn_from_data(v, s2, 1, CN_F32, cn_cpu());
    const char *name = "x";
    char path[128];
    tmp_path(path, sizeof path, "tiny.safetensors");
    CHECK(cn_safetensors_save(path, &name, &x, 1) == CN_OK);
    size_t n = 0;
    unsigned char *got = th_read_file(path, &n);
    CHECK(got && n == sizeof want && memcmp(got, want, sizeof want) == 0);
    if (got && n == sizeof want)
        for (size_t k = 0; k < n; k++)
            if (got[k] != want[k]) {
                fprintf(stderr, "byte %zu: got 0x%02X, want 0x%02X\n", k, got[k], want[k]);
                break;
            }
    free(got);
    cn_release(x);
    remove(path);
}

/* Files as the reference writer (and other tools) produce them: "__metadata__" anywhere, keys
 * in any order, white space, escapes, no padding, unknown fields, data order unlike header
 * order. */
static void test_loads_hand_written_files(void) {
    char path[128];
    tmp_path(path, sizeof path, "hand.safetensors");
    /* b is first in the data, a second: 2 x i64 then 3 x u8 */
    const char *header =
        "{ \"a\" : {\"shape\": [3], \"data_offsets\": [16, 19], \"dtype\": \"U8\"},\n"
        "  \"__metadata__\": {\"format\": \"pt\", \"note\": \"caf\\u00e9 \\ud83d\\udd25\"},\n"
        "  \"b\\u0031\": {\"dtype\": \"I64\", \"shape\": [2], \"data_offsets\": [0, 16],"
        " \"extra\": [1, -2.5e3, {\"k\": null}, true]}}";
    unsigned char data[19] = {7,    0,    0,    0,    0,    0,    0,  0,  0xFE, 0xFF,
                              0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 10, 20, 255};
    CHECK(write_st(path, header, data, sizeof data) == 0);
    cn_safetensors *h = NULL;
    CHECK(cn_safetensors_load(path, cn_cpu(), &h) == CN_OK);
    CHECK(cn_safetensors_count(h) == 2);
    CHECK(h && strcmp(cn_safetensors_name(h, 0), "b1") == 0); /* data order */
    CHECK(h && strcmp(cn_safetensors_name(h, 1), "a") == 0);
    CHECK(h && strcmp(cn_safetensors_metadata(h, "note"), "caf\xc3\xa9 \xf0\x9f\x94\xa5") == 0);
    cn_tensor *a = cn_safetensors_get(h, "a"), *b = cn_safetensors_get(h, "b1");
    const double wa[3] = {10, 20, 255}, wb[2] = {7, -2};
    CHECK(a && cn_dtype_of(a) == CN_U8 && b && cn_dtype_of(b) == CN_I64);
    th_check_values("a", a, wa, 3, 0);
    th_check_values("b1", b, wb, 2, 0);
    cn_release(a);
    cn_release(b);
    cn_safetensors_free(h);

    /* no tensors at all, and a 0-d BF16 (1.0 = 0x3F80) with an empty shape */
    CHECK(write_st(path, "{}", NULL, 0) == 0);
    CHECK(cn_safetensors_load(path, cn_cpu(), &h) == CN_OK);
    CHECK(cn_safetensors_count(h) == 0);
    cn_safetensors_free(h);
    const unsigned char bf[2] = {0x80, 0x3F};
    CHECK(write_st(path, "{\"s\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[0,2]}}", bf,
                   2) == 0);
    CHECK(cn_safetensors_load(path, cn_cpu(), &h) == CN_OK);
    cn_tensor *s = cn_safetensors_get(h, "s");
    const double one = 1;
    CHECK(s && cn_ndim(s) == 0 && cn_dtype_of(s) == CN_BF16);
    th_check_values("s", s, &one, 1, 0);
    cn_release(s);
    cn_safetensors_free(h);
    remove(path);
}

/* ---- rejection ------------------------------------------------------------------------------ */

static void test_truncated_files_fail_cleanly_at_every_cut(void) {
    const double v[6] = {1, 2, 3, 4, 5, 6};
    const int64_t s23[2] = {2, 3}, s4[1] = {4};
    cn_tensor *ts[3] = {th_tensor(v, s23, 2, CN_F32), th_tensor(v, s4, 1, CN_I64),
                        th_tensor(v, s4, 1, CN_BF16)};
    const char *names[3] = {"w", "idx", "half"};
    char path[128], cut[128];
    tmp_path(path, sizeof path, "full.safetensors");
    tmp_path(cut, sizeof cut, "cut.safetensors");
    CHECK(cn_safetensors_save(path, names, ts, 3) == CN_OK);
    size_t n = 0;
    unsigned char *bytes = th_read_file(path, &n);
    CHECK(bytes && n > 100);
    int64_t live = cn_live_tensors();
    for (size_t len = 0; bytes && len < n; len++) {
        CHECK(write_bytes(cut, bytes, len) == 0);
        char at[64];
        snprintf(at, sizeof at, "truncated at byte %zu", len);
        check_rejected(cut, at);
        CHECK(cn_live_tensors() == live);
    }
    /* the whole file still loads */
    cn_safetensors *h = NULL;
    CHECK(cn_safetensors_load(path, cn_cpu(), &h) == CN_OK);
    cn_safetensors_free(h);
    free(bytes);
    for (int i = 0; i < 3; i++)
        cn_release(ts[i]);
    remove(path);
    remove(cut);
}

typedef struct bad_file {
    const char *header;
    size_t n_data;
    const char *needle; /* in the message */
} bad_file;

/* Pieces of headers: F2 is the dtype and shape of an F32 [2] tensor (8 bytes). */
#define F2 "\"dtype\":\"F32\",\"shape\":[2]"
#define T(fields) "{\"t\":{" fields "}}"
#define ENTRY(name, dtype, shape, offsets)                                                         \
    "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":[" shape "],\"data_offsets\":[" offsets "]}"

static const bad_file bad_files[] = {
    /* JSON syntax */
    {"", 0, "header byte 0 (file byte 8)"},
    {" {}", 0, "must start with '{'"},
    {"{", 0, "expected a string, found the end of the header"},
    {"{\"t\"}", 0, "expected ':' after a tensor's name"},
    {T("\"dtype\":\"F32\","), 0, "expected a string, found '}'"},
    {T("\"dtype\":\"F32\" \"shape\":[]"), 0, "expected '}' or ','"},
    {"{'t':{}}", 0, "expected a string, found '''"},
    {"{t:{}}", 0, "header byte 1 (file byte 9): expected a string"},
    {T("\"dtype\":\"F\\x32\""), 0, "invalid escape"},
    {T("\"dtype\":\"F32\n\""), 0, "raw control byte 0x0A"},
    {"{\"t\\ud800\":{}}", 0, "high surrogate without its low half"},
    {"{\"t\\u0000\":{}}", 0, "NUL"},
    {"{\"\xff\":{}}", 0, "invalid UTF-8"},
    {T(F2 ",\"data_offsets\":[0,08]"), 8, "leading zero"},
    {T(F2 ",\"data_offsets\":[0,8.0]"), 8, "must be an integer"},
    {T("\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]"), 8, "non-negative integer"},
    {T(F2 ",\"data_offsets\":[0,8],\"x\":tru"), 8, "expected a JSON value"},
    {T(F2 ",\"data_offsets\":[0,8],\"x\":[1,]"), 8, "expected a JSON value"},
    {T(F2 ",\"data_offsets\":[0,8],\"x\":01"), 8, "expected a JSON value"},
    {T(F2 ",\"data_offsets\":[0,8]") "x", 8, "'x' after the header's closing '}'"},
    {"{\"t\":{" F2 ",\"data_offsets\":[0,8]},}", 8, "expected a string"},
    {T(F2 ",\"data_offsets\":[0,99999999999999999999]"), 8, "does not fit"},
    /* the format's rules */
    {"{\"t\":[]}", 0, "expected '{' to open the tensor's entry"},
    {T("\"shape\":[2],\"data_offsets\":[0,8]"), 8, "tensor 't' lacks \"dtype\""},
    {T("\"dtype\":\"F32\",\"data_offsets\":[0,8]"), 8, "lacks \"shape\""},
    {T(F2), 8, "lacks \"data_offsets\""},
    {T("\"dtype\":\"F32\"," F2 ",\"data_offsets\":[0,8]"), 8, "repeats a field"},
    {T("\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[0,2]"), 2,
     "dtype \"I8\", which cinder does not have"},
    {T("\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]"), 8, "dtype \"f32\""},
    {T("\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,8]"), 8, "expected a string, found '7'"},
    {T("\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]"), 8,
     "more than 8 dims"},
    {T(F2 ",\"data_offsets\":[0]"), 8, "data_offsets must be [begin, end]"},
    {T(F2 ",\"data_offsets\":[0,8,16]"), 16, "data_offsets must be [begin, end]"},
    {T(F2 ",\"data_offsets\":[0,4]"), 4, "[0, 4] (4 bytes) but shape [2] of F32 needs 8 bytes"},
    {T("\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]"), 0, "end before they begin"},
    {T("\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]"), 8,
     "overflows 64 bits"},
    {"{" ENTRY("a", "F32", "2", "0,8") "," ENTRY("a", "F32", "2", "8,16") "}", 16,
     "tensor name 'a' appears twice"},
    {"{" ENTRY("a", "F32", "2", "0,8") "," ENTRY("b", "F32", "2", "4,12") "}", 12,
     "overlap the tensor before it"},
    {"{" ENTRY("a", "F32", "2", "0,8") "," ENTRY("b", "F32", "2", "12,20") "}", 20,
     "leave data bytes [8, 12) to no tensor"},
    {"{" ENTRY("a", "F32", "2", "4,12") "}", 12, "leave data bytes [0, 4)"},
    {"{" ENTRY("a", "F32", "2", "0,8") "}", 12, "4 bytes follow the last tensor"},
    {"{" ENTRY("a", "F32", "2", "8,16") "," ENTRY("b", "F32", "2", "0,8") "}", 12,
     "truncated at byte"},
    {"{\"__metadata__\":{\"k\":1}}", 0, "metadata value of \"k\" must be a string"},
    {"{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, "metadata key \"k\" appears twice"},
    {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "\"__metadata__\" appears twice"},
};

static void test_corrupt_headers_are_rejected_with_the_offset(void) {
    char path[128];
    tmp_path(path, sizeof path, "bad.safetensors");
    unsigned char zeros[64] = {0};
    int64_t live = cn_live_tensors();
    for (size_t i = 0; i < sizeof bad_files / sizeof *bad_files; i++) {
        const bad_file *b = &bad_files[i];
        CHECK(write_st(path, b->header, zeros, b->n_data) == 0);
        int before = th_checks_failed;
        check_rejected(path, b->needle);
        if (th_checks_failed != before) fprintf(stderr, "  (case %zu: %s)\n", i, b->header);
    }
    CHECK(cn_live_tensors() == live);
    remove(path);
}

static void test_bad_lengths_and_bytes_are_rejected(void) {
    char path[128];
    tmp_path(path, sizeof path, "len.safetensors");
    /* a header length past the end of the file */
    unsigned char buf[16] = {0x40, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    CHECK(write_bytes(path, buf, 10) == 0);
    check_rejected(path, "truncated at byte 10: expected 64 bytes of header");
    /* an absurd header length: not a safetensors file */
    const char json[] = "{\"not\": \"safetensors\"}";
    CHECK(write_bytes(path, json, sizeof json - 1) == 0);
    check_rejected(path, "over the 100 MB limit");
    /* a BOOL that is neither 0 nor 1, at file byte 8 + N + 1 */
    const char *header = "{\"m\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[0,3]}}";
    const unsigned char bools[3] = {1, 2, 0};
    CHECK(write_st(path, header, bools, 3) == 0);
    char needle[64];
    snprintf(needle, sizeof needle, "byte %zu (element 1 of BOOL tensor 'm') is 0x02",
             8 + strlen(header) + 1);
    check_rejected(path, needle);
    remove(path);
}

static void test_missing_file_is_an_io_error(void) {
    char path[128];
    tmp_path(path, sizeof path, "never-written.safetensors");
    check_rejected(path, "cannot open it: No such file or directory");
    check_rejected(dir, "safetensors_load"); /* a directory */
    cn_safetensors *h = NULL;
    cn_clear_error();
    CHECK(cn_safetensors_load(NULL, cn_cpu(), &h) == CN_ERR_NULL_ARG);
    CHECK(cn_safetensors_load(path, cn_cpu(), NULL) == CN_ERR_NULL_ARG);
    cn_clear_error();
}

/* ---- the handle and loading into parameters ------------------------------------------------- */

static void test_handle_outlives_scopes_and_get_gives_references(void) {
    const double v[3] = {1, 2, 3};
    const int64_t s3[1] = {3};
    cn_tensor *t = th_tensor(v, s3, 1, CN_F32);
    const char *name = "t";
    char path[128];
    tmp_path(path, sizeof path, "scoped.safetensors");
    CHECK(cn_safetensors_save(path, &name, &t, 1) == CN_OK);
    cn_safetensors *h = NULL;
    cn_scope_begin();
    cn_scope_begin();
    CHECK(cn_safetensors_load(path, cn_cpu(), &h) == CN_OK);
    cn_scope_end();
    cn_scope_end(); /* the handle's tensors belong to no scope */
    cn_tensor *got = cn_safetensors_get(h, "t");
    th_check_values("t", got, v, 3, 0);
    cn_safetensors_free(h);
    th_check_values("t after free", got, v, 3, 0); /* a reference of its own */
    cn_release(got);
    CHECK(cn_safetensors_load(path, cn_cpu(), &h) == CN_OK);
    CHECK_FAILS(cn_safetensors_get(h, "missing"), CN_ERR_INVALID_ARG, "no tensor 'missing'");
    CHECK_FAILS(cn_safetensors_get(h, NULL), CN_ERR_NULL_ARG, "name");
    cn_safetensors_free(h);
    cn_safetensors_free(NULL);
    CHECK(cn_safetensors_count(NULL) == 0);
    cn_release(t);
    remove(path);
}

static void test_load_into_fills_tracked_parameters(void) {
    cn_device ad = cn_autodiff(cn_cpu());
    const int64_t s23[2] = {2, 3}, s3[1] = {3};
    const double wv[6] = {1, 2, 3, 4, 5, 6}, bv[3] = {-1, 0, 1};
    cn_tensor *w_src = th_tensor(wv, s23, 2, CN_F32), *b_src = th_tensor(bv, s3, 1, CN_F32);
    cn_tensor *src[2] = {w_src, b_src};
    const char *names[2] = {"fc.weight", "fc.bias"};
    char path[128];
    tmp_path(path, sizeof path, "params.safetensors");
    CHECK(cn_safetensors_save(path, names, src, 2) == CN_OK);

    cn_tensor *w = cn_require_grad(cn_zeros(s23, 2, CN_F32, ad));
    cn_tensor *b = cn_require_grad(cn_zeros(s3, 1, CN_F32, ad));
    cn_tensor *params[2] = {w, b};
    CHECK(cn_safetensors_load_into(path, names, params, 2) == CN_OK);
    th_check_values("w", w, wv, 6, 0);
    th_check_values("b", b, bv, 3, 0);
    CHECK(cn_requires_grad(w) && cn_grad_enabled());

    /* failures leave every destination unchanged */
    const double zeros[6] = {0};
    cn_tensor *w2 = cn_zeros(s23, 2, CN_F32, cn_cpu()), *b2 = cn_zeros(s3, 1, CN_F32, cn_cpu());
    cn_tensor *pair[2] = {w2, b2};
    const char *wrong_name[2] = {"fc.weight", "fc.bias2"};
    cn_clear_error();
    CHECK(cn_safetensors_load_into(path, wrong_name, pair, 2) == CN_ERR_INVALID_ARG);
    CHECK(strstr(cn_last_error(), "no tensor 'fc.bias2'") != NULL);
    th_check_values("w2 unchanged", w2, zeros, 6, 0);
    const int64_t s32[2] = {3, 2};
    cn_tensor *w_shape = cn_zeros(s32, 2, CN_F32, cn_cpu());
    cn_tensor *bad_shape[2] = {b2, w_shape};
    const char *swapped[2] = {"fc.bias", "fc.weight"};
    cn_clear_error();
    CHECK(cn_safetensors_load_into(path, swapped, bad_shape, 2) == CN_ERR_SHAPE);
    CHECK(strstr(cn_last_error(), "has shape [2, 3] but tensors[1] is [3, 2]") != NULL);
    th_check_values("b2 unchanged", b2, zeros, 3, 0);
    cn_tensor *b_f64 = cn_zeros(s3, 1, CN_F64, cn_cpu());
    cn_clear_error();
    CHECK(cn_safetensors_load_into(path, &names[1], &b_f64, 1) == CN_ERR_DTYPE);
    CHECK(strstr(cn_last_error(), "is F32 but tensors[0] is [3] f64") != NULL);
    cn_clear_error();
    CHECK(cn_safetensors_load_into("/nonexistent-cinder/x.safetensors", names, pair, 2) ==
          CN_ERR_IO);
    cn_clear_error();

    cn_release(w), cn_release(b), cn_release(w2), cn_release(b2), cn_release(w_shape);
    cn_release(b_f64), cn_release(w_src), cn_release(b_src);
    remove(path);
}

static void test_save_refuses_bad_arguments_and_keeps_the_old_file(void) {
    const double v[2] = {1, 2};
    const int64_t s2[1] = {2};
    cn_tensor *t = th_tensor(v, s2, 1, CN_F32);
    cn_tensor *ts[2] = {t, t};
    char path[128];
    tmp_path(path, sizeof path, "keep.safetensors");
    const char *one = "t";
    CHECK(cn_safetensors_save(path, &one, &t, 1) == CN_OK);
    size_t n0 = 0, n1 = 0;
    unsigned char *before = th_read_file(path, &n0);

    const char *dup[2] = {"a", "a"}, *meta[1] = {"__metadata__"}, *bad_utf8[1] = {"\xc3("};
    cn_clear_error();
    CHECK(cn_safetensors_save(path, dup, ts, 2) == CN_ERR_INVALID_ARG);
    CHECK(strstr(cn_last_error(), "names[0] and names[1] are both 'a'") != NULL);
    CHECK(cn_safetensors_save(path, meta, ts, 1) == CN_ERR_INVALID_ARG);
    CHECK(cn_safetensors_save(path, bad_utf8, ts, 1) == CN_ERR_INVALID_ARG);
    CHECK(cn_safetensors_save(path, &one, ts, -1) == CN_ERR_INVALID_ARG);
    cn_tensor *null_t[1] = {NULL};
    cn_clear_error();
    CHECK(cn_safetensors_save(path, &one, null_t, 1) == CN_ERR_NULL_ARG);
    CHECK(strstr(cn_last_error(), "tensors[0]") != NULL);
    cn_clear_error();
    /* a target that is a directory: the rename fails, and no temporary file is left */
    CHECK(cn_safetensors_save(dir, &one, &t, 1) == CN_ERR_IO);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", dir);
    FILE *left = fopen(tmp, "rb");
    CHECK(left == NULL);
    if (left) fclose(left);
    CHECK(cn_safetensors_save("/nonexistent-cinder/x.safetensors", &one, &t, 1) == CN_ERR_IO);
    CHECK(strstr(cn_last_error(), "No such file or directory") != NULL);
    cn_clear_error();

    unsigned char *after = th_read_file(path, &n1);
    CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0);
    free(before);
    free(after);
    /* an empty checkpoint is fine */
    CHECK(cn_safetensors_save(path, NULL, NULL, 0) == CN_OK);
    cn_safetensors *h = NULL;
    CHECK(cn_safetensors_load(path, cn_cpu(), &h) == CN_OK && cn_safetensors_count(h) == 0);
    cn_safetensors_free(h);
    cn_release(t);
    remove(path);
}

/* SQLite style: make each allocation of a save and of a load fail in turn; every failure must
 * report CN_ERR_OUT_OF_MEMORY and leave nothing behind. */
static void test_every_allocation_failure_is_clean(void) {
    const double v[6] = {1, 2, 3, 4, 5, 6};
    const int64_t s23[2] = {2, 3};
    cn_tensor *ts[2] = {th_tensor(v, s23, 2, CN_F32), th_tensor(v, s23, 2, CN_I64)};
    const char *names[2] = {"a", "b"};
    char path[128];
    tmp_path(path, sizeof path, "oom.safetensors");
    int64_t live = cn_live_tensors();
    for (int which = 0; which < 2; which++) {
        int64_t start = cn_alloc_count();
        cn_safetensors *h = NULL;
        cn_status s = which == 0 ? cn_safetensors_save(path, names, ts, 2)
                                 : cn_safetensors_load(path, cn_cpu(), &h);
        CHECK(s == CN_OK);
        cn_safetensors_free(h);
        int64_t allocs = cn_alloc_count() - start;
        CHECK(allocs > 2);
        for (int64_t k = 1; k <= allocs; k++) {
            cn_clear_error();
            h = NULL;
            cn_alloc_fail_after(k);
            s = which == 0 ? cn_safetensors_save(path, names, ts, 2)
                           : cn_safetensors_load(path, cn_cpu(), &h);
            cn_alloc_fail_after(0);
            CHECK(s == CN_ERR_OUT_OF_MEMORY);
            CHECK(h == NULL);
            cn_safetensors_free(h);
            CHECK(cn_live_tensors() == live);
        }
        cn_clear_error();
    }
    cn_release(ts[0]);
    cn_release(ts[1]);
    remove(path);
}

/* load_into is all or nothing. A file of three tensors (f32 "w" [2, 3], BOOL "mask" [4], f32
 * "b" [3]) written by hand: "mask" holds the byte 0x02 at element 2, so loading into
 * {w, mask, b} must fail with CN_ERR_IO naming the byte, and leave w untouched though w's bytes,
 * read first, were fine. Then every allocation of a good load_into fails in turn: each is
 * CN_ERR_OUT_OF_MEMORY with every destination as it was and nothing leaked, and the load with no
 * failure fills all three (the oracle: the values written into the file). */
static void test_load_into_writes_nothing_unless_every_tensor_reads(void) {
    const float w_vals[6] = {1, 2, 3, 4, 5, 6}, b_vals[3] = {-1, 0.5f, 2};
    unsigned char data[24 + 4 + 12];
    for (int i = 0; i < 9; i++) { /* little-endian f32 */
        uint32_t bits;
        memcpy(&bits, i < 6 ? &w_vals[i] : &b_vals[i - 6], 4);
        for (int k = 0; k < 4; k++)
            data[(i < 6 ? 4 * i : 28 + 4 * (i - 6)) + k] = (unsigned char)(bits >> (8 * k));
    }
    const unsigned char mask_ok[4] = {1, 0, 1, 1};
    memcpy(data + 24, mask_ok, 4);
    const char *header = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                         "\"mask\":{\"dtype\":\"BOOL\",\"shape\":[4],\"data_offsets\":[24,28]},"
                         "\"b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[28,40]}}";
    char good[128], bad[128];
    tmp_path(good, sizeof good, "into_good.safetensors");
    tmp_path(bad, sizeof bad, "into_bad.safetensors");
    CHECK(write_st(good, header, data, sizeof data) == 0);
    data[24 + 2] = 0x02;
    CHECK(write_st(bad, header, data, sizeof data) == 0);

    const int64_t s23[2] = {2, 3}, s4[1] = {4}, s3[1] = {3};
    const double w0[6] = {9, 9, 9, 9, 9, 9}, m0[4] = {0, 0, 0, 0}, b0[3] = {7, 7, 7};
    cn_device ad = cn_autodiff(cn_cpu());
    cn_tensor *w = cn_require_grad(cn_full(s23, 2, 9.0, CN_F32, ad)); /* a tracked parameter */
    cn_tensor *mask = th_tensor(m0, s4, 1, CN_BOOL);
    cn_tensor *b = th_tensor(b0, s3, 1, CN_F32);
    cn_tensor *dst[3] = {w, mask, b};
    const char *names[3] = {"w", "mask", "b"};

    cn_clear_error();
    CHECK(cn_safetensors_load_into(bad, names, dst, 3) == CN_ERR_IO);
    CHECK(strstr(cn_last_error(), "safetensors_load_into: ") == cn_last_error());
    CHECK(strstr(cn_last_error(), "element 2 of BOOL tensor 'mask'") != NULL);
    CHECK(strstr(cn_last_error(), "0x02") != NULL);
    th_check_values("w after the corrupt load", w, w0, 6, 0);
    th_check_values("mask after the corrupt load", mask, m0, 4, 0);
    th_check_values("b after the corrupt load", b, b0, 3, 0);
    cn_clear_error();

    int64_t live = cn_live_tensors(), bytes = cn_live_bytes();
    /* count the allocations of a good load into scratch copies of the destinations */
    cn_tensor *sw = th_tensor(w0, s23, 2, CN_F32), *sm = th_tensor(m0, s4, 1, CN_BOOL),
              *sb = th_tensor(b0, s3, 1, CN_F32);
    cn_tensor *scratch[3] = {sw, sm, sb};
    int64_t start = cn_alloc_count();
    CHECK(cn_safetensors_load_into(good, names, scratch, 3) == CN_OK);
    int64_t allocs = cn_alloc_count() - start;
    cn_release(sw), cn_release(sm), cn_release(sb);
    CHECK(allocs >= 3);
    int points = 0, clean = 0;
    for (int64_t k = 1; k <= allocs + 1; k++) {
        cn_clear_error();
        cn_alloc_fail_after(k);
        cn_status st = cn_safetensors_load_into(good, names, dst, 3);
        cn_alloc_fail_after(0);
        if (st == CN_OK) {
            CHECK(k == allocs + 1); /* only once no allocation fails */
            break;
        }
        points++;
        int failed_before = th_checks_failed;
        CHECK(st == CN_ERR_OUT_OF_MEMORY);
        CHECK(cn_live_tensors() == live && cn_live_bytes() == bytes);
        double got[6];
        CHECK(th_read(w, got) == 6 && memcmp(got, w0, sizeof w0) == 0);
        CHECK(th_read(mask, got) == 4 && memcmp(got, m0, sizeof m0) == 0);
        CHECK(th_read(b, got) == 3 && memcmp(got, b0, sizeof b0) == 0);
        if (th_checks_failed == failed_before) clean++;
    }
    printf("     load_into of 3 tensors failed cleanly at %d of its %d allocations\n", clean,
           points);
    CHECK(points == allocs && clean == points);
    const double w1[6] = {1, 2, 3, 4, 5, 6}, m1[4] = {1, 0, 1, 1}, b1[3] = {-1, 0.5, 2};
    th_check_values("w loaded", w, w1, 6, 0);
    th_check_values("mask loaded", mask, m1, 4, 0);
    th_check_values("b loaded", b, b1, 3, 0);
    cn_release(w), cn_release(mask), cn_release(b);
    remove(good);
    remove(bad);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/cinder-st-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_round_trip_of_every_dtype_and_shape);
    RUN(test_names_are_escaped_and_round_trip);
    RUN(test_file_bytes_match_a_hand_written_file);
    RUN(test_loads_hand_written_files);
    RUN(test_truncated_files_fail_cleanly_at_every_cut);
    RUN(test_corrupt_headers_are_rejected_with_the_offset);
    RUN(test_bad_lengths_and_bytes_are_rejected);
    RUN(test_missing_file_is_an_io_error);
    RUN(test_handle_outlives_scopes_and_get_gives_references);
    RUN(test_load_into_fills_tracked_parameters);
    RUN(test_save_refuses_bad_arguments_and_keeps_the_old_file);
    RUN(test_every_allocation_failure_is_clean);
    RUN(test_load_into_writes_nothing_unless_every_tensor_reads);
    rmdir(dir);
    return th_finish();
}
