/* `cinder train`'s MLP (src/cli/models.c) on a backend that the fused linear + relu extension op
 * has no kernel for: the model is built from the built-in linear and relu instead of failing at
 * its first step (as it did on CUDA, whose run on an H200 found it). The backend here is a
 * program's own copy of the CPU backend, registered under another name, so that the fused op's
 * CPU kernel and the built-in ops are two independent computations of the same layer:
 * - on the CPU the hidden layers are the fused op ("FusedLinearReLU"), on the copy the built-in
 *   ones ("LinearReLU");
 * - from the same seed both hold the same parameters, and their logits and the gradients of a
 *   loss agree to f32 rounding, against a float64 forward computed here by hand for the logits. */
#include <math.h>

#include "cli/models.h"
#include "harness.h"

#define BATCH 5
#define PIXELS 784

static cn_device other;

/* relu(x w^T + b) in double, x [n, in], w [out, in] */
static void layer_ref(const double *x, int n, int in, const double *w, const double *b, int out,
                      int relu, double *y) {
    for (int i = 0; i < n; i++)
        for (int o = 0; o < out; o++) {
            double acc = b[o];
            for (int k = 0; k < in; k++) acc += x[i * in + k] * w[o * in + k];
            y[i * out + o] = relu && acc < 0 ? 0 : acc;
        }
}

static double *values(cn_module *net, const char *name) {
    return th_values(cn_module_find(net, name)); /* malloc'd */
}

static void test_layer_choice_and_values(void) {
    cli_model cpu_m = {0}, other_m = {0};
    cn_generator g1 = cn_generator_new(7), g2 = cn_generator_new(7);
    CHECK(cli_model_new(CLI_MODEL_MLP, cn_cpu(), &g1, &cpu_m) == CN_OK);
    CHECK(cli_model_new(CLI_MODEL_MLP, other, &g2, &other_m) == CN_OK);
    if (!cpu_m.net || !other_m.net) {
        fprintf(stderr, "%s\n", cn_last_error());
        cli_model_free(&cpu_m);
        cli_model_free(&other_m);
        return;
    }
    CHECK(strcmp(cn_module_kind(cn_module_child(cpu_m.net, 0)), "FusedLinearReLU") == 0);
    CHECK(strcmp(cn_module_kind(cn_module_child(other_m.net, 1)), "LinearReLU") == 0);
    CHECK(strcmp(cn_module_kind(cn_module_child(other_m.net, 2)), "Linear") == 0);

    cn_scope_begin();
    cn_generator gx = cn_generator_new(11);
    int64_t xs[2] = {BATCH, PIXELS};
    cn_tensor *x = cn_rand_uniform(&gx, xs, 2, 0, 1, CN_F32, cn_cpu());
    cn_tensor *y_cpu = cn_module_forward(cpu_m.net, x);
    cn_tensor *y_other = cn_module_forward(other_m.net, cn_to_device(x, other));
    CHECK(y_cpu && y_other);

    /* float64 reference from the CPU model's parameters (the other model's are equal: checked) */
    static const char *names[6] = {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight",
                                   "4.bias"};
    static const int64_t sizes[6] = {256 * 784, 256, 128 * 256, 128, 10 * 128, 10};
    double *p[6];
    for (int i = 0; i < 6; i++) {
        p[i] = values(cpu_m.net, names[i]);
        double *q = values(other_m.net, names[i]);
        for (int64_t j = 0; j < sizes[i]; j++)
            if (p[i][j] != q[j]) {
                fprintf(stderr, "%s[%lld]: %g on the cpu, %g on the copy\n", names[i],
                        (long long)j, p[i][j], q[j]);
                th_checks_failed++;
                break;
            }
        free(q);
    }
    double *xv = th_values(x);
    double *h1 = th_alloc_doubles(BATCH * 256), *h2 = th_alloc_doubles(BATCH * 128);
    double *want = th_alloc_doubles(BATCH * 10);
    layer_ref(xv, BATCH, PIXELS, p[0], p[1], 256, 1, h1);
    layer_ref(h1, BATCH, 256, p[2], p[3], 128, 1, h2);
    layer_ref(h2, BATCH, 128, p[4], p[5], 10, 0, want);
    th_check_values("mlp logits, fused on the cpu", y_cpu, want, BATCH * 10, 1e-4);
    th_check_values("mlp logits, built-in on the copy", y_other, want, BATCH * 10, 1e-4);
    for (int i = 0; i < 6; i++) free(p[i]);
    free(xv);
    free(h1);
    free(h2);
    free(want);
    cn_scope_end();
    cli_model_free(&cpu_m);
    cli_model_free(&other_m);
}

/* The gradients of sum(logits * c) with respect to each parameter, on both, agree. */
static void test_gradients_agree(void) {
    cn_device concrete[2] = {cn_cpu(), other};
    cn_device devs[2] = {cn_autodiff(cn_cpu()), cn_autodiff(other)};
    cli_model m[2] = {{0}, {0}};
    double *grads[2][6] = {{0}};
    static const char *names[6] = {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight",
                                   "4.bias"};
    for (int d = 0; d < 2; d++) {
        cn_generator g = cn_generator_new(3), gx = cn_generator_new(5);
        CHECK(cli_model_new(CLI_MODEL_MLP, devs[d], &g, &m[d]) == CN_OK);
        if (!m[d].net) continue;
        cn_scope_begin();
        int64_t xs[2] = {BATCH, PIXELS}, cs[2] = {BATCH, 10};
        cn_tensor *x = cn_to_device(cn_rand_uniform(&gx, xs, 2, 0, 1, CN_F32, cn_cpu()),
                                    concrete[d]);
        cn_tensor *c = cn_to_device(cn_rand_uniform(&gx, cs, 2, -1, 1, CN_F32, cn_cpu()),
                                    concrete[d]);
        cn_grads *gr = cn_backward(cn_sum(cn_mul(cn_module_forward(m[d].net, x), c)));
        CHECK(gr != NULL);
        for (int i = 0; i < 6 && gr; i++)
            grads[d][i] = th_values(cn_grad(gr, cn_module_find(m[d].net, names[i])));
        cn_grads_free(gr);
        cn_scope_end();
    }
    static const int64_t sizes[6] = {256 * 784, 256, 128 * 256, 128, 10 * 128, 10};
    for (int i = 0; i < 6; i++) {
        if (!grads[0][i] || !grads[1][i]) {
            th_checks_failed++;
            continue;
        }
        double worst = 0;
        for (int64_t j = 0; j < sizes[i]; j++) {
            double e = fabs(grads[0][i][j] - grads[1][i][j]) / fmax(1.0, fabs(grads[0][i][j]));
            if (e > worst) worst = e;
        }
        if (worst > 1e-4) {
            fprintf(stderr, "gradient of %s: fused and built-in differ by %g\n", names[i], worst);
            th_checks_failed++;
        }
    }
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 6; i++) free(grads[d][i]);
    cli_model_free(&m[0]);
    cli_model_free(&m[1]);
}

int main(void) {
    cn_backend copy = *cn_backend_get(CN_BACKEND_CPU);
    copy.name = "cli_other";
    int id = cn_backend_register(&copy);
    if (id < 0) {
        fprintf(stderr, "%s\n", cn_last_error());
        return 1;
    }
    other = (cn_device){(int16_t)id, 0, 0, 0};
    RUN(test_layer_choice_and_values);
    RUN(test_gradients_agree);
    return th_finish();
}
