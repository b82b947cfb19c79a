"""A job spec's ``rules:``: well-known policies the worker evaluates for the user.

Each rule watches a metric the job reports (``train_<name>`` / ``val_<name>``, as the
metric points are named) at the end of every validation, and, when it fires, issues a
step-boundary command like a user's (audited ``by: rule <name>``, confirmed with its
step). The policies follow Keras's callbacks of the same names:

- ``reduce_on_plateau``: multiply the learning rate by ``factor`` when ``metric`` has not
  improved by more than ``min_delta`` for ``patience`` validations (never below
  ``min_lr``), then wait ``cooldown`` validations before counting again;
- ``early_stop``: end the job (succeeded) when ``metric`` has not improved by more than
  ``min_delta`` for ``patience`` validations;
- ``guard``: pause the job (it checkpoints) when ``metric`` is NaN or infinite, or when it
  grew to more than ``factor`` times its smallest value within the last ``within_steps``
  steps; ``every_steps`` > 0 also checks the running training value every that many steps.

>>> parse_rules([{"type": "early_stop", "metric": "val_accuracy", "patience": 3}])[0].mode
'auto'
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    model_validator,
)

MAX_RULES = 16
RuleName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]
MetricName = Annotated[str, Field(min_length=1, max_length=128,
                                  pattern=r"^(train|val)_[A-Za-z0-9_.-]+$")]
Mode = Literal["min", "max", "auto"]
# "auto" reads these as "higher is better" (Keras looks for "acc" only).
_HIGHER_IS_BETTER = ("acc", "f1", "mcc", "auc", "precision", "recall")


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str  # each rule narrows it to its own literal name
    name: RuleName | None = Field(default=None, description="unique among the job's rules; "
                                  "default: the rule's type")

    @property
    def rule_name(self) -> str:
        return self.name or self.type


class _Watching(_Rule):
    metric: MetricName = "val_loss"
    mode: Mode = Field(default="auto", description="min: lower is better; max: higher; "
                       "auto: max for accuracy-like names (acc, f1, mcc, auc, precision, "
                       "recall), min otherwise")

    def higher_is_better(self) -> bool:
        if self.mode != "auto":
            return self.mode == "max"
        return any(word in self.metric for word in _HIGHER_IS_BETTER)


class ReduceOnPlateau(_Watching):
    type: Literal["reduce_on_plateau"]
    factor: float = Field(default=0.1, gt=0.0, lt=1.0)
    patience: int = Field(default=10, ge=0, le=100_000)
    min_delta: float = Field(default=1e-4, ge=0.0)
    cooldown: int = Field(default=0, ge=0, le=100_000)
    min_lr: float = Field(default=0.0, ge=0.0)


class EarlyStop(_Watching):
    type: Literal["early_stop"]
    patience: int = Field(default=0, ge=0, le=100_000)
    min_delta: float = Field(default=0.0, ge=0.0)


class Guard(_Rule):
    type: Literal["guard"]
    metric: MetricName = "train_loss"
    factor: float = Field(default=10.0, gt=1.0, description="pause when the metric grows "
                          "past factor x its smallest value within within_steps")
    within_steps: int = Field(default=1000, ge=1, le=10**9)
    every_steps: int = Field(default=0, ge=0, le=10**9, description="also check the "
                             "running training value every N steps (0: at validations only)")


_TAGS = {"reduce_on_plateau": "ReduceOnPlateau", "early_stop": "EarlyStop", "guard": "Guard"}


def _rule_tag(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return _TAGS.get(kind) if isinstance(kind, str) else None


# Tags are capitalised: api.errors leaves them out of a field's name (``rules.0.factor``).
Rule = Annotated[
    Annotated[ReduceOnPlateau, Tag("ReduceOnPlateau")] | Annotated[EarlyStop, Tag("EarlyStop")]
    | Annotated[Guard, Tag("Guard")],
    Discriminator(_rule_tag, custom_error_type="rule_type",
                  custom_error_message="type must be one of " + ", ".join(_TAGS)),
]


class RuleList(BaseModel):
    """A job's rules, with unique names (the audit trail says which one fired)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    rules: list[Rule] = Field(default_factory=list, max_length=MAX_RULES)

    @model_validator(mode="after")
    def _unique_names(self) -> RuleList:
        seen: set[str] = set()
        for rule in self.rules:
            if rule.rule_name in seen:
                raise ValueError(f"two rules are named {rule.rule_name!r}; give each a "
                                 "unique name")
            seen.add(rule.rule_name)
        return self


_RULES: TypeAdapter[RuleList] = TypeAdapter(RuleList)


def parse_rules(rules: list[Any]) -> list[Rule]:
    """Validated rules (raises pydantic.ValidationError naming the field)."""
    return list(_RULES.validate_python({"rules": rules}).rules)


def dump_rules(rules: list[Rule]) -> list[dict[str, Any]]:
    return [rule.model_dump(mode="json") for rule in rules]
