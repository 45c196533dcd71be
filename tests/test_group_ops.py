"""UpdateGroupProfile, UpdateGroupSettings, TransferOwnership, SetGroupMute, ListJoinedGroups and
SearchGroups through a real groupd with stock grpcio: each RPC once, with its main error.
"""
import uuid

import grpc
import pytest
from google.protobuf import field_mask_pb2

from support import admin_md, error_info, expect_error, uid, user_md
from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc, member_pb2, member_pb2_grpc


@pytest.fixture
def stub(channel):
    return group_pb2_grpc.GroupServiceStub(channel)


@pytest.fixture
def members(channel):
    return member_pb2_grpc.MemberServiceStub(channel)


def create(stub, group_type, owner, members=(), name="team", group_id=None):
    request = group_pb2.CreateGroupRequest(
        group_id=group_id or uid("g"), type=group_type, owner_user_id=owner,
        profile=common_pb2.GroupProfile(name=name),
        members=[group_pb2.InitialMember(user_id=user, role=role) for user, role in members])
    return stub.CreateGroup(request, metadata=admin_md(), timeout=10).group


def mask(*paths):
    return field_mask_pb2.FieldMask(paths=list(paths))


def test_update_group_profile(stub):
    owner, member = uid("owner"), uid("member")
    group = create(stub, common_pb2.GROUP_TYPE_PUBLIC, owner, [(member, common_pb2.MEMBER_ROLE_MEMBER)])
    response = stub.UpdateGroupProfile(group_pb2.UpdateGroupProfileRequest(
        group_id=group.group_id, update_mask=mask("name", "custom.k"),
        profile=common_pb2.GroupProfile(name="renamed"), custom={"k": b"v"}), metadata=user_md(owner), timeout=10)
    assert response.group.profile.name == "renamed"
    assert response.group.custom["k"] == b"v"
    expect_error(lambda: stub.UpdateGroupProfile(group_pb2.UpdateGroupProfileRequest(
        group_id=group.group_id, update_mask=mask("name"), profile=common_pb2.GroupProfile(name="x")),
        metadata=user_md(member), timeout=10), grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    info = expect_error(lambda: stub.UpdateGroupProfile(group_pb2.UpdateGroupProfileRequest(
        group_id=group.group_id, update_mask=mask("name"), profile=common_pb2.GroupProfile(name="x" * 31)),
        metadata=user_md(owner), timeout=10), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "profile.name"


def test_update_group_settings(stub):
    owner = uid("owner")
    group = create(stub, common_pb2.GROUP_TYPE_PUBLIC, owner)
    response = stub.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
        group_id=group.group_id, update_mask=mask("join_option"),
        settings=common_pb2.GroupSettings(join_option=common_pb2.JOIN_OPTION_ANY)), metadata=user_md(owner), timeout=10)
    assert response.group.settings.join_option == common_pb2.JOIN_OPTION_ANY
    expect_error(lambda: stub.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
        group_id=group.group_id, update_mask=mask("max_member_count"), max_member_count=5),
        metadata=user_md(owner), timeout=10), grpc.StatusCode.PERMISSION_DENIED, "ADMIN_TOKEN_REQUIRED")
    work = create(stub, common_pb2.GROUP_TYPE_WORK, owner)
    expect_error(lambda: stub.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
        group_id=work.group_id, update_mask=mask("join_option"),
        settings=common_pb2.GroupSettings(join_option=common_pb2.JOIN_OPTION_ANY)), metadata=user_md(owner), timeout=10),
        grpc.StatusCode.FAILED_PRECONDITION, "SETTING_FIXED_BY_TYPE")


def test_transfer_ownership(stub):
    owner, heir = uid("owner"), uid("heir")
    group = create(stub, common_pb2.GROUP_TYPE_MEETING, owner, [(heir, common_pb2.MEMBER_ROLE_MEMBER)])
    response = stub.TransferOwnership(group_pb2.TransferOwnershipRequest(
        group_id=group.group_id, new_owner_user_id=heir, quit_after_transfer=True), metadata=user_md(owner), timeout=10)
    assert response.group.owner_user_id == heir
    assert response.group.member_count == 1
    expect_error(lambda: stub.TransferOwnership(group_pb2.TransferOwnershipRequest(
        group_id=group.group_id, new_owner_user_id=uid("ghost")), metadata=user_md(heir), timeout=10),
        grpc.StatusCode.NOT_FOUND, "MEMBER_NOT_FOUND")
    room = create(stub, common_pb2.GROUP_TYPE_AV_CHAT_ROOM, owner)
    expect_error(lambda: stub.TransferOwnership(group_pb2.TransferOwnershipRequest(
        group_id=room.group_id, new_owner_user_id=heir), metadata=user_md(owner), timeout=10),
        grpc.StatusCode.FAILED_PRECONDITION, "TRANSFER_NOT_SUPPORTED")


def test_set_group_mute(stub):
    owner, member = uid("owner"), uid("member")
    group = create(stub, common_pb2.GROUP_TYPE_PUBLIC, owner, [(member, common_pb2.MEMBER_ROLE_MEMBER)])
    response = stub.SetGroupMute(group_pb2.SetGroupMuteRequest(
        group_id=group.group_id, muted=True, mode=common_pb2.GROUP_MUTE_MODE_ALL, duration_seconds=30),
        metadata=user_md(owner), timeout=10)
    assert response.mute.mode == common_pb2.GROUP_MUTE_MODE_ALL
    assert response.mute.HasField("mute_until")
    expect_error(lambda: stub.SetGroupMute(group_pb2.SetGroupMuteRequest(group_id=group.group_id, muted=False),
                                           metadata=user_md(member), timeout=10),
                 grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")


def test_list_joined_groups(stub, members):
    user, owner = uid("user"), uid("owner")
    first = create(stub, common_pb2.GROUP_TYPE_WORK, owner, [(user, common_pb2.MEMBER_ROLE_MEMBER)])
    second = create(stub, common_pb2.GROUP_TYPE_PUBLIC, owner, [(user, common_pb2.MEMBER_ROLE_ADMIN)])
    members.SetGroupRemark(member_pb2.SetGroupRemarkRequest(group_id=first.group_id, remark="work"),
                           metadata=user_md(user), timeout=10)
    response = stub.ListJoinedGroups(group_pb2.ListJoinedGroupsRequest(), metadata=user_md(user), timeout=10)
    assert [g.group_id for g in response.groups] == [second.group_id, first.group_id]
    assert response.groups[0].self_info.role == common_pb2.MEMBER_ROLE_ADMIN
    assert response.groups[1].remark == "work"
    as_user = stub.ListJoinedGroups(group_pb2.ListJoinedGroupsRequest(page_size=1),
                                    metadata=admin_md(operator=user), timeout=10)
    assert len(as_user.groups) == 1 and as_user.next_page_token
    expect_error(lambda: stub.ListJoinedGroups(group_pb2.ListJoinedGroupsRequest(), metadata=admin_md(), timeout=10),
                 grpc.StatusCode.INVALID_ARGUMENT, "OPERATOR_REQUIRED")


def test_search_groups(stub):
    owner, stranger = uid("owner"), uid("stranger")
    word = uuid.uuid4().hex[:10]
    public = create(stub, common_pb2.GROUP_TYPE_PUBLIC, owner, name=f"fans {word}")
    create(stub, common_pb2.GROUP_TYPE_WORK, owner, name=f"work {word}")
    response = stub.SearchGroups(group_pb2.SearchGroupsRequest(keyword=word.upper()), metadata=user_md(stranger), timeout=10)
    assert [r.group.group_id for r in response.results] == [public.group_id]
    assert list(response.results[0].matched_fields) == [group_pb2.SEARCH_FIELD_NAME]
    mine = stub.SearchGroups(group_pb2.SearchGroupsRequest(keyword=word), metadata=user_md(owner), timeout=10)
    assert len(mine.results) == 2
    expect_error(lambda: stub.SearchGroups(group_pb2.SearchGroupsRequest(keyword=""), metadata=user_md(owner), timeout=10),
                 grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
