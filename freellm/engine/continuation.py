"""Mid-stream continuation (``stream.continue_on_failure``, docs/continuation.md).

Without it, an upstream that dies after the stream committed ends the client's stream with an honest
in-band error. With it, the driver raises :class:`StreamDied` instead; the fallback loop books the
failure like any other, picks the route a failover would have chosen, and runs a *continuation
attempt*: the request plus the partial answer as an assistant prefill and an instruction to go on
from there. That attempt's text is spliced into the same client stream — same chunk id, no second
role, no reasoning — through :class:`ContinuationFilter`, which also trims a continuation that starts
by repeating what the client already has (:class:`PrefillTrimmer`). If no route can continue, the
loop calls :meth:`StreamDied.give_up`: the in-band error, as without the setting.

Everything here is pure and sans-IO except :class:`StreamDied`'s ``give_up`` callback, which is the
driver's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from freellm.core.chunks import MARKER_KEY, Chunk
from freellm.core.request import ChatRequest
from freellm.errors import UpstreamError

if TYPE_CHECKING:
    from freellm.engine.context import TurnOutcome

__all__ = [
    "CONTINUE_INSTRUCTION",
    "ContinuationFilter",
    "PrefillTrimmer",
    "Resume",
    "StreamDied",
    "can_continue",
    "continuation_request",
    "marker",
    "spliced",
    "summed_usage",
]

CONTINUE_INSTRUCTION = (
    "Your previous answer (the assistant message above) was cut off mid-way. Continue it exactly from "
    "the point where it stops: do not repeat any of it, do not comment on the interruption, and start "
    "with the very next characters."
)
_WINDOW = 64
"""Continuation characters held (at most) to recognise a repeat of the prefill's end."""
_MIN_OVERLAP = 8
"""A repeated tail shorter than this is taken as coincidence, not a repeat."""


@dataclass(frozen=True, slots=True)
class Resume:
    """What the client already has of a committed stream, for the route that continues it."""

    text: str
    """Every character of the answer the client has received (all attempts so far)."""
    chunk_id: str
    created: int
    model: str
    """The model name the client's chunks carry (the first route's)."""
    origin: str
    """``provider/model`` of the route the stream started on (``continued_from``)."""
    prompt_tokens: int
    completion_tokens: int
    """Usage of the attempts so far (reported, else estimated), added to the continuation's."""
    ttfb_ms: int | None


class StreamDied(Exception):
    """A committed stream's upstream died (a cut or a stall) where a continuation may pick it up."""

    def __init__(
        self, error: UpstreamError, resume: Resume, give_up: Callable[[], Awaitable[TurnOutcome]]
    ) -> None:
        super().__init__(error.message)
        self.error = error
        self.resume = resume
        self.give_up = give_up
        """End the stream in-band (as without continuation) and return the turn's outcome."""


def can_continue(error: UpstreamError) -> bool:
    """Only an upstream that *died* is continued — a cut or a stall — never one that answered with an
    error (an in-band error event is the provider's verdict, not an accident)."""
    return error.transport or error.timeout


def continuation_request(req: ChatRequest, text: str) -> ChatRequest:
    """``req`` with the partial answer as an assistant prefill and the instruction to continue it."""
    return req.replace(
        messages=[
            *req.messages,
            {"role": "assistant", "content": text},
            {"role": "user", "content": CONTINUE_INSTRUCTION},
        ]
    )


def marker(origin: str, served: str) -> dict[str, Any]:
    return {"continued_from": origin, "continued_on": served}


def summed_usage(usage: dict[str, Any], resume: Resume) -> dict[str, Any]:
    """A continuation's usage plus what the attempts before it used: one turn, one bill."""
    out = dict(usage)
    prompt = usage.get("prompt_tokens")
    completion = usage.get("completion_tokens")
    out["prompt_tokens"] = (prompt if isinstance(prompt, int) else 0) + resume.prompt_tokens
    out["completion_tokens"] = (completion if isinstance(completion, int) else 0) + resume.completion_tokens
    out["total_tokens"] = out["prompt_tokens"] + out["completion_tokens"]
    return out


def spliced(out: list[Chunk], resume: Resume, served: str) -> None:
    """The continuation's closing chunks, as the client's stream must end: the finish chunk says the
    turn was continued (:data:`MARKER_KEY`), the usage chunk counts the whole turn."""
    for chunk in out:
        choices = chunk.get("choices")
        if choices and isinstance(choices[0], dict) and choices[0].get("finish_reason"):
            chunk[MARKER_KEY] = marker(resume.origin, served)
        usage = chunk.get("usage")
        if not choices and isinstance(usage, dict):
            chunk["usage"] = summed_usage(usage, resume)  # a copy: the pump's own figures stay its own


class PrefillTrimmer:
    """Drops a continuation's repeat of the prefill: the whole of it (the model started over), or its
    last characters (it repeated the cut sentence). Holds at most :data:`_WINDOW` characters (or the
    prefill's length, while the continuation could still be the prefill again) before deciding."""

    __slots__ = ("_decided", "_held", "_prefill")

    def __init__(self, prefill: str) -> None:
        self._prefill = prefill
        self._held = ""
        self._decided = not prefill

    def feed(self, text: str) -> str:
        """The text to send now (possibly "" while undecided)."""
        if self._decided:
            return text
        self._held += text
        held, prefill = self._held, self._prefill
        if prefill.startswith(held) and len(held) < len(prefill):
            return ""  # could still be the whole prefill again
        if len(held) < min(len(prefill), _WINDOW):
            return ""  # could still open with a repeat of the prefill's end
        return self._decide()

    def finish(self) -> str:
        """The end of the continuation: what is still held, trimmed."""
        return "" if self._decided else self._decide()

    def _decide(self) -> str:
        self._decided = True
        held, prefill = self._held, self._prefill
        self._held = ""
        if held.startswith(prefill):
            return held[len(prefill) :]
        if prefill.startswith(held):  # the continuation was only (part of) the prefill again
            return ""
        for size in range(min(len(held), len(prefill)), _MIN_OVERLAP - 1, -1):
            if prefill.endswith(held[:size]):
                return held[size:]
        return held


class ContinuationFilter:
    """Makes a continuation attempt's upstream chunks look like more of the committed stream: the
    first attempt's id and creation time, no role (the client has one), no reasoning (the model
    thinking about how to go on is not part of the answer), content through the trimmer."""

    __slots__ = ("_created", "_id", "trimmer")

    def __init__(self, resume: Resume) -> None:
        self._id = resume.chunk_id
        self._created = resume.created
        self.trimmer = PrefillTrimmer(resume.text)

    def chunk(self, chunk: Chunk) -> Chunk:
        chunk["id"] = self._id
        chunk["created"] = self._created
        choices = chunk.get("choices")
        if choices and isinstance(choices[0], dict):
            delta = choices[0].get("delta")
            if isinstance(delta, dict):
                for key in ("role", "reasoning_content", "reasoning", "reasoning_signature"):
                    delta.pop(key, None)
                content = delta.get("content")
                if isinstance(content, str) and content:
                    delta["content"] = self.trimmer.feed(content)
        return chunk

    def rest(self, model: str) -> Chunk | None:
        """The trimmer's held text as one last content chunk (before the pump finishes), if any."""
        text = self.trimmer.finish()
        if not text:
            return None
        return {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": model,
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
        }
