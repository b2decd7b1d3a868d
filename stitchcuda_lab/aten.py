"""The aten op vocabulary: what an op is called, what class it is, how big its dtype is.

Every module asks here: the graph (categories, FLOPs, bytes), the Verifier's fallback policy,
the Coder's replaced/kept claims, the rubric and the LLM prompts, so they agree on one set
of answers.

- Names: ``short`` is the op packet exactly as the graph writes it (``aten.relu_.default`` ->
  ``relu_``); ``norm`` is the packet under any spelling with the in-place underscore dropped
  (``aten::add_``, ``torch.add``, ``add_`` -> ``add``), the name the Verifier's policy compares.
- Classes (``op_class``, by ``norm``): ``cheap`` ops allocate, view, copy or read metadata and
  never count as computation; ``library`` ops are vendor-library calls a plan may keep (GEMM,
  convolution, attention); everything else is ``compute``. ``VIEWS`` are the cheap ops that
  return a view and move no bytes (``is_view``, by ``short``).
- Categories (``category``): the graph's finer op classes (pointwise, reduction,
  normalization, gemm, convolution, data_movement, rnn, other), which pick FLOP formulas.
- ``DTYPE_BYTES``, ``FLOAT_DTYPES``: element sizes and the floating dtypes.

A leaf: imports nothing of the package and no torch.

>>> short("aten.relu.default"), norm("aten::add_"), op_class("aten.addmm.default")
('relu', 'add', 'library')
>>> category("aten.layer_norm.default"), is_view("aten.view.default"), op_class("aten.view")
('normalization', True, 'cheap')
"""

from __future__ import annotations

import math


def _words(s: str) -> frozenset[str]:
    return frozenset(s.split())


# -- names --------------------------------------------------------------------------------------

# Elementwise overloads named like a reduction: ``torch.min(x, other)`` is ``aten.min.other``,
# which computes what ``minimum`` does (a NaN on either side wins), not a reduction.
_ELEMENTWISE_OVERLOADS = {("max", "other"): "maximum", ("min", "other"): "minimum"}
# PyTorch's alias ops, which the graph records under the name the model used
# (``torch.multiply`` is ``aten.multiply.Tensor``), by the op each one is.
ALIASES = {"multiply": "mul", "subtract": "sub", "divide": "div", "true_divide": "div",
           "absolute": "abs", "negative": "neg", "clip": "clamp", "fix": "trunc",
           "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le",
           "not_equal": "ne", "arccos": "acos", "arcsin": "asin", "arctan": "atan",
           "arccosh": "acosh", "arcsinh": "asinh", "arctanh": "atanh",
           "special_expit": "sigmoid", "special_erf": "erf", "special_expm1": "expm1",
           "special_exp2": "exp2", "special_log1p": "log1p"}


def short(target: str) -> str:
    """``aten.gelu.default`` -> ``gelu``; ``aten.min.other`` -> ``minimum``; an alias by the op
    it is (``aten.multiply.Tensor`` -> ``mul``); other strings (``getitem``) unchanged."""
    parts = target.split(".")
    if len(parts) >= 2 and parts[0] == "aten":
        name = _ELEMENTWISE_OVERLOADS.get((parts[1], parts[-1]), parts[1])
        return ALIASES.get(name, name)
    return target


def overload(target: str) -> str:
    """``aten.add.Tensor`` -> ``Tensor``: the overload, the last dotted part."""
    return target.split(".")[-1]


def norm(op: str) -> str:
    """'aten.add_.Tensor' / 'aten::add' / 'torch.add' / 'add_' -> 'add'."""
    s = str(op).strip()
    for prefix in ("aten::", "aten.", "torch.ops.aten.", "torch.", "prims::", "prims."):
        if s.startswith(prefix):
            s = s[len(prefix):]
            break
    s = s.split(".")[0]
    if len(s) > 1 and s.endswith("_") and not s.endswith("__"):
        s = s[:-1]
    return s


# -- classes: cheap | library | compute ---------------------------------------------------------

# Ops that return a view of their input: no bytes move. ``getitem`` is a tuple item of a
# multi-output op in the graph; ``reshape_as`` decomposes before dispatch.
VIEWS = _words("""
view reshape permute transpose t expand expand_as unsqueeze squeeze flatten unflatten slice
select narrow split split_with_sizes chunk unbind _unsafe_view alias detach diagonal movedim
swapaxes view_as reshape_as getitem numpy_T mT mH adjoint
""")

# Cheap ops that are not listed in VIEWS: allocation and fills, the remaining views and
# aliases, copies (a copy moves data but computes nothing), metadata reads.
_ALLOCATION = _words("""
empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones
ones_like new_ones full full_like new_full fill zero scalar_tensor arange lift_fresh
lift_fresh_copy
""")
_OTHER_VIEWS = _words("_reshape_alias as_strided unfold resolve_conj resolve_neg conj _conj "
                      "_neg_view")
_COPIES = _words("contiguous clone copy _to_copy to _copy_from _copy_from_and_resize cat stack "
                 "resize set")
_METADATA = _words("""
_local_scalar_dense item is_same_size _has_compatible_shallow_copy_type record_stream sym_size
sym_stride sym_numel sym_storage_offset dim size stride numel is_contiguous result_type
_nnpack_available
""")
CHEAP = VIEWS | _ALLOCATION | _OTHER_VIEWS | _COPIES | _METADATA

# Library ops include the compositions the graph keeps (linear, conv2d, einsum, ...): the
# Verifier's trace shows the mm/bmm/convolution they dispatch to, plans and claims name them.
LIBRARY = _words("""
mm addmm bmm baddbmm addbmm mv addmv dot vdot matmul linear _int_mm _scaled_mm
convolution _convolution convolution_overrideable cudnn_convolution
cudnn_convolution_transpose mkldnn_convolution miopen_convolution _slow_conv2d_forward
slow_conv3d_forward slow_conv_transpose2d slow_conv_transpose3d _nnpack_spatial_convolution
thnn_conv2d _slow_conv2d slow_conv3d slow_conv_dilated2d slow_conv_dilated3d
_convolution_mode _mps_convolution
conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d
scaled_dot_product_attention _scaled_dot_product_flash_attention
_scaled_dot_product_efficient_attention _scaled_dot_product_cudnn_attention
_scaled_dot_product_flash_attention_for_cpu _efficient_attention_forward _flash_attention_forward
einsum tensordot bilinear
""")


_FAMILIES = {
    "gemm": _words("mm addmm bmm baddbmm addbmm mv addmv dot vdot matmul linear _int_mm "
                   "_scaled_mm einsum tensordot bilinear"),
    "convolution": {n for n in LIBRARY if "conv" in n},
    "attention": {n for n in LIBRARY if "attention" in n},
}


def library_family(op: str) -> str | None:
    """``gemm``, ``convolution`` or ``attention`` for a library op, else None.

    A kept op stands for its family: ``linear`` dispatches to ``matmul`` and then ``mm`` or
    ``addmm`` depending on the shapes and the device, and a trace shows whichever ran."""
    n = norm(op)
    return next((name for name, ops in _FAMILIES.items() if n in ops), None)


def op_class(op: str) -> str:
    """``cheap``, ``library`` or ``compute`` (see the module docstring), by ``norm``."""
    n = norm(op)
    if n in CHEAP:
        return "cheap"
    if n in LIBRARY:
        return "library"
    return "compute"


def is_library(op: str) -> bool:
    """A vendor-library op (GEMM, convolution, attention) a plan may keep."""
    return op_class(op) == "library"


def computes(op: str) -> bool:
    """True for library and compute ops: the op does arithmetic (cheap ops only allocate,
    view, copy or read metadata)."""
    return op_class(op) != "cheap"


def is_view(target: str) -> bool:
    """The op returns a view of its input and moves no bytes (by ``short``: in place is not)."""
    return short(target) in VIEWS


# -- categories ---------------------------------------------------------------------------------

CATEGORIES = ("pointwise", "reduction", "normalization", "gemm", "convolution", "data_movement",
              "rnn", "other", "input")

_POINTWISE = _words("""
add sub rsub mul div neg relu gelu silu sigmoid tanh exp exp2 log log2 log10 log1p
expm1 sqrt rsqrt abs pow clamp clamp_min clamp_max hardtanh leaky_relu elu selu celu softplus
mish hardswish hardsigmoid relu6 where gt lt ge le eq ne maximum minimum fmax fmin reciprocal sin
cos tan asin acos atan sinh cosh asinh acosh atanh erf erfc sign sgn floor ceil round trunc frac
logical_not logical_and logical_or logical_xor bitwise_not square dropout _to_copy to type_as
masked_fill addcmul addcdiv lerp threshold hardshrink softshrink tanhshrink logsigmoid fmod
remainder floor_divide prelu glu native_dropout alpha_dropout feature_dropout log_sigmoid
feature_alpha_dropout rrelu
softsign
""")
_REDUCTION = _words("""
sum mean amax amin max min argmax argmin prod var std var_mean std_mean logsumexp norm
linalg_vector_norm all any cumsum cumprod max_pool1d max_pool2d max_pool3d avg_pool1d avg_pool2d
avg_pool3d adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool1d
adaptive_max_pool2d adaptive_max_pool3d max_pool2d_with_indices max_pool3d_with_indices lp_pool2d
count_nonzero
""")
_NORMALIZATION = _words("""
softmax log_softmax _softmax _log_softmax layer_norm native_layer_norm group_norm
native_group_norm batch_norm native_batch_norm _native_batch_norm_legit
_native_batch_norm_legit_no_training _native_batch_norm_legit_functional instance_norm rms_norm
_fused_rms_norm local_response_norm
""")
_GEMM = _words("""
linear addmm mm bmm matmul baddbmm addbmm dot mv addmv einsum tensordot bilinear
scaled_dot_product_attention _scaled_dot_product_flash_attention
_scaled_dot_product_efficient_attention _scaled_dot_product_cudnn_attention
""")
_CONV = _words("conv1d conv2d conv3d convolution _convolution conv_transpose1d conv_transpose2d "
               "conv_transpose3d")
_DATA = _words("""
view reshape permute transpose t contiguous clone expand expand_as unsqueeze squeeze flatten
unflatten slice select cat concat concatenate stack split split_with_sizes chunk unbind
index_select gather narrow pad constant_pad_nd reflection_pad1d reflection_pad2d
replication_pad2d repeat flip roll _unsafe_view alias detach copy copy_ lift_fresh_copy
pixel_shuffle pixel_unshuffle index index_put scatter diagonal tril triu movedim swapaxes view_as
reshape_as upsample_nearest2d upsample_bilinear2d interpolate numpy_T mT mH adjoint
""")
_RNN = _words("lstm gru rnn_tanh rnn_relu lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell")


def category(target: str) -> str:
    """The graph's op class of a call (``aten.gelu.default`` -> ``pointwise``), by its short
    name; an in-place pointwise or data-movement op (``relu_``) counts as its functional one."""
    if target == "getitem":
        return "data_movement"
    name = short(target)
    if name in _POINTWISE or name.rstrip("_") in _POINTWISE:
        return "pointwise"
    if name in _NORMALIZATION:
        return "normalization"
    if name in _REDUCTION:
        return "reduction"
    if name in _GEMM:
        return "gemm"
    if name in _CONV:
        return "convolution"
    if name in _DATA or name.rstrip("_") in _DATA:
        return "data_movement"
    if name in _RNN:
        return "rnn"
    return "other"


# Reductions and normalisations along rows, the ones a kernel combines with warp shuffles or
# shared memory (pooling windows are not among them).
ROW_REDUCTIONS = _words("""
sum mean var std var_mean amax amin max min argmax argmin prod norm logsumexp _softmax softmax
_log_softmax log_softmax native_layer_norm layer_norm native_group_norm group_norm
native_batch_norm _native_batch_norm_legit _native_batch_norm_legit_no_training batch_norm
rms_norm _fused_rms_norm cumsum linalg_vector_norm
""")
_ROW_REDUCTION_STEMS = frozenset(r.lstrip("_") for r in ROW_REDUCTIONS)


def is_row_reduction(target: str) -> bool:
    """``target`` reduces along rows (leading underscores ignored: ``_softmax`` is
    ``softmax``)."""
    return short(target).lstrip("_") in _ROW_REDUCTION_STEMS


# -- dtypes -------------------------------------------------------------------------------------

FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4,
               "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "complex64": 8}


def dtype_bytes(dtype: str | None, default: int = 4) -> int:
    """Bytes per element of ``dtype`` (``"float16"`` -> 2); ``default`` when unknown."""
    return DTYPE_BYTES.get(dtype or "", default)


def nbytes(shape: list[int], dtype: str | None) -> int:
    """Bytes of a dense tensor of ``shape`` and ``dtype`` (unknown dtypes count 4 bytes)."""
    return math.prod(shape) * dtype_bytes(dtype)
