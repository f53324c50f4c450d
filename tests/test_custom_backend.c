/* A program registers its own backend at run time: one that forwards to the CPU kernels and
 * counts the calls. Ops on it run through the router like on any built-in backend. */
#include "harness.h"

static const cn_backend *cpu;
static int64_t calls[CN_OP_COUNT];

static cn_status counting_kernel(const cn_kernel_args *a) {
    calls[a->op]++;
    return cpu->kernels[a->op](a);
}

static int counting_id = -1;

static cn_device counting_device(void) {
    if (counting_id < 0) {
        cpu = cn_backend_get(CN_BACKEND_CPU);
        cn_backend b = *cpu;
        b.name = "counting";
        for (int op = 0; op < CN_OP_COUNT; op++)
            b.kernels[op] = cpu->kernels[op] ? counting_kernel : NULL;
        b.kernels[CN_OP_SOFTMAX] = NULL; /* a backend that lacks an op */
        counting_id = cn_backend_register(&b);
    }
    cn_device d = {(int16_t)counting_id, 0, 0, 0};
    return d;
}

static void test_register_and_run(void) {
    cn_device dev = counting_device();
    CHECK(counting_id > 0);
    CHECK(cn_backend_find("counting") == counting_id);
    cn_device parsed;
    CHECK(cn_device_parse("counting:0", &parsed) == CN_OK && cn_device_eq(parsed, dev));

    double av[4] = {1, 2, 3, 4}, bv[2] = {10, 20};
    int64_t sa[2] = {2, 2}, sb[1] = {2};
    cn_tensor *a = cn_from_data(av, sa, 2, CN_F64, dev);
    cn_tensor *b = cn_from_data(bv, sb, 1, CN_F64, dev);
    int64_t before_add = calls[CN_OP_ADD], before_mm = calls[CN_OP_MATMUL];
    cn_tensor *c = cn_add(a, b);
    cn_tensor *m = cn_matmul(a, c);
    CHECK(calls[CN_OP_ADD] == before_add + 1);
    CHECK(calls[CN_OP_MATMUL] == before_mm + 1);
    CHECK(cn_device_eq(cn_device_of(m), dev));
    /* a = [[1,2],[3,4]], c = [[11,22],[13,24]] -> a @ c by hand */
    double want[4] = {1 * 11 + 2 * 13, 1 * 22 + 2 * 24, 3 * 11 + 4 * 13, 3 * 22 + 4 * 24};
    th_check_values("matmul on custom backend", m, want, 4, 1e-12);
    cn_release(a);
    cn_release(b);
    cn_release(c);
    cn_release(m);
}

static void test_to_device_round_trip(void) {
    cn_device dev = counting_device();
    double v[3] = {1.5, -2, 7};
    int64_t n = 3;
    cn_tensor *t = cn_from_data(v, &n, 1, CN_F64, cn_cpu());
    cn_tensor *on = cn_to_device(t, dev);
    CHECK(on && cn_device_eq(cn_device_of(on), dev));
    cn_tensor *back = cn_to_device(on, cn_cpu());
    th_check_values("round trip", back, v, 3, 0);
    cn_release(t);
    cn_release(on);
    cn_release(back);
}

static void test_missing_kernel(void) {
    cn_device dev = counting_device();
    int64_t n = 4;
    cn_tensor *t = cn_ones(&n, 1, CN_F32, dev);
    CHECK_FAILS(cn_softmax(t, 0), CN_ERR_NO_KERNEL, "backend 'counting' has no kernel for "
                                                    "'softmax'");
    /* the runtime still works, and the input is untouched */
    double ones[4] = {1, 1, 1, 1};
    th_check_values("input after failure", t, ones, 4, 0);
    cn_release(t);
}

static void test_device_mismatch(void) {
    cn_device dev = counting_device();
    int64_t n = 2;
    cn_tensor *a = cn_ones(&n, 1, CN_F32, cn_cpu());
    cn_tensor *b = cn_ones(&n, 1, CN_F32, dev);
    CHECK_FAILS(cn_add(a, b), CN_ERR_DEVICE_MISMATCH, "cpu:0");
    CHECK_FAILS(cn_add(a, b), CN_ERR_DEVICE_MISMATCH, "counting:0");
    CHECK_FAILS(cn_add(a, b), CN_ERR_DEVICE_MISMATCH, "cn_to_device");
    cn_tensor *parts[2] = {a, b};
    CHECK_FAILS(cn_cat(parts, 2, 0), CN_ERR_DEVICE_MISMATCH, "cat");
    cn_release(a);
    cn_release(b);
}

static void test_register_errors(void) {
    cn_backend b = *cn_backend_get(CN_BACKEND_CPU);
    cn_clear_error();
    CHECK(cn_backend_register(&b) == -1); /* "cpu" is taken */
    CHECK(cn_last_status() == CN_ERR_INVALID_ARG && strstr(cn_last_error(), "already"));
    b.name = "incomplete";
    b.alloc = NULL;
    cn_clear_error();
    CHECK(cn_backend_register(&b) == -1);
    CHECK(cn_last_status() == CN_ERR_INVALID_ARG && strstr(cn_last_error(), "alloc"));
    cn_clear_error();
}

int main(void) {
    RUN(test_register_and_run);
    RUN(test_to_device_round_trip);
    RUN(test_missing_kernel);
    RUN(test_device_mismatch);
    RUN(test_register_errors);
    return th_finish();
}
