"""bounded_json.loads: JSON values in, a ValueError naming the problem for hostile or broken input."""

import pytest

from broker_sim.registry import bounded_json


def test_decodes_str_and_bytes_alike():
    assert bounded_json.loads('{"a": [1, "x", null]}') == {"a": [1, "x", None]}
    assert bounded_json.loads('{"a": "\u00e9"}'.encode()) == {"a": "\u00e9"}


def test_nesting_at_the_limit_is_accepted_one_more_is_refused():
    assert bounded_json.loads("[" * 64 + "]" * 64, max_depth=64) is not None
    with pytest.raises(ValueError, match="nested deeper than 64"):
        bounded_json.loads("[" * 65 + "]" * 65, max_depth=64)


def test_a_hundred_thousand_open_brackets_are_refused_without_recursion():
    with pytest.raises(ValueError, match="nested deeper"):
        bounded_json.loads('{"a":' * 100_000)


def test_brackets_inside_strings_do_not_count():
    text = '{"k": "' + "[[[[" * 100 + '\\" {{{"}'
    assert bounded_json.loads(text, max_depth=2) == {"k": "[[[[" * 100 + '" {{{'}


def test_malformed_json_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match="malformed JSON"):
        bounded_json.loads('{"a": }')
    with pytest.raises(ValueError, match="malformed JSON"):
        bounded_json.loads('"unterminated')


def test_non_standard_constants_are_refused():
    with pytest.raises(ValueError, match="NaN"):
        bounded_json.loads('{"a": NaN}')


def test_invalid_utf8_is_refused():
    with pytest.raises(ValueError, match="invalid UTF-8"):
        bounded_json.loads(b'{"a": "\xff"}')


@pytest.mark.parametrize("text", ['"' + '\\"' * 300_000, '"' + "\\" * 600_001, "[" * 10 + '"' + "a" * 600_000])
def test_an_unterminated_string_is_refused_in_linear_time(text):
    import time
    started = time.monotonic()
    with pytest.raises(ValueError, match="malformed JSON"):
        bounded_json.loads(text)
    assert time.monotonic() - started < 2
