"""One classic consumer group: membership, rebalances and committed offsets, without I/O.

Theory of operation: ``ClassicGroup`` is Kafka's ``GroupMetadata`` plus the
per-group half of its ``GroupCoordinator``.  Every method takes the current
time (``now_ms``) and returns values; nothing here sleeps, reads a clock or
touches a socket or a file.

Requests that Kafka holds open (a JoinGroup until the rebalance completes, a
follower's SyncGroup until the leader sent the assignment) are identified by
*tickets*: integers the caller allocates per request.  A method that takes a
ticket returns an ``Outcome`` whose ``replies`` say which tickets are answered
now and with what — possibly several (the last member to rejoin completes the
rebalance and answers every member), possibly none (the request waits).  The
async layer (``group.service``) keeps one future per ticket.  ``Outcome.store``
says that the group's metadata record must be written before the replies go
out (Kafka stores the group before answering the leader's SyncGroup).

Time-driven changes — session expiry, the rebalance timeout, the initial
rebalance delay, members that were handed an id (MEMBER_ID_REQUIRED) and never
came back — happen in ``poll(now_ms)``, which the service calls periodically.
States and their legal moves are ``group.state``'s table.
"""
from __future__ import annotations

import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Iterable

import kafka.errors as Errors

from broker_sim.coordinator.group.records import CommittedOffset, StoredGroup, StoredMember
from broker_sim.coordinator.group.state import (
    ALLOWED_TRANSITIONS, CAN_REBALANCE, COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE, GroupState,
)
from broker_sim.coordinator.state_machine import check_transition

NONE = 0
UNKNOWN_MEMBER_ID = Errors.UnknownMemberIdError.errno
ILLEGAL_GENERATION = Errors.IllegalGenerationError.errno
REBALANCE_IN_PROGRESS = Errors.RebalanceInProgressError.errno
INCONSISTENT_GROUP_PROTOCOL = Errors.InconsistentGroupProtocolError.errno
MEMBER_ID_REQUIRED = Errors.MemberIdRequiredError.errno
FENCED_INSTANCE_ID = Errors.FencedInstanceIdError.errno
COORDINATOR_NOT_AVAILABLE = Errors.CoordinatorNotAvailableError.errno
GROUP_MAX_SIZE_REACHED = Errors.GroupMaxSizeReachedError.errno

log = logging.getLogger(__name__)
CONSUMER_PROTOCOL_TYPE = "consumer"
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000  # Kafka's: a new member that never completes its first join is dropped


@dataclass(frozen=True)
class GroupConfig:
    """The broker configs the coordinator reads (Kafka's names in ``broker_sim.config``)."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 0
    max_size: int = 2**31 - 1
    max_groups: int = 2**31 - 1  # group.max.groups: groups one coordinator holds
    offsets_partitions: int = 50
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3_600_000
    # KIP-848 consumer groups (group.consumer.*)
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: tuple[str, ...] = ("uniform", "range")


@dataclass(frozen=True)
class JoinRequest:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool = True  # JoinGroup v4+
    skip_assignment: bool = False         # JoinGroup v9+ (KIP-814): the client understands skip_assignment


@dataclass(frozen=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    error: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False   # KIP-814: the leader gets the members but must not reassign


@dataclass(frozen=True)
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


Reply = tuple[int, "JoinResult | SyncResult"]


@dataclass
class Outcome:
    """Replies to held requests, and whether the group's record must be stored before they are sent."""

    replies: list[Reply] = field(default_factory=list)
    store: bool = False

    def add(self, other: "Outcome") -> "Outcome":
        self.replies.extend(other.replies)
        self.store = self.store or other.store
        return self


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    heartbeat_deadline_ms: int
    assignment: bytes = b""
    join_ticket: int | None = None  # a JoinGroup waiting for the rebalance to complete
    sync_ticket: int | None = None  # a SyncGroup waiting for the leader's assignment
    is_new: bool = True

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol!r}")

    def vote(self, candidates: set[str]) -> str:
        """The first of this member's protocols (its order of preference) that every member supports."""
        return next(name for name, _ in self.protocols if name in candidates)

    def expired(self, now_ms: int) -> bool:
        # members held in a join or sync satisfy their heartbeats, except new ones (Kafka's hasSatisfiedHeartbeat)
        if not self.is_new and (self.join_ticket is not None or self.sync_ticket is not None):
            return False
        return now_ms >= self.heartbeat_deadline_ms


class ClassicGroup:
    def __init__(self, group_id: str, now_ms: int, config: GroupConfig = GroupConfig()) -> None:
        self.group_id = group_id
        self.config = config
        self.state: GroupState = EMPTY
        self.state_timestamp = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}  # in join order: the first is the leader
        self.pending_members: dict[str, int] = {}  # member id handed out with MEMBER_ID_REQUIRED -> expiry
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.offsets: dict[tuple[str, int], CommittedOffset] = {}
        # producer id -> offsets committed in its open transaction (TxnOffsetCommit), applied by its COMMIT marker
        self.pending_txn_offsets: dict[int, dict[tuple[str, int], CommittedOffset]] = {}
        self.subscribed_topics: frozenset[str] | None = None
        self.rebalance_deadline_ms: int | None = None
        self.initial_delay_deadline_ms: int | None = None
        self.initial_delay_remaining_ms = 0
        self.new_member_added = False

    def __repr__(self) -> str:
        return f"ClassicGroup({self.group_id!r}, {self.state}, generation {self.generation_id})"

    # --- queries ----------------------------------------------------------------
    group_type = "classic"   # Kafka's Group.GroupType, as ListGroups v5 names it

    @property
    def empty(self) -> bool:
        return self.state is EMPTY

    @property
    def dead(self) -> bool:
        return self.state is DEAD

    def is_leader(self, member_id: str) -> bool:
        return member_id == self.leader_id

    def has_all_members_joined(self) -> bool:
        return all(m.join_ticket is not None for m in self.members.values()) and not self.pending_members

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        names = set(names)
        if self.state is EMPTY and not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self._candidate_protocols())

    def _candidate_protocols(self) -> set[str]:
        counts = Counter(name for m in self.members.values() for name, _ in m.protocols)
        return {name for name, count in counts.items() if count == len(self.members)}

    def select_protocol(self) -> str:
        """Kafka's selectProtocol: every member votes for its preferred protocol among those all support."""
        candidates = self._candidate_protocols()
        if not candidates:
            raise ValueError(f"no protocol is supported by every member of group {self.group_id}")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]  # ties: the protocol voted for first, in member order

    def is_subscribed_to(self, topic: str) -> bool:
        # unknown subscriptions (a protocol we cannot decode) count as subscribed, as Kafka does
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def stored(self) -> StoredGroup:
        """The group as its GroupMetadataValue record keeps it."""
        members = tuple(StoredMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                     m.rebalance_timeout_ms, m.session_timeout_ms,
                                     m.metadata(self.protocol_name) if self.protocol_name else b"", m.assignment)
                        for m in self.members.values())
        return StoredGroup(self.protocol_type or "", self.generation_id, self.protocol_name, self.leader_id,
                           self.state_timestamp, members)

    @classmethod
    def restored(cls, group_id: str, stored: StoredGroup, now_ms: int, config: GroupConfig) -> "ClassicGroup":
        """A group read back from its record, as Kafka's ClassicGroup.fromRecord: Stable with its members,
        generation, protocol and leader when it had members, else Empty. A member's session starts again at
        load (Kafka's onLoaded reschedules every member's heartbeat), so its next Heartbeat or commit with the
        stored generation is taken and a coordinator's restart costs no rebalance."""
        group = cls(group_id, now_ms, config)
        group.generation_id = stored.generation
        group.protocol_type = stored.protocol_type or None
        if stored.current_state_timestamp >= 0:
            group.state_timestamp = stored.current_state_timestamp
        if not stored.members or stored.protocol is None:
            return group
        for m in stored.members:
            group.members[m.member_id] = Member(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.session_timeout_ms, stored.protocol_type, ((stored.protocol, m.subscription),),
                heartbeat_deadline_ms=now_ms + m.session_timeout_ms, assignment=m.assignment, is_new=False)
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        group.state, group.protocol_name, group.leader_id = STABLE, stored.protocol, stored.leader
        group.subscribed_topics = group._decode_subscriptions()
        return group

    # --- JoinGroup ----------------------------------------------------------------
    def join(self, request: JoinRequest, ticket: int, now_ms: int) -> Outcome:
        if self.state is DEAD:
            # the group was just deleted; the client retries and creates it anew
            return self._reply(ticket, JoinResult(COORDINATOR_NOT_AVAILABLE, request.member_id))
        if not self.supports_protocols(request.protocol_type, (name for name, _ in request.protocols)):
            return self._reply(ticket, JoinResult(INCONSISTENT_GROUP_PROTOCOL, request.member_id))
        if request.member_id:
            outcome = self._join_known(request, ticket, now_ms)
        else:
            outcome = self._join_unknown(request, ticket, now_ms)
        if self.state is PREPARING_REBALANCE:
            outcome.add(self._try_complete_join(now_ms))
        return outcome

    def _join_unknown(self, request: JoinRequest, ticket: int, now_ms: int) -> Outcome:
        if len(self.members) + len(self.pending_members) >= self.config.max_size:
            return self._reply(ticket, JoinResult(GROUP_MAX_SIZE_REACHED, ""))
        member_id = f"{request.client_id}-{uuid.uuid4()}"
        instance_id = request.group_instance_id
        if instance_id is not None and instance_id in self.static_members:
            return self._replace_static_member(request, member_id, ticket, now_ms)
        if instance_id is None and request.require_known_member_id:
            # KIP-394: hand out the id first, so a client that times out does not leave ghost members behind
            self.pending_members[member_id] = now_ms + request.session_timeout_ms
            return self._reply(ticket, JoinResult(MEMBER_ID_REQUIRED, member_id))
        return self._add_member_and_rebalance(request, member_id, ticket, now_ms)

    def _join_known(self, request: JoinRequest, ticket: int, now_ms: int) -> Outcome:
        member_id = request.member_id
        if member_id in self.pending_members:
            del self.pending_members[member_id]
            return self._add_member_and_rebalance(request, member_id, ticket, now_ms)
        error = self.validate_member(member_id, request.group_instance_id)
        if error:
            return self._reply(ticket, JoinResult(error, member_id))
        member = self.members[member_id]
        unchanged = member.protocols == request.protocols
        if self.state is PREPARING_REBALANCE:
            return self._update_member_and_rebalance(member, request, ticket, now_ms)
        if self.state is COMPLETING_REBALANCE:
            if unchanged:  # a retried JoinGroup whose answer was lost: answer it again
                return self._reply(ticket, self._join_result(member_id))
            return self._update_member_and_rebalance(member, request, ticket, now_ms)
        if self.state is STABLE:
            if self.is_leader(member_id) or not unchanged:
                # the leader rejoins to force a new assignment (e.g. its subscribed topics changed)
                return self._update_member_and_rebalance(member, request, ticket, now_ms)
            return self._reply(ticket, self._join_result(member_id))
        return self._reply(ticket, JoinResult(UNKNOWN_MEMBER_ID, member_id))

    def _add_member_and_rebalance(self, request: JoinRequest, member_id: str, ticket: int, now_ms: int) -> Outcome:
        member = Member(member_id, request.group_instance_id, request.client_id, request.client_host,
                        request.rebalance_timeout_ms, request.session_timeout_ms, request.protocol_type,
                        request.protocols, heartbeat_deadline_ms=now_ms + NEW_MEMBER_JOIN_TIMEOUT_MS,
                        join_ticket=ticket)
        if self.state is PREPARING_REBALANCE and self.generation_id == 0:
            self.new_member_added = True
        if not self.members:
            self.protocol_type = request.protocol_type
        self.members[member_id] = member
        if self.leader_id is None:
            self.leader_id = member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member_id
        return self._maybe_prepare_rebalance(now_ms)

    def _update_member_and_rebalance(self, member: Member, request: JoinRequest, ticket: int,
                                     now_ms: int) -> Outcome:
        outcome = Outcome()
        if member.join_ticket is not None and member.join_ticket != ticket:
            # a second JoinGroup from the same member (its first connection is gone): the old one ends now
            outcome.replies.append((member.join_ticket, JoinResult(REBALANCE_IN_PROGRESS, member.member_id)))
        member.protocols = request.protocols
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        member.join_ticket = ticket
        return outcome.add(self._maybe_prepare_rebalance(now_ms))

    def _replace_static_member(self, request: JoinRequest, new_id: str, ticket: int, now_ms: int) -> Outcome:
        """A known group instance id rejoined with no member id: it takes over the old member (KIP-345)."""
        outcome = Outcome()
        old_id = self.static_members[request.group_instance_id]
        old = self.members.pop(old_id)
        if old.join_ticket is not None:
            outcome.replies.append((old.join_ticket, JoinResult(FENCED_INSTANCE_ID, old_id)))
        if old.sync_ticket is not None:
            outcome.replies.append((old.sync_ticket, SyncResult(FENCED_INSTANCE_ID)))
        old_leader = self.leader_id
        member = Member(new_id, old.group_instance_id, request.client_id, request.client_host,
                        request.rebalance_timeout_ms, request.session_timeout_ms, request.protocol_type,
                        request.protocols, heartbeat_deadline_ms=now_ms + request.session_timeout_ms,
                        assignment=old.assignment, join_ticket=ticket, is_new=False)
        self.members[new_id] = member
        self.static_members[member.group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if self.state is STABLE:
            if self.select_protocol() == self.protocol_name:
                # nothing the assignment depends on changed: no rebalance.  A rejoining leader must not reassign
                # in a Stable group: from JoinGroup v9 (KIP-814) it is answered as the leader, with the members
                # and skip_assignment; before, the answer names the old leader id, so it takes itself for a
                # follower.
                member.join_ticket = None
                outcome.store = True
                if request.skip_assignment and self.leader_id == new_id:
                    result = replace(self._join_result(new_id), skip_assignment=True)
                else:
                    result = JoinResult(NONE, new_id, self.generation_id, self.protocol_type, self.protocol_name,
                                        old_leader or "")
                return outcome.add(self._reply(ticket, result))
            return outcome.add(self._prepare_rebalance(now_ms))
        if self.state is COMPLETING_REBALANCE:
            # the leader may already have assigned to the old member id: assign again
            return outcome.add(self._prepare_rebalance(now_ms))
        return outcome

    def _join_result(self, member_id: str) -> JoinResult:
        members = ()
        if self.is_leader(member_id):
            members = tuple(JoinedMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                            for m in self.members.values())
        return JoinResult(NONE, member_id, self.generation_id, self.protocol_type, self.protocol_name,
                          self.leader_id or "", members)

    # --- rebalance ------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, now_ms: int) -> Outcome:
        if self.state in CAN_REBALANCE:
            return self._prepare_rebalance(now_ms)
        return Outcome()

    def _prepare_rebalance(self, now_ms: int) -> Outcome:
        outcome = Outcome()
        if self.state is COMPLETING_REBALANCE:
            # the assignment being computed is stale: followers waiting for it rejoin
            for member in self.members.values():
                member.assignment = b""
                if member.sync_ticket is not None:
                    outcome.replies.append((member.sync_ticket, SyncResult(REBALANCE_IN_PROGRESS)))
                    member.sync_ticket = None
        rebalance_timeout = max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        if self.state is EMPTY:
            # the first members of a new group wait group.initial.rebalance.delay.ms for the others
            delay = self.config.initial_rebalance_delay_ms
            self.initial_delay_deadline_ms = now_ms + delay
            self.initial_delay_remaining_ms = max(rebalance_timeout - delay, 0)
            self.rebalance_deadline_ms = None
        else:
            self.initial_delay_deadline_ms = None
            self.rebalance_deadline_ms = now_ms + rebalance_timeout
        log.info("group %s: preparing to rebalance (generation %d, %d members)", self.group_id,
                 self.generation_id, len(self.members))
        self._transition(PREPARING_REBALANCE, now_ms)
        return outcome

    def _try_complete_join(self, now_ms: int) -> Outcome:
        if self.initial_delay_deadline_ms is not None:
            if now_ms < self.initial_delay_deadline_ms:
                return Outcome()
            if self.new_member_added and self.initial_delay_remaining_ms > 0:
                # members kept arriving during the delay: wait again, within the rebalance timeout
                self.new_member_added = False
                delay = min(self.config.initial_rebalance_delay_ms, self.initial_delay_remaining_ms)
                self.initial_delay_remaining_ms = max(self.initial_delay_remaining_ms - delay, 0)
                self.initial_delay_deadline_ms = now_ms + delay
                return Outcome()
            return self._complete_join(now_ms)
        if self.has_all_members_joined() or (self.rebalance_deadline_ms is not None
                                             and now_ms >= self.rebalance_deadline_ms):
            return self._complete_join(now_ms)
        return Outcome()

    def _complete_join(self, now_ms: int) -> Outcome:
        """Kafka's onCompleteJoin: drop members that did not rejoin, start the next generation, answer the rest."""
        outcome = Outcome()
        for member in [m for m in self.members.values() if m.join_ticket is None]:
            outcome.add(self._remove_member(member.member_id))
        self.rebalance_deadline_ms = None
        self.initial_delay_deadline_ms = None
        self.new_member_added = False
        self.generation_id += 1
        if not self.members:
            self.protocol_name = None
            self.subscribed_topics = None
            self._transition(EMPTY, now_ms)
            outcome.store = True
            return outcome
        self.protocol_name = self.select_protocol()
        self.subscribed_topics = self._decode_subscriptions()
        self._transition(COMPLETING_REBALANCE, now_ms)
        log.info("group %s: generation %d with %d members, protocol %s, leader %s", self.group_id,
                 self.generation_id, len(self.members), self.protocol_name, self.leader_id)
        for member in self.members.values():
            outcome.replies.append((member.join_ticket, self._join_result(member.member_id)))
            member.join_ticket = None
            member.is_new = False
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        return outcome

    def _decode_subscriptions(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription  # with the first consumer group

        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(ConsumerProtocolSubscription.decode(member.metadata(self.protocol_name)).topics)
        except Exception:  # a consumer protocol we cannot read: treat every topic as subscribed
            return None
        return frozenset(topics)

    def _transition(self, target: GroupState, now_ms: int) -> None:
        self.state = check_transition(ALLOWED_TRANSITIONS, self.state, target)
        self.state_timestamp = now_ms

    # --- SyncGroup, Heartbeat, LeaveGroup ---------------------------------------------
    def validate_member(self, member_id: str, group_instance_id: str | None) -> int:
        """Kafka's validateCurrentMember: NONE, FENCED_INSTANCE_ID or UNKNOWN_MEMBER_ID."""
        if group_instance_id is not None:
            current = self.static_members.get(group_instance_id)
            if current is None:
                return UNKNOWN_MEMBER_ID
            return FENCED_INSTANCE_ID if current != member_id else NONE
        return NONE if member_id in self.members else UNKNOWN_MEMBER_ID

    def sync(self, member_id: str, group_instance_id: str | None, generation_id: int,
             protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
             ticket: int, now_ms: int) -> Outcome:
        if self.state is DEAD:
            return self._reply(ticket, SyncResult(COORDINATOR_NOT_AVAILABLE))
        error = self.validate_member(member_id, group_instance_id)
        if not error and generation_id != self.generation_id:
            error = ILLEGAL_GENERATION
        if not error and ((protocol_type is not None and protocol_type != self.protocol_type)
                          or (protocol_name is not None and protocol_name != self.protocol_name)):
            error = INCONSISTENT_GROUP_PROTOCOL
        if not error and self.state is EMPTY:
            error = UNKNOWN_MEMBER_ID
        if not error and self.state is PREPARING_REBALANCE:
            error = REBALANCE_IN_PROGRESS
        if error:
            return self._reply(ticket, SyncResult(error))
        member = self.members[member_id]
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if self.state is STABLE:
            return self._reply(ticket, self._sync_result(member))
        # CompletingRebalance: followers wait for the leader's assignment
        member.sync_ticket = ticket
        if not self.is_leader(member_id):
            return Outcome()
        outcome = Outcome(store=True)
        for m in self.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        self._transition(STABLE, now_ms)
        for m in self.members.values():
            if m.sync_ticket is not None:
                outcome.replies.append((m.sync_ticket, self._sync_result(m)))
                m.sync_ticket = None
        return outcome

    def _sync_result(self, member: Member) -> SyncResult:
        return SyncResult(NONE, self.protocol_type, self.protocol_name, member.assignment)

    def heartbeat(self, member_id: str, group_instance_id: str | None, generation_id: int, now_ms: int) -> int:
        """The Heartbeat answer's error code; a valid heartbeat extends the member's session."""
        if self.state is DEAD:
            return COORDINATOR_NOT_AVAILABLE
        error = self.validate_member(member_id, group_instance_id)
        if error:
            return error
        if generation_id != self.generation_id:
            return ILLEGAL_GENERATION
        if self.state is EMPTY:
            return UNKNOWN_MEMBER_ID
        member = self.members[member_id]
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        return REBALANCE_IN_PROGRESS if self.state is PREPARING_REBALANCE else NONE

    def leave(self, leaving: list[tuple[str, str | None]], now_ms: int) -> tuple[list[int], Outcome]:
        """Per-member error codes for ``(member id, group instance id)`` pairs, and the resulting outcome."""
        outcome = Outcome()
        errors = []
        for member_id, instance_id in leaving:
            if self.state is DEAD:
                errors.append(COORDINATOR_NOT_AVAILABLE)
                continue
            if not member_id:
                # administrative removal by group instance id
                member_id = self.static_members.get(instance_id) if instance_id is not None else None
                if member_id is None:
                    errors.append(UNKNOWN_MEMBER_ID)
                    continue
            elif member_id in self.pending_members:
                del self.pending_members[member_id]
                errors.append(NONE)
                continue
            else:
                error = self.validate_member(member_id, instance_id)
                if error:
                    errors.append(error)
                    continue
            outcome.add(self._remove_member_and_update(member_id, now_ms))
            errors.append(NONE)
        if self.state is PREPARING_REBALANCE:
            outcome.add(self._try_complete_join(now_ms))
        return errors, outcome

    def _remove_member(self, member_id: str) -> Outcome:
        outcome = Outcome()
        member = self.members.pop(member_id)
        if member.join_ticket is not None:
            outcome.replies.append((member.join_ticket, JoinResult(UNKNOWN_MEMBER_ID, member_id)))
        if member.sync_ticket is not None:
            outcome.replies.append((member.sync_ticket, SyncResult(UNKNOWN_MEMBER_ID)))
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return outcome

    def _remove_member_and_update(self, member_id: str, now_ms: int) -> Outcome:
        outcome = self._remove_member(member_id)
        if self.state in (STABLE, COMPLETING_REBALANCE):
            outcome.add(self._prepare_rebalance(now_ms))
        return outcome

    # --- timers -----------------------------------------------------------------------
    def next_deadline_ms(self) -> int | None:
        """The earliest time ``poll`` has something to do (a pending member id or a session ends, the initial
        delay or the rebalance timeout passes); None: nothing until a request comes."""
        deadlines = [*self.pending_members.values(), *(m.heartbeat_deadline_ms for m in self.members.values())]
        if self.state is PREPARING_REBALANCE:
            deadlines += [d for d in (self.initial_delay_deadline_ms, self.rebalance_deadline_ms) if d is not None]
        return min(deadlines, default=None)

    def poll(self, now_ms: int) -> Outcome:
        """Expire sessions and pending member ids; complete a rebalance whose timeout or delay passed."""
        outcome = Outcome()
        for member_id, deadline in list(self.pending_members.items()):
            if now_ms >= deadline:
                del self.pending_members[member_id]
        for member in list(self.members.values()):
            if member.member_id in self.members and member.expired(now_ms):
                log.info("group %s: member %s missed its session timeout (%d ms); removing it", self.group_id,
                         member.member_id, member.session_timeout_ms)
                outcome.add(self._remove_member_and_update(member.member_id, now_ms))
        if self.state is PREPARING_REBALANCE:
            outcome.add(self._try_complete_join(now_ms))
        return outcome

    # --- offsets ------------------------------------------------------------------------
    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, generation_id: int,
                               now_ms: int, *, transactional: bool = False) -> int:
        """Kafka's ``ClassicGroup.validateOffsetCommit``; a member's (plain) commit extends its session.

        1. A Dead group: COORDINATOR_NOT_AVAILABLE.
        2. Generation -1 while the group is Empty (the admin client, or consumers that assign partitions
           themselves): accepted, whatever member id it names.
        3. A commit naming a generation, a member id or an instance id must be the current member's
           (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) of the current generation (ILLEGAL_GENERATION).
        4. Otherwise (generation -1, no member) a plain commit needs an Empty group (UNKNOWN_MEMBER_ID); a
           transactional one is accepted in any state (TxnOffsetCommit before v3 names no member).
        5. A plain commit while the group completes a rebalance: REBALANCE_IN_PROGRESS.
        """
        if self.state is DEAD:
            return COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and self.state is EMPTY:
            return NONE
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = self.validate_member(member_id, group_instance_id)
            if error:
                return error
            if generation_id != self.generation_id:
                return ILLEGAL_GENERATION
        elif not transactional:
            return UNKNOWN_MEMBER_ID
        if transactional:
            return NONE
        if self.state is COMPLETING_REBALANCE:
            return REBALANCE_IN_PROGRESS
        member = self.members.get(member_id)
        if member is not None:
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        return NONE

    def expired_offsets(self, now_ms: int) -> list[tuple[str, int]]:
        """Partitions whose committed offsets are past retention (Kafka's removeExpiredOffsets rules).

        An Empty group's offsets expire ``offsets.retention`` after the group became Empty; a group that
        never had members (offsets committed with generation -1) ages each offset from its commit; a
        Stable consumer group ages offsets of topics it no longer subscribes to from their commit.
        """
        retention = self.config.offsets_retention_ms

        def expired(offset: CommittedOffset, base: int) -> bool:
            if offset.expire_timestamp >= 0:
                return now_ms >= offset.expire_timestamp
            return now_ms - base >= retention

        if self.protocol_type and self.state is EMPTY:
            return [tp for tp, o in self.offsets.items() if expired(o, self.state_timestamp)]
        if not self.protocol_type:
            return [tp for tp, o in self.offsets.items() if expired(o, o.commit_timestamp)]
        if (self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.state is STABLE
                and self.subscribed_topics is not None):
            return [tp for tp, o in self.offsets.items()
                    if tp[0] not in self.subscribed_topics and expired(o, o.commit_timestamp)]
        return []

    def mark_dead(self, now_ms: int) -> None:
        self._transition(DEAD, now_ms)

    # --- helpers ------------------------------------------------------------------------
    @staticmethod
    def _reply(ticket: int, result) -> Outcome:
        return Outcome(replies=[(ticket, result)])
