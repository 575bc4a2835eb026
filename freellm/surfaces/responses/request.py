"""A ``POST /v1/responses`` body → the parts of a canonical chat request (spec/surfaces.md §1).

:func:`parse_responses_request` validates the Responses wire (400/422 :class:`ClientError`, never
anything else) and returns a :class:`ResponsesRequest`: this turn's input as canonical messages, the
chat parameters it maps to, and what the response object echoes back. :func:`build_chat_request` then
puts the conversation together (instructions, hoisted system messages, the chained history, the new
input) and hands it to the core validator.

Mapping: ``instructions`` → the first system message (never carried over from a previous response);
function tools (``{type:"function", name, description, parameters, strict}``) → chat tools, every other
tool type (``web_search``, Codex's ``namespace``, ``custom``, ``local_shell``…) accepted and dropped,
``computer*`` refused with 422; ``tool_choice`` forwarded only when a function tool survived;
``reasoning.effort`` → ``reasoning_effort``; ``text.format`` → ``response_format`` unless one was
sent; ``max_output_tokens`` → ``max_tokens``; sampling parameters as they are. Other fields
(``metadata``, ``include``, ``truncation``, ``user``…) are accepted and not forwarded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from freellm.core.request import ChatRequest, parse_chat_request
from freellm.errors import ClientError
from freellm.surfaces.responses.inputs import bad_request, input_messages

__all__ = ["ResponsesRequest", "assemble_messages", "build_chat_request", "parse_responses_request"]

_SAMPLING = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "logit_bias",
    "stop",
)
_COMPUTER_TOOLS = frozenset({"computer", "computer_use_preview", "computer_use"})
_CHAT_PARAM = {"max_tokens": "max_output_tokens", "response_format": "text.format", "messages": "input"}


@dataclass(slots=True)
class ResponsesRequest:
    model: str
    """The client's model string, echoed in the response (``auto`` when absent)."""
    stream: bool
    store: bool
    previous_response_id: str | None
    instructions: str | None
    input: list[dict[str, Any]]
    """This turn's input items as canonical messages (system messages not hoisted)."""
    chat: dict[str, Any] = field(default_factory=dict)
    """Every canonical chat field but ``messages``."""
    echo: dict[str, Any] = field(default_factory=dict)
    """Request parameters in their response-object form (see ``ResponseShell.echo``)."""


def parse_responses_request(body: object) -> ResponsesRequest:
    if not isinstance(body, dict):
        raise bad_request("body", "Input should be a JSON object")
    try:
        # Parts of the body are echoed and stored as they are: they must serialise again (orjson's
        # decoder takes 1024 levels of nesting, its encoder 254).
        orjson.dumps(body)
    except orjson.JSONEncodeError:
        raise bad_request("body", "Input is nested too deeply or is not valid JSON") from None
    model = _optional(body, "model", str)
    stream = bool(_optional(body, "stream", bool))
    store = _optional(body, "store", bool)
    previous = _optional(body, "previous_response_id", str) or None
    instructions = _optional(body, "instructions", str)
    if "input" not in body or body["input"] is None:
        raise bad_request("input", "Missing required parameter")
    messages = input_messages(body["input"])

    chat: dict[str, Any] = {"model": _routing_model(model), "stream": stream}
    if stream:
        chat["stream_options"] = {"include_usage": True}
    echo: dict[str, Any] = {}

    tools, raw_tools = _tools(body.get("tools"))
    echo["tools"] = raw_tools
    choice = body.get("tool_choice")
    if choice is not None:
        echo["tool_choice"] = choice
        chat_choice = _tool_choice(choice)
        if tools:
            chat["tool_choice"] = chat_choice
    parallel = _optional(body, "parallel_tool_calls", bool)
    if parallel is not None:
        echo["parallel_tool_calls"] = parallel
    if tools:
        chat["tools"] = tools
        if parallel is not None:
            chat["parallel_tool_calls"] = parallel

    max_output = body.get("max_output_tokens")
    if max_output is not None:
        if isinstance(max_output, float) and max_output.is_integer():
            max_output = int(max_output)
        if not isinstance(max_output, int) or isinstance(max_output, bool):
            raise bad_request("max_output_tokens", "Input should be an integer")
        chat["max_tokens"] = max_output
        echo["max_output_tokens"] = max_output

    for name in _SAMPLING:
        value = body.get(name)
        if value is not None:
            chat[name] = value
    for name in ("temperature", "top_p"):
        if body.get(name) is not None:
            echo[name] = body[name]

    effort = _effort(body)
    if effort is not None:
        chat["reasoning_effort"] = effort
        echo["reasoning"] = {"effort": effort, "summary": None}

    text_format = _text_format(body.get("text"))
    if body.get("response_format") is not None:
        chat["response_format"] = body["response_format"]
    elif text_format is not None:
        chat["response_format"] = text_format
    if isinstance(body.get("text"), dict):
        echo["text"] = body["text"]

    metadata = body.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise bad_request("metadata", "Input should be an object")
        echo["metadata"] = metadata
    for name in ("truncation", "user"):
        if isinstance(body.get(name), str):
            echo[name] = body[name]

    return ResponsesRequest(
        model=model if model is not None and model.strip() else "auto",
        stream=stream,
        store=True if store is None else store,
        previous_response_id=previous,
        instructions=instructions,
        input=messages,
        chat=chat,
        echo=echo,
    )


def assemble_messages(
    instructions: str | None, history: list[dict[str, Any]], new_input: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The conversation sent upstream: instructions, then every system message of the chained history
    and the new input (hoisted, in order), then the other messages in order."""
    head: list[dict[str, Any]] = [{"role": "system", "content": instructions}] if instructions else []
    systems: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    for messages in (history, new_input):
        for m in messages:
            (systems if m.get("role") == "system" else rest).append(m)
    return head + systems + rest


def build_chat_request(parsed: ResponsesRequest, history: list[dict[str, Any]]) -> ChatRequest:
    """The canonical request for this turn (``history``: the chained conversation, oldest first)."""
    messages = assemble_messages(parsed.instructions, history, parsed.input)
    if not messages:
        raise bad_request("input", "The conversation is empty: send at least one input item")
    try:
        return parse_chat_request({**parsed.chat, "messages": messages})
    except ClientError as exc:
        raise _renamed(exc) from None


# ---- field helpers ----------------------------------------------------------------------------------


def _optional(body: dict[str, Any], name: str, kind: type) -> Any:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        noun = {str: "a string", bool: "a boolean", dict: "an object", list: "an array"}.get(kind, kind.__name__)
        raise bad_request(name, f"Input should be {noun}")
    return value


def _routing_model(model: str | None) -> str | None:
    if model is None:
        return None
    name = model.strip()
    return "auto" if name.lower().startswith("auto:") else name


def _tools(value: Any) -> tuple[list[dict[str, Any]], list[Any]]:
    """(chat tools, the tools as sent). Only function tools with a name are forwarded."""
    if value is None:
        return [], []
    if not isinstance(value, list):
        raise bad_request("tools", "Input should be an array")
    tools: list[dict[str, Any]] = []
    for i, tool in enumerate(value):
        path = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise bad_request(path, "Input should be an object")
        kind = tool.get("type")
        if kind is not None and not isinstance(kind, str):  # checked first: a list or object is unhashable
            raise bad_request(f"{path}.type", "Input should be a string")
        if kind in _COMPUTER_TOOLS:
            raise ClientError(
                422,
                "Computer use is not available: no model behind this gateway supports it.",
                code="no_computer_use_model",
                param=f"{path}.type",
            )
        if kind != "function":
            continue  # web_search, namespace, custom, local_shell, file_search, mcp…: accepted, not forwarded
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            continue
        fn: dict[str, Any] = {"name": name}
        description = tool.get("description")
        if description is not None:
            if not isinstance(description, str):
                raise bad_request(f"{path}.description", "Input should be a string")
            fn["description"] = description
        parameters = tool.get("parameters")
        if parameters is not None:
            if not isinstance(parameters, dict):
                raise bad_request(f"{path}.parameters", "Input should be an object")
            fn["parameters"] = parameters
        strict = tool.get("strict")
        if strict is not None:
            if not isinstance(strict, bool):
                raise bad_request(f"{path}.strict", "Input should be a boolean")
            fn["strict"] = strict
        tools.append({"type": "function", "function": fn})
    return tools, value


def _tool_choice(value: Any) -> str | dict[str, Any]:
    if isinstance(value, str) and value in ("none", "auto", "required"):
        return value
    if isinstance(value, dict) and value.get("type") == "function":
        name = value.get("name")
        if not isinstance(name, str) and isinstance(value.get("function"), dict):
            name = value["function"].get("name")  # the chat shape, tolerated
        if isinstance(name, str) and name:
            return {"type": "function", "function": {"name": name}}
    raise bad_request("tool_choice", "Input should be 'none', 'auto', 'required' or {\"type\": \"function\", \"name\": …}")


def _effort(body: dict[str, Any]) -> str | None:
    reasoning = body.get("reasoning")
    if reasoning is not None and not isinstance(reasoning, dict):
        raise bad_request("reasoning", "Input should be an object")
    effort = reasoning.get("effort") if isinstance(reasoning, dict) else None
    if effort is None:
        effort = body.get("reasoning_effort")
    if effort is not None and not isinstance(effort, str):
        raise bad_request("reasoning.effort", "Input should be a string")
    return effort


def _text_format(text: Any) -> dict[str, Any] | None:
    if text is None:
        return None
    if not isinstance(text, dict):
        raise bad_request("text", "Input should be an object")
    fmt = text.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict):
        raise bad_request("text.format", "Input should be an object")
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind != "json_schema":
        raise bad_request("text.format.type", "Input should be 'text', 'json_object' or 'json_schema'")
    schema = fmt.get("schema")
    if not isinstance(schema, dict):
        raise bad_request("text.format.schema", "Missing required parameter" if schema is None else "Input should be an object")
    name = fmt.get("name")
    if name is not None and not isinstance(name, str):
        raise bad_request("text.format.name", "Input should be a string")
    json_schema: dict[str, Any] = {"name": name or "response", "schema": schema}
    for key, kind_ in (("strict", bool), ("description", str)):
        value = fmt.get(key)
        if value is not None:
            if not isinstance(value, kind_):
                raise bad_request(f"text.format.{key}", f"Input should be a {'boolean' if kind_ is bool else 'string'}")
            json_schema[key] = value
    return {"type": "json_schema", "json_schema": json_schema}


def _renamed(exc: ClientError) -> ClientError:
    """A core validation error with the chat parameter names turned back into Responses ones."""
    param = exc.param
    message = exc.message
    if param:
        head, dot, tail = param.partition(".")
        new = _CHAT_PARAM.get(head)
        if new is not None:
            renamed = new if head == "messages" else new + dot + tail
            message = message.replace(f"{param}:", f"{renamed}:", 1)
            param = renamed
    return ClientError(exc.status, message, type=exc.type, code=exc.code, param=param, headers=exc.headers)
