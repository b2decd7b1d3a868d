"""Offline agents: a rule-based Planner and a template Coder (CUDA and C emitters), no network."""

from .coder import OfflineCoder
from .planner import OfflinePlanner

__all__ = ["OfflineCoder", "OfflinePlanner"]
