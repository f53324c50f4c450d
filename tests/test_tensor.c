/* Tensor creation, metadata, reading back, devices: checked against hand-computed values. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

static void test_from_data_and_metadata(void) {
    float v[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[2] = {2, 3};
    cn_tensor *t = cn_from_data(v, shape, 2, CN_F32, cn_cpu());
    CHECK(t != NULL);
    CHECK(cn_ndim(t) == 2 && cn_shape(t)[0] == 2 && cn_shape(t)[1] == 3);
    CHECK(cn_numel(t) == 6 && cn_dtype_of(t) == CN_F32 && cn_kind_of(t) == CN_KIND_FLOAT);
    CHECK(cn_strides(t)[0] == 3 && cn_strides(t)[1] == 1 && cn_is_contiguous(t));
    CHECK(cn_device_eq(cn_device_of(t), cn_cpu()));
    float back[6];
    CHECK(cn_read(t, back, sizeof back) == CN_OK);
    CHECK(memcmp(back, v, sizeof v) == 0);
    char buf[64];
    CHECK(strcmp(cn_tensor_str(t, buf, sizeof buf), "[2, 3] f32 cpu:0") == 0);
    CHECK(cn_retain(t) == t);
    cn_release(t);
    cn_release(t);
}

static void test_scalar_tensor(void) {
    double v = 2.5;
    cn_tensor *t = cn_from_data(&v, NULL, 0, CN_F64, cn_cpu());
    CHECK(t && cn_ndim(t) == 0 && cn_numel(t) == 1);
    double w = 2.5;
    th_check_values("scalar", t, &w, 1, 0);
    cn_release(t);
}

static void test_constants(void) {
    int64_t shape[2] = {2, 2};
    cn_tensor *z = cn_zeros(shape, 2, CN_I32, cn_cpu());
    cn_tensor *o = cn_ones(shape, 2, CN_F64, cn_cpu());
    cn_tensor *f = cn_full(shape, 2, -3.5, CN_F32, cn_cpu());
    double zw[4] = {0, 0, 0, 0}, ow[4] = {1, 1, 1, 1}, fw[4] = {-3.5, -3.5, -3.5, -3.5};
    th_check_values("zeros", z, zw, 4, 0);
    th_check_values("ones", o, ow, 4, 0);
    th_check_values("full", f, fw, 4, 0);
    cn_release(z);
    cn_release(o);
    cn_release(f);
}

static void test_arange_and_eye(void) {
    cn_tensor *a = cn_arange(0, 5, 1, CN_I64, cn_cpu());
    double aw[5] = {0, 1, 2, 3, 4};
    th_check_values("arange int", a, aw, 5, 0);
    cn_tensor *b = cn_arange(1, 0, -0.25, CN_F32, cn_cpu());
    double bw[4] = {1, 0.75, 0.5, 0.25};
    th_check_values("arange negative step", b, bw, 4, 0);
    cn_tensor *e = cn_eye(2, 3, CN_F32, cn_cpu());
    double ew[6] = {1, 0, 0, 0, 1, 0};
    th_check_values("eye", e, ew, 6, 0);
    cn_tensor *empty = cn_arange(3, 3, 1, CN_F32, cn_cpu());
    CHECK(empty && cn_numel(empty) == 0);
    cn_release(a);
    cn_release(b);
    cn_release(e);
    cn_release(empty);
    CHECK_FAILS(cn_arange(0, 1, 0, CN_F32, cn_cpu()), CN_ERR_INVALID_ARG, "arange");
}

static void test_read_errors(void) {
    int64_t n = 3;
    cn_tensor *t = cn_zeros(&n, 1, CN_F32, cn_cpu());
    float small[2];
    cn_clear_error();
    CHECK(cn_read(t, small, sizeof small) == CN_ERR_BUFFER);
    CHECK(strstr(cn_last_error(), "read") && strstr(cn_last_error(), "12"));
    cn_clear_error();
    cn_release(t);
}

static void test_creation_errors(void) {
    int64_t neg[2] = {2, -1};
    CHECK_FAILS(cn_zeros(neg, 2, CN_F32, cn_cpu()), CN_ERR_INVALID_ARG, "negative");
    int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
    CHECK_FAILS(cn_zeros(huge, 2, CN_F32, cn_cpu()), CN_ERR_OVERFLOW, "zeros");
    int64_t big9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK_FAILS(cn_zeros(big9, 9, CN_F32, cn_cpu()), CN_ERR_INVALID_ARG, "ndim");
    CHECK_FAILS(cn_zeros(neg, 1, (cn_dtype)42, cn_cpu()), CN_ERR_DTYPE, "dtype");
    cn_device bad = {5, 0, 0, 0};
    CHECK_FAILS(cn_zeros(neg, 1, CN_F32, bad), CN_ERR_UNKNOWN_DEVICE, "backend id 5");
    cn_device cpu3 = {0, 3, 0, 0};
    CHECK_FAILS(cn_zeros(neg, 1, CN_F32, cpu3), CN_ERR_DEVICE_UNAVAILABLE, "cpu:3");
    CHECK_FAILS(cn_from_data(NULL, neg, 1, CN_F32, cn_cpu()), CN_ERR_NULL_ARG, "data");
}

static void test_device_parse(void) {
    cn_device d;
    CHECK(cn_device_parse("cpu", &d) == CN_OK && cn_device_eq(d, cn_cpu()));
    CHECK(cn_device_parse("cpu:0", &d) == CN_OK && cn_device_eq(d, cn_cpu()));
    cn_clear_error();
    CHECK(cn_device_parse("tpu:0", &d) == CN_ERR_UNKNOWN_DEVICE);
    CHECK(strstr(cn_last_error(), "tpu") != NULL);
    cn_clear_error();
    CHECK(cn_device_parse("cpu:x", &d) == CN_ERR_UNKNOWN_DEVICE);
    cn_clear_error();
    CHECK(cn_device_parse("cpu:1", &d) == CN_ERR_DEVICE_UNAVAILABLE);
    cn_clear_error();
    CHECK(cn_backend_compiled("cpu") && cn_backend_device_count("cpu") == 1);
}

static void test_default_device_env(void) {
    setenv("CINDER_DEVICE", "cpu", 1);
    CHECK(cn_device_eq(cn_default_device(), cn_cpu()));
    setenv("CINDER_DEVICE", "warp:0", 1);
    cn_clear_error();
    cn_device d = cn_default_device();
    CHECK(d.backend == CN_BACKEND_INVALID);
    CHECK(cn_last_status() == CN_ERR_UNKNOWN_DEVICE && strstr(cn_last_error(), "CINDER_DEVICE"));
    int64_t n = 2;
    CHECK(cn_zeros(&n, 1, CN_F32, d) == NULL);
    cn_clear_error();
    unsetenv("CINDER_DEVICE");
    CHECK(cn_device_eq(cn_default_device(), cn_cpu()));
}

static void test_to_device_same(void) {
    int64_t n = 3;
    cn_tensor *t = cn_ones(&n, 1, CN_F32, cn_cpu());
    int64_t bytes = cn_live_bytes();
    cn_tensor *u = cn_to_device(t, cn_cpu());
    CHECK(u && u != t && cn_live_bytes() == bytes); /* same data, no copy */
    double ones[3] = {1, 1, 1};
    th_check_values("to_device same", u, ones, 3, 0);
    /* to the autodiff device over the CPU and back: shared, untracked */
    cn_tensor *ad = cn_to_device(t, cn_autodiff(cn_cpu()));
    CHECK(ad && cn_device_of(ad).autodiff && !cn_requires_grad(ad) && cn_live_bytes() == bytes);
    cn_release(ad);
    cn_release(u);
    cn_release(t);
}

int main(void) {
    RUN(test_from_data_and_metadata);
    RUN(test_scalar_tensor);
    RUN(test_constants);
    RUN(test_arange_and_eye);
    RUN(test_read_errors);
    RUN(test_creation_errors);
    RUN(test_device_parse);
    RUN(test_default_device_env);
    RUN(test_to_device_same);
    return th_finish();
}
