"""The connector's user-facing error types, below every other connector module (no imports)."""
from __future__ import annotations


class PylogOptionError(ValueError):
    """A source or sink option is missing, unknown in this context, or has a value outside its accepted set."""
