"""Each client's merge, alone: old file text in, new file text out (``freellm.setup.<client>``).

Golden cases live in ``tests/golden/setup/<client>/<case>/``: ``<file>.in`` is the existing file (absent:
no file yet) and ``<file>.out`` the reviewed result. Rewrite the ``.out`` files after an intended change
with ``FREELLM_UPDATE_GOLDEN=1`` and review the diff. Around them: every merge is idempotent, keeps what
it does not own, and refuses a file it cannot read rather than overwriting it.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from freellm.setup import CLIENTS, ParseError, Target
from freellm.setup.merge import (
    dump_json,
    load_json_object,
    mask_key,
    merge_dotenv,
    merge_yaml_mapping,
    set_in,
)
from tests.unit.helpers import GOLDEN_ROOT, UPDATE_GOLDEN

GOLDEN = GOLDEN_ROOT / "setup"
TARGET = Target("http://127.0.0.1:3001", "sk-golden-0123456789wxyz", models=("auto", "llama-3.3-70b"))


def _file_name(label: str) -> str:
    return label.rsplit("/", 1)[-1]


def _cases() -> list[tuple[str, str, str]]:
    out = []
    for name, client in sorted(CLIENTS.items()):
        for case in sorted(p.name for p in (GOLDEN / name).iterdir() if p.is_dir()):
            out.extend((name, case, _file_name(f.label)) for f in client.files)
    return out


@pytest.mark.parametrize(("client", "case", "file"), _cases())
def test_golden(client: str, case: str, file: str) -> None:
    spec = next(f for f in CLIENTS[client].files if _file_name(f.label) == file)
    folder = GOLDEN / client / case
    src = folder / f"{file}.in"
    old = src.read_text(encoding="utf-8") if src.exists() else None
    new = spec.render(old, TARGET)
    expected = folder / f"{file}.out"
    if UPDATE_GOLDEN:
        expected.write_text(new, encoding="utf-8")
        return
    assert expected.exists(), f"{expected} missing (run with FREELLM_UPDATE_GOLDEN=1 and review)"
    assert new == expected.read_text(encoding="utf-8")


@pytest.mark.parametrize(("client", "case", "file"), _cases())
def test_merge_is_idempotent(client: str, case: str, file: str) -> None:
    """Running setup twice changes nothing the second time (so the second run writes no file)."""
    spec = next(f for f in CLIENTS[client].files if _file_name(f.label) == file)
    src = GOLDEN / client / case / f"{file}.in"
    once = spec.render(src.read_text(encoding="utf-8") if src.exists() else None, TARGET)
    assert spec.render(once, TARGET) == once


# -- what each merge keeps and sets, read back with the client's own format ---------------------------------
def _render(client: str, file: str, case: str = "merge", target: Target = TARGET) -> str:
    spec = next(f for f in CLIENTS[client].files if _file_name(f.label) == file)
    src = GOLDEN / client / case / f"{file}.in"
    return spec.render(src.read_text(encoding="utf-8") if src.exists() else None, target)


def test_claude_sets_env_and_keeps_the_rest() -> None:
    doc = json.loads(_render("claude", "settings.json"))
    assert doc["env"] == {
        "CLAUDE_CODE_ENABLE_TELEMETRY": "0",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:3001",
        "ANTHROPIC_AUTH_TOKEN": TARGET.key,
        "ANTHROPIC_MODEL": "auto",
    }  # ANTHROPIC_API_KEY dropped: Claude Code would send it as x-api-key too
    assert doc["permissions"]["deny"] == ["Read(./.env)"]
    assert doc["includeCoAuthoredBy"] is False
    assert doc["statusLine"]["command"] == "~/.claude/statusline.sh"
    out = _render("claude", "settings.json", target=Target(TARGET.base_url, TARGET.key, model="groq/llama"))
    assert json.loads(out)["env"]["ANTHROPIC_MODEL"] == "groq/llama"


def test_codex_provider_entry_and_defaults() -> None:
    out = _render("codex", "config.toml")
    data = tomllib.loads(out)
    assert data["model"] == "auto" and data["model_provider"] == "freellm"
    assert data["model_providers"]["freellm"] == {
        "name": "freellm",
        "base_url": "http://127.0.0.1:3001/v1",
        "wire_api": "responses",
        "experimental_bearer_token": TARGET.key,
        "request_max_retries": 2,
    }  # env_key dropped: Codex would look for that variable instead of using the token
    assert data["model_providers"]["ollama"]["base_url"] == "http://localhost:11434/v1"
    assert data["mcp_servers"]["docs"]["args"] == ["-y", "docs-mcp"]
    assert data["approval_policy"] == "on-request" and data["tui"] == {"notifications": True}
    assert "# Codex settings — hand-written" in out and "# keep me" in out


def test_gemini_auth_type_and_env() -> None:
    doc = json.loads(_render("gemini", "settings.json"))
    assert doc["security"] == {"folderTrust": {"enabled": True}, "auth": {"selectedType": "gemini-api-key"}}
    assert doc["ui"] == {"theme": "GitHub"} and "docs" in doc["mcpServers"]
    assert "model" not in doc  # no --model: Gemini CLI's own names, routed by the gateway's model map
    with_model = Target(TARGET.base_url, TARGET.key, model="gemini-2.5-flash")
    assert json.loads(_render("gemini", "settings.json", target=with_model))["model"] == {"name": "gemini-2.5-flash"}
    env = _render("gemini", ".env")
    assert env.splitlines() == [
        "# my Gemini CLI environment",
        "GEMINI_SANDBOX=false",
        f"GEMINI_API_KEY={TARGET.key}",
        "",
        "DEBUG_LEVEL=2",
        "GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:3001",
    ]


def test_opencode_provider_models_and_default() -> None:
    doc = json.loads(_render("opencode", "opencode.json"))
    entry = doc["provider"]["freellm"]
    assert entry["npm"] == "@ai-sdk/openai-compatible"
    assert entry["options"] == {
        "baseURL": "http://127.0.0.1:3001/v1",
        "headers": {"X-Session-Id": "opencode"},
        "apiKey": TARGET.key,
    }
    assert list(entry["models"]) == ["auto", "llama-3.3-70b"]
    assert doc["model"] == "freellm/auto"
    assert doc["provider"]["ollama"]["models"] == {"llama3": {}}
    assert doc["theme"] == "tokyonight" and doc["autoupdate"] is False
    offline = Target(TARGET.base_url, TARGET.key, model="fast")
    assert list(json.loads(_render("opencode", "opencode.json", target=offline))["provider"]["freellm"]["models"]) == [
        "fast",
        "auto",
    ]


def test_aider_keys_comments_and_lists() -> None:
    out = _render("aider", ".aider.conf.yml")
    data = yaml.safe_load(out)
    assert data["openai-api-base"] == "http://127.0.0.1:3001/v1"
    assert data["openai-api-key"] == TARGET.key
    assert data["model"] == "openai/auto"
    assert data["read"] == ["CONVENTIONS.md", "docs/style.md"]
    assert data["dark-mode"] is True and data["auto-commits"] is False
    assert "# Sample .aider.conf.yml — comments must survive" in out
    assert "#openai-api-base: http://commented-out/v1" in out
    pinned = Target(TARGET.base_url, TARGET.key, model="openai/groq/llama")
    assert yaml.safe_load(_render("aider", ".aider.conf.yml", target=pinned))["model"] == "openai/groq/llama"


# -- files that cannot be merged stop setup ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("client", "file", "text", "reason"),
    [
        ("claude", "settings.json", '{"env": {"A": 1},}', "not valid JSON"),
        ("claude", "settings.json", "[1, 2]", "JSON object"),
        ("claude", "settings.json", '{"env": "ANTHROPIC_BASE_URL=x"}', "`env` is a str"),
        ("codex", "config.toml", 'model = "a"\nmodel = "b"\n', "not valid TOML"),
        ("codex", "config.toml", 'model_providers = "none"\n', "`model_providers` is a"),
        ("codex", "config.toml", "[model_providers]\nfreellm = 3\n", "`model_providers.freellm` is a"),
        ("gemini", "settings.json", '{"security": {"auth": true}}', "`security.auth` is a bool"),
        ("opencode", "opencode.json", '{\n  // a comment\n  "theme": "x"\n}', "not valid JSON"),
        ("opencode", "opencode.json", '{"provider": []}', "`provider` is a list"),
        ("opencode", "opencode.json", '{"provider": {"freellm": "x"}}', "`provider.freellm` is a str"),
        ("aider", ".aider.conf.yml", "model: [unclosed\n", "not valid YAML"),
        ("aider", ".aider.conf.yml", "- a\n- b\n", "YAML mapping"),
    ],
)
def test_unparseable_file_is_refused(client: str, file: str, text: str, reason: str) -> None:
    spec = next(f for f in CLIENTS[client].files if _file_name(f.label) == file)
    with pytest.raises(ParseError, match=re.escape(reason)):
        spec.render(text, TARGET)


# -- the shared helpers ---------------------------------------------------------------------------------------
def test_json_helpers() -> None:
    assert load_json_object(None) == {} and load_json_object("  \n") == {}
    doc: dict[str, object] = {}
    set_in(doc, ["a", "b", "c"], 1)
    assert doc == {"a": {"b": {"c": 1}}}
    assert dump_json({"a": 1}, '{\n\t"x": 1\n}') == '{\n\t"a": 1\n}\n'
    assert dump_json({"a": 1}, '{\n    "x": 1\n}') == '{\n    "a": 1\n}\n'
    assert dump_json({"a": "é"}) == '{\n  "a": "é"\n}\n'


def test_dotenv_quotes_what_needs_it() -> None:
    assert merge_dotenv(None, {"A": "plain-value_1:/x"}) == "A=plain-value_1:/x\n"
    assert merge_dotenv("B=1", {"A": 'has space "q"'}) == 'B=1\nA="has space \\"q\\""\n'


def test_yaml_merge_replaces_block_values_and_falls_back_for_flow_style() -> None:
    old = "# c\nmodel:\n  nested: 1\n\nother: 2\n"
    assert merge_yaml_mapping(old, {"model": "x"}) == "# c\nmodel: x\n\nother: 2\n"
    flow = "{other: 2, model: y}\n"
    out = merge_yaml_mapping(flow, {"model": "x"})
    assert yaml.safe_load(out) == {"other": 2, "model": "x"}
    quoted = "'model': y\n\"keep\": 1\n"
    assert yaml.safe_load(merge_yaml_mapping(quoted, {"model": "x"})) == {"model": "x", "keep": 1}


def test_mask_shows_at_most_the_last_four() -> None:
    assert mask_key("sk-golden-0123456789wxyz") == "…wxyz"
    assert mask_key("short1") == "…t1"
    assert mask_key("abc") == "…"


def test_every_client_is_documented() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "clients"
    for name in CLIENTS:
        page = docs / f"{name}.md"
        assert page.exists(), f"{page} missing"
        assert f"freellm setup {name}" in page.read_text(encoding="utf-8")
