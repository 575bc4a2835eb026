"""Canonical (OpenAI chat) request body → Anthropic Messages request body.

The input is what :meth:`freellm.core.request.ChatRequest.upstream_body` builds (normalised messages:
system/user/assistant/tool roles only, every tool call with an id). The output is a body Anthropic
accepts: Anthropic rejects unknown fields, so only what has a Messages equivalent is sent.

Decisions (also in ``docs/providers.md``):

* **system**: every system message (wherever it sits) becomes top-level ``system``, in order — a plain
  string for one unmarked text, text blocks otherwise.
* **prompt caching**: a ``cache_control`` on a text or image part, on a tool call or on a tool is kept
  on the block or tool it becomes (parts of a ``tool`` message: on the blocks inside the
  ``tool_result``). Anthropic accepts at most :data:`MAX_CACHE_BREAKPOINTS` per request (a 400
  otherwise): beyond that only the last ones, in Anthropic's prefix order (tools, system, messages),
  are kept.
* **turns**: user/assistant alternate; consecutive same-role turns are merged; ``tool`` messages become
  ``tool_result`` blocks in a user turn, always placed before that turn's other blocks. A conversation
  that opens with an assistant turn gets a ``"."`` user turn first; one with no turns at all sends the
  system text as the user turn. Empty text is dropped (Anthropic rejects empty text blocks); the final
  assistant turn (a prefill) loses its trailing whitespace, which Anthropic also rejects.
* **tool calls**: ``arguments`` are JSON-parsed into ``input``. Arguments that are not a JSON object are
  kept rather than lost: ``{"_raw_arguments": "<text>"}`` for invalid JSON, ``{"_value": <json>}`` for
  valid JSON that is not an object. Ids are made Anthropic-safe (``[A-Za-z0-9_-]``, same mapping for
  the call and its result).
* **pairing**: Anthropic needs every ``tool_use`` answered by a ``tool_result`` in the very next turn
  and every result to answer a call there. A missing result gets a ``"(no result)"`` placeholder; a
  result without its call becomes a text block. History with tool blocks but no ``tools`` declared gets
  placeholder declarations of the called names and ``tool_choice: none`` (Anthropic refuses tool blocks
  without tools).
* **images**: ``data:`` URLs → base64 image blocks, http(s) URLs → url image sources, anything else
  dropped. Audio/file parts are dropped.
* **sampling**: ``temperature`` is clamped to Anthropic's 0-1; ``top_p``, ``top_k`` as sent; ``stop`` →
  ``stop_sequences`` (whitespace-only sequences dropped: Anthropic rejects them); ``user`` →
  ``metadata.user_id``; ``parallel_tool_calls: false`` → ``disable_parallel_tool_use``.
* **max_tokens** is required by Anthropic: the client's value, else the provider default (4096).
* **signed reasoning**: an assistant message with ``reasoning_content`` (a string) **and** a non-empty
  ``reasoning_signature`` becomes ``{"type": "thinking", "thinking", "signature"}`` placed before its
  text and tool_use blocks; ``thinking_blocks`` (the exact thinking / redacted_thinking blocks an
  Anthropic client sent, see the surface) are sent verbatim instead when present. Unsigned reasoning is
  not sent (Anthropic refuses a thinking block without its signature). Thinking blocks go out only when
  the request has thinking on (omitting them from earlier turns is always allowed, and Anthropic
  refuses them in some positions with thinking off) and never in a final assistant turn (a prefill).
* **reasoning_effort** → ``thinking: {type: enabled, budget_tokens}`` (:data:`THINKING_BUDGETS`);
  ``none`` or absent → no thinking (the gateway never turns thinking on by itself, whatever the history
  carries). When the budget does not fit under ``max_tokens`` it is added on top (the answer keeps the
  client's cap). Thinking is left off when a tool is forced (Anthropic refuses forced tool use with
  thinking) and while a tool loop is being continued (the last turn carries tool results) whose
  assistant turn does not start with a signed thinking block (Anthropic then requires that block).
  With thinking on, ``temperature``/``top_k`` are dropped and ``top_p`` is kept only within 0.95-1, as
  Anthropic requires.
* **response_format** has no Messages equivalent: ``json_object``/``json_schema`` become a last system
  instruction to answer with JSON only (the pump still checks the answer).
* Everything else (``seed``, penalties, ``logit_bias``, ``logprobs``, ``n``, ``stream_options``, unknown
  extras) is not sent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import orjson

__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_MAX_TOKENS",
    "MAX_CACHE_BREAKPOINTS",
    "THINKING_BUDGETS",
    "to_messages_request",
]

ANTHROPIC_VERSION: Final = "2023-06-01"
DEFAULT_MAX_TOKENS: Final = 4096
"""``max_tokens`` when the client sent none (Anthropic requires it)."""

THINKING_BUDGETS: Final[dict[str, int]] = {
    "minimal": 1024,  # Anthropic's minimum budget
    "low": 2048,
    "medium": 8192,
    "high": 16384,
}
"""``reasoning_effort`` → ``thinking.budget_tokens``; inverse of the inbound surface's budget bands
(< 4096 low, < 16384 medium, else high)."""

MAX_CACHE_BREAKPOINTS: Final = 4
"""Anthropic's limit of blocks carrying ``cache_control`` in one request ("A maximum of 4 blocks with
cache_control may be provided")."""

OPENING_USER_TEXT: Final = "."
"""The user turn put before a conversation that opens with an assistant turn."""
MISSING_RESULT_TEXT: Final = "(no result)"
PLACEHOLDER_TOOL_DESCRIPTION: Final = "A tool used earlier in this conversation."

_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_-]")
_DATA_URL = re.compile(r"^data:([\w.+-]+/[\w.+-]+)?((?:;[^;,]*)*?);base64,(.*)$", re.DOTALL)
_MAX_TEMPERATURE: Final = 1.0
_THINKING_TOP_P_MIN: Final = 0.95
_JSON_ONLY = "Respond only with a single valid JSON object, with no text or markdown around it."

Block = dict[str, Any]
Turn = dict[str, Any]  # {"role": "user" | "assistant", "content": list[Block]}


def to_messages_request(
    body: Mapping[str, Any], *, default_max_tokens: int = DEFAULT_MAX_TOKENS
) -> dict[str, Any]:
    """Translate one canonical upstream body into an Anthropic Messages body (a new dict)."""
    system, turns = _translate_messages(body.get("messages") or [])
    tools = _translate_tools(body.get("tools"))
    tool_choice = _translate_tool_choice(
        body.get("tool_choice"), body.get("parallel_tool_calls"), bool(tools)
    )
    turns = _repair_tool_pairing(turns)
    if not tools:
        called = _called_tool_names(turns)
        if called:
            tools = [
                {"name": n, "description": PLACEHOLDER_TOOL_DESCRIPTION, "input_schema": {"type": "object"}}
                for n in called
            ]
            tool_choice = {"type": "none"}
    format_hint = _response_format_hint(body.get("response_format"))
    if format_hint:
        system.append({"type": "text", "text": format_hint})
    if not turns:
        # Only system text: send it as the question (Anthropic needs at least one message).
        turns = [{"role": "user", "content": system or [{"type": "text", "text": OPENING_USER_TEXT}]}]
        system = []
    elif turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": OPENING_USER_TEXT}]})

    budget = THINKING_BUDGETS.get(body.get("reasoning_effort") or "")
    if budget is not None and (_forces_tool(tool_choice) or _continues_tool_loop_unsigned(turns)):
        budget = None
    turns = _drop_thinking(turns, final_only=budget is not None)
    _strip_final_assistant(turns)
    _limit_cache_breakpoints(tools, system, turns)

    out: dict[str, Any] = {"model": body.get("model")}
    if system:
        out["system"] = _system_value(system)
    out["messages"] = [_compact_turn(t) for t in turns]
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens <= 0:
        max_tokens = default_max_tokens
    out["max_tokens"] = max_tokens
    stops = _stop_sequences(body.get("stop"))
    if stops:
        out["stop_sequences"] = stops
    if tools:
        out["tools"] = tools
    if tool_choice is not None:
        out["tool_choice"] = tool_choice

    temperature, top_p, top_k = body.get("temperature"), body.get("top_p"), body.get("top_k")
    if budget is not None:
        if max_tokens <= budget:
            out["max_tokens"] = max_tokens + budget
        out["thinking"] = {"type": "enabled", "budget_tokens": budget}
        temperature = top_k = None
        if isinstance(top_p, int | float) and not _THINKING_TOP_P_MIN <= top_p <= 1:
            top_p = None
    if isinstance(temperature, int | float) and not isinstance(temperature, bool):
        out["temperature"] = min(temperature, _MAX_TEMPERATURE)
    if isinstance(top_p, int | float) and not isinstance(top_p, bool):
        out["top_p"] = top_p
    if isinstance(top_k, int) and not isinstance(top_k, bool):
        out["top_k"] = top_k
    user = body.get("user")
    if isinstance(user, str) and user:
        out["metadata"] = {"user_id": user}
    if body.get("stream"):
        out["stream"] = True
    return out


# ---- messages ------------------------------------------------------------------------------------


def _translate_messages(messages: list[Any]) -> tuple[list[Block], list[Turn]]:
    system: list[Block] = []
    turns: list[Turn] = []
    for msg in messages:
        if not isinstance(msg, Mapping):
            continue
        role = msg.get("role")
        content = msg.get("content")
        if role in ("system", "developer"):
            system.extend(_text_blocks(content))
        elif role == "user":
            _append(turns, "user", _user_blocks(content))
        elif role == "assistant":
            blocks = _thinking_blocks(msg)
            blocks.extend(_text_blocks(content))
            for call in msg.get("tool_calls") or ():
                block = _tool_use(call)
                if block is not None:
                    blocks.append(block)
            _append(turns, "assistant", blocks)
        elif role == "tool":
            _append(turns, "user", [_tool_result(msg)])
    for turn in turns:
        if turn["role"] == "user":
            # Anthropic wants a turn's tool results before anything else in it.
            blocks = turn["content"]
            results = [b for b in blocks if b["type"] == "tool_result"]
            if results and len(results) != len(blocks):
                turn["content"] = results + [b for b in blocks if b["type"] != "tool_result"]
    return system, turns


_THINKING_TYPES: Final = frozenset({"thinking", "redacted_thinking"})


def _thinking_blocks(msg: Mapping[str, Any]) -> list[Block]:
    """The signed thinking of one assistant message as Anthropic blocks (empty when it has none).

    ``thinking_blocks`` (what an Anthropic client sent, in its order) wins over the
    ``reasoning_content`` + ``reasoning_signature`` pair; a block missing its signature or data makes
    the whole list unusable (a partial sequence would be a modified one, which Anthropic refuses).
    """
    given = msg.get("thinking_blocks")
    if isinstance(given, list) and given:
        out: list[Block] = []
        for block in given:
            if not isinstance(block, Mapping):
                return []
            kind = block.get("type")
            if kind == "thinking":
                text, signature = block.get("thinking"), block.get("signature")
                if not isinstance(text, str) or not isinstance(signature, str) or not signature:
                    return []
                out.append({"type": "thinking", "thinking": text, "signature": signature})
            elif kind == "redacted_thinking":
                data = block.get("data")
                if not isinstance(data, str) or not data:
                    return []
                out.append({"type": "redacted_thinking", "data": data})
            else:
                return []
        return out
    reasoning, signature = msg.get("reasoning_content"), msg.get("reasoning_signature")
    if isinstance(reasoning, str) and isinstance(signature, str) and signature:
        return [{"type": "thinking", "thinking": reasoning, "signature": signature}]
    return []


def _drop_thinking(turns: list[Turn], *, final_only: bool = False) -> list[Turn]:
    """The turns without thinking blocks (all of them, or only the final assistant turn's); a turn left
    empty is dropped."""
    out: list[Turn] = []
    for n, turn in enumerate(turns):
        if turn["role"] == "assistant" and (not final_only or n == len(turns) - 1):
            blocks = [b for b in turn["content"] if b["type"] not in _THINKING_TYPES]
            if len(blocks) != len(turn["content"]):
                if not blocks:
                    continue
                turn = {"role": "assistant", "content": blocks}
        out.append(turn)
    return out


def _append(turns: list[Turn], role: str, blocks: list[Block]) -> None:
    if not blocks:
        return
    if turns and turns[-1]["role"] == role:
        turns[-1]["content"].extend(blocks)
    else:
        turns.append({"role": role, "content": blocks})


def _text_blocks(content: Any) -> list[Block]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[Block] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping):
                text = part.get("text")
                if isinstance(text, str) and text and part.get("type") in (None, "text", "input_text"):
                    blocks.append(_with_cache_control({"type": "text", "text": text}, part))
    return blocks


def _user_blocks(content: Any) -> list[Block]:
    if not isinstance(content, list):
        return _text_blocks(content)
    blocks: list[Block] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in ("image_url", "image"):
            block = _image(part)
            if block is not None:
                blocks.append(block)
        else:
            blocks.extend(_text_blocks([part]))
    return blocks


def _image(part: Mapping[str, Any]) -> Block | None:
    ref = part.get("image_url")
    url = ref.get("url") if isinstance(ref, Mapping) else ref
    if not isinstance(url, str):
        return None
    url = url.strip()
    m = _DATA_URL.match(url)
    if m:
        media_type = m.group(1) or "image/png"
        source: Block = {"type": "base64", "media_type": media_type, "data": m.group(3)}
    elif url.startswith(("https://", "http://")):
        source = {"type": "url", "url": url}
    else:
        return None
    return _with_cache_control({"type": "image", "source": source}, part)


def _with_cache_control(block: Block, part: Mapping[str, Any]) -> Block:
    cc = part.get("cache_control")
    if isinstance(cc, Mapping):
        block["cache_control"] = dict(cc)
    return block


def safe_id(raw: Any) -> str:
    """An id Anthropic accepts (``^[A-Za-z0-9_-]+$``), stable for the same input."""
    text = raw if isinstance(raw, str) else ""
    return _UNSAFE_ID.sub("_", text) or "toolu_missing"


def _tool_use(call: Any) -> Block | None:
    if not isinstance(call, Mapping):
        return None
    fn = call.get("function")
    if not isinstance(fn, Mapping):
        return None
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        return None
    block: Block = {
        "type": "tool_use",
        "id": safe_id(call.get("id")),
        "name": name,
        "input": _tool_input(fn.get("arguments")),
    }
    return _with_cache_control(block, call)


def _tool_input(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if not isinstance(arguments, str) or not arguments.strip():
        return {}
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return {"_raw_arguments": arguments}
    if isinstance(value, dict):
        return value
    return {"_value": value}


def _tool_result(msg: Mapping[str, Any]) -> Block:
    block: Block = {"type": "tool_result", "tool_use_id": safe_id(msg.get("tool_call_id"))}
    content = msg.get("content")
    if isinstance(content, str):
        if content:
            block["content"] = content
    elif isinstance(content, list):
        parts = _user_blocks(content)
        if parts:
            block["content"] = parts
    return block


def _repair_tool_pairing(turns: list[Turn]) -> list[Turn]:
    """Every tool_use answered in the next turn, every tool_result answering the previous turn."""
    out: list[Turn] = []
    pending: list[str] = []  # tool_use ids of the previous assistant turn, in order
    for turn in turns:
        if turn["role"] == "assistant":
            if pending:
                out.append({"role": "user", "content": _placeholder_results(pending)})
            out.append(turn)
            pending = [b["id"] for b in turn["content"] if b["type"] == "tool_use"]
            continue
        blocks: list[Block] = []
        answered: set[str] = set()
        for block in turn["content"]:
            if block["type"] == "tool_result":
                tid = block["tool_use_id"]
                if tid in pending and tid not in answered:
                    answered.add(tid)
                    blocks.append(block)
                else:
                    blocks.append(_result_as_text(block))
            else:
                blocks.append(block)
        missing = [tid for tid in pending if tid not in answered]
        blocks = _placeholder_results(missing) + blocks
        results = [b for b in blocks if b["type"] == "tool_result"]
        turn = {"role": "user", "content": results + [b for b in blocks if b["type"] != "tool_result"]}
        if out and out[-1]["role"] == "user":
            out[-1]["content"].extend(turn["content"])
        else:
            out.append(turn)
        pending = []
    if pending:
        out.append({"role": "user", "content": _placeholder_results(pending)})
    return out


def _placeholder_results(ids: list[str]) -> list[Block]:
    return [{"type": "tool_result", "tool_use_id": tid, "content": MISSING_RESULT_TEXT} for tid in ids]


def _result_as_text(block: Block) -> Block:
    content = block.get("content")
    if isinstance(content, list):
        content = "\n".join(b["text"] for b in content if b.get("type") == "text")
    return {"type": "text", "text": f"[tool result {block['tool_use_id']}]\n{content or ''}".rstrip()}


def _called_tool_names(turns: list[Turn]) -> list[str]:
    names: list[str] = []
    for turn in turns:
        for block in turn["content"]:
            if block["type"] == "tool_use" and block["name"] not in names:
                names.append(block["name"])
    return names


def _strip_final_assistant(turns: list[Turn]) -> None:
    last = turns[-1]
    if last["role"] != "assistant":
        return
    blocks = last["content"]
    while blocks and blocks[-1]["type"] == "text":
        text = blocks[-1]["text"].rstrip()
        if text:
            blocks[-1] = {**blocks[-1], "text": text}
            break
        blocks.pop()
    if not blocks:
        turns.pop()


def _compact_turn(turn: Turn) -> Turn:
    """A turn that is a single plain text block is sent as a string, as Anthropic's own examples do."""
    blocks = turn["content"]
    if len(blocks) == 1 and blocks[0]["type"] == "text" and len(blocks[0]) == 2:
        return {"role": turn["role"], "content": blocks[0]["text"]}
    return {"role": turn["role"], "content": blocks}


def _system_value(blocks: list[Block]) -> str | list[Block]:
    if len(blocks) == 1 and len(blocks[0]) == 2:
        text: str = blocks[0]["text"]
        return text
    return blocks


def _limit_cache_breakpoints(tools: list[Block], system: list[Block], turns: list[Turn]) -> None:
    """Keep at most :data:`MAX_CACHE_BREAKPOINTS` ``cache_control`` markers (in place).

    Anthropic refuses a request with more than 4 breakpoints (400 "A maximum of 4 blocks with
    cache_control may be provided"). When a request carries more, the **last** 4 are kept, in the order
    Anthropic builds its cache prefix (tools, then system, then messages, blocks inside a tool_result
    included), and the earlier ones are dropped: a later breakpoint caches a longer prefix, and the
    cache looks for hits a few blocks back from each breakpoint, so the last ones cover what the
    earlier ones would (minus separate cache entries for the shorter prefixes).
    """
    marked: list[Block] = [t for t in tools if "cache_control" in t]
    marked.extend(b for b in system if "cache_control" in b)
    for turn in turns:
        for block in turn["content"]:
            inner = block.get("content") if block["type"] == "tool_result" else None
            if isinstance(inner, list):
                marked.extend(b for b in inner if "cache_control" in b)
            if "cache_control" in block:
                marked.append(block)
    for block in marked[: max(0, len(marked) - MAX_CACHE_BREAKPOINTS)]:
        del block["cache_control"]


def _continues_tool_loop_unsigned(turns: list[Turn]) -> bool:
    """The last turn carries tool results and the assistant turn that made those calls does not start
    with a thinking block: with thinking on, Anthropic would refuse it ("a final assistant message must
    start with a thinking block")."""
    last = turns[-1]
    if last["role"] != "user" or not any(b["type"] == "tool_result" for b in last["content"]):
        return False
    previous = turns[-2]["content"] if len(turns) > 1 and turns[-2]["role"] == "assistant" else []
    return not previous or previous[0]["type"] not in _THINKING_TYPES


# ---- tools and parameters ------------------------------------------------------------------------


def _translate_tools(tools: Any) -> list[Block]:
    out: list[Block] = []
    if not isinstance(tools, list):
        return out
    for tool in tools:
        if not isinstance(tool, Mapping):
            continue
        fn = tool.get("function")
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            continue
        schema = fn.get("parameters")
        if not isinstance(schema, Mapping) or not schema:
            schema = {"type": "object", "properties": {}}
        elif "type" not in schema:
            schema = {"type": "object", **schema}
        entry: Block = {"name": fn["name"]}
        if isinstance(fn.get("description"), str) and fn["description"]:
            entry["description"] = fn["description"]
        entry["input_schema"] = schema
        out.append(_with_cache_control(entry, tool))
    return out


def _translate_tool_choice(choice: Any, parallel: Any, have_tools: bool) -> dict[str, Any] | None:
    if not have_tools:
        return None
    out: dict[str, Any] | None = None
    if choice == "auto":
        out = {"type": "auto"}
    elif choice in ("required", "any"):
        out = {"type": "any"}
    elif choice == "none":
        return {"type": "none"}
    elif isinstance(choice, Mapping):
        fn = choice.get("function")
        if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
            out = {"type": "tool", "name": fn["name"]}
    if parallel is False:
        out = {**(out or {"type": "auto"}), "disable_parallel_tool_use": True}
    return out


def _forces_tool(choice: Mapping[str, Any] | None) -> bool:
    return choice is not None and choice.get("type") in ("any", "tool")


def _stop_sequences(stop: Any) -> list[str]:
    seqs = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    return [s for s in seqs if isinstance(s, str) and s.strip()]


def _response_format_hint(fmt: Any) -> str | None:
    if not isinstance(fmt, Mapping):
        return None
    kind = fmt.get("type")
    if kind == "json_object":
        return _JSON_ONLY
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
        if isinstance(schema, Mapping):
            return f"{_JSON_ONLY} It must match this JSON schema: {orjson.dumps(schema).decode()}"
        return _JSON_ONLY
    return None
