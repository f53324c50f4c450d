/* deform_conv2d's bilinear sampling, by torchvision's CPU kernel
 * (torchvision/csrc/ops/cpu/deform_conv2d_kernel.cpp: bilinear_interpolate and
 * get_coordinate_weight), shared by the CPU and CUDA kernels so that both read the same corners
 * with the same weights. Pure functions, for host and device; arithmetic in double.
 *
 * A sample of a plane [H, W] at (y, x) is 0 when y <= -1, y >= H, x <= -1 or x >= W; otherwise
 *     (1 - ly)(1 - lx) v(yl, xl) + (1 - ly) lx v(yl, xl + 1) + ly (1 - lx) v(yl + 1, xl)
 *     + ly lx v(yl + 1, xl + 1),   yl = floor(y), ly = y - yl (xl, lx likewise),
 * each corner outside the image counting as 0. Its derivatives along y and x (the offsets'
 * gradient) are torchvision's get_coordinate_weight: the same corners (0 outside the image), with
 * no test of the range of (y, x), which agrees with the derivative of the sample everywhere but
 * on the lines y = -1 and x = -1 (there it is the one-sided derivative from inside). */
#ifndef CINDER_CORE_DEFORM_MATH_H
#define CINDER_CORE_DEFORM_MATH_H

#include <math.h>
#include <stdint.h>

#ifndef CN_HOST_DEVICE
#ifdef __CUDACC__
#define CN_HOST_DEVICE __host__ __device__
#else
#define CN_HOST_DEVICE
#endif
#endif

/* The four corners of a sample: (yl, xl), (yl, xl + 1), (yl + 1, xl), (yl + 1, xl + 1). */
typedef struct cn_dc_taps {
    int64_t at[4];       /* row * W + column of each corner; -1 for one outside the image */
    double w[4];         /* the sample's weights (all 0 when (y, x) is out of range) */
    double wy[4], wx[4]; /* d(sample)/dy and d(sample)/dx per corner value */
} cn_dc_taps;

/* The sampling position along one axis: output position o at stride s and padding p, tap k at
 * dilation d, moved by the offset. */
CN_HOST_DEVICE static inline double cn_dc_pos(int64_t o, int64_t s, int64_t p, int64_t k, int64_t d,
                                              double offset) {
    return (double)(o * s - p + k * d) + offset;
}

CN_HOST_DEVICE static inline void cn_dc_taps_at(double y, double x, int64_t H, int64_t W,
                                                cn_dc_taps *t) {
    double fy = floor(y), fx = floor(x);
    double ly = y - fy, lx = x - fx, hy = 1 - ly, hx = 1 - lx;
    /* a position far outside (or NaN) has no corner in the image: keep the indices in range of
     * int64 before converting */
    int inside = y > -1 && y < (double)H && x > -1 && x < (double)W;
    int near = fy >= -2 && fy <= (double)H && fx >= -2 && fx <= (double)W;
    int64_t yl = near ? (int64_t)fy : -2, xl = near ? (int64_t)fx : -2;
    const int64_t ys[4] = {yl, yl, yl + 1, yl + 1}, xs[4] = {xl, xl + 1, xl, xl + 1};
    const double w[4] = {hy * hx, hy * lx, ly * hx, ly * lx};
    const double wy[4] = {-hx, -lx, hx, lx}, wx[4] = {-hy, hy, -ly, ly};
    for (int k = 0; k < 4; k++) {
        int in = near && ys[k] >= 0 && ys[k] < H && xs[k] >= 0 && xs[k] < W;
        t->at[k] = in ? ys[k] * W + xs[k] : -1;
        t->w[k] = in && inside ? w[k] : 0.0;
        t->wy[k] = in ? wy[k] : 0.0;
        t->wx[k] = in ? wx[k] : 0.0;
    }
}

#endif
