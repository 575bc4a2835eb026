"""The operator commands: ``freellm keys add|list|remove|test`` and ``freellm status``.

Each works one of two ways, chosen per invocation:

* ``--config PATH``: straight on that config's data directory — the store the gateway uses, opened the
  way the gateway opens it, keys encrypted by the same :class:`KeyVault` under the same master
  key. A gateway running on that directory re-reads the keys and the overlay (its settings watcher) and
  serves the change within 5 s.
* ``--url URL --admin-key KEY`` (or ``FREELLM_URL`` / ``FREELLM_ADMIN_KEY``): through a running
  gateway's admin API, over plain HTTP.

Both ways produce the same documents — the admin API's JSON — because the ``--config`` side calls the
same functions the API's handlers do (:mod:`freellm.admin.providers`, :mod:`freellm.admin.cooldowns`,
:mod:`freellm.admin.analytics`), so the rules, the error messages and the masking are the admin API's
in both. Output is one renderer over those documents (:mod:`freellm.cli_render`), or the JSON itself
with ``--json``. A key is never printed except masked, at most its last four characters.

Exit codes: 0 done; 2 the command cannot be done as asked (a bad argument or config, an unknown provider
or key id, text that is not a key, a key the provider already has, an admin key the gateway rejects);
1 it was tried and failed (the gateway unreachable or failing, a key whose test failed).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol
from urllib.parse import quote, urlsplit

import orjson

from freellm.cli_render import Style, progress, render_table

if TYPE_CHECKING:
    from freellm.admin.live import LiveConfig
    from freellm.config import Settings
    from freellm.routing.health import KeyHealth
    from freellm.secrets import KeyVault
    from freellm.store.base import StateStore

__all__ = ["add_key_commands", "add_status_parser"]

URL_ENV: Final = "FREELLM_URL"
ADMIN_KEY_ENV: Final = "FREELLM_ADMIN_KEY"
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
HTTP_TIMEOUT_S: Final = 30.0
"""Longer than the key test's own upstream timeout (15 s), so a slow upstream is reported as such."""
STATUS_WINDOW: Final = "1h"


class CommandError(Exception):
    """What to tell the operator (after ``freellm:``) and the exit code; never a traceback."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def _exit_code_of(status: int) -> int:
    """An admin API status as an exit code: a refused request (4xx) is a usage error, the rest failures."""
    return EXIT_USAGE if 400 <= status < 500 else EXIT_FAILED


class Backend(Protocol):
    """Where a command acts: a data directory or a gateway's admin API. Every method returns the admin
    API's document for it, or raises :class:`CommandError`."""

    where: str
    """For messages: ``data directory /srv/freellm/data`` or ``gateway http://…``."""
    live: bool
    """True when the change is made through a running gateway (it applies at once)."""

    async def providers(self) -> list[dict[str, Any]]: ...

    async def add_key(self, provider: str, secret: str) -> dict[str, Any]: ...

    async def remove_key(self, provider: str, key_id: str) -> dict[str, Any]: ...

    async def test_key(self, provider: str, key_id: str) -> dict[str, Any]: ...

    async def cooldowns(self) -> list[dict[str, Any]]: ...

    async def analytics(self, window: str) -> dict[str, Any]: ...

    async def close(self) -> None: ...


# ---- --config: the data directory ------------------------------------------------------------------------


class LocalBackend:
    """The data directory of a config, opened like the gateway opens it (store, overlay, vault, the key
    health it saved), with the admin API's functions doing the work."""

    live = False

    def __init__(
        self, settings: Settings, data_dir: Path, store: StateStore, live: LiveConfig, vault: KeyVault, health: KeyHealth
    ) -> None:
        self.where = f"data directory {data_dir}"
        self._settings = settings
        self._store = store
        self._live = live
        self._vault = vault
        self._health = health

    @classmethod
    async def open(cls, settings: Settings, data_dir: Path) -> LocalBackend:
        """Open the store the gateway opens (the data directory's SQLite, or what ``storage`` names),
        load the overlay and decrypt the stored keys with the master key the gateway would use
        (``FREELLM_MASTER_KEY``, else ``master.key``, generated when absent)."""
        from freellm.admin.live import LiveConfig
        from freellm.admin.providers import reload_runtime_keys
        from freellm.routing.health import HEALTH_SETTING, KeyHealth
        from freellm.secrets import KeyVault, load_master_key
        from freellm.store.factory import store_from_settings

        master = load_master_key(os.environ, data_dir)
        store = store_from_settings(settings.storage, data_dir)
        await store.open()
        try:
            live = LiveConfig(settings, store)
            await live.load()
            vault = KeyVault(store, master)
            await vault.load()
            reload_runtime_keys(live, vault)
            health = KeyHealth(settings.health.disable_after)
            health.load(await store.get_setting(HEALTH_SETTING))
        except BaseException:
            await store.close()
            raise
        return cls(settings, data_dir, store, live, vault, health)

    async def providers(self) -> list[dict[str, Any]]:
        from freellm.admin.providers import all_providers, provider_doc

        return [provider_doc(self._live, self._health, p) for p in all_providers(self._live)]

    async def add_key(self, provider: str, secret: str) -> dict[str, Any]:
        from freellm.admin.providers import store_key
        from freellm.secrets import mask

        with _client_errors():
            stored = await store_key(self._live, self._vault, provider, secret)
        return {"id": stored.id, "masked": mask(stored.secret)}

    async def remove_key(self, provider: str, key_id: str) -> dict[str, Any]:
        from freellm.admin.providers import forget_key

        with _client_errors():
            key = await forget_key(self._live, self._vault, provider, key_id)
        return {"id": key.id, "deleted": True}

    async def test_key(self, provider: str, key_id: str) -> dict[str, Any]:
        """The admin API's key check with this process's own HTTP session. The outcome is shown, not
        recorded: the running gateway owns the key health it saves (its health pass re-checks keys)."""
        import aiohttp

        from freellm.admin.providers import check_key, known_key, known_provider
        from freellm.providers.registry import build_providers

        with _client_errors():
            name = known_provider(self._live, provider)
            key = known_key(self._live, name, key_id)
        config = next((p for p in self._live.effective_or_base().providers if p.name == name), None)
        if config is None:
            raise CommandError(
                f"the provider `{name}` is not in effect: the stored admin changes do not apply to this config"
            )
        async with aiohttp.ClientSession(trust_env=False) as session:
            check = await check_key(build_providers([config], session)[name], key.secret)
        self._health.record_check(name, key.id, check.upstream_status, time.time())
        return check.doc(key.id, self._health.status(name, key.id))

    async def cooldowns(self) -> list[dict[str, Any]]:
        from freellm.admin.cooldowns import cooldowns_json

        return cooldowns_json(await self._store.active_cooldowns(time.time()))

    async def analytics(self, window: str) -> dict[str, Any]:
        from freellm.admin.analytics import WINDOWS, analytics_json

        now = time.time()
        return analytics_json(window, await self._store.request_analytics(now - WINDOWS[window], now))

    async def close(self) -> None:
        """Write what changed (the vault already flushed it) and release the file."""
        await self._store.close()


@contextlib.contextmanager
def _client_errors() -> Iterator[None]:
    """The admin functions' ClientError (an HTTP status and its message) as a CommandError: the same
    message the admin API answers with, and the exit code its status maps to."""
    from freellm.errors import ClientError

    try:
        yield
    except ClientError as exc:
        raise CommandError(exc.message, _exit_code_of(exc.status)) from None


# ---- --url: the admin API -----------------------------------------------------------------------------------


class RemoteBackend:
    """A running gateway's admin API: ``Authorization: Bearer <admin key>``, JSON both ways."""

    live = True

    def __init__(self, url: str, admin_key: str) -> None:
        import aiohttp

        self.where = f"gateway {url}"
        self._url = url
        self._session = aiohttp.ClientSession(
            headers={"Authorization": f"Bearer {admin_key}"},
            timeout=aiohttp.ClientTimeout(total=HTTP_TIMEOUT_S),
            trust_env=False,
        )

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        import aiohttp

        url = self._url + path
        try:
            async with self._session.request(method, url, json=body) as resp:
                raw = await resp.read()
                status = resp.status
        except aiohttp.ClientConnectorError as exc:
            refused = isinstance(exc.os_error, ConnectionRefusedError)
            why = "connection refused (is the gateway running there?)" if refused else str(exc.os_error.strerror or exc)
            raise CommandError(f"cannot reach the gateway at {self._url}: {why}") from None
        except aiohttp.ClientError as exc:
            raise CommandError(f"the gateway at {self._url} did not answer properly: {exc}") from None
        except TimeoutError:
            raise CommandError(f"the gateway at {self._url} did not answer within {HTTP_TIMEOUT_S:g} s") from None
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            doc = None
        if 200 <= status < 300 and doc is not None:
            return doc
        if status == 401:
            raise CommandError(
                f"admin key rejected by {self._url} (it must be one of the gateway's auth.admin_keys)", EXIT_USAGE
            )
        error = doc.get("error") if isinstance(doc, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        if not isinstance(message, str):
            raise CommandError(f"unexpected answer from {url}: HTTP {status}", _exit_code_of(status))
        if isinstance(error, dict) and error.get("code") == "not_found":
            message += " (is this a freellm gateway with auth.admin_keys set?)"
        raise CommandError(message, _exit_code_of(status))

    @staticmethod
    def _key_path(provider: str, key_id: str | None = None) -> str:
        path = f"/admin/providers/{quote(provider, safe='')}/keys"
        return path if key_id is None else f"{path}/{quote(key_id, safe='')}"

    async def providers(self) -> list[dict[str, Any]]:
        return list((await self._call("GET", "/admin/providers"))["data"])

    async def add_key(self, provider: str, secret: str) -> dict[str, Any]:
        return dict(await self._call("POST", self._key_path(provider), {"key": secret}))

    async def remove_key(self, provider: str, key_id: str) -> dict[str, Any]:
        return dict(await self._call("DELETE", self._key_path(provider, key_id)))

    async def test_key(self, provider: str, key_id: str) -> dict[str, Any]:
        return dict(await self._call("POST", self._key_path(provider, key_id) + "/test"))

    async def cooldowns(self) -> list[dict[str, Any]]:
        return list((await self._call("GET", "/admin/cooldowns"))["data"])

    async def analytics(self, window: str) -> dict[str, Any]:
        return dict(await self._call("GET", f"/admin/analytics?window={quote(window)}"))

    async def close(self) -> None:
        await self._session.close()


# ---- choosing the backend ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """Where the command acts, resolved from the flags and the environment before anything is opened."""

    config: str | None = None
    url: str | None = None
    admin_key: str | None = None


def resolve_target(args: argparse.Namespace, env: Mapping[str, str]) -> Target:
    """``--config`` wins; else ``--url`` or ``FREELLM_URL`` with ``--admin-key`` or ``FREELLM_ADMIN_KEY``."""
    if args.config:
        if args.admin_key:
            raise CommandError("--admin-key goes with --url; --config acts on the data directory itself", EXIT_USAGE)
        return Target(config=args.config)
    url = (args.url or env.get(URL_ENV, "")).strip()
    if not url:
        raise CommandError(
            "say where to act: --config PATH (that config's data directory; a running gateway picks the "
            f"change up within 5 s) or --url URL --admin-key KEY (a running gateway's admin API; or set {URL_ENV} "
            f"and {ADMIN_KEY_ENV})",
            EXIT_USAGE,
        )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise CommandError(f"--url must be an http(s) URL such as http://127.0.0.1:3001, not {url!r}", EXIT_USAGE)
    admin_key = (args.admin_key or env.get(ADMIN_KEY_ENV, "")).strip()
    if not admin_key:
        raise CommandError(f"--url needs the admin key: --admin-key KEY or {ADMIN_KEY_ENV}", EXIT_USAGE)
    return Target(url=url.rstrip("/"), admin_key=admin_key)


async def open_backend(target: Target, settings: Settings | None, data_dir: Path | None) -> Backend:
    if target.url is not None and target.admin_key is not None:
        return RemoteBackend(target.url, target.admin_key)
    assert settings is not None and data_dir is not None
    return await LocalBackend.open(settings, data_dir)


Action = Callable[[Backend, argparse.Namespace, "Output"], Awaitable[int]]


@dataclass(frozen=True, slots=True)
class Output:
    style: Style
    json: bool

    def emit(self, text: str) -> None:
        print(text, flush=True)

    def emit_json(self, doc: Any) -> None:
        print(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode(), flush=True)


def admin_command(action: Action) -> Callable[[argparse.Namespace], int]:
    """A subcommand run on the backend its flags name: opened, the action run, closed; a
    :class:`CommandError` (and the data directory's own errors, via ``keys_command``) printed as
    ``freellm: <reason>`` with its exit code."""

    def run(args: argparse.Namespace) -> int:
        from freellm.cli import keys_data_dir, run_coroutine

        try:
            target = resolve_target(args, os.environ)
            settings, data_dir = keys_data_dir(args) if target.config is not None else (None, None)
            out = Output(Style.for_stream(sys.stdout), bool(args.json))

            async def go() -> int:
                backend = await open_backend(target, settings, data_dir)
                try:
                    return await action(backend, args, out)
                finally:
                    await backend.close()

            return run_coroutine(go())
        except CommandError as exc:
            print(f"freellm: {exc.message}", file=sys.stderr)
            return exc.exit_code

    def command(args: argparse.Namespace) -> int:
        from freellm.cli import keys_command

        return keys_command(run)(args)

    command.__doc__ = action.__doc__
    return command


# ---- the commands ----------------------------------------------------------------------------------------


def _read_secret(value: str) -> str:
    """The KEY argument, or the first line of stdin for ``-`` (keeps the key out of ``ps`` and the
    shell's history)."""
    if value != "-":
        return value
    line = sys.stdin.readline()
    if not line:
        raise CommandError("no key on stdin (KEY was '-')", EXIT_USAGE)
    return line


async def keys_add(backend: Backend, args: argparse.Namespace, out: Output) -> int:
    """Store a provider key (encrypted), enabled; served from the next request."""
    secret = _read_secret(args.key)
    async with progress("adding the key"):
        doc = await backend.add_key(args.provider, secret)
    if out.json:
        out.emit_json(doc)
        return 0
    when = "it serves from the next request" if backend.live else "a running gateway serves it within 5 s"
    out.emit(
        f"{out.style.paint('added', 'green')} key {doc['masked']} to {args.provider} (id {doc['id']}); {when}"
    )
    return 0


def _key_rows(providers: list[dict[str, Any]], style: Style, only: str | None = None) -> list[list[str]]:
    rows: list[list[str]] = []
    for provider in providers:
        if only is not None and provider["name"] != only:
            continue
        for key in provider["keys"]:
            source = "config/env" if key["source"] == "config" else "stored"
            rows.append(
                [provider["name"], key["id"], key["masked"], style.flag(key["enabled"]), source, style.status(key["status"])]
            )
    return rows


KEY_HEADERS: Final = ("PROVIDER", "ID", "KEY", "ENABLED", "SOURCE", "STATUS")


async def keys_list(backend: Backend, args: argparse.Namespace, out: Output) -> int:
    """Every provider key, masked: provider, id, enabled, where it comes from, its health."""
    async with progress("reading the keys"):
        providers = await backend.providers()
    if args.provider is not None and args.provider not in {p["name"] for p in providers}:
        raise CommandError(f"There is no provider `{args.provider}`.", EXIT_USAGE)
    if out.json:
        shown = [p for p in providers if args.provider in (None, p["name"])]
        out.emit_json([{"provider": p["name"], **k} for p in shown for k in p["keys"]])
        return 0
    rows = _key_rows(providers, out.style, args.provider)
    out.emit(render_table(KEY_HEADERS, rows, out.style) if rows else "no provider keys")
    return 0


async def keys_remove(backend: Backend, args: argparse.Namespace, out: Output) -> int:
    """Forget a stored key (a key from the config file or the environment stays: remove it there)."""
    async with progress("removing the key"):
        doc = await backend.remove_key(args.provider, args.key_id)
    if out.json:
        out.emit_json(doc)
        return 0
    when = "" if backend.live else "; a running gateway stops using it within 5 s"
    out.emit(f"{out.style.paint('removed', 'green')} key {doc['id']} from {args.provider}{when}")
    return 0


async def keys_test(backend: Backend, args: argparse.Namespace, out: Output) -> int:
    """One cheap authenticated upstream call with the key; exit 1 when it fails."""
    async with progress("testing the key upstream"):
        doc = await backend.test_key(args.provider, args.key_id)
    if out.json:
        out.emit_json(doc)
    else:
        upstream = "no answer" if doc["upstream_status"] is None else f"HTTP {doc['upstream_status']}"
        verdict = out.style.paint("ok", "green") if doc["ok"] else out.style.paint("failed", "red")
        out.emit(
            f"key {doc['id']} of {args.provider}: {verdict} ({upstream} in {doc['latency_ms']} ms); "
            f"status {out.style.status(doc['status'])}"
        )
    return 0 if doc["ok"] else EXIT_FAILED


def _until(epoch: float, now: float) -> str:
    left = max(0, int(epoch - now))
    hours, rest = divmod(left, 3600)
    minutes, seconds = divmod(rest, 60)
    span = f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
    return f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(epoch))} (in {span})"


def _ms(value: int | None) -> str:
    return "-" if value is None else f"{value} ms"


async def status(backend: Backend, args: argparse.Namespace, out: Output) -> int:
    """Providers, keys, the cooldowns running now and the last hour's traffic per route."""
    async with progress("reading the gateway's state"):
        providers = await backend.providers()
        cooldowns = await backend.cooldowns()
        traffic = await backend.analytics(STATUS_WINDOW)
    if out.json:
        out.emit_json({"providers": providers, "cooldowns": cooldowns, "traffic": traffic})
        return 0
    style = out.style
    now = time.time()
    sections: list[str] = [style.paint(backend.where, "dim")]

    def section(title: str, body: str) -> None:
        sections.append(f"{style.paint(title, 'bold', 'cyan')}\n{body}")

    section(
        "Providers",
        render_table(
            ("NAME", "KIND", "KEYS", "ENABLED"),
            [[p["name"], p["kind"], str(len(p["keys"])), style.flag(p["enabled"])] for p in providers],
            style,
            right=(2,),
        )
        if providers
        else "no providers",
    )
    key_rows = _key_rows(providers, style)
    section("Keys", render_table(KEY_HEADERS, key_rows, style) if key_rows else "no provider keys")
    section(
        "Cooldowns",
        render_table(
            ("SCOPE", "UNTIL", "SOURCE", "REASON"),
            [[c["scope"], _until(c["until"], now), c["source"], c["reason"] or "-"] for c in cooldowns],
            style,
        )
        if cooldowns
        else "none active",
    )
    routes = traffic["routes"]
    section(
        "Traffic, last hour",
        render_table(
            ("ROUTE", "REQUESTS", "FAILED", "SUCCESS", "P50", "TOKENS IN", "TOKENS OUT"),
            [
                [
                    r["route"],
                    str(r["requests"]),
                    str(r["failures"]),
                    f"{r['success_rate'] * 100:.1f}%",
                    _ms(r["p50_ms"]),
                    str(r["tokens_in"]),
                    str(r["tokens_out"]),
                ]
                for r in routes
            ],
            style,
            right=(1, 2, 3, 4, 5, 6),
        )
        if routes
        else "no requests",
    )
    out.emit("\n\n".join(sections))
    return 0


# ---- the parsers ---------------------------------------------------------------------------------------------


def _where_parent() -> argparse.ArgumentParser:
    """The flags every command shares: where to act, and ``--json``."""
    parent = argparse.ArgumentParser(add_help=False)
    where = parent.add_argument_group("where to act (one of)")
    choice = where.add_mutually_exclusive_group()
    choice.add_argument(
        "--config", metavar="PATH", help="a YAML config: act on its data directory (a running gateway picks it up within 5 s)"
    )
    choice.add_argument("--url", metavar="URL", help=f"a running gateway's base URL, for its admin API (or {URL_ENV})")
    where.add_argument("--admin-key", metavar="KEY", help=f"an admin key of that gateway (or {ADMIN_KEY_ENV})")
    parent.add_argument("--json", action="store_true", help="print the admin API's JSON instead of text")
    return parent


def add_key_commands(keys_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``freellm keys add|list|remove|test``."""
    parent = _where_parent()
    add = keys_sub.add_parser(
        "add", parents=[parent], help="store a provider key, encrypted", description=keys_add.__doc__
    )
    add.add_argument("provider", metavar="PROVIDER")
    add.add_argument("key", metavar="KEY", help="the key, or - to read it from stdin (keeps it out of ps and history)")
    add.set_defaults(func=admin_command(keys_add))

    listing = keys_sub.add_parser("list", parents=[parent], help="list provider keys, masked", description=keys_list.__doc__)
    listing.add_argument("provider", metavar="PROVIDER", nargs="?", help="only this provider's keys")
    listing.set_defaults(func=admin_command(keys_list))

    remove = keys_sub.add_parser(
        "remove", parents=[parent], help="forget a stored provider key", description=keys_remove.__doc__
    )
    remove.add_argument("provider", metavar="PROVIDER")
    remove.add_argument("key_id", metavar="KEY_ID", help="the key's id, as `freellm keys list` shows it")
    remove.set_defaults(func=admin_command(keys_remove))

    test = keys_sub.add_parser(
        "test", parents=[parent], help="check a key with one cheap upstream call", description=keys_test.__doc__
    )
    test.add_argument("provider", metavar="PROVIDER")
    test.add_argument("key_id", metavar="KEY_ID")
    test.set_defaults(func=admin_command(keys_test))


def add_status_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``freellm status``."""
    cmd = sub.add_parser(
        "status",
        parents=[_where_parent()],
        help="providers, keys, cooldowns and the last hour's traffic",
        description=status.__doc__,
    )
    cmd.set_defaults(func=admin_command(status))
