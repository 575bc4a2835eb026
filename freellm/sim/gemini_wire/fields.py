"""How the Gemini API spells request fields and words its 400s, shared by the two request checkers.

Gemini's proto-JSON parser accepts a field under its camelCase name and its original snake_case name
(``systemInstruction`` / ``system_instruction``), and reports a bad request in one of two styles: an
unknown field (``Invalid JSON payload received. Unknown name "x" …``) or a failed constraint
(``* GenerateContentRequest.<path>: <why>``). :mod:`.request_checks` and :mod:`.config_checks` build every
error and read every field through these helpers, so both spellings are honoured and the wording stays
Google's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from freellm.sim.wire import WireRequestError

__all__ = ["FUNCTION_NAME", "field_of", "has_field", "invalid", "unknown_field"]

FUNCTION_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$")
"""A valid function name (declarations, ``functionCall`` and ``functionResponse`` parts)."""


def unknown_field(name: str, where: str | None = None) -> WireRequestError:
    """The error for a field the request message does not have (``where`` is the enclosing path)."""
    at = f" at '{where}'" if where else ""
    return WireRequestError(f'Invalid JSON payload received. Unknown name "{name}"{at}: Cannot find field.')


def invalid(path: str, why: str) -> WireRequestError:
    """The error for a field that is present but breaks a constraint."""
    return WireRequestError(f"* GenerateContentRequest.{path}: {why}")


def field_of(obj: Mapping[str, Any], camel: str, snake: str) -> Any:
    """The value of a field under either spelling (camelCase wins), or None."""
    return obj[camel] if camel in obj else obj.get(snake)


def has_field(part: Any, camel: str) -> bool:
    """Whether ``part`` is an object carrying the field under either spelling."""
    if not isinstance(part, dict):
        return False
    snake = re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel)
    return camel in part or snake in part
