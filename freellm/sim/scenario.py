"""The scenario model: what one simulated upstream answer looks like, independent of any wire.

A scenario is parsed strictly (an unknown or mistyped field is an error, not a silent no-op) because a
typo in a fault script would otherwise make a reliability test pass for the wrong reason. One instance is
shared by every request that selects it, so treat it as read-only once a simulator uses it (it is left
mutable only so a CLI can tune the default scenario it just loaded, e.g. ``--chunks``).
"""

from __future__ import annotations

import enum
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal

__all__ = [
    "AUTO",
    "Scenario",
    "ScenarioError",
    "ToolCallSpec",
    "find_inline_directive",
    "parse_scenario",
    "pick_from_directive",
]


class ScenarioError(ValueError):
    """A scenario (or inline directive) does not validate; the message says which field and why."""


class _Auto(enum.Enum):
    """Sentinel type: "use the natural default" (distinct from an explicit JSON ``null``)."""

    AUTO = "auto"


AUTO: Final = _Auto.AUTO
"""``finish_reason`` left unset: ``stop``, or ``tool_calls`` when the scenario has tool calls."""

UsageMode = Literal["separate", "last", "none"]
ReasoningField = Literal["reasoning_content", "reasoning"]


@dataclass(frozen=True, slots=True)
class ToolCallSpec:
    """One tool call the simulated model makes; ``arguments`` is the JSON text streamed in fragments."""

    name: str
    arguments: str = "{}"
    id: str | None = None


@dataclass(slots=True)
class Scenario:
    """Everything a script can say about one answer. Defaults describe a healthy, instant reply.

    Content chunks are the text deltas and tool-call deltas; reasoning deltas are not counted, so
    ``cut_after: 0`` with reasoning sends the reasoning and then cuts.
    """

    text: str | None = None
    """Answer text; ``None`` = ``"Hello from {provider}/{model}."`` (or no text when there are tool calls)."""
    chunks: int = 3
    chunk_delay_ms: float = 0.0
    first_byte_delay_ms: float = 0.0
    reasoning: str | None = None
    reasoning_field: ReasoningField = "reasoning_content"
    reasoning_signature: str | None = None
    """The signature over the reasoning: Anthropic's thinking block (``None`` = ``sim-sig-…`` derived
    from the text), a ``thoughtSignature`` on Gemini's last thought part (``None`` = none); ignored by
    the OpenAI wire."""
    tool_calls: tuple[ToolCallSpec, ...] = ()
    tool_fragments: int = 3
    usage: UsageMode = "separate"
    status: int | None = None
    error_message: str | None = None
    retry_after: str | None = None
    error_body: Any = None
    inband_error: str | None = None
    inband_error_after: int = 0
    cut_after: int | None = None
    stall_after: int | None = None
    empty: bool = False
    finish_reason: str | _Auto | None = AUTO
    done: bool = True
    malformed: bool = False
    keepalive_comments: int = 0
    content_array: bool = False
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra response headers (rate-limit hints, say) sent with the answer, success or error, on every
    wire; they override the wire's own headers of the same name (``Content-Type`` included)."""

    def effective_finish_reason(self) -> str | None:
        """The finish reason to send: explicit value, or the natural one for this output."""
        if self.finish_reason is AUTO:
            return "tool_calls" if self.tool_calls and not self.empty else "stop"
        return self.finish_reason

    def answer_text(self, provider: str, model: str) -> str:
        """The text to stream, filling the default greeting when none was scripted."""
        if self.empty:
            return ""
        if self.text is not None:
            return self.text
        if self.tool_calls:
            return ""
        return f"Hello from {provider}/{model}."

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scenario:
        """Alias of :func:`parse_scenario`, for callers that prefer the class."""
        return parse_scenario(data)


# ---- strict parsing ------------------------------------------------------------------------------------

_Validator = Callable[[str, Any], Any]


def _err(name: str, why: str) -> ScenarioError:
    return ScenarioError(f"scenario field {name!r}: {why}")


def _opt_str(name: str, v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    raise _err(name, f"expected a string, got {type(v).__name__}")


def _count(minimum: int) -> _Validator:
    def check(name: str, v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise _err(name, f"expected an integer >= {minimum}, got {v!r}")
        return v

    return check


def _opt_count(name: str, v: Any) -> int | None:
    return None if v is None else _count(0)(name, v)


def _millis(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
        raise _err(name, f"expected a number of milliseconds >= 0, got {v!r}")
    return float(v)


def _flag(name: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise _err(name, f"expected true or false, got {v!r}")
    return v


def _choice(*allowed: str) -> _Validator:
    def check(name: str, v: Any) -> str:
        if v not in allowed:
            raise _err(name, f"expected one of {', '.join(allowed)}, got {v!r}")
        return str(v)

    return check


def _status(name: str, v: Any) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 100 <= v <= 599:
        raise _err(name, f"expected an HTTP status 100-599, got {v!r}")
    return v


def _retry_after(name: str, v: Any) -> str | None:
    # Seconds are commonly written as numbers; the header value is text either way.
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, int | float) and not isinstance(v, bool):
        return str(int(v)) if float(v).is_integer() else str(v)
    raise _err(name, f"expected a string or number, got {v!r}")


def _any(name: str, v: Any) -> Any:
    return v


def _finish(name: str, v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    raise _err(name, f"expected a string or null, got {v!r}")


def _tool_calls(name: str, v: Any) -> tuple[ToolCallSpec, ...]:
    if not isinstance(v, list):
        raise _err(name, "expected a list of {name, arguments, id?} objects")
    out = []
    for i, item in enumerate(v):
        where = f"{name}[{i}]"
        if not isinstance(item, dict):
            raise _err(where, "expected an object")
        unknown = set(item) - {"name", "arguments", "id"}
        if unknown:
            raise _err(where, f"unknown keys {sorted(unknown)} (allowed: name, arguments, id)")
        tool_name = item.get("name")
        if not isinstance(tool_name, str) or not tool_name:
            raise _err(where, "'name' must be a non-empty string")
        args = item.get("arguments", "{}")
        if isinstance(args, dict | list):
            args = json.dumps(args)  # friendlier to write; streamed as the JSON text anyway
        if not isinstance(args, str):
            raise _err(where, "'arguments' must be a JSON string (or an object)")
        call_id = item.get("id")
        if call_id is not None and not isinstance(call_id, str):
            raise _err(where, "'id' must be a string")
        out.append(ToolCallSpec(name=tool_name, arguments=args, id=call_id))
    return tuple(out)


# RFC 9110 field names are tokens; a value may not contain CR, LF or NUL (a header injection, not a fault).
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FORBIDDEN_VALUE_CHARS: Final = frozenset("\r\n\x00")
# Headers the simulator must own: the framing of the body and the id tests use to find the request.
_RESERVED_HEADERS: Final = frozenset(
    {"content-length", "transfer-encoding", "connection", "x-sim-request-id"}
)


def _header_value(where: str, v: Any) -> str:
    if isinstance(v, str):
        text = v
    elif isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
        # Rate-limit counts are naturally written as numbers; a header value is text either way.
        text = str(int(v)) if float(v).is_integer() else str(v)
    else:
        raise _err(where, f"expected a string or number, got {v!r}")
    if _FORBIDDEN_VALUE_CHARS.intersection(text):
        raise _err(where, "a header value may not contain CR, LF or NUL")
    return text


def _headers(name: str, v: Any) -> dict[str, str]:
    if not isinstance(v, Mapping):
        raise _err(name, f"expected an object of header name -> value, got {v!r}")
    out: dict[str, str] = {}
    seen: dict[str, str] = {}
    for header, value in v.items():
        if not isinstance(header, str) or not _TOKEN.fullmatch(header):
            raise _err(name, f"{header!r} is not a valid header name (an RFC 9110 token)")
        lowered = header.lower()
        if lowered in _RESERVED_HEADERS:
            raise _err(name, f"{header!r} is set by the simulator itself and cannot be scripted")
        if lowered in seen:
            # Header names are case-insensitive: two spellings would make the one sent a coin toss.
            raise _err(name, f"{seen[lowered]!r} and {header!r} name the same header")
        seen[lowered] = header
        out[header] = _header_value(f"{name}.{header}", value)
    return out


_VALIDATORS: Final[dict[str, _Validator]] = {
    "text": _opt_str,
    "chunks": _count(1),
    "chunk_delay_ms": _millis,
    "first_byte_delay_ms": _millis,
    "reasoning": _opt_str,
    "reasoning_field": _choice("reasoning_content", "reasoning"),
    "reasoning_signature": _opt_str,
    "tool_calls": _tool_calls,
    "tool_fragments": _count(1),
    "usage": _choice("separate", "last", "none"),
    "status": _status,
    "error_message": _opt_str,
    "retry_after": _retry_after,
    "error_body": _any,
    "inband_error": _opt_str,
    "inband_error_after": _count(0),
    "cut_after": _opt_count,
    "stall_after": _opt_count,
    "empty": _flag,
    "finish_reason": _finish,
    "done": _flag,
    "malformed": _flag,
    "keepalive_comments": _count(0),
    "content_array": _flag,
    "headers": _headers,
}

SCENARIO_FIELDS: Final = tuple(_VALIDATORS)
assert set(SCENARIO_FIELDS) == {f.name for f in fields(Scenario)}, "validator table out of sync"


def parse_scenario(data: Mapping[str, Any] | Scenario | None) -> Scenario:
    """Validate a JSON object into a :class:`Scenario`; ``None`` or ``{}`` gives the healthy default."""
    if isinstance(data, Scenario):
        return data
    if data is None:
        return Scenario()
    if not isinstance(data, Mapping):
        raise ScenarioError(f"a scenario must be a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(_VALIDATORS))
    if unknown:
        raise ScenarioError(
            f"unknown scenario field(s) {unknown}; valid fields: {', '.join(SCENARIO_FIELDS)}"
        )
    values = {name: _VALIDATORS[name](name, v) for name, v in data.items()}
    if values.get("status") is None:
        orphans = [k for k in ("error_message", "retry_after", "error_body") if values.get(k) is not None]
        if orphans:
            raise ScenarioError(f"{', '.join(orphans)} only apply with 'status'")
    if values.get("retry_after") is not None and any(
        h.lower() == "retry-after" for h in values.get("headers", ())
    ):
        raise ScenarioError("give Retry-After either as 'retry_after' or in 'headers', not both")
    if "inband_error_after" in values and values.get("inband_error") is None:
        raise ScenarioError("'inband_error_after' only applies with 'inband_error'")
    return Scenario(**values)


# ---- inline directive ----------------------------------------------------------------------------------

_DIRECTIVE_OPEN: Final = "[[sim:"


def find_inline_directive(text: str) -> dict[str, Any] | None:
    """Extract the ``[[sim:{...}]]`` object from a user message, or ``None`` when there is none.

    The JSON may itself contain ``]]``, so it is decoded with ``raw_decode`` rather than a regex.
    """
    start = text.find(_DIRECTIVE_OPEN)
    if start < 0:
        return None
    pos = start + len(_DIRECTIVE_OPEN)
    try:
        obj, end = json.JSONDecoder().raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"inline [[sim:...]] directive is not valid JSON: {exc.msg}") from exc
    if not text.startswith("]]", end):
        raise ScenarioError("inline [[sim:...]] directive must end with ']]' right after the JSON object")
    if not isinstance(obj, dict):
        raise ScenarioError("inline [[sim:...]] directive must be a JSON object keyed by provider")
    return obj


def pick_from_directive(directive: Mapping[str, Any], provider: str, model: str) -> Scenario | None:
    """Choose this provider's scenario from a directive: ``provider/model``, then ``provider``, then ``*``."""
    for key in (f"{provider}/{model}", provider, "*"):
        if key in directive:
            return parse_scenario(directive[key])
    return None
