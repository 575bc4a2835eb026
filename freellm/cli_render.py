"""Terminal output for the operator commands (``freellm keys …``, ``freellm status``): aligned tables,
colour and a progress indicator — each only where a person is watching.

Colour is ANSI escapes on stdout only when stdout is a terminal, ``NO_COLOR`` is unset (any value, even
empty, turns it off: https://no-color.org) and ``TERM`` is not ``dumb``; output piped into a file or
another program is plain text, so ``grep`` and scripts never see escape codes. The progress indicator
is drawn on stderr only when stderr is a terminal, and erased before anything else is printed, so it
never mixes with the output itself; ``NO_COLOR`` and ``TERM=dumb`` turn it off too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
import unicodedata
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Final, TextIO

__all__ = ["Style", "progress", "render_table", "text_width"]

_ANSI: Final = re.compile(r"\x1b\[[0-9;]*m")
_CODES: Final[Mapping[str, str]] = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "cyan": "36",
}
SPINNER_FRAMES: Final = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
SPINNER_INTERVAL_S: Final = 0.08


def colour_wanted(stream: TextIO, env: Mapping[str, str]) -> bool:
    """ANSI colour for ``stream``: a terminal, no ``NO_COLOR``, a ``TERM`` that is not ``dumb``."""
    if "NO_COLOR" in env or env.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


class Style:
    """Paints text with ANSI colours when enabled, and returns it untouched when not."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    @classmethod
    def for_stream(cls, stream: TextIO, env: Mapping[str, str] | None = None) -> Style:
        return cls(colour_wanted(stream, os.environ if env is None else env))

    def paint(self, text: str, *styles: str) -> str:
        if not self.enabled or not styles or not text:
            return text
        return f"\x1b[{';'.join(_CODES[s] for s in styles)}m{text}\x1b[0m"

    def status(self, status: str) -> str:
        """A key's health (``healthy``, ``unknown``, ``error``, ``invalid``, ``disabled``) in its colour."""
        colour = {"healthy": "green", "unknown": "yellow"}.get(status, "red")
        return self.paint(status, colour)

    def flag(self, on: bool) -> str:
        """``yes`` in green or ``no`` in red."""
        return self.paint("yes", "green") if on else self.paint("no", "red")


def text_width(text: str) -> int:
    """Columns ``text`` takes on a terminal: ANSI escapes take none, wide (East Asian) characters two,
    combining marks none."""
    plain = _ANSI.sub("", text)
    width = 0
    for char in plain:
        if unicodedata.combining(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def render_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], style: Style, *, right: Sequence[int] = ()
) -> str:
    """Rows under bold headers, columns padded to their widest cell and two spaces apart; the columns
    whose indexes are in ``right`` (numbers) are right-aligned. No trailing spaces."""
    widths = [text_width(h) for h in headers]
    for row in rows:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], text_width(cell))

    def line(cells: Sequence[str]) -> str:
        out: list[str] = []
        for index, cell in enumerate(cells):
            pad = " " * (widths[index] - text_width(cell))
            out.append(pad + cell if index in right else cell + pad)
        return "  ".join(out).rstrip()

    lines = [line([style.paint(h, "bold") for h in headers])]
    lines += [line(row) for row in rows]
    return "\n".join(lines)


@contextlib.asynccontextmanager
async def progress(label: str, stream: TextIO | None = None) -> AsyncIterator[None]:
    """A spinner with ``label`` on ``stream`` (stderr) while the body runs — only where colour would be
    used (a terminal, no ``NO_COLOR``, ``TERM`` not ``dumb``), and erased when the body ends, whatever it
    raised. Elsewhere it draws nothing."""
    out = sys.stderr if stream is None else stream
    if not colour_wanted(out, os.environ):
        yield
        return

    def draw(frame: int) -> None:
        out.write(f"\r{SPINNER_FRAMES[frame % len(SPINNER_FRAMES)]} {label}…")
        out.flush()

    async def spin() -> None:
        frame = 0
        while True:
            await asyncio.sleep(SPINNER_INTERVAL_S)
            frame += 1
            draw(frame)

    draw(0)  # at once: the body may be quicker than one interval
    task = asyncio.get_running_loop().create_task(spin())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        out.write("\r\x1b[K")
        out.flush()
