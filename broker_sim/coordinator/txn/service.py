"""The asyncio layer of the transaction coordinator: answers after the ISR, and the timer task.

Theory of operation: ``TxnService`` is a ``TxnCoordinator`` whose requests
that write to ``__transaction_state`` (InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn) are coroutines answered once ``isr_wait`` saw the
ISR have the write (``coordinator.isr_wait``; nothing waits on a single node),
or with the append's error when it did not (the client then retries, on the
new coordinator if leadership moved, as with Kafka's NOT_COORDINATOR).
Requests need no futures of their own: the core answers every request at once
(markers are written before EndTxn returns, or the transaction waits in its
Prepare state and the client retries on CONCURRENT_TRANSACTIONS).
``run_timer``, every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``,
aborts Ongoing transactions past their timeout (fencing their producers) and
retries markers that could not be written, and every
``transaction.remove.expired.transaction.cleanup.interval.ms`` removes
transactional ids idle for ``transactional.id.expiration.ms``.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from broker_sim.coordinator.isr_wait import answered_once_replicated, no_wait
from broker_sim.coordinator.txn.coordinator import InitResult, TxnCoordinator

log = logging.getLogger(__name__)


class TxnService(TxnCoordinator):
    def __init__(self, *args, abort_interval_ms: int = 10_000, expiration_interval_ms: int = 3_600_000,
                 isr_wait: Callable[[dict], Awaitable[None]] = no_wait, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.abort_interval_ms = abort_interval_ms
        self.expiration_interval_ms = expiration_interval_ms
        self.isr_wait = isr_wait

    # an append the ISR did not get is answered with its error (NOT_COORDINATOR once leadership moved)
    init_producer_id = answered_once_replicated(TxnCoordinator.init_producer_id,
                                                lambda answer, error: InitResult(error))
    add_partitions = answered_once_replicated(TxnCoordinator.add_partitions,
                                              lambda answer, error: dict.fromkeys(answer, error))
    add_offsets = answered_once_replicated(TxnCoordinator.add_offsets, lambda answer, error: error)
    end_transaction = answered_once_replicated(TxnCoordinator.end_transaction, lambda answer, error: error)

    def tick(self, next_expiry: int) -> int:
        """One timer pass; returns when the next id expiration pass is due."""
        aborted = self.abort_timed_out()
        if aborted:
            log.info("aborted %d timed-out transactions: %s", len(aborted), ", ".join(aborted))
        self.retry_markers()
        if self.clock() >= next_expiry:
            expired = self.expire_transactional_ids()
            if expired:
                log.info("removed %d expired transactional ids", len(expired))
            next_expiry = self.clock() + self.expiration_interval_ms
        return next_expiry

    async def run_timer(self) -> None:
        """Abort timed-out transactions and expire ids forever (cancel the task to stop)."""
        next_expiry = self.clock() + self.expiration_interval_ms
        while True:
            await asyncio.sleep(self.abort_interval_ms / 1000.0)
            try:
                next_expiry = self.tick(next_expiry)
            except Exception:  # the timer must keep running; the next pass retries
                log.exception("transaction coordinator timer failed")
