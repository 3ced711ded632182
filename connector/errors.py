"""The connector's user-facing error types, below every other connector module (no imports)."""
from __future__ import annotations


class PylogOptionError(ValueError):
    """A source or sink option is missing, unknown in this context, or has a value outside its accepted set."""


class PylogAuthorizationError(PermissionError):
    """The brokers' ACLs refuse the query's principal an operation; the message names the ACL to grant
    (``connector.error_codes.refused``)."""
