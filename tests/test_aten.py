"""The aten op vocabulary: names, classes, categories and dtype sizes every module shares."""

from __future__ import annotations

from stitchcuda_lab import aten


def test_short_is_the_packet_as_the_graph_writes_it():
    assert aten.short("aten.relu.default") == "relu"
    assert aten.short("aten.relu_.default") == "relu_"
    assert aten.short("getitem") == "getitem"
    assert aten.overload("aten.add.Tensor") == "Tensor"


def test_norm_drops_the_spelling_and_the_inplace_underscore():
    for name in ("aten.add.Tensor", "aten::add", "add", "add_", "aten.add_.Tensor", "torch.add",
                 "torch.ops.aten.add.Tensor", "prims.add.default"):
        assert aten.norm(name) == "add"
    assert aten.norm("aten._to_copy.default") == "_to_copy"
    assert aten.norm("aten.__and__.Tensor") == "__and__"


def test_every_op_has_exactly_one_policy_class():
    assert not aten.CHEAP & aten.LIBRARY
    assert aten.op_class("aten.empty_like.default") == "cheap"
    assert aten.op_class("aten.addmm.default") == "library"
    assert aten.op_class("aten.relu.default") == "compute"
    assert aten.op_class("aten.some_new_op.default") == "compute"


def test_every_view_is_cheap_and_moves_no_bytes():
    assert aten.VIEWS <= aten.CHEAP
    assert aten.is_view("aten.view.default") and aten.is_view("getitem")
    # x.T, x.mT, x.mH: transposes (KernelBench writes `x @ self.weight.T`)
    assert all(aten.is_view(f"aten.{t}.default") for t in ("numpy_T", "mT", "mH", "adjoint"))
    assert not aten.is_view("aten.clone.default") and aten.op_class("aten.clone") == "cheap"
    assert not aten.is_view("aten.squeeze_.dim")          # in place: not a view of a new tensor


def test_library_and_compute_ops_compute_cheap_ones_do_not():
    assert aten.computes("aten.mm.default") and aten.computes("aten.relu.default")
    assert not aten.computes("aten.cat.default") and not aten.computes("aten.t.default")
    assert aten.is_library("aten::convolution") and not aten.is_library("aten.relu.default")


def test_categories_follow_the_functional_op():
    assert aten.category("aten.relu_.default") == "pointwise"
    assert aten.category("aten.layer_norm.default") == "normalization"
    assert aten.category("aten.amax.default") == "reduction"
    # torch.min(x, other) is elementwise; torch.min(x) and torch.min(x, dim) reduce
    assert aten.category("aten.min.other") == aten.category("aten.max.other") == "pointwise"
    assert aten.short("aten.min.other") == "minimum" and aten.short("aten.max.other") == "maximum"
    assert aten.category("aten.min.default") == aten.category("aten.max.dim") == "reduction"
    # an alias is the op it names
    assert aten.short("aten.multiply.Tensor") == "mul"
    assert aten.short("aten.clip.default") == "clamp"
    assert aten.category("aten.divide.Tensor_mode") == aten.category("aten.arctan.default") \
        == "pointwise"
    assert aten.category("aten.linear.default") == "gemm"
    assert aten.category("aten.conv2d.default") == "convolution"
    assert aten.category("aten.transpose.int") == "data_movement"
    assert aten.category("getitem") == "data_movement"
    assert aten.category("aten.gru_cell.default") == "rnn"
    assert aten.category("aten.embedding.default") == "other"
    assert set(aten.CATEGORIES) >= {"pointwise", "gemm", "input", "other"}


def test_gemms_and_convolutions_of_the_graph_are_library_ops():
    for op in aten._GEMM | aten._CONV:
        assert aten.op_class(op) == "library", op
    named = {op for op in aten.LIBRARY if aten.category(f"aten.{op}.default") != "other"}
    assert {aten.category(f"aten.{op}.default") for op in named} == {"gemm", "convolution"}


def test_row_reductions_are_reductions_or_normalisations():
    for op in aten.ROW_REDUCTIONS:
        assert aten.category(f"aten.{op}.default") in ("reduction", "normalization"), op
    assert aten.is_row_reduction("aten._softmax.default")
    assert aten.is_row_reduction("aten.native_layer_norm.default")
    assert not aten.is_row_reduction("aten.max_pool2d.default")


def test_dtype_sizes():
    assert aten.dtype_bytes("float16") == 2 and aten.dtype_bytes("int8") == 1
    assert aten.dtype_bytes(None) == 4 and aten.dtype_bytes("mystery", default=0) == 0
    assert aten.nbytes([2, 3], "float64") == 48
    assert set(aten.FLOAT_DTYPES) <= set(aten.DTYPE_BYTES)
