"""Thought signatures: what Gemini gave on one turn, put back on the next.

Gemini thinking models attach an opaque ``thoughtSignature`` to the ``functionCall`` parts they emit, and
Gemini 3 refuses (400) a conversation whose current tool loop replays a function call without it. The
canonical (OpenAI) history a client sends back has no place for it, so the provider remembers every
signature it received, **by tool-call id** (the id the client echoes) and **by function name + canonical
arguments** (for clients that rewrite ids), in a bounded LRU with a TTL, and the request translator looks
them up again. It also remembers which call ids Gemini itself issued (``functionCall.id``): only those are
sent back as ids, since a Gemini that did not issue ids may refuse unknown ``id`` fields.

One :class:`SignatureCache` lives on each :class:`~freellm.providers.gemini.GeminiProvider` (one per app),
never at module level. The clock is injectable for tests.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import orjson

__all__ = [
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_TTL_S",
    "SKIP_SIGNATURE",
    "CallMemo",
    "SignatureCache",
    "canonical_args",
]

DEFAULT_MAX_ENTRIES: Final = 5000
DEFAULT_TTL_S: Final = 1800.0
SKIP_SIGNATURE: Final = "skip_thought_signature_validator"
"""Google's documented sentinel: accept this function call without validating a signature."""


@dataclass(frozen=True, slots=True)
class CallMemo:
    """What is known about one function call Gemini made."""

    signature: str | None
    native_id: bool
    """The call id came from Gemini (``functionCall.id``), so it may be sent back as ``id``."""


def canonical_args(arguments: Any) -> str:
    """A stable text form of call arguments: JSON with sorted keys, whatever the key order or spacing.

    ``arguments`` is the decoded object (from Gemini) or the JSON text (from a client's history);
    text that is not JSON is used as it is.
    """
    value = arguments
    if isinstance(arguments, str | bytes):
        try:
            value = orjson.loads(arguments or "{}")
        except orjson.JSONDecodeError:
            return arguments if isinstance(arguments, str) else arguments.decode("utf-8", "replace")
    if value is None:
        value = {}
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return repr(value)


class SignatureCache:
    """Bounded LRU (``max_entries`` keys) of call memos, each expiring ``ttl_s`` after it was stored."""

    __slots__ = ("_clock", "_entries", "max_entries", "ttl_s")

    def __init__(
        self,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        ttl_s: float = DEFAULT_TTL_S,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = max(1, max_entries)
        self.ttl_s = ttl_s
        self._clock = clock
        self._entries: OrderedDict[tuple[str, ...], tuple[float, CallMemo]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def remember(
        self, call_id: str | None, name: str, arguments: Any, signature: str | None, *, native_id: bool
    ) -> None:
        """Store what one emitted call carried (nothing is stored for a call with nothing to remember)."""
        if not signature and not (native_id and call_id):
            return
        memo = CallMemo(signature or None, native_id)
        expires = self._clock() + self.ttl_s
        if call_id:
            self._put(("id", call_id), expires, memo)
        if signature:
            self._put(("call", name, canonical_args(arguments)), expires, CallMemo(signature, False))

    def by_id(self, call_id: str | None) -> CallMemo | None:
        return self._get(("id", call_id)) if call_id else None

    def by_call(self, name: str, arguments: Any) -> CallMemo | None:
        return self._get(("call", name, canonical_args(arguments)))

    def signature_for(self, call_id: str | None, name: str, arguments: Any) -> str | None:
        """The signature remembered for this call: by id first, then by name and arguments."""
        memo = self.by_id(call_id)
        if memo is not None and memo.signature:
            return memo.signature
        memo = self.by_call(name, arguments)
        return memo.signature if memo is not None else None

    def is_native_id(self, call_id: str | None) -> bool:
        memo = self.by_id(call_id)
        return memo is not None and memo.native_id

    def clear(self) -> None:
        self._entries.clear()

    # ---- storage ---------------------------------------------------------------------------------

    def _put(self, key: tuple[str, ...], expires: float, memo: CallMemo) -> None:
        entries = self._entries
        entries[key] = (expires, memo)
        entries.move_to_end(key)
        while len(entries) > self.max_entries:
            entries.popitem(last=False)

    def _get(self, key: tuple[str, ...]) -> CallMemo | None:
        entries = self._entries
        found = entries.get(key)
        if found is None:
            return None
        expires, memo = found
        if self._clock() >= expires:
            del entries[key]
            return None
        entries.move_to_end(key)
        return memo
