"""Naming what went wrong inside a candidate's process: exception -> (reason name, detail)."""

from __future__ import annotations

import traceback


class Plain(Exception):
    """A failure that already has its name (``out_of_memory`` while drawing inputs, say)."""

    def __init__(self, name: str, detail: str):
        self.name, self.detail = name, detail
        super().__init__(detail)


def says_out_of_memory(text: str) -> bool:
    """Whether an error's line (``Type: message``, the type maybe qualified, as a
    traceback's last line has it) is running out of memory."""
    kind = text.split(":", 1)[0].strip().rsplit(".", 1)[-1]
    low = text.lower()
    return kind in ("OutOfMemoryError", "MemoryError") or "out of memory" in low \
        or "can't allocate memory" in low


def classify_exception(e: BaseException) -> tuple[str, str]:
    if isinstance(e, Plain):
        return e.name, e.detail
    text = f"{type(e).__name__}: {e}"
    low = text.lower()
    if says_out_of_memory(text) or isinstance(e, MemoryError):
        return "out_of_memory", one_line(text)
    if "cuda error" in low or "cuda_error" in low or "illegal memory access" in low \
            or "cudaerror" in low:
        return "cuda_error", one_line(text)
    return "exception", (candidate_line(e) + one_line(text))


def build_failure(e: BaseException) -> bool:
    """torch.utils.cpp_extension's way of saying a load_inline build failed."""
    return "Error building extension" in str(e)


def candidate_line(e: BaseException) -> str:
    for fr in reversed(traceback.extract_tb(e.__traceback__)):
        if fr.filename.endswith("candidate.py"):
            return f"candidate.py:{fr.lineno}: "
    return ""


def one_line(s: str, n: int = 400) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 3] + "..."
