/* Zero-copy sharing: tensors over caller-owned memory (cn_from_memory), the data address
 * (cn_data_ptr), and DLPack export/import. The oracle is the caller's own buffer: pointers must
 * be the buffer's addresses, values are computed by hand from the buffer's layout, and deleters
 * count their calls (exactly one, only after the last view is gone, never on a failure). */
#include <dlpack/dlpack.h>
#include <stdint.h>

#include "harness.h"

/* ---- helpers -------------------------------------------------------------------------------- */

/* A cn_deleter that counts its calls in *(int *)ctx and checks it is given the right memory. */
static void *expected_data;
static void count_delete(void *data, void *ctx) {
    CHECK(data == expected_data);
    (*(int *)ctx)++;
}

/* A DLManagedTensor built by hand, as another framework would; its deleter counts. */
typedef struct handmade {
    DLManagedTensor m; /* first: the deleter gets its address */
    int64_t shape[CN_MAX_DIMS];
    int64_t strides[CN_MAX_DIMS];
    int deleted;
} handmade;

static void handmade_delete(DLManagedTensor *self) { ((handmade *)self)->deleted++; }

static void handmade_init(handmade *h, void *data, uint64_t byte_offset, DLDataType dtype,
                          const int64_t *shape, const int64_t *strides, int ndim) {
    memset(h, 0, sizeof *h);
    h->m.dl_tensor.data = data;
    h->m.dl_tensor.byte_offset = byte_offset;
    h->m.dl_tensor.device.device_type = kDLCPU;
    h->m.dl_tensor.device.device_id = 0;
    h->m.dl_tensor.ndim = ndim;
    h->m.dl_tensor.dtype = dtype;
    for (int d = 0; d < ndim && d < CN_MAX_DIMS; d++) {
        h->shape[d] = shape[d];
        if (strides) h->strides[d] = strides[d];
    }
    h->m.dl_tensor.shape = h->shape;
    h->m.dl_tensor.strides = strides ? h->strides : NULL;
    h->m.manager_ctx = h;
    h->m.deleter = handmade_delete;
}

static DLDataType dl_type(uint8_t code, uint8_t bits) {
    DLDataType t = {code, bits, 1};
    return t;
}

/* Checks the last error: `status`, a message starting with "<op>: " and naming `arg`. */
static void check_error(int line, cn_status status, const char *op, const char *arg) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s: ", op);
    if (cn_last_status() != status || strncmp(cn_last_error(), prefix, strlen(prefix)) != 0 ||
        !strstr(cn_last_error(), arg)) {
        fprintf(stderr, "line %d: got %s \"%s\", want %s from %s naming \"%s\"\n", line,
                cn_status_name(cn_last_status()), cn_last_error(), cn_status_name(status), op,
                arg);
        th_checks_failed++;
    }
    cn_clear_error();
}

/* ---- cn_from_memory ------------------------------------------------------------------------- */

static void test_from_memory_shares_the_buffer_and_deletes_once(void) {
    int64_t live_bytes = cn_live_bytes();
    float buf[6] = {1, 2, 3, 4, 5, 6};
    int deleted = 0;
    expected_data = buf;
    int64_t shape[2] = {2, 3};
    cn_tensor *t = cn_from_memory(buf, shape, 2, NULL, CN_F32, cn_cpu(), count_delete, &deleted);
    CHECK(t != NULL);
    CHECK(cn_data_ptr(t) == buf);
    CHECK(cn_is_contiguous(t) && cn_strides(t)[0] == 3 && cn_strides(t)[1] == 1);
    CHECK(cn_live_bytes() == live_bytes + (int64_t)sizeof buf);
    double want[6] = {1, 2, 3, 4, 5, 6};
    th_check_values("from_memory", t, want, 6, 0);

    /* ops read it; a result is new memory, not the buffer */
    cn_tensor *sum = cn_add(t, t);
    double twice[6] = {2, 4, 6, 8, 10, 12};
    th_check_values("t + t", sum, twice, 6, 0);
    CHECK(cn_data_ptr(sum) != buf);

    /* writes into it land in the caller's buffer */
    CHECK(cn_copy_(t, sum) == CN_OK);
    CHECK(buf[0] == 2 && buf[5] == 12);
    cn_tensor *col = cn_slice(t, 1, 1, 2, 1); /* [2, 1]: buf[1], buf[4] */
    cn_tensor *zero = cn_zeros(NULL, 0, CN_F32, cn_cpu());
    CHECK(cn_copy_(col, zero) == CN_OK);
    CHECK(buf[1] == 0 && buf[4] == 0 && buf[0] == 2 && buf[2] == 6);
    CHECK(cn_data_ptr(col) == &buf[1]);

    cn_release(sum);
    cn_release(zero);
    cn_release(t);
    CHECK(deleted == 0); /* col still views the buffer */
    cn_release(col);
    CHECK(deleted == 1);
    CHECK(cn_live_bytes() == live_bytes);
}

static void test_from_memory_with_strides_reads_the_strided_layout(void) {
    /* a [3, 2] view of a 4x5 i32 grid from buf[1]: rows 5 elements apart, columns 2 */
    int32_t buf[20];
    for (int i = 0; i < 20; i++) buf[i] = 100 + i;
    int deleted = 0;
    expected_data = &buf[1];
    int64_t shape[2] = {3, 2}, strides[2] = {5, 2};
    cn_tensor *t =
        cn_from_memory(&buf[1], shape, 2, strides, CN_I32, cn_cpu(), count_delete, &deleted);
    CHECK(t != NULL && !cn_is_contiguous(t));
    CHECK(cn_strides(t)[0] == 5 && cn_strides(t)[1] == 2);
    double want[6] = {101, 103, 106, 108, 111, 113};
    th_check_values("strided", t, want, 6, 0);
    cn_tensor *doubled = cn_mul_scalar(t, 2);
    double want2[6] = {202, 206, 212, 216, 222, 226};
    th_check_values("strided * 2", doubled, want2, 6, 0);
    /* stride 0 repeats an element */
    int64_t rep_shape[2] = {2, 3}, rep_strides[2] = {1, 0};
    cn_tensor *rep = cn_from_memory(buf, rep_shape, 2, rep_strides, CN_I32, cn_cpu(), NULL, NULL);
    double want3[6] = {100, 100, 100, 101, 101, 101};
    th_check_values("stride 0", rep, want3, 6, 0);
    cn_release(rep);
    cn_release(doubled);
    cn_release(t);
    CHECK(deleted == 1);
}

static void test_from_memory_without_deleter_leaves_the_memory_to_the_caller(void) {
    double *buf = malloc(4 * sizeof(double));
    for (int i = 0; i < 4; i++) buf[i] = i * 0.5;
    int64_t n = 4;
    cn_tensor *t = cn_from_memory(buf, &n, 1, NULL, CN_F64, cn_cpu(), NULL, NULL);
    CHECK(t != NULL && cn_data_ptr(t) == buf);
    cn_tensor *v = cn_slice(t, 0, 1, 4, 2);
    double want[2] = {0.5, 1.5};
    th_check_values("slice", v, want, 2, 0);
    cn_release(v);
    cn_release(t);
    buf[3] = 7; /* still ours: cinder freed nothing (ASan would catch a use after free) */
    free(buf);
}

static void test_from_memory_is_never_recycled(void) {
    /* small external storage would fit the spare-tensor cache, large the CPU's free-block cache:
     * both must go back through the deleter at once, and never be handed out again. A static
     * buffer given to free() would make ASan fail the test. */
    static float small[4], large[4096];
    int deleted = 0;
    int64_t n = 4, big = 4096;
    expected_data = small;
    cn_tensor *t = cn_from_memory(small, &n, 1, NULL, CN_F32, cn_cpu(), count_delete, &deleted);
    cn_release(t);
    CHECK(deleted == 1);
    cn_tensor *fresh = cn_empty(&n, 1, CN_F32, cn_cpu());
    CHECK(fresh != NULL && cn_data_ptr(fresh) != small);
    cn_release(fresh);
    expected_data = large;
    t = cn_from_memory(large, &big, 1, NULL, CN_F32, cn_cpu(), count_delete, &deleted);
    cn_release(t);
    CHECK(deleted == 2);
    fresh = cn_empty(&big, 1, CN_F32, cn_cpu());
    CHECK(fresh != NULL && cn_data_ptr(fresh) != large);
    cn_release(fresh);
}

static void test_from_memory_on_an_autodiff_device_is_a_leaf(void) {
    float buf[3] = {1, 2, 3};
    int deleted = 0;
    expected_data = buf;
    int64_t n = 3;
    cn_device ad = cn_autodiff(cn_cpu());
    cn_tensor *w = cn_require_grad(
        cn_from_memory(buf, &n, 1, NULL, CN_F32, ad, count_delete, &deleted));
    CHECK(w != NULL && cn_device_eq(cn_device_of(w), ad));
    CHECK(cn_data_ptr(w) == buf);
    cn_tensor *ww = cn_mul(w, w);
    cn_tensor *loss = cn_sum(ww); /* d/dw = 2w */
    cn_grads *g = cn_backward(loss);
    CHECK(g != NULL);
    double want[3] = {2, 4, 6};
    th_check_values("grad", cn_grad(g, w), want, 3, 0);
    cn_grads_free(g);
    cn_release(loss);
    cn_release(ww);
    CHECK(deleted == 0);
    cn_release(w);
    CHECK(deleted == 1);
}

static void test_from_memory_refuses_bad_arguments_without_deleting(void) {
    int64_t live = cn_live_tensors(), live_bytes = cn_live_bytes();
    static float buf[16];
    int deleted = 0;
    expected_data = buf;
    int64_t s2[2] = {2, 2}, neg[2] = {2, -1}, huge[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
    int64_t neg_st[2] = {-2, 1}, far_st[2] = {INT64_MAX / 2, 1}, s3[1] = {3};
    int64_t edge_st[1] = {INT64_MAX / 2 + 1};
    cn_device bad_backend = {99, 0, 0, 0}, bad_index = {CN_BACKEND_CPU, 5, 0, 0};
#define BAD(call, st, a)                                                                           \
    do {                                                                                           \
        cn_clear_error();                                                                          \
        cn_tensor *r_ = (call);                                                                    \
        CHECK(r_ == NULL);                                                                         \
        cn_release(r_);                                                                            \
        check_error(__LINE__, st, "from_memory", a);                                               \
    } while (0)
    BAD(cn_from_memory(NULL, s2, 2, NULL, CN_F32, cn_cpu(), count_delete, &deleted),
        CN_ERR_NULL_ARG, "'data'");
    BAD(cn_from_memory(buf, NULL, 2, NULL, CN_F32, cn_cpu(), count_delete, &deleted),
        CN_ERR_NULL_ARG, "'shape'");
    BAD(cn_from_memory(buf, s2, -1, NULL, CN_F32, cn_cpu(), count_delete, &deleted),
        CN_ERR_INVALID_ARG, "ndim = -1");
    BAD(cn_from_memory(buf, s2, 9, NULL, CN_F32, cn_cpu(), count_delete, &deleted),
        CN_ERR_INVALID_ARG, "ndim = 9");
    BAD(cn_from_memory(buf, neg, 2, NULL, CN_F32, cn_cpu(), count_delete, &deleted),
        CN_ERR_INVALID_ARG, "shape [2, -1]");
    BAD(cn_from_memory(buf, s2, 2, neg_st, CN_F32, cn_cpu(), count_delete, &deleted),
        CN_ERR_INVALID_ARG, "strides [-2, 1]");
    BAD(cn_from_memory(buf, huge, 2, NULL, CN_F32, cn_cpu(), count_delete, &deleted),
        CN_ERR_OVERFLOW, "shape [");
    BAD(cn_from_memory(buf, s2, 2, far_st, CN_F32, cn_cpu(), count_delete, &deleted),
        CN_ERR_OVERFLOW, "strides [");
    BAD(cn_from_memory(buf, s3, 1, edge_st, CN_U8, cn_cpu(), count_delete, &deleted),
        CN_ERR_OVERFLOW, "strides [");
    BAD(cn_from_memory(buf, s2, 2, NULL, CN_DTYPE_COUNT, cn_cpu(), count_delete, &deleted),
        CN_ERR_DTYPE, "is not a cn_dtype");
    BAD(cn_from_memory(buf, s2, 2, NULL, (cn_dtype)-1, cn_cpu(), count_delete, &deleted),
        CN_ERR_DTYPE, "dtype value -1");
    BAD(cn_from_memory((char *)buf + 2, s2, 2, NULL, CN_F32, cn_cpu(), count_delete, &deleted),
        CN_ERR_INVALID_ARG, "not aligned to 4 bytes");
    BAD(cn_from_memory(buf, s2, 2, NULL, CN_F32, bad_backend, count_delete, &deleted),
        CN_ERR_UNKNOWN_DEVICE, "device");
    BAD(cn_from_memory(buf, s2, 2, NULL, CN_F32, bad_index, count_delete, &deleted),
        CN_ERR_DEVICE_UNAVAILABLE, "cpu:5");
#undef BAD
    CHECK(deleted == 0);
    CHECK(cn_live_tensors() == live && cn_live_bytes() == live_bytes);

    /* NULL data is fine without elements, and the deleter still runs once */
    int64_t empty[2] = {0, 3};
    expected_data = NULL;
    cn_tensor *t = cn_from_memory(NULL, empty, 2, NULL, CN_F32, cn_cpu(), count_delete, &deleted);
    CHECK(t != NULL && cn_numel(t) == 0);
    cn_release(t);
    CHECK(deleted == 1);
}

/* ---- cn_data_ptr ---------------------------------------------------------------------------- */

static void test_data_ptr_is_the_first_element(void) {
    int64_t shape[2] = {3, 4};
    cn_tensor *t = cn_arange(0, 12, 1, CN_F64, cn_cpu());
    cn_tensor *m = cn_reshape(t, shape, 2);
    double *base = cn_data_ptr(m);
    CHECK(base != NULL && base == cn_data_ptr(t));
    CHECK(base[5] == 5);
    cn_tensor *s = cn_slice(m, 0, 1, 3, 1);   /* rows 1, 2: starts at element 4 */
    cn_tensor *tr = cn_transpose(s, 0, 1);    /* same first element, other strides */
    CHECK((double *)cn_data_ptr(s) == base + 4);
    CHECK((double *)cn_data_ptr(tr) == base + 4);
    CHECK(cn_strides(tr)[0] == 1 && cn_strides(tr)[1] == 4);
    base[4] = -1; /* writes are visible to cinder */
    double first;
    cn_tensor *row = cn_slice(tr, 0, 0, 1, 1);
    cn_tensor *one = cn_slice(row, 1, 0, 1, 1);
    CHECK(cn_read(one, &first, sizeof first) == CN_OK && first == -1);
    /* a tracked tensor gives its concrete data */
    cn_tensor *ad = cn_require_grad(cn_to_device(t, cn_autodiff(cn_cpu())));
    CHECK(ad != NULL && cn_data_ptr(ad) == base);
    cn_release(ad);
    cn_release(one);
    cn_release(row);
    cn_release(tr);
    cn_release(s);
    cn_release(m);
    cn_release(t);
    cn_clear_error();
    CHECK(cn_data_ptr(NULL) == NULL);
    check_error(__LINE__, CN_ERR_NULL_ARG, "data_ptr", "'t'");
}

/* ---- DLPack export -------------------------------------------------------------------------- */

/* A consumer's deleter wrapped to count: the original is kept beside. */
static void (*original_deleter)(DLManagedTensor *);
static int exported_deleted;
static void counting_deleter(DLManagedTensor *m) {
    exported_deleted++;
    original_deleter(m);
}

static void test_round_trip_shares_memory_and_deletes_once(void) {
    int64_t live = cn_live_tensors(), live_bytes = cn_live_bytes();
    int64_t shape[2] = {4, 5};
    cn_tensor *flat = cn_arange(0, 20, 1, CN_F32, cn_cpu());
    cn_tensor *t = cn_reshape(flat, shape, 2);
    cn_tensor *rows = cn_slice(t, 0, 1, 4, 1);
    cn_tensor *v = cn_transpose(rows, 0, 1); /* [5, 3], offset 5 */
    cn_release(rows);
    cn_release(flat);
    DLManagedTensor *m = cn_to_dlpack(v);
    CHECK(m != NULL);
    if (!m) return;
    const DLTensor *dl = &m->dl_tensor;
    CHECK(dl->device.device_type == kDLCPU && dl->device.device_id == 0);
    CHECK(dl->dtype.code == kDLFloat && dl->dtype.bits == 32 && dl->dtype.lanes == 1);
    CHECK(dl->ndim == 2 && dl->shape[0] == 5 && dl->shape[1] == 3);
    CHECK(dl->strides && dl->strides[0] == 1 && dl->strides[1] == 5);
    CHECK(dl->byte_offset == 5 * sizeof(float));
    CHECK((char *)dl->data + dl->byte_offset == cn_data_ptr(v));
    CHECK(dl->data == cn_data_ptr(t));

    original_deleter = m->deleter;
    m->deleter = counting_deleter;
    exported_deleted = 0;
    cn_tensor *back = cn_from_dlpack(m);
    CHECK(back != NULL && cn_data_ptr(back) == cn_data_ptr(v));
    CHECK(cn_strides(back)[0] == 1 && cn_strides(back)[1] == 5);
    double want[15] = {5, 10, 15, 6, 11, 16, 7, 12, 17, 8, 13, 18, 9, 14, 19};
    th_check_values("round trip", back, want, 15, 0);
    cn_release(v);
    cn_release(t);
    /* the storage lives on through the managed tensor that `back` owns */
    th_check_values("after the source is gone", back, want, 15, 0);
    CHECK(exported_deleted == 0);
    cn_release(back);
    CHECK(exported_deleted == 1);
    CHECK(cn_live_tensors() == live && cn_live_bytes() == live_bytes);
}

static void test_export_maps_every_dtype(void) {
    static const struct {
        cn_dtype dtype;
        uint8_t code, bits;
    } map[] = {{CN_F32, kDLFloat, 32}, {CN_F64, kDLFloat, 64}, {CN_F16, kDLFloat, 16},
               {CN_BF16, kDLBfloat, 16}, {CN_I32, kDLInt, 32},  {CN_I64, kDLInt, 64},
               {CN_U8, kDLUInt, 8},      {CN_BOOL, kDLUInt, 8}};
    /* one row per plain dtype; the quantized ones (from CN_Q8_TENSOR on) are refused, as
     * tests/test_quant.c checks */
    _Static_assert(sizeof map / sizeof map[0] == CN_Q8_TENSOR, "one row per plain dtype");
    double vals[3] = {0, 1, 1};
    int64_t n = 3;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        cn_tensor *t = th_tensor(vals, &n, 1, map[i].dtype);
        DLManagedTensor *m = cn_to_dlpack(t);
        CHECK(m != NULL);
        if (!m) {
            cn_release(t);
            continue;
        }
        CHECK(m->dl_tensor.dtype.code == map[i].code && m->dl_tensor.dtype.bits == map[i].bits &&
              m->dl_tensor.dtype.lanes == 1);
        cn_tensor *back = cn_from_dlpack(m);
        cn_dtype want = map[i].dtype == CN_BOOL ? CN_U8 : map[i].dtype; /* 0.6 has no bool */
        CHECK(back != NULL && cn_dtype_of(back) == want);
        th_check_values(cn_dtype_name(map[i].dtype), back, vals, 3, 0);
        cn_release(back);
        cn_release(t);
    }
}

static void test_export_of_a_tracked_tensor_is_its_concrete_data(void) {
    cn_generator g = cn_generator_new(3);
    int64_t n = 4;
    cn_tensor *w = cn_require_grad(cn_rand_normal(&g, &n, 1, 0, 1, CN_F32,
                                                  cn_autodiff(cn_cpu())));
    cn_tensor *y = cn_mul_scalar(w, 3);
    DLManagedTensor *m = cn_to_dlpack(y);
    CHECK(m != NULL && m->dl_tensor.device.device_type == kDLCPU);
    cn_tensor *back = cn_from_dlpack(m);
    CHECK(back != NULL && !cn_device_of(back).autodiff && !cn_requires_grad(back));
    CHECK(cn_data_ptr(back) == cn_data_ptr(y));
    cn_release(y);
    cn_release(w);
    cn_release(back);
}

static void test_export_inside_a_scope_outlives_it(void) {
    int64_t n = 3;
    cn_scope_begin();
    cn_tensor *t = cn_full(&n, 1, 2.5, CN_F64, cn_cpu()); /* the scope's */
    DLManagedTensor *m = cn_to_dlpack(t);
    cn_scope_end();
    CHECK(m != NULL);
    if (!m) return;
    CHECK(((double *)m->dl_tensor.data)[2] == 2.5); /* still alive: the managed tensor holds it */
    m->deleter(m);
}

static cn_device other_backend(void) {
    if (cn_backend_find("interop_other") < 0) {
        cn_backend copy = *cn_backend_get(CN_BACKEND_CPU);
        copy.name = "interop_other";
        cn_backend_register(&copy);
    }
    cn_device d = {CN_BACKEND_INVALID, 0, 0, 0};
    cn_device_parse("interop_other", &d);
    return d;
}

static void test_export_refuses_what_dlpack_cannot_name(void) {
    int64_t live = cn_live_tensors();
    cn_clear_error();
    CHECK(cn_to_dlpack(NULL) == NULL);
    check_error(__LINE__, CN_ERR_NULL_ARG, "to_dlpack", "'t'");
    int64_t n = 2;
    cn_tensor *t = cn_ones(&n, 1, CN_F32, other_backend());
    CHECK(t != NULL);
    CHECK(cn_to_dlpack(t) == NULL);
    check_error(__LINE__, CN_ERR_UNKNOWN_DEVICE, "to_dlpack", "backend 'interop_other'");
    cn_release(t);
    CHECK(cn_live_tensors() == live);
}

/* On a GPU build with a GPU: a cuda tensor exports as kDLCUDA and comes back at the same device
 * address. Elsewhere it checks nothing (the export error for other backends is tested above). */
static void test_cuda_round_trip_when_a_gpu_is_there(void) {
    if (cn_backend_device_count("cuda") <= 0) {
        printf("     (no cuda device: the cuda round trip is not run)\n");
        return;
    }
    cn_device gpu;
    CHECK(cn_device_parse("cuda:0", &gpu) == CN_OK);
    int64_t shape[2] = {3, 4};
    cn_tensor *t = cn_full(shape, 2, 1.25, CN_F32, gpu);
    cn_tensor *v = cn_slice(t, 1, 1, 4, 1); /* [3, 3], offset 1 */
    DLManagedTensor *m = cn_to_dlpack(v);
    CHECK(m != NULL);
    if (m) {
        CHECK(m->dl_tensor.device.device_type == kDLCUDA && m->dl_tensor.device.device_id == 0);
        CHECK((char *)m->dl_tensor.data + m->dl_tensor.byte_offset == cn_data_ptr(v));
        original_deleter = m->deleter;
        m->deleter = counting_deleter;
        exported_deleted = 0;
        cn_tensor *back = cn_from_dlpack(m);
        CHECK(back != NULL && cn_data_ptr(back) == cn_data_ptr(v));
        CHECK(cn_device_eq(cn_device_of(back), gpu));
        double want[9] = {1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25};
        th_check_values("cuda round trip", back, want, 9, 0);
        cn_release(back);
        CHECK(exported_deleted == 1);
    }
    cn_release(v);
    cn_release(t);
}

/* ---- DLPack import -------------------------------------------------------------------------- */

static void test_import_of_a_handmade_tensor(void) {
    /* f64: a [3, 2] view with strides {1, 3} starting 2 elements in: [i][j] = buf[2 + i + 3j] */
    double *buf = malloc(12 * sizeof(double));
    for (int i = 0; i < 12; i++) buf[i] = i * 1.5;
    int64_t shape[2] = {3, 2}, strides[2] = {1, 3};
    handmade h;
    handmade_init(&h, buf, 2 * sizeof(double), dl_type(kDLFloat, 64), shape, strides, 2);
    cn_tensor *t = cn_from_dlpack(&h.m);
    CHECK(t != NULL && cn_data_ptr(t) == buf + 2 && cn_dtype_of(t) == CN_F64);
    CHECK(cn_strides(t)[0] == 1 && cn_strides(t)[1] == 3);
    double want[6] = {2 * 1.5, 5 * 1.5, 3 * 1.5, 6 * 1.5, 4 * 1.5, 7 * 1.5};
    th_check_values("handmade f64", t, want, 6, 0);
    /* in-place write lands in the buffer */
    cn_tensor *ones = cn_ones(shape, 2, CN_F64, cn_cpu());
    CHECK(cn_copy_(t, ones) == CN_OK);
    CHECK(buf[2] == 1 && buf[5] == 1 && buf[7] == 1 && buf[0] == 0 && buf[8] == 12);
    cn_release(ones);
    cn_release(t);
    CHECK(h.deleted == 1);
    free(buf);
}

static void test_import_reads_every_dtype(void) {
    /* the bits of each value, written by hand in each format */
    static const float f32[3] = {1.5f, -2, 0.25f};
    static const int32_t i32[3] = {-7, 0, 123456};
    static const int64_t i64[3] = {INT64_C(1) << 40, -3, 9};
    static const uint8_t u8[3] = {0, 200, 255};
    static const uint8_t b8[3] = {1, 0, 1};
    static const uint16_t f16[3] = {0x3C00, 0x4000, 0xB800};  /* 1, 2, -0.5 */
    static const uint16_t bf16[3] = {0x3F80, 0x4040, 0xC0A0}; /* 1, 3, -5 */
    static const struct {
        const void *data;
        uint8_t code, bits;
        cn_dtype dtype;
        double want[3];
    } rows[] = {
        {f32, kDLFloat, 32, CN_F32, {1.5, -2, 0.25}},
        {i32, kDLInt, 32, CN_I32, {-7, 0, 123456}},
        {i64, kDLInt, 64, CN_I64, {1099511627776.0, -3, 9}},
        {u8, kDLUInt, 8, CN_U8, {0, 200, 255}},
        {b8, 6, 8, CN_BOOL, {1, 0, 1}}, /* kDLBool of DLPack 0.8 */
        {f16, kDLFloat, 16, CN_F16, {1, 2, -0.5}},
        {bf16, kDLBfloat, 16, CN_BF16, {1, 3, -5}},
    };
    int64_t n = 3;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        handmade h;
        handmade_init(&h, (void *)rows[i].data, 0, dl_type(rows[i].code, rows[i].bits), &n, NULL,
                      1);
        cn_tensor *t = cn_from_dlpack(&h.m);
        CHECK(t != NULL && cn_data_ptr(t) == rows[i].data && cn_dtype_of(t) == rows[i].dtype);
        th_check_values(cn_dtype_name(rows[i].dtype), t, rows[i].want, 3, 0);
        cn_release(t);
        CHECK(h.deleted == 1);
    }
}

static void test_import_deletes_after_the_last_view(void) {
    static int32_t buf[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[2] = {2, 3};
    handmade h;
    handmade_init(&h, buf, 0, dl_type(kDLInt, 32), shape, NULL, 2);
    cn_tensor *t = cn_from_dlpack(&h.m);
    cn_tensor *col = cn_slice(t, 1, 2, 3, 1);
    cn_tensor *sum = cn_add(t, t); /* a result: its own memory */
    cn_release(t);
    CHECK(h.deleted == 0);
    double want[2] = {3, 6};
    th_check_values("view outlives", col, want, 2, 0);
    cn_release(sum);
    CHECK(h.deleted == 0);
    cn_release(col);
    CHECK(h.deleted == 1);

    /* owned by a scope: deleted at its end, unless a view is kept */
    handmade_init(&h, buf, 0, dl_type(kDLInt, 32), shape, NULL, 2);
    cn_scope_begin();
    cn_tensor *s = cn_from_dlpack(&h.m);
    cn_tensor *tr = cn_transpose(s, 0, 1);
    cn_tensor *r = cn_mul(tr, tr);
    CHECK(r != NULL);
    cn_scope_end();
    CHECK(h.deleted == 1);

    handmade_init(&h, buf, 0, dl_type(kDLInt, 32), shape, NULL, 2);
    cn_scope_begin();
    s = cn_from_dlpack(&h.m);
    cn_tensor *kept = cn_keep(cn_slice(s, 0, 1, 2, 1));
    cn_scope_end();
    CHECK(h.deleted == 0);
    double row[3] = {4, 5, 6};
    th_check_values("kept view", kept, row, 3, 0);
    cn_release(kept);
    CHECK(h.deleted == 1);
}

static void test_import_refuses_bad_tensors_without_deleting(void) {
    int64_t live = cn_live_tensors(), live_bytes = cn_live_bytes();
    static float buf[16];
    int64_t s2[2] = {2, 2}, neg[2] = {2, -3}, huge[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
    int64_t neg_st[2] = {2, -1}, far_st[2] = {INT64_MAX / 4, 1};
    handmade h;
    int cuda = cn_backend_compiled("cuda");
#define IMPORT_FAILS(edit, st, arg)                                                                \
    do {                                                                                           \
        handmade_init(&h, buf, 0, dl_type(kDLFloat, 32), s2, NULL, 2);                             \
        edit;                                                                                      \
        cn_clear_error();                                                                          \
        cn_tensor *r_ = cn_from_dlpack(&h.m);                                                      \
        CHECK(r_ == NULL);                                                                         \
        cn_release(r_);                                                                            \
        check_error(__LINE__, st, "from_dlpack", arg);                                             \
        CHECK(h.deleted == 0);                                                                     \
    } while (0)
    IMPORT_FAILS(h.m.dl_tensor.dtype.lanes = 4, CN_ERR_DTYPE, "4 lanes");
    IMPORT_FAILS(h.m.dl_tensor.dtype.code = 5, CN_ERR_DTYPE,
                 "m->dl_tensor.dtype (code 5, bits 32)");
    IMPORT_FAILS(h.m.dl_tensor.dtype.bits = 8, CN_ERR_DTYPE, "m->dl_tensor.dtype (code 2, bits 8)");
    IMPORT_FAILS(h.m.dl_tensor.dtype = dl_type(kDLInt, 16), CN_ERR_DTYPE, "(code 0, bits 16)");
    IMPORT_FAILS(h.m.dl_tensor.dtype = dl_type(kDLUInt, 32), CN_ERR_DTYPE, "(code 1, bits 32)");
    IMPORT_FAILS(h.m.dl_tensor.dtype = dl_type(kDLOpaqueHandle, 64), CN_ERR_DTYPE, "(code 3");
    IMPORT_FAILS(h.m.dl_tensor.device.device_type = kDLOpenCL, CN_ERR_UNKNOWN_DEVICE,
                 "m->dl_tensor.device.device_type = 4 (kDLOpenCL)");
    IMPORT_FAILS(h.m.dl_tensor.device.device_type = (DLDeviceType)77, CN_ERR_UNKNOWN_DEVICE,
                 "device_type = 77");
    IMPORT_FAILS(h.m.dl_tensor.device.device_id = 1, CN_ERR_DEVICE_UNAVAILABLE,
                 "kDLCPU with device_id 1");
    IMPORT_FAILS((h.m.dl_tensor.device.device_type = kDLCUDA, h.m.dl_tensor.device.device_id = 99),
                 cuda ? CN_ERR_DEVICE_UNAVAILABLE : CN_ERR_UNKNOWN_DEVICE,
                 cuda ? "cuda" : "kDLCUDA 99");
    IMPORT_FAILS(h.m.dl_tensor.ndim = -1, CN_ERR_INVALID_ARG, "m->dl_tensor.ndim = -1");
    IMPORT_FAILS(h.m.dl_tensor.ndim = 9, CN_ERR_INVALID_ARG, "m->dl_tensor.ndim = 9");
    IMPORT_FAILS(h.m.dl_tensor.shape = NULL, CN_ERR_NULL_ARG, "'m->dl_tensor.shape'");
    IMPORT_FAILS(h.m.dl_tensor.shape = neg, CN_ERR_INVALID_ARG, "m->dl_tensor.shape [2, -3]");
    IMPORT_FAILS(h.m.dl_tensor.shape = huge, CN_ERR_OVERFLOW, "m->dl_tensor.shape [");
    IMPORT_FAILS(h.m.dl_tensor.strides = neg_st, CN_ERR_INVALID_ARG,
                 "m->dl_tensor.strides [2, -1]");
    IMPORT_FAILS(h.m.dl_tensor.strides = far_st, CN_ERR_OVERFLOW, "m->dl_tensor.strides [");
    IMPORT_FAILS(h.m.dl_tensor.data = NULL, CN_ERR_NULL_ARG, "m->dl_tensor.data");
    IMPORT_FAILS(h.m.dl_tensor.byte_offset = 2, CN_ERR_INVALID_ARG, "not aligned to 4 bytes");
    IMPORT_FAILS(h.m.dl_tensor.byte_offset = UINT64_MAX, CN_ERR_OVERFLOW, "byte_offset");
#undef IMPORT_FAILS
    cn_clear_error();
    CHECK(cn_from_dlpack(NULL) == NULL);
    check_error(__LINE__, CN_ERR_NULL_ARG, "from_dlpack", "'m'");
    CHECK(cn_live_tensors() == live && cn_live_bytes() == live_bytes);
    /* on failure the caller still owns m and drops it itself */
    handmade_init(&h, buf, 0, dl_type(kDLFloat, 32), s2, NULL, 2);
    h.m.dl_tensor.dtype.lanes = 2;
    CHECK(cn_from_dlpack(&h.m) == NULL);
    cn_clear_error();
    h.m.deleter(&h.m);
    CHECK(h.deleted == 1);
}

/* ---- allocation failures -------------------------------------------------------------------- */

/* Runs attempt() once to count its allocations, then with each of them failing in turn: each
 * run must fail with CN_ERR_OUT_OF_MEMORY from `op` (or from the scope it opens), call no deleter
 * and leak nothing. attempt returns 1 when it succeeded (and cleaned up), else 0; *deleted counts
 * the deleter's calls (on success the cleanup's one). */
typedef int (*attempt_fn)(int *deleted);

static void check_oom(int line, const char *op) {
    const char *msg = cn_last_error();
    size_t n = strlen(op);
    int from_op = strncmp(msg, op, n) == 0 && msg[n] == ':';
    int from_scope = strncmp(msg, "scope", 5) == 0; /* "scope: " or "scope_begin: " */
    if (cn_last_status() != CN_ERR_OUT_OF_MEMORY || !(from_op || from_scope)) {
        fprintf(stderr, "line %d: got %s \"%s\", want CN_ERR_OUT_OF_MEMORY from %s\n", line,
                cn_status_name(cn_last_status()), msg, op);
        th_checks_failed++;
    }
    cn_clear_error();
}

static void fail_each_allocation(const char *op, attempt_fn attempt) {
    int deleted = 0;
    int64_t before = cn_alloc_count();
    CHECK(attempt(&deleted) == 1);
    int64_t count = cn_alloc_count() - before;
    CHECK(count >= 1);
    CHECK(deleted == 1);
    int64_t live = cn_live_tensors(), live_bytes = cn_live_bytes();
    for (int64_t n = 1; n <= count; n++) {
        deleted = 0;
        cn_clear_error();
        cn_alloc_fail_after(n);
        int ok = attempt(&deleted);
        cn_alloc_fail_after(0);
        if (ok) {
            fprintf(stderr, "%s: allocation %lld of %lld failed but the call succeeded\n", op,
                    (long long)n, (long long)count);
            th_checks_failed++;
        } else {
            check_oom(__LINE__, op);
            CHECK(deleted == 0);
        }
        CHECK(cn_live_tensors() == live && cn_live_bytes() == live_bytes);
    }
    deleted = 0;
    CHECK(attempt(&deleted) == 1 && deleted == 1); /* and everything works again */
}

static float alloc_buf[8];

static int attempt_from_memory(int *deleted) {
    int64_t shape[2] = {2, 4};
    expected_data = alloc_buf;
    if (cn_scope_begin() != CN_OK) return 0; /* the scope allocates too: more points to fail */
    cn_tensor *t =
        cn_from_memory(alloc_buf, shape, 2, NULL, CN_F32, cn_cpu(), count_delete, deleted);
    cn_tensor *k = cn_keep(t);
    cn_scope_end();
    if (!k) return 0;
    cn_release(k);
    return 1;
}

static void *export_source_data;
static cn_tensor *export_source;

static int attempt_to_dlpack(int *deleted) {
    DLManagedTensor *m = cn_to_dlpack(export_source);
    if (!m) return 0;
    CHECK(m->dl_tensor.data == export_source_data);
    m->deleter(m);
    ++*deleted; /* the managed tensor's deleter, called once */
    return 1;
}

static int attempt_from_dlpack(int *deleted) {
    int64_t shape[2] = {2, 4};
    handmade h;
    handmade_init(&h, alloc_buf, 0, dl_type(kDLFloat, 32), shape, NULL, 2);
    cn_tensor *t = cn_from_dlpack(&h.m);
    if (!t) {
        *deleted = h.deleted;
        return 0;
    }
    cn_release(t);
    *deleted = h.deleted;
    return 1;
}

static void test_allocation_failures_are_clean(void) {
    fail_each_allocation("from_memory", attempt_from_memory);
    fail_each_allocation("from_dlpack", attempt_from_dlpack);
    int64_t n = 8;
    export_source = cn_ones(&n, 1, CN_F32, cn_cpu());
    export_source_data = cn_data_ptr(export_source);
    fail_each_allocation("to_dlpack", attempt_to_dlpack);
    cn_release(export_source);
}

int main(void) {
    RUN(test_from_memory_shares_the_buffer_and_deletes_once);
    RUN(test_from_memory_with_strides_reads_the_strided_layout);
    RUN(test_from_memory_without_deleter_leaves_the_memory_to_the_caller);
    RUN(test_from_memory_is_never_recycled);
    RUN(test_from_memory_on_an_autodiff_device_is_a_leaf);
    RUN(test_from_memory_refuses_bad_arguments_without_deleting);
    RUN(test_data_ptr_is_the_first_element);
    RUN(test_round_trip_shares_memory_and_deletes_once);
    RUN(test_export_maps_every_dtype);
    RUN(test_export_of_a_tracked_tensor_is_its_concrete_data);
    RUN(test_export_inside_a_scope_outlives_it);
    RUN(test_export_refuses_what_dlpack_cannot_name);
    RUN(test_cuda_round_trip_when_a_gpu_is_there);
    RUN(test_import_of_a_handmade_tensor);
    RUN(test_import_reads_every_dtype);
    RUN(test_import_deletes_after_the_last_view);
    RUN(test_import_refuses_bad_tensors_without_deleting);
    RUN(test_allocation_failures_are_clean);
    return th_finish();
}
