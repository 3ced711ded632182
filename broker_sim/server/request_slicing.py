"""How long one request may hold the event loop at a time: slices for per-partition loops, a codec thread.

Theory of operation: every connection shares the broker's one asyncio loop, so a request's work is everyone's
latency.  A request may name a million partitions within ``socket.request.max.bytes`` (a 4 MB ElectLeaders), and
its cost grows with what it names, not with what the client may touch.  Kafka's request handler threads each take
one request and run it to the end, so a huge request costs one thread; here it would stop every other client.  So
the cost is cut where it arises:

1. Decoding and encoding (kafka-python's schema classes, pure Python) of a request whose frame is at least
   ``OFFLOAD_FRAME_BYTES`` run on one ``CodecThread`` beside the loop (they touch no broker state: bytes in,
   objects out, and back).  The interpreter hands the GIL to the loop at its switch interval, so other
   connections are served meanwhile; one thread makes large requests wait for each other, not for the loop.
   Smaller frames are decoded in place, where a thread hop would cost more than the work.
2. A handler's loop over the partitions (or topics, or resources) a request names asks its ``Slices`` whether
   the request has run ``SLICE_S`` since it last gave the loop a turn (``slices.due()``, a counter and, every
   ``CHECK_EVERY`` calls, a clock read); when it has, the handler awaits ``asyncio.sleep(0)``, and every other
   ready connection runs before it goes on.  Items are independent (one partition's answer does not depend on
   another's), so an interleaved request or append changes nothing a sliced loop relies on.
3. The garbage collector's full passes scan every live object, and a request naming a million partitions makes
   millions of them, alive until it is answered: each full pass would hold the loop (and the codec thread) for
   a time that grows with the request.  While a request of at least ``OFFLOAD_FRAME_BYTES`` is in flight
   (``full_collections.hold()``; not a plain produce request, a few objects whatever its size) full passes
   wait (the collector's third threshold is set out of reach; young collections go on); the threshold comes
   back when the last such request is done, when its objects are freed.  Large requests back to back cannot
   put full passes off for good: one runs at least every ``MAX_HOLD_S``.

Per-request work stays proportional to what the request names, as in Kafka; what is bounded is how long any one
request holds the loop without letting the others in.  What is not sliced: freeing a huge request's objects when
it has been answered (one cascade of deallocations, which grows with the request).
"""
from __future__ import annotations

import asyncio
import gc
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

SLICE_S = 0.02  # loop time a request's per-partition loop runs before the other connections get a turn
CHECK_EVERY = 64  # items between clock reads: each item costs microseconds, a slice holds thousands
OFFLOAD_FRAME_BYTES = 64 * 1024  # frames from this size are decoded, and their answers encoded, on the codec thread
OFFLOAD_PARTITIONS = 1000  # answers naming this many partitions are encoded on the codec thread (Fetch, Produce)
HELD_THRESHOLD = 1 << 30  # the collector's third threshold while full passes wait: never reached
MAX_HOLD_S = 30.0  # full passes wait at most this long, however many large requests follow each other

T = TypeVar("T")


class Slices:
    """One request's time on the loop since it last yielded; ``due()`` is True when it should yield now."""

    __slots__ = ("_until", "_count")

    def __init__(self) -> None:
        self._until = time.perf_counter() + SLICE_S
        self._count = 0

    def due(self) -> bool:
        """True (and a new slice begins) once the request ran ``SLICE_S``: the caller awaits
        ``asyncio.sleep(0)`` then."""
        self._count += 1
        if self._count < CHECK_EVERY:
            return False
        self._count = 0
        now = time.perf_counter()
        if now < self._until:
            return False
        self._until = now + SLICE_S
        return True

    async def pause(self) -> None:
        """Give the loop a turn if the slice is used up (for loops that already await per item)."""
        if self.due():
            await asyncio.sleep(0)


class CodecThread:
    """One worker thread for large requests' decoding and encoding (see the module docstring)."""

    def __init__(self) -> None:
        self._executor: ThreadPoolExecutor | None = None

    async def run(self, function: Callable[..., T], *args) -> T:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pylog-codec")
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)



class FullCollections:
    """The garbage collector's full passes wait while large requests are in flight (see the module docstring)."""

    def __init__(self) -> None:
        self._holders = 0
        self._saved: tuple[int, int, int] | None = None
        self._held_since = 0.0

    def hold(self) -> Callable[[], None]:
        """Make full passes wait; returns the release (idempotent: call it when the request is done)."""
        now = time.monotonic()
        if self._holders == 0:
            self._saved = gc.get_threshold()
            gc.set_threshold(self._saved[0], self._saved[1], HELD_THRESHOLD)
            self._held_since = now
        elif now - self._held_since >= MAX_HOLD_S:  # large requests back to back: one full pass now and then
            gc.collect()
            self._held_since = now
        self._holders += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._release()
        return release

    def _release(self) -> None:
        self._holders -= 1
        if self._holders == 0 and self._saved is not None:
            gc.set_threshold(*self._saved)


# one for the process: brokers in one process (tests) share them; an idle worker ends with the interpreter
codec_thread = CodecThread()
full_collections = FullCollections()
