"""What a model's tokens cost: USD per million tokens, by model family, and one exchange's cost.

The table holds the published per-family rates (input, output); prompt-cache writes cost 1.25x
the input rate (five-minute cache) and cache reads 0.1x. A Claude name is priced wherever it is
served (a proxy on this machine still bills); another model served on this machine (a local
vLLM, Ollama, llama.cpp) costs nothing per token; anything else is unpriced (its tokens are
still counted) unless ``Settings.price`` / ``STITCH_PRICE`` gives the rates.

>>> p = price_for("claude-sonnet-4-5")
>>> round(p.cost({"input_tokens": 1_000_000, "output_tokens": 100_000}), 2)
4.5
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ...errors import ConfigError

CACHE_WRITE = 1.25    # x input rate, five-minute cache writes
CACHE_READ = 0.10     # x input rate

# (pattern on the model name, input, output) in USD per million tokens, first match wins.
FAMILIES: tuple[tuple[str, float, float], ...] = (
    (r"^claude-opus-4(-0|-1|-20250514|-1-20250805)?$", 15.0, 75.0),
    (r"^claude-opus-4-[5-9]", 5.0, 25.0),
    (r"^claude-sonnet-", 3.0, 15.0),
    (r"^claude-3-7-sonnet|^claude-3-5-sonnet", 3.0, 15.0),
    (r"^claude-haiku-4-5", 1.0, 5.0),
    (r"^claude-3-5-haiku", 0.8, 4.0),
    (r"^claude-3-haiku", 0.25, 1.25),
)


@dataclass(frozen=True)
class Price:
    """USD per million tokens for each kind of token, and where the rates come from."""

    input: float
    output: float
    cache_write: float
    cache_read: float
    basis: str

    def cost(self, usage: dict[str, Any]) -> float:
        """USD for one exchange's usage (Messages API field names)."""
        n = usage.get
        return ((n("input_tokens", 0) or 0) * self.input
                + (n("output_tokens", 0) or 0) * self.output
                + (n("cache_creation_input_tokens", 0) or 0) * self.cache_write
                + (n("cache_read_input_tokens", 0) or 0) * self.cache_read) / 1e6


def price_for(model: str, *, base_url: str | None = None,
              override: str | None = None) -> Price | None:
    """The rates for ``model``: ``override`` first, then a local server (free), then the table.

    ``override`` is ``"in,out"`` or ``"in,out,cache_write,cache_read"`` in USD per million.
    """
    if override:
        return parse_price(override)
    for pattern, rate_in, rate_out in FAMILIES:
        if re.search(pattern, model):
            return Price(rate_in, rate_out, rate_in * CACHE_WRITE, rate_in * CACHE_READ,
                         f"published rate for {pattern.strip('^$')}")
    if base_url and is_local(base_url) and not model.startswith("claude"):
        return Price(0.0, 0.0, 0.0, 0.0, f"a server on this machine ({urlsplit(base_url).hostname})")
    return None


def parse_price(text: str) -> Price:
    try:
        parts = [float(x) for x in text.split(",")]
    except ValueError:
        parts = []
    if len(parts) not in (2, 4) or any(x < 0 for x in parts):
        raise ConfigError(f"price {text!r} is not 'in,out' or 'in,out,cache_write,cache_read'",
                          hint="USD per million tokens, e.g. STITCH_PRICE=3,15")
    if len(parts) == 2:
        parts += [parts[0] * CACHE_WRITE, parts[0] * CACHE_READ]
    return Price(parts[0], parts[1], parts[2], parts[3], basis="the price setting (STITCH_PRICE)")


def is_local(url: str) -> bool:
    """True for a server on this machine (loopback address or ``localhost``)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
