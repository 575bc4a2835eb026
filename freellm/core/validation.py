"""Turning pydantic validation errors into one clear 400 in the client's terms.

Every surface validates its own wire with pydantic models and answers bad input with a single
``invalid_request_error`` naming up to five offending paths (``messages.0.content: Input should be a
string``). The wording, the limits and the "never anything but a 400" handling live here once; each
surface only says how to clean its own paths (dropping union/discriminator tags pydantic adds).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from freellm.errors import ClientError

__all__ = [
    "MAX_ISSUES",
    "Describe",
    "error_path",
    "friendly_message",
    "invalid_request",
    "validate_body",
    "validation_error",
]

MAX_ISSUES: Final = 5
MAX_PATH_PART: Final = 64
"""Longest path segment echoed back (a hostile key name must not blow up the error message)."""

_FRIENDLY: Final = {
    "model_type": "Input should be an object",
    "model_attributes_type": "Input should be an object",
    "dict_type": "Input should be an object",
    "list_type": "Input should be an array",
    "string_type": "Input should be a string",
    "int_type": "Input should be an integer",
    "int_from_float": "Input should be an integer",
    "float_type": "Input should be a number",
    "bool_type": "Input should be a boolean",
    "missing": "Field required",
}

Describe = Callable[[ErrorDetails], tuple[str, str]]
"""One pydantic error → (client-facing path, message)."""

M = TypeVar("M", bound=BaseModel)


def friendly_message(err: ErrorDetails) -> str:
    """pydantic's message in plain JSON terms ("object", "array"), with array minimums spelled out."""
    kind = err["type"]
    if kind == "too_short":
        n = (err.get("ctx") or {}).get("min_length", 1)
        return f"Array should have at least {n} item{'s' if n != 1 else ''}"
    return _FRIENDLY.get(kind, err["msg"])


def error_path(loc: Iterable[object]) -> str:
    return ".".join(str(p)[:MAX_PATH_PART] for p in loc) or "body"


def invalid_request(issues: list[str], param: str | None = None) -> ClientError:
    """One 400 ``invalid_request_error`` listing ``path: message`` issues (at most five)."""
    return ClientError(
        400, "Invalid request: " + ", ".join(issues[:MAX_ISSUES]), type="invalid_request_error", param=param
    )


def validation_error(errors: list[ErrorDetails], describe: Describe) -> ClientError:
    """The 400 for a failed validation; ``param`` names the first offending path."""
    issues: list[str] = []
    first: str | None = None
    for err in errors[:MAX_ISSUES]:
        path, msg = describe(err)
        first = first or path
        issues.append(f"{path}: {msg}")
    return invalid_request(issues, first)


def validate_body(model: type[M], body: object, describe: Describe) -> M:
    """Validate a decoded JSON body as ``model``. Raises :class:`ClientError` (400) and nothing else."""
    if not isinstance(body, dict):
        raise invalid_request(["body: Input should be a JSON object"])
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise validation_error(exc.errors(include_url=False), describe) from None
    except (TypeError, ValueError, RecursionError, OverflowError):
        raise invalid_request(["body: Input is nested too deeply or is not valid JSON"]) from None
