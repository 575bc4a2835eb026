"""The scale-out storage keys: URLs and the namespace are validated at load, naming the key and never
quoting the URL (it may hold a password)."""

from __future__ import annotations

from pathlib import Path

import pytest

from freellm.config import ConfigError, Settings, load_settings


@pytest.mark.parametrize(
    ("key", "url"),
    [
        ("redis_url", "redis://127.0.0.1:6379/0"),
        ("redis_url", "rediss://user:secret@cache.internal:6380"),
        ("redis_url", "unix:///run/redis/redis.sock"),
        ("postgres_url", "postgresql://freellm:secret@db.internal:5432/freellm"),
        ("postgres_url", "postgres://127.0.0.1/test"),
    ],
)
def test_good_urls_are_kept(key: str, url: str) -> None:
    assert getattr(Settings.model_validate({"storage": {key: url}}).storage, key) == url


@pytest.mark.parametrize(
    ("key", "url", "reason"),
    [
        ("redis_url", "http://127.0.0.1:6379", "the scheme must be one of redis://"),
        ("redis_url", "127.0.0.1:6379", "the scheme must be one of"),
        ("redis_url", "redis://hunter2@127.0.0.1:port", "the port must be a number"),
        ("redis_url", "redis://127.0.0.1:0", "the port must be a number"),
        ("redis_url", "unix://", "needs the socket's path"),
        ("postgres_url", "mysql://root:hunter2@127.0.0.1/test", "the scheme must be one of postgresql://"),
        ("postgres_url", "postgresql://u:hunter2@db:54x32/test", "the port must be a number"),
        ("postgres_url", "postgresql:///test", "the URL has no host"),
    ],
)
def test_a_bad_url_is_a_config_error_naming_the_key_not_the_password(
    tmp_path: Path, key: str, url: str, reason: str
) -> None:
    config = tmp_path / "freellm.yaml"
    config.write_text(f"storage:\n  {key}: '{url}'\n")
    with pytest.raises(ConfigError) as err:
        load_settings(config)
    assert f"storage.{key}" in str(err.value) and reason in str(err.value)
    assert "hunter2" not in str(err.value)


@pytest.mark.parametrize("namespace", ["freellm", "_t", "team_a_2", "a" * 63])
def test_good_namespaces(namespace: str) -> None:
    assert Settings.model_validate({"storage": {"namespace": namespace}}).storage.namespace == namespace


@pytest.mark.parametrize("namespace", ["", "Freellm", "1abc", "a-b", "a.b", "a" * 64, "x y"])
def test_a_bad_namespace_is_a_config_error(tmp_path: Path, namespace: str) -> None:
    config = tmp_path / "freellm.yaml"
    config.write_text(f"storage:\n  namespace: '{namespace}'\n")
    with pytest.raises(ConfigError, match=r"storage\.namespace"):
        load_settings(config)


def test_an_unset_variable_leaves_the_url_unset(tmp_path: Path) -> None:
    config = tmp_path / "freellm.yaml"
    config.write_text("storage:\n  redis_url: ${FREELLM_TEST_NO_SUCH_VAR}\n  redis_timeout_ms: 100\n")
    storage = load_settings(config, env={}).storage
    assert storage.redis_url is None and storage.redis_timeout_ms == 100
