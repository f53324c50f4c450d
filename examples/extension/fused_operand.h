/* How the fused op's kernels (fused_linear_relu.c, fused_linear_relu_cuda.cu) hand a [rows, cols]
 * view to a row-major GEMM: in place as stored (rows contiguous) or transposed (columns
 * contiguous), or, for any other strides (broadcasts included), as a dense copy the kernel packs
 * first. Plain C, for both compilers. */
#ifndef FUSED_OPERAND_H
#define FUSED_OPERAND_H

#include <limits.h>
#include <stdint.h>

#include "cinder/backend.h"

/* 1 when v can be read in place, with *trans (stored transposed) and *ld (its leading
 * dimension) set; 0 when it must be packed (then *ld is the dense copy's). A size-1 dim's stride
 * is meaningless: whatever makes the operand dense is taken for it. */
static inline int fused_plan_operand(const cn_view *v, int *trans, int64_t *ld) {
    int64_t r = v->shape[0], c = v->shape[1];
    int64_t rs = r == 1 ? (c > 1 ? c : 1) : v->strides[0], cs = c == 1 ? 1 : v->strides[1];
    int64_t rs_t = r == 1 ? 1 : v->strides[0], cs_t = c == 1 ? (r > 1 ? r : 1) : v->strides[1];
    *trans = 0;
    if (cs == 1 && rs >= (c > 1 ? c : 1) && rs <= INT_MAX) {
        *ld = rs;
        return 1;
    }
    if (rs_t == 1 && cs_t >= (r > 1 ? r : 1) && cs_t <= INT_MAX) {
        *trans = 1;
        *ld = cs_t;
        return 1;
    }
    *ld = c > 1 ? c : 1;
    return 0;
}

#endif
