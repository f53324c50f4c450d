/* Scopes release what was made inside them, except what is kept; they nest. */
#include "harness.h"

static void test_scope_releases_intermediates(void) {
    int64_t base = cn_live_tensors();
    int64_t n = 4;
    CHECK(cn_scope_begin() == CN_OK);
    cn_tensor *x = cn_ones(&n, 1, CN_F32, cn_cpu());
    cn_tensor *y = cn_exp(cn_add(x, x));
    cn_tensor *kept = cn_keep(cn_sum(y));
    CHECK(cn_live_tensors() > base + 1);
    CHECK(cn_scope_end() == CN_OK);
    CHECK(cn_live_tensors() == base + 1);
    double want = 4 * exp(2.0);
    th_check_values("kept result", kept, &want, 1, 1e-6);
    cn_release(kept);
    CHECK(cn_live_tensors() == base);
}

static void test_nested_scopes(void) {
    int64_t base = cn_live_tensors();
    int64_t n = 2;
    cn_scope_begin();
    cn_tensor *outer = cn_ones(&n, 1, CN_F64, cn_cpu());
    cn_scope_begin();
    CHECK(cn_scope_depth() == 2);
    cn_tensor *inner_kept = cn_keep(cn_add(outer, outer)); /* moves to the outer scope */
    cn_tensor *dropped = cn_mul(outer, outer);
    (void)dropped;
    cn_scope_end();
    CHECK(cn_live_tensors() == base + 2); /* outer and inner_kept */
    double want[2] = {2, 2};
    th_check_values("kept into outer", inner_kept, want, 2, 0);
    cn_scope_end();
    CHECK(cn_live_tensors() == base);
    CHECK(cn_scope_depth() == 0);
}

static void test_release_inside_scope_is_safe(void) {
    int64_t base = cn_live_tensors();
    int64_t n = 2;
    cn_scope_begin();
    cn_tensor *t = cn_ones(&n, 1, CN_F32, cn_cpu());
    cn_release(t); /* the user gave up the scope's reference early: the scope forgets it */
    cn_tensor *u = cn_ones(&n, 1, CN_F32, cn_cpu());
    cn_retain(u);  /* an extra reference survives the scope */
    cn_scope_end();
    CHECK(cn_live_tensors() == base + 1);
    cn_release(u);
    CHECK(cn_live_tensors() == base);
}

static void test_scope_errors(void) {
    cn_clear_error();
    CHECK(cn_scope_end() == CN_ERR_SCOPE);
    CHECK(strstr(cn_last_error(), "scope_end") && strstr(cn_last_error(), "cn_scope_begin"));
    cn_clear_error();
    CHECK(cn_keep(NULL) == NULL);
}

static void test_loop_stays_flat(void) {
    int64_t n = 64;
    cn_tensor *w = cn_ones(&n, 1, CN_F32, cn_cpu());
    int64_t base = cn_live_tensors();
    for (int step = 0; step < 200; step++) {
        cn_scope_begin();
        cn_tensor *h = cn_tanh(cn_mul_scalar(w, 0.5));
        cn_tensor *loss = cn_mean(cn_mul(h, h));
        CHECK(loss != NULL);
        cn_scope_end();
        if (cn_live_tensors() != base) break;
    }
    CHECK(cn_live_tensors() == base);
    cn_release(w);
}

int main(void) {
    RUN(test_scope_releases_intermediates);
    RUN(test_nested_scopes);
    RUN(test_release_inside_scope_is_safe);
    RUN(test_scope_errors);
    RUN(test_loop_stays_flat);
    return th_finish();
}
