"""Scan kernels (cumsum, cumprod, and their masked and reversed forms) for both backends.

A scan group is a row kernel with one ``scan`` statement: a prologue of per-element values
(``x * mask``), the running sum or product along the row, and an epilogue on it; no row
reductions. The C backend runs rows in parallel and each row in order with a double
accumulator (torch's CPU scans accumulate in double too). The CUDA backend gives a long
contiguous row to one block, which scans it a chunk of ``blockDim`` elements at a time (warp
shuffles, then the warps' totals) and carries the running total from chunk to chunk; rows
interleaved in memory (a scan along an outer dim) or short ones go one per thread, so
neighbouring threads read neighbouring addresses.
"""

from __future__ import annotations

from .codegen import Load, Store, RowValues, elem_index, elem_lines, row_bases
from .ir import KernelSpec, Stmt

SHORT_ROW = 32   # rows up to this long are scanned by one thread each on CUDA


def scan_stmt(spec: KernelSpec) -> Stmt | None:
    """The group's scan statement (lowering allows one per group), or None."""
    return next((s for s in spec.stmts if s.op == "scan"), None)


def scan_strategy(spec: KernelSpec) -> str:
    """``block`` (a block scans one long contiguous row) or ``thread`` (a thread per row)."""
    if not spec.reduce[-1] or spec.rowlen <= SHORT_ROW:
        return "thread"
    return "block"


def _closure(spec: KernelSpec, roots: list[str], stop: set[str]) -> list[Stmt]:
    """Loads, expressions and the scan needed for ``roots`` (in order), without ``stop``."""
    need, stack = set(), list(roots)
    while stack:
        v = stack.pop()
        if v in need or v in stop:
            continue
        need.add(v)
        for s in spec.stmts:
            if s.var == v and s.op in ("load", "expr", "scan"):
                stack.extend(s.deps)
    return [s for s in spec.stmts if s.op in ("load", "expr", "scan") and s.var in need]


def _ident(kind: str) -> str:
    return "1" if kind == "prod" else "0"


def _op(kind: str) -> str:
    return "*" if kind == "prod" else "+"


class _Scan:
    """What both bodies share: the scan, the row values, the prologue and epilogue lines."""

    def __init__(self, spec: KernelSpec, load: Load, store: Store, ind: str) -> None:
        self.spec, self.load, self.store, self.ind = spec, load, store, ind
        self.s = scan_stmt(spec)
        self.rows = RowValues(spec, load, store)
        self.L: list[str] = row_bases(spec, ind)
        self.rows.flush(self.L, ind)
        done = set(self.rows.avail)
        stores = [s for s in spec.stmts if s.op == "store"]
        self.pre = _closure(spec, [self.s.deps[0]], done)
        self.post = _closure(spec, [s.var for s in stores], done | {s.var for s in self.pre}
                             | {self.s.var})
        # the same with the prologue values it uses: for a loop apart from the prologue's
        self.post_full = _closure(spec, [s.var for s in stores], done | {self.s.var})
        self.stores = stores
        self.at_j = elem_index(spec, "j")
        self.op = _op(self.s.kind)
        self.ident = f"({spec.acc}){_ident(self.s.kind)}"

    def comb(self, a: str, b: str) -> str:
        """``a`` and ``b`` combined by the scan's operator."""
        return f"{a} {self.op} {b}"

    def lines(self, stmts: list[Stmt], ind: str) -> list[str]:
        return elem_lines(self.spec, stmts, self.load, self.at_j, ind=ind)

    def store_lines(self, ind: str) -> list[str]:
        ops = self.spec.operands
        return [ind + self.store(ops[s.operand], self.at_j(ops[s.operand]), s.var)
                for s in self.stores]

    def j_of(self, jj: str) -> str:
        L = self.spec.rowlen
        return f"({L - 1}LL - {jj})" if self.s.reverse else jj


def scan_body_c(spec: KernelSpec, load: Load, store: Store) -> str:
    """C: rows in parallel, each row in order with a double running total."""
    ind, i3 = " " * 8, " " * 12
    sc = _Scan(spec, load, store, ind)
    s, acc = sc.s, spec.acc
    L = ["    #pragma omp parallel for schedule(static)",
         f"    for (long long r = 0; r < {spec.rows}LL; ++r) {{"] + sc.L
    L.append(f"{ind}double sc_run = {_ident(s.kind)};")
    L.append(f"{ind}for (long long jj = 0; jj < {spec.rowlen}LL; ++jj) {{")
    L.append(f"{i3}const long long j = {sc.j_of('jj')};")
    L += sc.lines(sc.pre, i3)
    L.append(f"{i3}sc_run {_op(s.kind)}= (double){s.deps[0]};")
    L.append(f"{i3}const {acc} {s.var} = ({acc})sc_run;")
    L += sc.lines(sc.post, i3)
    L += sc.store_lines(i3)
    L += [f"{ind}}}", "    }"]
    return "\n".join(L) + "\n"


def _element(sc: _Scan, first: str, ind: str) -> list[str]:
    """The index lines of one element of a chunk, ``first`` its place along the row."""
    n = sc.spec.rowlen
    return [f"{ind}const long long jq = {first};",
            f"{ind}const bool live = jq < {n}LL;",
            f"{ind}const long long jj = live ? jq : {n - 1}LL;   // a valid address when not live",
            f"{ind}const long long j = {sc.j_of('jj')};"]


def _block_scan(acc: str, ident: str, comb, nw: int, ind: str) -> list[str]:
    """Each thread's ``x`` scanned over the block: ``x`` becomes its inclusive prefix within
    its warp (shuffles), ``sc_warp`` the inclusive prefix of the warps' totals."""
    return [f"{ind}#pragma unroll",
            f"{ind}for (int o = 1; o < 32; o <<= 1) {{ const {acc} y = "
            f"__shfl_up_sync(SC_FULL, x, o); if (lane >= o) x = {comb('x', 'y')}; }}",
            f"{ind}if (lane == 31) sc_warp[w] = x;",
            f"{ind}__syncthreads();",
            f"{ind}if (w == 0) {{",
            f"{ind}    {acc} t = lane < {nw} ? sc_warp[lane] : {ident};",
            f"{ind}    #pragma unroll",
            f"{ind}    for (int o = 1; o < 32; o <<= 1) {{ const {acc} y = "
            f"__shfl_up_sync(SC_FULL, t, o); if (lane >= o) t = {comb('t', 'y')}; }}",
            f"{ind}    sc_warp[lane] = t;   // inclusive prefix of the warps' totals",
            f"{ind}}}",
            f"{ind}__syncthreads();"]


def _block_rows(sc: _Scan, acc: str, rows: int, kind: str, ind: str) -> list[str]:
    """A block-per-row scan's head: the warps' shared totals, the row loop, its carry."""
    return (["    __shared__ " + acc + " sc_warp[32];",
             "    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;",
             f"    for (long long r = blockIdx.x; r < {rows}LL; r += gridDim.x) {{"] + sc.L
            + [f"{ind}double sc_carry = {_ident(kind)};"])


def _block_next(op: str, ind: str, i3: str) -> list[str]:
    """A chunk's end and the row's: the carry moves on past the chunk's total."""
    return [f"{i3}sc_carry {op}= (double)total;",
            f"{i3}__syncthreads();   // sc_warp is rewritten by the next chunk",
            f"{ind}}}", "    }"]


def scan_body_cuda(spec: KernelSpec, load: Load, store: Store, block: int,
                   ipt: int = 1) -> str:
    """CUDA: a block per long contiguous row (chunked block scan, ``ipt`` elements a thread
    per chunk), else a thread per row."""
    if scan_strategy(spec) == "thread":
        return _thread_cuda(spec, load, store)
    if ipt > 1:
        return _block_ipt_cuda(spec, load, store, block, ipt)
    ind, i3 = "    " * 2, "    " * 3
    sc = _Scan(spec, load, store, ind)
    s, acc, op, ident, comb = sc.s, spec.acc, sc.op, sc.ident, sc.comb
    n, nw = spec.rowlen, block // 32
    L = _block_rows(sc, acc, spec.rows, s.kind, ind)
    L.append(f"{ind}for (long long c0 = 0; c0 < {n}LL; c0 += {block}LL) {{")
    L += _element(sc, "c0 + threadIdx.x", i3)
    L += sc.lines(sc.pre, i3)
    L.append(f"{i3}{acc} x = live ? ({acc}){s.deps[0]} : {ident};")
    L += _block_scan(acc, ident, comb, nw, i3)
    L.append(f"{i3}const {acc} before = w > 0 ? sc_warp[w - 1] : {ident};")
    L.append(f"{i3}const {acc} total = sc_warp[{nw - 1}];")
    L.append(f"{i3}const {acc} {s.var} = ({acc})(sc_carry {op} (double)({comb('before', 'x')}));")
    L += sc.lines(sc.post, i3)
    L.append(f"{i3}if (live) {{")
    L += sc.store_lines(i3 + "    ")
    L.append(f"{i3}}}")
    L += _block_next(op, ind, i3)
    return "\n".join(L) + "\n"


def _block_ipt_cuda(spec: KernelSpec, load: Load, store: Store, block: int, K: int) -> str:
    """A block per row, ``K`` consecutive elements a thread per chunk: each thread scans its
    own in registers, the block scans the threads' totals, and each element adds what came
    before its thread. A chunk of one element a thread made the row a chain of rowlen /
    block steps, each a block-wide scan and two barriers with one load a thread in flight
    (a masked cumsum over rows of 32768 ran at 0.79x of Inductor on the H100)."""
    ind, i3, i4 = "    " * 2, "    " * 3, "    " * 4
    sc = _Scan(spec, load, store, ind)
    s, acc, op, ident, comb = sc.s, spec.acc, sc.op, sc.ident, sc.comb
    n, nw = spec.rowlen, block // 32
    L = _block_rows(sc, acc, spec.rows, s.kind, ind)
    L.append(f"{ind}for (long long c0 = 0; c0 < {n}LL; c0 += {block * K}LL) {{")
    L.append(f"{i3}const long long q0 = c0 + (long long)threadIdx.x * {K}LL;")
    L.append(f"{i3}{acc} xs[{K}];   // this thread's elements, then their inclusive scan")
    L.append(f"{i3}#pragma unroll")
    L.append(f"{i3}for (int k = 0; k < {K}; ++k) {{")
    L += _element(sc, "q0 + k", i4)   # the k-th of the thread's share
    L += sc.lines(sc.pre, i4)
    L.append(f"{i4}xs[k] = live ? ({acc}){s.deps[0]} : {ident};")
    L.append(f"{i3}}}")
    L.append(f"{i3}#pragma unroll")
    L.append(f"{i3}for (int k = 1; k < {K}; ++k) xs[k] = {comb('xs[k - 1]', 'xs[k]')};")
    L.append(f"{i3}{acc} x = xs[{K - 1}];   // the thread's total")
    L += _block_scan(acc, ident, comb, nw, i3)
    L.append(f"{i3}{acc} ex = __shfl_up_sync(SC_FULL, x, 1);")
    L.append(f"{i3}if (lane == 0) ex = {ident};   // the lanes before this one")
    L.append(f"{i3}const {acc} before = {comb('(w > 0 ? sc_warp[w - 1] : ' + ident + ')', 'ex')};")
    L.append(f"{i3}const {acc} total = sc_warp[{nw - 1}];")
    L.append(f"{i3}#pragma unroll")
    L.append(f"{i3}for (int k = 0; k < {K}; ++k) {{")
    L += _element(sc, "q0 + k", i4)
    L.append(f"{i4}const {acc} {s.var} = ({acc})(sc_carry {op} (double)({comb('before', 'xs[k]')}));")
    L += sc.lines(sc.post_full, i4)
    L.append(f"{i4}if (live) {{")
    L += sc.store_lines(i4 + "    ")
    L.append(f"{i4}}}")
    L.append(f"{i3}}}")
    L += _block_next(op, ind, i3)
    return "\n".join(L) + "\n"


def _thread_cuda(spec: KernelSpec, load: Load, store: Store) -> str:
    ind, i3 = "    " * 2, "    " * 3
    sc = _Scan(spec, load, store, ind)
    s, acc = sc.s, spec.acc
    L = ["    for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; "
         f"r < {spec.rows}LL; r += (long long)gridDim.x * blockDim.x) {{"] + sc.L
    L.append(f"{ind}double sc_run = {_ident(s.kind)};")
    L.append(f"{ind}for (long long jj = 0; jj < {spec.rowlen}LL; ++jj) {{")
    L.append(f"{i3}const long long j = {sc.j_of('jj')};")
    L += sc.lines(sc.pre, i3)
    L.append(f"{i3}sc_run {_op(s.kind)}= (double){s.deps[0]};")
    L.append(f"{i3}const {acc} {s.var} = ({acc})sc_run;")
    L += sc.lines(sc.post, i3)
    L += sc.store_lines(i3)
    L += [f"{ind}}}", "    }"]
    return "\n".join(L) + "\n"
