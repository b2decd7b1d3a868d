"""Credentials inside URLs, found and replaced before anything is written. A leaf: imports nothing.

A base URL such as ``https://user:s3cret@proxy.example/v1?api_key=abc`` carries a password in its
userinfo part and a key in its query; both are replaced wherever text leaves the process (stderr,
``--json``, ``events.jsonl``, exception messages), and ``has_credentials`` tells the Verifier's
environment builder which variables to drop.

>>> redact_urls("cannot reach http://bob:hunter2@127.0.0.1:8000/v1?key=k1&model=m")
'cannot reach http://[redacted]@127.0.0.1:8000/v1?key=[redacted]&model=m'
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

T = TypeVar("T", str, bytes)

REDACTED = "[redacted]"

# scheme://userinfo@ : userinfo is everything up to the last '@' before the host's path
_USERINFO = r"([A-Za-z][A-Za-z0-9+.\-]*://)([^/@\s'\"<>]+)@"
# query or fragment parameters whose names say they are credentials
_PARAM = (r"([?&#;](?:[A-Za-z0-9_\-]*(?:key|token|secret|password|passwd|pwd|signature|sig"
          r"|auth|credential)[A-Za-z0-9_\-]*)=)([^&#\s'\"<>]+)")

_PATTERNS: dict[type, tuple[re.Pattern[Any], re.Pattern[Any]]] = {
    str: (re.compile(_USERINFO), re.compile(_PARAM, re.I)),
    bytes: (re.compile(_USERINFO.encode()), re.compile(_PARAM.encode(), re.I)),
}


def redact_urls(text: T) -> T:
    """``text`` (str or bytes) with the credentials of every URL in it replaced."""
    userinfo, param = _PATTERNS[type(text)]
    mark, at = (REDACTED, "@") if isinstance(text, str) else (REDACTED.encode(), b"@")
    text = userinfo.sub(lambda m: m.group(1) + mark + at, text)
    return param.sub(lambda m: m.group(1) + mark, text)


def has_credentials(value: str) -> bool:
    """True when ``value`` holds a URL with a user/password or a credential parameter."""
    return redact_urls(value) != value
