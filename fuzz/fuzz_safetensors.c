/* libFuzzer harness: safetensors loading. The input is the file. It is loaded with
 * cn_safetensors_load; a file that loads gives every tensor by name (read back whole) and its
 * metadata, and is then loaded again with cn_safetensors_load_into into fresh tensors (every
 * other float one a tracked parameter on cn_autodiff(cn_cpu())), which must agree byte for byte
 * with what cn_safetensors_get gave; a destination of the wrong shape must be refused. A file
 * that does not load must say why (fuzz_common.h's invariants). */
#include "fuzz_common.h"

#define MAX_INTO 4

/* The bytes of t, in a new buffer (freed by the caller); aborts when a loaded tensor cannot be
 * read. */
static unsigned char *read_all(cn_tensor *t, size_t *n) {
    *n = (size_t)cn_numel(t) * cn_dtype_size(cn_dtype_of(t));
    unsigned char *buf = malloc(*n ? *n : 1);
    if (!buf) FUZZ_FAIL("out of memory in the harness");
    if (cn_read(t, buf, *n) != CN_OK) FUZZ_FAIL("cn_read of a loaded tensor: %s", cn_last_error());
    return buf;
}

static void check_load_into(const char *path, const cn_safetensors *h, cn_tensor *const *got,
                            int n) {
    const char *names[MAX_INTO];
    cn_tensor *into[MAX_INTO];
    cn_device ad = cn_autodiff(cn_cpu());
    for (int i = 0; i < n; i++) {
        names[i] = cn_safetensors_name(h, i);
        cn_dtype dt = cn_dtype_of(got[i]);
        int tracked = (i & 1) && cn_dtype_kind(dt) == CN_KIND_FLOAT;
        cn_clear_error();
        into[i] = cn_zeros(cn_shape(got[i]), cn_ndim(got[i]), dt, tracked ? ad : cn_cpu());
        if (!into[i]) FUZZ_FAIL("cn_zeros like a loaded tensor: %s", cn_last_error());
        if (tracked) cn_require_grad(into[i]);
    }
    cn_clear_error();
    if (cn_safetensors_load_into(path, names, into, n) != CN_OK)
        FUZZ_FAIL("cn_safetensors_load_into of a file that loads: %s", cn_last_error());
    for (int i = 0; i < n; i++) {
        size_t na, nb;
        unsigned char *a = read_all(got[i], &na), *b = read_all(into[i], &nb);
        if (na != nb || memcmp(a, b, na) != 0)
            FUZZ_FAIL("load_into and get disagree on tensor '%s'", names[i]);
        free(a);
        free(b);
    }
    /* one destination of another shape: refused, and nothing changes */
    if (n > 0) {
        int64_t shape[CN_MAX_DIMS + 1];
        int nd = cn_ndim(got[0]);
        memcpy(shape, cn_shape(got[0]), (size_t)nd * sizeof *shape);
        shape[nd] = 2;
        cn_tensor *wrong = cn_zeros(shape, nd + 1 <= CN_MAX_DIMS ? nd + 1 : nd - 1,
                                    cn_dtype_of(got[0]), cn_cpu());
        if (wrong) {
            cn_tensor *saved = into[0];
            into[0] = wrong;
            cn_clear_error();
            if (cn_safetensors_load_into(path, names, into, n) == CN_OK)
                FUZZ_FAIL("load_into accepted a destination of another shape");
            FUZZ_CHECK_FAILED("cn_safetensors_load_into (wrong shape)");
            into[0] = saved;
            cn_release(wrong);
        }
    }
    for (int i = 0; i < n; i++)
        cn_release(into[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_scratch_path("model.safetensors");
    fuzz_write_file(path, data, size);
    fuzz_live before = fuzz_live_now();

    cn_clear_error();
    cn_safetensors *h = (cn_safetensors *)&h;
    if (cn_safetensors_load(path, cn_cpu(), &h) != CN_OK) {
        FUZZ_CHECK_FAILED("cn_safetensors_load");
        if (h) FUZZ_FAIL("a failed cn_safetensors_load left *out set");
        fuzz_check_live(before);
        return 0;
    }
    int n = cn_safetensors_count(h);
    cn_tensor *got[MAX_INTO];
    for (int i = 0; i < n; i++) {
        const char *name = cn_safetensors_name(h, i);
        if (!name) FUZZ_FAIL("tensor %d of %d has no name", i, n);
        cn_clear_error();
        cn_tensor *t = cn_safetensors_get(h, name);
        if (!t) FUZZ_FAIL("cn_safetensors_get('%s'): %s", name, cn_last_error());
        size_t nb;
        free(read_all(t, &nb));
        if (i < MAX_INTO)
            got[i] = t;
        else
            cn_release(t);
    }
    if (cn_safetensors_name(h, n) || cn_safetensors_name(h, -1))
        FUZZ_FAIL("cn_safetensors_name out of range gave a name");
    (void)cn_safetensors_metadata(h, "format");
    cn_clear_error();
    if (cn_safetensors_get(h, "no such tensor \x01")) FUZZ_FAIL("get of a missing name");
    FUZZ_CHECK_FAILED("cn_safetensors_get (missing name)");

    int n_into = n < MAX_INTO ? n : MAX_INTO;
    check_load_into(path, h, got, n_into);
    for (int i = 0; i < n_into; i++)
        cn_release(got[i]);
    cn_safetensors_free(h);
    fuzz_check_live(before);
    return 0;
}
