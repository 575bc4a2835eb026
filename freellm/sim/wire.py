"""The contract between the simulator's request flow and one upstream wire format.

The flow in :mod:`freellm.sim.app` (auth, logging, scenario choice, delays, faults) is shared; a wire only
says how to read a request and how to render a :class:`~freellm.sim.plan.Plan` and errors. Adding the
Gemini or Anthropic wire means adding one module that implements :class:`Wire`, plus its routes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from aiohttp import web

from freellm.sim.plan import Frame, Plan
from freellm.sim.scenario import Scenario

__all__ = ["RequestView", "Wire", "WireRequestError"]


class WireRequestError(ValueError):
    """The request body is not a valid request of this wire (rendered as a 400 in the wire's envelope)."""


class RequestView:
    """The few facts the simulator needs from a request, read once by the wire.

    ``messages_json`` (what script ``match`` strings are searched in) is built lazily because most
    requests never consult it.
    """

    __slots__ = ("_messages_json", "_messages_json_fn", "last_user_text", "model", "prompt_chars", "stream")

    def __init__(
        self,
        *,
        model: str,
        stream: bool,
        prompt_chars: int,
        last_user_text: str,
        messages_json: Callable[[], str],
    ) -> None:
        self.model = model
        self.stream = stream
        self.prompt_chars = prompt_chars
        self.last_user_text = last_user_text
        self._messages_json_fn = messages_json
        self._messages_json: str | None = None

    @property
    def messages_json(self) -> str:
        """The request's messages serialised as JSON text (computed on first use)."""
        if self._messages_json is None:
            self._messages_json = self._messages_json_fn()
        return self._messages_json


class Wire(Protocol):
    """One upstream wire format the simulator can speak."""

    name: str
    stream_headers: Mapping[str, str]

    def credential(self, request: web.BaseRequest) -> str | None:
        """The API key the client sent, or ``None`` when it sent none."""
        ...

    def new_response_id(self) -> str:
        """A fresh id in the wire's own style (``chatcmpl-...``, ``msg_...``)."""
        ...

    def parse_request(self, body: Any, route: Mapping[str, str]) -> RequestView:
        """Read a decoded JSON body; raise :class:`WireRequestError` when it is not a valid request."""
        ...

    def render_stream(
        self, plan: Plan, scenario: Scenario, view: RequestView, response_id: str, created: int
    ) -> list[Frame]:
        """Every frame of the streamed answer, in order, including faults that live inside the stream."""
        ...

    def render_completion(
        self, plan: Plan, scenario: Scenario, view: RequestView, response_id: str, created: int
    ) -> Any:
        """The whole non-stream answer as a JSON value."""
        ...

    def render_error(self, status: int, message: str) -> Any:
        """The wire's error envelope for an HTTP error status."""
        ...

    def render_inband_error(self, message: str) -> Any:
        """The error object sent inside a stream (or as a 200 body for a non-stream request)."""
        ...

    def models_list(self, provider: str, models: list[str]) -> Any:
        """The body of the wire's model-listing endpoint."""
        ...
