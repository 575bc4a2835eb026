"""The ``freellm`` command: serve | sim | demo | check-config | keys | status. Thin: parse arguments, call the
library (the operator commands, ``keys add|list|remove|test`` and ``status``, live in :mod:`freellm.cli_admin`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
import os
import secrets
import sqlite3
import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any

from freellm import __version__
from freellm.cli_db import add_db_parser, check_shared_stores
from freellm.cli_setup import add_setup_parser
from freellm.config import ConfigError, Settings, load_settings
from freellm.server.limits_os import raise_nofile_limit
from freellm.server.runtime import new_event_loop, tune_gc

__all__ = ["main"]

log = logging.getLogger("freellm")


def default_settings(env: Mapping[str, str]) -> Settings:
    """The embedded default: built-in free-tier catalog enabled by the usual API-key variables."""
    from freellm.routing.builtin import builtin_settings

    providers, chain = builtin_settings(env)
    return Settings(providers=providers, chain=chain)


def resolve_client_keys(
    settings: Settings, data_dir: Path, env: Mapping[str, str]
) -> tuple[list[str] | None, str | None]:
    """Client keys: the config's (None: the app reads them, profiles included), else FREELLM_API_KEY,
    else one generated once and stored in the data dir.

    Returns the keys and, when the key came from the environment or the data dir, that key (to print).
    """
    if settings.auth.api_keys:
        return None, None
    from_env = env.get("FREELLM_API_KEY", "").strip()
    if from_env:
        return [from_env], None
    path = data_dir / "client_key"
    if path.exists():
        key = path.read_text(encoding="utf-8").strip()
        if key:
            return [key], key
    key = "sk-freellm-" + secrets.token_urlsafe(24)
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(key + "\n")
    return [key], key


def _load(args: argparse.Namespace) -> Settings:
    if args.config:
        return load_settings(args.config)
    return default_settings(os.environ)


def cmd_serve(args: argparse.Namespace) -> int:
    from aiohttp import web

    from freellm.server.app import create_app, default_data_dir

    settings = _load(args)
    if args.host:
        settings.server.host = args.host
    if args.port is not None:
        settings.server.port = args.port
    if settings.storage.path is None:
        settings.storage.path = default_data_dir()
    check_compression(settings, settings.storage.path, args.config)
    check_master_key(settings.storage.path)
    check_shared_stores(settings.storage)
    keys, shown = resolve_client_keys(settings, settings.storage.path, os.environ)
    host, port = settings.server.host, settings.server.port
    routes = sum(len(p.models) for p in settings.providers if p.keys)
    print(f"freellm {__version__} on http://{host}:{port}  (data: {settings.storage.path})", flush=True)
    print(f"providers with keys: {sum(1 for p in settings.providers if p.keys)}, routes: {routes}", flush=True)
    if shown:
        print(f"client API key: {shown}", flush=True)
    workers = args.workers if args.workers is not None else settings.server.workers
    grace = settings.server.shutdown_grace_s
    raise_nofile_limit()  # two descriptors per open stream; forked workers inherit the raised limit

    def run(index: int | None = None) -> None:
        tune_gc(settings.server.gc_gen0_threshold)
        web.run_app(
            create_app(settings, client_keys=keys, worker_index=index),
            host=host,
            port=port,
            handler_cancellation=True,
            shutdown_timeout=grace,
            print=None,
            access_log=None,
            reuse_port=workers > 1,
            backlog=settings.server.listen_backlog,
            loop=new_event_loop(),
        )

    if workers <= 1:
        try:
            run()
        except OSError as exc:  # the port is taken, the address is not ours, the data dir is not writable
            print(f"freellm: cannot serve on {host}:{port}: {exc}", file=sys.stderr)
            return 1
        return 0
    from freellm.server.workers import serve_workers

    print(f"workers: {workers}", flush=True)
    return serve_workers(workers, run, grace_s=grace)


def cmd_sim(args: argparse.Namespace) -> int:
    from freellm.sim import run_sim_forever
    from freellm.sim.settings import build_sim_settings

    settings = build_sim_settings(args.scenario_file, args.chunks, args.chunk_delay_ms)
    raise_nofile_limit()  # one descriptor per open stream (the benchmark holds thousands)
    print(f"freellm simulator on http://{args.host}:{args.port}/<provider>/v1", flush=True)
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    with contextlib.suppress(KeyboardInterrupt):
        loop.run_until_complete(run_sim_forever(args.host, args.port, settings))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from freellm.demo import run_demo

    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(run_demo(port=args.port, once=args.once))
    except KeyboardInterrupt:
        return 0


def check_compression(settings: Settings, data_dir: Path, source: str | None) -> None:
    """Build the compressor once so a bad engine name or tunable is a start-up error (ConfigError), not
    a traceback from inside the server. Compression not configured at all: nothing could fail, and
    ``freellm.compression`` is not imported (the server builds it on first use)."""
    from freellm.server.state import build_compressor, compression_configured

    cfg = settings.compression
    if not compression_configured(cfg, data_dir):
        return
    try:
        build_compressor(cfg, data_dir)
    except ConfigError as exc:
        raise ConfigError(f"config {source or '(built-in defaults)'}: {exc}") from None


def check_master_key(data_dir: Path) -> None:
    """Find (or create) the master key the key vault needs, so a malformed ``FREELLM_MASTER_KEY`` or
    ``master.key`` is a start-up error saying why, not a traceback from inside the server."""
    from freellm.secrets import MasterKeyError, load_master_key

    try:
        load_master_key(os.environ, data_dir)
    except MasterKeyError as exc:
        raise ConfigError(str(exc)) from None


def cmd_check_config(args: argparse.Namespace) -> int:
    from freellm.server.app import default_data_dir

    settings = load_settings(args.config)
    check_compression(settings, settings.storage.path or default_data_dir(), args.config)
    keyed = [p.name for p in settings.providers if p.keys]
    print(f"ok: {len(settings.providers)} providers ({len(keyed)} with keys), chain of {len(settings.chain)}")
    return 0


def keys_command(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Wrap a ``freellm keys`` subcommand: master-key, file and database problems exit 2 with
    ``freellm: <reason>`` (bad config and bad input already do, in :func:`main`)."""

    @functools.wraps(run)
    def wrapper(args: argparse.Namespace) -> int:
        from freellm.secrets import MasterKeyError

        try:
            return run(args)
        except MasterKeyError as exc:
            print(f"freellm: {exc}", file=sys.stderr)
        except (OSError, sqlite3.Error) as exc:
            print(f"freellm: {exc}", file=sys.stderr)
        return 2

    return wrapper


def keys_data_dir(args: argparse.Namespace) -> tuple[Settings, Path]:
    """The settings of ``--config`` and the data directory the gateway would use with them."""
    from freellm.server.app import default_data_dir

    settings = _load(args)
    return settings, settings.storage.path or default_data_dir()


def run_coroutine(coro: Coroutine[Any, Any, int]) -> int:
    """Run one coroutine on a fresh event loop (the one ``serve`` uses) and close the loop."""
    loop = new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


@keys_command
def cmd_keys_rotate_master(args: argparse.Namespace) -> int:
    """Re-encrypt the stored provider keys under a new master key, then replace the old master key.

    The vault makes the store open with both keys before the new one is saved and drops the old
    ciphertexts only after, so an interruption at any point leaves keys that the master key on disk (or
    either value of FREELLM_MASTER_KEY) opens.
    """
    from freellm.secrets import (
        MASTER_KEY_BYTES,
        MASTER_KEY_ENV,
        MASTER_KEY_FILENAME,
        KeyVault,
        MasterKeyError,
        load_master_key,
        master_key_from_env,
        parse_master_key,
        write_master_key,
    )
    from freellm.store.factory import store_from_settings

    settings, data_dir = keys_data_dir(args)
    from_env = master_key_from_env(os.environ) is not None
    key_file = data_dir / MASTER_KEY_FILENAME
    if not from_env and not key_file.exists():
        raise MasterKeyError(f"no master key to rotate: {MASTER_KEY_ENV} is unset and {key_file} does not exist")
    master = load_master_key(os.environ, data_dir)
    if args.new_key_env:
        var = args.new_key_env
        if not os.environ.get(var, "").strip():
            raise MasterKeyError(f"{var} is not set (--new-key-env names the variable holding the new master key)")
        new_master = parse_master_key(os.environ[var], source=var)
    else:
        new_master = secrets.token_bytes(MASTER_KEY_BYTES)

    def save_master(key: bytes) -> None:
        if not from_env:
            try:
                write_master_key(data_dir, key)
            except OSError as exc:  # the old file is untouched (the write is atomic), and it opens the store
                raise MasterKeyError(
                    f"cannot write the new master key to {key_file}: {exc.strerror or exc}; the stored keys "
                    "still open with the current master key"
                ) from None
            return
        print(
            f"freellm: warning: the master key comes from {MASTER_KEY_ENV}, so no key file was written. Set "
            f"{MASTER_KEY_ENV} to the new value before the gateway next starts: the old value no longer "
            "opens the stored keys.",
            file=sys.stderr,
            flush=True,
        )
        if args.new_key_env:
            print(f"set {MASTER_KEY_ENV} to the value of {args.new_key_env}", flush=True)
        else:
            print("the new value is shown only this once:", file=sys.stderr, flush=True)
            print(f"{MASTER_KEY_ENV}={key.hex()}", flush=True)

    async def rotate() -> int:
        store = store_from_settings(settings.storage, data_dir)
        await store.open()
        try:
            vault = KeyVault(store, master)
            await vault.load()
            return await vault.rotate(new_master, save_master)
        finally:
            await store.close()

    count = run_coroutine(rotate())
    if not from_env:
        print(f"new master key written to {key_file}")
    print(f"re-encrypted {count} provider key{'' if count == 1 else 's'} under the new master key")
    return 0


def add_keys_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``freellm keys <subcommand>``: provider keys stored encrypted in the data directory.
    ``rotate-master`` is here; ``add``, ``list``, ``remove`` and ``test`` (each also through a gateway's
    admin API) are :func:`freellm.cli_admin.add_key_commands`."""
    keys = sub.add_parser("keys", help="manage the provider keys stored encrypted in the data directory")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True, metavar="<subcommand>")

    rotate = keys_sub.add_parser(
        "rotate-master",
        help="re-encrypt the stored provider keys under a new master key (stop the gateway first)",
        description="Re-encrypt the stored provider keys under a new master key and replace master.key "
        "(or, when FREELLM_MASTER_KEY is set, print the new value to set). Stop every gateway process using "
        "this data directory first: a running one would write the keys back under the old master key.",
    )
    rotate.add_argument("--config", help="YAML config file whose storage.path is the data directory")
    rotate.add_argument(
        "--new-key-env",
        metavar="VAR",
        help="take the new master key (64 hex characters or base64) from this environment variable "
        "instead of generating one",
    )
    rotate.set_defaults(func=cmd_keys_rotate_master)

    from freellm.cli_admin import add_key_commands

    add_key_commands(keys_sub)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="freellm", description="Self-hosted LLM API gateway.")
    parser.add_argument("--version", action="version", version=f"freellm {__version__}")
    parser.add_argument("--log-level", default=os.environ.get("FREELLM_LOG_LEVEL", "INFO"))
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the gateway")
    serve.add_argument("--config", help="YAML config file (default: built-in catalog, keys from env)")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--workers", type=int, help="worker processes sharing the port (default: server.workers, 1)")
    serve.set_defaults(func=cmd_serve)

    sim = sub.add_parser("sim", help="run the upstream simulator (OpenAI wire, scripted faults)")
    sim.add_argument("--host", default="127.0.0.1")
    sim.add_argument("--port", type=int, default=9101)
    sim.add_argument("--chunks", type=int, help="content chunks per streamed answer")
    sim.add_argument("--chunk-delay-ms", type=float, help="delay between streamed chunks")
    sim.add_argument("--scenario-file", help="YAML/JSON file with default, models and per_model scenarios")
    sim.set_defaults(func=cmd_sim)

    demo = sub.add_parser("demo", help="simulator + gateway together, with one failing provider")
    demo.add_argument("--port", type=int, default=3001)
    demo.add_argument("--once", action="store_true", help="make the demo request, print it, and exit")
    demo.set_defaults(func=cmd_demo)

    check = sub.add_parser("check-config", help="validate a config file and exit")
    check.add_argument("config")
    check.set_defaults(func=cmd_check_config)

    add_keys_parser(sub)
    add_db_parser(sub)
    from freellm.cli_admin import add_status_parser

    add_status_parser(sub)
    add_setup_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"freellm: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # scenario files and other user input that does not validate
        print(f"freellm: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
