"""``freellm setup <client>``: configure Claude Code, Codex, Gemini CLI, opencode or aider to use the gateway.

The gateway comes from ``--config PATH`` (the URL from ``server.host``/``server.port``, the key from the
first of ``auth.api_keys``) or from ``--url`` and ``--key``. Setup never prompts: it plans every file first
(a file it cannot parse stops it, touching nothing), then backs up, writes and records; ``--print`` shows
the plan and writes nothing; ``--undo`` puts everything back. See ``docs/clients/``.

Exit codes: 0 done (or nothing to do); 2 the command cannot be done as asked (bad arguments, a config
without client keys, an existing file that does not parse); 1 a write failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from typing import Final
from urllib.parse import urlsplit

from freellm.setup import CLIENTS, Client, Target
from freellm.setup.apply import SetupError, apply, locations, plan, render_preview, undo

__all__ = ["add_setup_parser", "gateway_models", "target_from_args"]

EXIT_USAGE: Final = 2
MODELS_TIMEOUT_S: Final = 3.0
"""How long setup waits for the gateway's model list; a gateway that is not running yet is normal."""
WILDCARD_HOSTS: Final = frozenset({"0.0.0.0", "::", "[::]", ""})


class UsageError(Exception):
    """Arguments that do not make a target; exit 2."""


def _normalise_url(url: str) -> str:
    """The gateway's root: a trailing ``/`` or ``/v1`` (as in an OpenAI base URL) is dropped."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"--url must be an http:// or https:// URL, got {url!r}")
    root = url.strip().rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return root


def _config_target(path: str) -> tuple[str, str | None]:
    from freellm.config import load_settings

    settings = load_settings(path)  # ConfigError → "freellm: …", exit 2 (in cli.main)
    host = settings.server.host
    if host in WILDCARD_HOSTS:
        host = "127.0.0.1"  # a wildcard bind is reached on loopback from this machine
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    keys = settings.auth.client_keys
    return f"http://{host}:{settings.server.port}", keys[0].key if keys else None


def target_from_args(args: argparse.Namespace) -> Target:
    """``--config`` (with ``--url``/``--key`` overriding what it says) or ``--url`` and ``--key``."""
    url: str | None = args.url
    key: str | None = args.key
    if key == "-":  # from stdin: keeps the key out of `ps` and the shell history
        key = sys.stdin.readline().strip()
    if args.config:
        cfg_url, cfg_key = _config_target(args.config)
        url = url or cfg_url
        if key is None:
            if cfg_key is None:
                raise UsageError(
                    f"config {args.config} has no client key (auth.api_keys is empty): add one there, or "
                    "pass --key with the key the gateway uses (FREELLM_API_KEY, or the one it printed at start-up)"
                )
            key = cfg_key
    if not url or not key:
        raise UsageError("give --config PATH, or both --url URL and --key KEY")
    if not key.strip():
        raise UsageError("--key is empty")
    return Target(base_url=_normalise_url(url), key=key.strip(), model=args.model or None)


def gateway_models(target: Target) -> tuple[str, ...]:
    """The chat model ids of the gateway's ``GET /v1/models`` (embedding families left out: a coding
    client cannot chat with one), or () when it does not answer in time."""
    req = urllib.request.Request(
        target.v1 + "/models", headers={"Authorization": f"Bearer {target.key}", "Accept": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=MODELS_TIMEOUT_S) as resp:
            doc = json.loads(resp.read())
    except (OSError, ValueError):  # URLError, HTTPError, timeouts, a body that is not JSON
        return ()
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        return ()
    return tuple(
        str(m["id"])
        for m in data
        if isinstance(m, dict) and isinstance(m.get("id"), str) and m["id"] and m.get("kind") != "embedding"
    )


def _say(msg: str) -> None:
    print(msg, flush=True)


def cmd_setup(args: argparse.Namespace) -> int:
    client: Client = CLIENTS[args.client]
    loc = locations(os.environ)
    try:
        if args.undo:
            if not undo(client, loc, log=_say, dry_run=args.print):
                _say(f"nothing to undo for {client.name}: setup has not changed its files")
            elif not args.print:
                _say(f"{client.title} is back to its configuration before freellm setup")
            return 0
        target = target_from_args(args)
        if client.lists_models:
            models = gateway_models(target)
            if models:
                target = Target(target.base_url, target.key, target.model, models)
            else:
                print(
                    f"freellm: note: {target.v1}/models did not answer; listing only "
                    f"{target.model_or_default!r} (run setup again once the gateway is up to list its models)",
                    file=sys.stderr,
                    flush=True,
                )
        p = plan(client, target, loc)
        if args.print:
            _say(render_preview(p, show_key=args.show_key))
            return 0
        written = apply(p, log=_say)
    except UsageError as exc:
        print(f"freellm: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SetupError as exc:
        print(f"freellm: {exc}", file=sys.stderr)
        return exc.exit_code
    if not written:
        _say(f"{client.title} already uses {target.base_url}; nothing changed")
    else:
        _say(f"{client.title} now uses freellm at {target.base_url}. Try: {client.run_hint}")
        _say(f"undo with: freellm setup {client.name} --undo")
    return 0


def add_setup_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``freellm setup CLIENT [--config PATH | --url URL --key KEY] [--model M] [--print] [--undo]``."""
    p = sub.add_parser(
        "setup",
        help="configure a coding client (claude, codex, gemini, opencode, aider) to use the gateway",
        description="Write the client's own configuration so it talks to this gateway, merging into the "
        "files already there (each changed file is first copied to <file>.freellm-backup). Never prompts.",
    )
    p.add_argument("client", choices=sorted(CLIENTS), help="the client to configure")
    p.add_argument("--config", help="the gateway's YAML config: URL from server.host/port, key from auth.api_keys")
    p.add_argument("--url", help="the gateway's URL, e.g. http://127.0.0.1:3001 (a trailing /v1 is dropped)")
    p.add_argument("--key", help="a client key of the gateway (- reads it from the first line of stdin)")
    p.add_argument("--model", help="the model the client asks for (default: auto, the configured chain)")
    p.add_argument(
        "--print", action="store_true", help="show what would be written (or, with --undo, restored), write nothing"
    )
    p.add_argument("--show-key", action="store_true", help="with --print: show the key instead of masking it")
    p.add_argument("--undo", action="store_true", help="restore the backups and remove what setup created")
    p.set_defaults(func=cmd_setup)
