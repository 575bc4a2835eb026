"""The simulator's Anthropic request checks: Anthropic's own rules and wording, so a request the
simulator answered is one Anthropic would accept (unknown fields, roles, empty text, tool pairing,
thinking budgets and signatures, at most four cache breakpoints, images).

:func:`signature_of` is the ``sim-sig-`` signature the simulator issues for a reasoning text; a thinking
block sent back with such a signature must carry that text unmodified.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from freellm.sim.wire import WireRequestError

__all__ = ["SIM_SIGNATURE_PREFIX", "check_request", "signature_of"]

_TOP_LEVEL: Final = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "system",
        "stop_sequences",
        "stream",
        "temperature",
        "top_p",
        "top_k",
        "tools",
        "tool_choice",
        "thinking",
        "metadata",
        "service_tier",
        "container",
        "mcp_servers",
        "context_management",
        "output_config",
        "output_format",
    }
)
_USER_BLOCKS: Final = frozenset({"text", "image", "document", "tool_result", "search_result"})
_ASSISTANT_BLOCKS: Final = frozenset(
    {"text", "tool_use", "thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result"}
)
_TOOL_CHOICES: Final = frozenset({"auto", "any", "tool", "none"})
_MIN_THINKING_BUDGET: Final = 1024
_MAX_CACHE_BREAKPOINTS: Final = 4

SIM_SIGNATURE_PREFIX: Final = "sim-sig-"


def signature_of(reasoning: str) -> str:
    """The signature the simulator puts on a thinking block (``sim-sig-<hash of the text>``): a thinking
    block sent back with a ``sim-sig-`` signature that does not match its text is refused, the way
    Anthropic refuses a modified block."""
    return SIM_SIGNATURE_PREFIX + hashlib.sha256(reasoning.encode()).hexdigest()[:32]




def check_request(body: Any) -> None:
    if not isinstance(body, dict):
        raise WireRequestError("request body must be a JSON object")
    for key in body:
        if key not in _TOP_LEVEL:
            raise WireRequestError(f"{key}: Extra inputs are not permitted")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise WireRequestError("model: Field required")
    max_tokens = body.get("max_tokens")
    if "max_tokens" not in body:
        raise WireRequestError("max_tokens: Field required")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise WireRequestError("max_tokens: Input should be a valid integer greater than or equal to 1")
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise WireRequestError("stream: Input should be a valid boolean")
    _check_system(body.get("system"))
    _check_sampling(body)
    stops = body.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise WireRequestError("stop_sequences: Input should be a valid list of strings")
        if any(not s.strip() for s in stops):
            raise WireRequestError("stop_sequences: each stop sequence must contain non-whitespace")
    has_tools = _check_tools(body.get("tools"), body.get("tool_choice"))
    uses_tools = _check_messages(body.get("messages"))
    if uses_tools and not has_tools:
        raise WireRequestError("Requests which include `tool_use` or `tool_result` blocks must define tools.")
    _check_thinking(body.get("thinking"), max_tokens, body.get("tool_choice"))
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        _check_tool_loop_thinking(body["messages"])
    _check_cache_control(body)


def _check_cache_control(body: dict[str, Any]) -> None:
    """Every ``cache_control`` is ``{type: ephemeral, …}``; at most 4 of them (tools, system, blocks and
    the blocks inside tool results)."""
    found: list[tuple[str, Any]] = []

    def collect(where: str, items: Any) -> None:
        if not isinstance(items, list):
            return
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                continue
            if item.get("type") == "tool_result":
                collect(f"{where}.{i}.content", item.get("content"))
            if "cache_control" in item:
                found.append((f"{where}.{i}.cache_control", item["cache_control"]))

    collect("tools", body.get("tools"))
    collect("system", body.get("system"))
    for i, m in enumerate(body.get("messages") or ()):
        collect(f"messages.{i}.content", m.get("content"))
    for where, marker in found:
        if not isinstance(marker, dict) or marker.get("type") != "ephemeral":
            raise WireRequestError(f"{where}.type: Input should be 'ephemeral'")
    if len(found) > _MAX_CACHE_BREAKPOINTS:
        raise WireRequestError(
            f"A maximum of {_MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. Found {len(found)}."
        )


def _check_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise WireRequestError("system: Input should be a valid string or a list of text blocks")
    for i, block in enumerate(system):
        if (
            not isinstance(block, dict)
            or block.get("type") != "text"
            or not isinstance(block.get("text"), str)
        ):
            raise WireRequestError(f"system.{i}: Input should be a text block")
        if not block["text"]:
            raise WireRequestError(f"system.{i}: text content blocks must be non-empty")


def _check_sampling(body: dict[str, Any]) -> None:
    for name, high in (("temperature", 1.0), ("top_p", 1.0)):
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= high:
            raise WireRequestError(f"{name}: Input should be a number between 0 and {high:g}")
    top_k = body.get("top_k")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0):
        raise WireRequestError("top_k: Input should be a valid integer greater than or equal to 0")


def _check_tools(tools: Any, choice: Any) -> bool:
    if tools is not None:
        if not isinstance(tools, list):
            raise WireRequestError("tools: Input should be a valid list")
        for i, tool in enumerate(tools):
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
                raise WireRequestError(f"tools.{i}.name: Field required")
            if tool.get("type") not in (None, "custom"):
                continue  # server tools (web_search_…, bash_…) carry no schema
            schema = tool.get("input_schema")
            if not isinstance(schema, dict):
                raise WireRequestError(f"tools.{i}.input_schema: Field required")
            if schema.get("type") != "object":
                raise WireRequestError(f"tools.{i}.input_schema.type: Input should be 'object'")
    if choice is not None:
        if not isinstance(choice, dict) or choice.get("type") not in _TOOL_CHOICES:
            raise WireRequestError(
                "tool_choice: Input tag does not match any of the expected tags: 'auto', 'any', 'tool', 'none'"
            )
        if choice["type"] == "tool" and not isinstance(choice.get("name"), str):
            raise WireRequestError("tool_choice.tool.name: Field required")
    return bool(tools)


def _check_messages(messages: Any) -> bool:
    """Roles, blocks and tool pairing; returns whether any tool_use/tool_result block is present."""
    if not isinstance(messages, list):
        raise WireRequestError("messages: Field required")
    if not messages:
        raise WireRequestError("messages: at least one message is required")
    uses_tools = False
    pending: list[str] = []  # tool_use ids of the previous message
    last = len(messages) - 1
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise WireRequestError(f"messages.{i}: Input should be a valid dictionary")
        role = msg.get("role")
        if role == "system":
            raise WireRequestError(
                f'messages.{i}: Unexpected role "system". The Messages API accepts a top-level `system` '
                'parameter, not "system" as an input message role.'
            )
        if role not in ("user", "assistant"):
            raise WireRequestError(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        blocks = _blocks(msg.get("content"), i, role, final=i == last)
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        uses_tools = uses_tools or bool(results) or any(b["type"] == "tool_use" for b in blocks)
        if pending:
            leading = []
            for b in blocks:
                if b["type"] != "tool_result":
                    break
                leading.append(b["tool_use_id"])
            missing = [tid for tid in pending if tid not in leading]
            if role != "user" or missing:
                raise WireRequestError(
                    f"messages.{i - 1}: `tool_use` ids were found without `tool_result` blocks immediately "
                    f"after: {', '.join(missing or pending)}. Each `tool_use` block must have a corresponding "
                    "`tool_result` block in the next message."
                )
        unexpected = [tid for tid in results if tid not in pending]
        if unexpected:
            raise WireRequestError(
                f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{', '.join(unexpected)}. Each `tool_result` block must have a corresponding `tool_use` "
                "block in the previous message."
            )
        pending = [b["id"] for b in blocks if b["type"] == "tool_use"] if role == "assistant" else []
        final_text = blocks[-1].get("text") if i == last and role == "assistant" and blocks else None
        if isinstance(final_text, str) and final_text != final_text.rstrip():
            raise WireRequestError("messages: final assistant content cannot end with trailing whitespace")
    return uses_tools


def _blocks(content: Any, i: int, role: str, *, final: bool) -> list[dict[str, Any]]:
    if isinstance(content, str):
        if not content and not (final and role == "assistant"):
            raise WireRequestError(f"messages.{i}: {role} messages must have non-empty content")
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        raise WireRequestError(f"messages.{i}.content: Input should be a valid string or list")
    if not content and not (final and role == "assistant"):
        raise WireRequestError(f"messages.{i}: {role} messages must have non-empty content")
    allowed = _USER_BLOCKS if role == "user" else _ASSISTANT_BLOCKS
    for j, block in enumerate(content):
        where = f"messages.{i}.content.{j}"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise WireRequestError(f"{where}: Input should be a valid content block")
        kind = block["type"]
        if kind not in allowed:
            raise WireRequestError(f"{where}.type: '{kind}' blocks are not allowed in {role} messages")
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise WireRequestError(f"{where}.text: Field required")
            if not block["text"]:
                raise WireRequestError(f"{where}: text content blocks must be non-empty")
        elif kind == "image":
            _check_image(block.get("source"), where)
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not block["id"]:
                raise WireRequestError(f"{where}.id: Field required")
            if not isinstance(block.get("name"), str) or not block["name"]:
                raise WireRequestError(f"{where}.name: Field required")
            if not isinstance(block.get("input"), dict):
                raise WireRequestError(f"{where}.input: Input should be a valid dictionary")
        elif kind == "thinking":
            _check_thinking_block(block, where)
        elif kind == "redacted_thinking":
            if not isinstance(block.get("data"), str) or not block["data"]:
                raise WireRequestError(f"{where}.data: Field required")
        elif kind == "tool_result":
            if not isinstance(block.get("tool_use_id"), str) or not block["tool_use_id"]:
                raise WireRequestError(f"{where}.tool_use_id: Field required")
            inner = block.get("content")
            if inner is not None and not isinstance(inner, str | list):
                raise WireRequestError(f"{where}.content: Input should be a valid string or list")
    return content


def _check_thinking_block(block: dict[str, Any], where: str) -> None:
    """A thinking block sent back needs its text and its signature, unmodified (the simulator can tell
    for the ``sim-sig-`` signatures it issued)."""
    text = block.get("thinking")
    if not isinstance(text, str):
        raise WireRequestError(f"{where}.thinking: Field required")
    signature = block.get("signature")
    if not isinstance(signature, str) or not signature:
        raise WireRequestError(f"{where}.signature: Field required")
    if signature.startswith(SIM_SIGNATURE_PREFIX) and signature != signature_of(text):
        raise WireRequestError(f"{where}: Invalid `signature` in `thinking` block")


def _check_tool_loop_thinking(messages: list[dict[str, Any]]) -> None:
    """With thinking on, a request that continues a tool loop (it ends with tool results) needs the
    assistant message that made those calls to start with its thinking block, as Anthropic insists."""
    if len(messages) < 2:
        return
    last, previous = messages[-1], messages[-2]
    content = last.get("content")
    if last.get("role") != "user" or not isinstance(content, list):
        return
    if not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
        return
    blocks = previous.get("content")
    first = blocks[0] if isinstance(blocks, list) and blocks else None
    kind = first.get("type") if isinstance(first, dict) else "text"
    if kind not in ("thinking", "redacted_thinking"):
        raise WireRequestError(
            f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
            f"found `{kind}`. When `thinking` is enabled, a final `assistant` message must start with a "
            "thinking block (preceding the lastmost set of `tool_use` and `tool_result` blocks). We "
            "recommend you include thinking blocks from previous turns. To avoid this requirement, "
            "disable `thinking`."
        )


def _check_image(source: Any, where: str) -> None:
    if not isinstance(source, dict):
        raise WireRequestError(f"{where}.source: Field required")
    kind = source.get("type")
    if kind == "base64":
        if not isinstance(source.get("media_type"), str) or not isinstance(source.get("data"), str):
            raise WireRequestError(f"{where}.source: base64 sources need media_type and data")
    elif kind == "url":
        if not isinstance(source.get("url"), str):
            raise WireRequestError(f"{where}.source.url: Field required")
    elif kind != "file":
        raise WireRequestError(
            f"{where}.source.type: Input tag '{kind}' is not one of 'base64', 'url', 'file'"
        )


def _check_thinking(thinking: Any, max_tokens: int, choice: Any) -> None:
    if thinking is None:
        return
    if not isinstance(thinking, dict) or thinking.get("type") not in ("enabled", "disabled", "adaptive"):
        raise WireRequestError(
            "thinking: Input tag does not match any of the expected tags: 'enabled', 'disabled', 'adaptive'"
        )
    if thinking["type"] != "enabled":
        return
    budget = thinking.get("budget_tokens")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < _MIN_THINKING_BUDGET:
        raise WireRequestError(
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        )
    if budget >= max_tokens:
        raise WireRequestError("`max_tokens` must be greater than `thinking.budget_tokens`")
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        raise WireRequestError("Thinking may not be enabled when tool_choice forces tool use.")
