"""toolfilter's rules: built-in detection, custom filter files (valid ones used, broken ones reported and
skipped), the 100-rule cap."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from freellm.compression.filters import BUILTIN_RULES, MAX_CUSTOM_RULES, load_custom_filters
from tests.unit.compression.helpers import call, make_compressor, result


def pick(name: str, text: str, command: str | None = None) -> str:
    from freellm.compression.engines.toolfilter import _pick

    rule = _pick(BUILTIN_RULES, name, command, text)
    assert rule is not None
    return rule.id


@pytest.mark.parametrize(
    ("name", "command", "text", "rule"),
    [
        ("bash", "git status", "whatever", "git"),
        ("bash", None, "On branch main\nnothing to commit", "git"),
        ("bash", "npm install", "x", "installs"),
        ("bash", None, "Collecting requests\n  Downloading requests-2.0.whl", "installs"),
        ("bash", "pytest -q", "x", "test-runners"),
        ("bash", None, "tests/a.py::test_x PASSED [100%]", "test-runners"),
        ("bash", None, "   Compiling serde v1.0.1", "cargo"),
        ("bash", None, "src/a.ts(3,5): error TS2322: Type", "tsc"),
        ("bash", "ruff check .", "x", "lint"),
        ("bash", None, "Step 1/4 : FROM python", "docker"),
        ("list_dir", None, "a\nb", "file-lists"),
        ("grep", None, "a\nb", "search"),
        ("bash", None, '{"a": [1, 2]}', "json"),
        ("bash", "git log --format=json", '[{"a": 1}]', "json"),
        ("bash", None, "Traceback (most recent call last):\n  File \"x.py\", line 1", "stack-traces"),
        ("bash", None, "hello", "catch-all"),
    ],
)
def test_builtin_detection(name: str, command: str | None, text: str, rule: str) -> None:
    assert pick(name, text, command) == rule


def write(dirpath: Path, name: str, data: object) -> None:
    (dirpath / name).write_text(data if isinstance(data, str) else json.dumps(data))


GOOD = {
    "id": "deploy-log",
    "detect": {"toolNames": ["deploy"]},
    "dropLines": [{"pattern": "^uploading chunk", "unless": "retry"}],
    "headTail": False,
}


def test_custom_filter_is_used_before_builtins(tmp_path: Path) -> None:
    write(tmp_path, "10-deploy.json", GOOD)
    c = make_compressor("standard", filters_dir=tmp_path)
    assert c.filter_errors == []
    assert c.filters[0].id == "deploy-log"
    log = "\n".join(f"uploading chunk {k}" for k in range(50)) + "\nuploading chunk 7 retry\ndeployed v2 in 41s"
    out = c.compress([call("d1", "deploy"), result("d1", log)], mode="standard")
    assert out.messages[1]["content"] == "uploading chunk 7 retry\ndeployed v2 in 41s"


def test_broken_files_are_reported_and_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write(tmp_path, "a-good.json", {"rules": [GOOD]})
    write(tmp_path, "b-not-json.json", "{nope")
    write(tmp_path, "c-bad-schema.json", [{"id": "x", "detect": {"toolNames": ["t"]}, "maxChars": -1}])
    write(tmp_path, "d-bad-regex.json", {"id": "y", "detect": {"content": ["(unclosed"]}})
    write(tmp_path, "e-detects-nothing.json", {"id": "z"})
    write(tmp_path, "f-unknown-field.json", {"id": "w", "catch_all": True, "colour": "red"})
    write(tmp_path, "g-wrong-shape.json", "42")
    write(tmp_path, "ignored.txt", "not a filter")
    with caplog.at_level(logging.WARNING, logger="freellm.compression"):
        c = make_compressor("standard", filters_dir=tmp_path)
    errors = c.filter_errors
    assert [e.split(":")[0] for e in errors] == [
        "b-not-json.json", "c-bad-schema.json", "d-bad-regex.json", "e-detects-nothing.json",
        "f-unknown-field.json", "g-wrong-shape.json",
    ]
    assert "not valid JSON" in errors[0]
    assert "max_chars" in errors[1] or "maxChars" in errors[1]
    assert "bad regex" in errors[2]
    assert [r.id for r in c.filters[:2]] == ["deploy-log", "json"]  # a-good.json used, the rest skipped
    assert c.stats()["filter_errors"] == errors
    assert all(name.split(":")[0] in caplog.text for name in errors)


def test_missing_dir_means_no_custom_filters(tmp_path: Path) -> None:
    assert load_custom_filters(tmp_path / "nope") == ([], [])
    assert load_custom_filters(None) == ([], [])


def test_at_most_100_custom_rules(tmp_path: Path) -> None:
    rules = [{"id": f"r{k}", "detect": {"toolNames": [f"t{k}"]}} for k in range(MAX_CUSTOM_RULES - 2)]
    write(tmp_path, "a.json", rules)
    write(tmp_path, "b.json", [{"id": f"s{k}", "detect": {"toolNames": ["s"]}} for k in range(5)])
    loaded, errors = load_custom_filters(tmp_path)
    assert len(loaded) == MAX_CUSTOM_RULES
    assert errors == [f"b.json: more than {MAX_CUSTOM_RULES} custom rules in all; ignored its last 3"]


def test_a_drop_rule_never_drops_an_error_line(tmp_path: Path) -> None:
    write(tmp_path, "greedy.json", {"id": "greedy", "detect": {"toolNames": ["job"]}, "dropLines": [".*"]})
    c = make_compressor("standard", filters_dir=tmp_path)
    log = "step 1 ok\nstep 2 ok\nERROR: step 3 failed with code 7\n@@ -1,2 +1,2 @@\nstep 4 ok"
    out = c.compress([call("j", "job"), result("j", log)], mode="standard")
    assert out.messages[1]["content"] == "ERROR: step 3 failed with code 7\n@@ -1,2 +1,2 @@"
