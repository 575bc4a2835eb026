"""The MCP server's protocol layer, sans I/O: one POST body (and its headers) in, one HTTP answer out.

Everything the Streamable HTTP transport and JSON-RPC 2.0 decide is decided here, so it can be tested
alone against golden fixtures (tests/golden/mcp/): the HTTP handler (:mod:`freellm.mcp.http`) only
authenticates, reads the body and writes back the :class:`Reply`.

The server is stateless: it issues no ``Mcp-Session-Id`` and keeps nothing between POSTs, so any
process of any replica answers any request. What a stateful server would remember — the version
``initialize`` negotiated — comes from the ``MCP-Protocol-Version`` header every later request carries
(spec 2025-06-18 on); without it the spec says to assume ``2025-03-26``. The version decides the
little that differs between revisions here: whether a JSON-RPC batch is served (2025-03-26 and before)
or refused (2025-06-18 removed batching), and which result fields exist (``structuredContent`` and
``title`` from 2025-06-18, tool ``annotations`` from 2025-03-26) — a client validating a result against
its negotiated revision never sees a field from a later one.

Refusals follow the spec and the official SDK's server: a body that is not JSON is HTTP 400 with a
``-32700`` parse error; a message that is not JSON-RPC (or a batch the version does not allow) is HTTP
400 with ``-32600``, ``id: null``; notifications and client responses are HTTP 202 with no body; every
request gets HTTP 200 with its response, a JSON-RPC error included. Arguments that do not match a
tool's ``inputSchema`` are a tool error (``isError: true``, spec 2025-11-25) so a model can correct
itself; an unknown tool is ``-32602``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

import orjson

if TYPE_CHECKING:  # jsonschema is imported on the first tools/call (start-up and idle memory stay lean)
    from jsonschema import Draft202012Validator

__all__ = [
    "BATCH_VERSIONS",
    "DEFAULT_VERSION",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "LATEST_VERSION",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "SUPPORTED_VERSIONS",
    "UNAUTHORIZED",
    "McpServer",
    "Reply",
    "Tool",
    "ToolError",
    "error_body",
]

log = logging.getLogger("freellm.mcp")

SUPPORTED_VERSIONS: Final[tuple[str, ...]] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""The protocol revisions this server speaks, newest first."""
LATEST_VERSION: Final = SUPPORTED_VERSIONS[0]
"""The answer to an ``initialize`` proposing a revision this server does not speak."""
DEFAULT_VERSION: Final = "2025-03-26"
"""The revision a request without ``MCP-Protocol-Version`` is taken to speak (the spec's rule)."""
BATCH_VERSIONS: Final = frozenset({"2024-11-05", "2025-03-26"})
"""Revisions under which a JSON-RPC batch is served; 2025-06-18 removed batching."""

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
UNAUTHORIZED: Final = -32001
"""A server-defined code (the implementation-defined range) for a missing or wrong key."""

_ORDER: Final = {v: i for i, v in enumerate(reversed(SUPPORTED_VERSIONS))}
"""Revision → its age rank (oldest 0), for "this field exists from revision X on"."""

C = TypeVar("C")


class ToolError(Exception):
    """A tool could not do what it was asked: the client gets a result with ``isError: true`` and this
    message, which a model can read and act on (not a JSON-RPC error, which it would not see)."""


@dataclass(frozen=True, slots=True)
class Tool(Generic[C]):
    """One tool: its definition as ``tools/list`` shows it and the coroutine that runs it.

    ``run`` gets the caller's context (whatever the transport authenticated) and the arguments, already
    checked against ``input_schema``; it returns a JSON object, or raises :class:`ToolError`.
    """

    name: str
    title: str
    description: str
    input_schema: Mapping[str, Any]
    run: Callable[[C, dict[str, Any]], Awaitable[dict[str, Any]]]
    read_only: bool = True
    """The tool changes nothing (``annotations.readOnlyHint``)."""
    _validator: Draft202012Validator | None = field(default=None, init=False, repr=False, compare=False)

    def validator(self) -> Draft202012Validator:
        """The ``input_schema`` validator, built (and the schema checked) on first use."""
        if self._validator is None:
            from jsonschema import Draft202012Validator

            Draft202012Validator.check_schema(self.input_schema)
            object.__setattr__(self, "_validator", Draft202012Validator(self.input_schema))
        assert self._validator is not None
        return self._validator

    def definition(self, version: str) -> dict[str, Any]:
        doc: dict[str, Any] = {"name": self.name}
        if _at_least(version, "2025-06-18"):
            doc["title"] = self.title
        doc["description"] = self.description
        doc["inputSchema"] = dict(self.input_schema)
        if _at_least(version, "2025-03-26"):
            doc["annotations"] = {
                "title": self.title,
                "readOnlyHint": self.read_only,
                "destructiveHint": False,
                "idempotentHint": True,
                "openWorldHint": False,
            }
        return doc


@dataclass(frozen=True, slots=True)
class Reply:
    """What the HTTP handler sends: a status, a JSON body (None: no body at all) and extra headers."""

    status: int
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def encoded(self) -> bytes | None:
        return None if self.body is None else orjson.dumps(self.body)


class _Invalid(Exception):
    """A JSON-RPC error to answer with (raised inside the dispatch of one message)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def error_body(code: int, message: str, request_id: Any = None, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error response (``id: null`` when the request's id is unknown or invalid)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _at_least(version: str, minimum: str) -> bool:
    return _ORDER.get(version, len(_ORDER)) >= _ORDER[minimum]


def _valid_id(value: object) -> bool:
    """MCP request ids are strings or numbers (never null, never a boolean)."""
    return isinstance(value, str) or (isinstance(value, int | float) and not isinstance(value, bool))


def _media_types(header: str) -> list[str]:
    return [part.split(";", 1)[0].strip().lower() for part in header.split(",") if part.strip()]


class McpServer(Generic[C]):
    """The MCP methods this gateway serves (``initialize``, ``ping``, ``tools/list``, ``tools/call``) over
    the transport rules above. ``C`` is the caller context the HTTP layer passes to every tool."""

    def __init__(
        self, name: str, version: str, tools: Sequence[Tool[C]], *, title: str = "", instructions: str = ""
    ) -> None:
        self.name = name
        self.version = version
        self.title = title or name
        self.instructions = instructions
        self.tools: dict[str, Tool[C]] = {t.name: t for t in tools}
        if len(self.tools) != len(tools):
            raise ValueError("two tools share a name")

    # ---- the transport ------------------------------------------------------------------------------

    async def handle_post(self, body: bytes, headers: Mapping[str, str], ctx: C) -> Reply:
        """Answer one POST to the MCP endpoint: ``body`` as received, ``headers`` (any case)."""
        lowered = {k.lower(): v for k, v in headers.items()}
        accept = lowered.get("accept")
        if accept is not None and not {"application/json", "application/*", "*/*"} & set(_media_types(accept)):
            return Reply(406, error_body(INVALID_REQUEST, "Not Acceptable: the client must accept application/json"))
        content_type = lowered.get("content-type")
        if content_type is not None and _media_types(content_type)[:1] != ["application/json"]:
            return Reply(415, error_body(INVALID_REQUEST, "Unsupported Media Type: Content-Type must be application/json"))
        version = lowered.get("mcp-protocol-version", DEFAULT_VERSION).strip()
        if version not in _ORDER:
            return Reply(
                400,
                error_body(
                    INVALID_REQUEST,
                    f"Bad Request: unsupported MCP-Protocol-Version {version!r}",
                    data={"supported": list(SUPPORTED_VERSIONS)},
                ),
            )
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            where = f"line {exc.lineno}, column {exc.colno}"
            return Reply(400, error_body(PARSE_ERROR, f"Parse error: the body is not valid JSON ({where})"))
        if isinstance(message, list):
            return await self._batch(message, version, ctx)
        if not isinstance(message, dict):
            return Reply(400, error_body(INVALID_REQUEST, "Invalid Request: expected a JSON-RPC message object"))
        try:
            response = await self._message(message, version, ctx, in_batch=False)
        except _Invalid as exc:  # the message itself is not JSON-RPC: nothing to dispatch
            return Reply(400, error_body(exc.code, exc.message, data=exc.data))
        return Reply(202) if response is None else Reply(200, response)

    async def _batch(self, messages: list[Any], version: str, ctx: C) -> Reply:
        if version not in BATCH_VERSIONS:
            return Reply(
                400,
                error_body(INVALID_REQUEST, f"Invalid Request: protocol version {version} does not support batches"),
            )
        if not messages:
            return Reply(400, error_body(INVALID_REQUEST, "Invalid Request: an empty batch"))
        responses: list[dict[str, Any]] = []
        for message in messages:
            if not isinstance(message, dict):
                responses.append(error_body(INVALID_REQUEST, "Invalid Request: expected a JSON-RPC message object"))
                continue
            try:
                response = await self._message(message, version, ctx, in_batch=True)
            except _Invalid as exc:
                response = error_body(exc.code, exc.message, data=exc.data)
            if response is not None:
                responses.append(response)
        return Reply(200, responses) if responses else Reply(202)

    async def _message(self, message: dict[str, Any], version: str, ctx: C, *, in_batch: bool) -> dict[str, Any] | None:
        """The response to one message; None for a notification or a client's response. Raises
        :class:`_Invalid` when the message is not JSON-RPC 2.0 at all."""
        if message.get("jsonrpc") != "2.0":
            raise _Invalid(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"')
        if "method" not in message:
            if "id" in message and ("result" in message or "error" in message):
                return None  # a response to a server request: this server sends none, so nothing to do
            raise _Invalid(INVALID_REQUEST, 'Invalid Request: a message needs a "method" (or is a response)')
        method = message["method"]
        if not isinstance(method, str):
            raise _Invalid(INVALID_REQUEST, 'Invalid Request: "method" must be a string')
        if "id" not in message:
            return None  # a notification (notifications/initialized, …/cancelled): never answered
        request_id = message["id"]
        if not _valid_id(request_id):
            raise _Invalid(INVALID_REQUEST, 'Invalid Request: "id" must be a string or a number')
        params = message.get("params", {})
        try:
            if not isinstance(params, dict):
                raise _Invalid(INVALID_PARAMS, 'Invalid params: "params" must be an object')
            if in_batch and method == "initialize":
                raise _Invalid(INVALID_REQUEST, "Invalid Request: initialize must not be part of a batch")
            result = await self._call(method, params, version, ctx)
        except _Invalid as exc:
            return error_body(exc.code, exc.message, request_id, exc.data)
        except Exception:
            log.exception("MCP method %s failed", method)
            return error_body(INTERNAL_ERROR, "Internal error; see the gateway log.", request_id)
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    # ---- the methods --------------------------------------------------------------------------------

    async def _call(self, method: str, params: dict[str, Any], version: str, ctx: C) -> dict[str, Any]:
        if method == "initialize":
            return self._initialize(params)
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": [t.definition(version) for t in self.tools.values()]}
        if method == "tools/call":
            return await self._call_tool(params, version, ctx)
        raise _Invalid(METHOD_NOT_FOUND, f"Method not found: {method}")

    def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise _Invalid(INVALID_PARAMS, 'Invalid params: initialize needs "protocolVersion" (a string)')
        version = requested if requested in _ORDER else LATEST_VERSION
        info: dict[str, Any] = {"name": self.name, "version": self.version}
        if _at_least(version, "2025-06-18"):
            info["title"] = self.title
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": info,
        }
        if self.instructions:
            result["instructions"] = self.instructions
        return result

    async def _call_tool(self, params: dict[str, Any], version: str, ctx: C) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise _Invalid(INVALID_PARAMS, 'Invalid params: tools/call needs "name" (a string)')
        tool = self.tools.get(name)
        if tool is None:
            raise _Invalid(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise _Invalid(INVALID_PARAMS, 'Invalid params: "arguments" must be an object')
        from jsonschema.exceptions import best_match

        problem = best_match(tool.validator().iter_errors(arguments))
        if problem is not None:
            where = ".".join(str(p) for p in problem.path)
            return _tool_error(f"Invalid arguments for {name}: {where + ': ' if where else ''}{problem.message}")
        try:
            output = await tool.run(ctx, arguments)
        except ToolError as exc:
            return _tool_error(str(exc))
        result: dict[str, Any] = {
            "content": [{"type": "text", "text": orjson.dumps(output, option=orjson.OPT_INDENT_2).decode()}],
            "isError": False,
        }
        if _at_least(version, "2025-06-18"):
            result["structuredContent"] = output
        return result


def _tool_error(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}
