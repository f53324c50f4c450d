/* The extension of names.cnext, whose parameters, members and variants are named like the
 * generated code's own words and the C library's (v, memset, s, in, out, args, ints, reals, tag,
 * as): its header compiles (this file, built as GNU C, and names_cpp.cpp as C++17), the union
 * constructors fill what they should, and each argument reaches its slot, forward and backward.
 * The oracle: each slot k carries its own weight k + 1 in the kernel, so a misplaced argument
 * changes the sum; the gradients are those weights, by hand. */
#include "harness.h"
#include "names.h"

static int64_t numel_of(const cn_view *v) {
    int64_t n = 1;
    for (int d = 0; d < v->ndim; d++) n *= v->shape[d];
    return n;
}

cn_status names_f_shape(const cn_view *in, int n_in, const int64_t *ints, const double *reals,
                        cn_view *out, int n_out) {
    (void)n_in, (void)ints, (void)reals, (void)n_out;
    out[NAMES_F_OUT_Y] = in[NAMES_F_IN_V];
    out[NAMES_F_OUT_TAG] = in[NAMES_F_IN_V];
    return CN_OK;
}

/* y = sum over present slots k of (k + 1) * in[k] + ints + reals; tag = v (contiguous f64) */
cn_status names_f_cpu(const cn_kernel_args *a) {
    double *y = a->out[NAMES_F_OUT_Y].data, *tag = a->out[NAMES_F_OUT_TAG].data;
    const double *v = a->in[NAMES_F_IN_V].data;
    for (int64_t i = 0; i < numel_of(&a->out[NAMES_F_OUT_Y]); i++) {
        y[i] = (double)a->ints[NAMES_F_INT_INTS] + a->reals[NAMES_F_REAL_REALS];
        for (int k = 0; k < a->n_in; k++)
            if (a->in[k].data) y[i] += (k + 1) * ((const double *)a->in[k].data)[i];
        tag[i] = v[i];
    }
    return CN_OK;
}

/* d y / d in[k] = k + 1; d tag / d v = 1 */
cn_status names_f_backward(cn_tensor *const *in, const int *needs_grad, int n_in,
                           cn_tensor *const *out, cn_tensor *const *grad_out, int n_out,
                           const int64_t *ints, const double *reals, cn_tensor **grad_in) {
    (void)out, (void)n_out, (void)ints, (void)reals;
    for (int k = 0; k < n_in; k++) {
        if (!in[k] || !needs_grad[k]) continue;
        grad_in[k] = cn_mul_scalar(grad_out[NAMES_F_OUT_Y], k + 1);
        if (k == NAMES_F_IN_V && grad_in[k])
            grad_in[k] = cn_add(grad_in[k], grad_out[NAMES_F_OUT_TAG]);
        if (!grad_in[k]) return cn_last_status();
    }
    return CN_OK;
}

static cn_tensor *vec(double c, int grad) {
    double v[2] = {c, 2 * c};
    int64_t n = 2;
    cn_tensor *t = cn_from_data(v, &n, 1, CN_F64, cn_autodiff(cn_cpu()));
    return grad ? cn_require_grad(t) : t;
}

static void test_constructors(void) {
    cn_scope_begin();
    cn_tensor *a = vec(1, 0), *b = vec(2, 0);
    names_pick none = names_pick_v();
    CHECK(none.tag == NAMES_PICK_V && none.as.memset.v == NULL && none.as.memset.memset == NULL);
    names_pick m = names_pick_memset(a, b);
    CHECK(m.tag == NAMES_PICK_MEMSET && m.as.memset.v == a && m.as.memset.memset == b);
    names_pick as = names_pick_as(a, b);
    CHECK(as.tag == NAMES_PICK_AS && as.as.as.tag == a && as.as.as.as == b);
    cn_scope_end();
}

static void test_slots_forward_and_backward(void) {
    cn_scope_begin();
    /* slots: v 0, memset.v 1, memset.memset 2, s.memset.v 3, s.memset.memset 4, s.as.tag 5,
     * s.as.as 6, in 7, out 8, args 9 */
    CHECK(NAMES_F_IN_V == 0 && NAMES_F_IN_S_MEMSET_V == 3 && NAMES_F_IN_ARGS == 9);
    cn_tensor *v = vec(1, 1), *pv = vec(10, 1), *sv = vec(100, 1), *args = vec(1000, 1);
    cn_tensor *in = vec(0.5, 0);
    names_pair memset = {pv, NULL};
    cn_tensor *y = NULL, *tag = NULL;
    CHECK(names_f(v, memset, names_pick_memset(sv, NULL), in, NULL, args, 7, 0.25, &y, &tag) ==
          CN_OK);
    /* 1*1 + 2*10 + 4*100 + 8*0.5 + 10*1000 + 7 + 0.25 = 10432.25, twice that less the attrs */
    double y0 = 1 + 20 + 400 + 4 + 10000;
    th_check_values("y", y, (double[]){y0 + 7.25, 2 * y0 + 7.25}, 2, 0);
    th_check_values("tag", tag, (double[]){1, 2}, 2, 0);
    cn_grads *g = cn_backward(cn_add(cn_sum(y), cn_sum(tag)));
    th_check_values("d/dv", g ? cn_grad(g, v) : NULL, (double[]){2, 2}, 2, 0);
    th_check_values("d/dmemset.v", g ? cn_grad(g, pv) : NULL, (double[]){2, 2}, 2, 0);
    th_check_values("d/ds.memset.v", g ? cn_grad(g, sv) : NULL, (double[]){4, 4}, 2, 0);
    th_check_values("d/dargs", g ? cn_grad(g, args) : NULL, (double[]){10, 10}, 2, 0);
    cn_grads_free(g);
    cn_scope_end();
}

int main(void) {
    RUN(test_constructors);
    RUN(test_slots_forward_and_backward);
    return th_finish();
}
