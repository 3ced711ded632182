"""One retriable rule for the source's executors and the sink: kafka-python's ``retriable`` flag."""
from __future__ import annotations

import pytest

from connector.error_codes import error_name, retriable

# What the two sets the rule replaced both retried: leadership moves, timeouts, storage errors (source and sink);
# coordinator moves, too few in-sync replicas, CONCURRENT_TRANSACTIONS (sink).
RETRIED_BEFORE = [5, 6, 7, 13, 14, 15, 16, 19, 20, 51, 56, 74, 75]
# Never retried: OFFSET_OUT_OF_RANGE (data loss), DUPLICATE_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH,
# INVALID_TXN_STATE, PRODUCER_FENCED, TOPIC_AUTHORIZATION_FAILED, UNKNOWN_SERVER_ERROR.
NEVER_RETRIED = [1, 46, 47, 48, 90, 29, -1]


@pytest.mark.parametrize("code", RETRIED_BEFORE)
def test_codes_both_old_sets_retried_are_retriable(code):
    assert retriable(code)


@pytest.mark.parametrize("code", NEVER_RETRIED)
def test_fatal_codes_are_not_retriable(code):
    assert not retriable(code)


def test_an_unknown_topic_is_retriable_so_the_sink_waits_for_a_new_topic():
    assert retriable(3)


def test_error_names_carry_the_class_name_and_the_code():
    assert error_name(6) == "NotLeaderForPartitionError (error code 6)"
