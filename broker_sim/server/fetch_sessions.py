"""Incremental fetch sessions (KIP-227): the leader's side, Kafka's ``FetchSession`` / ``FetchSessionCache``.

Theory of operation: a Fetch (v7+) names a session id and epoch.  Id 0 and epoch -1 (FINAL) is a sessionless
full fetch, as before sessions.  Epoch 0 (INITIAL) is a full fetch that asks for a new session (closing the
named one, if any): the answer carries the new id, or 0 when the cache has no room.  A non-zero id with epoch
-1 closes the session and is answered as a sessionless full fetch.  Any other epoch is an *incremental* fetch
of that session: it must be the session's expected epoch (1 after creation, +1 per answered request, 1 after
2^31-1), else INVALID_FETCH_SESSION_EPOCH; an unknown id (evicted, or from before a restart) or one made by
another client answers FETCH_SESSION_ID_NOT_FOUND.  Either error makes the client start again with a full
fetch.  An incremental request names only the partitions added or changed since its last request (their
fetch position, epochs, max bytes) and lists removed ones in ``forgotten_topics_data``; the session keeps
the others' last parameters, and the leader reads every partition of the session.  Its answer names only
the partitions with something to say (Kafka's ``maybeUpdateResponseData``): records, an error, a diverging
epoch, or a high watermark, last stable offset or log start offset that moved since the session last told
it.  So an idle follower's fetch of thousands of partitions is a few dozen bytes each way.

What a session keeps: only partitions that exist and the client may read.  The leader makes a new session after
the full fetch's read, and not at all when the answer names an unknown partition (UNKNOWN_TOPIC_OR_PARTITION)
or one refused READ; an incremental fetch that meets one closes its session (the answer carries session id 0,
which tells the client its session is gone).  Either way the client goes on with full fetches, which name every
partition, so nothing is left unanswered when the topic appears or the ACL changes; and a request naming 50,000
partitions that do not exist, or a topic it may not read, leaves nothing behind after its connection closed.

Bounds (what a client controls): at most ``max.incremental.fetch.session.cache.slots`` sessions (Kafka's
config, default 1000); a new session may take the slot of the least recently used session idle for
``EVICTION_MS`` (Kafka's min.incremental.fetch.session.eviction.ms, 2 minutes), or, for a follower
(privileged, as in Kafka), of the least recently used consumer session; else it is not created and the
client goes on with full fetches.  A session holds at most ``MAX_SESSION_PARTITIONS`` partitions (pylog's
bound; Kafka's is the request size): a request that would grow it past them closes it
(FETCH_SESSION_ID_NOT_FOUND for an incremental one; no session for a full one).

Sans-IO and single-threaded (the broker's event loop); time is injected.
"""
from __future__ import annotations

import random
from collections import OrderedDict
from typing import Callable

import kafka.errors as Errors

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1
EVICTION_MS = 120_000
MAX_SESSION_PARTITIONS = 50_000
Key = tuple[str, int]


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


class FetchSession:
    """One client's cached fetch parameters (``partitions``: key -> the request's partition entry, in order) and
    what it was last told of each (``told``: key -> (high watermark, last stable offset, log start offset))."""

    __slots__ = ("id", "owner", "privileged", "epoch", "partitions", "told", "last_used_ms")

    def __init__(self, session_id: int, owner: tuple, privileged: bool, now_ms: int) -> None:
        self.id = session_id
        self.owner = owner
        self.privileged = privileged
        self.epoch = next_epoch(INITIAL_EPOCH)  # the epoch the next (incremental) request must carry
        self.partitions: dict[Key, object] = {}
        self.told: dict[Key, tuple[int, int, int]] = {}
        self.last_used_ms = now_ms

    def must_answer(self, key: Key, error: int, size: int, diverging, high_watermark: int, last_stable: int,
                    log_start: int) -> bool:
        """Whether an incremental answer names this partition; remembers the offsets it is told."""
        offsets = (high_watermark, last_stable, log_start)
        changed = self.told.get(key) != offsets
        self.told[key] = offsets
        return bool(error or size or diverging is not None or changed)


class FetchSessionCache:
    def __init__(self, slots: int, *, now_ms: Callable[[], int], rng: random.Random | None = None) -> None:
        self.slots = slots
        self._now_ms = now_ms
        self._rng = rng or random.Random()
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first
        self.created = self.evicted = self.incremental = 0  # counters (metrics, tests, the bench)

    def __len__(self) -> int:
        return len(self.sessions)

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)

    def get(self, session_id: int, epoch: int, owner: tuple) -> FetchSession:
        """The session an incremental request continues; raises FETCH_SESSION_ID_NOT_FOUND /
        INVALID_FETCH_SESSION_EPOCH as Kafka does."""
        session = self.sessions.get(session_id)
        if session is None or session.owner != owner:
            raise Errors.FetchSessionIdNotFoundError(f"fetch session {session_id} not found")
        if epoch != session.epoch:
            raise Errors.InvalidFetchSessionEpochError(
                f"fetch session {session_id} expected epoch {session.epoch}, not {epoch}")
        self.sessions.move_to_end(session_id)
        session.last_used_ms = self._now_ms()
        self.incremental += 1
        return session

    def create(self, owner: tuple, privileged: bool) -> FetchSession | None:
        """A new session, or None when every slot is taken and none may be evicted."""
        if self.slots <= 0:
            return None
        now = self._now_ms()
        if len(self.sessions) >= self.slots and not self._evict_one(now, privileged):
            return None
        session_id = INVALID_SESSION_ID
        while session_id == INVALID_SESSION_ID or session_id in self.sessions:
            session_id = self._rng.randint(1, 2**31 - 1)
        session = self.sessions[session_id] = FetchSession(session_id, owner, privileged, now)
        self.created += 1
        return session

    def _evict_one(self, now: int, privileged: bool) -> bool:
        for session_id, session in self.sessions.items():
            if now - session.last_used_ms >= EVICTION_MS:
                break
        else:
            if not privileged:
                return False
            for session_id, session in self.sessions.items():
                if not session.privileged:
                    break
            else:
                return False
        del self.sessions[session_id]
        self.evicted += 1
        return True
