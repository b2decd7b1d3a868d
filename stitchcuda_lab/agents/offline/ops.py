"""What each fusable aten op computes, as an expression over accumulator-typed values.

Expressions are C source that compiles both as CUDA C++ and as C11 with <tgmath.h> (the generic
math names ``exp``, ``tanh``, ``erf`` pick the float or double version from the argument type).
Each emitter supplies the ``sc_*`` helpers (see ``PRELUDE_FNS``) so CPU code can use vectorisable
versions. ``pointwise_expr`` returns ``None`` for an op it cannot express; the planner then
leaves that op to the library.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ...aten import FLOAT_DTYPES

LOAD_DTYPES = FLOAT_DTYPES + ("bool", "int64", "int32", "int8", "uint8", "int16")

Val = Callable[[Any], str]


def lit(v: Any, acc: str = "float") -> str:
    """A literal of the accumulator type (no silent promotion to double in float code)."""
    if isinstance(v, bool):
        v = 1.0 if v else 0.0
    v = float(v)
    if math.isnan(v):
        return f"(({acc})SC_NAN)"
    if math.isinf(v):
        return f"(({acc})SC_INF)" if v > 0 else f"(-({acc})SC_INF)"
    s = repr(v)
    if "e" not in s and "." not in s:
        s += ".0"
    return f"{s}f" if acc == "float" else s


def pointwise_expr(opname: str, overload: str, args: list, kwargs: dict, val: Val,
                   acc: str = "float") -> str | None:
    """C expression for one pointwise aten op; ``val(arg)`` renders an argument (a node ref
    becomes its variable, a number a literal). ``None`` when the op is not supported."""
    def L(v):  # noqa: N802  (reads like the literal it makes)
        return lit(v, acc)

    def a(i, default=None):
        if i < len(args):
            return args[i]
        return default

    def kw(name, pos, default):
        if name in kwargs:
            return kwargs[name]
        v = a(pos, None)
        return default if v is None else v

    def V(i):
        x = a(i)
        if x is None:
            return None
        return val(x)

    A = V(0)
    n = opname.rstrip("_") if opname not in ("_softmax",) else opname
    if n in ("add", "sub", "rsub"):
        alpha = kwargs.get("alpha", a(2, 1))
        B = V(1)
        b = B if alpha in (1, 1.0) else f"({L(alpha)} * {B})"
        if n == "add":
            return f"({A} + {b})"
        if n == "sub":
            return f"({A} - {b})"
        return f"({B} - {A})" if alpha in (1, 1.0) else f"({B} - {L(alpha)} * {A})"
    if n == "mul":
        return f"({A} * {V(1)})"
    if n in ("div", "true_divide"):
        mode = kwargs.get("rounding_mode", a(2) if overload.endswith("mode") else None)
        d = a(1)
        if mode is None and isinstance(d, (int, float)) and not isinstance(d, bool) and d != 0 \
                and math.isfinite(d):
            # by a constant: a multiply (within an ulp of the division, several times cheaper)
            return f"({A} * {L(1.0 / d)})"
        q = f"({A} / {V(1)})"
        if mode == "trunc":
            return f"trunc{q}"
        if mode == "floor":
            return f"floor{q}"
        return q
    simple = {
        "neg": "(-{0})", "exp": "sc_exp({0})", "log": "sc_log({0})", "sqrt": "sqrt({0})",
        "rsqrt": "sc_rsqrt({0})", "abs": "fabs({0})", "tanh": "sc_tanh({0})",
        "sigmoid": "sc_sigmoid({0})", "silu": "({0} * sc_sigmoid({0}))",
        "reciprocal": "({one} / {0})", "square": "({0} * {0})", "sin": "sin({0})",
        "cos": "cos({0})", "tan": "tan({0})", "erf": "sc_erf({0})",
        "erfc": "({one} - sc_erf({0}))", "log1p": "sc_log1p({0})", "expm1": "sc_expm1({0})",
        "exp2": "exp2({0})", "log2": "log2({0})", "log10": "log10({0})", "floor": "floor({0})",
        "ceil": "ceil({0})", "round": "rint({0})", "trunc": "trunc({0})",
        "frac": "({0} - trunc({0}))",
        "sign": "(({0} > {zero}) - ({0} < {zero}))", "sgn": "(({0} > {zero}) - ({0} < {zero}))",
        "relu": "({0} < {zero} ? {zero} : {0})",
        "logical_not": "({0} == {zero})", "tanhshrink": "({0} - sc_tanh({0}))",
        "logsigmoid": "(sc_min({0}, {zero}) - sc_log1p(sc_exp(-fabs({0}))))",
        "mish": "({0} * sc_tanh(sc_softplus({0})))",
        "hardswish": "({0} * sc_min(sc_max({0} + {three}, {zero}), {six}) / {six})",
        "hardsigmoid": "(sc_min(sc_max({0} + {three}, {zero}), {six}) / {six})",
        "relu6": "sc_min(sc_max({0}, {zero}), {six})",
        "asin": "asin({0})", "acos": "acos({0})", "atan": "atan({0})", "sinh": "sinh({0})",
        "cosh": "cosh({0})", "asinh": "asinh({0})", "acosh": "acosh({0})", "atanh": "atanh({0})",
    }
    consts = {"zero": L(0), "one": L(1), "three": L(3), "six": L(6)}
    if n in simple:
        return simple[n].format(A, **consts)
    if n == "gelu":
        approx = kwargs.get("approximate", a(1, "none"))
        if approx == "tanh":
            return (f"({L(0.5)} * {A} * ({L(1)} + sc_tanh({L(math.sqrt(2 / math.pi))} * "
                    f"({A} + {L(0.044715)} * {A} * {A} * {A}))))")
        return f"({L(0.5)} * {A} * ({L(1)} + sc_erf({A} * {L(math.sqrt(0.5))})))"
    if n == "pow":
        if overload == "Scalar":          # scalar ** tensor
            return f"pow({L(args[0])}, {V(1)})"
        e = a(1)
        if isinstance(e, (int, float)) and not isinstance(e, bool):
            special = {2: f"({A} * {A})", 3: f"({A} * {A} * {A})", 1: f"({A})",
                       0.5: f"sqrt({A})", -1: f"({L(1)} / {A})", -0.5: f"sc_rsqrt({A})",
                       0: L(1)}
            if e in special:
                return special[e]
            return f"pow({A}, {L(e)})"
        return f"pow({A}, {V(1)})"
    if n in ("clamp", "clip", "hardtanh", "clamp_min", "clamp_max"):
        if n == "hardtanh":
            lo, hi = kw("min_val", 1, -1.0), kw("max_val", 2, 1.0)
        elif n == "clamp_min":
            lo, hi = a(1), None
        elif n == "clamp_max":
            lo, hi = None, a(1)
        else:
            lo, hi = kw("min", 1, None), kw("max", 2, None)
        r = A
        if lo is not None:
            lo_s = val(lo)
            r = f"({r} < {lo_s} ? {lo_s} : {r})"
        if hi is not None:
            hi_s = val(hi)
            r = f"({r} > {hi_s} ? {hi_s} : {r})"
        return r
    if n == "leaky_relu":
        s = kw("negative_slope", 1, 0.01)
        return f"({A} > {L(0)} ? {A} : {A} * {L(s)})"
    if n in ("elu", "selu", "celu"):
        if n == "selu":
            alpha, scale, iscale = 1.6732632423543772, 1.0507009873554805, 1.0
        elif n == "celu":
            alpha = kw("alpha", 1, 1.0)
            scale, iscale = 1.0, 1.0 / alpha
        else:
            alpha, scale, iscale = kw("alpha", 1, 1.0), kw("scale", 2, 1.0), kw("input_scale", 3, 1.0)
        return (f"({A} > {L(0)} ? {L(scale)} * {A} : "
                f"{L(scale * alpha)} * sc_expm1({A} * {L(iscale)}))")
    if n == "softplus":
        beta, th = kw("beta", 1, 1.0), kw("threshold", 2, 20.0)
        if beta == 1 and th == 20:
            return f"sc_softplus({A})"
        return f"({A} * {L(beta)} > {L(th)} ? {A} : sc_log1p(sc_exp({A} * {L(beta)})) / {L(beta)})"
    if n == "threshold":
        return f"({A} > {val(a(1))} ? {A} : {val(a(2))})"
    if n == "hardshrink":
        lam = L(kw("lambd", 1, 0.5))
        return f"(({A} > {lam} || {A} < -{lam}) ? {A} : {L(0)})"
    if n == "softshrink":
        lam = L(kw("lambd", 1, 0.5))
        return f"({A} > {lam} ? {A} - {lam} : ({A} < -{lam} ? {A} + {lam} : {L(0)}))"
    cmp = {"gt": ">", "lt": "<", "ge": ">=", "le": "<=", "eq": "==", "ne": "!="}
    if n in cmp:
        return f"(({acc})({A} {cmp[n]} {V(1)}))"
    if n in ("maximum", "fmax"):
        return f"sc_max({A}, {V(1)})"
    if n in ("minimum", "fmin"):
        return f"sc_min({A}, {V(1)})"
    if n == "logical_and":
        return f"(({acc})({A} != {L(0)} && {V(1)} != {L(0)}))"
    if n == "logical_or":
        return f"(({acc})({A} != {L(0)} || {V(1)} != {L(0)}))"
    if n == "logical_xor":
        return f"(({acc})(({A} != {L(0)}) != ({V(1)} != {L(0)})))"
    if n == "where":
        return f"({A} != {L(0)} ? {V(1)} : {V(2)})"
    if n == "masked_fill":
        return f"({V(1)} != {L(0)} ? {V(2)} : {A})"
    if n == "addcmul":
        v = kwargs.get("value", a(3, 1))
        return f"({A} + {L(v)} * {V(1)} * {V(2)})"
    if n == "addcdiv":
        v = kwargs.get("value", a(3, 1))
        return f"({A} + {L(v)} * {V(1)} / {V(2)})"
    if n == "lerp":
        return f"({A} + {V(2)} * ({V(1)} - {A}))"
    if n == "fmod":
        return f"fmod({A}, {V(1)})"
    if n == "remainder":
        B = V(1)
        return f"({A} - floor({A} / {B}) * {B})"
    if n == "floor_divide":
        return f"floor({A} / {V(1)})"
    if n in ("dropout", "alpha_dropout", "feature_dropout"):
        train = kw("train", 2, False)
        return None if train else f"({A})"
    if n in ("_to_copy", "to", "type_as", "alias", "clone"):
        return f"({A})"
    return None


def is_pointwise_supported(opname: str, overload: str, args: list, kwargs: dict) -> bool:
    return pointwise_expr(opname, overload, args, kwargs, lambda x: "v") is not None
