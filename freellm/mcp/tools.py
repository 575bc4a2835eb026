"""The gateway's MCP tools: what an agent may ask freellm about itself, and the one change it may make.

Each tool answers from the same function the matching HTTP route uses — ``/v1/models``, the admin
API's providers, cooldowns, analytics, routing explain, cache stats and live settings — so an agent
and an operator never read two versions of the truth. A refusal those functions raise (a 404 for an
unknown model, a 400 for a change the configuration refuses, a 503 while the admin configuration is
not ready) becomes a tool error the agent can read.

Provider keys never leave the gateway in clear: the provider documents show them masked (at most the
last four characters, :func:`freellm.secrets.mask`), and a provider's ``base_url`` is shown without
user info or query string, the two places a URL can carry a credential.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from freellm.admin.analytics import DEFAULT_WINDOW, WINDOWS, analytics_doc
from freellm.admin.cache import cache_stats_doc
from freellm.admin.changes import live_of
from freellm.admin.cooldowns import cooldowns_json
from freellm.admin.providers import all_providers, provider_doc
from freellm.admin.routing import explain_doc
from freellm.admin.settings_api import patch_live_settings
from freellm.errors import ClientError
from freellm.mcp.protocol import Tool, ToolError
from freellm.routing.scoring import strategy_names
from freellm.server.auth import Client
from freellm.server.state import Gateway

__all__ = ["TOOLS", "Caller"]


@dataclass(frozen=True, slots=True)
class Caller:
    """Who called a tool: the gateway it runs in and the key that authenticated the POST."""

    gateway: Gateway
    client: Client | None
    """The client key's identity (its profile scopes ``list_models``); None for an admin key."""
    admin: bool
    """The key is one of ``auth.admin_keys`` (and no client key): admin tools may run."""


ToolFn = Callable[[Caller, dict[str, Any]], Awaitable[dict[str, Any]]]


def _refusals_as_tool_errors(fn: ToolFn) -> ToolFn:
    """A route's refusal (ClientError) as the tool's error, in the route's own words."""

    async def run(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
        try:
            return await fn(caller, args)
        except ClientError as exc:
            raise ToolError(exc.message) from None

    return run


# ---- read-only tools --------------------------------------------------------------------------------


async def _list_models(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    # Imported here: freellm.server.routes registers this package's route, so a module-level import
    # would be circular. The function is the /v1/models handler's own listing.
    from freellm.server.routes import model_list

    return model_list(caller.gateway, caller.client, only_available=bool(args.get("available_only", False)))


def _safe_url(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


async def _provider_health(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    gw = caller.gateway
    live = live_of(gw)
    wanted = args.get("provider")
    providers = [
        {**doc, "base_url": _safe_url(doc["base_url"])}
        for doc in (provider_doc(live, gw.router.health, p) for p in all_providers(live))
        if wanted is None or doc["name"] == wanted
    ]
    if wanted is not None and not providers:
        raise ToolError(f"There is no provider `{wanted}`.")
    cooldowns = cooldowns_json(await gw.store.active_cooldowns(time.time()))
    if wanted is not None:
        cooldowns = [c for c in cooldowns if c["provider"] == wanted]
    return {"providers": providers, "cooldowns": cooldowns}


async def _usage_summary(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    doc = await analytics_doc(caller.gateway.store, str(args.get("window", DEFAULT_WINDOW)), time.time())
    routes: list[dict[str, Any]] = doc["routes"]
    attempts = sum(r["requests"] + r["failures"] for r in routes)
    successes = sum(round(r["success_rate"] * (r["requests"] + r["failures"])) for r in routes)
    totals = {
        "requests": sum(r["requests"] for r in routes),
        "success_rate": successes / attempts if attempts else None,
        "tokens_in": sum(r["tokens_in"] for r in routes),
        "tokens_out": sum(r["tokens_out"] for r in routes),
    }
    return {**doc, "totals": totals}


async def _routing_explain(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    return await explain_doc(
        caller.gateway,
        str(args.get("model", "auto")),
        profile=args.get("profile"),
        tools=bool(args.get("tools", False)),
        vision=bool(args.get("vision", False)),
        tokens=args.get("tokens"),
    )


async def _cache_stats(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    return cache_stats_doc(caller.gateway.cache)


# ---- the admin tool ---------------------------------------------------------------------------------


async def _set_routing_strategy(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    if not caller.admin:
        raise ToolError(
            "set_routing_strategy needs an admin key (one of auth.admin_keys) as the Bearer token; "
            "a client key may only use the read-only tools."
        )
    view = await patch_live_settings(caller.gateway, {"routing": {"strategy": args["strategy"]}})
    return {"routing": view["routing"]}


_NO_ARGS: Final[dict[str, Any]] = {"type": "object", "properties": {}, "additionalProperties": False}

TOOLS: Final[tuple[Tool[Caller], ...]] = (
    Tool(
        name="list_models",
        title="List models",
        description=(
            "The models this gateway serves, as GET /v1/models lists them: `auto`, `fusion` when enabled, "
            "the `auto:<profile>` entries the key may use, then every model with `available` and, when it "
            "is not, `unavailable_reason` (disabled, no_key, retired, no_healthy_key)."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "available_only": {
                    "type": "boolean",
                    "description": "List only the models that can serve now.",
                    "default": False,
                }
            },
            "additionalProperties": False,
        },
        run=_refusals_as_tool_errors(_list_models),
    ),
    Tool(
        name="provider_health",
        title="Provider health",
        description=(
            "Every provider with its models and keys (masked, never in clear): each key's status (unknown, "
            "healthy, error, invalid, disabled), and the cooldowns running now (soonest to end first)."
        ),
        input_schema={
            "type": "object",
            "properties": {"provider": {"type": "string", "description": "Only this provider."}},
            "additionalProperties": False,
        },
        run=_refusals_as_tool_errors(_provider_health),
    ),
    Tool(
        name="usage_summary",
        title="Usage summary",
        description=(
            "Per-route statistics from the request log over a window ending now (as GET /admin/analytics): "
            "requests, success rate, fallback rate, latency percentiles, tokens in and out; plus totals."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "window": {"type": "string", "enum": list(WINDOWS), "default": DEFAULT_WINDOW},
            },
            "additionalProperties": False,
        },
        run=_refusals_as_tool_errors(_usage_summary),
    ),
    Tool(
        name="routing_explain",
        title="Explain routing",
        description=(
            "How a request for `model` would be routed right now (as GET /admin/routing/explain): the "
            "strategy, every candidate route in order with its score, whether it is eligible and why not, "
            "and the route that would be chosen. No upstream call is made."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "model": {"type": "string", "description": "A model id, `auto`, `auto:<strategy>`, or provider/model.", "default": "auto"},
                "profile": {"type": "string", "description": "Route as a client bound to this profile."},
                "tools": {"type": "boolean", "description": "The request carries tools.", "default": False},
                "vision": {"type": "boolean", "description": "The request carries images.", "default": False},
                "tokens": {"type": "integer", "minimum": 0, "description": "The request's token estimate."},
            },
            "additionalProperties": False,
        },
        run=_refusals_as_tool_errors(_routing_explain),
    ),
    Tool(
        name="cache_stats",
        title="Cache statistics",
        description="The response cache (as GET /admin/cache/stats): entries, hits, misses, tokens saved, bytes, enabled.",
        input_schema=_NO_ARGS,
        run=_refusals_as_tool_errors(_cache_stats),
    ),
    Tool(
        name="set_routing_strategy",
        title="Set the routing strategy",
        description=(
            "Admin key required. Set routing.strategy live — applied from the next request and persisted, "
            "exactly like PATCH /admin/settings — and return the routing settings now in force."
        ),
        input_schema={
            "type": "object",
            "properties": {"strategy": {"type": "string", "enum": strategy_names()}},
            "required": ["strategy"],
            "additionalProperties": False,
        },
        run=_refusals_as_tool_errors(_set_routing_strategy),
        read_only=False,
    ),
)
"""Every tool, in the order ``tools/list`` shows them."""
