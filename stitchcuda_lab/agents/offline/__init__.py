"""Offline agents: a rule-based Planner and a template Coder (CUDA and C emitters), no network.

The Coder is a small compiler: ``rewrite`` (graph rewrites around the library) -> ``lower``
(a node group to one ``ir.KernelSpec``, with ``expand`` and ``pointwise`` for each op) ->
``passes`` -> ``codegen`` with the ``backend_c`` and ``backend_cuda`` backends, launched as
``launch`` decides; ``program`` writes the ModelNew around the kernels.
"""

from .coder import OfflineCoder
from .planner import OfflinePlanner

__all__ = ["OfflineCoder", "OfflinePlanner"]
