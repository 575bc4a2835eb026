"""jsoncompact (lossless): a tool result that is a JSON array of ≥ ``min_rows`` objects with identical keys
becomes a table, if shorter::

    [[json-table:v1 columns=["id","n"] rows=8]]
    [1,"a"]
    …
    [[/json-table]]

Any other JSON tool result is minified (whitespace outside strings removed) when ``minify`` is on. Number
literals keep their exact source text (``1.50`` stays ``1.50``), so nothing a number-checking reader
relies on changes."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import Field

from freellm.compression.engines import EngineParams
from freellm.compression.types import (
    TOOL_ROLES,
    EngineContext,
    EngineResult,
    Message,
    Slots,
    content_str,
    with_content,
)

__all__ = ["ID", "LOSSY", "Params", "run", "tabulate"]

ID = "jsoncompact"
LOSSY = False

_STRING_OR_WS_RE = re.compile(r'("[^"\\]*(?:\\.[^"\\]*)*")|\s+')


class Params(EngineParams):
    min_rows: int = Field(default=8, ge=2)
    minify: bool = True


class _Num:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class _Obj:
    __slots__ = ("pairs",)

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        self.pairs = pairs


def _parse(text: str) -> Any:
    return json.loads(text, parse_int=_Num, parse_float=_Num, parse_constant=_Num, object_pairs_hook=_Obj)


def _str(s: str) -> str:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(s)
    return json.dumps(s, ensure_ascii=False)


def _dump(v: Any) -> str:
    if isinstance(v, _Num):
        return v.text
    if isinstance(v, str):
        return _str(v)
    if v is True:
        return "true"
    if v is False:
        return "false"
    if v is None:
        return "null"
    if isinstance(v, _Obj):
        return "{" + ",".join(f"{_str(k)}:{_dump(x)}" for k, x in v.pairs) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_dump(x) for x in v) + "]"
    raise TypeError(f"unexpected JSON value {type(v).__name__}")


def tabulate(value: Any, min_rows: int) -> str | None:
    """The table form of a parsed array of same-key objects, or ``None``."""
    if not isinstance(value, list) or len(value) < min_rows:
        return None
    first = value[0]
    if not isinstance(first, _Obj) or not first.pairs:
        return None
    columns = [k for k, _ in first.pairs]
    if len(set(columns)) != len(columns):
        return None
    rows: list[str] = []
    for row in value:
        if not isinstance(row, _Obj) or [k for k, _ in row.pairs] != columns:
            return None
        rows.append("[" + ",".join(_dump(x) for _, x in row.pairs) + "]")
    head = f"[[json-table:v1 columns={'[' + ','.join(_str(c) for c in columns) + ']'} rows={len(rows)}]]"
    return "\n".join([head, *rows, "[[/json-table]]"])


def _minify(text: str) -> str:
    return _STRING_OR_WS_RE.sub(lambda m: m.group(1) or "", text)


def run(messages: Slots, ctx: EngineContext, params: Params) -> EngineResult:
    out: list[Message | None] = list(messages)
    for i, m in enumerate(messages):
        text = content_str(m)
        if m is None or text is None or i in ctx.locked or m.get("role") not in TOOL_ROLES:
            continue
        s = text.strip()
        if len(s) < 2 or s[0] not in "[{" or s[-1] not in "]}":
            continue
        try:
            value = _parse(s)
        except (ValueError, RecursionError):
            continue
        new = tabulate(value, params.min_rows)
        if new is None and params.minify:
            new = _minify(s)
        if new is not None and len(new) < len(text):
            out[i] = with_content(m, new)
    return EngineResult(out)
