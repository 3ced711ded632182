"""Soak attacks of hostile round 3's smaller findings (``hostile_soak.py`` runs them; see its docstring).

* ``log_dir_ping_pong``: AlterReplicaLogDirs moving one partition of some megabytes back and forth between the
  broker's log dirs for a few seconds, each move requested as soon as the last one shows in DescribeLogDirs,
  with requests for the other dir in between (a move already running takes the latest target).  It needs a
  broker with two ``log.dirs`` (``SoakOptions.broker_configs``); with one, every request names the one dir
  (nothing to do) or a dir that does not exist (LOG_DIR_NOT_FOUND), which still runs the handler.

Each is ``name(port, rng, cache) -> requests sent``, as the soak's own attacks.
"""
from __future__ import annotations

import time

from broker_sim.testing.hostile_wire import _encode, _ensure_topic, _produce, _send_and_drain

PING_PONG_TOPIC = "soak-log-dirs"
PING_PONG_BYTES = 16 << 20  # the moved partition's size
PING_PONG_S = 5.0


def _log_dirs(connection, topic: str) -> tuple[list[str], str | None]:
    """(the broker's log dirs, the one holding ``topic``-0) from DescribeLogDirs."""
    from kafka.protocol.admin import DescribeLogDirsRequest
    answer = connection.call(DescribeLogDirsRequest[4](topics=None), timeout_s=10)
    dirs = [result.log_dir for result in answer.results]
    home = next((r.log_dir for r in answer.results if any(t.name == topic for t in r.topics)), None)
    return dirs, home


def _alter(connection, topic: str, target: str) -> None:
    from kafka.protocol.admin import AlterReplicaLogDirsRequest
    wanted = AlterReplicaLogDirsRequest.AlterReplicaLogDir
    connection.call(AlterReplicaLogDirsRequest[2](dirs=[wanted(path=target, topics=[
        wanted.AlterReplicaLogDirTopic(name=topic, partitions=[0])])]), timeout_s=10)


def log_dir_ping_pong(port, rng, cache):
    """Move a 16 MB partition between the log dirs as fast as the broker completes the moves, for 5 s."""
    from broker_sim.protocol.client import WireConnection
    from broker_sim.testing.hostile_wire import _batch, _record

    if "ping_pong" not in cache:
        _ensure_topic(port, PING_PONG_TOPIC, {})
        size = 256 * 1024
        head, _ = _record(b"k", size)
        batch = _batch(head + bytes(size) + b"\x00", count=1)
        frames = [_encode(_produce(PING_PONG_TOPIC, 0, batch), i) for i in range(PING_PONG_BYTES // size)]
        _send_and_drain(port, frames, read_s=30)
        cache["ping_pong"] = True
    sent = 0
    connection = WireConnection.connect("127.0.0.1", port, timeout_s=10, client_id="hostile-ping-pong")
    try:
        dirs, home = _log_dirs(connection, PING_PONG_TOPIC)
        others = [d for d in dirs if d != home] or [dirs[0] + "-nowhere" if dirs else "/nowhere"]
        deadline = time.monotonic() + PING_PONG_S
        while time.monotonic() < deadline:
            target = rng.choice(others)
            _alter(connection, PING_PONG_TOPIC, target)
            _alter(connection, PING_PONG_TOPIC, home or target)  # a second target while the first move runs
            _alter(connection, PING_PONG_TOPIC, target)
            sent += 4
            _, now = _log_dirs(connection, PING_PONG_TOPIC)
            if now is not None and now != home:
                home, others = now, [d for d in dirs if d != now] or others
            time.sleep(0.01)
    except OSError:  # the broker closed the connection or stopped answering: the soak judges the broker
        pass
    finally:
        connection.close()
    return sent


ATTACKS = [log_dir_ping_pong]
