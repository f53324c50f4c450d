/* y = scale(x, 3) through the consumer's own extension op, then d(sum y)/dx = 3 by autodiff;
 * checked against the hand-computed values. Exits 0 when all holds. */
#include <math.h>
#include <stdio.h>

#include <cinder/cinder.h>
#ifndef CONSUMER_NO_EXTENSION
#include "consumer.h"
#endif

static int fail(const char *what) {
    fprintf(stderr, "consumer_c: %s: %s\n", what, cn_last_error());
    return 1;
}

int main(void) {
    const float xs[6] = {1, -2, 3, -4, 5, -6};
    int64_t shape[2] = {2, 3};
    cn_tensor *x = cn_require_grad(cn_from_data(xs, shape, 2, CN_F32, cn_autodiff(cn_cpu())));
    if (!x) return fail("from_data");
#ifdef CONSUMER_NO_EXTENSION
    cn_tensor *y = cn_mul_scalar(x, 3.0);
#else
    cn_tensor *y = consumer_scale(x, 3.0);
#endif
    cn_tensor *total = cn_sum(y);
    cn_grads *grads = total ? cn_backward(total) : NULL;
    if (!grads) return fail("scale, sum or backward");
    float yv[6], gv[6];
    if (cn_read(y, yv, sizeof yv) != CN_OK || cn_read(cn_grad(grads, x), gv, sizeof gv) != CN_OK)
        return fail("read");
    int bad = 0;
    for (int i = 0; i < 6; i++) bad |= fabsf(yv[i] - 3 * xs[i]) > 0 || gv[i] != 3.0f;
    printf("consumer_c: y[5] = %g, dy/dx = %g, cinder %s\n", yv[5], gv[0], cn_version());
    cn_grads_free(grads);
    cn_release(total);
    cn_release(y);
    cn_release(x);
    if (cn_live_tensors() != 0) {
        fprintf(stderr, "consumer_c: %lld tensors leaked\n", (long long)cn_live_tensors());
        return 1;
    }
    return bad;
}
