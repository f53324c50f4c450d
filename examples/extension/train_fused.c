/* Trains a two-layer regressor whose hidden layer is the extension op fused_linear_relu, with
 * plain SGD, and prints the loss as it falls.
 *
 *   h    = fused_linear_relu(x, w1, b1)   x: [N, IN], w1: [HID, IN], b1: [HID] -> h: [N, HID]
 *   pred = h @ w2^T + b2                  w2: [1, HID], b2: [1]               -> pred: [N, 1]
 *   loss = mean((pred - target)^2)
 *
 * The targets come from a fixed random "teacher" network of the same form, so the student can
 * fit them. Usage: example_train_fused [steps] (default 300). Exits 1 unless the final loss is
 * below a fifth of the first, so it doubles as a test. */
#include <stdio.h>
#include <stdlib.h>

#include "cinder/cinder.h"
#include "fused.h"

enum { N = 256, IN = 8, HID = 32 };

static cn_tensor *param(cn_generator *gen, const int64_t *shape, int ndim, double std,
                        cn_device dev) {
    return cn_require_grad(cn_rand_normal(gen, shape, ndim, 0.0, std, CN_F32, dev));
}

/* p -= lr * grad, outside the graph. */
static cn_status sgd_step(cn_tensor *const *params, int n, const cn_grads *grads, double lr) {
    cn_status st = CN_OK;
    cn_no_grad_begin();
    cn_scope_begin();
    for (int i = 0; i < n && st == CN_OK; i++) {
        cn_tensor *step = cn_sub(params[i], cn_mul_scalar(cn_grad(grads, params[i]), lr));
        st = step ? cn_copy_(params[i], step) : cn_last_status();
    }
    cn_scope_end();
    cn_no_grad_end();
    return st;
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 300;
    double lr = 0.05;
    cn_device dev = cn_autodiff(cn_cpu());
    cn_generator gen = cn_generator_new(7);
    int64_t xs[2] = {N, IN}, w1s[2] = {HID, IN}, b1s[1] = {HID}, w2s[2] = {1, HID}, b2s[1] = {1};

    /* data: inputs, and the teacher's outputs as targets */
    cn_tensor *x = cn_rand_uniform(&gen, xs, 2, -1.0, 1.0, CN_F32, dev);
    cn_tensor *target = NULL;
    cn_scope_begin();
    {
        cn_tensor *tw1 = cn_rand_normal(&gen, w1s, 2, 0.0, 0.7, CN_F32, dev);
        cn_tensor *tb1 = cn_rand_normal(&gen, b1s, 1, 0.0, 0.3, CN_F32, dev);
        cn_tensor *tw2 = cn_rand_normal(&gen, w2s, 2, 0.0, 0.5, CN_F32, dev);
        target = cn_keep(cn_linear(fused_linear_relu(x, tw1, tb1), tw2, NULL));
    }
    cn_scope_end();

    cn_tensor *w1 = param(&gen, w1s, 2, 0.35, dev), *b1 = param(&gen, b1s, 1, 0.1, dev);
    cn_tensor *w2 = param(&gen, w2s, 2, 0.18, dev), *b2 = param(&gen, b2s, 1, 0.1, dev);
    cn_tensor *params[4] = {w1, b1, w2, b2};
    if (!x || !target || !w1 || !b1 || !w2 || !b2) {
        fprintf(stderr, "setup failed: %s\n", cn_last_error());
        return 1;
    }

    double first = -1, last = -1;
    int failed = 0;
    for (int step = 0; step <= steps && !failed; step++) {
        cn_scope_begin();
        cn_tensor *pred = cn_linear(fused_linear_relu(x, w1, b1), w2, b2);
        cn_tensor *loss = cn_mean(cn_pow_scalar(cn_sub(pred, target), 2.0));
        float value = 0;
        cn_grads *grads = loss ? cn_backward(loss) : NULL;
        if (!grads || cn_read(loss, &value, sizeof value) != CN_OK ||
            sgd_step(params, 4, grads, lr) != CN_OK) {
            fprintf(stderr, "step %d failed: %s\n", step, cn_last_error());
            failed = 1;
        }
        cn_grads_free(grads);
        cn_scope_end();
        if (first < 0) first = value;
        last = value;
        if (step % 50 == 0 || step == steps) printf("step %4d  loss %.6f\n", step, value);
    }

    for (int i = 0; i < 4; i++)
        cn_release(params[i]);
    cn_release(x);
    cn_release(target);
    if (failed) return 1;
    int learned = last < first / 5;
    printf("loss %.6f -> %.6f: %s\n", first, last, learned ? "learned" : "did NOT learn");
    return learned && cn_live_tensors() == 0 ? 0 : 1;
}
