"""Fixtures for the dashboard tests: Debian's Chromium driven by Playwright's async API, one browser for
the test module and a fresh context (own sessionStorage) per test.

The async API runs on pytest-asyncio's session loop, the loop every other async test of the suite uses
(``asyncio_default_fixture_loop_scope = "session"``), so these tests leave no loop or policy behind. The
sync API would not do: it keeps a loop of its own marked as running between calls, and every later
async test in the same run would then fail to start.

Playwright never downloads a browser here: it launches the system Chromium (``FREELLM_CHROMIUM``, else
``chromium`` on the PATH, else ``/usr/bin/chromium``). A machine without it fails these tests with a
message saying how to install it; they are never skipped. Each test leaves a screenshot of where it
ended in ``FREELLM_TEST_ARTIFACTS`` (default ``tests/ui/artifacts/``, git-ignored).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.async_api import Browser, ConsoleMessage, Error, Page, async_playwright, expect

ARTIFACTS_ENV = "FREELLM_TEST_ARTIFACTS"
CHROMIUM_ENV = "FREELLM_CHROMIUM"
DEFAULT_ARTIFACTS = Path(__file__).parent / "artifacts"
WIDE = {"width": 1280, "height": 900}
TIMEOUT_MS = 10_000
"""How long a step may take: a loaded CI machine, not a sleep (every wait ends as soon as it holds)."""

expect.set_options(timeout=TIMEOUT_MS)


def chromium_path() -> str:
    configured = os.environ.get(CHROMIUM_ENV, "").strip()
    candidates = [configured] if configured else [shutil.which("chromium") or "", "/usr/bin/chromium"]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    pytest.fail(
        "The dashboard tests need Debian's Chromium and did not find it "
        f"({CHROMIUM_ENV} or `chromium` on the PATH or /usr/bin/chromium). Install it with "
        "`apt-get install -y chromium` (.ci/run does this on a clean machine).",
        pytrace=False,
    )


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    """One headless Chromium per test module (a launch costs about a second; contexts isolate tests).
    Module-scoped, not session-scoped, so that the browser and Playwright's driver are gone, and nothing
    of theirs is left on the shared loop, before the rest of the suite runs."""
    async with async_playwright() as driver:
        launched = await driver.chromium.launch(executable_path=chromium_path(), headless=True)
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    directory = Path(os.environ.get(ARTIFACTS_ENV) or DEFAULT_ARTIFACTS)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@dataclass
class PageProblems:
    """What the page reported on its own: uncaught exceptions and Content-Security-Policy refusals."""

    errors: list[str] = field(default_factory=list)

    def page_error(self, exc: Error) -> None:
        self.errors.append(f"page error: {exc}")

    def console(self, message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text or "Refused to" in message.text:
            self.errors.append(f"console: {message.text}")


@pytest.fixture
async def page(browser: Browser, artifacts: Path, request: pytest.FixtureRequest) -> AsyncIterator[Page]:
    """A fresh page at 1280 px; afterwards a screenshot, and no script error or CSP refusal allowed."""
    context = await browser.new_context(viewport={"width": WIDE["width"], "height": WIDE["height"]})
    context.set_default_timeout(TIMEOUT_MS)
    new_page = await context.new_page()
    problems = PageProblems()
    new_page.on("pageerror", problems.page_error)
    new_page.on("console", problems.console)
    try:
        yield new_page
    finally:
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
        try:
            await new_page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)
        finally:
            await context.close()
    assert not problems.errors, problems.errors
