"""What each pointwise aten op computes, as a C expression over accumulator-typed values.

Expressions are C source that compiles both as CUDA C++ and as C11 with <tgmath.h> (the generic
math names ``exp``, ``tanh``, ``erf`` pick the float or double version from the argument type).
Each backend's prelude supplies the ``sc_*`` helpers, so CPU code can use vectorisable
versions. One-argument ops are a template in ``SIMPLE``; the others a small rule in ``_RULES``.
``pointwise_expr`` returns ``None`` for an op it cannot express; the planner then leaves that op
to the library.

>>> pointwise_expr("relu", "default", [{"node": "x"}], {}, lambda a: "v1")
'(v1 < 0.0f ? 0.0f : v1)'
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .helpers import DROPOUTS, dropout_of_zero

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
    x = _Args(args, kwargs, val, acc)
    n = opname.rstrip("_") if opname not in ("_softmax",) else opname
    if n in SIMPLE:
        return SIMPLE[n].format(x.A, zero=x.L(0), one=x.L(1), three=x.L(3), six=x.L(6))
    rule = _RULES.get(n)
    return rule(x, n, overload) if rule is not None else None


def is_pointwise_supported(opname: str, overload: str, args: list, kwargs: dict) -> bool:
    return pointwise_expr(opname, overload, args, kwargs, lambda x: "v") is not None


class _Args:
    """An op's arguments as the rules read them; the first is rendered up front (``A``), the
    others in the order a rule asks for them (the order their loads are numbered)."""

    def __init__(self, args: list, kwargs: dict, val: Val, acc: str) -> None:
        self.args, self.kwargs, self.val, self.acc = args, kwargs, val, acc
        self.A = self.V(0)

    def L(self, v: Any) -> str:  # noqa: N802  (reads like the literal it makes)
        return lit(v, self.acc)

    def a(self, i: int, default: Any = None) -> Any:
        """Positional argument ``i`` as given."""
        return self.args[i] if i < len(self.args) else default

    def kw(self, name: str, pos: int, default: Any) -> Any:
        """Argument ``name`` by keyword, else at position ``pos``, else ``default``."""
        if name in self.kwargs:
            return self.kwargs[name]
        v = self.a(pos, None)
        return default if v is None else v

    def V(self, i: int) -> str | None:  # noqa: N802  (a rendered value)
        """Positional argument ``i`` rendered (None when absent)."""
        x = self.a(i)
        return None if x is None else self.val(x)


SIMPLE = {
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
    "log_sigmoid": "(sc_min({0}, {zero}) - sc_log1p(sc_exp(-fabs({0}))))",
    "mish": "sc_mish({0})",
    "hardswish": "({0} * sc_min(sc_max({0} + {three}, {zero}), {six}) / {six})",
    "hardsigmoid": "(sc_minimum(sc_maximum({0} + {three}, {zero}), {six}) / {six})",
    "relu6": "sc_minimum(sc_maximum({0}, {zero}), {six})",
    "asin": "asin({0})", "acos": "acos({0})", "atan": "atan({0})", "sinh": "sinh({0})",
    "cosh": "cosh({0})", "asinh": "asinh({0})", "acosh": "acosh({0})", "atanh": "atanh({0})",
    # copies and identities inside a kernel
    "_to_copy": "({0})", "to": "({0})", "type_as": "({0})", "alias": "({0})", "clone": "({0})",
}


def _add_sub(x: _Args, n: str, overload: str) -> str:
    A, L = x.A, x.L
    alpha = x.kwargs.get("alpha", x.a(2, 1))
    B = x.V(1)
    b = B if alpha in (1, 1.0) else f"({L(alpha)} * {B})"
    if n == "add":
        return f"({A} + {b})"
    if n == "sub":
        return f"({A} - {b})"
    return f"({B} - {A})" if alpha in (1, 1.0) else f"({B} - {L(alpha)} * {A})"


def _div(x: _Args, n: str, overload: str) -> str:
    A = x.A
    mode = x.kwargs.get("rounding_mode", x.a(2) if overload.endswith("mode") else None)
    d = x.a(1)
    if mode is None and isinstance(d, (int, float)) and not isinstance(d, bool) and d != 0 \
            and math.isfinite(d):
        # by a constant: a multiply (within an ulp of the division, several times cheaper)
        return f"({A} * {x.L(1.0 / d)})"
    q = f"({A} / {x.V(1)})"
    if mode == "trunc":
        return f"trunc{q}"
    if mode == "floor":
        return f"floor{q}"
    return q


def _gelu(x: _Args, n: str, overload: str) -> str:
    A, L = x.A, x.L
    if x.kwargs.get("approximate", x.a(1, "none")) == "tanh":
        return (f"({L(0.5)} * {A} * ({L(1)} + sc_tanh({L(math.sqrt(2 / math.pi))} * "
                f"({A} + {L(0.044715)} * {A} * {A} * {A}))))")
    return f"({L(0.5)} * {A} * ({L(1)} + sc_erf({A} * {L(math.sqrt(0.5))})))"


def _pow(x: _Args, n: str, overload: str) -> str:
    A, L = x.A, x.L
    if overload == "Scalar":          # scalar ** tensor
        return f"pow({L(x.args[0])}, {x.V(1)})"
    e = x.a(1)
    if isinstance(e, (int, float)) and not isinstance(e, bool):
        special = {2: f"({A} * {A})", 3: f"({A} * {A} * {A})", 1: f"({A})",
                   0.5: f"sqrt({A})", -1: f"({L(1)} / {A})", -0.5: f"sc_rsqrt({A})",
                   0: L(1)}
        if e in special:
            return special[e]
        return f"pow({A}, {L(e)})"
    return f"pow({A}, {x.V(1)})"


def _clamp(x: _Args, n: str, overload: str) -> str:
    if n == "hardtanh":
        lo, hi = x.kw("min_val", 1, -1.0), x.kw("max_val", 2, 1.0)
    elif n == "clamp_min":
        lo, hi = x.a(1), None
    elif n == "clamp_max":
        lo, hi = None, x.a(1)
    else:
        lo, hi = x.kw("min", 1, None), x.kw("max", 2, None)
    r = x.A
    if lo is not None:
        lo_s = x.val(lo)
        r = f"({r} < {lo_s} ? {lo_s} : {r})"
    if hi is not None:
        hi_s = x.val(hi)
        r = f"({r} > {hi_s} ? {hi_s} : {r})"
    return r


def _leaky_relu(x: _Args, n: str, overload: str) -> str:
    A, L = x.A, x.L
    return f"({A} > {L(0)} ? {A} : {A} * {L(x.kw('negative_slope', 1, 0.01))})"


def _rrelu(x: _Args, n: str, overload: str) -> str | None:
    """Eval-mode RReLU: a leaky ReLU of slope (lower + upper) / 2, as ATen computes it;
    training mode draws a slope per element (left to PyTorch)."""
    if x.kw("training", 3, False):
        return None
    A, L = x.A, x.L
    slope = (float(x.kw("lower", 1, 1 / 8)) + float(x.kw("upper", 2, 1 / 3))) / 2
    return f"({A} > {L(0)} ? {A} : {A} * {L(slope)})"


def _elu(x: _Args, n: str, overload: str) -> str:
    A, L = x.A, x.L
    if n == "selu":
        alpha, scale, iscale = 1.6732632423543772, 1.0507009873554805, 1.0
    elif n == "celu":
        alpha = x.kw("alpha", 1, 1.0)
        scale, iscale = 1.0, 1.0 / alpha
    else:
        alpha, scale, iscale = x.kw("alpha", 1, 1.0), x.kw("scale", 2, 1.0), \
            x.kw("input_scale", 3, 1.0)
    return (f"({A} > {L(0)} ? {L(scale)} * {A} : "
            f"{L(scale * alpha)} * sc_expm1({A} * {L(iscale)}))")


def _softplus(x: _Args, n: str, overload: str) -> str:
    A, L = x.A, x.L
    beta, th = x.kw("beta", 1, 1.0), x.kw("threshold", 2, 20.0)
    if beta == 1 and th == 20:
        return f"sc_softplus({A})"
    return f"({A} * {L(beta)} > {L(th)} ? {A} : sc_log1p(sc_exp({A} * {L(beta)})) / {L(beta)})"


def _threshold(x: _Args, n: str, overload: str) -> str:
    A = x.A
    return f"({A} > {x.val(x.a(1))} ? {A} : {x.val(x.a(2))})"


def _shrink(x: _Args, n: str, overload: str) -> str:
    A, L = x.A, x.L
    lam = L(x.kw("lambd", 1, 0.5))
    # tested as "inside the band" so that a NaN, inside no band, goes through as ATen's does
    if n == "hardshrink":
        return f"(({A} >= -{lam} && {A} <= {lam}) ? {L(0)} : {A})"
    return f"(({A} >= -{lam} && {A} <= {lam}) ? {L(0)} : ({A} > {lam} ? {A} - {lam} : {A} + {lam}))"


_CMP = {"gt": ">", "lt": "<", "ge": ">=", "le": "<=", "eq": "==", "ne": "!="}


def _compare(x: _Args, n: str, overload: str) -> str:
    return f"(({x.acc})({x.A} {_CMP[n]} {x.V(1)}))"


def _binary(x: _Args, n: str, overload: str) -> str:
    A, L, acc = x.A, x.L, x.acc
    if n == "maximum":   # NaN on either side is the result; fmax / fmin skip it
        return f"sc_maximum({A}, {x.V(1)})"
    if n == "minimum":
        return f"sc_minimum({A}, {x.V(1)})"
    if n == "fmax":
        return f"sc_max({A}, {x.V(1)})"
    if n == "fmin":
        return f"sc_min({A}, {x.V(1)})"
    if n == "logical_and":
        return f"(({acc})({A} != {L(0)} && {x.V(1)} != {L(0)}))"
    if n == "logical_or":
        return f"(({acc})({A} != {L(0)} || {x.V(1)} != {L(0)}))"
    if n == "logical_xor":
        return f"(({acc})(({A} != {L(0)}) != ({x.V(1)} != {L(0)})))"
    if n == "fmod":
        return f"fmod({A}, {x.V(1)})"
    if n == "remainder":
        B = x.V(1)
        return f"({A} - floor({A} / {B}) * {B})"
    return f"floor({A} / {x.V(1)})"    # floor_divide


def _select(x: _Args, n: str, overload: str) -> str:
    A, L, V = x.A, x.L, x.V
    if n == "where":
        return f"({A} != {L(0)} ? {V(1)} : {V(2)})"
    if n == "masked_fill":
        return f"({V(1)} != {L(0)} ? {V(2)} : {A})"
    if n == "lerp":
        return f"({A} + {V(2)} * ({V(1)} - {A}))"
    v = x.kwargs.get("value", x.a(3, 1))
    if n == "addcmul":
        return f"({A} + {L(v)} * {V(1)} * {V(2)})"
    return f"({A} + {L(v)} * {V(1)} / {V(2)})"      # addcdiv


def _dropout(x: _Args, n: str, overload: str) -> str | None:
    if x.kw("train", 2, False) and not dropout_of_zero(x.args, x.kwargs):
        return None
    return f"({x.A})"


def _loss(x: _Args, n: str, overload: str) -> str | None:
    """A loss with ``reduction=none`` (decompose.py writes the mean or sum as its own op)."""
    if x.kw("reduction", 2, 1) != 0:
        return None
    A, B, L = x.A, x.V(1), x.L
    if n == "mse_loss":
        return f"(({A} - {B}) * ({A} - {B}))"
    if n == "l1_loss":
        return f"fabs({A} - {B})"
    if n == "kl_div":   # xlogy(t, t) - t * input; exp(t) * (t - input) for a log target
        if x.kw("log_target", 3, False):
            return f"(sc_exp({B}) * ({B} - {A}))"
        return f"(({B} > {L(0)} ? {B} * sc_log({B}) : {L(0)}) - {B} * {A})"
    d = f"fabs({A} - {B})"
    if n == "smooth_l1_loss":
        beta = float(x.kw("beta", 3, 1.0))
        if beta == 0:
            return d
        return f"({d} < {L(beta)} ? {L(0.5 / beta)} * {d} * {d} : {d} - {L(0.5 * beta)})"
    delta = float(x.kw("delta", 3, 1.0))   # huber_loss
    return f"({d} < {L(delta)} ? {L(0.5)} * {d} * {d} : {L(delta)} * ({d} - {L(0.5 * delta)}))"


_RULES: dict[str, Callable[[_Args, str, str], str | None]] = {
    **{loss: _loss for loss in ("mse_loss", "l1_loss", "kl_div", "smooth_l1_loss", "huber_loss")},
    "add": _add_sub, "sub": _add_sub, "rsub": _add_sub,
    "mul": lambda x, n, overload: f"({x.A} * {x.V(1)})",
    "div": _div, "gelu": _gelu, "pow": _pow,
    "clamp": _clamp, "hardtanh": _clamp, "clamp_min": _clamp, "clamp_max": _clamp,
    "leaky_relu": _leaky_relu, "rrelu": _rrelu, "elu": _elu, "selu": _elu, "celu": _elu,
    "softplus": _softplus,
    "threshold": _threshold, "hardshrink": _shrink, "softshrink": _shrink,
    **{c: _compare for c in _CMP},
    **{b: _binary for b in ("maximum", "fmax", "minimum", "fmin", "logical_and", "logical_or",
                            "logical_xor", "fmod", "remainder", "floor_divide")},
    **{s: _select for s in ("where", "masked_fill", "lerp", "addcmul", "addcdiv")},
    **{d: _dropout for d in DROPOUTS},
}
