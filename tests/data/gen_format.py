#!/usr/bin/env python3
"""Writes tests/data/format_cases.inc: what PyTorch's repr() prints for a set of tensors, the
oracle of tests/test_format.c (cn_format). Run by hand, with PyTorch from PyPI:

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install torch numpy
    /tmp/venv/bin/python tests/data/gen_format.py      # from the repository root

The suite never runs this script: the generated file is committed.

Each case says how to build its tensor, in a way tests/test_format.c repeats exactly in C:
element i of the flat values is (a + b * i) / d computed in double (then converted to the dtype
with round-to-nearest; ints truncate, bools are "!= 0"), some positions replaced by specials
(nan, inf, -inf, -0), reshaped to `shape`, then an optional view (transpose, slice, expand), on
the CPU, on the autodiff device as a leaf that requires grad, or on another device.

The expected text is PyTorch's own: its value part is torch._tensor_str._tensor_str (what repr
uses), and the suffixes are joined with torch._tensor_str._add_suffixes, using cinder's names for
dtypes and devices (the mapping documented in include/cinder/format.h). For every CPU case the
script first checks that the same reconstruction with PyTorch's names equals repr(t), so the
translation changes nothing but the names.
"""
import math
import os
import sys

import torch
import torch._tensor_str as ts

DTYPES = {
    "f32": (torch.float32, "CN_F32"),
    "f64": (torch.float64, "CN_F64"),
    "f16": (torch.float16, "CN_F16"),
    "bf16": (torch.bfloat16, "CN_BF16"),
    "i32": (torch.int32, "CN_I32"),
    "i64": (torch.int64, "CN_I64"),
    "u8": (torch.uint8, "CN_U8"),
    "bool": (torch.bool, "CN_BOOL"),
}

# name, dtype, shape, (a, b, d), specials "pos:value,...", view, device
#   view: "" | "t" (transpose 0 1) | "s:DIM:START:END:STEP" | "e:N,M,..." (expand to shape)
#   device: "cpu" | "grad" (autodiff leaf, requires grad) | "mock" (a registered backend)
CASES = [
    # the example and the basic notations
    ("f32_2x2", "f32", [2, 2], (1, 1, 1), "", "", "cpu"),
    ("f32_thirds", "f32", [2, 3], (0, 1, 3), "", "", "cpu"),
    ("f32_negative", "f32", [10], (-5, 1, 4), "", "", "cpu"),
    ("f32_negative_ints", "f32", [2, 4], (-4, 1, 1), "", "", "cpu"),
    ("f32_big_ints", "f32", [4], (0, 12345, 1), "", "", "cpu"),
    ("f32_sci_small", "f32", [5], (1, 1, 100000), "", "", "cpu"),
    ("f32_sci_ratio", "f32", [3], (0.5, 1000.25, 1), "", "", "cpu"),
    ("f32_sci_ratio_ints", "f32", [3], (1, 2500, 1), "", "", "cpu"),
    ("f32_sci_large", "f32", [3], (0, 5e8, 1), "", "", "cpu"),
    ("f32_sci_large_frac", "f32", [2, 2], (1.5, 3e8, 1), "", "", "cpu"),
    ("f32_not_sci", "f32", [4], (1, 333, 10), "", "", "cpu"),
    ("f32_specials", "f32", [6], (1, 1, 2), "1:nan,2:inf,3:-inf,4:0", "", "cpu"),
    ("f32_specials_ints", "f32", [5], (1, 1, 1), "0:nan,2:-inf,4:0", "", "cpu"),
    ("f32_specials_sci", "f32", [4], (1, 1, 1000000), "1:nan,3:-inf", "", "cpu"),
    ("f32_only_specials", "f32", [3], (0, 0, 1), "0:nan,1:inf", "", "cpu"),
    ("f32_zeros", "f32", [2, 3], (0, 0, 1), "", "", "cpu"),
    ("f32_negzero", "f32", [3], (1, 1, 1), "0:-0", "", "cpu"),
    ("f32_negzero_frac", "f32", [3], (1, 1, 4), "0:-0", "", "cpu"),
    ("f32_3d", "f32", [2, 3, 4], (0, 1, 8), "", "", "cpu"),
    ("f32_4d", "f32", [2, 2, 2, 3], (-12, 1, 1), "", "", "cpu"),
    ("f32_long_row", "f32", [30], (0, 1, 7), "", "", "cpu"),
    ("f32_long_rows", "f32", [3, 25], (0, 1, 7), "", "", "cpu"),
    ("f32_long_row_sci", "f32", [20], (1, 1, 1000000), "", "", "cpu"),
    ("f32_long_3d", "f32", [2, 2, 17], (0, -1, 3), "", "", "cpu"),
    # 0-d and zero-element tensors
    ("f32_scalar", "f32", [], (3.5, 0, 1), "", "", "cpu"),
    ("f32_scalar_int", "f32", [], (-2, 0, 1), "", "", "cpu"),
    ("f32_scalar_nan", "f32", [], (0, 0, 1), "0:nan", "", "cpu"),
    ("f64_scalar", "f64", [], (1, 0, 3), "", "", "cpu"),
    ("i64_scalar", "i64", [], (7, 0, 1), "", "", "cpu"),
    ("bool_scalar", "bool", [], (1, 0, 1), "", "", "cpu"),
    ("f32_empty", "f32", [0], (0, 1, 1), "", "", "cpu"),
    ("f32_empty_2d", "f32", [2, 0], (0, 1, 1), "", "", "cpu"),
    ("f32_empty_3d", "f32", [0, 3, 1], (0, 1, 1), "", "", "cpu"),
    ("i64_empty", "i64", [0], (0, 1, 1), "", "", "cpu"),
    ("bool_empty_2d", "bool", [3, 0], (0, 1, 1), "", "", "cpu"),
    ("f64_empty", "f64", [0], (0, 1, 1), "", "", "cpu"),
    # dtypes
    ("f64_thirds", "f64", [2, 3], (0, 1, 3), "", "", "cpu"),
    ("f16_eighths", "f16", [2, 3], (-3, 1, 8), "", "", "cpu"),
    ("bf16_halves", "bf16", [4], (0, 1, 2), "", "", "cpu"),
    ("i64_2x3", "i64", [2, 3], (0, 1, 1), "", "", "cpu"),
    ("i64_widths", "i64", [5], (-1000, 777, 1), "", "", "cpu"),
    ("i64_large", "i64", [3], (-4503599627370496, 1, 1), "", "", "cpu"),
    ("i32_2x2", "i32", [2, 2], (-2, 3, 1), "", "", "cpu"),
    ("u8_row", "u8", [6], (0, 50, 1), "", "", "cpu"),
    ("bool_2x3", "bool", [2, 3], (0, 1, 1), "0:0,3:0,4:0", "", "cpu"),
    ("bool_row", "bool", [4], (1, 0, 1), "2:0", "", "cpu"),
    # summarised (more than 1000 elements)
    ("f32_arange_2000", "f32", [2000], (0, 1, 1), "", "", "cpu"),
    ("f32_1001_frac", "f32", [1001], (0, 1, 8), "", "", "cpu"),
    ("i64_arange_1001", "i64", [1001], (0, 1, 1), "", "", "cpu"),
    ("i64_40x30", "i64", [40, 30], (0, 1, 1), "", "", "cpu"),
    ("f32_10x10x11", "f32", [10, 10, 11], (0, 1, 7), "", "", "cpu"),
    ("f32_2x3x20x20", "f32", [2, 3, 20, 20], (0, 1, 4), "", "", "cpu"),
    ("f32_1x1001", "f32", [1, 1001], (1, 1, 2), "", "", "cpu"),
    ("bool_1200", "bool", [1200], (0, 1, 1), "0:0,1199:0", "", "cpu"),
    ("f32_summary_hides_sci", "f32", [1200], (1, 1, 1), "500:1e-06", "", "cpu"),
    ("f64_summarised", "f64", [3, 400], (0, 1, 3), "", "", "cpu"),
    # views: the values of the view, whatever the layout
    ("f32_transposed", "f32", [2, 3], (0, 1, 1), "", "t", "cpu"),
    ("f32_sliced", "f32", [4, 5], (0, 1, 2), "", "s:1:1:5:2", "cpu"),
    ("f32_expanded", "f32", [3], (1, 1, 1), "", "e:2,3", "cpu"),
    ("i64_transposed_summarised", "i64", [30, 40], (0, 1, 1), "", "t", "cpu"),
    ("f32_expanded_summarised", "f32", [1, 50], (0, 1, 4), "", "e:30,50", "cpu"),
    # requires grad (a tracked leaf on the autodiff device)
    ("f32_grad", "f32", [2], (1, 1, 1), "", "", "grad"),
    ("f64_grad", "f64", [2, 2], (0, 1, 3), "", "", "grad"),
    ("f32_grad_scalar", "f32", [], (0.25, 0, 1), "", "", "grad"),
    ("f64_grad_long", "f64", [9], (0, 1, 7), "", "", "grad"),
    # another device: the suffix names it
    ("f32_mock", "f32", [2, 2], (1, 1, 1), "", "", "mock"),
    ("f64_mock_empty", "f64", [0, 2], (0, 1, 1), "", "", "mock"),
    # suffixes that do not fit on the last line
    ("f64_wrap_suffix", "f64", [8], (0, 1, 7), "", "", "cpu"),
    ("f64_wrap_suffixes", "f64", [9], (0, 1, 7), "", "", "mock"),
]

SPECIALS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "-0": -0.0}


def parse_specials(text):
    out = {}
    for item in filter(None, text.split(",")):
        pos, val = item.split(":")
        out[int(pos)] = SPECIALS[val] if val in SPECIALS else float(val)
    return out


def build(dtype_name, shape, abd, specials, view):
    a, b, d = abd
    n = math.prod(shape)
    vals = [(a + b * i) / d for i in range(n)]
    for pos, v in parse_specials(specials).items():
        vals[pos] = v
    dtype = DTYPES[dtype_name][0]
    if dtype.is_floating_point:
        t = torch.tensor(vals, dtype=torch.float64).to(dtype)
    elif dtype == torch.bool:
        t = torch.tensor([v != 0 for v in vals], dtype=torch.bool)
    else:
        t = torch.tensor([int(v) for v in vals], dtype=dtype)
    t = t.reshape(shape)
    if view == "t":
        t = t.transpose(0, 1)
    elif view.startswith("s:"):
        dim, start, end, step = map(int, view[2:].split(":"))
        idx = [slice(None)] * t.dim()
        idx[dim] = slice(start, end, step)
        t = t[tuple(idx)]
    elif view.startswith("e:"):
        t = t.expand([int(x) for x in view[2:].split(",")])
    return t


def expected(t, device, dtype_name, torch_names):
    """The repr of t, rebuilt from torch._tensor_str's pieces, with PyTorch's or cinder's names."""
    indent = len("tensor(")
    suffixes = []
    if device == "mock":
        suffixes.append("device='mock:0'")
    dtype_str = str(t.dtype) if torch_names else dtype_name
    if t.numel() == 0:
        if t.dim() != 1:
            suffixes.append("size=" + str(tuple(t.shape)))
        if t.dtype != torch.get_default_dtype():
            suffixes.append("dtype=" + dtype_str)
        body = "[]"
    else:
        if t.dtype not in (torch.get_default_dtype(), torch.int64, torch.bool):
            suffixes.append("dtype=" + dtype_str)
        body = ts._tensor_str(t, indent)
    if t.requires_grad:
        suffixes.append("requires_grad=True")
    return ts._add_suffixes("tensor(" + body, suffixes, indent, force_newline=False)


def c_string(s):
    out = s.replace("\\", "\\\\").replace('"', '\\"').split("\n")
    return '"' + '\\n"\n     "'.join(out) + '"'


def main():
    assert ts.PRINT_OPTS.precision == 4 and ts.PRINT_OPTS.threshold == 1000
    assert ts.PRINT_OPTS.edgeitems == 3 and ts.PRINT_OPTS.linewidth == 80
    names = set()
    lines = [
        "/* Generated by tests/data/gen_format.py with PyTorch %s: what repr(tensor) prints," % torch.__version__,
        " * with cinder's dtype and device names. Do not edit; run the script again. */",
    ]
    for name, dt, shape, abd, specials, view, device in CASES:
        assert name not in names, name
        names.add(name)
        t = build(dt, shape, abd, specials, view)
        if device == "grad":
            t = t.requires_grad_()
        if device != "mock":  # the reconstruction is repr itself, up to the names
            got = expected(t, device, dt, torch_names=True)
            assert got == repr(t), (name, got, repr(t))
        text = expected(t, device, dt, torch_names=False)
        a, b, d = abd
        lines.append(
            '{"%s", %s, %d, {%s}, %r, %r, %r, "%s", "%s", "%s",\n     %s},'
            % (name, DTYPES[dt][1], len(shape), ", ".join(map(str, shape)) or "0", float(a),
               float(b), float(d), specials, view, device, c_string(text)))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "format_cases.inc")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s (%d cases)" % (path, len(CASES)), file=sys.stderr)


if __name__ == "__main__":
    main()
