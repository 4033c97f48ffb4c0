"""Driving the visualiser in a real headless Chromium (Playwright's Python package, Debian's browser).

``browser()`` launches Chromium once per test module; ``watched_page(browser)`` opens a page that
records every JavaScript dialog (alert/confirm/prompt: the visualiser never opens one, so any is an
injected script), console error, uncaught exception and failed response in ``page.problems``.
Tests that need a browser skip when Chromium or Playwright is missing, and fail when ``CI`` is set.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-smooth-scrolling",  # a wheel scroll lands at once: no test races a scroll animation
]
VISUALISER = "/static/visualiser/index.html"
TIMEOUT_MS = 20_000


def chromium_path() -> str | None:
    """The Chromium to drive: ``LUIGI_TEST_CHROMIUM``, else Debian's ``/usr/bin/chromium``."""
    candidates = [os.environ.get("LUIGI_TEST_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")]
    return next((c for c in candidates if c and Path(c).exists()), None)


def need(reason: str) -> None:
    """Skip for ``reason`` locally; under CI (``CI`` set) the browser tests must run, so fail."""
    if os.environ.get("CI"):
        pytest.fail(
            f"CI must run the browser tests, but {reason} (scripts/ensure-browser.sh installs Chromium)"
        )
    pytest.skip(reason)


@contextlib.contextmanager
def browser() -> Iterator[Any]:
    """A launched headless Chromium (skips or fails per ``need`` when it cannot be had)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need("the Playwright package is not installed (pip install playwright; no 'playwright install')")
    executable = chromium_path()
    if executable is None:
        need("Chromium is not installed (scripts/ensure-browser.sh, or set LUIGI_TEST_CHROMIUM)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One Chromium per test module (``pytest_plugins = ["helpers.browser"]`` in the module)."""
    with browser() as launched:
        yield launched


@contextlib.contextmanager
def watched_page(launched: Any, refresh_seconds: int | None = 1, **context_options: Any) -> Iterator[Any]:
    """A fresh page (own storage) whose problems are collected in ``page.problems``.

    ``refresh_seconds`` sets the visualiser's live refresh preference, so tests see changes quickly.
    """
    context_options.setdefault("viewport", {"width": 1440, "height": 900})
    context = launched.new_context(**context_options)
    context.set_default_timeout(TIMEOUT_MS)
    if refresh_seconds is not None:
        context.add_init_script(
            f"window.localStorage.setItem('luigi.visualiser.refreshSeconds', '{refresh_seconds}')"
        )
    page = context.new_page()
    page.problems = []
    page.dialogs = []

    def on_dialog(dialog: Any) -> None:
        page.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("console", lambda msg: msg.type == "error" and page.problems.append(f"console: {msg.text}"))
    page.on("pageerror", lambda error: page.problems.append(f"uncaught: {error}"))
    try:
        yield page
    finally:
        context.close()


@contextlib.contextmanager
def checked_page(launched: Any, **context_options: Any) -> Iterator[Any]:
    """A ``watched_page`` that fails the test if a script opened a dialog or logged a problem."""
    with watched_page(launched, **context_options) as opened:
        yield opened
        assert opened.dialogs == [], "a script opened a dialog"
        assert opened.problems == []


def open_view(page: Any, base_url: str, fragment: str = "#tab=tasks") -> None:
    """Load the visualiser at ``fragment`` and wait until its first refresh reached the scheduler."""
    page.goto(f"{base_url.rstrip('/')}{VISUALISER}{fragment}")
    page.wait_for_selector("#connection.up")


def card_count(page: Any, status: str) -> int:
    """The number on the task list's card for ``status`` (waits until it is a number)."""
    card = page.locator(f'.card[data-status="{status}"] .card-count')
    page.wait_for_function(
        "el => /^[0-9,]+$/.test(el.textContent)", arg=card.element_handle(), timeout=TIMEOUT_MS
    )
    return int(card.inner_text().replace(",", ""))
