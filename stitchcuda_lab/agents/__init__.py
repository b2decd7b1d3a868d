"""Agents: Planner and Coder behind one contract, offline (rules) or LLM (Claude)."""

from .base import Coder, Planner, get_agents

__all__ = ["Coder", "Planner", "get_agents"]
