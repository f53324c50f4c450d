/* Comparing an integer tensor with a real scalar exactly (eq_scalar ... ge_scalar on ints).
 *
 * x OP s for every x of an integer dtype is x OP b for one integer b of the dtype's range, or a
 * constant: x < 2.5 is x < 3, x == 2.5 is false, x < 1e30 is true, x != NaN is true. No x is
 * converted to a double (an i64 past 2^53 would round), and no s is truncated (2.5 is not 2).
 * Static inline, shared by the CPU and CUDA kernels as core/backend_common.h is. */
#ifndef CINDER_CORE_SCALAR_COMPARE_H
#define CINDER_CORE_SCALAR_COMPARE_H

#include <math.h>
#include <stdint.h>

#include "cinder/backend.h"

/* For x in [lo, hi] (an integer dtype's range) and op one of CN_OP_EQ_SCALAR ... GE_SCALAR:
 * returns -1 and sets *bound so that x OP s is x OP *bound for every x, or returns the answer
 * (0 or 1) that holds for every x (*bound then 0). */
static inline int cn__int_compare_bound(cn_op op, double s, int64_t lo, int64_t hi,
                                        int64_t *bound) {
    const double dlo = (double)lo;
    const double above = (double)hi + 1.0; /* the least integer past hi: exact for i32 and i64 */
    const double c = ceil(s), f = floor(s);
    *bound = 0;
    if (s != s) return op == CN_OP_NE_SCALAR; /* NaN equals nothing and orders nothing */
    switch (op) {
    case CN_OP_EQ_SCALAR:
    case CN_OP_NE_SCALAR:
        if (s != f || s < dlo || s >= above) return op == CN_OP_NE_SCALAR; /* no x is s */
        *bound = (int64_t)s;
        return -1;
    case CN_OP_LT_SCALAR: /* x < s: x < ceil(s) */
    case CN_OP_GE_SCALAR: /* x >= s: x >= ceil(s) */
        if (c >= above) return op == CN_OP_LT_SCALAR;
        if (c <= dlo) return op == CN_OP_GE_SCALAR;
        *bound = (int64_t)c;
        return -1;
    case CN_OP_LE_SCALAR: /* x <= s: x <= floor(s) */
    case CN_OP_GT_SCALAR: /* x > s: x > floor(s) */
        if (f >= above - 1.0) return op == CN_OP_LE_SCALAR; /* f >= hi (for i64: >= 2^63) */
        if (f < dlo) return op == CN_OP_GT_SCALAR;
        *bound = (int64_t)f;
        return -1;
    default: return 0;
    }
}

#endif
