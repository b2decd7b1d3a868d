"""Launch policy: the knobs a kernel is generated and launched with, apart from the code.

Defaults per kernel (``default_params``: block size, float4 width, items per thread, row
strategy, row cache; C: the chunk per OpenMP task), the decisions they imply (which operands go
float4, which rows stay in registers or shared memory, loads in flight per thread) and the grid
the program launches (``launch_config``). Refinement varies the knobs; the backends read them.

>>> default_params(spec)                  # doctest: +SKIP
{'block': 128, 'vec': 4, 'ipt': 2, 'waves': 512}
"""

from __future__ import annotations

from .helpers import ceildiv, contiguous_strides, round_up
from .ir import KernelSpec, deps_closure
from .pool import conv_tile, dense_tile
from .scan import scan_stmt, scan_strategy

WAVES = 512   # grid cap in blocks per SM: in practice one block per chunk or row
MAX_UNROLL = 4   # float4 loads each thread has in flight before it uses the first
CACHE_LIMIT = 160 * 1024   # bytes of dynamic shared memory a row cache may take (227 KB max)
MAX_ROW_REGS = 8   # float4 per thread per cached operand that may stay in registers
# a row too long for one block's cache is shared by the blocks of a thread-block cluster
# (Hopper): each caches its slice, and their partial reductions meet through distributed
# shared memory, so a softmax over rows of 393216 reads them from DRAM once, not twice
CLUSTER_MOST = 8                # blocks of a cluster: the portable largest
CLUSTER_SLICE = 200 * 1024      # bytes of a cluster block's row cache (227 KB max a block)
# elements of its row one thread keeps in registers (one thread per row: a reduction over a
# middle dim, such as RMS over 64 channels); past it the array spills to local memory
THREAD_ROW_REGS = 64
# rows a thread each fill the GPU from (an H100's 132 SMs hold 270K threads): below it, rows
# that interleave (the channel innermost, the row over the pixels: a norm over H and W read
# channels-last) are split among the warps of a block (``split``), 32 rows a block
SPLIT_ROWS = 1 << 17
SPLIT_MIN_LEN = 64
C_CHUNK = 16384    # elements per OpenMP task of a C pointwise kernel


def default_params(spec: KernelSpec, lang: str = "cuda") -> dict:
    """Launch shape the first candidate uses (refinement varies it)."""
    if lang == "c":
        return {"chunk": C_CHUNK} if spec.kind == "pointwise" else {}
    if spec.kind == "pointwise":
        # measured on the H200 (benchmarks/breakdown.py): 128 threads with two float4 loads
        # each and a grid that covers the tensor once (no grid-stride loop) beat 256 x 1 in a
        # persistent grid by 5-10% on 256 MB chains, matching Inductor's kernels
        return {"block": 128, "vec": 4 if vec_ok(spec) else 1, "ipt": 2, "waves": WAVES}
    if spec.kind == "pool":   # pool.py: a thread per output element
        t = dense_tile(spec)
        if t is not None:   # a dense convolution: a tile of outputs a thread
            return {"block": 128, "cot": t["cot"], "px": t["px"], "waves": WAVES}
        return {"block": 256, "vec": 1, "waves": WAVES}
    if scan_stmt(spec) is not None:   # scan.py: a block or a thread per row
        strategy = scan_strategy(spec)
        # elements a thread per chunk of a block's row (scan._block_ipt_cuda): the refine
        # round measures more than one
        return {"block": 256, "rows": strategy, "waves": WAVES,   # scalar: no "vec"
                **({"ipt": 1} if strategy == "block" else {})}
    strategy = row_strategy(spec)
    # 256 threads up to 4096-element rows (measured on the H200: LayerNorm rows of 4096 ran
    # 23% faster than with 512), 512 for longer rows
    # a split row: 16 warps on 32 rows, each with four loads in flight (backend_cuda), for
    # a norm over 16K rows of 15876 (KernelBench's Conv2d_InstanceNorm read channels-last)
    block = {"block": 512 if spec.rowlen > 4096 else 256, "warp": 256, "thread": 256,
             "split": 512}[strategy]
    cs = row_cluster(spec, {"rows": strategy})
    cache = thread_row_operands(spec) if strategy == "thread" else \
        [] if strategy == "split" else cached_operands(spec, cs)
    if cs and cache:
        # a slice's cache takes most of an SM's shared memory: one block an SM, so it is
        # all the SM's threads (KernelBench's Softmax over 4096 x 393216 on an H100: 6.19 ms
        # at 1024 threads, 6.69 at 512; a block a row re-reading it, 6.58)
        block = 1024
    return {"block": block, "vec": 4 if vec_ok(spec, strategy) else 1, "rows": strategy,
            "waves": WAVES, "cache": bool(cache), **({"cluster": cs} if cs else {})}


def row_cluster(spec: KernelSpec, p: dict) -> int:
    """Blocks of a thread-block cluster that share each row (``cluster``: 0 for a block a
    row): the params' own where the kernel can take one (rows a block each, along the
    innermost dim), else the fewest of 2, 4 or 8 whose slices of the row hold every input
    that a later pass reads again in CLUSTER_SLICE of shared memory each, where one block's
    CACHE_LIMIT does not; 0 where none does."""
    if spec.kind != "rowwise" or not spec.reduce[-1] or scan_stmt(spec) is not None \
            or kernel_strategy(spec, p) != "block":
        return 0
    if "cluster" in p:
        cs = int(p["cluster"] or 0)
        return cs if cs in (2, 4, 8) and cs <= spec.rowlen else 0
    ops = _reread_inputs(spec)
    if not ops or len(ops) * slice_len(spec, 0) * 4 <= CACHE_LIMIT:
        return 0
    return next((cs for cs in (2, 4, CLUSTER_MOST)
                 if len(ops) * slice_len(spec, cs) * 4 <= CLUSTER_SLICE), 0)


def slice_len(spec: KernelSpec, cs: int) -> int:
    """Elements of a row each block of a ``cs``-block cluster takes (whole float4s; the last
    block's slice may be shorter); with no cluster (0), the whole row's."""
    return round_up(ceildiv(spec.rowlen, max(1, cs)), 4)


def launch_config(spec: KernelSpec, params: dict | None = None) -> dict:
    """grid blocks (before the SM cap) and block threads for the program to launch with."""
    p = {**default_params(spec), **(params or {})}
    b = int(p["block"])
    if spec.kind == "pool":
        dense = dense_tile(spec, p)
        tile = conv_tile(spec)   # a depthwise convolution's tiles, else a thread per output
        blocks = dense["blocks"] if dense else \
            tile["planes"] * tile["per_plane"] if tile else ceildiv(spec.numel, b)
        return {"blocks": max(1, blocks), "block": int((dense or {}).get("threads", b)),
                "waves": int(p["waves"])}
    if spec.kind == "pointwise":
        per = b * int(p["vec"]) * int(p["ipt"])
        return {"blocks": max(1, ceildiv(spec.numel, per)), "block": b, "waves": int(p["waves"])}
    rows = spec.rows
    smem = cache_bytes(spec, p)
    strategy = kernel_strategy(spec, p)
    cs = row_cluster(spec, p)
    if strategy == "block":
        blocks = rows * max(1, cs)
    elif strategy == "warp":
        blocks = ceildiv(rows, b // 32)
    elif strategy == "split":
        blocks = ceildiv(rows, 32)
    else:
        blocks = ceildiv(rows, b)
    out = {"blocks": max(1, blocks), "block": b, "waves": int(p["waves"])}
    if smem:
        out["smem"] = smem
    if cs:
        out["cluster"] = cs   # the grid a multiple of it (program.py)
    return out


def row_strategy(spec: KernelSpec) -> str:
    """Threads per row: a block (long rows), a warp, or one thread (short or interleaved rows);
    interleaved rows too few to fill the GPU a thread each and long enough to share are split
    (``split``: 32 neighbouring rows a block, a row's elements dealt out to its threads)."""
    if not spec.reduce[-1]:
        return "split" if spec.rows < SPLIT_ROWS and spec.rowlen >= SPLIT_MIN_LEN else "thread"
    if spec.rowlen <= 16:   # short rows (pooling windows): a thread each
        return "thread"
    return "block" if spec.rowlen > 1024 else "warp"


def kernel_strategy(spec: KernelSpec, p: dict) -> str:
    """The row strategy a kernel is generated with: the params' own when valid. Interleaved
    rows (the last dim not reduced) take a thread a row or ``split``, the lanes of a warp on
    neighbouring rows (coalesced); contiguous rows take anything but ``split``."""
    strategy = p["rows"] if p.get("rows") in ("block", "warp", "thread", "split") \
        else row_strategy(spec)
    if not spec.reduce[-1]:
        return strategy if strategy in ("thread", "split") else "thread"
    return row_strategy(spec) if strategy == "split" else strategy


def auto_unroll(spec: KernelSpec, strategy: str, block: int) -> int:
    """Loads in flight per thread when the params do not say: up to MAX_UNROLL, a divisor of
    the thread's float4 count along the row when there is one (no bounds test then)."""
    lanes = block if strategy == "block" else 32
    trips = max(1, ceildiv(spec.rowlen // 4, lanes))
    return next((u for u in range(MAX_UNROLL, 1, -1) if trips % u == 0), min(MAX_UNROLL, trips))


def vec_operands(spec: KernelSpec) -> list[int]:
    """Operands read/written as float4 (contiguous along the innermost dim)."""
    if spec.kind == "pointwise":
        return [i for i, o in enumerate(spec.operands)
                if o.strides == contiguous_strides(spec.dims)]
    return [i for i, o in enumerate(spec.operands)
            if not o.row and o.strides[-1] == 1 and all(s % 4 == 0 for s in o.strides[:-1])]


def vec_ok(spec: KernelSpec, strategy: str | None = None) -> bool:
    """The kernel can take its float4 operands four elements at a time."""
    vo = vec_operands(spec)
    if not vo or any(spec.operands[i].dtype != "float32" for i in vo):
        return False
    if spec.kind == "pointwise":
        return spec.numel >= 4
    if (strategy or row_strategy(spec)) == "thread":
        return False
    return spec.reduce[-1] and spec.dims[-1] % 4 == 0 and spec.rowlen >= 4 and all(
        spec.operands[i].role != "inout" for i in vo)


def cached_operands(spec: KernelSpec, cs: int = 0) -> list[int]:
    """fp32 per-element inputs read in more than one pass of a multi-pass row kernel: kept in
    shared memory after their first read, so the row comes from DRAM once (``cs``: the
    blocks of a cluster sharing the row, each keeping its slice)."""
    if not spec.reduce[-1]:
        return []
    out = _reread_inputs(spec)
    limit = CLUSTER_SLICE if cs > 1 else CACHE_LIMIT
    return out if len(out) * slice_len(spec, cs) * 4 <= limit else []


def thread_row_operands(spec: KernelSpec) -> list[int]:
    """One thread per row: the inputs ``cached_operands`` would keep, in a register array of
    the row's length when all of them fit THREAD_ROW_REGS elements. The second pass of an RMS
    norm over 64 strided channels read them again, mostly from DRAM (the rows of a block do
    not fit L1): 1.5 times the least traffic, 0.71x of Inductor's one-pass kernel."""
    out = _reread_inputs(spec)
    return out if len(out) * spec.rowlen <= THREAD_ROW_REGS else []


def _reread_inputs(spec: KernelSpec) -> list[int]:
    if spec.kind != "rowwise" or spec.npasses < 2:
        return []
    uses: dict[int, set[int]] = {}
    for s in spec.stmts:
        if s.op == "reduce":
            for ld in deps_closure(spec, [s.deps[0]]):
                if ld.op == "load":
                    uses.setdefault(ld.operand, set()).add(s.passno)
        elif s.op == "store" and s.level == "full":
            for ld in deps_closure(spec, [s.var]):
                if ld.op == "load":
                    uses.setdefault(ld.operand, set()).add(s.passno)
    return [i for i, ps in sorted(uses.items()) if len(ps) > 1
            and spec.operands[i].role == "in" and not spec.operands[i].row
            and spec.operands[i].dtype == "float32"]


def cache_bytes(spec: KernelSpec, p: dict) -> int:
    """Dynamic shared memory the row cache takes (0 without one or in registers)."""
    strategy = kernel_strategy(spec, p)
    if not p.get("cache") or strategy != "block" or row_in_registers(spec, p):
        return 0
    cs = row_cluster(spec, p)
    return len(cached_operands(spec, cs)) * slice_len(spec, cs) * 4


def row_in_registers(spec: KernelSpec, p: dict) -> bool:
    """The row cache (``cache``) kept in registers rather than shared memory: each thread's
    share of the row is whole float4s, at most MAX_ROW_REGS of them, loaded once (all in
    flight together) and reused by the later passes. No shared memory, so more blocks fit."""
    strategy = p.get("rows") or row_strategy(spec)
    if not p.get("cache") or strategy not in ("block", "warp") or int(p.get("vec", 1)) != 4 \
            or not vec_ok(spec, strategy) or row_cluster(spec, p):
        return False
    ops = cached_operands(spec)
    vo = vec_operands(spec)
    lanes = int(p["block"]) if strategy == "block" else 32
    nv = spec.rowlen // 4
    return bool(ops) and all(i in vo for i in ops) and nv % lanes == 0 \
        and nv // lanes <= MAX_ROW_REGS
