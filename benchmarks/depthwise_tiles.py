"""A depthwise 2-d convolution (KernelBench level 1's conv_depthwise shapes: 64 x 128 x 256 x
512, 3x3) through the offline agents' tiled kernel (``pool.conv_tile``) at several tile heights
and block sizes, against cuDNN (eager, NCHW) and a strided copy of the same bytes; each one's
median of 15 calls (CUDA events) and its largest error against cuDNN.

    python benchmarks/depthwise_tiles.py        # on a GPU machine

Needs the tests folder on the path (it builds the graph with the tests' hand-made-graph helper).
"""
import sys, time
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
import torch
from tests.agents.offline.test_coverage import _graph
from stitchcuda_lab import runtime
from stitchcuda_lab.agents.offline import pool
from stitchcuda_lab.agents.offline.backend_cuda import emit_cuda
from stitchcuda_lab.agents.offline.lower import build_spec
from stitchcuda_lab.agents.offline.launch import launch_config
xs, ws, os_ = [64, 128, 256, 512], [128, 1, 3, 3], [64, 128, 254, 510]
g = _graph([("c", "aten.conv2d.default", [{"node": "x"}, {"node": "w"}, None, [1, 1], [0, 0], [1, 1], 128], os_, "float32")], {"x": (xs, "float32"), "w": (ws, "float32")})
torch.manual_seed(0)
x = torch.rand(*xs, device="cuda"); w = torch.randn(*ws, device="cuda"); y = torch.empty(*os_, device="cuda")
ref = torch.nn.functional.conv2d(x, w, groups=128)
sm = torch.cuda.get_device_properties(0).multi_processor_count
def bench(f, n=15):
    for _ in range(3): f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        s, e = torch.cuda.Event(True), torch.cuda.Event(True)
        s.record(); f(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    return sorted(ts)[n // 2]
print("eager NCHW conv", round(bench(lambda: torch.nn.functional.conv2d(x, w, groups=128)), 3), "ms")
print("copy x->y-size", round(bench(lambda: y.copy_(x[:, :, :254, :510])), 3), "ms")
for outs in (4 * 256, 16 * 256, 48 * 256):
    pool.TILE_OUTPUTS = outs
    spec = build_spec(g, ["c"], "k0")
    for block in (128, 256, 512):
        src = emit_cuda(spec, {"block": block})
        lc = launch_config(spec, {"block": block})
        m = runtime.load(src, lang="cuda", name=f"dw{outs}_{block}")
        grid = (max(1, min(lc["blocks"], sm * lc["waves"])), 1, 1)
        f = lambda: m.launch("k0", grid=grid, block=(block, 1, 1), args=(x, w, y))
        ms = bench(f)
        err = (y - ref).abs().max().item()
        print(f"tile {pool.conv_tile(spec)['rows']:3d} rows block {block:4d}: {ms:.3f} ms  err {err:.2e}  {8.5e9 / (ms * 1e-3) / 1e9:.0f} GB/s")
