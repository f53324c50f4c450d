#!/usr/bin/env python3
"""Fits the coefficients of erf_f32 / erfc_f32 in src/backends/cpu/cpu_math.h (vectorisable erf
for f32, used by erf and gelu) and prints them as C. Run by hand (numpy): the build never runs it.

    /path/to/venv/bin/python scripts/fit_erf_f32.py

Two branches, chosen per element by t = |x| (both computed, one selected, so loops vectorise):
  t <  0.875:  erf(t) = t + t Q(t^2),   Q a degree-5 polynomial (least squares on Chebyshev
               nodes against math.erf)
  t >= 0.875:  erfc(t) = exp(S(v) - t^2) (1/t),  v = (1/t) A - B mapping 1/t in [1/10.25, 1/0.875]
               onto [-1, 1], S a degree-11 polynomial fitted to log(erfc(t)) + t^2 + log(t)
               (smooth in 1/t; the centred variable keeps float Horner well conditioned); t is
               clamped to 10.25, past which exp underflows in f32 anyway.
It then evaluates the float32 arithmetic the C code performs (numpy float32, exp rounded once)
over a dense sweep and prints the largest errors: erf in ulps, erfc relative.
"""
import math

import numpy as np

f32 = np.float32
C, T = 0.875, 10.25
SMALL_DEG, LARGE_DEG = 5, 11


def cheb(a, b, n):
    k = np.arange(n)
    return (a + b) / 2 + (b - a) / 2 * np.cos((2 * k + 1) * np.pi / (2 * n))


def fit(x, y, deg):
    c, *_ = np.linalg.lstsq(np.vander(x, deg + 1, increasing=True), y, rcond=None)
    return [f32(v) for v in c]


def horner(c, x):
    r = np.full_like(x, c[-1])
    for ci in c[-2::-1]:
        r = (r * x + ci).astype(f32)
    return r


def main():
    t = cheb(0, C, 4000)
    q = fit(t * t, np.array([math.erf(v) / v - 1 for v in t]), SMALL_DEG)
    umin, umax = 1 / T, 1 / C
    A, B = f32(2 / (umax - umin)), f32((umax + umin) / (umax - umin))
    t = cheb(C, T, 8000)
    s = fit((1 / t) * float(A) - float(B),
            np.array([math.log(math.erfc(v)) + v * v + math.log(v) for v in t]), LARGE_DEG)
    print("/* erf_f32 (scripts/fit_erf_f32.py): t < %.9g */" % C)
    print("static const float ERF_Q[%d] = {%s};" % (len(q), ", ".join("%.9ef" % v for v in q)))
    print("/* v = (1 / t) * %.9ef - %.9ef */" % (A, B))
    print("static const float ERFC_S[%d] = {%s};" % (len(s), ", ".join("%.9ef" % v for v in s)))
    # the float32 evaluation, as the C code does it
    x = np.linspace(1e-6, C, 300001).astype(f32)
    small = (x + (x * horner(q, (x * x).astype(f32))).astype(f32)).astype(f32)
    ref = np.array([math.erf(float(v)) for v in x])
    print("small branch: erf within %.3f ulp" %
          np.max(np.abs(small - ref) / np.spacing(ref.astype(f32)).astype(np.float64)))
    x = np.linspace(C, T, 600001).astype(f32)
    u = (f32(1) / x).astype(f32)
    v = ((u * A).astype(f32) - B).astype(f32)
    arg = (horner(s, v) - (x * x).astype(f32)).astype(f32)
    erfc = (np.exp(arg.astype(np.float64)).astype(f32) * u).astype(f32)
    ref_c = np.array([math.erfc(float(v)) for v in x])
    ref = np.array([math.erf(float(v)) for v in x])
    erf = (f32(1) - erfc).astype(f32)
    normal = ref_c > 1.2e-38
    print("large branch: erf within %.3f ulp, erfc relative error %.3g (its normal range)" %
          (np.max(np.abs(erf - ref) / np.spacing(ref.astype(f32)).astype(np.float64)),
           np.max(np.abs(erfc[normal] - ref_c[normal]) / ref_c[normal])))


if __name__ == "__main__":
    main()
