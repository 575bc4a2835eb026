"""Per-app simulator state: scripts, per-model defaults and the request log.

One :class:`SimState` lives on each app (``app[SIM_STATE]``), never at module level, so tests can run
several simulators side by side and ``POST /_sim/reset`` returns one of them to its settings.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import orjson
from aiohttp import web

from freellm.sim.scenario import Scenario
from freellm.sim.settings import SimSettings
from freellm.sim.wire import RequestView

__all__ = ["ENDPOINTS", "Endpoint", "Outcome", "RequestRecord", "Script", "SimState"]

Endpoint = Literal["chat", "models", "embeddings"]
"""What a request asked for: an answer (``chat``: chat completions, messages, generateContent), the
model list (``models``), which gateways use to probe keys, or vectors (``embeddings``: ``/v1/embeddings``,
``embedContent``, ``batchEmbedContents``). Scripts and log filters are per endpoint."""
ENDPOINTS: Final[tuple[Endpoint, ...]] = ("chat", "models", "embeddings")


class Outcome(enum.StrEnum):
    """How a simulated request ended, as reported by ``GET /_sim/requests``."""

    COMPLETED = "completed"
    CLIENT_DISCONNECTED = "client_disconnected"
    CUT = "cut"
    ERROR_STATUS = "error_status"
    INBAND_ERROR = "inband_error"
    STALLED = "stalled"
    UNAUTHORIZED = "unauthorized"
    BAD_REQUEST = "bad_request"
    SERVER_CLOSED = "server_closed"
    INTERNAL_ERROR = "internal_error"


@dataclass(slots=True)
class Script:
    """One queued scenario: used by the first ``times`` requests that match it (``None`` = until reset)."""

    id: int
    provider: str
    model: str
    match: str | None
    key: str | None
    times: int | None
    scenario: Scenario
    scenario_json: Any
    endpoint: Endpoint = "chat"
    used: int = 0

    def accepts(
        self, endpoint: Endpoint, model: str | None, key: str | None, view: RequestView | None
    ) -> bool:
        """Whether this script applies to an ``endpoint`` request for ``model`` made with ``key``.

        A chat script never answers a model-list probe or an embeddings request and vice versa: a test
        scripting "the next request fails" must not have its fault eaten by a key check the gateway
        happens to run first. Model-list requests have no model or messages (``model``/``view`` are
        ``None``); the control API refuses ``model``/``match`` on models scripts, so only the key is
        compared for them. An embeddings request's ``view`` carries its inputs as ``messages_json``.
        """
        if self.endpoint != endpoint:
            return False
        if self.key is not None and self.key != key:
            return False
        if self.model != "*" and self.model != model:
            return False
        return self.match is None or (view is not None and self.match in view.messages_json)

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``GET /_sim/scripts``."""
        return {
            "id": self.id,
            "endpoint": self.endpoint,
            "provider": self.provider,
            "model": self.model,
            "match": self.match,
            "key": self.key,
            "times": self.times,
            "used": self.used,
            "scenario": self.scenario_json,
        }


@dataclass(slots=True, eq=False)
class RequestRecord:
    """One received request and how it ended; ``ended`` lets ``/_sim/wait`` long-poll without sleeping."""

    id: str
    provider: str
    key: str | None
    body: Any
    started_at: float
    endpoint: Endpoint = "chat"
    model: str | None = None
    stream: bool | None = None
    source: str | None = None
    status: int | None = None
    ended_at: float | None = None
    outcome: Outcome | None = None
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    def end(self, outcome: Outcome) -> None:
        """Record the first outcome only: later cleanup paths must not overwrite what happened."""
        if self.outcome is not None:
            return
        self.outcome = outcome
        self.ended_at = time.time()
        self.ended.set()

    def to_dict(self) -> dict[str, Any]:
        """JSON form for the control API."""
        return {
            "id": self.id,
            "endpoint": self.endpoint,
            "provider": self.provider,
            "model": self.model,
            "key": self.key,
            "stream": self.stream,
            "body": self.body,
            "source": self.source,
            "status": self.status,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "outcome": self.outcome,
        }


class SimState:
    """Scripts (a FIFO queue per provider), defaults and the bounded request log of one simulator."""

    def __init__(self, settings: SimSettings) -> None:
        self.settings = settings
        self.scripts: dict[str, list[Script]] = {}
        self.defaults: dict[str, Scenario] = dict(settings.per_model)
        self.server_default: Scenario = settings.default
        self.records: OrderedDict[str, RequestRecord] = OrderedDict()
        self._request_ids = itertools.count(1)
        self._script_ids = itertools.count(1)
        self.closing = asyncio.Event()
        """Set at app shutdown so stalled requests end instead of holding the server open."""
        self.arrived = asyncio.Condition()
        """Notified on every new request, for ``/_sim/wait?state=received``."""
        self.in_flight = 0
        """Requests whose handler is still running (a stall, a slow stream, a delay): how a test sees
        that a gateway let go of every upstream request once its own clients are done."""
        self.transport: web.Server | None = None
        """The low-level server accepting this app's connections, when :func:`start_sim` runs it (an app
        run by someone else's runner leaves it None): its ``connections`` are the open TCP connections,
        idle keep-alive ones included."""

    def connections(self) -> dict[str, int | None]:
        """``{"in_flight": N, "open_connections": M}`` for ``GET /_sim/connections``; ``M`` is None when
        the transport is unknown (see :attr:`transport`)."""
        server = self.transport
        return {
            "in_flight": self.in_flight,
            "open_connections": None if server is None else len(server.connections),
        }

    def reset(self) -> None:
        """Drop scripts and logs and restore the defaults from settings (ids keep counting)."""
        self.scripts.clear()
        self.records.clear()
        self.defaults = dict(self.settings.per_model)
        self.server_default = self.settings.default

    def add_script(
        self,
        provider: str,
        model: str,
        match: str | None,
        key: str | None,
        times: int | None,
        scenario: Scenario,
        scenario_json: Any,
        endpoint: Endpoint = "chat",
    ) -> Script:
        """Append a script to ``provider``'s queue (one queue for every endpoint, so ids stay in order)."""
        script = Script(
            next(self._script_ids), provider, model, match, key, times, scenario, scenario_json, endpoint
        )
        self.scripts.setdefault(provider, []).append(script)
        return script

    def set_default(self, provider: str | None, model: str, scenario: Scenario | None) -> None:
        """Set (or with ``None`` remove) a default: the server's when ``provider`` is ``None``."""
        if provider is None:
            self.server_default = scenario if scenario is not None else self.settings.default
            return
        slot = f"{provider}/{model}"
        if scenario is None:
            self.defaults.pop(slot, None)
        else:
            self.defaults[slot] = scenario

    def _take_script(
        self,
        endpoint: Endpoint,
        provider: str,
        model: str | None,
        key: str | None,
        view: RequestView | None,
    ) -> Script | None:
        """The first script of ``provider``'s queue that accepts the request, consuming one of its uses."""
        queue = self.scripts.get(provider)
        if queue:
            for i, script in enumerate(queue):
                if script.accepts(endpoint, model, key, view):
                    script.used += 1
                    if script.times is not None and script.used >= script.times:
                        del queue[i]
                    return script
        return None

    def choose(self, provider: str, model: str, key: str | None, view: RequestView) -> tuple[Scenario, str]:
        """First matching chat script (consuming one use), else the per-model default, else the server's."""
        script = self._take_script("chat", provider, model, key, view)
        if script is not None:
            return script.scenario, f"script:{script.id}"
        if self.defaults:
            for slot in (f"{provider}/{model}", f"{provider}/*"):
                found = self.defaults.get(slot)
                if found is not None:
                    return found, f"default:{slot}"
        return self.server_default, "default"

    def choose_models(self, provider: str, key: str | None) -> tuple[Scenario | None, str]:
        """The first matching models script (consuming one use), else ``None``: the plain 200 listing.

        Defaults never apply here: they describe chat answers (a server default of ``status: 429`` is
        about generation), and a key probe that fails because of one would be a surprise."""
        return self._scripted("models", provider, None, key, None)

    def choose_embeddings(
        self, provider: str, model: str, key: str | None, view: RequestView
    ) -> tuple[Scenario | None, str]:
        """The first matching embeddings script (consuming one use), else ``None``: the plain vectors.

        As for model lists, defaults never apply: a chat default's ``status`` or ``cut_after`` describes
        a chat answer, and would silently break every embeddings call of a test that set it."""
        return self._scripted("embeddings", provider, model, key, view)

    def _scripted(
        self,
        endpoint: Endpoint,
        provider: str,
        model: str | None,
        key: str | None,
        view: RequestView | None,
    ) -> tuple[Scenario | None, str]:
        script = self._take_script(endpoint, provider, model, key, view)
        if script is not None:
            return script.scenario, f"script:{script.id}"
        return None, "default"

    def new_record(
        self, provider: str, key: str | None, body: Any, endpoint: Endpoint = "chat"
    ) -> RequestRecord:
        """Log a request as it arrives, evicting the oldest entry beyond ``log_limit``."""
        record = RequestRecord(
            id=f"req-{next(self._request_ids)}",
            provider=provider,
            key=key,
            body=body,
            started_at=time.time(),
            endpoint=endpoint,
        )
        self.records[record.id] = record
        while len(self.records) > self.settings.log_limit:
            self.records.popitem(last=False)
        return record

    async def notify_arrival(self) -> None:
        """Wake every ``/_sim/wait?state=received`` waiter (call after :meth:`new_record`)."""
        async with self.arrived:
            self.arrived.notify_all()

    async def wait_received(
        self, provider: str | None, count: int, endpoint: Endpoint | None = "chat"
    ) -> None:
        """Return once ``count`` ``endpoint`` requests (any endpoint when None) for ``provider`` (any,
        when None) are in the log."""
        async with self.arrived:
            await self.arrived.wait_for(lambda: len(self.find_records(provider, endpoint=endpoint)) >= count)

    def find_records(
        self,
        provider: str | None = None,
        match: str | None = None,
        model: str | None = None,
        endpoint: Endpoint | None = "chat",
    ) -> list[RequestRecord]:
        """Log entries in arrival order, filtered by endpoint (``None`` = all), provider, model and a
        substring of the body JSON. Chat only by default, so callers written before model-list
        requests were logged still see exactly the requests they expect."""
        out = []
        for record in self.records.values():
            if endpoint is not None and record.endpoint != endpoint:
                continue
            if provider is not None and record.provider != provider:
                continue
            if model is not None and record.model != model:
                continue
            if match is not None and match not in orjson.dumps(record.body).decode():
                continue
            out.append(record)
        return out
