"""broker_sim.errors.error_of: the one mapping from exceptions to Kafka error codes."""
from __future__ import annotations

import kafka.errors as Errors
import pytest
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, SessionExpiredError

from broker_sim.errors import error_of


@pytest.mark.parametrize("lost", [SessionExpiredError(), ConnectionLoss(), ConnectionClosedError()])
def test_a_lost_zookeeper_session_is_not_controller_which_clients_retry(lost):
    """A metadata write that meets a ZooKeeper connection or session loss answers NOT_CONTROLLER (retriable: the
    client finds the controller again), not UNKNOWN_SERVER_ERROR, which admin clients give up on."""
    code, message = error_of(lost)
    assert code == Errors.NotControllerError.errno and Errors.for_code(code).retriable
    assert "ZooKeeper" in message


def test_kafka_errors_keep_their_codes_and_anything_else_is_unknown():
    assert error_of(Errors.InvalidTopicError("bad name"))[0] == Errors.InvalidTopicError.errno
    assert error_of(RuntimeError("boom"))[0] == Errors.UnknownError.errno
