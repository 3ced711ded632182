"""``ComputeLane``: the registry's CPU work (parsing schemas, compatibility checks) off the event loop, bounded.

Theory of operation.  The parsers and checkers are pure Python and can cost seconds (a large Avro record's
check is quadratic in its fields in the ``avro`` package; a hostile .proto can be slow to reject).  On the
event loop that would stall every Kafka client of the broker; so every parse and every compatibility check
of a request runs here instead:

1. at most ``threads`` jobs run at once (``schema.registry.compute.threads``), on worker threads; more wait
   in turn.  The GIL is shared with the loop, which keeps getting it every switch interval: another
   client's request waits for a few intervals, not for the job;
2. each job has a deadline (``schema.registry.compute.timeout.ms``).  When it passes, the loop raises
   ``ComputeTimeout`` inside the worker thread (``PyThreadState_SetAsyncExc``, which lands at the job's next
   bytecode boundary: the parsers and checkers are Python code, so promptly); the request answers Confluent's
   50002 (operation timeout).  So one request holds a worker for at most the deadline, whatever the schema;
3. ``run(fn, *args)`` answers what ``fn`` returns or raises; ``fn`` must not touch the loop or shared state
   (the service hands it parsed schemas, which are never changed after parsing).

The interrupt is guarded so that it can never land outside the job: it is sent only while the job runs
(under a lock the job takes when it ends), and a job that finishes while an interrupt is in flight waits
for it inside its own handler.
"""
from __future__ import annotations

import asyncio
import ctypes
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from broker_sim.registry import errors


class ComputeTimeout(BaseException):
    """Raised inside a job whose deadline passed (a BaseException, as KeyboardInterrupt: the parsers'
    ``except Exception`` must not take it for the schema's fault)."""


class _Job:
    __slots__ = ("guard", "ident", "done", "fired")

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.ident: int | None = None
        self.done = False
        self.fired = False


_OK, _RAISED, _TIMED_OUT = 0, 1, 2
_LANDING_SPINS = 1_000_000


def _call(job: _Job, fn: Callable, args: tuple):
    """Runs on the worker thread: (outcome, value)."""
    with job.guard:
        job.ident = threading.get_ident()
    try:
        try:
            outcome = (_OK, fn(*args))
        except ComputeTimeout:
            raise
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome = (_RAISED, exc)
        finally:
            with job.guard:
                job.done = True
    except ComputeTimeout:
        return _TIMED_OUT, None
    if not job.fired:
        return outcome
    try:  # an interrupt sent just before the job ended lands here (at a backward jump), not in the pool's code
        for _ in range(_LANDING_SPINS):
            pass
    except ComputeTimeout:
        pass
    return _TIMED_OUT, None  # (or the job swallowed it: it was past its deadline all the same)


def _interrupt(job: _Job) -> None:
    with job.guard:
        if job.ident is None or job.done or job.fired:
            return
        job.fired = True
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(job.ident), ctypes.py_object(ComputeTimeout))


class ComputeLane:
    def __init__(self, threads: int = 1, timeout_s: float = 10.0) -> None:
        self.threads = threads
        self.timeout_s = timeout_s
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="schema-registry-compute")
        self._slots: asyncio.Semaphore | None = None
        self._running: set[_Job] = set()
        self.timeouts = 0  # jobs stopped at their deadline, for the logs and the tests

    async def run(self, fn: Callable, *args):
        """``fn(*args)`` on a worker, within the deadline; RegistryError 50002 when it passes."""
        loop = asyncio.get_running_loop()
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.threads)
        async with self._slots:  # the deadline counts from the start of the job, not from its wait
            job = _Job()
            timer = loop.call_later(self.timeout_s, _interrupt, job)
            self._running.add(job)
            try:
                outcome, value = await loop.run_in_executor(self._executor, _call, job, fn, args)
            except asyncio.CancelledError:
                _interrupt(job)  # nobody waits for it any more
                raise
            finally:
                timer.cancel()
                self._running.discard(job)
        if outcome == _OK:
            return value
        if outcome == _RAISED:
            raise value
        self.timeouts += 1
        raise errors.RegistryError(500, errors.OPERATION_TIMEOUT,
                                   f"The schema's checks took longer than {self.timeout_s * 1000:g} ms "
                                   f"(schema.registry.compute.timeout.ms)")

    def close(self) -> None:
        """Stop the running jobs (the interpreter waits for the pool's threads at exit) and the pool."""
        for job in list(self._running):
            _interrupt(job)
        self._executor.shutdown(wait=False, cancel_futures=True)
