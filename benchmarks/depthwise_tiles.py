"""A depthwise 2-d convolution (KernelBench level 1's conv_depthwise shapes: 64 x 128 x 256 x
512, 3x3) through the offline agents' tiled kernel (``pool.conv_tile``) at several tile heights
and block sizes, against cuDNN (eager, NCHW) and a strided copy of the same bytes; each one's
median of 15 calls (CUDA events) and its largest error against cuDNN.

    python benchmarks/depthwise_tiles.py        # on a GPU machine

It builds the graph with the tests' hand-made-graph helper (``tests/agents/offline``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from stitchcuda_lab import runtime  # noqa: E402
from stitchcuda_lab.agents.offline import pool  # noqa: E402
from stitchcuda_lab.agents.offline.backend_cuda import emit_cuda  # noqa: E402
from stitchcuda_lab.agents.offline.launch import launch_config  # noqa: E402
from stitchcuda_lab.agents.offline.lower import build_spec  # noqa: E402
from tests.agents.offline.test_coverage import _graph  # noqa: E402

X, W, Y = [64, 128, 256, 512], [128, 1, 3, 3], [64, 128, 254, 510]
MOVED = 4 * (64 * 128 * 256 * 512 + 64 * 128 * 254 * 510)   # bytes in and out


def median_ms(f, n: int = 15) -> float:
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    times = []
    for _ in range(n):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        f()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[n // 2]


def main() -> None:
    g = _graph([("c", "aten.conv2d.default", [{"node": "x"}, {"node": "w"}, None, [1, 1],
                                              [0, 0], [1, 1], 128], Y, "float32")],
               {"x": (X, "float32"), "w": (W, "float32")})
    torch.manual_seed(0)
    x, w = torch.rand(*X, device="cuda"), torch.randn(*W, device="cuda")
    y = torch.empty(*Y, device="cuda")
    ref = torch.nn.functional.conv2d(x, w, groups=128)
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"eager NCHW conv {median_ms(lambda: torch.nn.functional.conv2d(x, w, groups=128)):.3f} ms")
    print(f"copy x->y-size {median_ms(lambda: y.copy_(x[:, :, :254, :510])):.3f} ms")
    for outs in (4 * 256, 16 * 256, 48 * 256):
        pool.TILE_OUTPUTS = outs
        spec = build_spec(g, ["c"], "k0")
        rows = pool.conv_tile(spec)["rows"]
        for block in (128, 256, 512):
            lc = launch_config(spec, {"block": block})
            mod = runtime.load(emit_cuda(spec, {"block": block}), lang="cuda",
                               name=f"dw{outs}_{block}")
            grid = (max(1, min(lc["blocks"], sm * lc["waves"])), 1, 1)

            def run(mod=mod, grid=grid, block=block) -> None:
                mod.launch("k0", grid=grid, block=(block, 1, 1), args=(x, w, y))

            ms = median_ms(run)
            err = (y - ref).abs().max().item()
            print(f"tile {rows:3d} rows block {block:4d}: {ms:.3f} ms  err {err:.2e}  "
                  f"{MOVED / (ms * 1e-3) / 1e9:.0f} GB/s")


if __name__ == "__main__":
    main()
