"""Where the examples write their outputs: ``$LUIGI_EXAMPLES_DIR`` or ``./data/examples``."""

from __future__ import annotations

import os


def output_dir() -> str:
    """The root folder for every example's output files."""
    return os.environ.get("LUIGI_EXAMPLES_DIR", os.path.join("data", "examples"))


def output_path(*parts: str) -> str:
    """A path under the examples' output folder."""
    return os.path.join(output_dir(), *parts)
