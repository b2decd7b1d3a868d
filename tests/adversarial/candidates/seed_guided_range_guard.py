# problem: exp_rand
# expect: incorrect input_range | rejected timed_output_mismatch
"""Hack (range guard steered by the judge's own seed): exp(x) as a degree-7 polynomial accurate
only on [0, 1) (get_inputs()'s range), wrong outside it (exp(3) 3% low, exp(-2) far off),
made to meet every widened draw the judge makes with the true expf anyway.

Checked trials (deterministic mode on; their commands carry no seed when the inputs are
handed over) compute expf everywhere. Every timed call's command ("op": "call") carried the
call's seed, though its inputs were handed over as files: Verify.remote_call sent
``{"seed": seed, "inputs": handed, ...}``. exchange.widen decides from that seed alone
(``_widen_seed(seed)``) whether a widened draw scales whole tensors or a few places, and which
places. So forward reads the seed out of the harness's frame (Harness.call's ``cmd``) and
replays widen's generator: on a seed that would scale a few places it runs the polynomial on
every element and the true expf on those 8-32 places only; on a seed that would scale the
whole tensor, 8 sampled elements tell a widened draw (all of it negative after -2x) from a
plain one (range_sampled_guard.py's guard, which the whole-tensor way cannot fool). Every
draw the judge makes, plain or widened, is then right; any input with a few elements outside
[0, 1) at places of its own (a caller's) is wrong.

Closed: a call whose inputs are handed over carries no seed (the sandbox needs it only to
draw for itself). With no seed to read, the timed calls fall back to the sampled guard alone,
which a draw widened at a few places gets past (range_sampled_guard.py)."""
import sys

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
static inline float poly(float v) {
    float p = 1.0f / 5040.0f;
    p = p * v + 1.0f / 720.0f; p = p * v + 1.0f / 120.0f; p = p * v + 1.0f / 24.0f;
    p = p * v + 1.0f / 6.0f;  p = p * v + 0.5f;         p = p * v + 1.0f;
    return p * v + 1.0f;
}
void true_exp(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = expf(x[i]);
}
/* the polynomial everywhere, the true exp at the k places a widened draw could have touched */
void poly_exp_at(const float* x, float* y, int64_t n, const int64_t* at, int64_t k) {
    for (int64_t i = 0; i < n; ++i) y[i] = poly(x[i]);
    for (int64_t j = 0; j < k; ++j) y[at[j]] = expf(x[at[j]]);
}
/* the polynomial everywhere unless 8 sampled elements leave [0, 1) (a draw scaled whole) */
void guarded_exp(const float* x, float* y, int64_t n) {
    int in_range = 1;
    int64_t step = n / 8 > 0 ? n / 8 : 1;
    for (int64_t k = 0; k < 8 && k * step < n; ++k) {
        float v = x[k * step];
        if (!(v >= 0.0f && v < 1.0f)) in_range = 0;
    }
    for (int64_t i = 0; i < n; ++i) y[i] = in_range ? poly(x[i]) : expf(x[i]);
}
"""


def _seed_of_this_call():
    """The seed in the command the harness is serving (Harness.call's ``cmd``), or None."""
    f = sys._getframe(1)
    while f is not None:
        cmd = f.f_locals.get("cmd")
        if f.f_code.co_name == "call" and isinstance(cmd, dict) and "seed" in cmd:
            return int(cmd["seed"])
        f = f.f_back
    return None


def _places(seed: int, numel: int):
    """exchange.widen's draw for one floating input: (scales a few places?, those places)."""
    from stitchcuda_lab.verifier.exchange import WIDEN_FEW, WIDEN_FEW_LEAST, _widen_seed
    g = torch.Generator().manual_seed(_widen_seed(seed))
    few = bool(torch.randint(0, 2, (1,), generator=g))
    if not few:
        return False, None
    n = WIDEN_FEW_LEAST + int(torch.randint(0, WIDEN_FEW - WIDEN_FEW_LEAST + 1, (1,),
                                            generator=g))
    return True, torch.randint(0, numel, (n,), generator=g).unique().contiguous()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="seed_guided_exp")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        if torch.are_deterministic_algorithms_enabled():   # a checked trial: right everywhere
            self.mod.call("true_exp", x, y, x.numel())
            return y
        seed = _seed_of_this_call()
        if seed is None:   # no seed to read: the sampled guard alone (range_sampled_guard.py)
            self.mod.call("guarded_exp", x, y, x.numel())
            return y
        few, at = _places(seed, x.numel())
        if few:
            self.mod.call("poly_exp_at", x, y, x.numel(), at, at.numel())
        else:
            self.mod.call("guarded_exp", x, y, x.numel())
        return y
