"""Key health: which statuses serve, what a key check and a served request change, re-enabling, and the
persisted form (round trip, junk tolerated)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from freellm.routing.health import KeyHealth, KeyStatus

T0 = 1_700_000_000.0
P, K = "groq", "fp-1"


def health_with(status: KeyStatus) -> KeyHealth:
    """A book whose key ``P``/``K`` has ``status``."""
    health = KeyHealth()
    if status == "healthy":
        health.record_check(P, K, 200, T0)
    elif status == "error":
        health.mark_error(P, K, "HTTP 500")
    elif status == "invalid":
        health.record_check(P, K, 401, T0)
    elif status == "disabled":
        for i in range(3):
            health.record_check(P, K, 401, T0 + i)
    assert health.status(P, K) == status
    return health


# ---- serving ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "usable"),
    [("unknown", True), ("healthy", True), ("error", False), ("invalid", False), ("disabled", False)],
)
def test_which_statuses_serve(status: KeyStatus, usable: bool) -> None:
    assert health_with(status).usable(P, K) is usable


def test_an_unseen_key_is_unknown_and_serves() -> None:
    health = KeyHealth()
    assert health.status(P, K) == "unknown"
    assert health.usable(P, K)
    assert health.checked_at(P, K) == 0.0


def test_keys_are_per_provider() -> None:
    health = KeyHealth()
    health.record_check("groq", K, 401, T0)
    assert health.status("groq", K) == "invalid"
    assert health.status("cerebras", K) == "unknown"
    assert health.usable("cerebras", K)


# ---- key checks ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [401, 403])
def test_a_rejected_check_makes_the_key_invalid(code: int) -> None:
    health = KeyHealth()
    assert health.record_check(P, K, code, T0) is True
    assert health.status(P, K) == "invalid"
    assert health.checked_at(P, K) == T0


def test_three_rejections_in_a_row_disable() -> None:
    health = KeyHealth()
    assert health.record_check(P, K, 401, T0) is True
    assert health.record_check(P, K, 403, T0 + 1) is False  # still invalid: no change
    assert health.status(P, K) == "invalid"
    assert health.record_check(P, K, 401, T0 + 2) is True
    assert health.status(P, K) == "disabled"
    assert not health.usable(P, K)


def test_disable_after_is_configurable() -> None:
    health = KeyHealth(disable_after=1)
    health.record_check(P, K, 403, T0)
    assert health.status(P, K) == "disabled"
    patient = KeyHealth(disable_after=5)
    for i in range(4):
        patient.record_check(P, K, 401, T0 + i)
    assert patient.status(P, K) == "invalid"
    patient.record_check(P, K, 401, T0 + 4)
    assert patient.status(P, K) == "disabled"


@pytest.mark.parametrize("code", [200, 204, 299])
def test_a_2xx_makes_healthy_and_resets_the_count(code: int) -> None:
    health = KeyHealth()
    health.record_check(P, K, 401, T0)
    health.record_check(P, K, 401, T0 + 1)
    assert health.record_check(P, K, code, T0 + 2) is True
    assert health.status(P, K) == "healthy"
    # two more rejections are not three in a row
    health.record_check(P, K, 401, T0 + 3)
    health.record_check(P, K, 401, T0 + 4)
    assert health.status(P, K) == "invalid"
    health.record_check(P, K, 401, T0 + 5)
    assert health.status(P, K) == "disabled"


def test_a_2xx_from_unknown_or_healthy() -> None:
    health = KeyHealth()
    assert health.record_check(P, K, 200, T0) is True  # unknown -> healthy
    assert health.record_check(P, K, 200, T0 + 1) is False  # healthy -> healthy
    assert health.checked_at(P, K) == T0 + 1


def test_a_2xx_clears_an_error() -> None:
    health = health_with("error")
    assert health.record_check(P, K, 200, T0) is True
    assert health.status(P, K) == "healthy"


def test_a_transport_failure_changes_nothing_but_the_check_time() -> None:
    health = health_with("invalid")
    assert health.record_check(P, K, None, T0 + 50) is False
    assert health.status(P, K) == "invalid"
    assert health.checked_at(P, K) == T0 + 50
    # ... and does not break the run of rejections either
    health.record_check(P, K, 401, T0 + 51)
    health.record_check(P, K, 401, T0 + 52)
    assert health.status(P, K) == "disabled"


def test_a_transport_failure_leaves_an_unknown_key_unknown() -> None:
    health = KeyHealth()
    assert health.record_check(P, K, None, T0) is False
    assert health.status(P, K) == "unknown"
    assert health.usable(P, K)


@pytest.mark.parametrize("code", [404, 429, 500, 503])
def test_other_answers_change_nothing(code: int) -> None:
    for status in ("unknown", "healthy", "invalid"):
        health = health_with(status)
        assert health.record_check(P, K, code, T0 + 10) is False
        assert health.status(P, K) == status


def test_a_disabled_key_ignores_further_checks() -> None:
    health = health_with("disabled")
    assert health.record_check(P, K, 200, T0 + 10) is False
    assert health.record_check(P, K, 401, T0 + 11) is False
    assert health.status(P, K) == "disabled"


# ---- served requests and errors -----------------------------------------------------------------------


def test_served_moves_error_to_healthy_once() -> None:
    health = health_with("error")
    assert health.served(P, K) is True
    assert health.status(P, K) == "healthy"
    assert health.usable(P, K)
    assert health.served(P, K) is False


@pytest.mark.parametrize("status", ["unknown", "healthy", "invalid", "disabled"])
def test_served_changes_nothing_else(status: KeyStatus) -> None:
    health = health_with(status)
    assert health.served(P, K) is False
    assert health.status(P, K) == status


def test_mark_error_never_overrides_invalid_or_disabled() -> None:
    for status in ("invalid", "disabled"):
        health = health_with(status)
        health.mark_error(P, K, "HTTP 500")
        assert health.status(P, K) == status
    health = health_with("healthy")
    health.mark_error(P, K, "HTTP 500")
    assert health.status(P, K) == "error"
    assert not health.usable(P, K)


# ---- re-enabling --------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["healthy", "error", "invalid", "disabled"])
def test_enable_starts_over_as_unknown(status: KeyStatus) -> None:
    health = health_with(status)
    health.enable(P, K)
    assert health.status(P, K) == "unknown"
    assert health.usable(P, K)
    assert health.checked_at(P, K) == 0.0
    # the run of rejections starts over too
    health.record_check(P, K, 401, T0 + 100)
    health.record_check(P, K, 401, T0 + 101)
    assert health.status(P, K) == "invalid"


def test_enable_of_an_unseen_key_is_harmless() -> None:
    health = KeyHealth()
    health.enable(P, K)
    assert health.status(P, K) == "unknown"


# ---- dump and load --------------------------------------------------------------------------------------


def test_dump_load_round_trip() -> None:
    health = KeyHealth()
    health.record_check("groq", "a", 200, T0)
    health.record_check("groq", "b", 401, T0 + 1)
    health.record_check("groq", "b", 401, T0 + 2)
    for i in range(3):
        health.record_check("cerebras", "c", 403, T0 + i)
    health.mark_error("mistral", "d", "HTTP 502")
    health.record_check("openrouter", "e", None, T0)  # still unknown: not persisted
    raw = health.dump()
    assert set(orjson.loads(raw)) == {"groq\x1fa", "groq\x1fb", "cerebras\x1fc", "mistral\x1fd"}

    restored = KeyHealth()
    restored.load(raw)
    assert restored.status("groq", "a") == "healthy"
    assert restored.checked_at("groq", "a") == T0
    assert restored.status("groq", "b") == "invalid"
    assert restored.status("cerebras", "c") == "disabled"
    assert restored.status("mistral", "d") == "error"
    assert restored.status("openrouter", "e") == "unknown"
    assert restored.dump() == raw
    # the failure count survived: one more rejection disables b
    restored.record_check("groq", "b", 401, T0 + 3)
    assert restored.status("groq", "b") == "disabled"


def test_load_keeps_key_ids_with_separators_in_the_provider_split_once() -> None:
    restored = KeyHealth()
    restored.load(orjson.dumps({"groq\x1fkey\x1fwith": ["invalid", 1, T0, "HTTP 401"]}).decode())
    assert restored.status("groq", "key\x1fwith") == "invalid"


@pytest.mark.parametrize("raw", [None, "", "not json", "[]", "3", '"x"', "null", "{"])
def test_load_ignores_unreadable_documents(raw: str | None) -> None:
    health = KeyHealth()
    health.load(raw)
    assert health.dump() == "{}"


@pytest.mark.parametrize(
    "value",
    [
        ["healthy", 0, T0],  # too short
        ["healthy", 0, T0, "", "extra"],  # too long
        {"status": "healthy"},  # not a list
        "healthy",
        ["sleepy", 0, T0, ""],  # not a status
        [None, 0, T0, ""],
        ["invalid", "1", T0, ""],  # failures not an int
        ["invalid", 1.5, T0, ""],
        ["invalid", 1, "yesterday", ""],  # checked_at not a number
        ["invalid", 1, T0, None],  # reason not a string
    ],
)
def test_load_skips_junk_entries(value: Any) -> None:
    raw = orjson.dumps({f"{P}\x1f{K}": value, "groq\x1fgood": ["disabled", 3, T0, "HTTP 401"]}).decode()
    health = KeyHealth()
    health.load(raw)
    assert health.status(P, K) == "unknown"
    assert health.status("groq", "good") == "disabled"


def test_load_skips_names_without_a_key_id() -> None:
    raw = orjson.dumps({"groq": ["disabled", 3, T0, ""], "groq\x1f": ["disabled", 3, T0, ""]}).decode()
    health = KeyHealth()
    health.load(raw)
    assert health.dump() == "{}"


def test_load_accepts_an_integer_check_time() -> None:
    health = KeyHealth()
    health.load(orjson.dumps({f"{P}\x1f{K}": ["healthy", 0, 1_700_000_000, ""]}).decode())
    assert health.status(P, K) == "healthy"
    assert health.checked_at(P, K) == 1_700_000_000.0
    assert isinstance(health.checked_at(P, K), float)


def test_load_ignores_a_status_that_is_not_a_string() -> None:
    health = KeyHealth()
    health.load('{"p\\u001fk": [["x"], 0, 0, ""], "p\\u001fj": ["invalid", true, 0, ""], "p\\u001fi": ["invalid", 1, 5, "r"]}')
    assert health.status("p", "k") == "unknown" and health.status("p", "j") == "unknown"
    assert health.status("p", "i") == "invalid"
