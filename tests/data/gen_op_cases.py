#!/usr/bin/env python3
"""Writes tests/data/op_cases.inc: inputs and PyTorch's float64 results for every op of cinder's
op table (src/core/op_table.c), the oracle of tests/test_op_table.c. Run by hand, from the
repository root, with PyTorch from PyPI:

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install torch
    /tmp/venv/bin/python tests/data/gen_op_cases.py

The suite never runs this script: the generated file is committed.

Each case names its op (the op table's name) and a variant, its inputs (kind, shape, values),
its attributes (ints and reals, which tests/test_op_table.c hands to the public call in the way
the case's op says) and the expected output, computed by PyTorch in float64. Float inputs are
float32-exact (so the test's f32 run sees the same values), except the "raw" ones of cast.
Inputs keep to each op's smooth, safe domain so that the same values serve the test's gradient
check by finite differences: positive where log, sqrt and pow's base need it, away from zero for
divisors, prod, abs, relu, sign, reciprocal and atan2's first argument, inside (-1, 1) for
asin, acos and atanh, above 1 for acosh, off the integers and halves for floor, ceil, round and
trunc, distinct values at least 0.03 apart where max, min, maximum, minimum, argmax and the max
pool pick one (no ties), and clamp's bounds off the grid of those values (no kinks within the
differences' step).

Every value is written with 17 significant digits, so the C side reads back the very doubles.
The random ops (rand_uniform, rand_normal) are not here: PyTorch's generator is not cinder's
Philox stream, so the test checks their statistics instead.
"""
import os
import re
import zlib

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def f32(t):
    return t.float().double()


class Gen:
    """Deterministic values for one case: its own torch generator seeded from the case's name."""

    def __init__(self, name):
        self.g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
        self.distinct = None

    def uniform(self, shape, lo, hi):
        return lo + (hi - lo) * torch.rand(shape, generator=self.g)

    def values(self, dom, shape):
        n = 1
        for d in shape:
            n *= d
        if isinstance(dom, list):  # literal values
            assert len(dom) == n, (dom, shape)
            return torch.tensor(dom, dtype=torch.float64).reshape(shape)
        if dom == "u":  # uniform in [-1.5, 1.5]
            return f32(self.uniform(shape, -1.5, 1.5))
        if dom == "p":  # positive, [0.5, 2]
            return f32(self.uniform(shape, 0.5, 2.0))
        if dom == "a":  # away from zero: +-[0.5, 1.5]
            sign = torch.where(torch.rand(shape, generator=self.g) < 0.5, -1.0, 1.0)
            return f32(sign * self.uniform(shape, 0.5, 1.5))
        if dom == "d":  # distinct magnitudes 0.15 + 0.03 k, random signs, shared by the case
            if self.distinct is None:
                self.distinct = torch.randperm(64, generator=self.g).tolist()
            k = torch.tensor([self.distinct.pop() for _ in range(n)], dtype=torch.float64)
            sign = torch.where(torch.rand(n, generator=self.g) < 0.5, -1.0, 1.0)
            return f32(sign * (0.15 + 0.03 * k)).reshape(shape)
        if dom == "s":  # strictly inside (-1, 1): [-0.9, 0.9] (asin, acos, atanh, tan)
            return f32(self.uniform(shape, -0.9, 0.9))
        if dom == "h":  # above 1: [1.1, 3] (acosh)
            return f32(self.uniform(shape, 1.1, 3.0))
        if dom == "n":  # off the integers and the halves: m + [0.1, 0.4] or m + [0.6, 0.9], m in
            # [-3, 2] (floor, ceil, round, trunc: no jump within the differences' step)
            m = torch.randint(-3, 3, shape, generator=self.g).double()
            frac = self.uniform(shape, 0.1, 0.4)
            frac = torch.where(torch.rand(shape, generator=self.g) < 0.5, frac, frac + 0.5)
            return f32(m + frac)
        if dom == "k":  # eighths in [-1, 1]: exact, with ties (comparisons)
            return torch.randint(-8, 9, shape, generator=self.g).double() / 8
        if dom == "r":  # raw doubles in [-4, 4], not float32-exact (cast)
            return self.uniform(shape, -4.0, 4.0)
        if dom == "b":  # bools
            return (torch.rand(shape, generator=self.g) < 0.5).double()
        raise ValueError(dom)


# (kind, shape, domain): kind f (float), i (i64), b (bool); domain as Gen.values.
def Fl(shape, dom="u"):
    return ("f", list(shape), dom)


def In(shape, values):
    return ("i", list(shape), values)


def Bo(shape, dom="b"):
    return ("b", list(shape), dom)


CASES = []


def case(op, variant, inputs, fn, ints=(), reals=(), eps=0.0, tol=0.0):
    """fn(*tensors) -> the expected output (float64, int64 or bool tensor)."""
    CASES.append(dict(op=op, variant=variant, inputs=inputs, fn=fn, ints=list(ints),
                      reals=list(reals), eps=eps, tol=tol))


# ---- elementwise unary -------------------------------------------------------------------------
case("neg", "neg", [Fl([2, 3])], torch.neg)
case("abs", "abs", [Fl([2, 3], "d")], torch.abs)
case("relu", "relu", [Fl([2, 3], "d")], torch.relu)
case("exp", "exp", [Fl([2, 3])], torch.exp)
case("log", "log", [Fl([2, 3], "p")], torch.log)
case("log1p", "log1p", [Fl([2, 3], "p")], torch.log1p)
case("sqrt", "sqrt", [Fl([2, 3], "p")], torch.sqrt)
case("rsqrt", "rsqrt", [Fl([2, 3], "p")], torch.rsqrt)
case("sin", "sin", [Fl([2, 3])], torch.sin)
case("cos", "cos", [Fl([2, 3])], torch.cos)
case("tanh", "tanh", [Fl([2, 3])], torch.tanh)
case("sigmoid", "sigmoid", [Fl([2, 3])], torch.sigmoid)
case("silu", "silu", [Fl([2, 3])], F.silu)
case("gelu", "gelu_erf", [Fl([2, 3])], lambda x: F.gelu(x), ints=[0])
case("gelu", "gelu_tanh", [Fl([2, 3])], lambda x: F.gelu(x, approximate="tanh"), ints=[1])
case("erf", "erf", [Fl([2, 3])], torch.erf)
# the roundings and sign off their jumps (zero gradient), and on i64 (unchanged; sign -1, 0, 1);
# round's ties to even are checked by hand in tests/test_op_table.c (no gradient there)
INT_VALUES = [-7, -1, 0, 3, 12, -40]
for name, fn in (("floor", torch.floor), ("ceil", torch.ceil), ("round", torch.round),
                 ("trunc", torch.trunc)):
    case(name, name, [Fl([2, 3], "n")], fn)
    case(name, name + "_i64", [In([2, 3], INT_VALUES)], fn)
case("sign", "sign", [Fl([2, 3], "a")], torch.sign)
case("sign", "sign_i64", [In([2, 3], INT_VALUES)], torch.sign)
case("reciprocal", "reciprocal", [Fl([2, 3], "a")], torch.reciprocal)
case("tan", "tan", [Fl([2, 3], "s")], torch.tan)
case("asin", "asin", [Fl([2, 3], "s")], torch.asin)
case("acos", "acos", [Fl([2, 3], "s")], torch.acos)
case("atan", "atan", [Fl([2, 3])], torch.atan)
case("sinh", "sinh", [Fl([2, 3])], torch.sinh)
case("cosh", "cosh", [Fl([2, 3])], torch.cosh)
case("asinh", "asinh", [Fl([2, 3])], torch.asinh)
case("acosh", "acosh", [Fl([2, 3], "h")], torch.acosh)
case("atanh", "atanh", [Fl([2, 3], "s")], torch.atanh)

# ---- elementwise with scalars ------------------------------------------------------------------
case("add_scalar", "add_scalar", [Fl([2, 3])], lambda x: x + 0.625, reals=[0.625])
case("mul_scalar", "mul_scalar", [Fl([2, 3])], lambda x: x * -1.75, reals=[-1.75])
case("pow_scalar", "pow_scalar", [Fl([2, 3], "p")], lambda x: x ** 2.5, reals=[2.5])
# bounds off the 0.15 + 0.03 k grid of "d", so no value sits on a kink
case("clamp", "clamp", [Fl([3, 4], "d")], lambda x: torch.clamp(x, -0.505, 0.615),
     reals=[-0.505, 0.615])

# ---- elementwise binary (b broadcast against a) ----------------------------------------------
case("add", "add", [Fl([2, 3]), Fl([1, 3])], torch.add)
case("sub", "sub", [Fl([2, 3]), Fl([2, 1])], torch.sub)
case("mul", "mul", [Fl([2, 3]), Fl([3])], torch.mul)
case("div", "div", [Fl([2, 3]), Fl([2, 1], "a")], torch.div)
case("pow", "pow", [Fl([2, 3], "p"), Fl([3])], torch.pow)
case("maximum", "maximum", [Fl([2, 3], "d"), Fl([3], "d")], torch.maximum)
case("minimum", "minimum", [Fl([2, 3], "d"), Fl([2, 1], "d")], torch.minimum)
# a away from zero: no point near the branch cut (a = 0, b < 0) or the origin
case("atan2", "atan2", [Fl([2, 3], "a"), Fl([3])], torch.atan2)

# ---- issue 16's remaining elementwise ops -------------------------------------------------------
# remainder and fmod on literal values of every sign pairing, a / b off the integers (floor and
# trunc of a / b, the gradient of b, jump nowhere near); ints too, with -1 and mixed signs
REM_A = [5.25, -5.25, 1.75, -0.625, 2.5, -3.5]
REM_B = [1.5, -2.0, 0.75]
REM_IA = [7, -7, 7, -7, 0, -9]
REM_IB = [3, -3, -4]
for name, fn in (("remainder", torch.remainder), ("fmod", torch.fmod)):
    case(name, name, [Fl([2, 3], REM_A), Fl([3], REM_B)], fn)
    case(name, name + "_i64", [In([2, 3], REM_IA), In([3], REM_IB)], fn)
    case(name, name + "_i64_minus_one", [In([4], [-9223372036854775808, 5, -5, 0]), In([1], [-1])],
         fn)
case("remainder_scalar", "remainder_scalar", [Fl([2, 3], REM_A)],
     lambda x: torch.remainder(x, -1.375), reals=[-1.375])
case("remainder_scalar", "remainder_scalar_i64", [In([2, 3], REM_IA)],
     lambda x: torch.remainder(x, 4), reals=[4])
case("hypot", "hypot", [Fl([2, 3]), Fl([3], "a")], torch.hypot)
SPECIALS = [0.0, float("nan"), float("inf"), float("-inf"), 1.5, -0.0, float("nan"), -2.0]
case("is_nan", "is_nan", [Fl([2, 4], SPECIALS)], torch.isnan)
case("is_nan", "is_nan_i64", [In([3], [0, -1, 5])], torch.isnan)
case("is_inf", "is_inf", [Fl([2, 4], SPECIALS)], torch.isinf)
case("is_inf", "is_inf_i64", [In([3], [0, -1, 5])], torch.isinf)
# bitwise ops on i64 (negative values: two's complement); shift counts past both ends of 64 bits
BIT_A = [0x5a5a, -1, 12345, -98765, 7, -(2 ** 40)]  # results exact in doubles
BIT_B = [0x0ff0, -256, 3]
for name, fn in (("bitwise_and", torch.bitwise_and), ("bitwise_or", torch.bitwise_or),
                 ("bitwise_xor", torch.bitwise_xor)):
    case(name, name, [In([2, 3], BIT_A), In([3], BIT_B)], fn)
    case(name + "_scalar", name + "_scalar", [In([2, 3], BIT_A)], lambda x, f=fn: f(x, -300),
         reals=[-300])
SHIFT_X = [5, -5, 7, -8, 1, -1, 3, -3]
SHIFT_N = [-1, 64, 63, 2]
for name, fn in (("bitwise_left_shift", torch.bitwise_left_shift),
                 ("bitwise_right_shift", torch.bitwise_right_shift)):
    case(name, name, [In([2, 4], SHIFT_X), In([4], SHIFT_N)], fn)
    for n in (3, 64, -2):
        case(name + "_scalar", "%s_scalar_%s" % (name, str(n).replace("-", "minus")),
             [In([2, 4], SHIFT_X)], lambda x, f=fn, n=n: f(x, n), reals=[n])
case("bitwise_not", "bitwise_not", [In([2, 3], BIT_A)], torch.bitwise_not)
case("logical_xor", "logical_xor", [Bo([2, 4]), Bo([4])], torch.logical_xor)
# integer powers (burn's powi): negative bases, 0^0, negative exponents (1 / x^-y truncated)
case("pow", "pow_i64", [In([2, 4], [2, -3, 1, -1, 0, 5, -2, 7]), In([4], [3, -1, 0, 5])],
     torch.pow)
case("pow_scalar", "pow_scalar_i64", [In([2, 3], [2, -3, 1, -1, 0, 12])], lambda x: x ** 3,
     reals=[3])
# activations, with values away from their kinks (0 for leaky_relu, prelu and elu, +-3 for the
# hard ones, softplus's threshold); log_sigmoid also far out, where a naive form overflows
case("leaky_relu", "leaky_relu", [Fl([2, 3], "d")], lambda x: F.leaky_relu(x, 0.125),
     reals=[0.125])
case("prelu", "prelu_channels", [Fl([2, 3, 2], "d"), Fl([3])], F.prelu)
case("prelu", "prelu_one", [Fl([2, 3], "d"), Fl([1])], F.prelu)
HARD_X = [-4.5, -2.25, -0.5, 0.75, 2.5, 3.75]
case("hard_sigmoid", "hard_sigmoid", [Fl([2, 3], HARD_X)], F.hardsigmoid)
case("hard_swish", "hard_swish", [Fl([2, 3], HARD_X)], F.hardswish)
case("log_sigmoid", "log_sigmoid", [Fl([2, 3])], F.logsigmoid)
case("log_sigmoid", "log_sigmoid_far", [Fl([2, 3], [-100, -30, -5.5, 7, 40, 100])], F.logsigmoid)
case("softplus", "softplus_beta", [Fl([2, 3], [-1.25, -0.3, 0.4, 0.6, 0.9, 1.4])],
     lambda x: F.softplus(x, 2.0, 1.5), reals=[2.0, 1.5])
case("softplus", "softplus_default", [Fl([2, 3], [-30, -2.5, 0.25, 3, 19.5, 25])], F.softplus,
     reals=[1, 20])
case("elu", "elu", [Fl([2, 3], "d")], lambda x: F.elu(x, 1.25), reals=[1.25])
# comparisons with a scalar: floats on eighths with ties; ints against a whole and a fractional s
for name, fn in (("eq", torch.eq), ("ne", torch.ne), ("lt", torch.lt), ("le", torch.le),
                 ("gt", torch.gt), ("ge", torch.ge)):
    case(name + "_scalar", name + "_scalar", [Fl([3, 4], "k")], lambda x, f=fn: f(x, 0.25),
         reals=[0.25])
    case(name + "_scalar", name + "_scalar_i64", [In([2, 4], [-3, 2, 3, 4, 0, 3, -9, 7])],
         lambda x, f=fn: f(x, 3), reals=[3])
    case(name + "_scalar", name + "_scalar_i64_half", [In([2, 4], [-3, 2, 3, 4, 0, 3, -9, 7])],
         lambda x, f=fn: f(x, 2.5), reals=[2.5])

# ---- comparisons and logic (exact) -------------------------------------------------------------
for name, fn in (("eq", torch.eq), ("ne", torch.ne), ("lt", torch.lt), ("le", torch.le),
                 ("gt", torch.gt), ("ge", torch.ge)):
    case(name, name, [Fl([3, 4], "k"), Fl([4], "k")], fn)
case("logical_and", "logical_and", [Bo([2, 4]), Bo([4])], torch.logical_and)
case("logical_or", "logical_or", [Bo([2, 4]), Bo([4])], torch.logical_or)
case("logical_not", "logical_not", [Bo([2, 4])], torch.logical_not)
case("where", "where", [Bo([2, 3]), Fl([2, 3]), Fl([3])], torch.where)

# ---- data movement and creation ----------------------------------------------------------------
# cast to the other float dtype: the f64 run rounds raw doubles to f32 (nearest even); the f32 run
# widens the same rounded values to f64. Its gradient is checked with f32's step and tolerance.
case("cast", "cast_float", [Fl([2, 3], "r")], f32, eps=1e-3, tol=1e-3)
case("cast", "cast_i64", [Fl([2, 4], "r")], lambda x: x.to(torch.int64))
case("cast", "cast_bool", [Fl([2, 3], [0.0, 1.5, -0.0, -2.0, 0.25, 0.0])],
     lambda x: x.to(torch.bool))
# clone of a transposed (strided) input: a dense copy
case("copy", "copy", [Fl([2, 3])], lambda x: x.t().clone())
case("fill", "fill_float", [], lambda: torch.full([2, 3], 2.75), ints=[2, 3], reals=[2.75])
case("fill", "fill_i64", [], lambda: torch.full([3, 2], -3, dtype=torch.int64), ints=[3, 2],
     reals=[-3])

# ---- reductions: ints = (dim, keepdim), or none for all elements ------------------------------
for name, dom, fn_dim, fn_all in (
    ("sum", "u", lambda x, d, k: x.sum(d, keepdim=k), torch.sum),
    ("mean", "u", lambda x, d, k: x.mean(d, keepdim=k), torch.mean),
    ("max", "d", lambda x, d, k: x.amax(d, keepdim=k), torch.max),
    ("min", "d", lambda x, d, k: x.amin(d, keepdim=k), torch.min),
    ("prod", "a", lambda x, d, k: x.prod(d, keepdim=k), torch.prod),
    ("argmax", "d", lambda x, d, k: x.argmax(d, keepdim=k), torch.argmax),
    ("argmin", "d", lambda x, d, k: x.argmin(d, keepdim=k), torch.argmin),
    ("logsumexp", "u", lambda x, d, k: x.logsumexp(d, keepdim=k),
     lambda x: x.logsumexp(list(range(x.dim())))),
):
    case(name, name + "_dim", [Fl([3, 4], dom)], lambda x, f=fn_dim: f(x, 0, True), ints=[0, 1])
    case(name, name + "_dim_last", [Fl([3, 4], dom)], lambda x, f=fn_dim: f(x, -1, False),
         ints=[-1, 0])
    case(name, name + "_all", [Fl([3, 4], dom)], fn_all)
# var: ints = (correction) for all elements, (correction, dim, keepdim) over a dim
case("var", "var_dim", [Fl([3, 4])], lambda x: x.var(1, correction=1, keepdim=True),
     ints=[1, 1, 1])
case("var", "var_all", [Fl([3, 4])], lambda x: x.var(correction=0), ints=[0])
case("softmax", "softmax", [Fl([3, 4])], lambda x: torch.softmax(x, 0), ints=[0])
case("log_softmax", "log_softmax", [Fl([3, 4])], lambda x: torch.log_softmax(x, -1), ints=[-1])

# ---- scans and sorts along a dim, any / all ---------------------------------------------------
# cumsum, cumprod: ints = (dim); cumprod also with zeros in x (its gradient must not divide by x)
case("cumsum", "cumsum", [Fl([3, 4])], lambda x: torch.cumsum(x, 1), ints=[1])
case("cumsum", "cumsum_dim0", [Fl([3, 2, 2])], lambda x: torch.cumsum(x, 0), ints=[0])
case("cumsum", "cumsum_i64", [In([2, 3], INT_VALUES)], lambda x: torch.cumsum(x, -1), ints=[-1])
case("cumprod", "cumprod", [Fl([3, 4], "a")], lambda x: torch.cumprod(x, 1), ints=[1])
CUMPROD_ZEROS = [2.0, 0.0, -1.5, 0.5, 0.0, 1.25, 0.0, -2.0, 0.75, 1.5, -0.5, 2.0]
case("cumprod", "cumprod_zeros", [Fl([3, 4], CUMPROD_ZEROS)], lambda x: torch.cumprod(x, 1),
     ints=[1])
case("cumprod", "cumprod_zeros_dim0", [Fl([4, 3], CUMPROD_ZEROS)],
     lambda x: torch.cumprod(x, 0), ints=[0])
case("cumprod", "cumprod_i64", [In([2, 3], INT_VALUES)], lambda x: torch.cumprod(x, 1), ints=[1])


def cumprod_grad(dim):
    def run(g, x):
        x = x.clone().requires_grad_(True)
        torch.cumprod(x, dim).backward(g)
        return x.grad
    return run


# cumprod_backward: in = (g, x), ints = (dim), against autograd's gradient (x with zeros)
case("cumprod_backward", "cumprod_backward", [Fl([3, 4]), Fl([3, 4], CUMPROD_ZEROS)],
     cumprod_grad(1), ints=[1])
case("cumprod_backward", "cumprod_backward_dim0", [Fl([4, 3]), Fl([4, 3], CUMPROD_ZEROS)],
     cumprod_grad(0), ints=[0])
# cummax, cummin, sort: the last int picks the output (0 values, 1 indices); distinct values where
# the gradient is checked, ties (last index for cummax / cummin, kept order for sort) on ints
TIES = [3, 1, 3, 0, 1, 3, -2, 1, 0, 3, 1, -2]
for name, fn in (("cummax", torch.cummax), ("cummin", torch.cummin)):
    for which, out in ((0, "values"), (1, "indices")):
        case(name, "%s_%s" % (name, out), [Fl([3, 4], "d")],
             lambda x, f=fn, w=which: f(x, 1)[w], ints=[1, which])
        case(name, "%s_dim0_%s" % (name, out), [Fl([4, 3], "d")],
             lambda x, f=fn, w=which: f(x, 0)[w], ints=[0, which])
        case(name, "%s_ties_%s" % (name, out), [In([3, 4], TIES)],
             lambda x, f=fn, w=which: f(x, -1)[w], ints=[-1, which])
# sort: ints = (dim, descending, which)
for which, out in ((0, "values"), (1, "indices")):
    for desc in (0, 1):
        tag = "desc" if desc else "asc"
        case("sort", "sort_%s_%s" % (tag, out), [Fl([3, 5], "d")],
             lambda x, d=desc, w=which: torch.sort(x, dim=1, descending=bool(d), stable=True)[w],
             ints=[1, desc, which])
        case("sort", "sort_dim0_%s_%s" % (tag, out), [Fl([4, 3], "d")],
             lambda x, d=desc, w=which: torch.sort(x, dim=0, descending=bool(d), stable=True)[w],
             ints=[0, desc, which])
        case("sort", "sort_ties_%s_%s" % (tag, out), [In([2, 6], TIES)],
             lambda x, d=desc, w=which: torch.sort(x, dim=-1, descending=bool(d), stable=True)[w],
             ints=[-1, desc, which])
# any / all: ints = (dim, keepdim), or none for all elements; float (with zeros), int and bool
ANY_F = [0.0, 0.0, 0.0, 1.5, 0.0, -2.0, 0.5, 0.25, 0.0, 0.0, 0.0, 0.0]
ANY_I = [0, 0, 0, 0, 3, 0, 0, -1, 2, 5, 7, 1]
for name, fn in (("any", torch.any), ("all", torch.all)):
    case(name, name + "_f_dim", [Fl([3, 4], ANY_F)], lambda x, f=fn: f(x, 1, keepdim=True),
         ints=[1, 1])
    case(name, name + "_i_dim0", [In([4, 3], ANY_I)], lambda x, f=fn: f(x, 0), ints=[0, 0])
    case(name, name + "_b_dim", [Bo([3, 4])], lambda x, f=fn: f(x, -1), ints=[-1, 0])
    case(name, name + "_all_f", [Fl([3, 4], ANY_F)], fn)
    case(name, name + "_all_b", [Bo([2, 3], [1, 1, 1, 1, 1, 1])], fn)

# ---- linear algebra, indexing ------------------------------------------------------------------
case("linear", "linear_bias", [Fl([3, 4]), Fl([5, 4]), Fl([5])], F.linear)
case("linear", "linear_batched_no_bias", [Fl([2, 3, 4]), Fl([5, 4])], F.linear)
case("linear", "linear_vector", [Fl([4]), Fl([2, 4]), Fl([2])], F.linear)
# linear_gelu: ints = approx (0 erf, 1 tanh); pre-activations up to about 5 in size, on both
# sides of the f32 erf's switch at |z| = 1.24
case("linear_gelu", "linear_gelu_erf", [Fl([3, 4]), Fl([5, 4]), Fl([5])],
     lambda x, w, b: F.gelu(F.linear(x, w, b)), ints=[0])
case("linear_gelu", "linear_gelu_tanh_batched_no_bias", [Fl([2, 3, 4]), Fl([5, 4])],
     lambda x, w: F.gelu(F.linear(x, w), approximate="tanh"), ints=[1])
# linear_add: inputs (x, w, r[, b]), r the output's shape
case("linear_add", "linear_add_bias", [Fl([3, 4]), Fl([5, 4]), Fl([3, 5]), Fl([5])],
     lambda x, w, r, b: F.linear(x, w, b) + r)
case("linear_add", "linear_add_batched_no_bias", [Fl([2, 3, 4]), Fl([5, 4]), Fl([2, 3, 5])],
     lambda x, w, r: F.linear(x, w) + r)
case("matmul", "matmul", [Fl([2, 3]), Fl([3, 4])], torch.matmul)
case("matmul", "matmul_batched", [Fl([2, 2, 3]), Fl([3, 2])], torch.matmul)
case("matmul", "matmul_i64", [In([2, 2, 3], [1, -2, 3, 0, 4, 5, -1, 2, 0, 3, 1, -4]),
                              In([3, 2], [2, -1, 0, 3, 5, 1])], torch.matmul)
GATHER_INDEX = [2, 0, 1, 2, 0, 0, 2, 1]  # [2, 4], repeats: gradients accumulate
case("gather", "gather", [Fl([3, 4]), In([2, 4], GATHER_INDEX)],
     lambda x, i: torch.gather(x, 0, i), ints=[0])
case("scatter_add", "scatter_add", [Fl([3, 4]), In([2, 4], GATHER_INDEX), Fl([2, 4])],
     lambda x, i, s: torch.scatter_add(x, 0, i, s), ints=[0])
case("index_select", "index_select", [Fl([4, 3]), In([5], [3, 0, 3, 1, 2])],
     lambda x, i: torch.index_select(x, 0, i), ints=[0])
case("index_select", "index_select_dim1", [Fl([2, 4]), In([3], [1, 1, 3])],
     lambda x, i: torch.index_select(x, 1, i), ints=[1])
case("one_hot", "one_hot", [In([2, 3], [0, 4, 2, 2, 1, 3])], lambda i: F.one_hot(i, 5),
     ints=[5])

# ---- indexing of issue 16: masks, triangles, flips, repeats and assignments -----------------
# float, i64 and bool inputs; index values distinct where PyTorch leaves repeats undefined
# (scatter, index_copy: cinder's last-write rule is checked in tests/test_index_ops.c)
case("masked_fill", "masked_fill", [Fl([3, 4]), Bo([4])],
     lambda x, m: torch.masked_fill(x, m, 2.5), reals=[2.5])
case("masked_fill", "masked_fill_i64", [In([2, 3], INT_VALUES), Bo([2, 1])],
     lambda x, m: torch.masked_fill(x, m, -4), reals=[-4])
case("masked_fill", "masked_fill_bool", [Bo([2, 3]), Bo([2, 3])],
     lambda x, m: torch.masked_fill(x, m, True), reals=[1])
case("tril", "tril", [Fl([3, 4])], lambda x: torch.tril(x), ints=[0])
case("tril", "tril_batched", [Fl([2, 3, 4])], lambda x: torch.tril(x, -1), ints=[-1])
case("tril", "tril_i64", [In([2, 3], INT_VALUES)], lambda x: torch.tril(x, 1), ints=[1])
case("triu", "triu", [Fl([4, 3])], lambda x: torch.triu(x, 1), ints=[1])
case("triu", "triu_batched", [Fl([2, 3, 3])], lambda x: torch.triu(x, -1), ints=[-1])
case("triu", "triu_bool", [Bo([3, 3])], lambda x: torch.triu(x), ints=[0])
case("flip", "flip", [Fl([2, 3, 4])], lambda x: torch.flip(x, [0, 2]), ints=[0, 2])
case("flip", "flip_last", [Fl([3, 4])], lambda x: torch.flip(x, [-1]), ints=[-1])
case("flip", "flip_i64", [In([2, 3], INT_VALUES)], lambda x: torch.flip(x, [1]), ints=[1])
case("flip", "flip_bool", [Bo([2, 4])], lambda x: torch.flip(x, [0, 1]), ints=[0, 1])
case("repeat", "repeat", [Fl([2, 3])], lambda x: x.repeat(2, 1, 3), ints=[2, 1, 3])
case("repeat", "repeat_dim", [Fl([3, 2])], lambda x: x.repeat(1, 3), ints=[1, 3])
case("repeat", "repeat_i64", [In([2, 3], INT_VALUES)], lambda x: x.repeat(2, 2), ints=[2, 2])
case("repeat", "repeat_bool", [Bo([3])], lambda x: x.repeat(2, 2), ints=[2, 2])
SCATTER_INDEX = [2, 0, 1, 2, 0, 1, 2, 1]  # [2, 4]: distinct down each column
case("scatter", "scatter", [Fl([3, 4]), In([2, 4], SCATTER_INDEX), Fl([2, 4])],
     lambda x, i, s: torch.scatter(x, 0, i, s), ints=[0])
case("scatter", "scatter_dim1", [Fl([2, 5]), In([2, 3], [4, 0, 2, 1, 3, 0]), Fl([2, 3])],
     lambda x, i, s: torch.scatter(x, 1, i, s), ints=[1])
case("scatter", "scatter_i64", [In([2, 3], INT_VALUES), In([1, 3], [1, 0, 1]),
                                In([1, 3], [5, 6, 7])],
     lambda x, i, s: torch.scatter(x, 0, i, s), ints=[0])


def slice_assign(dim, start, end, step):
    def run(x, v):
        y = x.clone()
        index = [slice(None)] * x.dim()
        index[dim] = slice(start, end, step)
        y[tuple(index)] = v
        return y
    return run


# ints = dim, start, end, step (as cn_slice takes them)
case("slice_assign", "slice_assign", [Fl([5, 4]), Fl([2, 4])], slice_assign(0, 1, 5, 2),
     ints=[0, 1, 5, 2])
case("slice_assign", "slice_assign_last", [Fl([3, 5]), Fl([3, 3])], slice_assign(1, -4, 4, 1),
     ints=[-1, -4, 4, 1])
case("slice_assign", "slice_assign_i64", [In([2, 3], INT_VALUES), In([2, 1], [9, 8])],
     slice_assign(1, 2, 3, 1), ints=[1, 2, 3, 1])
case("index_copy", "index_copy", [Fl([4, 3]), In([2], [3, 0]), Fl([2, 3])],
     lambda x, i, s: torch.index_copy(x, 0, i, s), ints=[0])
case("index_copy", "index_copy_dim1", [Fl([2, 4]), In([3], [1, 3, 2]), Fl([2, 3])],
     lambda x, i, s: torch.index_copy(x, 1, i, s), ints=[1])
case("index_copy", "index_copy_bool", [Bo([3, 2]), In([1], [2]), Bo([1, 2])],
     lambda x, i, s: torch.index_copy(x, 0, i, s), ints=[0])
case("index_add", "index_add", [Fl([4, 3]), In([5], [3, 0, 3, 1, 2]), Fl([5, 3])],
     lambda x, i, s: torch.index_add(x, 0, i, s), ints=[0])
case("index_add", "index_add_dim1", [Fl([2, 4]), In([3], [1, 1, 3]), Fl([2, 3])],
     lambda x, i, s: torch.index_add(x, 1, i, s), ints=[1])
case("index_add", "index_add_i64", [In([2, 3], INT_VALUES), In([2], [1, 1]),
                                    In([2, 3], [1, 2, 3, 4, 5, 6])],
     lambda x, i, s: torch.index_add(x, 0, i, s), ints=[0])

# unfold: ints = dim, size, step (overlapping windows: their gradients add up)
case("unfold", "unfold", [Fl([2, 7])], lambda x: x.unfold(1, 3, 2), ints=[1, 3, 2])
case("unfold", "unfold_dim0", [Fl([5, 2, 2])], lambda x: x.unfold(0, 2, 1), ints=[0, 2, 1])
case("unfold", "unfold_gaps", [Fl([2, 7])], lambda x: x.unfold(1, 2, 3), ints=[1, 2, 3])
case("unfold", "unfold_i64", [In([6], [1, 2, 3, 4, 5, 6])], lambda x: x.unfold(0, 4, 3),
     ints=[0, 4, 3])
case("unfold", "unfold_bool", [Bo([2, 5])], lambda x: x.unfold(-1, 2, 2), ints=[-1, 2, 2])
# data-dependent shapes
case("nonzero", "nonzero", [Fl([3, 4], [0.0, 1.5, -0.0, 0.25, 0.0, 0.0, -2.0, 0.0, 3.0, 0.0, 0.0,
                                        0.5])], torch.nonzero)
case("nonzero", "nonzero_bool", [Bo([2, 3, 2])], torch.nonzero)
case("nonzero", "nonzero_i64", [In([5], [0, 3, 0, 0, -1])], torch.nonzero)
case("masked_select", "masked_select", [Fl([3, 4]), Bo([3, 4])], torch.masked_select)
case("masked_select", "masked_select_broadcast", [Fl([3, 1]), Bo([2, 1, 4])],
     torch.masked_select)
case("masked_select", "masked_select_i64", [In([2, 3], INT_VALUES), Bo([3])],
     torch.masked_select)

# gather_nd / scatter_nd (ONNX GatherND / ScatterND): index [B.., K] of coordinate tuples. The
# reference is plain PyTorch indexing, one tuple at a time in row-major order (repeats reduce in
# that order). scatter_nd ints = cn_scatter_reduce: 0 assign, 1 add, 2 mul, 3 min, 4 max.
def gather_nd(x, idx):
    return x[tuple(idx.unbind(-1))]


def scatter_nd(reduce):
    def run(x, idx, upd):
        y = x.clone()
        k = idx.shape[-1]
        tuples = idx.reshape(-1, k)
        updates = upd.reshape(-1, *x.shape[k:])
        for b in range(tuples.shape[0]):
            t = tuple(tuples[b].tolist())
            u = updates[b]
            if reduce == 0:
                y[t] = u
            elif reduce == 1:
                y[t] = y[t] + u
            elif reduce == 2:
                y[t] = y[t] * u
            elif reduce == 3:
                y[t] = torch.minimum(y[t], u)
            else:
                y[t] = torch.maximum(y[t], u)
        return y
    return run


case("gather_nd", "gather_nd_slices", [Fl([3, 4, 2]), In([3, 2], [2, 1, 0, 3, 2, 1])], gather_nd)
case("gather_nd", "gather_nd_entries", [Fl([3, 4]), In([2, 2, 2], [0, 0, 2, 3, 1, 2, 0, 0])],
     gather_nd)
case("gather_nd", "gather_nd_bool", [Bo([2, 3]), In([2, 1], [1, 0])], gather_nd)
case("scatter_nd", "scatter_nd_assign", [Fl([3, 4]), In([2, 1], [2, 0]), Fl([2, 4])],
     scatter_nd(0), ints=[0])
case("scatter_nd", "scatter_nd_add", [Fl([3, 4]), In([3, 2], [0, 1, 2, 3, 0, 1]), Fl([3])],
     scatter_nd(1), ints=[1])
# a zero factor: its gradient is the product of the others (no division by it)
case("scatter_nd", "scatter_nd_mul", [Fl([2, 3], "a"), In([4, 2], [0, 1, 1, 2, 0, 1, 0, 1]),
                                      Fl([4], [1.5, -0.75, 0.0, 1.25])],
     scatter_nd(2), ints=[2])
case("scatter_nd", "scatter_nd_min", [Fl([3, 3], "d"), In([3, 2], [1, 1, 0, 2, 1, 1]),
                                      Fl([3], "d")], scatter_nd(3), ints=[3])
case("scatter_nd", "scatter_nd_max", [Fl([2, 3], "d"), In([3, 1], [1, 0, 1]), Fl([3, 3], "d")],
     scatter_nd(4), ints=[4])
case("scatter_nd", "scatter_nd_add_i64", [In([2, 3], INT_VALUES), In([2, 2], [1, 2, 1, 2]),
                                          In([2], [5, 7])], scatter_nd(1), ints=[1])
case("scatter_nd", "scatter_nd_assign_bool", [Bo([2, 3]), In([1, 1], [0]), Bo([1, 3])],
     scatter_nd(0), ints=[0])

# ---- convolution and pooling: conv ints = stride h, w, padding h, w, dilation h, w, groups;
# pool ints = kernel h, w, stride h, w, padding h, w ------------------------------------------
CONV_A = [2, 1, 1, 1, 1, 2, 2]  # stride (2, 1), padding (1, 1), dilation (1, 2), groups 2
CONV_B = [1, 1, 0, 0, 1, 1, 1]


def conv(x, w, b=None, p=CONV_A):
    return F.conv2d(x, w, b, stride=p[0:2], padding=p[2:4], dilation=p[4:6], groups=p[6])


case("conv2d", "conv2d_groups_bias", [Fl([2, 2, 5, 6]), Fl([4, 1, 3, 3]), Fl([4])], conv,
     ints=CONV_A)
case("conv2d", "conv2d_plain", [Fl([1, 2, 4, 4]), Fl([3, 2, 2, 2])],
     lambda x, w: conv(x, w, None, CONV_B), ints=CONV_B)
case("conv2d_relu", "conv2d_relu_groups_bias", [Fl([2, 2, 5, 6]), Fl([4, 1, 3, 3]), Fl([4])],
     lambda x, w, b: F.relu(conv(x, w, b)), ints=CONV_A)
# conv2d then a k x k max pool at stride k (ints: conv2d's 7, then k); 5 x 6 -> 2 x 3 drops a row
CONV_P = [1, 1, 1, 1, 1, 1, 2]
case("conv2d_max_pool2d", "conv2d_max_pool2d", [Fl([2, 2, 5, 6]), Fl([4, 1, 3, 3]), Fl([4])],
     lambda x, w, b: F.max_pool2d(conv(x, w, b, CONV_P), 2, 2), ints=CONV_P + [2])
# issue 16's convolutions. conv_transpose2d ints: stride h, w, padding h, w, output_padding h, w,
# dilation h, w, groups; conv1d: stride, padding, dilation, groups; conv_transpose1d: stride,
# padding, output_padding, dilation, groups. Each with groups, bias, unequal strides and
# dilations; the second of each transposed pair has an output_padding at least the stride (PyTorch
# allows it below the dilation), whose extra rows only the bias reaches.
CT_A = [2, 1, 1, 0, 1, 0, 1, 2, 2]
CT_B = [1, 2, 0, 1, 2, 1, 3, 2, 1]


def conv_t2(p):
    return lambda x, w, b=None: F.conv_transpose2d(
        x, w, b, stride=p[0:2], padding=p[2:4], output_padding=p[4:6], groups=p[8],
        dilation=p[6:8])


case("conv_transpose2d", "conv_transpose2d_groups_bias",
     [Fl([2, 4, 3, 4]), Fl([4, 3, 3, 2]), Fl([6])], conv_t2(CT_A), ints=CT_A)
case("conv_transpose2d", "conv_transpose2d_outpad_dilation",
     [Fl([1, 2, 3, 3]), Fl([2, 2, 2, 2]), Fl([2])], conv_t2(CT_B), ints=CT_B)
case("conv_transpose2d", "conv_transpose2d_plain", [Fl([1, 2, 2, 3]), Fl([2, 3, 2, 2])],
     conv_t2([1, 1, 0, 0, 0, 0, 1, 1, 1]), ints=[1, 1, 0, 0, 0, 0, 1, 1, 1])
C1_A = [2, 1, 2, 2]


def conv_1(p):
    return lambda x, w, b=None: F.conv1d(x, w, b, stride=p[0], padding=p[1], dilation=p[2],
                                         groups=p[3])


case("conv1d", "conv1d_groups_bias", [Fl([2, 4, 9]), Fl([6, 2, 3]), Fl([6])], conv_1(C1_A),
     ints=C1_A)
case("conv1d", "conv1d_plain", [Fl([1, 2, 5]), Fl([3, 2, 2])], conv_1([1, 0, 1, 1]),
     ints=[1, 0, 1, 1])
CT1_A = [2, 1, 1, 1, 2]
CT1_B = [1, 0, 2, 3, 1]


def conv_t1(p):
    return lambda x, w, b=None: F.conv_transpose1d(x, w, b, stride=p[0], padding=p[1],
                                                   output_padding=p[2], dilation=p[3],
                                                   groups=p[4])


case("conv_transpose1d", "conv_transpose1d_groups_bias", [Fl([2, 4, 5]), Fl([4, 3, 3]), Fl([6])],
     conv_t1(CT1_A), ints=CT1_A)
case("conv_transpose1d", "conv_transpose1d_outpad_dilation", [Fl([1, 2, 4]), Fl([2, 3, 2])],
     conv_t1(CT1_B), ints=CT1_B)
# conv3d ints: stride d, h, w, padding d, h, w, dilation d, h, w, groups; conv_transpose3d: stride
# (3), padding (3), output_padding (3), dilation (3), groups
C3_A = [2, 1, 1, 1, 0, 1, 1, 2, 1, 2]
C3_B = [1, 1, 1, 0, 0, 0, 1, 1, 1, 1]


def conv_3(p):
    return lambda x, w, b=None: F.conv3d(x, w, b, stride=p[0:3], padding=p[3:6],
                                         dilation=p[6:9], groups=p[9])


case("conv3d", "conv3d_groups_bias", [Fl([2, 4, 4, 6, 4]), Fl([6, 2, 2, 3, 2]), Fl([6])],
     conv_3(C3_A), ints=C3_A)
case("conv3d", "conv3d_plain", [Fl([1, 2, 3, 3, 3]), Fl([2, 2, 2, 2, 2])], conv_3(C3_B),
     ints=C3_B)
CT3_A = [2, 1, 2, 1, 0, 0, 1, 0, 1, 1, 2, 1, 2]
CT3_B = [1, 1, 1, 0, 0, 0, 2, 0, 0, 3, 1, 1, 1]


def conv_t3(p):
    return lambda x, w, b=None: F.conv_transpose3d(
        x, w, b, stride=p[0:3], padding=p[3:6], output_padding=p[6:9], dilation=p[9:12],
        groups=p[12])


case("conv_transpose3d", "conv_transpose3d_groups_bias",
     [Fl([2, 4, 2, 3, 2]), Fl([4, 3, 2, 2, 2]), Fl([6])], conv_t3(CT3_A), ints=CT3_A)
case("conv_transpose3d", "conv_transpose3d_outpad_dilation",
     [Fl([1, 2, 2, 2, 2]), Fl([2, 2, 2, 2, 2]), Fl([2])], conv_t3(CT3_B), ints=CT3_B)
POOL_A = [3, 2, 2, 1, 1, 1]  # kernel (3, 2), stride (2, 1), padding (1, 1): windows overlap


def pool(f, p):
    return lambda x: f(x, kernel_size=p[0:2], stride=p[2:4], padding=p[4:6])


case("max_pool2d", "max_pool2d", [Fl([1, 2, 5, 4], "d")], pool(F.max_pool2d, POOL_A),
     ints=POOL_A)
case("avg_pool2d", "avg_pool2d", [Fl([1, 2, 5, 4])], pool(F.avg_pool2d, POOL_A), ints=POOL_A)

# ---- the backward kernels: ints = the other tensor's shape, then the op's ints ----------------
X_A, W_A = [2, 2, 5, 6], [4, 1, 3, 3]
G_A = list(conv(torch.zeros(X_A), torch.zeros(W_A)).shape)
case("conv2d_backward_input", "conv2d_backward_input", [Fl(G_A), Fl(W_A)],
     lambda g, w: torch.nn.grad.conv2d_input(X_A, w, g, stride=CONV_A[0:2], padding=CONV_A[2:4],
                                             dilation=CONV_A[4:6], groups=CONV_A[6]),
     ints=X_A + CONV_A)
case("conv2d_backward_weight", "conv2d_backward_weight", [Fl(G_A), Fl(X_A)],
     lambda g, x: torch.nn.grad.conv2d_weight(x, W_A, g, stride=CONV_A[0:2],
                                              padding=CONV_A[2:4], dilation=CONV_A[4:6],
                                              groups=CONV_A[6]),
     ints=W_A + CONV_A)
P_X = [1, 2, 5, 4]
P_G = list(pool(F.avg_pool2d, POOL_A)(torch.zeros(P_X)).shape)


def pool_backward(f, g, x):
    x = x.clone().requires_grad_(True)
    pool(f, POOL_A)(x).backward(g)
    return x.grad


case("max_pool2d_backward", "max_pool2d_backward", [Fl(P_G), Fl(P_X, "d")],
     lambda g, x: pool_backward(F.max_pool2d, g, x), ints=POOL_A)
case("avg_pool2d_backward", "avg_pool2d_backward", [Fl(P_G)],
     lambda g: pool_backward(F.avg_pool2d, g, torch.zeros(P_X)), ints=P_X + POOL_A)

# conv3d_backward_weight: ints = the weight's shape, then conv3d's 10
X3_A, W3_A = [2, 4, 4, 6, 4], [6, 2, 2, 3, 2]
G3_A = list(conv_3(C3_A)(torch.zeros(X3_A), torch.zeros(W3_A)).shape)
case("conv3d_backward_weight", "conv3d_backward_weight", [Fl(G3_A), Fl(X3_A)],
     lambda g, x: torch.nn.grad.conv3d_weight(x, W3_A, g, stride=C3_A[0:3], padding=C3_A[3:6],
                                              dilation=C3_A[6:9], groups=C3_A[9]),
     ints=W3_A + C3_A)
# max_pool2d_backward_index: g and each window's choice i * k + j (as conv2d_max_pool2d keeps
# them) -> the pool input's gradient, against max_unpool2d with the choices as plane indices.
# ints: the input's shape, then k; 5 x 7 with k 2 leaves a row and a column out of every window.
PI_Z, PI_K = [1, 2, 5, 7], 2
PI_CHOICES = [3, 0, 1, 2, 2, 1, 0, 3, 1, 1, 0, 2]  # g's [1, 2, 2, 3] windows


def unpool_choices(g, idx):
    ph = torch.arange(g.shape[2]).view(1, 1, -1, 1)
    pw = torch.arange(g.shape[3]).view(1, 1, 1, -1)
    flat = (ph * PI_K + idx // PI_K) * PI_Z[3] + pw * PI_K + idx % PI_K
    return F.max_unpool2d(g, flat, PI_K, PI_K, output_size=PI_Z[2:])


case("max_pool2d_backward_index", "max_pool2d_backward_index",
     [Fl([1, 2, 2, 3]), In([1, 2, 2, 3], PI_CHOICES)], unpool_choices, ints=PI_Z + [PI_K])

# conv2d_max_pool2d_backward: g, the choices, x, w -> gx, gw or gb ([N, O]: each plane's sum of
# the convolution's output gradient), autograd's conv2d gradients of max_unpool2d's expansion of
# g. ints: conv2d's 7 (groups 2, padding 1), k, the output; the 6 x 7 output leaves a column.
CP_X, CP_W, CP_C, CP_K = [2, 4, 6, 7], [6, 2, 3, 3], [1, 1, 1, 1, 1, 1, 2], 2
CP_G = [2, 6, 3, 3]
CP_CHOICES = [(5 * i + i // 7) % 4 for i in range(2 * 6 * 3 * 3)]


def conv_pool_backward(which):
    def fn(g, idx, x, w):
        ph = torch.arange(CP_G[2]).view(1, 1, -1, 1)
        pw = torch.arange(CP_G[3]).view(1, 1, 1, -1)
        flat = (ph * CP_K + idx // CP_K) * 7 + pw * CP_K + idx % CP_K
        gz = F.max_unpool2d(g, flat, CP_K, CP_K, output_size=[6, 7])
        if which == 2:
            return gz.sum((2, 3))
        x = x.clone().requires_grad_(True)
        w = w.clone().requires_grad_(True)
        z = F.conv2d(x, w, stride=CP_C[0:2], padding=CP_C[2:4], dilation=CP_C[4:6],
                     groups=CP_C[6])
        gx, gw = torch.autograd.grad(z, (x, w), gz)
        return gx if which == 0 else gw
    return fn


for which, name in enumerate(("gx", "gw", "gb")):
    case("conv2d_max_pool2d_backward", "conv2d_max_pool2d_backward_" + name,
         [Fl(CP_G), In(CP_G, CP_CHOICES), Fl(CP_X), Fl(CP_W)], conv_pool_backward(which),
         ints=CP_C + [CP_K, which])

# ---- softmax_backward: ints = the dim, 1 for log_softmax; y a softmax's (log_softmax's) output,
# against PyTorch's own backward kernels
SB_X = f32(Gen("softmax_backward_x").uniform([3, 4, 5], -2.0, 2.0))
case("softmax_backward", "softmax_backward_dim1", [Fl([3, 4, 5]), Fl([3, 4, 5], f32(torch.softmax(SB_X, 1)).flatten().tolist())],
     lambda g, y: torch.ops.aten._softmax_backward_data(g, y, 1, torch.float64), ints=[1, 0])
case("softmax_backward", "log_softmax_backward_dim2", [Fl([3, 4, 5]), Fl([3, 4, 5], f32(torch.log_softmax(SB_X, 2)).flatten().tolist())],
     lambda g, y: torch.ops.aten._log_softmax_backward_data(g, y, 2, torch.float64), ints=[2, 1])
# ---- padding and pooling of issue 16 ----------------------------------------------------------
# pad: ints = cn_pad_mode (0 constant, 1 reflect, 2 replicate, 3 circular), then PyTorch's pad
# tuple; reals[0] = the constant. Crops (negative entries) in constant and circular modes, a
# tuple of 4 dims (cinder runs it as two pads), int and bool constants.
PAD_MODES = ["constant", "reflect", "replicate", "circular"]


def pad_case(variant, x, tup, mode, value=0.0):
    m = PAD_MODES.index(mode)
    if mode == "constant":
        fn = lambda t: F.pad(t, tup, mode="constant", value=value)
    else:
        fn = lambda t: F.pad(t, tup, mode=mode)
    case("pad", variant, [x], fn, ints=[m] + list(tup), reals=[value])


pad_case("pad_constant", Fl([2, 3, 4]), (1, 2, 0, 1), "constant", 0.5)
pad_case("pad_constant_crop", Fl([2, 5]), (-1, 2, 1, -1), "constant", -1.25)
pad_case("pad_constant_4dims", Fl([2, 2, 2, 3]), (1, 0, 0, 1, 1, 1, 1, 0), "constant", 2.0)
pad_case("pad_constant_i64", In([2, 3], INT_VALUES), (1, 1), "constant", 7.0)
pad_case("pad_constant_bool", Bo([2, 3]), (0, 2, 1, 0), "constant", 1.0)
pad_case("pad_reflect", Fl([1, 2, 4, 5]), (2, 3, 1, 3), "reflect")
pad_case("pad_reflect_1d", Fl([2, 3, 4]), (3, 1), "reflect")
pad_case("pad_reflect_i64", In([1, 2, 3], INT_VALUES), (2, 1), "reflect")
pad_case("pad_replicate", Fl([1, 2, 3, 4]), (2, 1, 3, 0), "replicate")
pad_case("pad_replicate_3d", Fl([1, 1, 2, 3, 2]), (1, 1, 0, 2, 1, 0), "replicate")
pad_case("pad_circular", Fl([1, 2, 3, 4]), (2, 1, 3, 1), "circular")
pad_case("pad_circular_crop", Fl([1, 2, 5]), (-1, 2), "circular")


# pad_backward: g -> x's gradient for a pad of one dim; ints = mode, dim, left, right, x's size
# at dim; against autograd through F.pad.
def pad_backward_case(variant, x_shape, dim, left, right, mode):
    nd = len(x_shape)
    g_shape = list(x_shape)
    g_shape[dim] += left + right
    before = 1
    for s_ in x_shape[:dim]:
        before *= s_
    after = 1
    for s_ in x_shape[dim + 1:]:
        after *= s_

    def fn(g):
        # PyTorch's non-constant modes pad the last 1 to 3 dims only: x seen as [before, size]
        # or [before, size, after]
        x = torch.zeros(x_shape, requires_grad=True)
        if dim == nd - 1:
            y = F.pad(x.reshape(before, x_shape[dim]), (left, right), mode=mode)
        else:
            y = F.pad(x.reshape(before, x_shape[dim], after), (0, 0, left, right), mode=mode)
        y.backward(g.reshape(y.shape))
        return x.grad

    case("pad_backward", variant, [Fl(g_shape)], fn,
         ints=[PAD_MODES.index(mode), dim, left, right, x_shape[dim]])


pad_backward_case("pad_backward_constant", [2, 5], 1, -1, 2, "constant")
pad_backward_case("pad_backward_reflect", [1, 2, 4, 5], 3, 2, 3, "reflect")
pad_backward_case("pad_backward_reflect_h", [1, 2, 4, 5], 2, 3, 1, "reflect")
pad_backward_case("pad_backward_replicate", [1, 2, 4, 5], 2, 2, 1, "replicate")
pad_backward_case("pad_backward_circular", [1, 2, 3, 4], 3, 2, 4, "circular")

# adaptive_avg_pool: ints = k, then the output sizes; overlapping windows (7 -> 3), growing
# (4 -> 6), 3-D input without a batch dim, 3-D pooling
ADAPTIVE = {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d, 3: F.adaptive_avg_pool3d}
for variant, shape, outs in (("adaptive_avg_pool1d", [2, 3, 7], [3]),
                             ("adaptive_avg_pool2d", [1, 2, 5, 7], [3, 4]),
                             ("adaptive_avg_pool2d_grow", [2, 3, 4], [5, 6]),
                             ("adaptive_avg_pool3d", [1, 1, 3, 5, 4], [2, 3, 3])):
    k = len(outs)
    case("adaptive_avg_pool", variant, [Fl(shape)],
         (lambda f, o: lambda x: f(x, o))(ADAPTIVE[k], outs if k > 1 else outs[0]),
         ints=[k] + outs)


# adaptive_avg_pool_backward: g -> x's gradient; ints = k, then x's shape
def adaptive_backward(k, x_shape):
    def fn(g):
        x = torch.zeros(x_shape, requires_grad=True)
        outs = list(g.shape[-k:])
        ADAPTIVE[k](x, outs if k > 1 else outs[0]).backward(g)
        return x.grad
    return fn


case("adaptive_avg_pool_backward", "adaptive_avg_pool_backward_2d", [Fl([1, 2, 3, 4])],
     adaptive_backward(2, [1, 2, 5, 7]), ints=[2, 1, 2, 5, 7])
case("adaptive_avg_pool_backward", "adaptive_avg_pool_backward_3d", [Fl([1, 1, 2, 3, 3])],
     adaptive_backward(3, [1, 1, 3, 5, 4]), ints=[3, 1, 1, 3, 5, 4])

# max_pool2d_with_indices: ints = kernel h, w, stride h, w, padding h, w, dilation h, w,
# ceil_mode, then the output picked (0 values, 1 indices); distinct values, dilation, padding and
# ceil mode (whose last window must start inside the input or its left padding)
def max_pool_ex(p, which):
    def fn(x):
        v, i = F.max_pool2d(x, p[0:2], p[2:4], p[4:6], p[6:8], ceil_mode=bool(p[8]),
                            return_indices=True)
        return (v, i)[which]
    return fn


for variant, shape, p in (("max_pool2d_ex_dilated", [1, 2, 5, 6], [3, 2, 2, 1, 1, 1, 1, 2, 0]),
                          ("max_pool2d_ex_ceil", [1, 1, 6, 7], [2, 3, 2, 2, 0, 1, 2, 1, 1]),
                          ("max_pool2d_ex_ceil_cut", [2, 1, 5, 5], [2, 2, 2, 2, 1, 1, 1, 1, 1])):
    for which in (0, 1):
        case("max_pool2d_with_indices", variant + ("_indices" if which else ""),
             [Fl(shape, "d")], max_pool_ex(p, which), ints=p + [which])

# unfold4d / fold4d (F.unfold / F.fold): ints = kernel h, w, dilation h, w, padding h, w,
# stride h, w; fold's output size is the unfold case's input size (the first two ints of the
# case's own list are prepended: out_h, out_w)
FOLD_CASES = (("4d_plain", [2, 2, 4, 5], [2, 3, 1, 1, 0, 0, 1, 1]),
              ("4d_dilated_padded_strided", [1, 2, 5, 6], [2, 2, 2, 1, 1, 2, 2, 3]),
              ("4d_overlap", [1, 1, 4, 4], [3, 2, 1, 1, 1, 0, 1, 2]),
              ("4d_same", [2, 3, 5, 6], [3, 3, 1, 1, 1, 1, 1, 1]))
for name, shape, k in FOLD_CASES:
    kw = dict(kernel_size=k[0:2], dilation=k[2:4], padding=k[4:6], stride=k[6:8])
    case("unfold4d", "unfold" + name, [Fl(shape)],
         (lambda kw: lambda x: F.unfold(x, **kw))(kw), ints=k)
    cols = list(F.unfold(torch.zeros(shape), **kw).shape)
    case("fold4d", "fold" + name, [Fl(cols)],
         (lambda kw, hw: lambda c: F.fold(c, hw, **kw))(kw, shape[2:]), ints=shape[2:] + k)

# ---- activation_backward: g * f'(s), against PyTorch's own backward kernels ------------------
# ints = the forward op's number in cn_op, cn_gelu_approx. The numbers are read from the enum in
# include/cinder/backend.h, so that the cases follow it wherever ops were appended.
def cn_op_numbers():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include",
                        "cinder", "backend.h")
    text = open(path).read()
    body = text[text.index("typedef enum cn_op {"):text.index("} cn_op;")]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return {name: k for k, name in enumerate(re.findall(r"\bCN_OP_[A-Z0-9_]+", body))}


CN_OPS = cn_op_numbers()
CN_OP_RELU, CN_OP_TANH, CN_OP_SIGMOID, CN_OP_SILU, CN_OP_GELU = (
    CN_OPS["CN_OP_" + n] for n in ("RELU", "TANH", "SIGMOID", "SILU", "GELU"))
assert (CN_OP_RELU, CN_OP_TANH, CN_OP_SIGMOID, CN_OP_SILU, CN_OP_GELU) == (2, 10, 11, 12, 13)
CN_OP_HARD_SIGMOID, CN_OP_LOG_SIGMOID, CN_OP_HARD_SWISH = (
    CN_OPS["CN_OP_" + n] for n in ("HARD_SIGMOID", "LOG_SIGMOID", "HARD_SWISH"))
# s on every piece of the hard ones (off +-3) and far out for log_sigmoid
ACT_HARD_S = [-4.5, -2.25, -0.5, 0.75, 2.5, 3.75, -3.25, 2.875, -1.0, 0.125, 5.0, -2.9375]
ACT_WIDE_S = [-30, -5, -2.5, -0.5, 0.25, 1, 2.75, 3.5, 6, 15, -3.25, 40]
aten = torch.ops.aten
for variant, act, approx, dom, fn in (
        ("act_bwd_relu", CN_OP_RELU, 0, "d", lambda g, s: aten.threshold_backward(g, s, 0)),
        ("act_bwd_tanh", CN_OP_TANH, 0, "u", aten.tanh_backward),
        ("act_bwd_sigmoid", CN_OP_SIGMOID, 0, "u", aten.sigmoid_backward),
        ("act_bwd_silu", CN_OP_SILU, 0, "u", aten.silu_backward),
        ("act_bwd_gelu_erf", CN_OP_GELU, 0, "u",
         lambda g, s: aten.gelu_backward(g, s, approximate="none")),
        ("act_bwd_gelu_tanh", CN_OP_GELU, 1, "u",
         lambda g, s: aten.gelu_backward(g, s, approximate="tanh")),
        # not aten.hardsigmoid_backward: its CPU kernel scales by 1/6 rounded to float32, even
        # in float64 (a 6e-9 relative error); cinder scales by the double 1/6
        ("act_bwd_hard_sigmoid", CN_OP_HARD_SIGMOID, 0, ACT_HARD_S,
         lambda g, s: torch.where((s > -3) & (s < 3), g / 6, 0.0)),
        ("act_bwd_hard_swish", CN_OP_HARD_SWISH, 0, ACT_HARD_S, aten.hardswish_backward),
        ("act_bwd_log_sigmoid", CN_OP_LOG_SIGMOID, 0, ACT_WIDE_S,
         lambda g, s: aten.log_sigmoid_backward(g, s, aten.log_sigmoid_forward(s)[1]))):
    case("activation_backward", variant, [Fl([3, 4]), Fl([3, 4], dom)], fn, ints=[act, approx])


# ---- sgd_step: two steps of torch.optim.SGD on p with gradients g1 then g2 ------------------
# reals = lr, momentum, dampening, weight_decay; ints = nesterov
def sgd(lr, momentum, dampening, weight_decay, nesterov):
    def run(p, g1, g2):
        p = p.clone().requires_grad_(True)
        opt = torch.optim.SGD([p], lr=lr, momentum=momentum, dampening=dampening,
                              weight_decay=weight_decay, nesterov=bool(nesterov))
        for g in (g1, g2):
            p.grad = g.clone()
            opt.step()
        return p.detach()
    return run


for variant, hyper in (("sgd_nesterov", (0.1, 0.9, 0.0, 0.01, 1)),
                       ("sgd_dampening", (0.05, 0.8, 0.3, 0.0, 0)),
                       ("sgd_plain", (0.2, 0.0, 0.0, 0.1, 0))):
    case("sgd_step", variant, [Fl([2, 3]), Fl([2, 3]), Fl([2, 3])], sgd(*hyper),
         ints=[hyper[4]], reals=hyper[:4])

# ---- adamw_step: two steps of torch.optim.AdamW on p with gradients g1 then g2 -----------------
# reals = lr, beta1, beta2, eps, weight_decay (the fused kernel's ints, step and first, are the
# optimizer's)
def adamw(lr, beta1, beta2, eps, weight_decay):
    def run(p, g1, g2):
        p = p.clone().requires_grad_(True)
        opt = torch.optim.AdamW([p], lr=lr, betas=(beta1, beta2), eps=eps,
                                weight_decay=weight_decay, foreach=False)
        for g in (g1, g2):
            p.grad = g.clone()
            opt.step()
        return p.detach()
    return run


for variant, hyper in (("adamw_defaults", (1e-3, 0.9, 0.999, 1e-8, 0.01)),
                       ("adamw_strong", (0.1, 0.8, 0.99, 1e-3, 0.5)),
                       ("adamw_no_decay", (0.05, 0.0, 0.5, 0.0, 0.0))):
    case("adamw_step", variant, [Fl([2, 3]), Fl([2, 3]), Fl([2, 3])], adamw(*hyper),
         reals=hyper)

# ---- scaled_dot_product_attention (issue 16) ---------------------------------------------------
# inputs (q, k, v[, mask]); ints = (causal); reals = (scale, 0 for 1 / sqrt(D)). PyTorch refuses a
# mask and is_causal together; cinder adds the causal -inf to the mask, as here. A row whose keys
# are all -inf gives zeros (PyTorch >= 2.5).
def sdpa(causal, scale):
    def run(q, k, v, mask=None):
        if causal and mask is not None:
            lq, lk = q.shape[-2], k.shape[-2]
            keep = torch.ones(lq, lk, dtype=torch.bool).tril()
            mask = mask.masked_fill(~keep, float("-inf"))
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale or None)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=bool(causal),
                                              scale=scale or None)
    return run


NINF = float("-inf")
SDPA_MASK_INF = [0.25, NINF, -0.5, 0.0, 1.0,
                 NINF, NINF, NINF, NINF, NINF,   # a row with no key: zeros, no gradient
                 -1.0, 0.5, NINF, 0.75, -0.25]
for variant, ins, causal, scale in (
        ("sdpa", [Fl([2, 3, 4]), Fl([2, 5, 4]), Fl([2, 5, 3])], 0, 0.0),
        ("sdpa_causal_lq_gt_lk", [Fl([1, 2, 6, 4]), Fl([1, 2, 4, 4]), Fl([1, 2, 4, 2])], 1, 0.3),
        ("sdpa_causal_lq_lt_lk", [Fl([2, 3, 4]), Fl([2, 5, 4]), Fl([2, 5, 3])], 1, 0.0),
        ("sdpa_mask_broadcast", [Fl([2, 3, 4]), Fl([2, 5, 4]), Fl([2, 5, 3]), Fl([3, 5])], 0,
         0.0),
        ("sdpa_mask_full_causal", [Fl([2, 3, 2]), Fl([2, 3, 2]), Fl([2, 3, 4]), Fl([2, 3, 3])],
         1, 0.7),
        ("sdpa_mask_inf", [Fl([2, 3, 4]), Fl([2, 5, 4]), Fl([2, 5, 3]), Fl([3, 5], SDPA_MASK_INF)],
         0, 0.0),
        ("sdpa_unbatched", [Fl([3, 2]), Fl([4, 2]), Fl([4, 3])], 0, 0.0)):
    case("scaled_dot_product_attention", variant, ins, sdpa(causal, scale), ints=[causal],
         reals=[scale])


# scaled_dot_product_attention_backward: inputs (g, q, k, v[, mask]); ints = (causal, which):
# which picks dq (0), dk (1), dv (2) or the mask's gradient before its broadcast sum (3); reals =
# (scale, resolved: never 0). Against autograd's gradients.
def sdpa_backward(causal, scale, which):
    def run(g, q, k, v, mask=None):
        if mask is not None and which == 3:  # the scores' gradient, at [B.., Lq, Lk]
            mask = mask.expand(*q.shape[:-1], k.shape[-2]).clone()
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        if mask is not None:
            mask = mask.clone().requires_grad_(True)
            leaves.append(mask)
        sdpa(causal, scale)(*leaves[:3], *( [mask] if mask is not None else [])).backward(g)
        return leaves[which].grad
    return run


for variant, ins, causal, which in (
        ("sdpa_bwd_dq", [Fl([2, 3, 3]), Fl([2, 3, 4]), Fl([2, 5, 4]), Fl([2, 5, 3])], 0, 0),
        ("sdpa_bwd_dk_causal", [Fl([2, 3, 3]), Fl([2, 3, 4]), Fl([2, 5, 4]), Fl([2, 5, 3])], 1, 1),
        ("sdpa_bwd_dv_causal", [Fl([2, 6, 3]), Fl([2, 6, 4]), Fl([2, 4, 4]), Fl([2, 4, 3])], 1, 2),
        ("sdpa_bwd_dmask", [Fl([2, 3, 3]), Fl([2, 3, 4]), Fl([2, 5, 4]), Fl([2, 5, 3]),
                            Fl([3, 5], SDPA_MASK_INF)], 0, 3)):
    case("scaled_dot_product_attention_backward", variant, ins, sdpa_backward(causal, 0.6, which),
         ints=[causal, which], reals=[0.6])

# ---- ctc_loss (issue 16) -----------------------------------------------------------------------
# inputs (log_probs, targets, input_lengths, target_lengths); ints = (blank, reduction: 0 none,
# 1 mean, 2 sum, zero_infinity). log_probs need not be normalised: the loss is defined for any.
def ctc(blank, reduction, zero_inf):
    def run(lp, tg, il, tl):
        return F.ctc_loss(lp, tg, il, tl, blank=blank, reduction=("none", "mean", "sum")[reduction],
                          zero_infinity=bool(zero_inf))
    return run


for variant, ins, ints in (
        # padded targets with a repeated label (a blank must separate them), mean over the batch
        ("ctc_padded_mean", [Fl([6, 2, 4]), In([2, 3], [1, 2, 2, 3, 1, 0]), In([2], [6, 5]),
                             In([2], [3, 2])], [0, 1, 0]),
        # concatenated targets, blank the last class, sum
        ("ctc_concat_sum", [Fl([5, 3, 4]), In([6], [0, 1, 1, 2, 0, 2]), In([3], [5, 4, 5]),
                            In([3], [2, 1, 3])], [3, 2, 0]),
        # sample 1 cannot fit [1, 1] in 2 steps (it needs 3): zero_infinity makes its loss 0;
        # sample 2 has an empty target
        ("ctc_none_zero_infinity", [Fl([4, 3, 3]), In([3, 2], [1, 2, 1, 1, 0, 0]),
                                    In([3], [4, 2, 3]), In([3], [2, 2, 0])], [0, 0, 1]),
        ("ctc_unbatched", [Fl([5, 3]), In([2], [2, 1]), In([], [5]), In([], [2])], [0, 0, 0])):
    case("ctc_loss", variant, ins, ctc(*ints), ints=ints)


# ctc_loss_backward: inputs (g [N], log_probs, targets, input_lengths, target_lengths); ints =
# (blank, concatenated, zero_infinity). The exact gradient of sum(g * loss): autograd's minus
# exp(log_probs) * g at the steps t < input_lengths[n] of each sample with a finite loss (a term
# PyTorch's kernel adds, which vanishes through log_softmax; see cn_ctc_loss).
def ctc_backward(blank, zero_inf):
    def run(g, lp, tg, il, tl):
        lp = lp.clone().requires_grad_(True)
        loss = F.ctc_loss(lp, tg, il, tl, blank=blank, reduction="none",
                          zero_infinity=bool(zero_inf))
        (loss * g).sum().backward()
        steps = (torch.arange(lp.shape[0]).view(-1, 1, 1) < il.view(1, -1, 1)).double()
        finite = torch.isfinite(loss).double() * (loss != 0).double() if zero_inf else 1.0
        finite = torch.as_tensor(finite).view(1, -1, 1)
        extra = lp.detach().exp() * g.view(1, -1, 1) * steps * finite
        return lp.grad - extra
    return run


case("ctc_loss_backward", "ctc_bwd_padded", [Fl([2]), Fl([6, 2, 4]), In([2, 3], [1, 2, 2, 3, 1, 0]),
                                            In([2], [6, 5]), In([2], [3, 2])],
     ctc_backward(0, 0), ints=[0, 0, 0])
case("ctc_loss_backward", "ctc_bwd_concat_zero_infinity",
     [Fl([3]), Fl([4, 3, 3]), In([5], [1, 2, 1, 1, 2]), In([3], [4, 2, 3]), In([3], [2, 2, 1])],
     ctc_backward(0, 1), ints=[0, 1, 1])

# ---- views and cat -----------------------------------------------------------------------------
case("transpose", "transpose", [Fl([2, 3, 4])], lambda x: x.transpose(0, 2), ints=[0, 2])
case("permute", "permute", [Fl([2, 3, 4])], lambda x: x.permute(2, 0, 1), ints=[2, 0, 1])
# ints = dim, start, end, step
case("slice", "slice", [Fl([5, 4])], lambda x: x[1:5:2], ints=[0, 1, 5, 2])
case("slice", "slice_last", [Fl([3, 5])], lambda x: x[:, -4:4], ints=[1, -4, 4, 1])
case("view", "reshape", [Fl([2, 3, 4])], lambda x: x.reshape(4, 6), ints=[4, 6])
case("expand", "expand", [Fl([3, 1])], lambda x: x.expand(2, 3, 4), ints=[2, 3, 4])
case("cat", "cat", [Fl([2, 1]), Fl([2, 3]), Fl([2, 2])], lambda *t: torch.cat(t, 1), ints=[1])
case("cat", "cat_dim0", [Fl([1, 3]), Fl([2, 3])], lambda *t: torch.cat(t, 0), ints=[0])


# ---- resampling (issue 16) ---------------------------------------------------------------------
# interpolate: ints = mode (0 nearest, 1 linear / bilinear, 2 bicubic), align_corners, then the
# output sizes (when the case gives sizes); reals = the scale factors (when it gives those).
# Sizes up and down, odd ratios, 2x (PyTorch's CPU shortcut for nearest), a scale factor whose
# floor(in * scale) output differs from in / out positions, scales giving out == in and
# out == 2 * in (nearest's 2-D shortcuts, which PyTorch's 1-D kernel does not take), align_corners
# on and off, [N, C, L] and [N, C, H, W].
INTERP_MODES = {0: "nearest", 1: "linear", 2: "bicubic"}


def interp(mode, align, size=None, scale=None):
    def fn(x):
        name = INTERP_MODES[mode]
        if name == "linear" and x.dim() == 4:
            name = "bilinear"
        kw = {} if mode == 0 else {"align_corners": bool(align)}
        if size is not None:
            return F.interpolate(x, size=size, mode=name, **kw)
        return F.interpolate(x, scale_factor=scale, mode=name, **kw)
    return fn


INTERP_CASES = [  # variant, x shape, mode, align, size, scale
    ("nearest_size", [2, 2, 4, 5], 0, 0, [7, 3], None),
    ("nearest_2x", [1, 2, 3, 2], 0, 0, [6, 4], None),
    ("nearest_scale", [1, 2, 4, 5], 0, 0, None, [1.5, 0.7]),
    ("nearest_scale_same", [1, 1, 3, 4], 0, 0, None, [1.2, 2.6]),
    ("bilinear_size", [2, 2, 4, 5], 1, 0, [7, 3], None),
    ("bilinear_align", [1, 2, 4, 5], 1, 1, [7, 3], None),
    ("bilinear_scale", [1, 2, 4, 5], 1, 0, None, [1.7, 0.6]),
    ("bilinear_to_1", [1, 2, 3, 4], 1, 1, [1, 6], None),
    ("bicubic_size", [2, 2, 4, 5], 2, 0, [7, 3], None),
    ("bicubic_align", [1, 2, 4, 5], 2, 1, [7, 9], None),
    ("bicubic_scale", [1, 2, 4, 5], 2, 0, None, [2.0, 1.3]),
    ("nearest_1d", [2, 3, 5], 0, 0, [8], None),
    ("nearest_1d_scale_same", [1, 2, 3], 0, 0, None, [1.2]),
    ("nearest_1d_scale_2x", [1, 2, 3], 0, 0, None, [2.1]),
    ("linear_1d", [2, 3, 5], 1, 0, [8], None),
    ("linear_1d_align", [2, 3, 5], 1, 1, [3], None),
    ("linear_1d_scale", [1, 2, 6], 1, 0, None, [0.75]),
]
for v, shape, mode, align, size, scale in INTERP_CASES:
    case("interpolate", "interpolate_" + v, [Fl(shape)], interp(mode, align, size, scale),
         ints=[mode, align] + (size or []), reals=scale or [])


# interpolate_backward: ints = x's shape (4-D), mode, align_corners; reals = the scale factors
def interp_backward(x_shape, fn):
    def run(g):
        x = torch.zeros(x_shape, requires_grad=True)
        fn(x).backward(g)
        return x.grad
    return run


for v, shape, mode, align, size, scale in (
        ("nearest", [1, 2, 4, 5], 0, 0, [7, 3], None),
        ("bilinear", [1, 2, 4, 5], 1, 0, None, [1.7, 0.6]),
        ("bicubic", [1, 2, 4, 5], 2, 1, [7, 9], None),
        ("bicubic_down", [1, 1, 6, 5], 2, 0, [4, 2], None)):
    fn = interp(mode, align, size, scale)
    g_shape = list(fn(torch.zeros(shape)).shape)
    case("interpolate_backward", "interpolate_backward_" + v, [Fl(g_shape)],
         interp_backward(shape, fn), ints=shape + [mode, align], reals=scale or [])


# grid_sample_2d: ints = mode (0 bilinear, 1 nearest), padding (0 zeros, 1 border, 2 reflection),
# align_corners; grid values in [-1.5, 1.5], so some fall outside x (padded, clipped, reflected)
GS_MODES, GS_PADS = ("bilinear", "nearest"), ("zeros", "border", "reflection")


def grid_sample(mode, pad, align):
    return lambda x, g: F.grid_sample(x, g, mode=GS_MODES[mode], padding_mode=GS_PADS[pad],
                                      align_corners=bool(align))


for mode, pad, align in ((0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1), (0, 2, 0), (0, 2, 1),
                         (1, 0, 0), (1, 2, 1)):
    case("grid_sample_2d", "grid_sample_2d_%s_%s_%d" % (GS_MODES[mode], GS_PADS[pad], align),
         [Fl([2, 2, 4, 5]), Fl([2, 3, 4, 2])], grid_sample(mode, pad, align),
         ints=[mode, pad, align])


# grid_sample_2d_backward: in = (g, x, grid); ints = mode, padding, align_corners, which (0: x's
# gradient, 1: the grid's), against PyTorch's autograd
def grid_sample_backward(mode, pad, align, which):
    def run(g, x, grid):
        x, grid = x.clone().requires_grad_(True), grid.clone().requires_grad_(True)
        grid_sample(mode, pad, align)(x, grid).backward(g)
        return grid.grad if which else x.grad
    return run


for mode, pad, align, which in ((0, 2, 0, 0), (0, 2, 0, 1), (0, 0, 1, 1), (0, 1, 0, 1),
                                (1, 0, 0, 0)):
    case("grid_sample_2d_backward", "grid_sample_2d_backward_%s_%s_%d_%d"
         % (GS_MODES[mode], GS_PADS[pad], align, which),
         [Fl([2, 2, 3, 4]), Fl([2, 2, 4, 5]), Fl([2, 3, 4, 2])],
         grid_sample_backward(mode, pad, align, which), ints=[mode, pad, align, which])


# ---- deformable convolution (issue 16) ---------------------------------------------------------
# deform_conv2d: inputs (x, offset, w[, mask][, b]); ints = stride h, w, padding h, w, dilation
# h, w, groups, offset_groups, has_mask. The values come from deform_ref below, a plain float64
# implementation of torchvision.ops.deform_conv2d's formula with differentiable torch ops (its
# gradients by autograd), so that the script needs only torch; when torchvision is importable
# the script also checks every deform case, values and gradients, against
# torchvision.ops.deform_conv2d and stops on a difference above 1e-12. (torchvision 0.29.2 runs
# with this torch: `pip install --no-deps --target /tmp/tv torchvision==0.29.2 pillow`, then
# PYTHONPATH=/tmp/tv; --no-deps keeps the venv's torch.) Offsets are in the "n" domain (m +
# [0.1, 0.4] or m + [0.6, 0.9], m in [-3, 2]): no sampling position lies within the finite
# differences' step of a row or column of x, where the bilinear sample has a kink, and many fall
# outside the image, partly (one corner inside) or wholly (zero).
def deform_ref(x, off, w, mask, b, stride, pad, dil, og):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    groups = c // cg
    off = off.reshape(n, og, kh, kw, 2, oh, ow)
    by = (torch.arange(oh) * stride[0] - pad[0]).view(1, 1, 1, 1, oh, 1) + \
        (torch.arange(kh) * dil[0]).view(1, 1, kh, 1, 1, 1)
    bx = (torch.arange(ow) * stride[1] - pad[1]).view(1, 1, 1, 1, 1, ow) + \
        (torch.arange(kw) * dil[1]).view(1, 1, 1, kw, 1, 1)
    y = by + off[:, :, :, :, 0]  # [n, og, kh, kw, oh, ow]
    xx = bx + off[:, :, :, :, 1]
    # each channel's offset group, then the sample of its plane (zero padded by one: the corners
    # at -1 and h read 0; nothing when y <= -1, y >= h, x <= -1 or x >= w)
    rep = c // og
    y = y.repeat_interleave(rep, dim=1)
    xx = xx.repeat_interleave(rep, dim=1)
    inside = (y > -1) & (y < h) & (xx > -1) & (xx < wd)
    y0 = torch.where(inside, torch.floor(y), torch.zeros_like(y)).detach()
    x0 = torch.where(inside, torch.floor(xx), torch.zeros_like(xx)).detach()
    ly, lx = y - y0, xx - x0
    xp = F.pad(x, (1, 1, 1, 1)).reshape(n, c, -1)

    def corner(dy, dx):
        idx = ((y0 + dy + 1) * (wd + 2) + (x0 + dx + 1)).long().reshape(n, c, -1)
        return xp.gather(2, idx).reshape(y.shape)

    v = ((1 - ly) * (1 - lx) * corner(0, 0) + (1 - ly) * lx * corner(0, 1) +
         ly * (1 - lx) * corner(1, 0) + ly * lx * corner(1, 1))
    v = torch.where(inside, v, torch.zeros_like(v))
    if mask is not None:
        v = v * mask.reshape(n, og, kh, kw, oh, ow).repeat_interleave(rep, dim=1)
    cols = v.reshape(n, groups, cg * kh * kw, oh * ow)
    out = torch.einsum("gok,ngkp->ngop", w.reshape(groups, o // groups, cg * kh * kw), cols)
    out = out.reshape(n, o, oh, ow)
    return out if b is None else out + b.view(1, o, 1, 1)


DEFORM_CHECKED = []  # (inputs, fn) of every deform case, for the torchvision check


def deform_call(ints, ref=True):
    """The forward on the case's inputs (x, offset, w[, mask][, b]) by deform_ref, or by
    torchvision when ref is False."""
    stride, pad, dil, og, has_mask = ints[0:2], ints[2:4], ints[4:6], ints[7], ints[8]

    def run(x, off, w, *rest):
        mask = rest[0] if has_mask else None
        b = rest[has_mask] if len(rest) > has_mask else None
        if ref:
            return deform_ref(x, off, w, mask, b, stride, pad, dil, og)
        from torchvision.ops import deform_conv2d
        return deform_conv2d(x, off, w, b, stride=tuple(stride), padding=tuple(pad),
                             dilation=tuple(dil), mask=mask)
    return run


# deform_conv2d_backward: inputs (g, x, offset, w[, mask]); ints = the forward's 9 and which
# gradient (0: x, 1: offset, 2: w, 3: mask), by autograd through deform_ref
def deform_backward(ints, ref=True):
    which = ints[9]

    def run(g, *ins):
        leaves = [t.clone().requires_grad_(True) for t in ins]
        deform_call(ints, ref)(*leaves).backward(g)
        return leaves[which].grad
    return run


def deform_case(variant, x, w, groups, og, stride, pad, dil, mask, bias, which=None):
    n, c, h, wd = x
    kh, kw = w[2], w[3]
    oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    ins = [Fl(x), Fl([n, 2 * og * kh * kw, oh, ow], "n"), Fl(w)]
    if mask:
        ins.append(Fl([n, og * kh * kw, oh, ow]))
    ints = list(stride) + list(pad) + list(dil) + [groups, og, int(mask)]
    if which is None:
        if bias:
            ins.append(Fl([w[0]]))
        case("deform_conv2d", variant, ins, deform_call(ints), ints=ints)
        DEFORM_CHECKED.append((variant, deform_call(ints), deform_call(ints, False), True))
    else:
        ints.append(which)
        ins.insert(0, Fl([n, w[0], oh, ow]))
        case("deform_conv2d_backward", variant, ins, deform_backward(ints), ints=ints)
        DEFORM_CHECKED.append((variant, deform_backward(ints), deform_backward(ints, False),
                               False))


# DCNv1 (no mask) with a bias and padding; DCNv2 (mask) with weight and offset groups, unequal
# strides, paddings and dilations; offset groups that differ from the weight's groups
deform_case("deform_conv2d_v1", [2, 2, 4, 5], [3, 2, 3, 3], 1, 1, (1, 1), (1, 1), (1, 1),
            False, True)
deform_case("deform_conv2d_v2_groups", [1, 4, 5, 5], [4, 2, 2, 3], 2, 2, (2, 1), (1, 2),
            (1, 2), True, True)
deform_case("deform_conv2d_offset_groups", [1, 4, 4, 4], [2, 4, 3, 3], 1, 2, (1, 1), (0, 0),
            (1, 1), True, False)
for which, name in enumerate(("x", "offset", "w", "mask")):
    deform_case("deform_conv2d_backward_" + name, [1, 4, 5, 5], [4, 2, 2, 3], 2, 2, (2, 1),
                (1, 2), (1, 2), True, False, which)
deform_case("deform_conv2d_backward_v1_offset", [2, 2, 4, 5], [3, 2, 3, 3], 1, 1, (1, 1),
            (1, 1), (1, 1), False, False, 1)


def check_deform_with_torchvision():
    """Every deform case's values and gradients against torchvision.ops.deform_conv2d, when it is
    importable (see above)."""
    try:
        import torchvision.ops  # noqa: F401
    except ImportError:
        print("torchvision not importable: deform_conv2d cases not checked against it")
        return
    by_name = {c["variant"]: c for c in CASES}
    for variant, ref, tv, forward in DEFORM_CHECKED:
        c = by_name[variant]
        gen = Gen(variant)
        ts = [gen.values(dom, shape) for (_, shape, dom) in c["inputs"]]
        want, got = ref(*ts), tv(*ts)
        err = (want - got).abs().max().item()
        assert err < 1e-12, (variant, err)
        if forward:  # and every input's gradient, for a weighted sum of the output
            r = torch.rand(want.shape, generator=torch.Generator().manual_seed(1))
            grads = []
            for fn in (ref, tv):
                leaves = [t.clone().requires_grad_(True) for t in ts]
                (fn(*leaves) * r).sum().backward()
                grads.append([t.grad for t in leaves])
            for a, b in zip(*grads):
                err = max(err, (a - b).abs().max().item())
            assert err < 1e-12, (variant, err)
        print("deform case %s matches torchvision.ops.deform_conv2d (max diff %.3g)"
              % (variant, err))


# ---- the real FFT: complex values as a trailing dim of 2 (torch.view_as_real) ------------------
# ints = n (-1: PyTorch's None), dim, norm (0 backward, 1 forward, 2 ortho); even and odd
# lengths, the input cut or zero-padded to n, every norm, a dim that is not the last.
FFT_NORMS = ("backward", "forward", "ortho")


def rfft(n, dim, norm):
    return lambda x: torch.view_as_real(
        torch.fft.rfft(x, n=None if n == -1 else n, dim=dim, norm=FFT_NORMS[norm]))


def irfft(n, dim, norm):
    return lambda z: torch.fft.irfft(torch.view_as_complex(z.contiguous()),
                                     n=None if n == -1 else n, dim=dim, norm=FFT_NORMS[norm])


for v, shape, n, dim, norm in (("even", [3, 8], -1, -1, 0), ("odd", [2, 7], -1, 1, 0),
                               ("pad_fwd", [2, 5, 3], 8, 1, 1), ("cut_ortho", [6, 3], 5, 0, 2),
                               ("n1", [2, 3], 1, 1, 0), ("n2", [3, 2], -1, 0, 2),
                               ("pad_odd", [2, 4], 9, -1, 1)):
    case("rfft", "rfft_" + v, [Fl(shape)], rfft(n, dim, norm), ints=[n, dim, norm])
# irfft takes the imaginary parts of bin 0 and of the Nyquist bin as they come (random here):
# PyTorch's CPU transform ignores them, as cinder does
for v, shape, n, dim, norm in (("even", [3, 5, 2], -1, -1, 0), ("odd", [2, 4, 2], 7, 1, 2),
                               ("pad_fwd", [2, 3, 2], 10, 1, 1), ("cut", [6, 2, 2], 4, 0, 0),
                               ("dim0_odd", [3, 2, 3, 2], 5, 0, 2), ("n1", [2, 3, 2], 1, 1, 0)):
    case("irfft", "irfft_" + v, [Fl(shape)], irfft(n, dim, norm), ints=[n, dim, norm])
# ---- layer_norm and rms_norm (issue 17) --------------------------------------------------------
# inputs (x[, weight][, bias]); ints = (k: the normalised trailing dims, has_weight, has_bias);
# reals = (eps; rms_norm: -1 for PyTorch's eps=None, the dtype's epsilon). Rows of 5 to 37
# elements (past the CPU kernel's 16 lanes, with remainders), normalised over 1 and 2 dims.
def layer_norm(k, eps):
    def run(x, *wb):
        it = iter(wb)
        w = next(it) if run.has_w else None
        b = next(it) if run.has_b else None
        return F.layer_norm(x, x.shape[-k:], w, b, eps)
    return run


def rms_norm(k, eps):
    def run(x, w=None):
        return F.rms_norm(x, x.shape[-k:], w, None if eps < 0 else eps)
    return run


for variant, shape, k, has_w, has_b, eps in (
        ("layer_norm_affine", [3, 5], 1, 1, 1, 1e-5),
        ("layer_norm_2d_affine", [2, 3, 4], 2, 1, 1, 1e-5),
        ("layer_norm_plain", [2, 3, 4], 1, 0, 0, 1e-5),
        ("layer_norm_weight_only_2d", [2, 2, 3], 2, 1, 0, 0.1),
        ("layer_norm_bias_only_long_rows", [2, 37], 1, 0, 1, 1e-5),
        ("layer_norm_eps_zero", [4, 6], 1, 1, 1, 0.0)):
    fn = layer_norm(k, eps)
    fn.has_w, fn.has_b = has_w, has_b
    ins = [Fl(shape)] + [Fl(shape[-k:])] * has_w + [Fl(shape[-k:])] * has_b
    case("layer_norm", variant, ins, fn, ints=[k, has_w, has_b], reals=[eps])

for variant, shape, k, has_w, eps in (
        ("rms_norm_weight", [3, 5], 1, 1, 1e-6),
        ("rms_norm_2d_weight", [2, 3, 4], 2, 1, 1e-5),
        ("rms_norm_plain_long_rows", [2, 37], 1, 0, 1e-5),
        ("rms_norm_default_eps", [2, 2, 3], 2, 0, -1.0)):
    ins = [Fl(shape)] + [Fl(shape[-k:])] * has_w
    case("rms_norm", variant, ins, rms_norm(k, eps), ints=[k, has_w], reals=[eps])


# layer_norm_backward: inputs (g, x[, weight]); ints = (k, has_weight, which): dx (0), dw (1),
# db (2), against autograd's (a missing weight is ones: dw = sum(g xhat) all the same); the
# mean and rstd come from cinder's forward. rms_norm_backward: likewise, dx (0) or dw (1).
def norm_backward(rms, k, has_w, which, eps):
    def run(g, x, w=None):
        n = x.shape[-k:]
        w = (w if has_w else torch.ones(n)).clone().requires_grad_(True)
        x = x.clone().requires_grad_(True)
        if rms:
            F.rms_norm(x, n, w, eps).backward(g)
            return (x.grad, w.grad)[which]
        b = torch.zeros(n, requires_grad=True)
        F.layer_norm(x, n, w, b, eps).backward(g)
        return (x.grad, w.grad, b.grad)[which]
    return run


for variant, shape, k, has_w, which in (
        ("layer_norm_bwd_dx", [3, 5], 1, 1, 0),
        ("layer_norm_bwd_dx_plain_2d", [2, 3, 4], 2, 0, 0),
        ("layer_norm_bwd_dw_long_rows", [3, 37], 1, 1, 1),
        ("layer_norm_bwd_db_2d", [2, 3, 4], 2, 1, 2)):
    ins = [Fl(shape), Fl(shape)] + [Fl(shape[-k:])] * has_w
    case("layer_norm_backward", variant, ins, norm_backward(0, k, has_w, which, 1e-5),
         ints=[k, has_w, which], reals=[1e-5])

for variant, shape, k, has_w, which in (
        ("rms_norm_bwd_dx", [3, 5], 1, 1, 0),
        ("rms_norm_bwd_dx_plain_2d", [2, 3, 4], 2, 0, 0),
        ("rms_norm_bwd_dw_long_rows", [3, 37], 1, 1, 1)):
    ins = [Fl(shape), Fl(shape)] + [Fl(shape[-k:])] * has_w
    case("rms_norm_backward", variant, ins, norm_backward(1, k, has_w, which, 1e-5),
         ints=[k, has_w, which], reals=[1e-5])

# ---- output ------------------------------------------------------------------------------------
def kind_of(t):
    if t.dtype == torch.bool:
        return "b"
    if t.dtype == torch.int64:
        return "i"
    assert t.dtype == torch.float64, t.dtype
    return "f"


def num(v):
    v = float(v)
    if v != v:
        return "NAN"
    if v in (float("inf"), float("-inf")):
        return "INFINITY" if v > 0 else "-INFINITY"
    if v == 0:
        return "-0.0" if str(v).startswith("-") else "0.0"
    return "%.17g" % v


def ints_list(v):
    return "{" + ", ".join(str(int(x)) for x in v) + "}" if v else "{0}"


def doubles(v):
    flat = [num(x) for x in v.reshape(-1).tolist()]
    lines, line = [], "   "
    for s in flat:
        if len(line) + len(s) + 2 > 100:
            lines.append(line)
            line = "   "
        line += " " + s + ","
    lines.append(line)
    return "\n".join(lines)


def main():
    check_deform_with_torchvision()
    out = []
    arrays = []
    names = set()
    for c in CASES:
        assert c["variant"] not in names, c["variant"]
        names.add(c["variant"])
        gen = Gen(c["variant"])
        tensors, descs = [], []
        for i, (kind, shape, dom) in enumerate(c["inputs"]):
            v = gen.values(dom, shape)
            if kind == "i":
                t = v.to(torch.int64)
            elif kind == "b":
                t = v != 0
            else:
                t = v
            tensors.append(t)
            arr = "oc_%s_in%d" % (c["variant"], i)
            arrays.append("static const double %s[] = {\n%s\n};" % (arr, doubles(v)))
            descs.append("{'%s', %d, %s, %s}" % (kind, len(shape), ints_list(shape), arr))
        y = c["fn"](*tensors)
        if y.dtype == torch.float32:
            y = y.double()
        arr = "oc_%s_out" % c["variant"]
        arrays.append("static const double %s[] = {\n%s\n};" % (arr, doubles(y.double())))
        out.append(
            '    {"%s", "%s", %d, {%s},\n'
            '     %d, %s, %d, {%s}, %s, %s,\n'
            "     {'%s', %d, %s, %s}},"
            % (c["op"], c["variant"], len(descs), ", ".join(descs) if descs else "{0}",
               len(c["ints"]), ints_list(c["ints"]), len(c["reals"]),
               ", ".join(num(r) for r in c["reals"]) if c["reals"] else "0",
               num(c["eps"]), num(c["tol"]), kind_of(y), y.dim(), ints_list(list(y.shape)),
               arr))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "op_cases.inc")
    with open(path, "w") as f:
        f.write("/* Generated by tests/data/gen_op_cases.py with PyTorch %s: inputs and float64\n"
                " * results of every op case of tests/test_op_table.c. Do not edit; run the script"
                " again. */\n" % torch.__version__)
        f.write("\n".join(arrays))
        f.write("\n\nstatic const oc_data oc_cases[] = {\n")
        f.write("\n".join(out))
        f.write("\n};\n")
    print("wrote %d cases to %s" % (len(CASES), path))


if __name__ == "__main__":
    main()
