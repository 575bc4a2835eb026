"""Inline tool-call rescue: a tool call written as text, in a model's own dialect, becomes a real call.

Four dialects are recognised (spec/core.md §5):

1. **Kimi / DeepSeek sections** — ``<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0
   <|tool_call_argument_begin|>{…}<|tool_call_end|><|tool_calls_section_end|>`` (Kimi K2), and
   DeepSeek's ``<|tool_calls_begin|><|tool_call_begin|>function<|tool_sep|>NAME\n```json\n{…}\n```
   <|tool_call_end|>`` (also ``NAME<|tool_sep|>{…}``), which DeepSeek writes with full-width bars
   (U+FF5C) and U+2581 for the underscores.
2. **Function tags** — ``<function=NAME{…}</function>`` or ``<function=NAME>{…}</function>``, and
   Qwen3-Coder's ``<function=NAME><parameter=KEY>VALUE</parameter>…</function>``.
3. **Hermes / Qwen XML** — ``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` (``parameters`` is
   accepted too, and a ``<function=…>`` body).
4. **Bare JSON** — the *entire* answer is ``{"name": <declared tool>, "arguments": …}``, optionally in a
   `````json`` fence. JSON that does not name a declared tool is an ordinary answer.

Hermes blocks are parsed before function tags (a Qwen3-Coder ``<tool_call>`` wraps one). A rescued call
must name a tool the request declared. Markup that is detected but cannot be parsed — broken JSON, an
unclosed tag, array-shaped arguments, an undeclared tool — makes the whole rescue fail
(``calls=None``): the turn is dead and fails over, and the markup never reaches the client.

JSON is delimited by brace matching that respects strings, then decoded with orjson.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from freellm.engine.dialects import HEAD_MATCH, bare_json_head, contains_marker
from freellm.engine.pump import Rescue, ToolCall, new_call_id

__all__ = ["json_end", "rescue_inline_tool_calls"]

Schemas = Mapping[str, Mapping[str, Any]]
"""Declared tool name → its parameters schema."""

# DeepSeek's special tokens use U+FF5C (full-width bar) and U+2581 (lower block, SentencePiece's space).
# Both map to one ASCII character, so offsets in the translated copy are offsets in the original text.
_ASCII_TOKENS: Final = str.maketrans({"\uff5c": "|", "\u2581": "_"})

_CALL_BEGIN: Final = "<|tool_call_begin|>"
_CALL_END: Final = "<|tool_call_end|>"
_ARG_BEGIN: Final = "<|tool_call_argument_begin|>"
_SEP: Final = "<|tool_sep|>"
_SECTION_TOKENS: Final = (
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_calls_begin|>",
    "<|tool_calls_end|>",
)
_FN_OPEN: Final = "<function="
_FN_CLOSE: Final = "</function>"
_PARAM_OPEN: Final = "<parameter="
_PARAM_CLOSE: Final = "</parameter>"
_TC_OPEN: Final = "<tool_call>"
_TC_CLOSE: Final = "</tool_call>"
_WS: Final = " \t\r\n"


class _Unparseable(Exception):
    """Markup was found but cannot become a call; the message says why."""


def rescue_inline_tool_calls(text: str, schemas: Schemas) -> Rescue:
    """Parse ``text`` for inline tool calls naming tools in ``schemas``.

    Returns ``Rescue(calls=[…], clean_text)`` for rescued calls (``clean_text`` is what surrounds the
    markup, stripped), ``Rescue(calls=None, …, reason)`` for markup that cannot be parsed, and
    ``Rescue(calls=[], text)`` when there is nothing to rescue. With no declared tools nothing is
    rescued, but markup is still reported as unparseable so it never leaks.
    """
    try:
        calls: list[ToolCall] = []
        clean = text
        if contains_marker(text):
            if not schemas:
                raise _Unparseable("no tools were declared")
            clean = _sections(clean, schemas, calls)
            clean = _hermes(clean, schemas, calls)
            clean = _function_tags(clean, schemas, calls)
            if contains_marker(clean):
                raise _Unparseable("stray tool-call markup")
        if not calls:
            bare = _bare_json(text, schemas)
            if bare is None:
                return Rescue(calls=[], clean_text=text)
            return Rescue(calls=[bare], clean_text="")
        return Rescue(calls=calls, clean_text=clean.strip())
    except _Unparseable as exc:
        return Rescue(calls=None, clean_text=text, reason=str(exc))


# ---- JSON helpers -----------------------------------------------------------------------------------


def json_end(text: str, start: int) -> int:
    """Index just past the JSON object or array opening at ``text[start]``; -1 if it never closes.

    Brackets inside strings (and escaped quotes) are skipped. Mismatched brackets are not checked here:
    the decoder rejects them.
    """
    depth = 0
    in_str = False
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


def _loads(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise _Unparseable("arguments are not valid JSON") from exc


def _unfence(text: str) -> str:
    """The inside of a ```` ``` ```` fence (with an optional language tag), or the text stripped."""
    s = text.strip()
    if s.startswith("```") and s.endswith("```") and len(s) >= 6:
        inner = s[3:-3]
        nl = inner.find("\n")
        head = inner[:nl] if nl >= 0 else ""
        if nl >= 0 and (not head.strip() or head.strip().isalnum()):
            inner = inner[nl + 1 :]
        elif inner[:4].lower() == "json":
            inner = inner[4:]
        return inner.strip()
    return s


def _object_text(text: str, what: str) -> dict[str, Any]:
    """Decode ``text`` (optionally fenced) as exactly one JSON object."""
    s = _unfence(text)
    if not s:
        return {}
    if not s.startswith("{"):
        raise _Unparseable(f"{what} are not a JSON object")
    end = json_end(s, 0)
    if end < 0:
        raise _Unparseable(f"{what}: unterminated JSON")
    if s[end:].strip():
        raise _Unparseable(f"{what}: text after the JSON")
    value = _loads(s[:end])
    if not isinstance(value, dict):
        raise _Unparseable(f"{what} are not a JSON object")
    return value


def _call(name: str, arguments: Any, schemas: Schemas) -> ToolCall:
    name = name.strip()
    if name not in schemas:
        raise _Unparseable("a call names a tool the request did not declare")  # never quote model text
    if arguments is None:
        arguments = {}
    elif isinstance(arguments, str):
        arguments = _object_text(arguments, "arguments") if arguments.strip() else {}
    if not isinstance(arguments, dict):
        raise _Unparseable("arguments are not a JSON object")
    return ToolCall(id=new_call_id(), name=name, arguments=orjson.dumps(arguments).decode())


# ---- 1. Kimi / DeepSeek sections --------------------------------------------------------------------


def _sections(text: str, schemas: Schemas, calls: list[ToolCall]) -> str:
    norm = text.translate(_ASCII_TOKENS)
    if _CALL_BEGIN not in norm:
        if any(tok in norm for tok in _SECTION_TOKENS):
            raise _Unparseable("tool-call section without a call")
        return text
    spans: list[tuple[int, int]] = []
    pos = 0
    while (begin := norm.find(_CALL_BEGIN, pos)) >= 0:
        body_start = begin + len(_CALL_BEGIN)
        end = norm.find(_CALL_END, body_start)
        nxt = norm.find(_CALL_BEGIN, body_start)
        if end < 0 or (0 <= nxt < end):
            raise _Unparseable("tool call without its end token")
        calls.append(_section_call(text[body_start:end], norm[body_start:end], schemas))
        pos = end + len(_CALL_END)
        spans.append((begin, pos))
    for tok in _SECTION_TOKENS:
        at = 0
        while (at := norm.find(tok, at)) >= 0:
            spans.append((at, at + len(tok)))
            at += len(tok)
    return _cut(text, spans)


def _section_call(body: str, norm: str, schemas: Schemas) -> ToolCall:
    if _ARG_BEGIN in norm:
        cut = norm.index(_ARG_BEGIN)
        header, args = body[:cut], body[cut + len(_ARG_BEGIN) :]
    elif _SEP in norm:
        cut = norm.index(_SEP)
        header, args = body[:cut], body[cut + len(_SEP) :]
        if header.strip() == "function":  # DeepSeek R1: function<sep>NAME\n```json … ```
            line, _, rest = args.lstrip().partition("\n")
            if "{" in line:
                line, rest = line[: line.index("{")], line[line.index("{") :] + "\n" + rest
            header, args = line, rest
    else:
        raise _Unparseable("tool call without arguments")
    name = header.strip()
    if name.startswith("functions."):
        name = name[len("functions.") :]
    base, colon, index = name.rpartition(":")
    if colon and index.isdigit():
        name = base
    return _call(name, _object_text(args, "arguments") if args.strip() else {}, schemas)


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` without the given (possibly overlapping) spans."""
    out: list[str] = []
    pos = 0
    for start, end in sorted(spans):
        if start > pos:
            out.append(text[pos:start])
        pos = max(pos, end)
    out.append(text[pos:])
    return "".join(out)


# ---- 2. function tags ------------------------------------------------------------------------------


def _function_tags(text: str, schemas: Schemas, calls: list[ToolCall]) -> str:
    if _FN_OPEN not in text:
        return text
    spans: list[tuple[int, int]] = []
    pos = 0
    while (begin := text.find(_FN_OPEN, pos)) >= 0:
        call, end = _function_tag(text, begin, schemas)
        calls.append(call)
        spans.append((begin, end))
        pos = end
    return _cut(text, spans)


def _function_tag(text: str, begin: int, schemas: Schemas) -> tuple[ToolCall, int]:
    """Parse the ``<function=…`` tag at ``begin``; returns the call and the index after the tag."""
    i = begin + len(_FN_OPEN)
    j = i
    n = len(text)
    while j < n and text[j] not in "{>[\n":
        j += 1
    name = text[i:j]
    if j < n and text[j] == ">":
        j += 1
    k = j
    while k < n and text[k] in _WS:
        k += 1
    if k < n and text[k] == "{":
        end = json_end(text, k)
        if end < 0:
            raise _Unparseable("function tag with unterminated JSON")
        args: Any = _loads(text[k:end])
        k = end
    elif text.startswith(_PARAM_OPEN, k):
        args, k = _parameters(text, k, schemas.get(name.strip()) or {})
    elif text.startswith(_FN_CLOSE, k):
        args = {}
    else:
        raise _Unparseable("function tag without an arguments object")
    call = _call(name, args, schemas)
    while k < n and text[k] in _WS:
        k += 1
    if text.startswith(_FN_CLOSE, k):
        k += len(_FN_CLOSE)
    return call, k


def _parameters(text: str, k: int, schema: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """Qwen3-Coder ``<parameter=KEY>VALUE</parameter>`` children up to ``</function>``."""
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    out: dict[str, Any] = {}
    n = len(text)
    while True:
        while k < n and text[k] in _WS:
            k += 1
        if text.startswith(_FN_CLOSE, k):
            return out, k
        if not text.startswith(_PARAM_OPEN, k):
            raise _Unparseable("function tag: expected <parameter=…> or </function>")
        gt = text.find(">", k)
        close = text.find(_PARAM_CLOSE, k)
        if gt < 0 or close < 0 or close < gt:
            raise _Unparseable("unclosed <parameter> tag")
        key = text[k + len(_PARAM_OPEN) : gt].strip()
        raw = text[gt + 1 : close]
        if raw.startswith("\n"):
            raw = raw[1:]
        if raw.endswith("\n"):
            raw = raw[:-1]
        out[key] = _typed_parameter(raw, props.get(key))
        k = close + len(_PARAM_CLOSE)


def _typed_parameter(raw: str, schema: Any) -> Any:
    """A parameter's text, decoded as JSON when its schema wants a non-string type and it decodes."""
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    kinds = set(kind) if isinstance(kind, list) else {kind}
    if kind is None or "string" in kinds:
        return raw
    try:
        return orjson.loads(raw.strip())
    except orjson.JSONDecodeError:
        return raw


# ---- 3. Hermes / Qwen XML ---------------------------------------------------------------------------


def _hermes(text: str, schemas: Schemas, calls: list[ToolCall]) -> str:
    if _TC_OPEN not in text:
        return text
    spans: list[tuple[int, int]] = []
    pos = 0
    while (begin := text.find(_TC_OPEN, pos)) >= 0:
        close = text.find(_TC_CLOSE, begin)
        if close < 0:
            raise _Unparseable("unclosed <tool_call> tag")
        body = text[begin + len(_TC_OPEN) : close].strip()
        if body.startswith(_FN_OPEN):
            call, end = _function_tag(body, 0, schemas)
            if body[end:].strip():
                raise _Unparseable("text after the function tag in <tool_call>")
            calls.append(call)
        else:
            obj = _object_text(body, "<tool_call> body")
            calls.append(_named_call(obj, schemas))
        pos = close + len(_TC_CLOSE)
        spans.append((begin, pos))
    return _cut(text, spans)


def _named_call(obj: dict[str, Any], schemas: Schemas) -> ToolCall:
    name = obj.get("name")
    if not isinstance(name, str):
        raise _Unparseable("tool call without a name")
    args = obj["arguments"] if "arguments" in obj else obj.get("parameters")
    return _call(name, args, schemas)


# ---- 4. bare JSON -----------------------------------------------------------------------------------


def _bare_json(text: str, schemas: Schemas) -> ToolCall | None:
    """The whole answer as one JSON call naming a declared tool, else None (an ordinary answer).

    Raises when the answer *starts* like such a call (``{"name": "<declared>"``) but is not one that
    parses: that is the model's broken attempt at a call, not content.
    """
    probe = text.lstrip()
    if not schemas or bare_json_head(probe, schemas) != HEAD_MATCH:
        return None
    body = _unfence(probe)
    end = json_end(body, 0) if body.startswith("{") else -1
    if end < 0:
        raise _Unparseable("bare JSON tool call is not complete JSON")
    if body[end:].strip():
        return None  # JSON followed by prose: the answer is not only a call
    obj = _loads(body[:end])
    if not isinstance(obj, dict) or not ("arguments" in obj or "parameters" in obj or set(obj) == {"name"}):
        return None
    return _named_call(obj, schemas)
