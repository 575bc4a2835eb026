"""Protected spans: the pieces of a prompt no engine may lose, and the one place that finds them.

Categories (the fidelity gate checks each with its own threshold, see :mod:`freellm.compression.gate`):

- **numbers** — a *number literal* is a maximal run of digits with optional ``.digits`` groups and an
  optional exponent, not glued to a preceding word character or dot, optionally followed by a unit suffix
  (``12``, ``3.14``, ``1.2.3``, ``1e-5``, ``4`` in ``[ 4%]``, ``1.23`` in ``1.23s``). Digits inside
  identifiers (``test_12``, ``v1``, ``a1b2c3``, ``\\u00e9``) are not numbers.
- **other** — fenced code blocks, inline code, URLs, paths (``a/b/c``, ``file.py``), stack-frame lines,
  ``key=value`` pairs.
- **JSON keys** — ``"key":``.
- **diff hunk headers** — ``@@ -a,b +c,d @@``.
- **error lines** — a line naming an error, exception, failure or traceback (``E   AssertionError: …``,
  ``FAILED tests/…``, ``Traceback (most recent call last):``, ``error[E0308]: …``, ``npm ERR! …``,
  ``src/a.ts(3,5): error TS2322: …``); and, in instructions (system/user/assistant text, not tool output),
  **constraint lines** (``must``, ``must not``, ``never``, ``do not``, ``IMPORTANT``, ``REQUIRED``…).

Every pattern is linear-time on adversarial input (no nested unbounded quantifiers over overlapping
classes) and compiled once at import.

Every span but a fenced block lies within one line and starts and ends with a non-space (or is
stripped), and number literals are found line by line: the gate's quick proof
(:mod:`freellm.compression.gate`) relies on both, so a pattern that breaks either must change it too
(tests/unit/compression/test_gate_reuse.py compares the proof with the full judgement).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "ANSI_RE",
    "Spans",
    "diff_ranges",
    "error_line_ranges",
    "error_line_set",
    "fence_ranges",
    "is_error_line",
    "is_must_keep",
    "norm_line",
    "numbers_in",
    "protected_ranges",
    "spans_of",
    "strip_ansi",
]

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")

NUMBER_RE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)*(?:[eE][-+]?\d+)?)[a-zA-Z%]*(?!\w)")
INLINE_CODE_RE = re.compile(r"`[^`\n]{1,200}`")
URL_RE = re.compile(r"\b(?:https?|ftp|file)://[^\s<>\"'`)\]}]+")
PATH_RE = re.compile(r"(?<![\w/.~-])(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]*\w")
_EXTENSIONS = (
    r"(?:py|pyi|js|jsx|ts|tsx|mjs|cjs|json|ya?ml|toml|md|rs|go|java|kt|c|h|cc|cpp|hpp"
    r"|cs|rb|php|sh|sql|html|css|scss|lock|txt|cfg|ini|xml|vue|svelte|swift|lua|ex|exs)\b"
)
FILE_RE = re.compile(r"(?<![\w/.-])[\w-]+\." + _EXTENSIONS)
_EXT_RE = re.compile(r"\." + _EXTENSIONS)
STACK_RE = re.compile(
    r"^[ \t]*(?:at [^\n]{1,400}"
    r"|File \"[^\"\n]+\", line \d+[^\n]*"
    r"|[\w./\\-]*[\w-]\.\w{1,5}:\d+(?::\d+)?(?=[:\s),]|$)[^\n]*)$",
    re.M,
)
KV_RE = re.compile(r"(?<![\w-])[A-Za-z_][\w.-]{0,40}=(?!=)[^\s,;&)\]}'\"]{1,120}")
JSON_KEY_RE = re.compile(r'"[^"\\\n]{1,80}"(?=\s*:)')
HUNK_RE = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@", re.M)

ERROR_RE = re.compile(
    r"^[ \t]*E {2,}\S"
    r"|^[ \t]*Traceback \(most recent call last\)"
    r"|\b(?:FAILED|FAILURE|FAIL|ERROR|FATAL|PANIC)(?![\w-])"
    r"|\bERR!"
    r"|^[ \t]*[\w.]*(?:Error|Exception|Failure|Fault)\b(?=:|[ \t]*$)"
    r"|:\d+:(?:\d+:)? [\w.]*(?:Error|Exception)\b"
    r"|(?i:\b(?:error|fatal)(?:\[[\w-]{1,20}\])?(?: [A-Z]{1,4}\d{1,6})?:)"
    r"|(?i:\bpanicked at\b|\bsegmentation fault\b|\bcore dumped\b|\bunhandled (?:promise )?rejection\b"
    r"|\bexit (?:code|status):? [1-9])"
    r"|^[ \t]*(?:✕|✗|✘|\u00d7|❌)",
    re.M,
)
CONSTRAINT_RE = re.compile(
    r"\b(?:MUST|NEVER|ALWAYS|REQUIRED|IMPORTANT|SHALL)\b"
    r"|(?i:\b(?:must|must not|do not|don't|never|shall not)\b)"
)
FENCE_OPEN_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def strip_ansi(text: str) -> str:
    return ANSI_RE.sub("", text) if "\x1b" in text else text


def norm_line(line: str) -> str:
    """How lines are compared across engines: ANSI codes removed, surrounding whitespace stripped."""
    return strip_ansi(line).strip()


def numbers_in(text: str) -> set[str]:
    return set(NUMBER_RE.findall(text))


def is_error_line(line: str) -> bool:
    """Whether one line names an error (see the module docstring)."""
    return ERROR_RE.search(line) is not None


def is_must_keep(line: str, *, instructions: bool) -> bool:
    """A line no engine may drop: an error line, a diff hunk header, or (in instructions) a constraint."""
    if ERROR_RE.search(line) is not None or HUNK_RE.match(line) is not None:
        return True
    return instructions and CONSTRAINT_RE.search(line) is not None


def fence_ranges(text: str) -> list[tuple[int, int]]:
    """Character ranges of fenced code blocks (an unclosed fence runs to the end of the text)."""
    if "```" not in text and "~~~" not in text:
        return []
    out: list[tuple[int, int]] = []
    pos = 0
    start = -1
    fence = ""
    n = len(text)
    while pos <= n:
        end = text.find("\n", pos)
        if end < 0:
            end = n
        line = text[pos:end]
        if start < 0:
            m = FENCE_OPEN_RE.match(line)
            if m:
                start, fence = pos, m.group(1)
        else:
            s = line.lstrip(" ")
            if len(line) - len(s) <= 3 and s.startswith(fence) and not s[len(fence) :].strip(fence[0]).strip():
                out.append((start, end))
                start = -1
        pos = end + 1
    if start >= 0:
        out.append((start, n))
    return out


_DIFF_LINE_START = frozenset(" +-\\")


def diff_ranges(text: str) -> list[tuple[int, int]]:
    """Character ranges of diff hunks: a hunk header and the ``' '``/``+``/``-`` lines after it."""
    if "@@ -" not in text:
        return []
    out: list[tuple[int, int]] = []
    n = len(text)
    for m in HUNK_RE.finditer(text):
        start = m.start()
        if out and start < out[-1][1]:
            continue
        end = text.find("\n", start)
        end = n if end < 0 else end
        while end < n:
            nxt = text.find("\n", end + 1)
            nxt = n if nxt < 0 else nxt
            line = text[end + 1 : nxt]
            if not line or line[0] not in _DIFF_LINE_START or line.startswith("@@ -"):
                break
            end = nxt
        out.append((start, end))
    return out


# Every ERROR_RE / CONSTRAINT_RE match contains one of these (lower-cased) substrings, so only the lines
# holding one are run through the full patterns (str.find is far cheaper than a regex scan).
_ERROR_KEYS = ("error", "fail", "fatal", "panic", "err!", "exception", "traceback", "fault", "core dumped",
               "unhandled", "exit ", "\u2715", "\u2717", "\u2718", "\u00d7", "\u274c")
_CONSTRAINT_KEYS = ("must", "never", "always", "required", "important", "shall", "do not", "don't")


def _candidate_lines(text: str, keys: tuple[str, ...], *, pytest_e: bool) -> list[tuple[int, int]]:
    low = text.lower()
    starts: set[int] = set()
    for key in keys:
        at = low.find(key)
        while at >= 0:
            starts.add(text.rfind("\n", 0, at) + 1)
            at = low.find(key, at + len(key))
    if pytest_e:
        at = text.find("E  ")
        while at >= 0:
            starts.add(text.rfind("\n", 0, at) + 1)
            at = text.find("E  ", at + 3)
    out: list[tuple[int, int]] = []
    for start in sorted(starts):
        end = text.find("\n", start)
        out.append((start, len(text) if end < 0 else end))
    return out


def _line_spans(text: str, pattern: re.Pattern[str], keys: tuple[str, ...], *, pytest_e: bool) -> list[tuple[int, int]]:
    """(start, end) of every line of ``text`` where ``pattern`` matches."""
    return [(a, b) for a, b in _candidate_lines(text, keys, pytest_e=pytest_e) if pattern.search(text, a, b)]


def error_line_ranges(text: str, *, instructions: bool) -> list[tuple[int, int]]:
    out = _line_spans(text, ERROR_RE, _ERROR_KEYS, pytest_e=True)
    if instructions:
        out += _line_spans(text, CONSTRAINT_RE, _CONSTRAINT_KEYS, pytest_e=False)
    return out


def error_line_set(text: str, *, instructions: bool) -> frozenset[str]:
    """The stripped error lines (and, for instructions, constraint lines) of an ANSI-free text."""
    return frozenset(s for a, b in error_line_ranges(text, instructions=instructions) if (s := text[a:b].strip()))


def _find_files(text: str) -> list[tuple[int, int]]:
    """FILE_RE's matches, found from each extension backwards (a leading-class regex scans every position)."""
    out: list[tuple[int, int]] = []
    for m in _EXT_RE.finditer(text):
        d = m.start()
        s0 = d
        while s0 > 0 and (text[s0 - 1].isalnum() or text[s0 - 1] in "_-"):
            s0 -= 1
        if s0 == d or (s0 > 0 and (text[s0 - 1].isalnum() or text[s0 - 1] in "_/.-")):
            continue
        out.append((s0, m.end()))
    return out


@dataclass(frozen=True, slots=True)
class Spans:
    numbers: frozenset[str]
    other: frozenset[str]
    json_keys: frozenset[str]
    hunks: frozenset[str]
    errors: frozenset[str]


def _other_spans(text: str) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = list(fence_ranges(text))
    if "`" in text:
        out.extend(m.span() for m in INLINE_CODE_RE.finditer(text))
    if "://" in text:
        out.extend(m.span() for m in URL_RE.finditer(text))
    if "/" in text:
        out.extend(m.span() for m in PATH_RE.finditer(text))
    if "." in text:
        out.extend(_find_files(text))
    if "=" in text:
        out.extend(m.span() for m in KV_RE.finditer(text))
    return out


def _stack_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in STACK_RE.finditer(text)] if ("at " in text or ":" in text) else []


def spans_of(text: str, *, instructions: bool) -> Spans:
    """Every protected span of ``text`` by category (ANSI codes are ignored)."""
    text = strip_ansi(text)
    other = {text[a:b] for a, b in _other_spans(text)}
    other.update(text[a:b].strip() for a, b in _stack_spans(text))
    other.discard("")
    return Spans(
        numbers=frozenset(NUMBER_RE.findall(text)),
        other=frozenset(other),
        json_keys=frozenset(JSON_KEY_RE.findall(text)) if '"' in text else frozenset(),
        hunks=frozenset(m.group(0) for m in HUNK_RE.finditer(text)) if "@@ -" in text else frozenset(),
        errors=error_line_set(text, instructions=instructions),
    )


def protected_ranges(text: str, *, instructions: bool) -> list[tuple[int, int]]:
    """Sorted, merged character ranges covered by a protected span, an error line or a constraint line."""
    ranges = _other_spans(text) + _stack_spans(text)
    ranges.extend(m.span() for m in NUMBER_RE.finditer(text))
    if '"' in text:
        ranges.extend(m.span() for m in JSON_KEY_RE.finditer(text))
    if "@@ -" in text:
        ranges.extend(m.span() for m in HUNK_RE.finditer(text))
    ranges.extend(error_line_ranges(text, instructions=instructions))
    if not ranges:
        return []
    ranges.sort()
    merged = [ranges[0]]
    for a, b in ranges[1:]:
        la, lb = merged[-1]
        if a <= lb:
            if b > lb:
                merged[-1] = (la, b)
        else:
            merged.append((a, b))
    return merged
