/* interpolate's source positions and weights along one axis, by PyTorch's rules
 * (aten/src/ATen/native/UpSample.h and UpSampleKernel.cpp), and grid_sample_2d's (GridSampler.h,
 * at the end), shared by the CPU and CUDA kernels so that both read the same taps.
 *
 * An output position o along an axis of input size `in` and output size `out` reads up to four
 * input positions (the taps), each with a weight:
 * - nearest (mode 0): one tap, floor(o * s) with s = 1 / scale (the user's scale factor) or
 *   in / out, computed in float as PyTorch does (so the same o picks the same entry), at most
 *   in - 1. For 2-D resampling, out == in is the identity and out == 2 * in is o / 2 (PyTorch's
 *   CPU shortcuts, which differ from the formula when a scale factor was given: 3 entries with
 *   scale 1.2 stay [0, 1, 2] in 2-D but read [0, 0, 1] in 1-D, as PyTorch's 1-D kernel does).
 * - linear (mode 1): src = s * (o + 0.5) - 0.5 (or s * o with align_corners, where
 *   s = (in - 1) / (out - 1), 0 for out == 1, and the scale factor is not used), clamped at 0;
 *   taps i0 = floor(src) (at most in - 1) and i0 + 1 (i0 itself at the last entry), weights
 *   1 - t and t, t = src - i0 clamped to [0, 1].
 * - cubic (mode 2): the same src without the clamp at 0, taps i0 - 1 .. i0 + 2 clamped into
 *   [0, in), weights from Keys' cubic convolution with A = -0.75 (PyTorch's; PIL uses -0.5).
 * The weights are computed in double (PyTorch uses float for f32 tensors: the results differ by
 * float rounding only). Every function here is pure, for host and device. */
#ifndef CINDER_CORE_RESAMPLE_MATH_H
#define CINDER_CORE_RESAMPLE_MATH_H

#include <math.h>
#include <stdint.h>

#ifndef CN_HOST_DEVICE
#ifdef __CUDACC__
#define CN_HOST_DEVICE __host__ __device__
#else
#define CN_HOST_DEVICE
#endif
#endif

#define CN_RS_NEAREST  0 /* the values of cn_interp_mode (cinder/ops.h) */
#define CN_RS_LINEAR   1
#define CN_RS_CUBIC    2
#define CN_RS_MAX_TAPS 4

typedef struct cn_rs_axis {
    int64_t in, out; /* sizes, both >= 1 */
    int mode;        /* CN_RS_* */
    int align;       /* align_corners */
    double scale;    /* the user's scale factor, or 0 when the output size was given */
    int shortcuts;   /* nearest: PyTorch's 2-D shortcuts for out == in and out == 2 * in */
} cn_rs_axis;

/* The taps of output position o (0 <= o < out): writes their input positions (in [0, in),
 * nondecreasing) to idx and weights to w; returns how many (1, 2 or 4). */
CN_HOST_DEVICE static inline int cn_rs_taps(const cn_rs_axis *a, int64_t o, int64_t *idx,
                                            double *w) {
    if (a->mode == CN_RS_NEAREST) {
        int64_t s;
        if (a->shortcuts && a->out == a->in) {
            s = o;
        } else if (a->shortcuts && a->out == 2 * a->in) {
            s = o >> 1;
        } else {
            float sc = a->scale > 0 ? (float)(1.0 / a->scale) : (float)a->in / (float)a->out;
            float f = floorf((float)o * sc);
            s = (int64_t)f;
            if (s > a->in - 1) s = a->in - 1;
        }
        idx[0] = s;
        w[0] = 1.0;
        return 1;
    }
    double s, src;
    if (a->align) {
        s = a->out > 1 ? (double)(a->in - 1) / (double)(a->out - 1) : 0.0;
        src = s * (double)o;
    } else {
        s = a->scale > 0 ? 1.0 / a->scale : (double)a->in / (double)a->out;
        src = s * ((double)o + 0.5) - 0.5;
        if (a->mode == CN_RS_LINEAR && src < 0) src = 0;
    }
    int64_t i0 = (int64_t)floor(src);
    if (i0 > a->in - 1) i0 = a->in - 1;
    double t = src - (double)i0;
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    if (a->mode == CN_RS_LINEAR) {
        idx[0] = i0;
        idx[1] = i0 < a->in - 1 ? i0 + 1 : i0;
        w[0] = 1.0 - t;
        w[1] = t;
        return 2;
    }
    const double A = -0.75;
    double x1 = t + 1.0, x2 = 1.0 - t, x3 = 2.0 - t;
    w[0] = ((A * x1 - 5.0 * A) * x1 + 8.0 * A) * x1 - 4.0 * A;
    w[1] = ((A + 2.0) * t - (A + 3.0)) * t * t + 1.0;
    w[2] = ((A + 2.0) * x2 - (A + 3.0)) * x2 * x2 + 1.0;
    w[3] = ((A * x3 - 5.0 * A) * x3 + 8.0 * A) * x3 - 4.0 * A;
    for (int k = 0; k < 4; k++) {
        int64_t p = i0 - 1 + k;
        idx[k] = p < 0 ? 0 : p > a->in - 1 ? a->in - 1 : p;
    }
    return 4;
}

/* The sum of the weights with which output position o reads input position i (0 when it does
 * not read it): the entry (o, i) of the axis's interpolation matrix. */
CN_HOST_DEVICE static inline double cn_rs_weight(const cn_rs_axis *a, int64_t o, int64_t i) {
    int64_t idx[CN_RS_MAX_TAPS];
    double w[CN_RS_MAX_TAPS], sum = 0;
    int n = cn_rs_taps(a, o, idx, w);
    for (int k = 0; k < n; k++)
        if (idx[k] == i) sum += w[k];
    return sum;
}

/* The output positions [*lo, *hi] whose taps may include input position i (empty: *lo > *hi).
 * The first and last taps of o never decrease as o grows, so the range is found by bisection:
 * lo is the first o whose last tap reaches i, hi the last o whose first tap is at most i. */
CN_HOST_DEVICE static inline void cn_rs_range(const cn_rs_axis *a, int64_t i, int64_t *lo,
                                              int64_t *hi) {
    int64_t idx[CN_RS_MAX_TAPS];
    double w[CN_RS_MAX_TAPS];
    int64_t l = 0, r = a->out; /* first o in [l, r) with last tap >= i (r: none) */
    while (l < r) {
        int64_t m = l + (r - l) / 2;
        int n = cn_rs_taps(a, m, idx, w);
        if (idx[n - 1] >= i)
            r = m;
        else
            l = m + 1;
    }
    *lo = l;
    l = 0, r = a->out; /* first o with first tap > i; hi is the one before */
    while (l < r) {
        int64_t m = l + (r - l) / 2;
        cn_rs_taps(a, m, idx, w);
        if (idx[0] > i)
            r = m;
        else
            l = m + 1;
    }
    *hi = l - 1;
}

/* ---- grid_sample_2d (PyTorch's GridSampler.h) ------------------------------------------------
 * A grid coordinate c in [-1, 1] (x along W, y along H; outside is allowed) maps to the source
 * position p = (c + 1) / 2 * (size - 1) with align_corners, else ((c + 1) * size - 1) / 2; then
 * padding 1 (border) clips p to [0, size - 1], padding 2 (reflection) reflects it off the
 * borders (at -0.5 and size - 0.5, or 0 and size - 1 with align_corners) and clips it. */
#define CN_GS_BILINEAR   0 /* the values of cn_grid_mode and cn_grid_padding (cinder/ops.h) */
#define CN_GS_NEAREST    1
#define CN_GS_ZEROS      0
#define CN_GS_BORDER     1
#define CN_GS_REFLECTION 2

/* p clipped to [0, size - 1]; *d times 0 where clipped (PyTorch's clip_coordinates_set_grad). */
CN_HOST_DEVICE static inline double cn_gs_clip(double p, int64_t size, double *d) {
    if (p <= 0) {
        *d = 0;
        return 0;
    }
    if (p >= (double)(size - 1)) {
        *d = 0;
        return (double)(size - 1);
    }
    return p;
}

/* The source position of grid coordinate c along a dim of `size`, and in *d its derivative
 * with respect to c. */
CN_HOST_DEVICE static inline double cn_gs_coord(double c, int64_t size, int padding, int align,
                                                double *d) {
    double p;
    if (align) {
        p = (c + 1) / 2 * (double)(size - 1);
        *d = (double)(size - 1) / 2;
    } else {
        p = ((c + 1) * (double)size - 1) / 2;
        *d = (double)size / 2;
    }
    if (padding == CN_GS_BORDER) return cn_gs_clip(p, size, d);
    if (padding == CN_GS_REFLECTION) {
        int64_t lo2 = align ? 0 : -1, hi2 = align ? 2 * (size - 1) : 2 * size - 1;
        if (lo2 == hi2) {
            *d = 0;
            return 0;
        }
        double min = (double)lo2 / 2, span = (double)(hi2 - lo2) / 2, in = p - min, sign = 1;
        if (in < 0) {
            sign = -1;
            in = -in;
        }
        double extra = fmod(in, span);
        int64_t flips = (int64_t)floor(in / span);
        if (flips % 2 == 0) {
            p = extra + min;
            *d *= sign;
        } else {
            p = span - extra + min;
            *d *= -sign;
        }
        return cn_gs_clip(p, size, d);
    }
    return p;
}

/* The taps of one grid point: the in-bounds input positions it reads (zeros padding: the others
 * read 0), their weights, the weights' derivatives with respect to the source positions ix, iy
 * (bilinear; 0 for nearest), and d ix / d gx, d iy / d gy. */
typedef struct cn_gs_taps {
    int n;
    int64_t y[4], x[4];
    double w[4], wx[4], wy[4];
    double dx, dy;
} cn_gs_taps;

/* Bilinear reads the four neighbours of (ix, iy) with weights (1 - tx or tx) * (1 - ty or ty);
 * nearest reads the entry at (ix, iy) rounded half to even (nearbyint, as PyTorch). A NaN
 * coordinate reads nothing. */
CN_HOST_DEVICE static inline void cn_gs_taps_of(int mode, int padding, int align, int64_t h,
                                                int64_t w, double gx, double gy, cn_gs_taps *t) {
    double ix = cn_gs_coord(gx, w, padding, align, &t->dx);
    double iy = cn_gs_coord(gy, h, padding, align, &t->dy);
    t->n = 0;
    if (mode == CN_GS_NEAREST) {
        double rx = nearbyint(ix), ry = nearbyint(iy);
        if (rx >= 0 && rx <= (double)(w - 1) && ry >= 0 && ry <= (double)(h - 1)) {
            t->x[0] = (int64_t)rx;
            t->y[0] = (int64_t)ry;
            t->w[0] = 1;
            t->wx[0] = t->wy[0] = 0;
            t->n = 1;
        }
        return;
    }
    double fx = floor(ix), fy = floor(iy), tx = ix - fx, ty = iy - fy;
    for (int k = 0; k < 4; k++) {
        int ox = k & 1, oy = k >> 1;
        double px = fx + ox, py = fy + oy;
        if (!(px >= 0 && px <= (double)(w - 1) && py >= 0 && py <= (double)(h - 1))) continue;
        double ax = ox ? tx : 1 - tx, ay = oy ? ty : 1 - ty;
        t->x[t->n] = (int64_t)px;
        t->y[t->n] = (int64_t)py;
        t->w[t->n] = ax * ay;
        t->wx[t->n] = ox ? ay : -ay;
        t->wy[t->n] = oy ? ax : -ax;
        t->n++;
    }
}

#endif
