"""One KIP-848 consumer group (``group.protocol=consumer``): members, epochs, target assignment, reconciliation.

Theory of operation: Kafka 4's ``ConsumerGroup`` plus the per-group half of its ``GroupMetadataManager``, without
I/O.  A member heartbeats (``ConsumerGroupHeartbeat``); the coordinator, not a client leader, assigns:

1. The member is created or updated from the heartbeat (subscription, rack, rebalance timeout, assignor).  A new
   member, a changed subscription (topic names, or a regex whose resolution changed) or a change in the
   subscribed topics' metadata (a topic created, deleted or given partitions) bumps the **group epoch**.
2. When the group epoch is past the **assignment epoch**, the server-side assignor (``assignors``: ``uniform``,
   ``range``) computes a new **target assignment** for every member, and the assignment epoch becomes the
   group epoch.
3. The member is **reconciled** towards its target (Kafka's ``CurrentAssignmentBuilder``): partitions it must
   give up are first revoked (state UNREVOKED_PARTITIONS, its epoch unchanged) until a heartbeat's owned
   partitions no longer list them; partitions still owned by another member are held back (state
   UNRELEASED_PARTITIONS) until that member released them; then the member moves to the assignment epoch.
   A partition is owned by at most one member at a time (``partition_epochs``), which is why no record is
   read by two members of the group.

Every change is also a record, Kafka's own (``records``: ConsumerGroupMetadata, MemberMetadata,
TargetAssignmentMember/Metadata, CurrentMemberAssignment, RegularExpression): ``take_records`` hands them to the
coordinator, which appends them before the heartbeat is answered; when that append fails, ``restore`` puts back
the state ``snapshot`` took.  A restart replays the records (``replay``) and gets the same group back, members
with their epochs and assignments, their sessions started anew.

Time-driven changes — a member's session timeout (``group.consumer.session.timeout.ms``, or the group's
``consumer.session.timeout.ms``), the rebalance timeout of a member that does not revoke — happen in
``poll(now_ms)``: the member is fenced (removed) and the group epoch bumped.

Static membership (``group.instance.id``): a member that leaves with epoch -2 keeps its place (and its
partitions) for its session timeout; the same instance id joining again takes the place over under its new
member id.  An instance id another live member holds is UNRELEASED_INSTANCE_ID.

The group's state is derived as Kafka derives it: Empty (no members), Assigning (group epoch past the
assignment epoch), Reconciling (a member not at the assignment epoch, or not Stable), Stable.
"""
from __future__ import annotations

import hashlib
import logging
import uuid
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping

import kafka.errors as Errors

from broker_sim.coordinator.group.assignors import ASSIGNORS, Assignment
from broker_sim.coordinator.group.records import (
    CommittedOffset, ConsumerGroupEpochKey, ConsumerMember, CurrentAssignmentKey, MemberMetadataKey, MemberState,
    RegexKey, ResolvedRegex, TargetAssignmentEpochKey, TargetAssignmentMemberKey,
)
from broker_sim.coordinator.state_machine import State

log = logging.getLogger(__name__)

NONE = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
CONSUMER_PROTOCOL_TYPE = "consumer"
CONSUMER_GROUP_TYPE = "consumer"
# regexes are resolved again at most this often (Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS) unless one is new
REGEX_REFRESH_MIN_INTERVAL_MS = 10_000
REGEX_REFRESH_INTERVAL_MS = 600_000   # and at least this often (group.consumer.regex.refresh.interval.ms)
# The largest RE2 program a subscription regex may compile to. A regex is matched against every topic name on the
# coordinator's event loop, and its cost is names x program size (RE2 is linear in the text, but a big program
# leaves the DFA for the NFA): ``(a|b)*`` repeated 5,000 times (20,003 instructions) took 17 s over 2,000 topics.
# Topic regexes are tens of instructions (``orders-[a-z]+-(eu|us)-.*``: 29); 1,000 keep a resolution over
# 10,000 topics within ~70 ms. Kafka resolves regexes on another thread and has no such bound.
REGEX_MAX_PROGRAM_SIZE = 1000
# a pass whose records could not be written is tried again this much later
POLL_RETRY_MS = 1000


class GroupError(Exception):
    """A heartbeat refused: Kafka's error code and message."""

    def __init__(self, error: type[Errors.BrokerResponseError], message: str) -> None:
        super().__init__(message)
        self.code = error.errno
        self.message = message


class ConsumerGroupState(State):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ConsumerSettings:
    """The coordinator's consumer-group configs (Kafka's names in ``broker_sim.config``)."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")


@dataclass(frozen=True)
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat's fields (None: "unchanged since the last heartbeat", as Kafka's)."""

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: tuple[tuple[uuid.UUID, tuple[int, ...]], ...] | None = None
    client_id: str = ""
    client_host: str = ""
    # which topics the member may see (DESCRIBE): a regex resolves to those only, as Kafka's does
    topic_allowed: Callable[[str], bool] | None = field(default=None, compare=False)


def check_heartbeat(request: HeartbeatRequest, version: int, assignors: tuple[str, ...]) -> GroupError | None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid, for a request with a non-empty group id."""
    invalid = Errors.InvalidRequestError
    if (version >= 1 or request.member_epoch > 0 or request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH) \
            and not request.member_id:
        return GroupError(invalid, "MemberId can't be empty.")
    if request.instance_id == "":
        return GroupError(invalid, "InstanceId can't be empty.")
    if request.rack_id == "":
        return GroupError(invalid, "RackId can't be empty.")
    if request.member_epoch == 0:
        if request.rebalance_timeout_ms == -1:
            return GroupError(invalid, "RebalanceTimeoutMs must be provided in first request.")
        if request.owned is None or request.owned:
            return GroupError(invalid, "TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            return GroupError(invalid, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                                       "(re-)joining.")
    elif request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if request.instance_id is None:
            return GroupError(invalid, "InstanceId can't be null.")
    elif request.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        return GroupError(invalid, "MemberEpoch is invalid.")
    if request.server_assignor is not None and request.server_assignor not in assignors:
        return GroupError(Errors.UnsupportedAssignorError, f"ServerAssignor {request.server_assignor} is not "
                          f"supported. Supported assignors: {', '.join(assignors)}.")
    return None


@dataclass(frozen=True)
class HeartbeatAnswer:
    error: int = NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None   # None: not sent (unchanged)


def compile_regex(regex: str):
    """The RE2 pattern of a subscription regex (Kafka's RE2/J syntax); raises GroupError for an invalid one, or
    one whose program is over REGEX_MAX_PROGRAM_SIZE (see there)."""
    import re2

    options = re2.Options()
    options.log_errors = False
    try:
        pattern = re2.compile(regex, options=options)
    except re2.error as exc:
        detail = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise GroupError(InvalidRegularExpressionError,
                         f"SubscribedTopicRegex `{regex}` is not a valid regular expression: "
                         f"{_re2j_description(detail)}.") from None
    if pattern.programsize > REGEX_MAX_PROGRAM_SIZE:
        raise GroupError(InvalidRegularExpressionError,
                         f"SubscribedTopicRegex `{regex[:100]}{'...' if len(regex) > 100 else ''}` compiles to "
                         f"{pattern.programsize} RE2 instructions; pylog takes at most {REGEX_MAX_PROGRAM_SIZE}.")
    return pattern


# RE2's error texts (before ": <the offending part>") as RE2/J's PatternSyntaxException.getDescription words them
_RE2J_DESCRIPTIONS = {
    "missing )": "missing closing )", "missing ]": "missing closing ]", "unexpected )": "unexpected )",
    "invalid perl operator": "invalid or unsupported Perl syntax", "invalid escape sequence": "invalid escape sequence",
    "invalid character class range": "invalid character class range",
    "invalid character class": "invalid character class", "bad repetition operator": "invalid nested repetition operator",
    "invalid repetition size": "invalid repeat count",
    "no argument for repetition operator": "missing argument to repetition operator",
    "trailing \\": "trailing backslash at end of expression", "invalid named capture group": "invalid named capture",
    "invalid UTF-8": "invalid UTF-8",
}


def _re2j_description(detail: str) -> str:
    code = detail.partition(": ")[0]
    return _RE2J_DESCRIPTIONS.get(code, detail)


class InvalidRegularExpressionError(Errors.BrokerResponseError):
    """Kafka's INVALID_REGULAR_EXPRESSION, which kafka-python has no class for."""

    errno = 128
    message = "INVALID_REGULAR_EXPRESSION"
    description = "The regular expression is not valid."


def _owned_subset(owned, assigned: Assignment) -> bool:
    """Kafka's isSubset: every owned partition is in ``assigned`` (False when ``owned`` is None)."""
    if owned is None:
        return False
    for topic, parts in owned:
        mine = assigned.get(topic)
        if mine is None or any(p not in mine for p in parts):
            return False
    return True


class ConsumerGroup:
    group_type = CONSUMER_GROUP_TYPE
    protocol_type = CONSUMER_PROTOCOL_TYPE

    def __init__(self, group_id: str, now_ms: int, settings: ConsumerSettings = ConsumerSettings()) -> None:
        self.group_id = group_id
        self.settings = settings
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.target: dict[str, Assignment] = {}
        self.static_members: dict[str, str] = {}   # instance id -> member id
        self.regexes: dict[str, ResolvedRegex] = {}
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        self.metadata_hash = 0   # of the subscribed topics' ids and partition counts (Kafka's MetadataHash)
        self.offsets: dict[tuple[str, int], CommittedOffset] = {}
        self.pending_txn_offsets: dict[int, dict[tuple[str, int], CommittedOffset]] = {}
        self.pending_members: dict[str, int] = {}   # none: a classic notion, kept for the coordinator's checks
        self.session_deadlines: dict[str, int] = {}
        self.rebalance_deadlines: dict[str, tuple[int, int]] = {}   # member id -> (member epoch, deadline)
        self.retry_at_ms = 0
        self.state_timestamp = now_ms
        self.dead = False
        self._records: list[tuple[object, object]] = []

    def __repr__(self) -> str:
        return f"ConsumerGroup({self.group_id!r}, {self.state}, epoch {self.group_epoch})"

    # --- the state, as Kafka derives it ----------------------------------------------------------
    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    @property
    def empty(self) -> bool:
        return not self.members and not self.dead

    def subscribed_topics(self, members: Mapping[str, ConsumerMember] | None = None) -> frozenset[str]:
        """Every topic a member subscribes to, by name or through its regex's resolution."""
        topics: set[str] = set()
        for member in (self.members if members is None else members).values():
            topics.update(member.subscribed_topic_names)
            if member.subscribed_topic_regex:
                resolved = self.regexes.get(member.subscribed_topic_regex)
                if resolved is not None:
                    topics.update(resolved.topics)
        return frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.subscribed_topics()

    def preferred_assignor(self) -> str:
        """Kafka's ``computePreferredServerAssignor``: the assignor most members name, else the first configured."""
        counts: dict[str, int] = {}
        for member in self.members.values():
            if member.server_assignor:
                counts[member.server_assignor] = counts.get(member.server_assignor, 0) + 1
        if counts:
            return max(sorted(counts), key=lambda name: counts[name])
        return self.settings.assignors[0]

    # --- snapshots, for a write that fails ------------------------------------------------------
    def snapshot(self) -> tuple:
        return (self.group_epoch, self.assignment_epoch, dict(self.members), dict(self.target),
                dict(self.static_members), dict(self.regexes), dict(self.partition_epochs), self.metadata_hash,
                dict(self.session_deadlines), dict(self.rebalance_deadlines), self.state_timestamp, self.dead)

    def restore(self, snapshot: tuple) -> None:
        (self.group_epoch, self.assignment_epoch, self.members, self.target, self.static_members, self.regexes,
         self.partition_epochs, self.metadata_hash, self.session_deadlines, self.rebalance_deadlines,
         self.state_timestamp, self.dead) = snapshot
        self._records = []

    def take_records(self) -> list[tuple[object, object]]:
        records, self._records = self._records, []
        return records

    # --- changes (each one a record) ------------------------------------------------------------
    def _set_epoch(self, epoch: int) -> None:
        self.group_epoch = epoch
        self._records.append((ConsumerGroupEpochKey(self.group_id), (epoch, self.metadata_hash)))

    def _set_member(self, member: ConsumerMember, now_ms: int) -> None:
        """Store ``member``; a record of each half (subscription, assignment) that changed."""
        old = self.members.get(member.member_id)
        if old is None or old.subscription_fields() != member.subscription_fields():
            self._records.append((MemberMetadataKey(self.group_id, member.member_id), member))
        if old is None or old.assignment_fields() != member.assignment_fields():
            self._records.append((CurrentAssignmentKey(self.group_id, member.member_id), member))
        self._put_member(member, old)

    def _put_member(self, member: ConsumerMember, old: ConsumerMember | None) -> None:
        if old is not None:
            self._release(old)
            if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._claim(member)

    def _claim(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic, parts in assignment.items():
                for p in parts:
                    self.partition_epochs[(topic, p)] = member.member_epoch

    def _release(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic, parts in assignment.items():
                for p in parts:
                    if self.partition_epochs.get((topic, p)) == member.member_epoch:
                        del self.partition_epochs[(topic, p)]

    def _remove_member(self, member_id: str) -> None:
        member = self.members.pop(member_id)
        self._release(member)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.session_deadlines.pop(member_id, None)
        self.rebalance_deadlines.pop(member_id, None)
        self._records.append((CurrentAssignmentKey(self.group_id, member_id), None))
        if member_id in self.target:
            del self.target[member_id]
            self._records.append((TargetAssignmentMemberKey(self.group_id, member_id), None))
        self._records.append((MemberMetadataKey(self.group_id, member_id), None))

    def _set_target(self, epoch: int, target: dict[str, Assignment]) -> None:
        for member_id, assignment in target.items():
            if self.target.get(member_id) != assignment:
                self._records.append((TargetAssignmentMemberKey(self.group_id, member_id), assignment))
        for member_id in [m for m in self.target if m not in target]:
            self._records.append((TargetAssignmentMemberKey(self.group_id, member_id), None))
        self.target = dict(target)
        self.assignment_epoch = epoch
        self._records.append((TargetAssignmentEpochKey(self.group_id), epoch))

    def _set_regex(self, regex: str, resolved: ResolvedRegex | None) -> None:
        if resolved is None:
            self.regexes.pop(regex, None)
        else:
            self.regexes[regex] = resolved
        self._records.append((RegexKey(self.group_id, regex), resolved))

    # --- ConsumerGroupHeartbeat -------------------------------------------------------------------
    def heartbeat(self, request: HeartbeatRequest, topics: Callable[[], Mapping], now_ms: int, *,
                  interval_ms: int, session_ms: int) -> HeartbeatAnswer:
        """Kafka's consumerGroupHeartbeat (a regular one: epoch >= 0); raises GroupError for a refusal."""
        joining = request.member_epoch == 0
        member_id = request.member_id or str(uuid.uuid4())   # v0: the coordinator names a new member
        if len(self.members) >= self.settings.max_size and member_id not in self.members:
            raise GroupError(Errors.GroupMaxSizeReachedError, "The consumer group has reached its maximum "
                             f"capacity of {self.settings.max_size} members.")
        member = self._member_for(request, member_id, joining)
        updated = replace(
            member,
            instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(request.rebalance_timeout_ms if request.rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            server_assignor=(request.server_assignor if request.server_assignor is not None
                             else member.server_assignor),
            subscribed_topic_names=(tuple(sorted(set(request.subscribed_topic_names)))
                                    if request.subscribed_topic_names is not None else member.subscribed_topic_names),
            subscribed_topic_regex=(request.subscribed_topic_regex if request.subscribed_topic_regex is not None
                                    else member.subscribed_topic_regex),
            client_id=request.client_id, client_host=request.client_host)
        if updated.subscribed_topic_regex == "":
            updated = replace(updated, subscribed_topic_regex=None)
        bump = self.group_epoch == 0 or member.member_id not in self.members
        bump |= updated.subscribed_topic_names != member.subscribed_topic_names
        known = topics()
        bump |= self._update_regexes(member if member.member_id in self.members else None, updated, known, now_ms,
                                     request.topic_allowed)
        self._set_member(updated, now_ms)
        metadata_hash = self._metadata_hash(known)
        if bump or metadata_hash != self.metadata_hash:
            self.metadata_hash = metadata_hash
            self._set_epoch(self.group_epoch + 1)
        if self.group_epoch > self.assignment_epoch:
            self._assign(known)
        updated = self._reconcile(self.members[member_id], request.owned, now_ms)
        self.session_deadlines[member_id] = now_ms + session_ms
        full = (request.rebalance_timeout_ms != -1 and request.owned is not None
                and (request.subscribed_topic_names is not None or request.subscribed_topic_regex is not None))
        send = joining or full or updated.assigned != member.assigned or member.member_id not in self.members
        return HeartbeatAnswer(NONE, None, member_id, updated.member_epoch, interval_ms,
                               dict(updated.assigned) if send else None)

    def _member_for(self, request: HeartbeatRequest, member_id: str, joining: bool) -> ConsumerMember:
        """Kafka's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember, with its epoch checks."""
        instance_id = request.instance_id
        if instance_id is None:
            member = self.members.get(member_id)
            if member is None:
                if not joining:
                    raise GroupError(Errors.UnknownMemberIdError,
                                     f"Member {member_id} is not a member of group {self.group_id}.")
                return ConsumerMember(member_id)
            self._check_epoch(member, request)
            return member
        existing_id = self.static_members.get(instance_id)
        existing = self.members.get(existing_id) if existing_id is not None else None
        if joining:
            if existing is None:
                return self.members.get(member_id) or ConsumerMember(member_id, instance_id=instance_id)
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                if existing.member_id == member_id:
                    self._check_epoch(existing, request)
                    return existing
                raise GroupError(Errors.UnreleasedInstanceIdError,
                                 f"Static member {member_id} with instance id {instance_id} cannot join the group "
                                 f"because the instance id is owned by {existing.member_id} member.")
            # the instance that left with epoch -2 is back under a new member id: it takes the old place over
            log.info("group %s: static member %s (instance %s) replaces %s", self.group_id, member_id, instance_id,
                     existing.member_id)
            replacement = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            target = self.target.get(existing.member_id)
            self._remove_member(existing.member_id)
            self._put_member(replacement, None)
            self._records.append((MemberMetadataKey(self.group_id, member_id), replacement))
            self._records.append((CurrentAssignmentKey(self.group_id, member_id), replacement))
            if target is not None:
                self.target[member_id] = target
                self._records.append((TargetAssignmentMemberKey(self.group_id, member_id), target))
            return replacement
        if existing is None:
            raise GroupError(Errors.UnknownMemberIdError, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise GroupError(Errors.FencedInstanceIdError,
                             f"Static member {member_id} with instance id {instance_id} was fenced by member "
                             f"{existing.member_id}.")
        self._check_epoch(existing, request)
        return existing

    @staticmethod
    def _check_epoch(member: ConsumerMember, request: HeartbeatRequest) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: the member's epoch, or its previous one when the
        answer that moved it on may be lost (it then owns no more than it is assigned)."""
        received = request.member_epoch
        if received > member.member_epoch:
            raise GroupError(Errors.FencedMemberEpochError,
                             f"The consumer group member has a greater member epoch ({received}) than the one known "
                             f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")
        if received < member.member_epoch and (received != member.previous_member_epoch
                                               or not _owned_subset(request.owned, member.assigned)):
            raise GroupError(Errors.FencedMemberEpochError,
                             f"The consumer group member has a smaller member epoch ({received}) than the one known "
                             f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")

    # --- subscriptions --------------------------------------------------------------------------
    def _update_regexes(self, old: ConsumerMember | None, new: ConsumerMember, known: Mapping,
                        now_ms: int, allowed: Callable[[str], bool] | None = None) -> bool:
        """Resolve a new regex, drop one no member uses, refresh them when topics may have changed; True when a
        resolution the group's assignment depends on changed (Kafka's maybeUpdateRegularExpressions, done at
        once: resolving is linear in the topics with RE2)."""
        old_regex = old.subscribed_topic_regex if old is not None else None
        members = dict(self.members)
        members[new.member_id] = new
        used = {m.subscribed_topic_regex for m in members.values() if m.subscribed_topic_regex}
        changed = False
        if old_regex and old_regex != new.subscribed_topic_regex and old_regex not in used and old_regex in self.regexes:
            self._set_regex(old_regex, None)
        names = frozenset(known)
        for regex in sorted(used):
            resolved = self.regexes.get(regex)
            due = (resolved is None or now_ms >= resolved.timestamp + REGEX_REFRESH_INTERVAL_MS
                   or (now_ms >= resolved.timestamp + REGEX_REFRESH_MIN_INTERVAL_MS
                       and resolved.version != hash(names)))
            if not due:
                continue
            pattern = compile_regex(regex)
            topics = frozenset(name for name in names if pattern.fullmatch(name) and (allowed is None or allowed(name)))
            if resolved is None or resolved.topics != topics:
                changed = True
            self._set_regex(regex, ResolvedRegex(topics, hash(names), now_ms))
        if new.subscribed_topic_regex != old_regex and new.subscribed_topic_regex in self.regexes:
            changed = True
        return changed

    def _subscriptions(self, known: Mapping) -> dict[str, frozenset[uuid.UUID]]:
        """Member id -> the ids of the existing topics it subscribes to."""
        result = {}
        for member in self.members.values():
            names = set(member.subscribed_topic_names)
            if member.subscribed_topic_regex and member.subscribed_topic_regex in self.regexes:
                names |= self.regexes[member.subscribed_topic_regex].topics
            result[member.member_id] = frozenset(known[n].topic_id for n in names if n in known)
        return result

    def _metadata_hash(self, known: Mapping) -> int:
        """A signed 64-bit hash of what the assignment depends on in the metadata: each subscribed topic's name, id
        and partition count (Kafka's MetadataHash, by another function: Kafka reading it bumps the epoch once)."""
        text = repr(sorted((name, str(known[name].topic_id), known[name].partitions)
                           for name in self.subscribed_topics() if name in known)).encode()
        return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big", signed=True)

    def _assign(self, known: Mapping) -> None:
        subscriptions = self._subscriptions(known)
        by_id = {info.topic_id: info.partitions for info in (known[n] for n in self.subscribed_topics()
                                                            if n in known)}
        assignor = ASSIGNORS[self.preferred_assignor()]
        target = assignor(subscriptions, by_id, self.target)
        log.info("group %s: target assignment of epoch %d by %s for %d members", self.group_id, self.group_epoch,
                 self.preferred_assignor(), len(target))
        self._set_target(self.group_epoch, target)

    # --- reconciliation (Kafka's CurrentAssignmentBuilder) -----------------------------------------
    def _reconcile(self, member: ConsumerMember, owned, now_ms: int) -> ConsumerMember:
        epoch = self.assignment_epoch
        if member.is_reconciled_to(epoch) or member.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            return member
        target = self.target.get(member.member_id, {})
        if member.state is MemberState.STABLE:
            updated = self._next(member, member.member_epoch, member.assigned, target, owned)
        elif member.state is MemberState.UNREVOKED_PARTITIONS:
            if self._owns_any(owned, member.pending_revocation):
                return member
            updated = self._next(member, member.member_epoch + 1, member.assigned, target, owned)
        elif member.state is MemberState.UNRELEASED_PARTITIONS:
            updated = self._next(member, member.member_epoch, member.assigned, target, owned)
        else:
            if owned is None or owned:
                raise GroupError(Errors.FencedMemberEpochError, "The consumer group member is in a unknown state. "
                                 "The member must abandon all its partitions and rejoin.")
            updated = self._next(member, epoch, member.assigned, target, owned)
        if updated != member:
            self._set_member(updated, now_ms)
            if updated.state is MemberState.UNREVOKED_PARTITIONS:
                timeout = max(updated.rebalance_timeout_ms, 0)
                self.rebalance_deadlines[member.member_id] = (updated.member_epoch, now_ms + timeout)
            else:
                self.rebalance_deadlines.pop(member.member_id, None)
        return updated

    @staticmethod
    def _owns_any(owned, partitions: Assignment) -> bool:
        if owned is None:
            return True
        return any(p in partitions.get(topic, ()) for topic, parts in owned for p in parts)

    def _next(self, member: ConsumerMember, member_epoch: int, current: Assignment, target: Assignment,
              owned) -> ConsumerMember:
        epoch = self.assignment_epoch
        assigned: dict[uuid.UUID, set[int]] = {}
        revoking: dict[uuid.UUID, set[int]] = {}
        pending: dict[uuid.UUID, set[int]] = {}
        unreleased = False
        for topic in set(target) | set(current):
            want, have = target.get(topic, frozenset()), current.get(topic, frozenset())
            keep = have & want
            if keep:
                assigned[topic] = set(keep)
            if have - keep:
                revoking[topic] = set(have - keep)
            free = set()
            for p in want - keep:
                if self.partition_epochs.get((topic, p), -1) != -1 and (topic, p) not in self._own_keys(member):
                    unreleased = True
                else:
                    free.add(p)
            if free:
                pending[topic] = free
        frozen = lambda pairs: {t: frozenset(ps) for t, ps in pairs.items() if ps}  # noqa: E731
        if revoking and self._owns_any(owned, frozen(revoking)):
            return replace(member, state=MemberState.UNREVOKED_PARTITIONS, member_epoch=member_epoch,
                           previous_member_epoch=member.member_epoch, assigned=frozen(assigned),
                           pending_revocation=frozen(revoking))
        for topic, parts in pending.items():
            assigned.setdefault(topic, set()).update(parts)
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return replace(member, state=state, member_epoch=epoch, previous_member_epoch=member.member_epoch,
                       assigned=frozen(assigned), pending_revocation={})

    @staticmethod
    def _own_keys(member: ConsumerMember) -> set[tuple[uuid.UUID, int]]:
        return {(t, p) for assignment in (member.assigned, member.pending_revocation)
                for t, parts in assignment.items() for p in parts}

    # --- leaving, fencing, timers ------------------------------------------------------------------
    def leave(self, member_id: str, instance_id: str | None, member_epoch: int, topics: Callable[[], Mapping],
              now_ms: int) -> HeartbeatAnswer:
        """Kafka's consumerGroupLeave: epoch -1 removes the member, -2 keeps a static member's place."""
        if instance_id is None:
            if member_id not in self.members:
                raise GroupError(Errors.UnknownMemberIdError,
                                 f"Member {member_id} is not a member of group {self.group_id}.")
            self.fence([member_id], topics, now_ms, "left the group")
            return HeartbeatAnswer(NONE, None, member_id, member_epoch)
        existing_id = self.static_members.get(instance_id)
        if existing_id is None:
            raise GroupError(Errors.UnknownMemberIdError, f"Instance id {instance_id} is unknown.")
        if existing_id != member_id:
            raise GroupError(Errors.FencedInstanceIdError,
                             f"Static member {member_id} with instance id {instance_id} was fenced by member "
                             f"{existing_id}.")
        if member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            member = self.members[member_id]
            left = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
            self._set_member(left, now_ms)
            self.rebalance_deadlines.pop(member_id, None)
            log.info("group %s: static member %s (instance %s) left for now", self.group_id, member_id, instance_id)
            return HeartbeatAnswer(NONE, None, member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH)
        self.fence([member_id], topics, now_ms, "left the group")
        return HeartbeatAnswer(NONE, None, member_id, member_epoch)

    def fence(self, member_ids: list[str], topics: Callable[[], Mapping], now_ms: int, why: str) -> None:
        """Remove members and bump the group epoch (Kafka's consumerGroupFenceMembers)."""
        if not member_ids:
            return
        for member_id in member_ids:
            log.info("group %s: member %s %s; removing it", self.group_id, member_id, why)
            self._remove_member(member_id)
        remaining = {m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex}
        for regex in [r for r in self.regexes if r not in remaining]:
            self._set_regex(regex, None)
        self.metadata_hash = self._metadata_hash(topics())
        self._set_epoch(self.group_epoch + 1)
        if not self.members:
            self.state_timestamp = now_ms

    def next_deadline_ms(self) -> int | None:
        deadlines = [*self.session_deadlines.values(), *(d for _, d in self.rebalance_deadlines.values())]
        if not deadlines:
            return None
        return max(min(deadlines), self.retry_at_ms)

    def poll(self, topics: Callable[[], Mapping], now_ms: int) -> None:
        """Fence members whose session ended, or who did not revoke within their rebalance timeout."""
        if now_ms < self.retry_at_ms:
            return
        expired = [m for m, deadline in self.session_deadlines.items() if now_ms >= deadline and m in self.members]
        late = [m for m, (epoch, deadline) in self.rebalance_deadlines.items()
                if now_ms >= deadline and m in self.members and m not in expired
                and self.members[m].member_epoch == epoch
                and self.members[m].state is MemberState.UNREVOKED_PARTITIONS]
        if expired:
            self.fence(expired, topics, now_ms, "missed its session timeout")
        if late:
            self.fence(late, topics, now_ms, "did not revoke its partitions within its rebalance timeout")

    def restart_sessions(self, now_ms: int, session_ms: int) -> None:
        """After a load: every member's session starts now (Kafka reschedules them when it loads a group)."""
        self.session_deadlines = {member_id: now_ms + session_ms for member_id in self.members}

    # --- replay of the records (load) --------------------------------------------------------------
    def replay(self, key, value) -> None:
        """Apply one of the group's records read back from ``__consumer_offsets`` (value None: tombstone)."""
        if isinstance(key, ConsumerGroupEpochKey):
            if value is None:
                self.dead = True
            else:
                self.group_epoch, self.metadata_hash = value
        elif isinstance(key, TargetAssignmentEpochKey):
            self.assignment_epoch = value if value is not None else 0
        elif isinstance(key, TargetAssignmentMemberKey):
            if value is None:
                self.target.pop(key.member_id, None)
            else:
                self.target[key.member_id] = value
        elif isinstance(key, RegexKey):
            if value is None:
                self.regexes.pop(key.regex, None)
            else:
                self.regexes[key.regex] = value
        elif isinstance(key, MemberMetadataKey):
            old = self.members.get(key.member_id)
            if value is None:
                if old is not None:
                    self._release(old)
                    self.members.pop(key.member_id)
                    if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
                        del self.static_members[old.instance_id]
                return
            base = old or ConsumerMember(key.member_id)
            member = replace(base, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
                             client_host=value.client_host, subscribed_topic_names=value.subscribed_topic_names,
                             subscribed_topic_regex=value.subscribed_topic_regex,
                             rebalance_timeout_ms=value.rebalance_timeout_ms, server_assignor=value.server_assignor)
            self._put_member(member, old)
        elif isinstance(key, CurrentAssignmentKey):
            old = self.members.get(key.member_id)
            if old is None:
                if value is None:
                    return
                old = ConsumerMember(key.member_id)
            if value is None:
                member = replace(old, member_epoch=0, previous_member_epoch=0, state=MemberState.STABLE,
                                 assigned={}, pending_revocation={})
            else:
                member = replace(old, member_epoch=value.member_epoch,
                                 previous_member_epoch=value.previous_member_epoch, state=value.state,
                                 assigned=value.assigned, pending_revocation=value.pending_revocation)
            self._put_member(member, old if old.member_id in self.members else None)

    # --- offsets --------------------------------------------------------------------------------------
    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, member_epoch: int,
                               now_ms: int, *, transactional: bool = False, version: int = 9) -> int:
        """Kafka's ConsumerGroup.validateOffsetCommit: epoch -1 (the admin client, a consumer assigning itself)
        commits only to an Empty group; a TxnOffsetCommit naming no member is taken; otherwise the member must
        exist (UNKNOWN_MEMBER_ID), commit with OffsetCommit v9+ (UNSUPPORTED_VERSION) and its current epoch
        (STALE_MEMBER_EPOCH)."""
        if self.dead:
            return Errors.CoordinatorNotAvailableError.errno
        if member_epoch < 0 and not self.members:
            return NONE
        if transactional and member_epoch == -1 and not member_id and group_instance_id is None:
            return NONE
        member = self.members.get(member_id)
        if member is None:
            return Errors.UnknownMemberIdError.errno
        if not transactional and version < 9:
            return Errors.UnsupportedVersionError.errno
        if member_epoch != member.member_epoch:
            return Errors.StaleMemberEpochError.errno
        return NONE

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int:
        """Kafka's ConsumerGroup.validateOffsetFetch: a member's fetch (epoch >= 0) carries its current epoch."""
        if member_epoch < 0 or member_id is None:
            return NONE
        member = self.members.get(member_id)
        if member is None:
            return Errors.UnknownMemberIdError.errno
        if member_epoch != member.member_epoch:
            return Errors.StaleMemberEpochError.errno
        return NONE

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        """Offsets of topics no member subscribes to, past retention from their commit (Kafka's condition for
        consumer groups)."""
        subscribed = self.subscribed_topics()
        expired = []
        for tp, offset in self.offsets.items():
            if tp[0] in subscribed:
                continue
            if offset.expire_timestamp >= 0:
                if now_ms >= offset.expire_timestamp:
                    expired.append(tp)
            elif now_ms - offset.commit_timestamp >= retention_ms:
                expired.append(tp)
        return expired

    def mark_dead(self, now_ms: int) -> None:
        self.dead = True
        self.state_timestamp = now_ms
