"""Every MemberService RPC through a real groupd with stock grpcio: each once, with its main error."""

import grpc
import pytest
from google.protobuf import field_mask_pb2

from support import admin_md, error_info, expect_error, uid, user_md
from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc, member_pb2, member_pb2_grpc


@pytest.fixture
def groups(channel):
    return group_pb2_grpc.GroupServiceStub(channel)


@pytest.fixture
def stub(channel):
    return member_pb2_grpc.MemberServiceStub(channel)


def create(groups, group_type, owner, members=()):
    request = group_pb2.CreateGroupRequest(
        group_id=uid("g"), type=group_type, owner_user_id=owner, profile=common_pb2.GroupProfile(name="team"),
        members=[group_pb2.InitialMember(user_id=user, role=role) for user, role in members])
    return groups.CreateGroup(request, metadata=admin_md(), timeout=10).group.group_id


@pytest.fixture
def public(groups):
    """A Public group: owner, an admin and an ordinary member (fresh user ids)."""
    owner, admin, member = uid("owner"), uid("admin"), uid("member")
    gid = create(groups, common_pb2.GROUP_TYPE_PUBLIC, owner,
                 [(admin, common_pb2.MEMBER_ROLE_ADMIN), (member, common_pb2.MEMBER_ROLE_MEMBER)])
    return gid, owner, admin, member


def test_join_group(groups, stub, public):
    meeting = create(groups, common_pb2.GROUP_TYPE_MEETING, uid("owner"))
    user = uid("user")
    joined = stub.JoinGroup(member_pb2.JoinGroupRequest(group_id=meeting), metadata=user_md(user), timeout=10)
    assert joined.outcome == member_pb2.JOIN_OUTCOME_JOINED and joined.member.user_id == user
    pending = stub.JoinGroup(member_pb2.JoinGroupRequest(group_id=public[0], message="hi"), metadata=user_md(user), timeout=10)
    assert pending.outcome == member_pb2.JOIN_OUTCOME_PENDING_APPROVAL
    expect_error(lambda: stub.JoinGroup(member_pb2.JoinGroupRequest(group_id=meeting), metadata=user_md(user), timeout=10),
                 grpc.StatusCode.ALREADY_EXISTS, "ALREADY_MEMBER")
    work = create(groups, common_pb2.GROUP_TYPE_WORK, uid("owner"))
    expect_error(lambda: stub.JoinGroup(member_pb2.JoinGroupRequest(group_id=work), metadata=user_md(user), timeout=10),
                 grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")


def test_quit_group(stub, public):
    gid, owner, _, member = public
    response = stub.QuitGroup(member_pb2.QuitGroupRequest(group_id=gid), metadata=user_md(member), timeout=10)
    assert not response.group_dismissed
    expect_error(lambda: stub.QuitGroup(member_pb2.QuitGroupRequest(group_id=gid), metadata=user_md(owner), timeout=10),
                 grpc.StatusCode.FAILED_PRECONDITION, "OWNER_CANNOT_QUIT")


def test_invite_members(groups, stub, public):
    owner, member = uid("owner"), uid("member")
    work = create(groups, common_pb2.GROUP_TYPE_WORK, owner, [(member, common_pb2.MEMBER_ROLE_MEMBER)])
    new = uid("new")
    response = stub.InviteMembers(member_pb2.InviteMembersRequest(group_id=work, user_ids=[new, owner]),
                                  metadata=user_md(member), timeout=10)
    assert [r.result for r in response.results] == [common_pb2.MEMBER_RESULT_CODE_SUCCESS,
                                                    common_pb2.MEMBER_RESULT_CODE_ALREADY_MEMBER]
    expect_error(lambda: stub.InviteMembers(member_pb2.InviteMembersRequest(group_id=public[0], user_ids=[new]),
                                            metadata=user_md(public[3]), timeout=10),
                 grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")


def test_kick_members(groups, stub, public):
    gid, owner, admin, member = public
    response = stub.KickMembers(member_pb2.KickMembersRequest(group_id=gid, user_ids=[owner, member], reason="bye"),
                                metadata=user_md(admin), timeout=10)
    assert [r.result for r in response.results] == [common_pb2.MEMBER_RESULT_CODE_FAILED,
                                                    common_pb2.MEMBER_RESULT_CODE_SUCCESS]
    assert response.results[0].reason == "TARGET_IS_OWNER"
    room_owner = uid("host")
    room = create(groups, common_pb2.GROUP_TYPE_AV_CHAT_ROOM, room_owner)
    expect_error(lambda: stub.KickMembers(member_pb2.KickMembersRequest(group_id=room, user_ids=[admin]),
                                          metadata=user_md(room_owner), timeout=10),
                 grpc.StatusCode.FAILED_PRECONDITION, "KICK_NOT_SUPPORTED")


def test_list_members(groups, stub, public):
    gid, owner, admin, member = public
    first = stub.ListMembers(member_pb2.ListMembersRequest(group_id=gid, page_size=2), metadata=user_md(member), timeout=10)
    assert [m.user_id for m in first.members] == [owner, admin] and first.member_count == 3
    rest = stub.ListMembers(member_pb2.ListMembersRequest(group_id=gid, page_size=2, page_token=first.next_page_token),
                            metadata=user_md(member), timeout=10)
    assert [m.user_id for m in rest.members] == [member] and rest.next_page_token == ""
    owners = stub.ListMembers(member_pb2.ListMembersRequest(group_id=gid, filter=member_pb2.MEMBER_FILTER_OWNER),
                              metadata=user_md(member), timeout=10)
    assert [m.user_id for m in owners.members] == [owner]
    work = create(groups, common_pb2.GROUP_TYPE_WORK, owner)
    expect_error(lambda: stub.ListMembers(member_pb2.ListMembersRequest(group_id=work), metadata=user_md(member), timeout=10),
                 grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")


def test_get_members_info(stub, public):
    gid, _, admin, member = public
    response = stub.GetMembersInfo(member_pb2.GetMembersInfoRequest(group_id=gid, user_ids=[admin, uid("ghost")]),
                                   metadata=user_md(member), timeout=10)
    assert [r.result for r in response.results] == [common_pb2.MEMBER_RESULT_CODE_SUCCESS,
                                                    common_pb2.MEMBER_RESULT_CODE_NOT_MEMBER]
    assert response.results[0].member.role == common_pb2.MEMBER_ROLE_ADMIN
    expect_error(lambda: stub.GetMembersInfo(member_pb2.GetMembersInfoRequest(group_id=gid), metadata=user_md(member), timeout=10),
                 grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")


def test_get_self_member_info(stub, public):
    gid, _, _, member = public
    response = stub.GetSelfMemberInfo(member_pb2.GetSelfMemberInfoRequest(group_id=gid), metadata=user_md(member), timeout=10)
    assert response.member.user_id == member
    expect_error(lambda: stub.GetSelfMemberInfo(member_pb2.GetSelfMemberInfoRequest(group_id=gid),
                                                metadata=user_md(uid("stranger")), timeout=10),
                 grpc.StatusCode.PERMISSION_DENIED, "NOT_A_MEMBER")


def test_set_member_role(stub, public):
    gid, owner, admin, member = public
    response = stub.SetMemberRole(member_pb2.SetMemberRoleRequest(group_id=gid, user_id=member, role=common_pb2.MEMBER_ROLE_ADMIN),
                                  metadata=user_md(owner), timeout=10)
    assert response.member.role == common_pb2.MEMBER_ROLE_ADMIN
    expect_error(lambda: stub.SetMemberRole(member_pb2.SetMemberRoleRequest(group_id=gid, user_id=member, role=common_pb2.MEMBER_ROLE_MEMBER),
                                            metadata=user_md(admin), timeout=10),
                 grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")


def test_mute_members(stub, public):
    gid, owner, admin, member = public
    response = stub.MuteMembers(member_pb2.MuteMembersRequest(group_id=gid, user_ids=[member], duration_seconds=120),
                                metadata=user_md(admin), timeout=10)
    assert response.results[0].result == common_pb2.MEMBER_RESULT_CODE_SUCCESS
    assert response.results[0].member.mute_until.seconds > 0
    expect_error(lambda: stub.MuteMembers(member_pb2.MuteMembersRequest(group_id=gid, user_ids=[admin], duration_seconds=5),
                                          metadata=user_md(member), timeout=10),
                 grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")


def test_update_member_info(stub, public):
    gid, _, admin, member = public
    response = stub.UpdateMemberInfo(member_pb2.UpdateMemberInfoRequest(
        group_id=gid, update_mask=field_mask_pb2.FieldMask(paths=["name_card"]), name_card="Card"),
        metadata=user_md(member), timeout=10)
    assert response.member.name_card == "Card"
    info = expect_error(lambda: stub.UpdateMemberInfo(member_pb2.UpdateMemberInfoRequest(
        group_id=gid, update_mask=field_mask_pb2.FieldMask(paths=["name_card"]), name_card="x" * 51),
        metadata=user_md(member), timeout=10), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "name_card"


def test_set_receive_message_option(stub, public):
    gid, _, _, member = public
    stub.SetReceiveMessageOption(member_pb2.SetReceiveMessageOptionRequest(
        group_id=gid, option=common_pb2.RECEIVE_MESSAGE_OPTION_NOT_RECEIVE), metadata=user_md(member), timeout=10)
    me = stub.GetSelfMemberInfo(member_pb2.GetSelfMemberInfoRequest(group_id=gid), metadata=user_md(member), timeout=10)
    assert me.member.receive_message_option == common_pb2.RECEIVE_MESSAGE_OPTION_NOT_RECEIVE
    expect_error(lambda: stub.SetReceiveMessageOption(member_pb2.SetReceiveMessageOptionRequest(group_id=gid),
                                                      metadata=user_md(member), timeout=10),
                 grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")


def test_set_group_remark(stub, public):
    gid, _, _, member = public
    stub.SetGroupRemark(member_pb2.SetGroupRemarkRequest(group_id=gid, remark="mine"), metadata=user_md(member), timeout=10)
    me = stub.GetSelfMemberInfo(member_pb2.GetSelfMemberInfoRequest(group_id=gid), metadata=user_md(member), timeout=10)
    assert me.remark == "mine"
    expect_error(lambda: stub.SetGroupRemark(member_pb2.SetGroupRemarkRequest(group_id=gid, remark="x" * 65),
                                             metadata=user_md(member), timeout=10),
                 grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")


def test_av_chat_room_audience(groups, stub):
    host = uid("host")
    room = create(groups, common_pb2.GROUP_TYPE_AV_CHAT_ROOM, host)
    audience = [uid("viewer") for _ in range(3)]
    for user in audience:
        stub.JoinGroup(member_pb2.JoinGroupRequest(group_id=room), metadata=user_md(user), timeout=10)
    listed = stub.ListMembers(member_pb2.ListMembersRequest(group_id=room), metadata=user_md(audience[0]), timeout=10)
    assert [m.user_id for m in listed.members] == [host] + audience[::-1]
    assert listed.member_count == 4
    stub.QuitGroup(member_pb2.QuitGroupRequest(group_id=room), metadata=user_md(audience[1]), timeout=10)
    read = groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[room]), metadata=admin_md(), timeout=10)
    assert read.groups[0].member_count == 3
