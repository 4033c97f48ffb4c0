"""The Schedules tab's browser tests share a headless Chromium per module and a checked page per test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from helpers import browser as browser_fixtures
from helpers.browser import checked_page

chromium = browser_fixtures.chromium  # one Chromium per module, the fixture every browser test shares


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    """A page in UTC that fails the test on any dialog or console error."""
    with checked_page(chromium, timezone_id="UTC") as opened:
        yield opened
