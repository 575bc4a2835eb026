"""Hostile paths and query strings: the routes whose path carries a value (a stored response's id, a
Gemini model and action, a model name) and the query parameters the surfaces read, with arbitrary
percent-encoded bytes, dot segments, huge names and repeated parameters.

Same invariants as the bodies (no 5xx, no traceback, the path's envelope); ``DELETE /v1/responses/{id}``
is fuzzed too, and the seeded stored response must still read back byte for byte at the end.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import quote

import orjson
from hypothesis import given, note
from hypothesis import strategies as st

from tests.fuzz.support import CHAT_MODEL, FuzzGateway, assert_records_intact, check_no_fault, fuzz_settings

_GEMINI_BODY: Final = orjson.dumps({"contents": [{"parts": [{"text": "hi"}]}]})
_ACTIONS: Final = ("generateContent", "streamGenerateContent", "countTokens", "embedContent", "batchEmbedContents", "")


def _segment() -> st.SearchStrategy[str]:
    """One path segment, percent-encoded from arbitrary bytes or text (so ``/`` and ``%`` arrive encoded)."""
    return st.one_of(
        st.binary(max_size=24).map(lambda b: quote(b, safe="")),
        st.text(max_size=24).map(lambda t: quote(t.encode("utf-8", "surrogatepass"), safe="")),
        st.sampled_from(("..", ".", "%2e%2e", "%2F", "%00", "resp_", "x" * 5000, CHAT_MODEL, f"models%2F{CHAT_MODEL}", ":", "::")),
    )


def _query() -> st.SearchStrategy[str]:
    names = st.sampled_from(("alt", "key", "stream", "available", "limit", "model", "pageSize", "pageToken", "x"))
    values = st.one_of(_segment(), st.sampled_from(("sse", "json", "true", "1", "")))
    return st.lists(st.tuples(names, values), max_size=4).map(lambda pairs: "&".join(f"{n}={v}" for n, v in pairs))


def _envelope(path: str, query: str) -> str:
    """Gemini's envelope under its prefixes (``/v1/models/...`` is Gemini's too: the OpenAI surface has
    no route there), and on ``GET /v1/models`` asked with ``?key=`` (how google-genai lists models, so
    the gateway answers it as Gemini); OpenAI's elsewhere."""
    if path.startswith(("/v1beta/", "/v1/models/")):
        return "gemini"
    if path.rstrip("/") == "/v1/models" and any(p.split("=", 1)[0] == "key" for p in query.split("&")):
        return "gemini"
    return "openai"


@fuzz_settings(120)
@given(
    kind=st.sampled_from(("get_response", "delete_response", "gemini_action", "gemini_get", "v1_model", "v1_gemini_action")),
    segment=_segment(),
    action=st.sampled_from(_ACTIONS),
    query=_query(),
)
def test_hostile_paths_and_queries(fuzzed: FuzzGateway, kind: str, segment: str, action: str, query: str) -> None:
    method, body = "GET", b""
    if kind == "get_response":
        path = f"/v1/responses/{segment}"
    elif kind == "delete_response":
        method, path = "DELETE", f"/v1/responses/{segment}"
    elif kind == "gemini_action":
        method, body, path = "POST", _GEMINI_BODY, f"/v1beta/models/{segment}:{action}"
    elif kind == "v1_gemini_action":
        method, body, path = "POST", _GEMINI_BODY, f"/v1/models/{segment}:{action}"
    elif kind == "gemini_get":
        path = f"/v1beta/models/{segment}"
    else:
        path = f"/v1/models/{segment}"
    url = f"{path}?{query}" if query else path
    reply = fuzzed.client.request(method, url, content=body or None, headers={"Content-Type": "application/json"})
    note(f"{method} {url[:300]} -> {reply.status_code} {reply.content[:300]!r}")
    if "x-request-id" not in reply.headers:  # refused by aiohttp's HTTP parser (a request line over 8 KiB)
        check_no_fault(reply.status_code, reply.content)
        assert reply.status_code == 400, reply.status_code
        return
    # As sent: httpx resolves dot segments (``/v1/models/.`` goes out as ``/v1/models/``).
    fuzzed.check(_envelope(reply.request.url.path, reply.request.url.query.decode()), reply)


def test_stored_response_survives_path_fuzzing(fuzzed: FuzzGateway) -> None:
    """Runs after the path fuzzing (which deletes random ids): the seeded records are intact."""
    fuzzed.assert_healthy()
    assert_records_intact(fuzzed)
