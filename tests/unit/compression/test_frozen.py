"""Frozen system prompts (all engines) and the cache-control prefix (lossy engines only)."""

from __future__ import annotations

from freellm.compression.frozen import FrozenPrompts, cache_control_prefix
from tests.unit.compression.helpers import call, make_compressor, result

MESSY_SYSTEM = "You are terse.   \n\n\n\nAnswer in English."


def convo(user: str) -> list[dict[str, object]]:
    return [{"role": "system", "content": MESSY_SYSTEM}, {"role": "user", "content": user}]


def test_system_prompt_freezes_from_its_third_compressed_request() -> None:
    c = make_compressor("lossless")
    seen = []
    for k in range(4):
        out = c.compress(convo(f"question {k}   \n\n\n\nplease"), mode="lossless")
        seen.append(out.messages[0]["content"])
        assert out.messages[1]["content"] == f"question {k}\n\nplease"  # the rest still compressed
    assert seen[0] == seen[1] == "You are terse.\n\nAnswer in English."
    assert seen[2] == seen[3] == MESSY_SYSTEM


def test_preview_does_not_count_towards_freezing() -> None:
    c = make_compressor("lossless")
    for _ in range(5):
        c.compress(convo("q"), mode="lossless", record=False)
    assert c.compress(convo("q"), mode="lossless").messages[0]["content"] != MESSY_SYSTEM


def test_prefix_freeze_off() -> None:
    c = make_compressor("lossless", prefix_freeze=False)
    for _ in range(4):
        out = c.compress(convo("q"), mode="lossless")
    assert out.messages[0]["content"] != MESSY_SYSTEM


def test_frozen_duplicate_system_message_is_not_dropped() -> None:
    c = make_compressor("lossless")
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "u"}, {"role": "system", "content": "S"}]
    for _ in range(2):
        assert len(c.compress(msgs, mode="lossless").messages) == 2
    assert len(c.compress(msgs, mode="lossless").messages) == 3


def test_memory_is_lru_bounded_and_per_instance() -> None:
    f = FrozenPrompts(size=2, threshold=2)
    sys_a = [{"role": "system", "content": "a"}]
    assert f.frozen(sys_a, record=True) == frozenset()
    assert f.frozen(sys_a, record=True) == {0}
    for t in ("b", "c"):
        f.frozen([{"role": "system", "content": t}], record=True)
    assert len(f) == 2
    assert f.frozen(sys_a, record=False) == frozenset()  # "a" was evicted
    assert FrozenPrompts().frozen(sys_a, record=False) == frozenset()


def test_cache_control_prefix_rule() -> None:
    plain = [{"role": "user", "content": "x"}]
    assert cache_control_prefix(plain) == 0
    parts = [
        {"role": "system", "content": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}]},
        {"role": "user", "content": "a"},
        {"role": "user", "content": [{"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}]},
        {"role": "user", "content": "c"},
    ]
    assert cache_control_prefix(parts) == 3
    assert cache_control_prefix([{"role": "user", "content": "a", "cache_control": {"type": "ephemeral"}}]) == 1


def _log(n: int) -> str:
    return "\n".join(f"tests/t.py::test_{k} PASSED" for k in range(n)) + "\n1 failed, 199 passed"


def test_cache_control_prefix_blocks_lossy_engines_only() -> None:
    cc = {"type": "ephemeral"}
    msgs = [
        {"role": "system", "content": "sys"},
        call("c1", "bash", command="pytest -v"),
        result("c1", _log(200) + "   \n\n\n\n"),
        {"role": "user", "content": [{"type": "text", "text": "look", "cache_control": cc}]},
        call("c2", "bash", command="pytest -v"),
        result("c2", _log(200)),
    ]
    out = make_compressor("standard").compress(msgs, mode="standard")
    prefixed, after = out.messages[2]["content"], out.messages[5]["content"]
    assert prefixed == _log(200)  # lite (lossless) trimmed it, toolfilter (lossy) did not touch it
    assert "PASSED" not in after
    explicit = make_compressor("standard").compress(msgs, mode="standard", cache_prefix=0)
    assert "PASSED" not in explicit.messages[2]["content"]
    everything = make_compressor("standard").compress(msgs, mode="standard", cache_prefix=99)
    assert "PASSED" in everything.messages[5]["content"]
