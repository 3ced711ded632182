"""JSON decoding that hostile input cannot turn into a RecursionError.

``json.loads`` recurses once per nested array or object, so a body of ten thousand ``[`` exhausts the C stack
guard (RecursionError) before it says anything useful.  ``loads`` first scans the text once, counting the
nesting of brackets outside strings, and refuses anything deeper than ``max_depth`` before ``json.loads``
sees it.  Every failure is a ``ValueError`` whose message names the problem; the REST layer turns it into a
4xx, the schema parsers into a ``SchemaError``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

DEFAULT_MAX_DEPTH = 64

# A string literal (with its escapes) or one bracket: the scan skips strings whole, so brackets inside them
# do not count.  An unterminated string runs to the end of the text (json.loads then reports it): were it
# to match nothing, the scan would retry at every quote inside it, quadratic in the text.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)


def nesting_depth(text: str, limit: int) -> int:
    """The deepest bracket nesting of ``text`` outside string literals, counting no further than ``limit + 1``."""
    depth = deepest = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif token in "]}":
            depth -= 1
    return deepest


def loads(data: str | bytes, max_depth: int = DEFAULT_MAX_DEPTH,
          object_hook: Callable[[dict[str, Any]], Any] | None = None) -> Any:
    """Decode one JSON value from ``data`` (UTF-8 when bytes); ``object_hook`` as json.loads has it.

    Raises ValueError naming the problem: invalid UTF-8, nesting deeper than ``max_depth``, or malformed
    JSON (with json's position).  Non-standard constants (NaN, Infinity) are refused, as Jackson does.
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"invalid UTF-8 at byte {e.start}") from None
    else:
        text = data
    if nesting_depth(text, max_depth) > max_depth:
        raise ValueError(f"JSON nested deeper than {max_depth} levels")
    try:
        return json.loads(text, parse_constant=_refuse_constant, object_hook=object_hook)
    except json.JSONDecodeError as e:
        raise ValueError(f"malformed JSON: {e}") from None


def _refuse_constant(name: str) -> object:
    raise ValueError(f"malformed JSON: {name} is not a JSON value")
