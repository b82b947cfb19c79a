"""Which parameters a freeze/unfreeze pattern names: one matcher for the api and worker.

A pattern is a regular expression matched at the start of each parameter name, as MXNet's
``collect_params(select)`` matches (``'resnet.*features'``, ``'dense0_.*'``). Patterns come
from users, so they run on the ``regex`` engine with a time limit: a pattern that
backtracks catastrophically is refused instead of holding a request thread.

>>> matching("dense0_", ["dense0_weight", "dense0_bias", "dense1_weight"])
['dense0_weight', 'dense0_bias']
"""

from __future__ import annotations

import time

import regex

MAX_PATTERN = 256
TIMEOUT_SECONDS = 0.25


class PatternError(ValueError):
    """Not a usable pattern (the message says why)."""


def matching(pattern: str, names: list[str]) -> list[str]:
    """The names ``pattern`` matches, in their order; raises :class:`PatternError`."""
    if not pattern or len(pattern) > MAX_PATTERN:
        raise PatternError(f"must be 1 to {MAX_PATTERN} characters")
    try:
        compiled = regex.compile(pattern)
    except regex.error as exc:
        raise PatternError(f"is not a regular expression: {exc}") from None
    # One time limit for the whole list: each match gets what is left of it.
    deadline = time.monotonic() + TIMEOUT_SECONDS
    chosen = []
    try:
        for name in names:
            if compiled.match(name, timeout=max(deadline - time.monotonic(), 0.001)):
                chosen.append(name)
    except TimeoutError:
        raise PatternError("takes too long to match (it backtracks); simplify it") from None
    return chosen
