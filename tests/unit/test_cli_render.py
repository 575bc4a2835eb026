"""The operator commands' renderer: aligned tables, colour only when asked for, a spinner that is drawn
only on a terminal and always erased. (The CLI on a real pseudo-terminal: tests/integration/test_cli_keys.)"""

from __future__ import annotations

import asyncio
import io

import pytest

from freellm.cli_render import SPINNER_FRAMES, Style, colour_wanted, progress, render_table, text_width


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_columns_align_on_visible_width() -> None:
    style = Style(True)
    table = render_table(
        ("NAME", "KEY", "N"),
        [[style.paint("alpha", "green"), "…AbCd", "7"], ["b", "…", "1234"]],
        style,
        right=(2,),
    )
    plain = [line.replace("\x1b[1m", "").replace("\x1b[32m", "").replace("\x1b[0m", "") for line in table.splitlines()]
    assert plain == ["NAME   KEY       N", "alpha  …AbCd     7", "b      …      1234"]
    assert all(not line.endswith(" ") for line in table.splitlines())


def test_plain_style_adds_nothing() -> None:
    style = Style(False)
    assert style.paint("x", "bold", "red") == "x"
    assert style.status("healthy") == "healthy" and style.flag(False) == "no"
    assert render_table(("A", "B"), [["1", "2"]], style) == "A  B\n1  2"


def test_statuses_have_colours() -> None:
    style = Style(True)
    assert style.status("healthy") == "\x1b[32mhealthy\x1b[0m"
    assert style.status("unknown") == "\x1b[33munknown\x1b[0m"
    assert style.status("invalid") == "\x1b[31minvalid\x1b[0m"
    assert style.flag(True) == "\x1b[32myes\x1b[0m"


def test_text_width_counts_terminal_columns() -> None:
    assert text_width("\x1b[1;32mok\x1b[0m") == 2
    assert text_width("…AbCd") == 5
    assert text_width("日本") == 4
    assert text_width("e\u0301") == 1


@pytest.mark.parametrize(
    ("tty", "env", "wanted"),
    [
        (True, {"TERM": "xterm"}, True),
        (True, {}, True),
        (False, {"TERM": "xterm"}, False),
        (True, {"TERM": "xterm", "NO_COLOR": ""}, False),
        (True, {"TERM": "xterm", "NO_COLOR": "1"}, False),
        (True, {"TERM": "dumb"}, False),
    ],
)
def test_colour_only_on_a_terminal_without_no_color(tty: bool, env: dict[str, str], wanted: bool) -> None:
    stream = FakeTerminal() if tty else io.StringIO()
    assert colour_wanted(stream, env) is wanted
    assert Style.for_stream(stream, env).enabled is wanted


async def test_the_spinner_is_drawn_and_erased_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    term = FakeTerminal()
    with pytest.raises(RuntimeError):
        async with progress("working", term):
            await asyncio.sleep(0)
            raise RuntimeError("the body failed")
    written = term.getvalue()
    assert written.startswith(f"\r{SPINNER_FRAMES[0]} working…")
    assert written.endswith("\r\x1b[K")  # erased even though the body raised


@pytest.mark.parametrize("env", [{"TERM": "xterm", "NO_COLOR": "1"}, {"TERM": "dumb"}])
async def test_no_spinner_with_no_color_or_a_dumb_terminal(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    term = FakeTerminal()
    async with progress("working", term):
        await asyncio.sleep(0)
    assert term.getvalue() == ""


async def test_no_spinner_off_a_terminal() -> None:
    pipe = io.StringIO()
    async with progress("working", pipe):
        await asyncio.sleep(0)
    assert pipe.getvalue() == ""
