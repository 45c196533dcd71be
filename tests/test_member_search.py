"""SearchMembers through a real groupd with stock grpcio: user id prefix (an index range, byte for
byte) and name card substring, paged, with who may search and every refusal."""

import grpc
import pytest
from google.protobuf import field_mask_pb2

from support import admin_md, expect_error, uid, user_md
from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc, member_pb2, member_pb2_grpc

PREFIX = member_pb2.MEMBER_SEARCH_FIELD_USER_ID_PREFIX
NAME_CARD = member_pb2.MEMBER_SEARCH_FIELD_NAME_CARD


@pytest.fixture
def groups(channel):
    return group_pb2_grpc.GroupServiceStub(channel)


@pytest.fixture
def members(channel):
    return member_pb2_grpc.MemberServiceStub(channel)


def create(groups, group_type, owner, users=()):
    request = group_pb2.CreateGroupRequest(
        group_id=uid("g"), type=group_type, owner_user_id=owner, profile=common_pb2.GroupProfile(name="team"),
        members=[group_pb2.InitialMember(user_id=user, role=common_pb2.MEMBER_ROLE_MEMBER) for user in users])
    return groups.CreateGroup(request, metadata=admin_md(), timeout=10).group.group_id


def search(members, gid, keyword, by, md, page_size=0):
    """Every page of a search: (user ids in order, pages)."""
    found, token, pages = [], "", 0
    while True:
        answer = members.SearchMembers(member_pb2.SearchMembersRequest(
            group_id=gid, keyword=keyword, by=by, page_size=page_size, page_token=token), metadata=md, timeout=10)
        found += [m.user_id for m in answer.members]
        pages += 1
        token = answer.next_page_token
        if not token:
            return found, pages


def test_search_members_by_user_id_prefix(groups, members):
    tag = uid("t")
    owner = f"{tag}-owner"
    users = [f"{tag}-ann", f"{tag}-anna", f"{tag}-bob", f"{tag}-a%", f"{tag}-a_"]
    gid = create(groups, common_pb2.GROUP_TYPE_PUBLIC, owner, users)
    found, pages = search(members, gid, f"{tag}-an", PREFIX, user_md(owner), page_size=1)
    assert found == [f"{tag}-ann", f"{tag}-anna"] and pages == 2
    # `%` and `_` are ordinary characters; the order is the user ids' byte order.
    assert search(members, gid, f"{tag}-a%", PREFIX, user_md(owner))[0] == [f"{tag}-a%"]
    assert search(members, gid, f"{tag}-a", PREFIX, user_md(owner))[0] == sorted(
        [f"{tag}-a%", f"{tag}-a_", f"{tag}-ann", f"{tag}-anna"], key=lambda s: s.encode())
    assert search(members, gid, "nobody-", PREFIX, user_md(owner))[0] == []
    # The records are full members.
    answer = members.SearchMembers(member_pb2.SearchMembersRequest(group_id=gid, keyword=owner, by=PREFIX),
                                   metadata=user_md(owner), timeout=10)
    assert answer.members[0].role == common_pb2.MEMBER_ROLE_OWNER


def test_search_members_by_name_card(groups, members):
    owner, alice, bob, carol = uid("owner"), uid("alice"), uid("bob"), uid("carol")
    gid = create(groups, common_pb2.GROUP_TYPE_PUBLIC, owner, [alice, bob, carol])
    for user, card in [(alice, "Team Lead"), (bob, "lead designer"), (carol, "intern")]:
        members.UpdateMemberInfo(member_pb2.UpdateMemberInfoRequest(
            group_id=gid, update_mask=field_mask_pb2.FieldMask(paths=["name_card"]), name_card=card),
            metadata=user_md(user), timeout=10)
    # Case-insensitive substring, in join order, paged.
    found, pages = search(members, gid, "LEAD", NAME_CARD, user_md(carol), page_size=1)
    assert found == [alice, bob] and pages == 2
    assert search(members, gid, "%", NAME_CARD, user_md(carol))[0] == []
    assert search(members, gid, "intern", NAME_CARD, admin_md())[0] == [carol]


def test_search_members_refusals(groups, members):
    owner, member, outsider = uid("owner"), uid("member"), uid("outsider")
    gid = create(groups, common_pb2.GROUP_TYPE_PUBLIC, owner, [member])

    def call(md=None, **fields):
        request = dict(group_id=gid, keyword="x", by=PREFIX)
        request.update(fields)
        return lambda: members.SearchMembers(member_pb2.SearchMembersRequest(**request), metadata=md or user_md(owner),
                                             timeout=10)

    expect_error(call(md=user_md(outsider)), grpc.StatusCode.PERMISSION_DENIED, "NOT_A_MEMBER")
    expect_error(call(group_id=uid("none")), grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")
    work = create(groups, common_pb2.GROUP_TYPE_WORK, owner)
    expect_error(call(group_id=work, md=user_md(outsider)), grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")
    for fields, field in [({"keyword": ""}, "keyword"), ({"keyword": "k" * 49}, "keyword"),
                          ({"by": member_pb2.MEMBER_SEARCH_FIELD_UNSPECIFIED}, "by"), ({"page_size": -1}, "page_size"),
                          ({"page_token": "zz"}, "page_token"), ({"page_token": "u0"}, "page_token"),
                          ({"by": NAME_CARD, "page_token": "1.2"}, "page_token")]:
        info = expect_error(call(**fields), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
        assert info.metadata["field"] == field, fields
    room = create(groups, common_pb2.GROUP_TYPE_AV_CHAT_ROOM, owner)
    expect_error(call(group_id=room, md=admin_md()), grpc.StatusCode.FAILED_PRECONDITION, "MEMBERS_NOT_STORED")
    # A 48-byte keyword is accepted.
    assert search(members, gid, "k" * 48, PREFIX, user_md(member))[0] == []
