"""Public face of the package: re-exports only (filled in as the modules land)."""

from luigi.__version__ import VERSION as __version__

__all__ = ["__version__"]
