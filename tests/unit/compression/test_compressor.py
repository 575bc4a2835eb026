"""The Compressor service: config validation, fingerprints, stats, preview, immutability, speed."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest

from freellm.compression import ENGINE_IDS, MODE_ENGINES, Compressor
from freellm.config import CompressionConfig, ConfigError
from tests.golden.compression.make_corpus import numbered, parser_source, pytest_log
from tests.unit.compression.helpers import call, make_compressor, result


def test_mode_sets_and_order() -> None:
    assert ENGINE_IDS == (
        "dedup", "lite", "read-lifecycle", "toolfilter", "jsoncompact", "relevance", "aging", "hard-budget",
    )
    assert MODE_ENGINES["lossless"] == {"dedup", "lite", "jsoncompact"}
    assert MODE_ENGINES["standard"] == MODE_ENGINES["lossless"] | {"read-lifecycle", "toolfilter"}
    assert MODE_ENGINES["aggressive"] == MODE_ENGINES["standard"] | {"relevance", "aging", "hard-budget"}
    stages = make_compressor().compress([{"role": "user", "content": "x  "}], mode="aggressive").stages
    assert [s.engine for s in stages] == list(ENGINE_IDS)


def test_unknown_engine_and_bad_tunables_raise_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown engine 'dedupe'"):
        make_compressor(engines={"dedupe": {}})
    with pytest.raises(ConfigError, match=r"compression\.engines\.toolfilter\.max_lines"):
        make_compressor(engines={"toolfilter": {"max_lines": "many"}})
    with pytest.raises(ConfigError, match=r"compression\.engines\.aging\.liveTurns"):
        make_compressor(engines={"aging": {"liveTurns": 2}})  # snake_case only
    with pytest.raises(ConfigError, match="intensity"):
        make_compressor(engines={"toolfilter": {"intensity": "extreme"}})
    c = make_compressor(engines={"toolfilter": {"max_lines": 40, "intensity": "minimal"}, "aging": {"live_turns": 2}})
    assert c.compress([], mode="standard").messages == []


def test_fingerprint_is_stable_and_isolates_mode_config_and_filters(tmp_path: Path) -> None:
    a, b = make_compressor(), make_compressor()
    assert a.fingerprint("standard") == b.fingerprint("standard")
    assert len(a.fingerprint("standard")) == 16 and int(a.fingerprint("standard"), 16) >= 0
    assert len({a.fingerprint(m) for m in ("off", "lossless", "standard", "aggressive")}) == 4
    assert make_compressor(engines={"toolfilter": {"max_lines": 99}}).fingerprint("standard") != a.fingerprint("standard")
    assert make_compressor(engines={"dedup": {"enabled": False}}).fingerprint("lossless") != a.fingerprint("lossless")
    assert make_compressor(target_tokens=100).fingerprint("standard") != a.fingerprint("standard")
    (tmp_path / "f.json").write_text(json.dumps({"id": "x", "detect": {"toolNames": ["x"]}}))
    with_filter = make_compressor(filters_dir=tmp_path)
    (tmp_path / "f.json").write_text(json.dumps({"id": "x", "detect": {"toolNames": ["y"]}}))
    assert with_filter.fingerprint("standard") != make_compressor(filters_dir=tmp_path).fingerprint("standard")
    with pytest.raises(ValueError):
        a.fingerprint("extreme")


def transcript() -> list[dict[str, object]]:
    return [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "run tests  \n\n\n\nnow"},
        call("c1", "bash", command="pytest -v"),
        result("c1", pytest_log(__import__("random").Random(3))),
    ]


def test_stats_and_preview() -> None:
    c = make_compressor("standard")
    msgs = transcript()
    preview = c.compress(msgs, mode="standard", record=False)
    assert preview.changed
    s = c.stats()
    assert (s["requests"], s["compressed"], s["chars_before"]) == (0, 0, 0)
    assert all(e == {"applied": 0, "discarded": 0, "saved_chars": 0} for e in s["engines"].values())
    out = c.compress(msgs, mode="standard")
    c.compress([{"role": "user", "content": "hi"}], mode="lossless")
    s = c.stats()
    assert (s["requests"], s["compressed"]) == (2, 1)
    assert s["chars_before"] - s["chars_after"] == out.saved_chars
    assert s["est_saved_tokens"] == out.saved_chars // 4
    assert s["engines"]["toolfilter"]["applied"] == 1 and s["engines"]["lite"]["applied"] == 1
    assert s["engines"]["toolfilter"]["saved_chars"] + s["engines"]["lite"]["saved_chars"] == out.saved_chars
    assert s["by_mode"]["standard"] == {"requests": 1, "compressed": 1, "saved_chars": out.saved_chars}
    assert s["by_mode"]["lossless"]["compressed"] == 0
    assert set(s) >= {"requests", "compressed", "chars_before", "chars_after", "engines", "filter_errors"}
    assert "pytest" not in json.dumps(s)  # no bodies


def test_outcome_fields_and_header() -> None:
    out = make_compressor("standard").compress(transcript(), mode="standard")
    assert out.saved_chars == out.chars_before - out.chars_after > 0
    assert out.saved_tokens == out.saved_chars // 4
    assert out.header == f"standard; saved~={out.saved_tokens}"


def test_input_never_mutated_and_unchanged_messages_shared() -> None:
    msgs = transcript()
    snapshot = copy.deepcopy(msgs)
    out = make_compressor().compress(msgs, mode="aggressive", target_tokens=50)
    assert msgs == snapshot
    assert out.messages is not msgs
    assert out.messages[0] is msgs[0] and out.messages[2] is msgs[2]
    assert out.messages[3] is not msgs[3] and out.messages[3]["tool_call_id"] == "c1"


def test_nothing_to_do_is_cheap_and_identity_preserving() -> None:
    msgs = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
    out = make_compressor().compress(msgs, mode="aggressive")
    assert not out.changed and out.saved_tokens == 0
    assert all(a is b for a, b in zip(out.messages, msgs, strict=True))
    off = make_compressor().compress(msgs, mode="off")
    assert off.stages == [] and off.messages == msgs and off.messages is not msgs
    with pytest.raises(ValueError):
        make_compressor().compress(msgs, mode="max")


def test_only_string_content_is_rewritten() -> None:
    parts = [{"type": "text", "text": "a  \n\n\n\nb"}, {"type": "image_url", "image_url": {"url": "data:x"}}]
    msgs = [{"role": "user", "content": parts, "name": "bob"}, {"role": "user", "content": "a  \n\n\n\nb", "name": "al"}]
    out = make_compressor().compress(msgs, mode="aggressive")
    assert out.messages[0] is msgs[0]
    assert out.messages[1] == {"role": "user", "content": "a\n\nb", "name": "al"}


def test_no_state_shared_between_compressors() -> None:
    a = make_compressor("lossless")
    b = Compressor(CompressionConfig(mode="lossless"), filters_dir=None)
    a.compress(transcript(), mode="lossless")
    assert b.stats()["requests"] == 0


def big_transcript(chars: int) -> list[dict[str, object]]:
    import random

    rng = random.Random(7)
    msgs: list[dict[str, object]] = [{"role": "system", "content": "You are an agent."}]
    n = 0
    while sum(len(str(m.get("content") or "")) for m in msgs) < chars:
        n += 1
        src = numbered(parser_source(1 + n % 2)).replace("MAX_DEPTH", f"MAX_DEPTH_{n}")
        msgs.append({"role": "user", "content": f"Step {n}: look at src/m{n}.py, the value {rng.random():.6f} is wrong."})
        msgs += [call(f"r{n}", "read_file", path=f"src/m{n % 7}.py"), result(f"r{n}", src)]
        msgs += [call(f"t{n}", "bash", command="pytest -v"), result(f"t{n}", pytest_log(rng, 300, n % 300))]
        rows = [{"id": n * 100 + k, "v": rng.random()} for k in range(20)]
        msgs += [call(f"j{n}", "query"), result(f"j{n}", json.dumps(rows, indent=2))]
    return msgs


def test_600k_chars_standard_well_under_a_second() -> None:
    msgs = big_transcript(600_000)
    c = make_compressor("standard")
    started = time.perf_counter()
    out = c.compress(msgs, mode="standard")
    elapsed = time.perf_counter() - started
    assert out.chars_before >= 600_000 and out.saved_chars > out.chars_before // 2
    assert elapsed < 1.0, f"{elapsed:.2f}s"
