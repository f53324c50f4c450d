/* cn_format and cn_print: a tensor's values as PyTorch's repr writes them.
 *
 * The oracle is PyTorch itself: tests/data/gen_format.py wrote what repr() prints for each case
 * of tests/data/format_cases.inc (with cinder's dtype and device names), and each case says how to
 * build the same tensor here. Then the snprintf contract, cn_print, the errors, and that printing
 * neither leaks nor records anything. */
#include "harness.h"

#include <errno.h>
#include <stdint.h>

typedef struct format_case {
    const char *name;
    cn_dtype dtype;
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    double a, b, d;       /* element i = (a + b * i) / d */
    const char *specials; /* "pos:value,..." (value: nan, inf, -inf, -0 or a number) */
    const char *view;     /* "", "t", "s:DIM:START:END:STEP", "e:N,M,..." */
    const char *device;   /* "cpu", "grad", "mock" */
    const char *want;
} format_case;

static const format_case cases[] = {
#include "data/format_cases.inc"
};

#define N_CASES (sizeof cases / sizeof *cases)

/* ---- building a case's tensor --------------------------------------------------------------- */

/* A backend registered at run time: the CPU's vtable under another name, so tensors on it carry
 * a device suffix. */
static cn_device mock_device(void) {
    static int id = -1;
    if (id < 0) {
        cn_backend b = *cn_backend_get(CN_BACKEND_CPU);
        b.name = "mock";
        id = cn_backend_register(&b);
    }
    cn_device d = {(int16_t)id, 0, 0, 0};
    return d;
}

static double special_value(const char *text) {
    if (strcmp(text, "nan") == 0) return NAN;
    if (strcmp(text, "inf") == 0) return INFINITY;
    if (strcmp(text, "-inf") == 0) return -INFINITY;
    if (strcmp(text, "-0") == 0) return -0.0;
    return strtod(text, NULL);
}

/* The case's values as host data in its dtype; f16 and bf16 go through f64 (their values are
 * exact in both). */
static cn_tensor *build(const format_case *c) {
    int64_t n = 1;
    for (int i = 0; i < c->ndim; i++)
        n *= c->shape[i];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = (c->a + c->b * (double)i) / c->d;
    for (const char *p = c->specials; *p;) {
        char item[64];
        size_t len = strcspn(p, ",");
        snprintf(item, sizeof item, "%.*s", (int)len, p);
        char *colon = strchr(item, ':');
        *colon = '\0';
        v[atoll(item)] = special_value(colon + 1);
        p += len + (p[len] == ',');
    }
    void *data = malloc(8 * (size_t)(n ? n : 1));
    cn_dtype host = c->dtype;
    for (int64_t i = 0; i < n; i++) {
        switch (c->dtype) {
        case CN_F32:
            ((float *)data)[i] = (float)v[i];
            break;
        case CN_I32:
            ((int32_t *)data)[i] = (int32_t)v[i];
            break;
        case CN_I64:
            ((int64_t *)data)[i] = (int64_t)v[i];
            break;
        case CN_U8:
            ((uint8_t *)data)[i] = (uint8_t)v[i];
            break;
        case CN_BOOL:
            ((uint8_t *)data)[i] = v[i] != 0;
            break;
        default:
            ((double *)data)[i] = v[i];
            host = CN_F64;
            break; /* f64, f16, bf16 */
        }
    }
    cn_tensor *t = cn_from_data(data, c->shape, c->ndim, host, cn_cpu());
    free(v);
    free(data);
    if (host != c->dtype) {
        cn_tensor *cast = cn_cast(t, c->dtype);
        cn_release(t);
        t = cast;
    }
    if (strcmp(c->device, "mock") == 0) {
        cn_tensor *moved = cn_to_device(t, mock_device());
        cn_release(t);
        t = moved;
    } else if (strcmp(c->device, "grad") == 0) {
        cn_tensor *moved = cn_to_device(t, cn_autodiff(cn_cpu()));
        cn_release(t);
        t = cn_require_grad(moved);
    }
    cn_tensor *view = NULL;
    if (c->view[0] == '\0') return t;
    if (strcmp(c->view, "t") == 0) {
        view = cn_transpose(t, 0, 1);
    } else if (c->view[0] == 's') {
        int dim;
        long long start, end, step;
        sscanf(c->view, "s:%d:%lld:%lld:%lld", &dim, &start, &end, &step);
        view = cn_slice(t, dim, start, end, step);
    } else if (c->view[0] == 'e') {
        int64_t shape[CN_MAX_DIMS];
        int nd = 0;
        for (const char *p = c->view + 2; *p; p += (*p == ','))
            shape[nd++] = strtoll(p, (char **)&p, 10);
        view = cn_expand(t, shape, nd);
    }
    cn_release(t);
    return view;
}

/* ---- the oracle ----------------------------------------------------------------------------- */

static void test_matches_pytorch_repr(void) {
    for (size_t k = 0; k < N_CASES; k++) {
        const format_case *c = &cases[k];
        cn_tensor *t = build(c);
        CHECK(t != NULL);
        if (!t) continue;
        int n = cn_format(t, NULL, 0);
        char *got = malloc((size_t)(n > 0 ? n : 0) + 1);
        CHECK(n >= 0 && cn_format(t, got, (size_t)n + 1) == n);
        if (n < 0 || strcmp(got, c->want) != 0) {
            fprintf(stderr, "case %s:\n--- want\n%s\n--- got\n%s\n", c->name, c->want,
                    n < 0 ? cn_last_error() : got);
            th_checks_failed++;
        }
        free(got);
        cn_release(t);
    }
    printf("     %zu cases against PyTorch's repr\n", N_CASES);
}

/* ---- the snprintf contract, cn_print, errors ------------------------------------------------ */

static cn_tensor *two_by_two(void) {
    float v[4] = {1, 2, 3, 4};
    int64_t shape[2] = {2, 2};
    return cn_from_data(v, shape, 2, CN_F32, cn_cpu());
}

static void test_snprintf_contract(void) {
    const char *want = "tensor([[1., 2.],\n        [3., 4.]])";
    int len = (int)strlen(want);
    cn_tensor *t = two_by_two();
    CHECK(cn_format(t, NULL, 0) == len); /* measuring */
    char buf[64];
    memset(buf, 'x', sizeof buf);
    CHECK(cn_format(t, buf, 10) == len); /* truncated, NUL-terminated, the full length returned */
    CHECK(strcmp(buf, "tensor([[") == 0 && buf[10] == 'x');
    CHECK(cn_format(t, buf, 1) == len && buf[0] == '\0');
    CHECK(cn_format(t, buf, (size_t)len) == len && strlen(buf) == (size_t)len - 1);
    CHECK(cn_format(t, buf, sizeof buf) == len && strcmp(buf, want) == 0);
    cn_release(t);
}

static void test_print_writes_text_and_newline(void) {
    cn_tensor *t = two_by_two();
    FILE *f = tmpfile();
    CHECK(f != NULL);
    CHECK(cn_print(t, f) == CN_OK);
    char buf[128] = {0};
    rewind(f);
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    CHECK(got > 0 && strcmp(buf, "tensor([[1., 2.],\n        [3., 4.]])\n") == 0);
    fclose(f);
    cn_release(t);
}

static void test_errors(void) {
    char buf[32];
    cn_clear_error();
    CHECK(cn_format(NULL, buf, sizeof buf) == -1);
    CHECK(cn_last_status() == CN_ERR_NULL_ARG && strstr(cn_last_error(), "format"));
    /* a NULL from an earlier failed call keeps that call's error */
    cn_set_error(CN_ERR_SHAPE, "matmul", "an earlier failure");
    CHECK(cn_format(NULL, buf, sizeof buf) == -1 && cn_last_status() == CN_ERR_SHAPE);
    cn_clear_error();

    cn_tensor *t = two_by_two();
    CHECK(cn_format(t, NULL, 5) == -1);
    CHECK(cn_last_status() == CN_ERR_NULL_ARG && strstr(cn_last_error(), "buf is NULL"));
    cn_clear_error();
    CHECK(cn_print(t, NULL) == CN_ERR_NULL_ARG);
    cn_clear_error();
    CHECK(cn_print(NULL, stdout) == CN_ERR_NULL_ARG);
    cn_clear_error();
    cn_release(t);
}

/* Every allocation a call makes fails in turn (a summarised, transposed tensor, so slicing,
 * concatenating, casting and reading all allocate): each failure is that allocation's error, and
 * nothing leaks (the runner counts tensors, ASan the rest). */
static void test_allocation_failures(void) {
    cn_tensor *base = cn_arange(0, 2400, 1, CN_F32, cn_cpu());
    int64_t shape[2] = {40, 60};
    cn_tensor *m = cn_reshape(base, shape, 2);
    cn_tensor *t = cn_transpose(m, 0, 1);
    char want[2048], buf[2048];
    int len = cn_format(t, want, sizeof want);
    CHECK(len > 0 && len < (int)sizeof want);
    int64_t before = cn_alloc_count();
    CHECK(cn_format(t, buf, sizeof buf) == len);
    int64_t n = cn_alloc_count() - before;
    CHECK(n > 3);
    for (int64_t k = 1; k <= n; k++) {
        cn_clear_error();
        cn_alloc_fail_after(k);
        int got = cn_format(t, buf, sizeof buf);
        cn_alloc_fail_after(0);
        CHECK(got == -1 && cn_last_status() == CN_ERR_OUT_OF_MEMORY);
    }
    cn_clear_error();
    CHECK(cn_format(t, buf, sizeof buf) == len && strcmp(buf, want) == 0);
    cn_release(t);
    cn_release(m);
    cn_release(base);
}

/* Printing a tracked tensor records nothing: its gradient is unchanged by it. */
static void test_printing_records_nothing(void) {
    cn_device dev = cn_autodiff(cn_cpu());
    double v[3] = {1, 2, 3};
    int64_t shape[1] = {3};
    cn_tensor *x = cn_require_grad(cn_from_data(v, shape, 1, CN_F64, dev));
    cn_tensor *y = cn_mul(x, x);
    char buf[128];
    CHECK(cn_format(y, buf, sizeof buf) > 0);
    CHECK(strcmp(buf, "tensor([1., 4., 9.], dtype=f64, requires_grad=True)") == 0);
    cn_tensor *loss = cn_sum(y);
    cn_grads *g = cn_backward(loss);
    CHECK(g != NULL);
    double dx[3] = {0};
    CHECK(g && cn_read(cn_grad(g, x), dx, sizeof dx) == CN_OK);
    CHECK(dx[0] == 2 && dx[1] == 4 && dx[2] == 6);
    cn_grads_free(g);
    cn_release(loss);
    cn_release(y);
    cn_release(x);
}

/* On a GPU (skipped without one): the values are read back from the device, and the suffix is
 * PyTorch's for the same tensor. */
static void test_cuda_tensor(void) {
    if (!cn_backend_compiled("cuda") || cn_backend_device_count("cuda") < 1) {
        printf("     no CUDA device: skipped\n");
        return;
    }
    cn_device cuda;
    CHECK(cn_device_parse("cuda:0", &cuda) == CN_OK);
    cn_tensor *t = two_by_two();
    cn_tensor *g = cn_to_device(t, cuda);
    cn_tensor *gt = cn_transpose(g, 0, 1);
    char buf[128];
    CHECK(cn_format(gt, buf, sizeof buf) > 0);
    CHECK(strcmp(buf, "tensor([[1., 3.],\n        [2., 4.]], device='cuda:0')") == 0);
    cn_release(gt);
    cn_release(g);
    cn_release(t);
}

int main(void) {
    RUN(test_matches_pytorch_repr);
    RUN(test_snprintf_contract);
    RUN(test_print_writes_text_and_newline);
    RUN(test_errors);
    RUN(test_allocation_failures);
    RUN(test_printing_records_nothing);
    RUN(test_cuda_tensor);
    return th_finish();
}
