"""Versioned member sync (SyncMembers) and joined-group sync (SyncJoinedGroups) through a real
groupd with stock grpcio: deltas after a version, paging, full reloads, and every refusal."""

import grpc
import pytest
from google.protobuf import field_mask_pb2

from support import admin_md, expect_error, uid, user_md
from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc, member_pb2, member_pb2_grpc


@pytest.fixture
def groups(channel):
    return group_pb2_grpc.GroupServiceStub(channel)


@pytest.fixture
def members(channel):
    return member_pb2_grpc.MemberServiceStub(channel)


def create(groups, group_type, owner, users=(), name="team"):
    request = group_pb2.CreateGroupRequest(
        group_id=uid("g"), type=group_type, owner_user_id=owner, profile=common_pb2.GroupProfile(name=name),
        members=[group_pb2.InitialMember(user_id=user, role=common_pb2.MEMBER_ROLE_MEMBER) for user in users])
    return groups.CreateGroup(request, metadata=admin_md(), timeout=10).group


def sync(members, gid, version, md, page_size=0):
    """Every page of a SyncMembers from `version`: (changed user ids in order, removed, version, pages)."""
    changed, removed, token, pages, answer = [], [], "", 0, None
    while True:
        answer = members.SyncMembers(member_pb2.SyncMembersRequest(
            group_id=gid, version=version, page_size=page_size, page_token=token), metadata=md, timeout=10)
        assert not answer.full_reload_required
        changed += [m.user_id for m in answer.changed_members]
        removed += list(answer.removed_user_ids)
        pages += 1
        token = answer.next_page_token
        if not token:
            return changed, removed, answer.version, pages


def test_sync_members_from_zero_then_deltas(groups, members):
    owner, alice, bob, carol = uid("owner"), uid("alice"), uid("bob"), uid("carol")
    group = create(groups, common_pb2.GROUP_TYPE_MEETING, owner, [alice, bob, carol])
    gid = group.group_id
    assert group.member_version == 1
    changed, removed, version, pages = sync(members, gid, 0, user_md(alice), page_size=2)
    assert sorted(changed) == sorted([owner, alice, bob, carol]) and removed == [] and version == 1 and pages == 2

    # Nothing since: an empty answer at the same version.
    assert sync(members, gid, version, user_md(alice)) == ([], [], 1, 1)

    # A name card, a kick, a join: only those come back, each as it is now.
    members.UpdateMemberInfo(member_pb2.UpdateMemberInfoRequest(
        group_id=gid, update_mask=field_mask_pb2.FieldMask(paths=["name_card"]), name_card="Bobby"),
        metadata=user_md(bob), timeout=10)
    members.KickMembers(member_pb2.KickMembersRequest(group_id=gid, user_ids=[carol]), metadata=user_md(owner),
                        timeout=10)
    dave = uid("dave")
    members.JoinGroup(member_pb2.JoinGroupRequest(group_id=gid), metadata=user_md(dave), timeout=10)
    answer = members.SyncMembers(member_pb2.SyncMembersRequest(group_id=gid, version=version),
                                 metadata=user_md(alice), timeout=10)
    assert [m.user_id for m in answer.changed_members] == [bob, dave]
    assert answer.changed_members[0].name_card == "Bobby"
    assert list(answer.removed_user_ids) == [carol]
    assert answer.version == 4 and not answer.next_page_token
    info = groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[gid]), metadata=user_md(alice), timeout=10)
    assert info.groups[0].member_version == 4

    # A role change and a mute move the version too; a rejoin takes the user out of the removed.
    members.SetMemberRole(member_pb2.SetMemberRoleRequest(group_id=gid, user_id=bob, role=common_pb2.MEMBER_ROLE_ADMIN),
                          metadata=user_md(owner), timeout=10)
    members.MuteMembers(member_pb2.MuteMembersRequest(group_id=gid, user_ids=[alice], duration_seconds=60),
                        metadata=user_md(owner), timeout=10)
    members.JoinGroup(member_pb2.JoinGroupRequest(group_id=gid), metadata=user_md(carol), timeout=10)
    assert sync(members, gid, 4, user_md(alice))[:3] == ([bob, alice, carol], [], 7)


def test_sync_members_pages_removals_after_changes(groups, members):
    owner = uid("owner")
    users = [uid(f"u{i}") for i in range(5)]
    gid = create(groups, common_pb2.GROUP_TYPE_WORK, owner, users).group_id
    members.KickMembers(member_pb2.KickMembersRequest(group_id=gid, user_ids=users[:3]), metadata=user_md(owner),
                        timeout=10)
    newcomers = [uid("n0"), uid("n1")]
    members.InviteMembers(member_pb2.InviteMembersRequest(group_id=gid, user_ids=newcomers), metadata=user_md(owner),
                          timeout=10)
    # Pages of one: the two newcomers, then the three removed, each on a page of its own.
    changed, removed, version, pages = sync(members, gid, 1, user_md(owner), page_size=1)
    assert changed == newcomers and sorted(removed) == sorted(users[:3]) and version == 3 and pages == 5


def test_sync_members_pages_describe_the_first_version(groups, members):
    owner, alice, bob = uid("owner"), uid("alice"), uid("bob")
    gid = create(groups, common_pb2.GROUP_TYPE_MEETING, owner, [alice, bob]).group_id
    first = members.SyncMembers(member_pb2.SyncMembersRequest(group_id=gid, version=0, page_size=1),
                                metadata=user_md(owner), timeout=10)
    carol = uid("carol")
    members.JoinGroup(member_pb2.JoinGroupRequest(group_id=gid), metadata=user_md(carol), timeout=10)
    rest = members.SyncMembers(member_pb2.SyncMembersRequest(
        group_id=gid, version=0, page_size=10, page_token=first.next_page_token), metadata=user_md(owner), timeout=10)
    listed = [m.user_id for m in first.changed_members] + [m.user_id for m in rest.changed_members]
    assert sorted(listed) == sorted([owner, alice, bob]) and rest.version == first.version == 1
    # The join after the first page comes in the next sync.
    assert sync(members, gid, rest.version, user_md(owner))[:3] == ([carol], [], 2)


def test_sync_members_full_reload_from_the_future(groups, members):
    owner = uid("owner")
    gid = create(groups, common_pb2.GROUP_TYPE_PUBLIC, owner, [uid("a")]).group_id
    answer = members.SyncMembers(member_pb2.SyncMembersRequest(group_id=gid, version=99), metadata=user_md(owner),
                                 timeout=10)
    assert answer.full_reload_required and answer.version == 0
    assert not answer.changed_members and not answer.removed_user_ids and not answer.next_page_token


def test_sync_members_refusals(groups, members):
    owner, alice, outsider = uid("owner"), uid("alice"), uid("outsider")
    gid = create(groups, common_pb2.GROUP_TYPE_PUBLIC, owner, [alice]).group_id
    expect_error(lambda: members.SyncMembers(member_pb2.SyncMembersRequest(group_id=gid), metadata=user_md(outsider),
                                             timeout=10), grpc.StatusCode.PERMISSION_DENIED, "NOT_A_MEMBER")
    expect_error(lambda: members.SyncMembers(member_pb2.SyncMembersRequest(group_id=uid("none")),
                                             metadata=user_md(owner), timeout=10),
                 grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")
    info = expect_error(lambda: members.SyncMembers(member_pb2.SyncMembersRequest(group_id=gid, page_size=-1),
                                                    metadata=user_md(owner), timeout=10),
                        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "page_size"
    info = expect_error(lambda: members.SyncMembers(member_pb2.SyncMembersRequest(group_id=gid, version=2**63),
                                                    metadata=user_md(owner), timeout=10),
                        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "version"
    for token in ["garbage", "1.1.0.0.0"]:
        info = expect_error(lambda: members.SyncMembers(member_pb2.SyncMembersRequest(
            group_id=gid, version=0, page_token=token), metadata=user_md(owner), timeout=10),
            grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
        assert info.metadata["field"] == "page_token"
    room = create(groups, common_pb2.GROUP_TYPE_AV_CHAT_ROOM, owner).group_id
    info = expect_error(lambda: members.SyncMembers(member_pb2.SyncMembersRequest(group_id=room), metadata=admin_md(),
                                                    timeout=10),
                        grpc.StatusCode.FAILED_PRECONDITION, "MEMBERS_NOT_STORED")
    assert info.metadata["field"] == "group_id"
    # The backend may sync any group; nothing was changed by the refusals.
    assert sorted(sync(members, gid, 0, admin_md())[0]) == sorted([owner, alice])


def test_sync_members_full_reload_after_removals_are_purged(fresh_groupd):
    server = fresh_groupd(manual_clock=True, limits={"event_retention_seconds": 1}).start()
    with grpc.insecure_channel(server.address) as channel:
        groups, members = group_pb2_grpc.GroupServiceStub(channel), member_pb2_grpc.MemberServiceStub(channel)
        owner, alice, bob = uid("owner"), uid("alice"), uid("bob")
        gid = create(groups, common_pb2.GROUP_TYPE_PUBLIC, owner, [alice, bob]).group_id
        members.QuitGroup(member_pb2.QuitGroupRequest(group_id=gid), metadata=user_md(bob), timeout=10)
        assert sync(members, gid, 1, user_md(owner))[:3] == ([], [bob], 2)
        # The retention pass (every 60 s of the clock) deletes the removal: version 1 cannot be
        # brought up to date any more; version 2 (after it) still can.
        server.advance_clock(seconds=61)
        answer = members.SyncMembers(member_pb2.SyncMembersRequest(group_id=gid, version=1), metadata=user_md(owner),
                                     timeout=10)
        assert answer.full_reload_required and answer.version == 0 and not answer.removed_user_ids
        assert sync(members, gid, 2, user_md(owner))[:3] == ([], [], 2)
        assert sorted(sync(members, gid, 0, user_md(owner))[0]) == sorted([owner, alice])


def joined_sync(groups, version, md, page_size=0):
    """Every page of a SyncJoinedGroups from `version`: (changed group ids, removed, version, pages)."""
    changed, removed, token, pages = [], [], "", 0
    while True:
        answer = groups.SyncJoinedGroups(group_pb2.SyncJoinedGroupsRequest(
            version=version, page_size=page_size, page_token=token), metadata=md, timeout=10)
        assert not answer.full_reload_required
        changed += [g.group_id for g in answer.groups]
        removed += list(answer.removed_group_ids)
        pages += 1
        token = answer.next_page_token
        if not token:
            return changed, removed, answer.version, pages


def test_sync_joined_groups(groups, members):
    me, other = uid("me"), uid("other")
    first = create(groups, common_pb2.GROUP_TYPE_PUBLIC, other, [me]).group_id
    second = create(groups, common_pb2.GROUP_TYPE_WORK, me).group_id
    third = create(groups, common_pb2.GROUP_TYPE_MEETING, other, [me]).group_id
    create(groups, common_pb2.GROUP_TYPE_AV_CHAT_ROOM, me)  # never listed
    untouched = create(groups, common_pb2.GROUP_TYPE_PUBLIC, other, [me]).group_id
    changed, removed, version, pages = joined_sync(groups, 0, user_md(me), page_size=2)
    assert sorted(changed) == sorted([first, second, third, untouched]) and removed == [] and pages == 2
    assert version > 0

    # Nothing since.
    assert joined_sync(groups, version, user_md(me))[:2] == ([], [])

    # A profile change, a kick, a dismissal, a new group, a remark: each comes back once.
    groups.UpdateGroupProfile(group_pb2.UpdateGroupProfileRequest(
        group_id=first, update_mask=field_mask_pb2.FieldMask(paths=["name"]),
        profile=common_pb2.GroupProfile(name="renamed")), metadata=user_md(other), timeout=10)
    members.KickMembers(member_pb2.KickMembersRequest(group_id=third, user_ids=[me]), metadata=user_md(other),
                        timeout=10)
    groups.DismissGroup(group_pb2.DismissGroupRequest(group_id=second), metadata=admin_md(), timeout=10)
    fourth = create(groups, common_pb2.GROUP_TYPE_PUBLIC, other, [me]).group_id
    members.SetGroupRemark(member_pb2.SetGroupRemarkRequest(group_id=untouched, remark="mine"),
                           metadata=user_md(me), timeout=10)
    answer = groups.SyncJoinedGroups(group_pb2.SyncJoinedGroupsRequest(version=version), metadata=user_md(me),
                                     timeout=10)
    by_id = {g.group_id: g for g in answer.groups}
    assert sorted(by_id) == sorted([first, fourth, untouched])
    assert by_id[first].profile.name == "renamed" and by_id[first].self_info.user_id == me
    assert by_id[untouched].remark == "mine"
    assert sorted(answer.removed_group_ids) == sorted([second, third])
    assert answer.version > version and not answer.next_page_token

    # Another user's sync is not touched by my remark; the backend syncs for a user.
    assert untouched not in joined_sync(groups, version, user_md(other))[0]
    assert sorted(joined_sync(groups, answer.version, admin_md(operator=me))[0]) == []


def test_sync_joined_groups_refusals(groups):
    me = uid("me")
    create(groups, common_pb2.GROUP_TYPE_PUBLIC, me)
    latest = groups.SyncJoinedGroups(group_pb2.SyncJoinedGroupsRequest(), metadata=user_md(me), timeout=10).version
    answer = groups.SyncJoinedGroups(group_pb2.SyncJoinedGroupsRequest(version=latest + 10**9), metadata=user_md(me),
                                     timeout=10)
    assert answer.full_reload_required and not answer.groups and not answer.removed_group_ids
    assert answer.version == 0 and not answer.next_page_token
    info = expect_error(lambda: groups.SyncJoinedGroups(group_pb2.SyncJoinedGroupsRequest(), metadata=admin_md(),
                                                        timeout=10),
                        grpc.StatusCode.INVALID_ARGUMENT, "OPERATOR_REQUIRED")
    assert info.metadata["field"] == "x-operator-id"
    info = expect_error(lambda: groups.SyncJoinedGroups(group_pb2.SyncJoinedGroupsRequest(page_size=-1),
                                                        metadata=user_md(me), timeout=10),
                        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "page_size"
    info = expect_error(lambda: groups.SyncJoinedGroups(group_pb2.SyncJoinedGroupsRequest(version=2**64 - 1),
                                                        metadata=user_md(me), timeout=10),
                        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "version"
    for token in ["nope", "0.0"]:
        info = expect_error(lambda: groups.SyncJoinedGroups(group_pb2.SyncJoinedGroupsRequest(
            version=latest, page_token=token), metadata=user_md(me), timeout=10),
            grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
        assert info.metadata["field"] == "page_token"
