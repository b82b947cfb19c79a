"""An unknown field in a request body, explained from the contract's own field names.

A misspelt field (``unit: 128`` in a Dense layer) makes pydantic report two errors: the
real one, ``unit`` is not permitted, and its consequence, ``units`` is required, which
comes first. This module finds the model at the unknown field's location (following
lists, dicts and unions by the tags in the location) and says which of its fields was
meant; the caller leads with that and drops the consequence.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, Tag

from core.suggest import closest, did_you_mean

Location = Sequence[str | int]


def _unwrap(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    """``Annotated[T, *meta]`` -> ``(T, meta)`` (nested ones flattened)."""
    metadata: tuple[Any, ...] = ()
    while get_origin(annotation) is Annotated:
        args = get_args(annotation)
        annotation, metadata = args[0], metadata + tuple(args[1:])
    return annotation, metadata


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _tag_matches(member: Any, metadata: tuple[Any, ...], part: str) -> bool:
    """Whether ``part`` of a location is the tag pydantic gave this union member: its
    ``Tag``, its class name, or the value of its literal discriminator field."""
    if any(isinstance(m, Tag) and m.tag == part for m in metadata):
        return True
    if not _is_model(member):
        return False
    if member.__name__ == part:
        return True
    for field in member.model_fields.values():
        inner, _ = _unwrap(field.annotation)
        if get_origin(inner) is Literal and part in get_args(inner):
            return True
    return False


def _step(annotation: Any, part: str | int) -> Any:
    """The type one location part below ``annotation`` (None: cannot tell)."""
    annotation, _ = _unwrap(annotation)
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        members = [_unwrap(a) for a in get_args(annotation) if a is not type(None)]
        if isinstance(part, str):
            for member, metadata in members:
                if _tag_matches(member, metadata, part):
                    return member
        if len(members) == 1:
            return _step(members[0][0], part)
        return None
    if isinstance(part, str) and "[" in part:  # a validator's tag: function-after[...]
        return annotation
    if isinstance(part, int):
        if origin in (list, tuple, set, frozenset) or (
                isinstance(origin, type) and issubclass(origin, Sequence)):
            args = get_args(annotation)
            return args[0] if args else None
        return None
    if isinstance(origin, type) and issubclass(origin, Mapping):
        args = get_args(annotation)
        return args[1] if len(args) == 2 else None
    if _is_model(annotation):
        for name, field in annotation.model_fields.items():
            if part in (name, field.alias):
                return field.annotation
    return None


def known_fields(body_type: Any, location: Location) -> list[str] | None:
    """The field names of the model that holds the field at ``location`` (below the
    body), or None where the location does not lead to a model."""
    current = body_type
    for part in location[:-1]:
        current = _step(current, part)
        if current is None:
            return None
    current, _ = _unwrap(current)
    if not _is_model(current):
        return None
    return [field.alias or name for name, field in current.model_fields.items()]


def explain(body_type: Any, location: Location) -> tuple[str, str | None]:
    """``(message, the field meant or None)`` for the unknown field at ``location``."""
    known = known_fields(body_type, location)
    name = str(location[-1]) if location else ""
    if not known:
        return "unknown field", None
    return f"unknown field; {did_you_mean(name, known)}", closest(name, known)
