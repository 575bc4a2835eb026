"""The reliability suite's client: one request on one of four surfaces, read frame by frame, judged.

The suite needs to tell apart exactly what a user would: a complete, correct answer; a stream that died
after the commit point but was ended in-band the surface's own way (chat: an error frame then
``[DONE]``; Messages: an ``error`` event; Responses: ``response.failed``; Gemini: an error element);
and everything else. So it speaks each wire with plain aiohttp and parses the raw frames itself — an SDK
would hide the difference between an in-band error and a dropped connection behind one exception.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from typing import Any, Final, Literal

import aiohttp
import orjson

from tests.harness import CLIENT_KEY

__all__ = ["CALLS", "SURFACES", "TEXT", "Call", "Result", "Surface", "Verdict", "run_call"]

Surface = Literal["chat", "messages", "responses", "gemini"]
SURFACES: Final[tuple[Surface, ...]] = ("chat", "messages", "responses", "gemini")

TEXT: Final = "The quick brown fox jumps over the lazy dog, and then it jumps back again."
"""What every healthy upstream answers (the simulator's default for the suite): a correct answer is
exactly this text, whichever route gave it."""

HEADERS: Final = {
    "Authorization": f"Bearer {CLIENT_KEY}",
    "x-api-key": CLIENT_KEY,
    "x-goog-api-key": CLIENT_KEY,
    "Content-Type": "application/json",
}


class Verdict(enum.StrEnum):
    """How one request ended, from the client's side."""

    OK = "ok"
    """A complete, correct answer (the whole text, the surface's normal ending)."""
    IN_BAND = "in_band"
    """A stream that sent part of the text, then the surface's own error and terminator."""
    FAILED = "failed"
    """Anything else before the commit point: an error status, an error with no content, a wrong text."""
    UNTERMINATED = "unterminated"
    """Content was sent, then the stream just stopped (no in-band error, no terminator) or went wrong."""
    HUNG_UP = "hung_up"
    """The client hung up on purpose after the first content frame (the client's fault, not judged)."""


@dataclass(frozen=True, slots=True)
class Call:
    surface: Surface
    stream: bool


CALLS: Final[tuple[Call, ...]] = tuple(Call(s, stream) for s in SURFACES for stream in (False, True))
"""The eight kinds of request the load rotates through."""


@dataclass(frozen=True, slots=True)
class Result:
    call: Call
    verdict: Verdict
    latency_s: float
    detail: str = ""
    routed_via: str = ""
    """``X-Routed-Via``: the provider/model that answered (empty when the gateway sent none)."""
    failed_over: bool = False
    """Whether ``X-Fallback-Attempts`` says an earlier route was tried first."""
    started_at: float = 0.0
    """``time.perf_counter()`` when the request was sent."""


def _request(call: Call, marker: str) -> tuple[str, bytes]:
    """Path and body of ``call``; ``marker`` goes into the prompt (the simulator's scripts match on it)."""
    prompt = f"reliability {marker}"
    msgs = [{"role": "user", "content": prompt}]
    if call.surface == "chat":
        return "/v1/chat/completions", orjson.dumps(
            {"model": "auto", "messages": msgs, "stream": call.stream}
        )
    if call.surface == "messages":
        body = {"model": "auto", "max_tokens": 200, "messages": msgs, "stream": call.stream}
        return "/v1/messages", orjson.dumps(body)
    if call.surface == "responses":
        return "/v1/responses", orjson.dumps({"model": "auto", "input": prompt, "stream": call.stream})
    action = "streamGenerateContent?alt=sse" if call.stream else "generateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": prompt}]}]}
    return f"/v1beta/models/auto:{action}", orjson.dumps(body)


async def run_call(
    http: aiohttp.ClientSession,
    base_url: str,
    call: Call,
    marker: str = "",
    timeout_s: float = 30.0,
    hang_up: bool = False,
) -> Result:
    """Send ``call`` to the gateway at ``base_url`` and judge the answer; with ``hang_up`` a stream's
    connection is dropped as soon as its first content arrived."""
    path, body = _request(call, marker)
    started = time.perf_counter()
    state = _StreamState()
    via, failed_over = "", False

    def done(verdict: Verdict, detail: str) -> Result:
        return Result(call, verdict, time.perf_counter() - started, detail, via, failed_over, started)

    try:
        async with http.post(
            base_url + path, data=body, headers=HEADERS, timeout=aiohttp.ClientTimeout(total=timeout_s)
        ) as resp:
            via = resp.headers.get("X-Routed-Via", "")
            failed_over = int(resp.headers.get("X-Fallback-Attempts", "0") or 0) > 0
            if resp.status != 200:
                text = (await resp.read())[:200].decode(errors="replace")
                return done(Verdict.FAILED, f"HTTP {resp.status}: {text}")
            if not call.stream:
                return done(*_judge_body(call.surface, await resp.read()))
            async for event, data in _sse(resp):
                state.feed(call.surface, event, data)
                if hang_up and state.text:
                    resp.close()  # drop the connection, as a client that went away does
                    return done(Verdict.HUNG_UP, "")
    except (aiohttp.ClientError, TimeoutError) as exc:
        state.broken = f"{type(exc).__name__}: {exc}"
    return done(*state.judge())


async def _sse(resp: aiohttp.ClientResponse) -> Any:
    """``(event name, data)`` per SSE event of ``resp``; comments skipped, multi-line data joined."""
    event, data = "", list[str]()
    async for raw in resp.content:
        line = raw.decode().rstrip("\r\n")
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "", list[str]()
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
    if data:
        yield event, "\n".join(data)


# -- non-stream answers ---------------------------------------------------------------------------------


def _judge_body(surface: Surface, raw: bytes) -> tuple[Verdict, str]:
    try:
        doc = orjson.loads(raw)
        text, finished = _body_text(surface, doc)
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
        return Verdict.FAILED, f"unreadable answer ({type(exc).__name__}): {raw[:200]!r}"
    if text != TEXT or not finished:
        return Verdict.FAILED, f"wrong answer (finished={finished}): {raw[:200]!r}"
    return Verdict.OK, ""


def _body_text(surface: Surface, doc: Any) -> tuple[str, bool]:
    if surface == "chat":
        choice = doc["choices"][0]
        return choice["message"]["content"], choice["finish_reason"] == "stop"
    if surface == "messages":
        text = "".join(b["text"] for b in doc["content"] if b["type"] == "text")
        return text, doc["stop_reason"] == "end_turn"
    if surface == "responses":
        return doc["output_text"], doc["status"] == "completed"
    cand = doc["candidates"][0]
    return "".join(p.get("text", "") for p in cand["content"]["parts"]), cand.get("finishReason") == "STOP"


# -- streams ----------------------------------------------------------------------------------------------


class _StreamState:
    """What one stream has shown so far: its text, whether it ended normally, its in-band errors, and
    anything after its end (a frame after the terminator is a broken stream too)."""

    def __init__(self) -> None:
        self.text = ""
        self.finished = False
        self.errors = 0
        self.terminated = False
        self.after_end = 0
        self.broken = ""

    def feed(self, surface: Surface, event: str, data: str) -> None:
        if self.terminated:
            self.after_end += 1
            return
        if surface == "chat" and data == "[DONE]":
            self.terminated = True
            return
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError:
            self.broken = f"unparsable frame {data[:80]!r}"
            return
        if surface == "chat":
            self._chat(doc)
        elif surface == "messages":
            self._messages(event or doc.get("type", ""), doc)
        elif surface == "responses":
            self._responses(doc)
        else:
            self._gemini(doc)

    def _chat(self, doc: dict[str, Any]) -> None:
        if "error" in doc:
            self.errors += 1
            return
        for choice in doc.get("choices", []):
            self.text += choice.get("delta", {}).get("content") or ""
            if choice.get("finish_reason") == "stop":
                self.finished = True

    def _messages(self, name: str, doc: dict[str, Any]) -> None:
        if name == "content_block_delta" and doc["delta"].get("type") == "text_delta":
            self.text += doc["delta"]["text"]
        elif name == "message_delta" and doc["delta"].get("stop_reason") == "end_turn":
            self.finished = True
        elif name == "message_stop":
            self.terminated = True
        elif name == "error":
            self.errors += 1
            self.terminated = True  # the Messages stream ends at its error event

    def _responses(self, doc: dict[str, Any]) -> None:
        kind = doc.get("type")
        if kind == "response.output_text.delta":
            self.text += doc["delta"]
        elif kind == "response.completed":
            self.finished = doc["response"]["output_text"] == TEXT
            self.terminated = True
        elif kind in ("response.failed", "error"):
            self.errors += 1
            self.terminated = True

    def _gemini(self, doc: dict[str, Any]) -> None:
        if "error" in doc:
            self.errors += 1
            self.terminated = True  # the error element is the stream's last
            return
        cand = doc["candidates"][0]
        self.text += "".join(p.get("text", "") for p in cand.get("content", {}).get("parts", []))
        if cand.get("finishReason") == "STOP":
            self.finished = self.terminated = True

    def judge(self) -> tuple[Verdict, str]:
        committed = bool(self.text)
        summary = (
            f"text={self.text[:40]!r} finished={self.finished} errors={self.errors} "
            f"terminated={self.terminated} after_end={self.after_end} broken={self.broken!r}"
        )
        if self.broken or self.after_end:
            return (Verdict.UNTERMINATED if committed else Verdict.FAILED), summary
        if self.terminated and self.finished and not self.errors and self.text == TEXT:
            return Verdict.OK, ""
        if (
            committed
            and self.terminated
            and self.errors == 1
            and not self.finished
            and TEXT.startswith(self.text)
        ):
            return Verdict.IN_BAND, summary
        return (Verdict.UNTERMINATED if committed else Verdict.FAILED), summary
