"""Driver side of the exactly-once sink: finish a batch's task transactions once, whatever crashed before.

Theory of operation: ``commit_batch(options, messages, batch_id)`` runs when
every task of the batch has pre-committed (its transaction holds its records,
open). It reads the sink log (``connector.sink.sink_log``) for this sink and query,
then:

* the batch is COMPLETED — an earlier run committed it: abort this run's
  transactions (their records would be duplicates);
* the batch has an INTENT — a driver crashed in the middle of committing it:
  roll the recorded transactions forward with EndTxn(commit). EndTxn(commit)
  of a transaction that is already committed answers success, so the ones
  committed before the crash are no-ops. A recorded transaction the broker
  aborted meanwhile (``transaction.timeout.ms`` passed while the driver was
  down, answered as PRODUCER_FENCED / INVALID_PRODUCER_EPOCH /
  INVALID_TXN_STATE) is replaced by this run's transaction of the same Spark
  partition — the re-run batch read the same input offsets — after an updated
  INTENT naming the substitute is written, so a second crash cannot commit
  both. Then this run's remaining transactions are aborted;
* otherwise: write INTENT (transactional ids, producer ids, epochs), commit
  every transaction, write COMPLETED. The coordinators of all the batch's
  transactional ids come from one FindCoordinator (v4+), and the EndTxns after
  the first are pipelined (all sent, then all answers read; an unanswered or
  retriable one is retried alone), since their order does not matter once the
  INTENT is durable.

The partial-commit case: the substitution assumes a Spark partition's rows
are the same in the re-run. That holds for narrow plans over a replayable
source (each input partition is one offset range), not for a
non-deterministic shuffle (``repartition()`` without columns): if a recorded
transaction timed out after others of its batch were committed, such a plan
can lose or duplicate rows. A ``transactionTimeoutMs`` longer than the driver
can stay down avoids the case.

Afterwards the driver aborts every transaction the log lists as open for
batch ids up to this one that it did not commit — task attempts that failed,
were retried or lost a speculative race, and the tasks of a run that crashed —
by InitProducerId on their transactional ids (which bumps the epoch, so a
zombie attempt still writing is fenced, and aborts the open transaction), and
deletes the resolved entries. This happens at every commit and abort, so the
first commit of a restarted query cleans up after the crashed run. Entries an
INTENT still needs are never touched.

``abort_batch`` (a task failed for good, or the query was stopped: Spark aborts
the running batch on ``query.stop()``, on an exception and in
``connector.stop_query``) first appends the batch's abort marker to the sink
log, then aborts the reported transactions and cleans up the same way. Spark
reports the tasks still running as None, often all of them, so the query id
comes from the checkpoint (``connector.sink.writer.checkpoint_query_id``)
when no task reported; the tasks still running either have an open entry the
cleanup's read sees (and fences), or find the marker before their first record
and refuse to write (``connector.sink.sink_log``): a stopped query leaves no
transaction open to hold back its output's last stable offset.

``sweep_orphans`` (when a query's batch is planned, once per process and
query) fences every open transaction the log lists that no INTENT needs: what
a crashed driver's tasks left open is aborted when its restart starts, not at
its first commit.

Test hook: ``PYLOG_SINK_CRASH_AT=<point>[:<min batch id>]`` SIGKILLs the
driver's process group at one of ``CRASH_POINTS``.
"""
from __future__ import annotations

import logging
import os
import signal
import time

from connector.error_codes import error_name, refused, retriable
from connector.options import SinkOptions
from connector.sink.brokers import NOT_COORDINATOR, RETRY_BACKOFF_S, SinkCluster, SinkError
from connector.sink.producer import init_producer_id
from connector.sink.sink_log import COMPLETED, INTENT, KEEP_BATCHES, SinkLog, SinkLogState, Txn
from connector.wire import BrokerUnavailable

log = logging.getLogger(__name__)

CRASH_POINTS = ("task_written", "before_intent", "after_intent", "mid_commit", "before_completed", "after_completed")
_DEAD = {47, 48, 90}   # INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, PRODUCER_FENCED: the transaction was aborted
_UNKNOWN_PRODUCER = {49}  # INVALID_PRODUCER_ID_MAPPING: the coordinator forgot the id (expired): not committable


def commit_batch(options: SinkOptions, messages: list, batch_id: int, *, keep_entry: bool = True) -> None:
    """Commit the batch's transactions exactly once (see the module docstring). ``keep_entry=False`` (a batch
    write, never re-run) deletes the batch's entry once done."""
    txns = [m.txn() for m in messages if m.transactional_id]
    if not messages:
        return
    query_id = messages[0].query_id
    crash_point("before_intent", batch_id)
    cluster = SinkCluster(options, "pylog-sink-driver")
    try:
        sink_log = SinkLog(cluster, options, query_id)
        state = sink_log.read()
        entry = state.batches.get(batch_id)
        if entry is not None and entry[0] == COMPLETED:
            log.info("pylog sink %s: batch %d was committed before; aborting this run's %d transactions",
                     options.sink_id, batch_id, len(txns))
            for txn in txns:
                _end_txn(cluster, options, txn, committed=False)
            committed = entry[1]
        elif entry is not None:
            committed = _roll_forward(cluster, options, sink_log, batch_id, entry[1], txns)
            sink_log.put_batch(batch_id, COMPLETED, committed)
        else:
            if txns:
                sink_log.put_batch(batch_id, INTENT, txns)
                crash_point("after_intent", batch_id)
            cluster.find_coordinators([t.id for t in txns])
            # the first alone (the mid_commit crash point falls between it and the others), then the others
            # pipelined: once the INTENT is durable their order does not matter
            for i, code in enumerate([*_end_txns(cluster, options, txns[:1], committed=True),
                                      *_end_txns(cluster, options, txns[1:], committed=True,
                                                 before=lambda: crash_point("mid_commit", batch_id))]):
                if code:
                    raise SinkError(f"Committing batch {batch_id}: EndTxn(commit) of {txns[i].id} failed: "
                                    f"{refused(code, options)}; the query's restart rolls the batch forward from the "
                                    f"sink log")
            committed = txns
            crash_point("before_completed", batch_id)
            if txns:
                sink_log.put_batch(batch_id, COMPLETED, committed)
        crash_point("after_completed", batch_id)
        rows = sum(m.rows for m in messages)
        log.info("pylog sink %s: batch %d committed (%d transactions, %d rows)", options.sink_id, batch_id,
                 len(committed), rows)
        _clean_up(cluster, options, sink_log, sink_log.read(), batch_id, {t.id for t in [*committed, *txns]})
        if not keep_entry:
            sink_log.delete(batch_ids=[batch_id])
        cluster.release()   # every request answered: the next batch's commit starts connected
    finally:
        cluster.close()


def abort_batch(options: SinkOptions, messages: list, batch_id: int, query_id: str | None) -> None:
    """Abort a stopped or failed batch: its marker first, then the reported transactions and every open one the
    sink log lists (see the module docstring). ``query_id``: the reported tasks' or, when none reported, the
    checkpoint's; None (neither known) leaves the unreported tasks to ``transaction.timeout.ms``."""
    txns = [m.txn() for m in messages if m.transactional_id]
    query_id = messages[0].query_id if messages else query_id
    cluster = SinkCluster(options, "pylog-sink-driver")
    try:
        sink_log = SinkLog(cluster, options, query_id) if query_id else None
        if sink_log is not None:
            sink_log.put_aborted(batch_id)   # before the read below: see connector.sink.sink_log
            mark_fault(f"abort-batch{batch_id}")
        else:
            log.warning("pylog sink %s: aborting batch %d without its query id (no task reported and the "
                        "checkpoint could not be read): tasks still running may leave transactions open until "
                        "transactionTimeoutMs", options.sink_id, batch_id)
        for txn in txns:
            _end_txn(cluster, options, txn, committed=False)
        if sink_log is not None:
            state = sink_log.read()
            _clean_up(cluster, options, sink_log, state, batch_id, {t.id for t in txns})
            fenced = sum(1 for b, _ in state.open.values() if b <= batch_id)
            log.info("pylog sink %s: batch %d aborted (%d reported, %d open transactions fenced)", options.sink_id,
                     batch_id, len(txns), fenced)
    finally:
        cluster.close()


def sweep_orphans(options: SinkOptions, query_id: str) -> int:
    """Fence every open transaction of ``query_id`` the sink log lists and no INTENT needs; returns how many.

    Only safe where no task of the query is running: when a batch is planned (the previous batch committed or
    aborted; the new one has not started)."""
    cluster = SinkCluster(options, "pylog-sink-driver")
    try:
        sink_log = SinkLog(cluster, options, query_id)
        state = sink_log.read()
        protected = state.protected()
        orphans = [(name, txn) for name, (_, txn) in sorted(state.open.items()) if name not in protected]
        for _, txn in orphans:
            _fence(cluster, options, txn)
        if orphans:
            sink_log.delete(open_ids=[name for name, _ in orphans])
            log.warning("pylog sink %s: fenced %d transactions a previous run of query %s left open (a driver "
                        "crash or a stop)", options.sink_id, len(orphans), query_id)
        cluster.release()
        return len(orphans)
    finally:
        cluster.close()


def _roll_forward(cluster, options, sink_log: SinkLog, batch_id: int, recorded: list[Txn],
                  txns: list[Txn]) -> list[Txn]:
    log.warning("pylog sink %s: batch %d has an INTENT without COMPLETED (the driver stopped mid-commit); "
                "rolling its %d recorded transactions forward", options.sink_id, batch_id, len(recorded))
    substitutes = {t.partition: t for t in txns}
    final = list(recorded)
    for i, txn in enumerate(recorded):
        code = _end_txn(cluster, options, txn, committed=True)
        if code == 0:
            continue
        if code not in _DEAD and code not in _UNKNOWN_PRODUCER:
            raise SinkError(f"Rolling batch {batch_id} forward: EndTxn(commit) of {txn.id} failed: "
                            f"{refused(code, options)}")
        substitute = substitutes.get(txn.partition)
        if substitute is None:
            raise SinkError(f"Rolling batch {batch_id} forward: transaction {txn.id} (Spark partition "
                            f"{txn.partition}) was aborted by the broker ({error_name(code)}) and this run has no "
                            f"transaction for that partition to replace it")
        log.warning("pylog sink %s: recorded transaction %s of batch %d was aborted by the broker (%s, probably "
                    "transaction.timeout.ms); committing this run's %s for Spark partition %d instead",
                    options.sink_id, txn.id, batch_id, error_name(code), substitute.id, txn.partition)
        final[i] = substitute
        sink_log.put_batch(batch_id, INTENT, final)   # durable before the substitute's commit
        code = _end_txn(cluster, options, substitute, committed=True)
        if code:
            raise SinkError(f"Rolling batch {batch_id} forward: EndTxn(commit) of {substitute.id} failed: "
                            f"{refused(code, options)}")
    used = {t.id for t in final}
    for txn in txns:
        if txn.id not in used:
            _end_txn(cluster, options, txn, committed=False)
    return final


def _clean_up(cluster, options, sink_log: SinkLog, state: SinkLogState, batch_id: int, ended: set[str]) -> None:
    """Abort open transactions of batches <= batch_id not ``ended`` by this call; delete resolved and old entries."""
    protected = state.protected()
    resolved = []
    for transactional_id, (txn_batch, txn) in sorted(state.open.items()):
        if txn_batch > batch_id or transactional_id in protected:
            continue
        if transactional_id not in ended:
            _fence(cluster, options, txn)
        resolved.append(transactional_id)
    old = [b for b, (kind, _) in state.batches.items() if b <= batch_id - KEEP_BATCHES and kind == COMPLETED]
    sink_log.delete(batch_ids=old, open_ids=resolved,
                    aborted_ids=[b for b in state.aborted if b <= batch_id - KEEP_BATCHES])


def _fence(cluster, options: SinkOptions, txn: Txn) -> None:
    """Abort ``txn`` whatever its owner is doing: InitProducerId on its id bumps the epoch and aborts."""
    deadline = time.monotonic() + options.delivery_timeout_ms / 1000
    init_producer_id(cluster, txn.id, options.transaction_timeout_ms, deadline)
    log.info("pylog sink %s: aborted orphan transaction %s (Spark partition %d, attempt %d)", options.sink_id,
             txn.id, txn.partition, txn.attempt)


def _end_txns(cluster, options: SinkOptions, txns: list[Txn], *, committed: bool, before=None) -> list[int]:
    """EndTxn of every transaction of ``txns``, pipelined: all sent to their coordinators, then every answer
    read; those not answered 0 or not retriable (an I/O failure, NOT_COORDINATOR, ...) go through ``_end_txn``'s
    retries one by one. ``before`` runs first (a crash point). Returns the final error codes, in order."""
    if before is not None:
        before()
    if not txns:
        return []
    deadline = time.monotonic() + options.delivery_timeout_ms / 1000
    codes: list[int | None] = [None] * len(txns)  # None: no answer read
    sent: dict[int, list] = {}
    try:
        # every coordinator first: a FindCoordinator must not share a connection with EndTxns in flight
        connections = [cluster.coordinator(txn.id, deadline) for txn in txns]
        for i, (txn, connection) in enumerate(zip(txns, connections)):
            sent.setdefault(id(connection), [connection, []])[1].append(
                (i, connection.send_end_txn(txn.id, txn.pid, txn.epoch, committed)))
        for connection, handles in sent.values():
            for i, handle in handles:
                codes[i] = connection.read_end_txn(handle)
    except BrokerUnavailable:
        cluster.drop()   # the unread answers are lost with the connection: their EndTxn goes again below
    for i, txn in enumerate(txns):
        if codes[i] is None or (codes[i] and retriable(codes[i])):
            if codes[i] in NOT_COORDINATOR:
                cluster.drop()
            codes[i] = _end_txn(cluster, options, txn, committed=committed)
    return codes


def _end_txn(cluster, options: SinkOptions, txn: Txn, *, committed: bool) -> int:
    """EndTxn at the transaction's coordinator, retried while retriable; returns 0 or the final error code."""
    deadline = time.monotonic() + options.delivery_timeout_ms / 1000
    while True:
        try:
            code = cluster.coordinator(txn.id, deadline).end_txn(txn.id, txn.pid, txn.epoch, committed)
        except BrokerUnavailable as exc:
            cluster.drop()
            code, why = -1, str(exc)
        else:
            why = refused(code, options) if code else ""
        if code == 0 or (code != -1 and not retriable(code)):
            if code and not committed:
                log.info("pylog sink: EndTxn(abort) of %s: %s (already resolved)", txn.id, why)
            return code
        if code in NOT_COORDINATOR:
            cluster.drop()
        if time.monotonic() > deadline:
            raise SinkError(f"EndTxn({'commit' if committed else 'abort'}) of {txn.id} gave up: {why}")
        time.sleep(RETRY_BACKOFF_S)


def mark_fault(name: str) -> None:
    """Test hook: leave evidence that an injected fault fired (a file in PYLOG_FAULT_MARKERS, synced before
    the fault happens), so a fault test can tell its fault from a timeout or a fault that never came."""
    directory = os.environ.get("PYLOG_FAULT_MARKERS")
    if not directory:
        return
    path = os.path.join(directory, f"{name}-pid{os.getpid()}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, f"{time.time()}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def crash_point(point: str, batch_id: int) -> None:
    """Test hook: SIGKILL the driver's process group at ``point`` when PYLOG_SINK_CRASH_AT names it.

    Spark's Python workers run in process groups of their own, so the driver's group comes from
    PYLOG_SINK_DRIVER_PGID (the fault job exports its own); in local mode tasks run on the driver, so
    ``task_written`` (a task has written and flushed its rows, its transaction is open) kills the driver while
    tasks write."""
    spec = os.environ.get("PYLOG_SINK_CRASH_AT")
    if not spec:
        return
    name, _, min_batch = spec.partition(":")
    if name == point and batch_id >= int(min_batch or 0):
        log.error("PYLOG_SINK_CRASH_AT=%s: killing the driver at batch %d", spec, batch_id)
        mark_fault(f"crash-{point}-batch{batch_id}")
        os.killpg(int(os.environ.get("PYLOG_SINK_DRIVER_PGID", os.getpgid(0))), signal.SIGKILL)
        # this process (a Python worker in a process group of its own) must not go on past the point either: it
        # would finish the commit after the driver's death and the restart would find the batch completed
        os.kill(os.getpid(), signal.SIGKILL)
