/* A tour of the public API: creation, broadcasting, reductions, matmul, a convolutional forward
 * pass, scopes and error handling. Prints what it computed. */
#include <stdio.h>

#include "cinder/cinder.h"

static void print_tensor(const char *name, cn_tensor *t) {
    char desc[128];
    cn_tensor *f = cn_cast(t, CN_F64);
    double v[64];
    int64_t n = cn_numel(f);
    if (!f || n > 64 || cn_read(f, v, sizeof(double) * (size_t)n) != CN_OK) {
        printf("%s: (cannot print: %s)\n", name, cn_last_error());
        cn_release(f);
        return;
    }
    printf("%s %s =", name, cn_tensor_str(t, desc, sizeof desc));
    for (int64_t i = 0; i < n; i++) printf(" %.4f", v[i]);
    printf("\n");
    cn_release(f);
}

int main(void) {
    cn_device dev = cn_default_device();
    char dname[64];
    printf("cinder %s on %s\n", cn_version(), cn_device_str(dev, dname, sizeof dname));
    cn_scope_begin();

    /* broadcasting: a column plus a row */
    int64_t col[2] = {3, 1};
    cn_tensor *a = cn_reshape(cn_arange(0, 3, 1, CN_F32, dev), col, 2);
    cn_tensor *b = cn_arange(10, 40, 10, CN_F32, dev);
    print_tensor("a + b", cn_add(a, b));

    /* reductions and softmax over rows */
    cn_tensor *m = cn_add(a, b);
    print_tensor("sum over dim 1", cn_sum_dim(m, 1, 0));
    print_tensor("softmax(m / 10)", cn_softmax(cn_mul_scalar(m, 0.1), 1));

    /* a small CNN forward pass on a random image batch */
    cn_generator gen = cn_generator_new(42);
    int64_t xs[4] = {2, 1, 8, 8}, ws[4] = {4, 1, 3, 3}, w2s[2] = {3, 4 * 4 * 4};
    cn_tensor *x = cn_rand_uniform(&gen, xs, 4, 0, 1, CN_F32, dev);
    cn_tensor *w = cn_rand_normal(&gen, ws, 4, 0, 0.5, CN_F32, dev);
    cn_tensor *w2 = cn_rand_normal(&gen, w2s, 2, 0, 0.1, CN_F32, dev);
    cn_conv2d_params cp = {{1, 1}, {1, 1}, {1, 1}, 1};
    cn_pool2d_params pp = {{2, 2}, {2, 2}, {0, 0}};
    cn_tensor *h = cn_max_pool2d(cn_relu(cn_conv2d(x, w, NULL, &cp)), &pp);
    int64_t flat[2] = {2, -1};
    cn_tensor *logits = cn_linear(cn_reshape(h, flat, 2), w2, NULL);
    print_tensor("class probabilities", cn_softmax(logits, 1));
    print_tensor("predicted class", cn_argmax_dim(logits, 1, 0));

    /* errors are values: this add fails, and the message says why and what to do */
    cn_tensor *bad = cn_add(x, w2);
    if (!bad) printf("expected error [%s]: %s\n", cn_status_name(cn_last_status()), cn_last_error());
    cn_clear_error();

    cn_scope_end();
    printf("live tensors after the scope: %lld\n", (long long)cn_live_tensors());
    return cn_live_tensors() == 0 ? 0 : 1;
}
