"""Every exception stitchcuda-lab raises on purpose.

StitchError                     base; ``str(e)`` is a message a person can act on
 +-- UsageError                 bad input or missing configuration (CLI exit code 2)
 |    +-- ProblemError          a problem file/cell breaks the KernelBench contract
 |    +-- PlanError             a plan or plan edit that cannot be applied
 |    +-- ConfigError           a setting or option with a bad value, a missing API key
 |    +-- SessionNotFound       no session with that id under the sessions root
 |    +-- InvalidEvent          an event the loop cannot take in its current phase
 +-- BuildError                 generated code did not compile (carries the compiler log)
 +-- WorkerError                the isolated worker died, hung or could not start
 +-- ServiceError               an external service (LLM API) failed (CLI exit code 1)
 |    +-- ReplyError            the model's replies stayed unusable after every recovery
 +-- BudgetExceeded             the session reached its --max-cost / --max-tokens cap
 +-- StoreError                 a session folder or cache entry cannot be read or written

Messages say what is wrong and what to do next; ``hint`` holds the second half when the
raiser has one, so the CLI and the notebook panel can show it apart.
"""

from __future__ import annotations


class StitchError(Exception):
    """Base of every deliberate error. ``hint`` says what to do about it."""

    def __init__(self, message: str, *, hint: str | None = None):
        self.message = message
        self.hint = hint
        super().__init__(message if not hint else f"{message}\n  hint: {hint}")

    def one_line(self) -> str:
        """Message and hint on one line: the CLI's error line, a bench row's error."""
        line = " ".join(str(self.message).split())
        if self.hint:
            line += f" (hint: {' '.join(self.hint.split())})"
        return line


class UsageError(StitchError):
    """The user's input or configuration is wrong; nothing internal failed."""


class ProblemError(UsageError):
    """A problem breaks the KernelBench contract (Model, get_inputs, get_init_inputs).

    ``line`` is the 1-based source line when one is known (syntax errors, raising code).
    """

    def __init__(self, message: str, *, hint: str | None = None, line: int | None = None,
                 source_name: str | None = None):
        self.line = line
        self.source_name = source_name
        where = ""
        if source_name and line:
            where = f"{source_name}:{line}: "
        elif line:
            where = f"line {line}: "
        super().__init__(where + message, hint=hint)


class PlanError(UsageError):
    """A plan edit that cannot be applied (unknown task, bad order, bad field)."""


class ConfigError(UsageError):
    """A setting has a bad value, or something required (an API key) is missing."""


class SessionNotFound(UsageError):
    """No session with that id exists under the sessions root."""


class InvalidEvent(UsageError):
    """The loop cannot take this event in its current phase."""


class BuildError(StitchError):
    """Generated code failed to compile; ``log`` is the compiler's own output."""

    def __init__(self, message: str, *, log: str = "", hint: str | None = None):
        self.log = log
        super().__init__(message, hint=hint)


class WorkerError(StitchError):
    """The isolated worker process crashed, timed out or could not be started."""


class ServiceError(StitchError):
    """An external service (the LLM API) failed: rate limit, overload, timeout, network."""


class ReplayExhausted(ServiceError):
    """A replayed session reached the end of its recording: going on needs a live agent."""


class StoreError(StitchError):
    """A session folder or a cache entry is unreadable or cannot be written."""


class ReplyError(ServiceError):
    """The model answered, but after retries and repairs no reply could be used.

    ``kind`` says how the last one failed: ``invalid`` (schema or semantic checks), ``repeated``
    (a candidate already verified), ``truncated`` (cut off at the largest budget) or
    ``refused``. The loop records the attempt as failed and carries on with the next iteration.
    """

    def __init__(self, message: str, *, kind: str, hint: str | None = None):
        self.kind = kind
        super().__init__(message, hint=hint)


class BudgetExceeded(StitchError):
    """The session spent what ``max_cost`` or ``max_total_tokens`` allows; no request was sent.

    The session stays resumable: raise the cap (``resume --max-cost``) to carry it on.
    """
