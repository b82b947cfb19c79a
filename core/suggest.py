""""Did you mean ...?" for a misspelt name, from the names the contract knows.

>>> did_you_mean("unit", ["units", "activation", "use_bias"])
'did you mean units?'
>>> did_you_mean("colour", ["units", "activation"])
'known: activation, units'
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# How many known names to list when none is close (the rest are in docs/job-spec.md).
MAX_LISTED = 12


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name ``name`` most likely misspells, if any is close."""
    names = sorted(set(known))
    lowered = {n.lower(): n for n in names}
    if name.lower() in lowered:  # a case slip: Units -> units
        return lowered[name.lower()]
    found = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``did you mean X?`` when one known name is close, else the known names."""
    names = sorted(set(known))
    match = closest(name, names)
    if match is not None:
        return f"did you mean {match}?"
    listed = ", ".join(names[:MAX_LISTED]) + (", ..." if len(names) > MAX_LISTED else "")
    return f"known: {listed}" if names else "none are known here"
