"""What steering changed beyond the trainer's own state file, saved with each checkpoint.

Plain JSON (meta.json's ``steering``): nothing is pickled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SteeringState:
    """``applied``: every command id applied on this branch so far (a resume replays
    exactly the applied commands not listed; a rollback abandons them); ``frozen``:
    parameter name -> its grad_req before it was frozen; ``schedule``: the replacement
    schedule ``{type, params, offset}`` (None: the spec's); ``rules``: the rules a
    set_rules put in (None: the spec's); ``rule_states``: each rule's counters."""

    applied: list[str] = field(default_factory=list)
    frozen: dict[str, str] = field(default_factory=dict)
    schedule: dict[str, Any] | None = None
    rules: list[dict[str, Any]] | None = None
    rule_states: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"applied": list(self.applied), "frozen": dict(self.frozen),
                "schedule": self.schedule, "rules": self.rules,
                "rule_states": self.rule_states}

    @classmethod
    def from_json(cls, body: dict[str, Any] | None) -> SteeringState:
        body = body or {}
        return cls(applied=[str(i) for i in body.get("applied", [])],
                   frozen={str(k): str(v) for k, v in body.get("frozen", {}).items()},
                   schedule=body.get("schedule"), rules=body.get("rules"),
                   rule_states=dict(body.get("rule_states", {})))
