"""Helpers for the over-the-wire integration tests: request bodies, clients, raw SSE reading, and
simulator look-ups.

The official ``openai`` SDK is the client of record; :func:`stream_raw` reads the same stream frame by
frame with plain HTTP (``httpx2``, the HTTP client the SDK itself ships on) where the SDK would hide
what we want to see: comments, error frames, the exact order of finish and usage chunks.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import httpx2 as httpx
from openai import OpenAI

from freellm.sim import SimServer
from freellm.sim.control import SimControl
from tests.harness import CLIENT_KEY, BackgroundLoop, GatewayServer, gateway_settings, start_gateway, unique

__all__ = [
    "AUTH",
    "MODEL",
    "MakeGateway",
    "MakeMixed",
    "RawStream",
    "anthropic_sdk",
    "assert_failed_over_once",
    "body",
    "directive",
    "ended",
    "mixed_gateways",
    "one_route",
    "received",
    "sdk",
    "stream_raw",
    "two_routes",
    "upstream",
]

AUTH = {"Authorization": f"Bearer {CLIENT_KEY}"}
MODEL = "model-x"

MakeGateway = Callable[..., GatewayServer]
MakeMixed = Callable[..., GatewayServer]


def one_route(make_gateway: MakeGateway, **kwargs: Any) -> tuple[GatewayServer, str]:
    """A gateway with one route, ``alpha-…/model-x`` (a fresh provider name)."""
    a = unique("alpha")
    return make_gateway({a: [MODEL]}, **kwargs), a


def two_routes(make_gateway: MakeGateway, **kwargs: Any) -> tuple[GatewayServer, str, str]:
    """A gateway whose chain is ``alpha-…/model-x`` then ``beta-…/model-x`` (fresh provider names)."""
    a, b = unique("alpha"), unique("beta")
    return make_gateway({a: [MODEL], b: [MODEL]}, **kwargs), a, b


def sdk(gw: GatewayServer, timeout: float = 15.0) -> OpenAI:
    """The official sync client pointed at ``gw``, with the SDK's own retries off."""
    return OpenAI(base_url=gw.v1, api_key=CLIENT_KEY, max_retries=0, timeout=timeout)


def anthropic_sdk(gw: GatewayServer, *, bearer: bool = False, timeout: float = 15.0) -> anthropic.Anthropic:
    """The official Anthropic client pointed at ``gw`` (the key as ``x-api-key``, or with ``bearer`` as
    ``Authorization: Bearer``), with the SDK's own retries off."""
    if bearer:
        return anthropic.Anthropic(
            base_url=gw.base_url, auth_token=CLIENT_KEY, api_key=None, max_retries=0, timeout=timeout
        )
    return anthropic.Anthropic(base_url=gw.base_url, api_key=CLIENT_KEY, max_retries=0, timeout=timeout)


@contextmanager
def mixed_gateways(
    servers_loop: BackgroundLoop, sim: SimServer, tmp_path: Path, default_model: str
) -> Iterator[MakeMixed]:
    """A factory ``make({"gem-1": "gemini", "oai-1": "openai"}, model=...)``: a gateway whose chain is
    those providers (each serving ``model``, ``default_model`` unless given) in order, each of the given
    provider kind, all on the simulator. Every gateway it started is closed on exit."""
    started: list[GatewayServer] = []

    def factory(kinds: dict[str, str], *, model: str = default_model, **kwargs: Any) -> GatewayServer:
        settings = gateway_settings(
            tmp_path / f"gw{len(started)}", sim.base_url, {name: [model] for name in kinds}, **kwargs
        )
        settings.providers = [
            p.model_copy(
                update={"kind": kinds[p.name]}
                | ({"base_url": f"{sim.base_url}/{p.name}/v1beta"} if kinds[p.name] == "gemini" else {})
            )
            for p in settings.providers
        ]
        gw = start_gateway(servers_loop, settings)
        started.append(gw)
        return gw

    try:
        yield factory
    finally:
        for gw in started:
            gw.close()


def directive(scenarios: dict[str, dict[str, Any]]) -> str:
    """An inline simulator directive ``[[sim:{...}]]`` for the last user message."""
    return f"[[sim:{json.dumps(scenarios, separators=(',', ':'))}]]"


def body(text: str = "Say hello.", *, model: str = "auto", stream: bool = True, **extra: Any) -> dict[str, Any]:
    """A chat completion request with one user message."""
    return {"model": model, "stream": stream, "messages": [{"role": "user", "content": text}], **extra}


@dataclass
class RawStream:
    """One chat response read line by line off the wire."""

    status: int
    headers: httpx.Headers
    data: list[str] = field(default_factory=list)
    """Every ``data:`` payload in order, ``[DONE]`` included."""
    other_lines: list[str] = field(default_factory=list)
    """Non-blank lines that are not ``data:`` (comments, garbage): a clean gateway sends none."""
    elapsed_to_headers: float = 0.0
    json_body: Any = None
    """The decoded body of a non-200 (error) answer."""

    @property
    def frames(self) -> list[dict[str, Any]]:
        """The JSON frames (everything but ``[DONE]``), decoded."""
        return [json.loads(d) for d in self.data if d != "[DONE]"]

    @property
    def chunks(self) -> list[dict[str, Any]]:
        """``chat.completion.chunk`` frames (no error frames)."""
        return [f for f in self.frames if "error" not in f]

    @property
    def errors(self) -> list[dict[str, Any]]:
        return [f["error"] for f in self.frames if "error" in f]

    @property
    def text(self) -> str:
        return "".join(
            c["choices"][0]["delta"].get("content") or "" for c in self.chunks if c.get("choices")
        )

    @property
    def reasoning(self) -> str:
        out = []
        for c in self.chunks:
            if c.get("choices"):
                delta = c["choices"][0]["delta"]
                out.append(delta.get("reasoning_content") or delta.get("reasoning") or "")
        return "".join(out)

    @property
    def finish_positions(self) -> list[int]:
        """Indexes (in :attr:`chunks`) of chunks that carry a finish reason."""
        return [
            i
            for i, c in enumerate(self.chunks)
            if c.get("choices") and c["choices"][0].get("finish_reason") is not None
        ]

    @property
    def usage_positions(self) -> list[int]:
        """Indexes (in :attr:`chunks`) of chunks that carry usage."""
        return [i for i, c in enumerate(self.chunks) if c.get("usage")]

    @property
    def done_count(self) -> int:
        return self.data.count("[DONE]")


def stream_raw(
    gw: GatewayServer,
    payload: dict[str, Any],
    *,
    timeout: float = 15.0,
    headers: dict[str, str] | None = None,
) -> RawStream:
    """POST ``payload`` to the gateway and read the whole answer frame by frame."""
    with httpx.Client(timeout=timeout) as client:
        started = time.monotonic()
        with client.stream(
            "POST", f"{gw.v1}/chat/completions", json=payload, headers={**AUTH, **(headers or {})}
        ) as resp:
            out = RawStream(status=resp.status_code, headers=resp.headers)
            out.elapsed_to_headers = time.monotonic() - started
            if resp.status_code != 200:
                resp.read()
                out.json_body = resp.json()
                return out
            for line in resp.iter_lines():
                if line.startswith("data: "):
                    out.data.append(line[len("data: ") :])
                elif line.strip():
                    out.other_lines.append(line)
    return out


def upstream(sim_control: SimControl, provider: str) -> list[dict[str, Any]]:
    """What the simulator received for ``provider``, oldest first."""
    return sim_control.requests(provider=provider)


def ended(sim_control: SimControl, provider: str) -> list[dict[str, Any]]:
    """The simulator's log for ``provider``, each entry waited on until its request has ended."""
    return [sim_control.wait_ended(r["id"]) for r in upstream(sim_control, provider)]


def received(sim_control: SimControl, provider: str) -> list[dict[str, Any]]:
    """Bodies the simulator received for ``provider``, oldest first."""
    return [r["body"] for r in upstream(sim_control, provider)]


def assert_failed_over_once(headers: Any, first: str, second: str, error_class: str, *, model: str) -> None:
    """The answer came from ``second/model`` after exactly one failed attempt on ``first/model``'s first
    key, which failed as ``error_class``."""
    assert headers["x-routed-via"] == f"{second}/{model}"
    assert headers["x-fallback-attempts"] == "1"
    assert headers["x-fallback-trail"] == f"{first}/{model} key1={error_class}"


def answer_via_auto(gw: GatewayServer, *, stream: bool) -> tuple[str, Any]:
    """Ask ``auto`` once (raw SSE "Say hello." when ``stream``, else the SDK with "hi"); the answer's text
    and response headers. Asserts the client saw a clean 200 either way."""
    if stream:
        out = stream_raw(gw, body())
        assert out.status == 200 and out.errors == []
        return out.text, out.headers
    raw = sdk(gw).chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "hi"}]
    )
    return raw.parse().choices[0].message.content or "", raw.headers
