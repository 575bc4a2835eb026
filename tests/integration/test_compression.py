"""Over the wire: prompt compression as the first pipeline stage on every surface it serves, the
``X-FreeLLM-Compress`` header contract, the admin stats and preview, and its part in the cache key.

The simulator's request log shows what went upstream; the client's own request is never changed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from freellm.sim import SimServer
from freellm.sim.control import SimControl
from tests.harness import CLIENT_KEY, BackgroundLoop, GatewayServer, unique
from tests.integration.helpers import MODEL, MakeGateway, anthropic_sdk, mixed_gateways, received, sdk

ADMIN_KEY = "sk-admin-compress"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
OPENAI_AUTH = {"Authorization": f"Bearer {CLIENT_KEY}"}
ANTHROPIC_AUTH = {"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"}
GEMINI_AUTH = {"x-goog-api-key": CLIENT_KEY}

BLOCK = "\n".join(f"src/module_{i}.py: compiled cleanly with the release profile" for i in range(6))
"""A tool-output block an agent sends twice: the second copy is what dedup replaces."""
FIRST = BLOCK + "\n\nfirst question"
SECOND = BLOCK + "\n\nwhat now?"


def turns() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": FIRST},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": SECOND},
    ]


def compressing_gateway(
    make_gateway: MakeGateway, mode: str = "standard", **compression: Any
) -> tuple[GatewayServer, str]:
    alpha = unique("alpha")
    extra = {"compression": {"mode": mode, **compression}, "auth": {"admin_keys": [ADMIN_KEY]}}
    return make_gateway({alpha: [MODEL]}, extra=extra), alpha


def chat(gw: GatewayServer, headers: dict[str, str] | None = None, **fields: Any) -> httpx.Response:
    payload = {"model": "auto", "messages": turns(), **fields}
    return httpx.post(f"{gw.v1}/chat/completions", json=payload, headers={**OPENAI_AUTH, **(headers or {})}, timeout=15)


def saved_of(header: str) -> tuple[str, int]:
    mode, _, saved = header.partition("; saved~=")
    return mode, int(saved)


def last_user_upstream(sim_control: SimControl, provider: str) -> str:
    messages = received(sim_control, provider)[-1]["messages"]
    text: str = [m for m in messages if m["role"] == "user"][-1]["content"]
    return text


def test_chat_is_compressed_upstream_and_says_so(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, alpha = compressing_gateway(make_gateway)
    raw = sdk(gw).chat.completions.with_raw_response.create(model="auto", messages=turns())  # type: ignore[arg-type]
    mode, saved = saved_of(raw.headers["x-freellm-compress"])
    assert mode == "standard" and saved > 0
    assert raw.parse().choices[0].message.content
    sent = last_user_upstream(sim_control, alpha)
    assert sent.startswith("[repeated from earlier in this conversation:") and sent.endswith("what now?")
    first_user = received(sim_control, alpha)[-1]["messages"][0]["content"]
    assert first_user == FIRST  # the first copy stays whole: nothing is lost


def test_streams_carry_the_header(make_gateway: MakeGateway) -> None:
    gw, _ = compressing_gateway(make_gateway)
    with httpx.stream(
        "POST", f"{gw.v1}/chat/completions", json={"model": "auto", "stream": True, "messages": turns()}, headers=OPENAI_AUTH
    ) as resp:
        assert resp.status_code == 200
        assert saved_of(resp.headers["X-FreeLLM-Compress"])[1] > 0
        assert "[DONE]" in resp.read().decode()


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("lossless", "lossless"),
        ("standard", "standard"),
        ("aggressive", "standard"),  # never stronger than the operator's mode
        ("on", "standard"),
        ("TRUE", "standard"),
        ("whatever", "standard"),  # malformed: the default, never an error
        ("", "standard"),
    ],
)
def test_header_can_only_lower_the_mode(make_gateway: MakeGateway, header: str, expected: str) -> None:
    gw, _ = compressing_gateway(make_gateway)
    resp = chat(gw, headers={"X-FreeLLM-Compress": header})
    assert resp.status_code == 200
    assert saved_of(resp.headers["X-FreeLLM-Compress"])[0] == expected


@pytest.mark.parametrize("header", ["off", "no", "0", "false", "bypass", "skip"])
def test_header_turns_it_off(make_gateway: MakeGateway, sim_control: SimControl, header: str) -> None:
    gw, alpha = compressing_gateway(make_gateway)
    resp = chat(gw, headers={"X-FreeLLM-Compress": header})
    assert resp.headers["X-FreeLLM-Compress"] == "off; saved~=0"
    assert last_user_upstream(sim_control, alpha) == SECOND


def test_operator_off_is_a_master_switch(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, alpha = compressing_gateway(make_gateway, mode="off")
    resp = chat(gw, headers={"X-FreeLLM-Compress": "aggressive"})
    assert resp.status_code == 200 and "X-FreeLLM-Compress" not in resp.headers
    assert last_user_upstream(sim_control, alpha) == SECOND


def test_responses_surface_compresses_outbound_but_stores_the_original(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, alpha = compressing_gateway(make_gateway)
    items = [
        {"role": "user", "content": FIRST},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": SECOND},
    ]
    raw = sdk(gw).responses.with_raw_response.create(model="auto", input=items)  # type: ignore[arg-type]
    assert saved_of(raw.headers["x-freellm-compress"])[1] > 0
    response = raw.parse()
    assert last_user_upstream(sim_control, alpha).startswith("[repeated from earlier")
    doc = gw.run(gw.state.store.get_response(response.id, time.time()))
    assert doc is not None and json.dumps(doc["input"]).count("src/module_5.py") == 2  # both copies kept
    # The next turn chains on the original input and is compressed again on the way out.
    follow = sdk(gw).responses.with_raw_response.create(
        model="auto", input="and then?", previous_response_id=response.id
    )
    assert saved_of(follow.headers["x-freellm-compress"])[1] > 0


def test_messages_surface_and_its_count_tokens(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, alpha = compressing_gateway(make_gateway)
    claude = anthropic_sdk(gw)
    raw = claude.messages.with_raw_response.create(model="claude-sonnet-4-5", max_tokens=64, messages=turns())  # type: ignore[arg-type]
    assert saved_of(raw.headers["x-freellm-compress"])[1] > 0
    assert last_user_upstream(sim_control, alpha).startswith("[repeated from earlier")
    payload = {"model": "claude-sonnet-4-5", "messages": turns()}
    counted = httpx.post(f"{gw.base_url}/v1/messages/count_tokens", json=payload, headers=ANTHROPIC_AUTH)
    plain = httpx.post(
        f"{gw.base_url}/v1/messages/count_tokens", json=payload, headers={**ANTHROPIC_AUTH, "X-FreeLLM-Compress": "off"}
    )
    assert counted.status_code == plain.status_code == 200
    _, saved = saved_of(counted.headers["X-FreeLLM-Compress"])
    assert plain.headers["X-FreeLLM-Compress"] == "off; saved~=0"
    assert 0 < counted.json()["input_tokens"] < plain.json()["input_tokens"]
    assert plain.json()["input_tokens"] - counted.json()["input_tokens"] in range(saved - 1, saved + 2)


def gemini_contents() -> list[dict[str, Any]]:
    return [
        {"role": "user", "parts": [{"text": FIRST}]},
        {"role": "model", "parts": [{"text": "ok"}]},
        {"role": "user", "parts": [{"text": SECOND}]},
    ]


def test_gemini_surface_and_its_count_tokens(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, alpha = compressing_gateway(make_gateway)
    url = f"{gw.base_url}/v1beta/models/gemini-2.5-flash"
    resp = httpx.post(f"{url}:generateContent", json={"contents": gemini_contents()}, headers=GEMINI_AUTH)
    assert resp.status_code == 200 and saved_of(resp.headers["X-FreeLLM-Compress"])[1] > 0
    assert last_user_upstream(sim_control, alpha).startswith("[repeated from earlier")
    counted = httpx.post(f"{url}:countTokens", json={"contents": gemini_contents()}, headers=GEMINI_AUTH)
    plain = httpx.post(
        f"{url}:countTokens", json={"contents": gemini_contents()}, headers={**GEMINI_AUTH, "X-FreeLLM-Compress": "off"}
    )
    assert counted.status_code == plain.status_code == 200
    assert saved_of(counted.headers["X-FreeLLM-Compress"])[1] > 0
    assert counted.json()["totalTokens"] < plain.json()["totalTokens"]


def test_completions_prompts_are_never_rewritten(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, alpha = compressing_gateway(make_gateway)
    prompt = "def f():\n\n\n\n    return 1   \n"
    resp = httpx.post(f"{gw.v1}/completions", json={"model": "auto", "prompt": prompt}, headers=OPENAI_AUTH)
    assert resp.status_code == 200 and "X-FreeLLM-Compress" not in resp.headers
    assert prompt in json.dumps(received(sim_control, alpha)[-1]["messages"][-1]["content"])[1:-1].replace("\\n", "\n")


def test_refusals_after_compression_carry_the_header(make_gateway: MakeGateway) -> None:
    alpha = unique("alpha")
    gw = make_gateway(
        {alpha: [MODEL]},
        extra={"compression": {"mode": "lossless"}},
        model_options={f"{alpha}/{MODEL}": {"tools": False}},
    )
    resp = chat(gw, tools=[{"type": "function", "function": {"name": "f"}}])
    assert resp.status_code == 422 and resp.json()["error"]["code"] == "no_tools_model"
    assert saved_of(resp.headers["X-FreeLLM-Compress"])[0] == "lossless"


def test_compression_mode_is_part_of_the_cache_key(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, alpha = compressing_gateway(make_gateway, mode="aggressive")
    on = {"X-FreeLLM-Cache": "on"}
    seen = []
    for mode in ("lossless", "standard", "lossless", "off", "standard"):
        resp = chat(gw, headers={**on, "X-FreeLLM-Compress": mode})
        seen.append(resp.headers["X-FreeLLM-Cache"])
    assert seen == ["MISS", "MISS", "HIT", "MISS", "HIT"]
    assert len(received(sim_control, alpha)) == 3


def test_admin_stats_and_a_preview_that_records_nothing(make_gateway: MakeGateway) -> None:
    gw, _ = compressing_gateway(make_gateway)
    chat(gw)
    chat(gw, headers={"X-FreeLLM-Compress": "off"})
    stats = httpx.get(f"{gw.base_url}/admin/compression/stats", headers=ADMIN).json()
    assert stats["requests"] == 1 and stats["compressed"] == 1
    assert stats["chars_after"] < stats["chars_before"]
    assert stats["engines"]["dedup"]["applied"] == 1 and stats["engines"]["dedup"]["saved_chars"] > 0
    assert stats["filter_errors"] == []
    assert "src/module" not in json.dumps(stats)  # numbers only, never message text

    preview = httpx.post(
        f"{gw.base_url}/admin/compression/preview", json={"messages": turns(), "mode": "lossless"}, headers=ADMIN
    )
    assert preview.status_code == 200
    body = preview.json()
    assert body["mode"] == "lossless" and body["saved_tokens"] > 0
    assert body["messages"][2]["content"].startswith("[repeated from earlier")
    assert {s["engine"] for s in body["stages"]} == {"dedup", "lite", "jsoncompact"}
    assert next(s for s in body["stages"] if s["engine"] == "dedup")["applied"] is True
    default = httpx.post(f"{gw.base_url}/admin/compression/preview", json={"messages": turns()}, headers=ADMIN).json()
    assert default["mode"] == "standard"
    assert httpx.get(f"{gw.base_url}/admin/compression/stats", headers=ADMIN).json() == stats


def test_preview_defaults_to_standard_when_off_and_rejects_bad_input(make_gateway: MakeGateway) -> None:
    gw, _ = compressing_gateway(make_gateway, mode="off")
    url = f"{gw.base_url}/admin/compression/preview"
    assert httpx.post(url, json={"messages": turns()}, headers=ADMIN).json()["mode"] == "standard"
    bad_mode = httpx.post(url, json={"messages": turns(), "mode": "extreme"}, headers=ADMIN)
    assert bad_mode.status_code == 400 and "mode" in bad_mode.json()["error"]["message"]
    no_messages = httpx.post(url, json={"mode": "lossless"}, headers=ADMIN)
    assert no_messages.status_code == 400 and no_messages.json()["error"]["type"] == "invalid_request_error"
    assert httpx.post(url, content=b"{not json", headers=ADMIN).status_code == 400
    assert httpx.post(url, json={"messages": turns()}, headers=OPENAI_AUTH).status_code == 401


def test_a_broken_custom_filter_file_is_reported_and_skipped(make_gateway: MakeGateway, tmp_path: Path) -> None:
    filters = tmp_path / "filters"
    filters.mkdir()
    (filters / "broken.json").write_text("{not json")
    (filters / "bad-regex.json").write_text(json.dumps([{"id": "x", "detect": {"content": ["(unclosed"]}}]))
    gw, _ = compressing_gateway(make_gateway, filters_dir=str(filters))
    assert chat(gw).status_code == 200
    errors = httpx.get(f"{gw.base_url}/admin/compression/stats", headers=ADMIN).json()["filter_errors"]
    assert any("broken.json" in e for e in errors) and any("bad-regex.json" in e for e in errors)


def pytest_log(failing: int) -> str:
    lines = [f"tests/test_parser.py::test_case_{i} PASSED [{i // 3}%]" for i in range(300)]
    lines[failing] = f"tests/test_parser.py::test_case_{failing} FAILED [{failing // 3}%]"
    return "\n".join(lines) + "\nE   AssertionError: expected 3, got 4\n===== 1 failed, 299 passed in 4.20s ====="


def test_lossy_engines_spare_the_cache_control_prefix(
    servers_loop: BackgroundLoop, sim: SimServer, tmp_path: Path, sim_control: SimControl
) -> None:
    """An Anthropic client marks a cache breakpoint; a standard-mode toolfilter may shrink the test log
    sent after it, never the one before it (the provider's prompt cache must keep hitting), and the
    markers reach the Anthropic-kind upstream."""
    eph = {"type": "ephemeral"}
    log_before, log_after = pytest_log(40), pytest_log(200)
    messages: Any = [
        {"role": "user", "content": "Run the tests."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "pytest"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": log_before}]},
        {"role": "assistant", "content": "One failure. Fixing it."},
        {"role": "user", "content": [{"type": "text", "text": "Rerun them.", "cache_control": eph}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_2", "name": "bash", "input": {"cmd": "pytest"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": log_after}]},
    ]
    with mixed_gateways(servers_loop, sim, tmp_path, "claude-sonnet-4-5") as make:
        a = unique("ant")
        gw = make({a: "anthropic"}, extra={"compression": {"mode": "standard"}})
        raw = anthropic_sdk(gw).messages.with_raw_response.create(
            model="claude-sonnet-4-5",
            max_tokens=64,
            system=[{"type": "text", "text": "You are a coding agent.", "cache_control": eph}],
            messages=messages,
            tools=[{"name": "bash", "input_schema": {"type": "object"}}],
        )
        assert saved_of(raw.headers["x-freellm-compress"])[1] > 0
        sent = received(sim_control, a)[-1]
    results = [
        block
        for m in sent["messages"]
        for block in (m["content"] if isinstance(m["content"], list) else [])
        if block.get("type") == "tool_result"
    ]
    first, second = (json.dumps(r["content"]) for r in results)
    assert "test_case_150 PASSED" in first  # inside the prefix: untouched
    assert "test_case_150 PASSED" not in second  # after it: the passing lines were filtered…
    assert "test_case_200 FAILED" in second and "AssertionError: expected 3, got 4" in second  # …the signal kept
    assert sent["system"][0]["cache_control"] == eph
    assert any(
        b.get("cache_control") == eph for m in sent["messages"] if isinstance(m["content"], list) for b in m["content"]
    )
