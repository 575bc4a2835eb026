"""``SimControl``: a tiny client for the ``/_sim/`` control API, for tests and scripts.

The sync methods use ``urllib.request`` so they work from any thread without an event loop (a sync test
driving a gateway in another thread). From a coroutine that shares the simulator's event loop, use the
``*_async`` twins: a blocking call there would wait on a server that cannot run.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Literal

__all__ = ["EndpointFilter", "ScriptEndpoint", "SimControl", "SimControlError"]

ScriptEndpoint = Literal["chat", "models", "embeddings"]
"""Which requests a script applies to: chat answers, model-list requests (key probes) or embeddings."""
EndpointFilter = Literal["chat", "models", "embeddings", "all"]
"""Which logged requests a query sees: one endpoint's (see :data:`ScriptEndpoint`), or all of them."""


class SimControlError(RuntimeError):
    """The control API refused a call (bad script, unknown request id, ...)."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(f"simulator control API answered {status}: {detail}")
        self.status = status
        self.detail = detail


class SimControl:
    """Client for one simulator; ``base_url`` is its root, e.g. ``SimServer.base_url``."""

    def __init__(self, base_url: str, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    # ---- sync ------------------------------------------------------------------------------------------

    def script(
        self,
        provider: str,
        scenario: dict[str, Any],
        model: str = "*",
        match: str | None = None,
        key: str | None = None,
        times: int | None = 1,
        endpoint: ScriptEndpoint = "chat",
    ) -> dict[str, Any]:
        """Queue ``scenario`` for the next ``times`` matching requests to ``provider`` (None = until reset).

        ``endpoint="models"`` scripts the model-list endpoint (key probes) instead of chat requests; there
        only ``key`` filters, and the scenario's status, error fields, ``headers`` and
        ``first_byte_delay_ms`` apply. ``endpoint="embeddings"`` scripts embeddings requests: ``model``,
        ``match`` (searched in the inputs) and ``key`` filter, and ``cut_after``/``stall_after`` apply
        too. Returns the stored script (with its ``id``)."""
        body = {
            "provider": provider,
            "model": model,
            "match": match,
            "key": key,
            "times": times,
            "scenario": scenario,
            "endpoint": endpoint,
        }
        result: dict[str, Any] = self._call("POST", "/_sim/script", body)
        return result

    def set_default(
        self, scenario: dict[str, Any] | None, provider: str | None = None, model: str = "*"
    ) -> None:
        """Set the default for ``provider/model`` (or the server default when ``provider`` is None);
        ``scenario=None`` removes a per-model default or restores the server default from settings."""
        self._call("POST", "/_sim/default", {"provider": provider, "model": model, "scenario": scenario})

    def reset(self) -> None:
        """Clear scripts and the request log; restore defaults from the settings."""
        self._call("POST", "/_sim/reset", {})

    def requests(
        self, provider: str | None = None, match: str | None = None, endpoint: EndpointFilter = "chat"
    ) -> list[dict[str, Any]]:
        """The request log, oldest first, optionally filtered by provider and a body substring; chat
        requests only unless ``endpoint`` says ``"models"`` (key probes), ``"embeddings"`` or ``"all"``."""
        query = {k: v for k, v in (("provider", provider), ("match", match)) if v is not None}
        query["endpoint"] = endpoint
        result: list[dict[str, Any]] = self._call("GET", "/_sim/requests", query=query)["requests"]
        return result

    def wait_ended(self, request_id: str, timeout: float = 5.0) -> dict[str, Any]:
        """Block until request ``request_id`` has ended and return its log entry.

        Raises :class:`TimeoutError` when it is still running after ``timeout`` seconds."""
        try:
            result: dict[str, Any] = self._call(
                "GET",
                "/_sim/wait",
                query={"request_id": request_id, "state": "ended", "timeout": str(timeout)},
                http_timeout=timeout + self.timeout,
            )
        except SimControlError as exc:
            if exc.status == 408:
                raise TimeoutError(f"simulated request {request_id} still running after {timeout}s") from exc
            raise
        return result

    def wait_received(
        self, provider: str, count: int = 1, timeout: float = 5.0, endpoint: EndpointFilter = "chat"
    ) -> list[dict[str, Any]]:
        """Block until ``count`` ``endpoint`` requests (chat by default) for ``provider`` have arrived;
        returns those log entries.

        Raises :class:`TimeoutError` when fewer arrived within ``timeout`` seconds."""
        query = {
            "state": "received",
            "provider": provider,
            "count": str(count),
            "timeout": str(timeout),
            "endpoint": endpoint,
        }
        try:
            result: dict[str, Any] = self._call(
                "GET", "/_sim/wait", query=query, http_timeout=timeout + self.timeout
            )
        except SimControlError as exc:
            if exc.status == 408:
                raise TimeoutError(
                    f"fewer than {count} {endpoint} requests for {provider} after {timeout}s"
                ) from exc
            raise
        requests: list[dict[str, Any]] = result["requests"]
        return requests

    def connections(self) -> dict[str, int | None]:
        """``{"in_flight": N, "open_connections": M}``: requests whose answer is still running and open
        TCP connections (idle keep-alive ones included; ``None`` when the simulator was not started by
        ``start_sim``/``freellm sim``)."""
        result: dict[str, int | None] = self._call("GET", "/_sim/connections")
        return result

    # ---- async twins (run the sync call in a worker thread) ---------------------------------------------

    async def script_async(
        self,
        provider: str,
        scenario: dict[str, Any],
        model: str = "*",
        match: str | None = None,
        key: str | None = None,
        times: int | None = 1,
        endpoint: ScriptEndpoint = "chat",
    ) -> dict[str, Any]:
        """Awaitable :meth:`script`."""
        return await asyncio.to_thread(self.script, provider, scenario, model, match, key, times, endpoint)

    async def set_default_async(
        self, scenario: dict[str, Any] | None, provider: str | None = None, model: str = "*"
    ) -> None:
        """Awaitable :meth:`set_default`."""
        await asyncio.to_thread(self.set_default, scenario, provider, model)

    async def reset_async(self) -> None:
        """Awaitable :meth:`reset`."""
        await asyncio.to_thread(self.reset)

    async def requests_async(
        self, provider: str | None = None, match: str | None = None, endpoint: EndpointFilter = "chat"
    ) -> list[dict[str, Any]]:
        """Awaitable :meth:`requests`."""
        return await asyncio.to_thread(self.requests, provider, match, endpoint)

    async def wait_ended_async(self, request_id: str, timeout: float = 5.0) -> dict[str, Any]:
        """Awaitable :meth:`wait_ended`."""
        return await asyncio.to_thread(self.wait_ended, request_id, timeout)

    async def wait_received_async(
        self, provider: str, count: int = 1, timeout: float = 5.0, endpoint: EndpointFilter = "chat"
    ) -> list[dict[str, Any]]:
        """Awaitable :meth:`wait_received`."""
        return await asyncio.to_thread(self.wait_received, provider, count, timeout, endpoint)

    async def connections_async(self) -> dict[str, int | None]:
        """Awaitable :meth:`connections`."""
        return await asyncio.to_thread(self.connections)

    # ---- transport -------------------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        query: dict[str, str] | None = None,
        http_timeout: float | None = None,
    ) -> Any:
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            url, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=http_timeout or self.timeout) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                detail = json.loads(raw)
            except ValueError:
                detail = raw.decode("utf-8", errors="replace")
            raise SimControlError(exc.code, detail) from None
