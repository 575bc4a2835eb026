"""read-lifecycle (standard): the result of a file read becomes
``[read superseded — "<path>" was re-read or modified later]`` once a later tool call reads or writes the
same path.

- reads: tools ``read``, ``read_file``, ``view``, ``view_file``, ``cat``, ``open_file``, ``get_file``,
  ``read_text_file``, ``str_replace_editor`` with ``command: view``, and shell tools running a plain
  ``cat``/``sed``/``head``/``tail`` (no pipes or redirections);
- writes: ``write``, ``write_file``, ``edit``, ``edit_file``, ``create_file``, ``str_replace``,
  ``str_replace_editor`` (other commands), ``apply_patch``, ``replace``, ``multi_edit``, ``sed -i``;
- the path comes from ``path``/``file_path``/``filepath``/``file``/``target`` (an ``apply_patch`` names its
  files inside the patch). Tool names are matched case-insensitively on their last segment
  (``mcp__fs__read_file`` → ``read_file``).

A read is kept when its result carries an error line (the error must survive), when a later message
points back at one of its blocks with a dedup marker (the block would be lost), or when the marker is
not shorter. The superseded body is declared dropped to the gate."""

from __future__ import annotations

import posixpath
import re
import shlex
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from freellm.compression.engines import EngineParams, dedup
from freellm.compression.protect import ERROR_RE, strip_ansi
from freellm.compression.text import one_line, split_blocks
from freellm.compression.types import (
    TOOL_ROLES,
    EngineContext,
    EngineResult,
    Message,
    Slots,
    ToolCall,
    content_str,
    with_content,
)

__all__ = ["ID", "LOSSY", "Params", "classify", "run", "tool_name"]

ID = "read-lifecycle"
LOSSY = True

READ_TOOLS = frozenset({"read", "read_file", "view", "view_file", "cat", "open_file", "get_file", "read_text_file"})
WRITE_TOOLS = frozenset(
    {"write", "write_file", "edit", "edit_file", "create_file", "str_replace", "apply_patch", "replace",
     "multi_edit", "multiedit"}
)
SHELL_TOOLS = frozenset(
    {"bash", "shell", "sh", "terminal", "run", "exec", "execute", "run_command", "run_terminal_cmd",
     "execute_command", "local_shell", "run_shell_command"}
)
PATH_KEYS = ("path", "file_path", "filepath", "file", "target")
_NAME_SPLIT_RE = re.compile(r"__|[.:/]")
_SHELL_META_RE = re.compile(r"[|;&<>`$]")
_PATCH_FILE_RE = re.compile(r"^(?:\*\*\* (?:Update|Add|Delete) File: (.+?)|\+\+\+ (?:b/)?(\S+))\s*$", re.M)
_MARKER_RE = re.compile(re.escape(dedup.MARKER_PREFIX) + r"(.*?)…\]")


class Params(EngineParams):
    pass


def _norm_path(p: str) -> str:
    p = p.strip().strip("\"'")
    if not p:
        return ""
    return posixpath.normpath(p)


def tool_name(name: str) -> str:
    parts = [x for x in _NAME_SPLIT_RE.split(name.lower()) if x]
    return parts[-1] if parts else ""


def _arg_paths(args: Mapping[str, Any]) -> list[str]:
    for key in PATH_KEYS:
        v = args.get(key)
        if isinstance(v, str) and v.strip():
            return [_norm_path(v)]
    return []


def _shell(command: str) -> tuple[str, list[str]] | None:
    if _SHELL_META_RE.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if len(words) < 2 or words[0] not in ("cat", "sed", "head", "tail"):
        return None
    operands = [w for w in words[1:] if not w.startswith("-")]
    if words[0] == "sed":
        in_place = any(w.startswith("-i") or w == "--in-place" for w in words[1:])
        # sed's first operand is its script unless -e gave one
        has_e = any(w == "-e" or w.startswith("-e") for w in words[1:])
        files = operands if has_e else operands[1:]
        paths = [_norm_path(f) for f in files if f]
        return ("write" if in_place else "read", paths) if paths else None
    if words[0] in ("head", "tail"):
        operands = [w for w in operands if not w.isdigit()]
    paths = [_norm_path(f) for f in operands if f]
    return ("read", paths) if paths else None


def classify(call: ToolCall) -> tuple[str, list[str]] | None:
    """(``"read"`` | ``"write"``, paths) for a file-touching call, else ``None``."""
    name = tool_name(call.name)
    args = call.args
    if args is None:
        return None
    if name == "str_replace_editor":
        paths = _arg_paths(args)
        if not paths:
            return None
        return ("read" if args.get("command") == "view" else "write", paths)
    if name in READ_TOOLS:
        paths = _arg_paths(args)
        return ("read", paths) if paths else None
    if name == "apply_patch":
        patch = next((v for k in ("input", "patch", "diff", "content") if isinstance(v := args.get(k), str)), "")
        paths = [_norm_path(a or b) for a, b in _PATCH_FILE_RE.findall(patch)]
        paths = [p for p in paths if p and p != "/dev/null"] or _arg_paths(args)
        return ("write", paths) if paths else None
    if name in WRITE_TOOLS:
        paths = _arg_paths(args)
        return ("write", paths) if paths else None
    if name in SHELL_TOOLS:
        command = args.get("command", args.get("cmd"))
        if isinstance(command, list):
            command = " ".join(str(x) for x in command)
        if isinstance(command, str):
            return _shell(command)
    return None


def _previews(messages: Slots) -> dict[int, list[str]]:
    """Per message, the previews of the dedup markers it holds."""
    out: dict[int, list[str]] = {}
    for i, m in enumerate(messages):
        text = content_str(m)
        if text and dedup.MARKER_PREFIX in text:
            out[i] = _MARKER_RE.findall(text)
    return out


def _blocks_referenced(text: str, previews: Counter[str]) -> bool:
    """Whether a dedup marker elsewhere previews one of ``text``'s blocks (its copy would be lost)."""
    live = [p for p, n in previews.items() if n > 0 and p]
    if not live:
        return False
    heads = [one_line(b, 400) for b, _ in split_blocks(text)]
    return any(h.startswith(p) for h in heads for p in live)


def _results(messages: Slots) -> dict[str, int]:
    out: dict[str, int] = {}
    for i, m in enumerate(messages):
        if m is not None and m.get("role") in TOOL_ROLES:
            tcid = m.get("tool_call_id")
            if isinstance(tcid, str) and tcid not in out:
                out[tcid] = i
    return out


def _calls_in_order(calls: Iterable[ToolCall]) -> list[ToolCall]:
    return sorted(calls, key=lambda c: (c.message_index, c.position))


def run(messages: Slots, ctx: EngineContext, params: Params) -> EngineResult:
    events = [(c, kind_paths) for c in _calls_in_order(ctx.calls.values()) if (kind_paths := classify(c))]
    if not events:
        return EngineResult(list(messages))
    last_touch: dict[str, tuple[int, int]] = {}
    for call, (_, paths) in events:
        for p in paths:
            last_touch[p] = (call.message_index, call.position)
    results = _results(messages)
    out: list[Message | None] = list(messages)
    dropped: dict[int, list[str]] = {}
    by_msg = _previews(messages)
    previews: Counter[str] = Counter(p for ps in by_msg.values() for p in ps)
    # latest first: superseding a later copy may release the earlier one its dedup markers pointed at
    for call, (kind, paths) in reversed(events):
        if kind != "read":
            continue
        r = results.get(call.id)
        if r is None or r in ctx.locked or r <= call.message_index:
            continue
        m = messages[r]
        text = content_str(m)
        if m is None or text is None:
            continue
        me = (call.message_index, call.position)
        later = next((p for p in paths if last_touch.get(p, me) > me), None)
        if later is None:
            continue
        mark = f'[read superseded — "{later}" was re-read or modified later]'
        if len(mark) >= len(text) or ERROR_RE.search(strip_ansi(text)):
            continue
        if _blocks_referenced(text, previews):
            continue
        previews.subtract(by_msg.get(r, ()))
        out[r] = with_content(m, mark)
        dropped[r] = text.split("\n")
    return EngineResult(out, dropped)
