"""group.max.groups: a coordinator holds a bounded number of groups (any client that may commit offsets can
create one, and every group is replayed at each start: 20,000 stretched a restart from ~1 s to 16 s). A
request that would create one more — JoinGroup, a simple OffsetCommit, a TxnOffsetCommit — gets
GROUP_MAX_SIZE_REACHED; existing groups keep working, a deleted group frees its place, and a reload keeps
every group its partition holds whatever the bound."""
from __future__ import annotations

from broker_sim.coordinator.group.metadata import GROUP_MAX_SIZE_REACHED, MEMBER_ID_REQUIRED, NONE
from broker_sim.coordinator.group.records import CommittedOffset

from group_helpers import join_request


def commit(coordinator, group: str, offset: int = 10) -> dict:
    return coordinator.commit_offsets(group, "", None, -1, [("events", 0, CommittedOffset(offset))])


def txn_commit(coordinator, group: str) -> dict:
    return coordinator.commit_txn_offsets(group, 7, 0, "", None, -1, [("events", 1, CommittedOffset(3))])


def test_new_groups_past_the_bound_are_refused_and_existing_ones_served(make_coordinator, offsets_topic):
    coordinator = make_coordinator(max_groups=3)
    assert commit(coordinator, "simple") == {("events", 0): NONE}
    [(_, joined)] = coordinator.join("joined", join_request(), coordinator.new_ticket())
    assert joined.error == MEMBER_ID_REQUIRED  # the group exists now; its member comes back with the id
    assert txn_commit(coordinator, "transactional") == {("events", 1): NONE}
    assert set(coordinator.groups) == {"simple", "joined", "transactional"}

    assert commit(coordinator, "fourth") == {("events", 0): GROUP_MAX_SIZE_REACHED}
    [(_, refused)] = coordinator.join("fifth", join_request(), coordinator.new_ticket())
    assert refused.error == GROUP_MAX_SIZE_REACHED
    assert txn_commit(coordinator, "sixth") == {("events", 1): GROUP_MAX_SIZE_REACHED}
    assert set(coordinator.groups) == {"simple", "joined", "transactional"}
    assert commit(coordinator, "simple", 11) == {("events", 0): NONE}  # an existing group is served

    assert coordinator.delete_groups(["simple"]) == {"simple": NONE}
    assert commit(coordinator, "fourth") == {("events", 0): NONE}

    offsets_topic.reopen()
    reloaded = make_coordinator(max_groups=1)  # a lower bound never drops what the partitions hold
    assert {"fourth", "transactional"} <= set(reloaded.groups)
    assert commit(reloaded, "fourth", 12) == {("events", 0): NONE}
    assert commit(reloaded, "another") == {("events", 0): GROUP_MAX_SIZE_REACHED}
