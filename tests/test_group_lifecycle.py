"""RevokeGroup, ImportGroup, TOO_MANY_GROUPS at creation, ListJoinedGroups.total_count, SearchGroups
matched_members and cross-app isolation of every group and member RPC, through a real groupd with
stock grpcio.
"""

import grpc
import pytest
from google.protobuf import field_mask_pb2, timestamp_pb2

from support import OTHER_APP_ID, OTHER_APP_SECRET, admin_md, error_info, expect_error, uid, user_md
from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc, member_pb2, member_pb2_grpc


@pytest.fixture
def stub(channel):
    return group_pb2_grpc.GroupServiceStub(channel)


@pytest.fixture
def members(channel):
    return member_pb2_grpc.MemberServiceStub(channel)


def create(stub, group_type, owner, users=(), name="team", group_id=None, metadata=None):
    request = group_pb2.CreateGroupRequest(
        group_id=group_id or uid("g"), type=group_type, owner_user_id=owner,
        profile=common_pb2.GroupProfile(name=name),
        members=[group_pb2.InitialMember(user_id=user, role=role) for user, role in users])
    return stub.CreateGroup(request, metadata=metadata or admin_md(), timeout=10)


def lookup_failures(stub, group_id, metadata):
    response = stub.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[group_id]), metadata=metadata, timeout=10)
    assert not response.groups
    return [(f.group_id, f.reason) for f in response.failures]


def test_revoke_group(stub):
    owner, member = uid("owner"), uid("member")
    group = create(stub, common_pb2.GROUP_TYPE_PUBLIC, owner, [(member, common_pb2.MEMBER_ROLE_MEMBER)]).group
    request = group_pb2.RevokeGroupRequest(group_id=group.group_id, reason="terms of service")
    expect_error(lambda: stub.RevokeGroup(request, metadata=user_md(owner), timeout=10),
                 grpc.StatusCode.PERMISSION_DENIED, "ADMIN_TOKEN_REQUIRED")
    expect_error(lambda: stub.RevokeGroup(request, metadata=admin_md(operator=owner), timeout=10),
                 grpc.StatusCode.PERMISSION_DENIED, "ADMIN_TOKEN_REQUIRED")
    stub.RevokeGroup(request, metadata=admin_md(), timeout=10)
    assert lookup_failures(stub, group.group_id, admin_md()) == [(group.group_id, "GROUP_NOT_FOUND")]
    expect_error(lambda: stub.RevokeGroup(request, metadata=admin_md(), timeout=10),
                 grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")


def test_import_group(stub, members):
    group_id, owner, admin, member = uid("legacy"), uid("owner"), uid("admin"), uid("member")
    request = group_pb2.ImportGroupRequest(
        group_id=group_id, type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id=owner,
        profile=common_pb2.GroupProfile(name="from elsewhere"),
        create_time=timestamp_pb2.Timestamp(seconds=1_600_000_000),
        members=[
            group_pb2.ImportedMember(user_id=member, name_card="late", join_time=timestamp_pb2.Timestamp(seconds=1_600_000_300)),
            group_pb2.ImportedMember(user_id=owner, role=common_pb2.MEMBER_ROLE_OWNER,
                                     join_time=timestamp_pb2.Timestamp(seconds=1_600_000_100)),
            group_pb2.ImportedMember(user_id=admin, role=common_pb2.MEMBER_ROLE_ADMIN,
                                     join_time=timestamp_pb2.Timestamp(seconds=1_600_000_200)),
        ])
    expect_error(lambda: stub.ImportGroup(request, metadata=user_md(owner), timeout=10),
                 grpc.StatusCode.PERMISSION_DENIED, "ADMIN_TOKEN_REQUIRED")
    response = stub.ImportGroup(request, metadata=admin_md(), timeout=10)
    assert response.group.group_id == group_id
    assert response.group.create_time.seconds == 1_600_000_000
    assert response.group.member_count == 3
    assert [r.result for r in response.member_results] == [common_pb2.MEMBER_RESULT_CODE_SUCCESS] * 3
    listed = members.ListMembers(member_pb2.ListMembersRequest(group_id=group_id), metadata=admin_md(), timeout=10)
    assert [(m.user_id, m.role, m.join_time.seconds) for m in listed.members] == [
        (owner, common_pb2.MEMBER_ROLE_OWNER, 1_600_000_100),
        (admin, common_pb2.MEMBER_ROLE_ADMIN, 1_600_000_200),
        (member, common_pb2.MEMBER_ROLE_MEMBER, 1_600_000_300),
    ]
    assert listed.members[2].name_card == "late"
    expect_error(lambda: stub.ImportGroup(request, metadata=admin_md(), timeout=10),
                 grpc.StatusCode.ALREADY_EXISTS, "GROUP_ID_TAKEN")


def test_too_many_groups_at_creation(fresh_groupd):
    server = fresh_groupd()
    text = server.config.read_text()
    marker = f"  - id: {OTHER_APP_ID}\n"
    server.config.write_text(text.replace(marker, "    limits:\n      max_groups_per_user: 1\n" + marker))
    server.start()
    with grpc.insecure_channel(server.address) as channel:
        stub = group_pb2_grpc.GroupServiceStub(channel)
        owner, busy, free = uid("owner"), uid("busy"), uid("free")
        create(stub, common_pb2.GROUP_TYPE_PUBLIC, owner, [(busy, common_pb2.MEMBER_ROLE_MEMBER)])
        # An AVChatRoom does not count.
        create(stub, common_pb2.GROUP_TYPE_AV_CHAT_ROOM, free)
        info = expect_error(lambda: create(stub, common_pb2.GROUP_TYPE_PUBLIC, owner, metadata=user_md(owner)),
                            grpc.StatusCode.FAILED_PRECONDITION, "TOO_MANY_GROUPS")
        assert info.metadata["user_id"] == owner and info.metadata["limit"] == "1"
        response = create(stub, common_pb2.GROUP_TYPE_PUBLIC, free,
                          [(busy, common_pb2.MEMBER_ROLE_MEMBER), (uid("new"), common_pb2.MEMBER_ROLE_MEMBER)])
        assert response.group.member_count == 2
        assert [(r.result, r.reason) for r in response.member_results] == [
            (common_pb2.MEMBER_RESULT_CODE_FAILED, "TOO_MANY_GROUPS"), (common_pb2.MEMBER_RESULT_CODE_SUCCESS, "")]
        expect_error(lambda: stub.ImportGroup(group_pb2.ImportGroupRequest(
            group_id=uid("imp"), type=common_pb2.GROUP_TYPE_WORK, owner_user_id=owner,
            profile=common_pb2.GroupProfile(name="x")), metadata=admin_md(), timeout=10),
            grpc.StatusCode.FAILED_PRECONDITION, "TOO_MANY_GROUPS")


def test_list_joined_groups_total_count(stub):
    owner, user = uid("owner"), uid("user")
    for group_type in (common_pb2.GROUP_TYPE_WORK, common_pb2.GROUP_TYPE_PUBLIC, common_pb2.GROUP_TYPE_MEETING):
        create(stub, group_type, owner, [(user, common_pb2.MEMBER_ROLE_MEMBER)])
    response = stub.ListJoinedGroups(group_pb2.ListJoinedGroupsRequest(page_size=1), metadata=user_md(user), timeout=10)
    assert len(response.groups) == 1 and response.total_count == 3
    typed = stub.ListJoinedGroups(group_pb2.ListJoinedGroupsRequest(types=[common_pb2.GROUP_TYPE_WORK]),
                                  metadata=user_md(user), timeout=10)
    assert typed.total_count == 1


def test_search_groups_matched_members(stub, members):
    owner, user, other = uid("owner"), uid("user"), uid("other")
    card = uid("card")
    group = create(stub, common_pb2.GROUP_TYPE_WORK, owner,
                   [(user, common_pb2.MEMBER_ROLE_MEMBER), (other, common_pb2.MEMBER_ROLE_MEMBER)]).group
    members.UpdateMemberInfo(member_pb2.UpdateMemberInfoRequest(
        group_id=group.group_id, user_id=other, update_mask=field_mask_pb2.FieldMask(paths=["name_card"]),
        name_card="Dr " + card), metadata=admin_md(), timeout=10)
    response = stub.SearchGroups(group_pb2.SearchGroupsRequest(
        keyword=card, fields=[group_pb2.SEARCH_FIELD_MEMBER_NAME_CARD]), metadata=user_md(user), timeout=10)
    assert [r.group.group_id for r in response.results] == [group.group_id]
    assert list(response.results[0].matched_fields) == [group_pb2.SEARCH_FIELD_MEMBER_NAME_CARD]
    assert [(m.user_id, m.name_card) for m in response.results[0].matched_members] == [(other, "Dr " + card)]
    expect_error(lambda: stub.SearchGroups(group_pb2.SearchGroupsRequest(keyword=""), metadata=user_md(user), timeout=10),
                 grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")


# Cross-app isolation: app-two's admin token against app-one's group. `operator`: the call acts for
# app-one's owner through x-operator-id (the RPC needs a user); else it is app-two's backend.
MASK = field_mask_pb2.FieldMask
CROSS_APP_CALLS = {
    "UpdateGroupProfile": (False, lambda g, m, gid, member, kw: g.UpdateGroupProfile(group_pb2.UpdateGroupProfileRequest(
        group_id=gid, update_mask=MASK(paths=["name"]), profile=common_pb2.GroupProfile(name="hijacked")), **kw)),
    "UpdateGroupSettings": (False, lambda g, m, gid, member, kw: g.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
        group_id=gid, update_mask=MASK(paths=["join_option"]),
        settings=common_pb2.GroupSettings(join_option=common_pb2.JOIN_OPTION_ANY)), **kw)),
    "DismissGroup": (False, lambda g, m, gid, member, kw: g.DismissGroup(group_pb2.DismissGroupRequest(group_id=gid), **kw)),
    "RevokeGroup": (False, lambda g, m, gid, member, kw: g.RevokeGroup(group_pb2.RevokeGroupRequest(group_id=gid), **kw)),
    "TransferOwnership": (True, lambda g, m, gid, member, kw: g.TransferOwnership(group_pb2.TransferOwnershipRequest(
        group_id=gid, new_owner_user_id=member), **kw)),
    "SetGroupMute": (False, lambda g, m, gid, member, kw: g.SetGroupMute(group_pb2.SetGroupMuteRequest(
        group_id=gid, muted=True, mode=common_pb2.GROUP_MUTE_MODE_ALL), **kw)),
    "JoinGroup": (True, lambda g, m, gid, member, kw: m.JoinGroup(member_pb2.JoinGroupRequest(group_id=gid), **kw)),
    "QuitGroup": (True, lambda g, m, gid, member, kw: m.QuitGroup(member_pb2.QuitGroupRequest(group_id=gid), **kw)),
    "InviteMembers": (False, lambda g, m, gid, member, kw: m.InviteMembers(member_pb2.InviteMembersRequest(
        group_id=gid, user_ids=["intruder"]), **kw)),
    "KickMembers": (False, lambda g, m, gid, member, kw: m.KickMembers(member_pb2.KickMembersRequest(
        group_id=gid, user_ids=[member]), **kw)),
    "ListMembers": (False, lambda g, m, gid, member, kw: m.ListMembers(member_pb2.ListMembersRequest(group_id=gid), **kw)),
    "GetMembersInfo": (False, lambda g, m, gid, member, kw: m.GetMembersInfo(member_pb2.GetMembersInfoRequest(
        group_id=gid, user_ids=[member]), **kw)),
    "GetSelfMemberInfo": (True, lambda g, m, gid, member, kw: m.GetSelfMemberInfo(member_pb2.GetSelfMemberInfoRequest(group_id=gid), **kw)),
    "SetMemberRole": (False, lambda g, m, gid, member, kw: m.SetMemberRole(member_pb2.SetMemberRoleRequest(
        group_id=gid, user_id=member, role=common_pb2.MEMBER_ROLE_ADMIN), **kw)),
    "MuteMembers": (False, lambda g, m, gid, member, kw: m.MuteMembers(member_pb2.MuteMembersRequest(
        group_id=gid, user_ids=[member], duration_seconds=60), **kw)),
    "UpdateMemberInfo": (False, lambda g, m, gid, member, kw: m.UpdateMemberInfo(member_pb2.UpdateMemberInfoRequest(
        group_id=gid, user_id=member, update_mask=MASK(paths=["name_card"]), name_card="hijacked"), **kw)),
    "SetReceiveMessageOption": (True, lambda g, m, gid, member, kw: m.SetReceiveMessageOption(
        member_pb2.SetReceiveMessageOptionRequest(group_id=gid, option=common_pb2.RECEIVE_MESSAGE_OPTION_NOT_RECEIVE), **kw)),
    "SetGroupRemark": (True, lambda g, m, gid, member, kw: m.SetGroupRemark(member_pb2.SetGroupRemarkRequest(
        group_id=gid, remark="hijacked"), **kw)),
}

# RPCs without a group to miss: they must neither see nor touch app-one's group.
CROSS_APP_READS = ["GetGroupsInfo", "ListJoinedGroups", "SearchGroups", "CreateGroup", "ImportGroup"]


def app_one_state(stub, members, group_id, owner):
    """Everything app-one's backend can read about the group and its owner's membership."""
    info = stub.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[group_id]), metadata=admin_md(), timeout=10)
    listed = members.ListMembers(member_pb2.ListMembersRequest(group_id=group_id), metadata=admin_md(), timeout=10)
    own = members.GetSelfMemberInfo(member_pb2.GetSelfMemberInfoRequest(group_id=group_id),
                                    metadata=admin_md(operator=owner), timeout=10)
    return info.SerializeToString(), listed.SerializeToString(), own.SerializeToString()


@pytest.mark.parametrize("rpc", sorted(CROSS_APP_CALLS) + CROSS_APP_READS)
def test_other_apps_admin_token_finds_nothing_and_changes_nothing(stub, members, rpc):
    owner, member = uid("owner"), uid("member")
    group = create(stub, common_pb2.GROUP_TYPE_PUBLIC, owner, [(member, common_pb2.MEMBER_ROLE_MEMBER)],
                   name=uid("name")).group
    before = app_one_state(stub, members, group.group_id, owner)
    other_backend = admin_md(app=OTHER_APP_ID, secret=OTHER_APP_SECRET)
    other_as_owner = admin_md(app=OTHER_APP_ID, secret=OTHER_APP_SECRET, operator=owner)
    if rpc in CROSS_APP_CALLS:
        needs_operator, call = CROSS_APP_CALLS[rpc]
        kwargs = {"metadata": other_as_owner if needs_operator else other_backend, "timeout": 10}
        with pytest.raises(grpc.RpcError) as caught:
            call(stub, members, group.group_id, member, kwargs)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND, caught.value
        assert error_info(caught.value).reason == "GROUP_NOT_FOUND"
    elif rpc == "GetGroupsInfo":
        assert lookup_failures(stub, group.group_id, other_backend) == [(group.group_id, "GROUP_NOT_FOUND")]
    elif rpc == "ListJoinedGroups":
        response = stub.ListJoinedGroups(group_pb2.ListJoinedGroupsRequest(), metadata=other_as_owner, timeout=10)
        assert not response.groups and response.total_count == 0
    elif rpc == "SearchGroups":
        for keyword in (group.group_id, group.profile.name):
            response = stub.SearchGroups(group_pb2.SearchGroupsRequest(keyword=keyword), metadata=other_backend, timeout=10)
            assert not response.results
    elif rpc == "CreateGroup":
        # Ids are per app: app-two may use the same id, for a group of its own.
        created = create(stub, common_pb2.GROUP_TYPE_PUBLIC, uid("x"), group_id=group.group_id, metadata=other_backend)
        assert created.group.group_id == group.group_id
    elif rpc == "ImportGroup":
        imported = stub.ImportGroup(group_pb2.ImportGroupRequest(
            group_id=group.group_id, type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id=uid("x"),
            profile=common_pb2.GroupProfile(name="theirs")), metadata=other_backend, timeout=10)
        assert imported.group.group_id == group.group_id
    assert app_one_state(stub, members, group.group_id, owner) == before

