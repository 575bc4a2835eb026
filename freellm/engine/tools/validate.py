"""Optional strict validation of tool arguments (and structured output) against JSON schemas.

Off by default (``tools.strict_validation``). When on, an uncommitted turn whose tool-call arguments
violate the declared schema fails over ("invalid tool arguments …": the model is skipped for the request,
no cooldown). It uses the ``jsonschema`` library (the draft a schema names, else 2020-12) and **fails
open**: a schema that is itself invalid, a ``$ref`` that cannot be resolved, or arguments that are not
JSON (the pump drops those anyway) never fail a turn.

``jsonschema`` is imported on first use, so a gateway with validation off never pays for it. Compiled
validators are cached by the schema's canonical JSON (bounded), so a coding agent's fixed tool set is
compiled once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from freellm.engine.pump import ToolCall

__all__ = ["schema_problem", "tool_arguments_problem"]

_CACHE_MAX: Final = 256
_MESSAGE_MAX: Final = 200
_cache: dict[bytes, Any] = {}
_INVALID_SCHEMA: Final = object()


def _validator(schema: Mapping[str, Any]) -> Any:
    """A compiled validator for ``schema``, or None when the schema is unusable (fail open)."""
    try:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return None
    hit = _cache.get(key)
    if hit is None:
        from jsonschema import validators  # heavy import, only with validation on
        from jsonschema.exceptions import SchemaError

        try:
            cls: Any = validators.validator_for(schema, default=validators.Draft202012Validator)
            cls.check_schema(schema)
            hit = cls(schema)
        except (SchemaError, Exception):
            hit = _INVALID_SCHEMA
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        _cache[key] = hit
    return None if hit is _INVALID_SCHEMA else hit


def schema_problem(value: Any, schema: Mapping[str, Any] | None) -> str | None:
    """Why ``value`` violates ``schema`` (one line, naming the schema keyword and its path), or None
    when it conforms or cannot be checked."""
    if not schema:
        return None
    validator = _validator(schema)
    if validator is None:
        return None
    try:
        from jsonschema.exceptions import best_match

        error: Any = best_match(validator.iter_errors(value))
    except Exception:  # an unresolvable $ref, a recursion limit…: fail open
        return None
    if error is None:
        return None
    # Only the schema's own words (its keyword and path, both the caller's), never the instance: a value
    # the model wrote ("unauthorized", "rate limit") must not steer the failure classifier.
    path = "/".join(str(p) for p in error.absolute_schema_path)
    text = f"schema keyword {error.validator!s} failed at #/{path}"
    return text[:_MESSAGE_MAX]


def tool_arguments_problem(calls: list[ToolCall], schemas: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The first call whose arguments violate its tool's schema, described, or None."""
    for call in calls:
        schema = schemas.get(call.name)
        if not schema:
            continue
        try:
            value = orjson.loads(call.arguments)
        except orjson.JSONDecodeError:
            continue
        problem = schema_problem(value, schema)
        if problem:
            return f"{call.name}: {problem}"
    return None
