"""The contract: what the comments of Protos/groupd/v1/*.proto promise, checked against a real groupd.

Every row of the table below is one behavioural sentence of a proto comment (an error's status and
reason, which fields are filled for whom, a limit, an order, paging) and a check that runs the
promise through grpcio. Two tests run per row:

  - `test_the_proto_still_says_it`: the quoted sentence still appears in that proto file's comments
    (compared with runs of whitespace and the `//` markers folded, so re-wrapping a comment keeps
    the quote valid). Rewording a promise fails here until the row is updated with it.
  - `test_groupd_keeps_it`: the check passes against the shared groupd of the interop suite.

Adding a row: find the sentence in the proto comment, then write

    @promise("member.proto", "a short, exact quote of the sentence")
    def _(api):
        ...  # call groupd through `api` and assert what the sentence says

`api` holds one stub per service (`api.groups`, `api.members`, `api.applications`, `api.messages`)
and helpers for fresh groups and users (`api.group(...)`, `uid`). A check makes its own groups
with fresh ids, so rows never depend on each other. Use `expect_error(call, code, reason)` for
errors. The quote should be the shortest text that pins the promise down: when the proto changes
what it promises, the quote stops matching and the row has to be looked at again.
"""
import re
import threading
from dataclasses import dataclass
from typing import Callable

import grpc
import pytest
from google.protobuf import field_mask_pb2

from support import (PROTOS, OTHER_APP_ID, OTHER_APP_SECRET, EventStream, admin_md, api_channel, error_info,
                     expect_error, mint_token, uid, user_md)
from groupd.v1 import (application_pb2, application_pb2_grpc, common_pb2, event_pb2, group_pb2,
                       group_pb2_grpc, member_pb2, member_pb2_grpc, message_pb2, message_pb2_grpc)

TIMEOUT = 10
NOT_FOUND, DENIED, INVALID = grpc.StatusCode.NOT_FOUND, grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.INVALID_ARGUMENT
PRECONDITION, UNAUTHENTICATED = grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNAUTHENTICATED
WORK, PUBLIC, MEETING, AVCHAT = (common_pb2.GROUP_TYPE_WORK, common_pb2.GROUP_TYPE_PUBLIC, common_pb2.GROUP_TYPE_MEETING,
                                 common_pb2.GROUP_TYPE_AV_CHAT_ROOM)
COMMUNITY = common_pb2.GROUP_TYPE_COMMUNITY
ADMIN, MEMBER, OWNER = common_pb2.MEMBER_ROLE_ADMIN, common_pb2.MEMBER_ROLE_MEMBER, common_pb2.MEMBER_ROLE_OWNER
SUCCESS, FAILED = common_pb2.MEMBER_RESULT_CODE_SUCCESS, common_pb2.MEMBER_RESULT_CODE_FAILED


@dataclass
class Promise:
    proto: str
    quote: str
    check: Callable

    @property
    def id(self):
        return f"{self.proto}: {self.quote[:60]}"


CONTRACT: list[Promise] = []


def promise(proto, quote):
    """Registers the decorated check as the proof of `quote` in Protos/groupd/v1/`proto`."""
    def register(check):
        CONTRACT.append(Promise(proto, quote, check))
        return check
    return register


def fold(text):
    return re.sub(r"\s+", " ", text).strip()


def comments(proto):
    """The comment text of a proto file, `//` markers removed and whitespace folded."""
    lines = (PROTOS / "groupd" / "v1" / proto).read_text().splitlines()
    return fold(" ".join(line.split("//", 1)[1] for line in lines if "//" in line))


class API:
    """The stubs of the checks, on the interop suite's shared groupd, and a few builders."""

    def __init__(self, channel):
        self.channel = channel
        self.groups = group_pb2_grpc.GroupServiceStub(channel)
        self.members = member_pb2_grpc.MemberServiceStub(channel)
        self.applications = application_pb2_grpc.ApplicationServiceStub(channel)
        self.messages = message_pb2_grpc.MessageServiceStub(channel)

    def group(self, group_type=PUBLIC, owner=None, members=(), admins=(), **fields):
        """Creates a group with the admin token; returns (group id, owner)."""
        owner = uid("owner") if owner is None else owner
        initial = [group_pb2.InitialMember(user_id=u, role=ADMIN) for u in admins]
        initial += [group_pb2.InitialMember(user_id=u, role=MEMBER) for u in members]
        fields.setdefault("profile", common_pb2.GroupProfile(name="contract"))
        created = self.groups.CreateGroup(group_pb2.CreateGroupRequest(
            group_id=uid("g"), type=group_type, owner_user_id=owner, members=initial, **fields),
            metadata=admin_md(), timeout=TIMEOUT)
        return created.group.group_id, owner

    def send(self, gid, sender, text="hi", **fields):
        return self.messages.SendGroupMessage(message_pb2.SendGroupMessageRequest(group_id=gid, text=text, **fields),
                                              metadata=user_md(sender), timeout=TIMEOUT)

    def info(self, gids, caller=None):
        md = user_md(caller) if caller else admin_md()
        return self.groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=gids), metadata=md, timeout=TIMEOUT)


def mask(*paths):
    return field_mask_pb2.FieldMask(paths=list(paths))


# ----------------------------------------------------------------------------------------------
# common.proto: the conventions of every RPC
# ----------------------------------------------------------------------------------------------

@promise("common.proto", "Missing, malformed, wrongly signed or expired tokens fail with UNAUTHENTICATED")
def _(api):
    request = group_pb2.GetGroupsInfoRequest(group_ids=["x"])
    for metadata, reason in [
        ([], "TOKEN_MISSING"),
        ([("authorization", "Bearer not.a.token")], "TOKEN_MALFORMED"),
        ([("authorization", "Bearer " + mint_token(secret="a-different-secret-of-at-least-32-bytes"))],
         "TOKEN_BAD_SIGNATURE"),
        ([("authorization", "Bearer " + mint_token(exp_in=-3600))], "TOKEN_EXPIRED"),
    ]:
        expect_error(lambda: api.groups.GetGroupsInfo(request, metadata=metadata, timeout=TIMEOUT),
                     UNAUTHENTICATED, reason)


@promise("common.proto", "OPERATOR_OVERRIDE_FORBIDDEN (PERMISSION_DENIED): a user token sent `x-operator-id` for another user.")
def _(api):
    gid, owner = api.group()
    md = user_md(owner) + [("x-operator-id", uid("someone"))]
    expect_error(lambda: api.groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[gid]), metadata=md,
                                                  timeout=TIMEOUT), DENIED, "OPERATOR_OVERRIDE_FORBIDDEN")


@promise("common.proto", "GROUP_NOT_FOUND (NOT_FOUND): no such group in the caller's app, or a Work group the caller is not a member of.")
def _(api):
    gid, _ = api.group(PUBLIC)
    other_app = [("authorization", "Bearer " + mint_token(app=OTHER_APP_ID, secret=OTHER_APP_SECRET))]
    expect_error(lambda: api.members.ListMembers(member_pb2.ListMembersRequest(group_id=gid), metadata=other_app,
                                                 timeout=TIMEOUT), NOT_FOUND, "GROUP_NOT_FOUND")
    work, _ = api.group(WORK)
    expect_error(lambda: api.members.ListMembers(member_pb2.ListMembersRequest(group_id=work),
                                                 metadata=user_md(uid("stranger")), timeout=TIMEOUT),
                 NOT_FOUND, "GROUP_NOT_FOUND")


@promise("common.proto", "a field is malformed or over its limit; metadata `field` names it and `limit` gives the limit. Nothing was changed.")
def _(api):
    gid = uid("g")
    request = group_pb2.CreateGroupRequest(group_id=gid, type=PUBLIC, owner_user_id=uid("owner"),
                                           profile=common_pb2.GroupProfile(name="n" * 31))
    info = expect_error(lambda: api.groups.CreateGroup(request, metadata=admin_md(), timeout=TIMEOUT),
                        INVALID, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "profile.name" and info.metadata["limit"] == "30", info
    assert [f.error for f in api.info([gid]).failures] == [group_pb2.GROUP_LOOKUP_ERROR_NOT_FOUND]


@promise("common.proto", "GROUP_ID_TAKEN (ALREADY_EXISTS): CreateGroup/ImportGroup with a used id.")
def _(api):
    gid, _ = api.group()
    again = group_pb2.CreateGroupRequest(group_id=gid, type=PUBLIC, owner_user_id=uid("owner"),
                                         profile=common_pb2.GroupProfile(name="again"))
    expect_error(lambda: api.groups.CreateGroup(again, metadata=admin_md(), timeout=TIMEOUT),
                 grpc.StatusCode.ALREADY_EXISTS, "GROUP_ID_TAKEN")
    imported = group_pb2.ImportGroupRequest(group_id=gid, type=PUBLIC, owner_user_id=uid("owner"),
                                            profile=common_pb2.GroupProfile(name="again"))
    expect_error(lambda: api.groups.ImportGroup(imported, metadata=admin_md(), timeout=TIMEOUT),
                 grpc.StatusCode.ALREADY_EXISTS, "GROUP_ID_TAKEN")


@promise("common.proto", "OPERATOR_REQUIRED (INVALID_ARGUMENT): an admin token must name the user it acts for (`x-operator-id`) for this operation.")
def _(api):
    gid, _ = api.group(MEETING)
    expect_error(lambda: api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=gid), metadata=admin_md(),
                                               timeout=TIMEOUT), INVALID, "OPERATOR_REQUIRED")
    joined = api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=gid), metadata=admin_md(operator="u-acting"),
                                   timeout=TIMEOUT)
    assert joined.member.user_id == "u-acting"


@promise("common.proto", "ADMIN_TOKEN_REQUIRED (PERMISSION_DENIED): RPC or option for the backend.")
def _(api):
    gid, owner = api.group()
    expect_error(lambda: api.groups.RevokeGroup(group_pb2.RevokeGroupRequest(group_id=gid), metadata=user_md(owner),
                                                timeout=TIMEOUT), DENIED, "ADMIN_TOKEN_REQUIRED")


@promise("common.proto", "Batch calls (invite, kick, mute, members info) answer one MemberResult per user and fail as a whole only when the request itself is wrong.")
def _(api):
    member, stranger = uid("m"), uid("stranger")
    gid, owner = api.group(members=[member])
    results = api.members.GetMembersInfo(member_pb2.GetMembersInfoRequest(group_id=gid, user_ids=[member, stranger]),
                                         metadata=user_md(owner), timeout=TIMEOUT).results
    assert [(r.user_id, r.result) for r in results] == [(member, SUCCESS),
                                                        (stranger, common_pb2.MEMBER_RESULT_CODE_NOT_MEMBER)]
    expect_error(lambda: api.members.GetMembersInfo(member_pb2.GetMembersInfoRequest(group_id=gid),
                                                    metadata=user_md(owner), timeout=TIMEOUT), INVALID, "INVALID_ARGUMENT")


@promise("common.proto", "Paging: `page_size` (0 = the RPC's default, above the maximum = the maximum, negative = INVALID_ARGUMENT)")
def _(api):
    gid, owner = api.group(members=[uid("m") for _ in range(55)])
    page = api.members.ListMembers(member_pb2.ListMembersRequest(group_id=gid, page_size=1000), metadata=user_md(owner),
                                   timeout=TIMEOUT)
    assert len(page.members) == 50 and page.next_page_token
    default = api.members.ListMembers(member_pb2.ListMembersRequest(group_id=gid), metadata=user_md(owner), timeout=TIMEOUT)
    assert len(default.members) == 50
    info = expect_error(lambda: api.members.ListMembers(member_pb2.ListMembersRequest(group_id=gid, page_size=-1),
                                                        metadata=user_md(owner), timeout=TIMEOUT), INVALID, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "page_size"


@promise("common.proto", "a token from another request shape is INVALID_ARGUMENT")
def _(api):
    gid, owner = api.group(members=[uid("m") for _ in range(3)])
    for _ in range(2):
        api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=gid), metadata=user_md(uid("u")), timeout=TIMEOUT)
    applications = api.applications.ListApplications(application_pb2.ListApplicationsRequest(group_id=gid, page_size=1),
                                                     metadata=user_md(owner), timeout=TIMEOUT)
    assert applications.next_page_token
    for token in (applications.next_page_token, "not-a-token"):
        info = expect_error(lambda: api.members.ListMembers(member_pb2.ListMembersRequest(
            group_id=gid, page_size=2, page_token=token), metadata=user_md(owner), timeout=TIMEOUT),
            INVALID, "INVALID_ARGUMENT")
        assert info.metadata["field"] == "page_token"


@promise("common.proto", "Limits (per app, these defaults): group name 30 bytes, introduction 120, notification (announcement) 150, face URL 100, name card 50, application message 100.")
def _(api):
    for field, limit in [("name", 30), ("introduction", 120), ("notification", 150), ("face_url", 100)]:
        profile = {"name": "n", field: "x" * limit}
        api.group(profile=common_pb2.GroupProfile(**profile))
        profile[field] = "x" * (limit + 1)
        request = group_pb2.CreateGroupRequest(group_id=uid("g"), type=PUBLIC, owner_user_id=uid("o"),
                                               profile=common_pb2.GroupProfile(**profile))
        info = expect_error(lambda: api.groups.CreateGroup(request, metadata=admin_md(), timeout=TIMEOUT),
                            INVALID, "INVALID_ARGUMENT")
        assert info.metadata["field"] == "profile." + field and info.metadata["limit"] == str(limit)
    member = uid("m")
    gid, _ = api.group(members=[member])
    update = lambda card: api.members.UpdateMemberInfo(member_pb2.UpdateMemberInfoRequest(
        group_id=gid, update_mask=mask("name_card"), name_card=card), metadata=user_md(member), timeout=TIMEOUT)
    assert update("c" * 50).member.name_card == "c" * 50
    assert expect_error(lambda: update("c" * 51), INVALID, "INVALID_ARGUMENT").metadata["limit"] == "50"
    join = lambda text: api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=gid, message=text),
                                              metadata=user_md(uid("applicant")), timeout=TIMEOUT)
    assert join("a" * 100).outcome == member_pb2.JOIN_OUTCOME_PENDING_APPROVAL
    assert expect_error(lambda: join("a" * 101), INVALID, "INVALID_ARGUMENT").metadata["limit"] == "100"


@promise("common.proto", "Custom group id: 1-48 bytes of ASCII letters, digits and !#$%&()+-:;<=.>?@[]^_{}|~, not starting with `#` or `@TGS#`.")
def _(api):
    def create(group_id):
        return api.groups.CreateGroup(group_pb2.CreateGroupRequest(
            group_id=group_id, type=PUBLIC, owner_user_id=uid("o"), profile=common_pb2.GroupProfile(name="n")),
            metadata=admin_md(), timeout=TIMEOUT)
    long_id = (uid("g") + "!#$%&()+-:;<=.>?@[]^_{}|~" + "x" * 48)[:48]
    assert create(long_id).group.group_id == long_id
    for bad in [long_id + "y", "#" + uid("g"), "@TGS#" + uid("g"), uid("g") + " space", uid("g") + "é"]:
        info = expect_error(lambda: create(bad), INVALID, "INVALID_ARGUMENT")
        assert info.metadata["field"] == "group_id"


# ----------------------------------------------------------------------------------------------
# group.proto
# ----------------------------------------------------------------------------------------------

@promise("group.proto", "Creates a group owned by the operator, who joins as OWNER")
def _(api):
    creator = uid("creator")
    created = api.groups.CreateGroup(group_pb2.CreateGroupRequest(
        type=PUBLIC, profile=common_pb2.GroupProfile(name="mine")), metadata=user_md(creator), timeout=TIMEOUT)
    assert created.group.owner_user_id == creator
    me = api.members.GetSelfMemberInfo(member_pb2.GetSelfMemberInfoRequest(group_id=created.group.group_id),
                                       metadata=user_md(creator), timeout=TIMEOUT).member
    assert me.role == OWNER and me.join_source == common_pb2.JOIN_SOURCE_CREATOR


@promise("group.proto", "Any user may call it; `owner_user_id` needs an admin token.")
def _(api):
    request = group_pb2.CreateGroupRequest(type=PUBLIC, owner_user_id=uid("other"),
                                           profile=common_pb2.GroupProfile(name="n"))
    info = expect_error(lambda: api.groups.CreateGroup(request, metadata=user_md(uid("u")), timeout=TIMEOUT),
                        DENIED, "ADMIN_TOKEN_REQUIRED")
    assert info.metadata["field"] == "owner_user_id"


@promise("group.proto", "empty = the server generates an `@TGS#...` id.")
def _(api):
    created = api.groups.CreateGroup(group_pb2.CreateGroupRequest(
        type=PUBLIC, owner_user_id=uid("o"), profile=common_pb2.GroupProfile(name="n")), metadata=admin_md(), timeout=TIMEOUT)
    assert created.group.group_id.startswith("@TGS#")


@promise("group.proto", "The type; legacy PRIVATE/CHAT_ROOM accepted. UNSPECIFIED is INVALID_ARGUMENT.")
def _(api):
    request = group_pb2.CreateGroupRequest(owner_user_id=uid("o"), profile=common_pb2.GroupProfile(name="n"))
    assert expect_error(lambda: api.groups.CreateGroup(request, metadata=admin_md(), timeout=TIMEOUT),
                        INVALID, "INVALID_ARGUMENT").metadata["field"] == "type"


@promise("group.proto", "The profile; `name` is required (non-empty).")
def _(api):
    request = group_pb2.CreateGroupRequest(type=PUBLIC, owner_user_id=uid("o"), profile=common_pb2.GroupProfile())
    assert expect_error(lambda: api.groups.CreateGroup(request, metadata=admin_md(), timeout=TIMEOUT),
                        INVALID, "INVALID_ARGUMENT").metadata["field"] == "profile.name"


@promise("group.proto", "an empty owner creates an ownerless AVChatRoom (other types require an owner: INVALID_ARGUMENT)")
def _(api):
    room = api.groups.CreateGroup(group_pb2.CreateGroupRequest(type=AVCHAT, profile=common_pb2.GroupProfile(name="live")),
                                  metadata=admin_md(), timeout=TIMEOUT).group
    assert room.owner_user_id == "" and room.type == AVCHAT
    for group_type in (WORK, PUBLIC, MEETING):
        request = group_pb2.CreateGroupRequest(type=group_type, profile=common_pb2.GroupProfile(name="n"))
        expect_error(lambda: api.groups.CreateGroup(request, metadata=admin_md(), timeout=TIMEOUT),
                     INVALID, "INVALID_ARGUMENT")


@promise("group.proto", "OWNER is INVALID_ARGUMENT (the owner is the operator or owner_user_id).")
def _(api):
    request = group_pb2.CreateGroupRequest(type=PUBLIC, owner_user_id=uid("o"), profile=common_pb2.GroupProfile(name="n"),
                                           members=[group_pb2.InitialMember(user_id=uid("m"), role=OWNER)])
    assert expect_error(lambda: api.groups.CreateGroup(request, metadata=admin_md(), timeout=TIMEOUT),
                        INVALID, "INVALID_ARGUMENT").metadata["field"] == "members[0].role"


@promise("group.proto", "0 = the app's default for the type; above the app's limit is INVALID_ARGUMENT.")
def _(api):
    gid, _ = api.group()
    assert api.info([gid]).groups[0].max_member_count > 0
    request = group_pb2.CreateGroupRequest(type=PUBLIC, owner_user_id=uid("o"), profile=common_pb2.GroupProfile(name="n"),
                                           max_member_count=4_000_000_000)
    assert expect_error(lambda: api.groups.CreateGroup(request, metadata=admin_md(), timeout=TIMEOUT),
                        INVALID, "INVALID_ARGUMENT").metadata["field"] == "max_member_count"


@promise("group.proto", "Members see everything, with their own member record and remark; non-members see the public subset of Public, Meeting, AVChatRoom and Community groups and nothing of a Work group (reported as NOT_FOUND).")
def _(api):
    member, stranger = uid("m"), uid("stranger")
    profile = common_pb2.GroupProfile(name="n", notification="members only")
    gid, _ = api.group(PUBLIC, members=[member], profile=profile)
    community, _ = api.group(COMMUNITY, members=[member], profile=profile)
    work, _ = api.group(WORK, members=[member])
    seen = api.info([gid, work], caller=member)
    assert [g.group_id for g in seen.groups] == [gid, work] and not seen.groups[0].public_view_only
    assert seen.groups[0].profile.notification == "members only" and seen.groups[0].self_info.user_id == member
    public = api.info([gid, community, work], caller=stranger)
    assert [g.group_id for g in public.groups] == [gid, community]
    for group in public.groups:
        assert group.public_view_only and group.profile.notification == "" and not group.HasField("self_info")
    assert [(f.group_id, f.error, f.reason) for f in public.failures] == [
        (work, group_pb2.GROUP_LOOKUP_ERROR_NOT_FOUND, "GROUP_NOT_FOUND")]


@promise("group.proto", "Fails as a whole only for a malformed request (INVALID_ARGUMENT: empty list, over the app's batch limit).")
def _(api):
    expect_error(lambda: api.info([]), INVALID, "INVALID_ARGUMENT")
    expect_error(lambda: api.info([uid("g") for _ in range(51)]), INVALID, "INVALID_ARGUMENT")
    answer = api.info([uid("absent"), "#bad"])
    assert len(answer.failures) == 2 and not answer.groups


@promise("group.proto", "The groups to read (1 to the app's batch limit, default 50; duplicates are read once).")
def _(api):
    first, _ = api.group()
    second, _ = api.group()
    answer = api.info([second, first, second])
    assert [g.group_id for g in answer.groups] == [second, first] and not answer.failures


@promise("group.proto", "an empty value clears it, except `name`, which must stay non-empty")
def _(api):
    gid, owner = api.group(profile=common_pb2.GroupProfile(name="n", introduction="intro"))
    update = lambda profile, *paths: api.groups.UpdateGroupProfile(group_pb2.UpdateGroupProfileRequest(
        group_id=gid, update_mask=mask(*paths), profile=profile), metadata=user_md(owner), timeout=TIMEOUT)
    assert update(common_pb2.GroupProfile(), "introduction").group.profile.introduction == ""
    assert expect_error(lambda: update(common_pb2.GroupProfile(), "name"), INVALID,
                        "INVALID_ARGUMENT").metadata["field"] == "profile.name"
    expect_error(lambda: update(common_pb2.GroupProfile(name="x")), INVALID, "INVALID_ARGUMENT")
    expect_error(lambda: update(common_pb2.GroupProfile(name="x"), "owner"), INVALID, "INVALID_ARGUMENT")


@promise("group.proto", "a Work group only with an admin token.")
def _(api):
    work, owner = api.group(WORK)
    request = group_pb2.DismissGroupRequest(group_id=work)
    expect_error(lambda: api.groups.DismissGroup(request, metadata=user_md(owner), timeout=TIMEOUT),
                 DENIED, "ADMIN_TOKEN_REQUIRED")
    api.groups.DismissGroup(request, metadata=admin_md(), timeout=TIMEOUT)
    public, owner = api.group(PUBLIC)
    api.groups.DismissGroup(group_pb2.DismissGroupRequest(group_id=public), metadata=user_md(owner), timeout=TIMEOUT)
    assert [f.reason for f in api.info([work, public]).failures] == ["GROUP_NOT_FOUND", "GROUP_NOT_FOUND"]


@promise("group.proto", "Admin token only. Emits GROUP_REVOKED to every member.")
def _(api):
    gid, owner = api.group()
    expect_error(lambda: api.groups.RevokeGroup(group_pb2.RevokeGroupRequest(group_id=gid), metadata=user_md(owner),
                                                timeout=TIMEOUT), DENIED, "ADMIN_TOKEN_REQUIRED")
    api.groups.RevokeGroup(group_pb2.RevokeGroupRequest(group_id=gid, reason="spam"), metadata=admin_md(), timeout=TIMEOUT)
    assert api.info([gid]).failures[0].reason == "GROUP_NOT_FOUND"


@promise("group.proto", "The old owner becomes MEMBER.")
def _(api):
    heir = uid("heir")
    gid, owner = api.group(members=[heir])
    group = api.groups.TransferOwnership(group_pb2.TransferOwnershipRequest(group_id=gid, new_owner_user_id=heir),
                                         metadata=user_md(owner), timeout=TIMEOUT).group
    assert group.owner_user_id == heir
    old = api.members.GetSelfMemberInfo(member_pb2.GetSelfMemberInfoRequest(group_id=gid), metadata=user_md(owner),
                                        timeout=TIMEOUT).member
    assert old.role == MEMBER


@promise("group.proto", "TRANSFER_NOT_SUPPORTED, MEMBER_NOT_FOUND (new owner not a member), INVALID_ARGUMENT (new owner is the caller).")
def _(api):
    room, room_owner = api.group(AVCHAT)
    transfer = lambda gid, owner, heir: api.groups.TransferOwnership(group_pb2.TransferOwnershipRequest(
        group_id=gid, new_owner_user_id=heir), metadata=user_md(owner), timeout=TIMEOUT)
    expect_error(lambda: transfer(room, room_owner, uid("x")), PRECONDITION, "TRANSFER_NOT_SUPPORTED")
    gid, owner = api.group()
    expect_error(lambda: transfer(gid, owner, uid("stranger")), NOT_FOUND, "MEMBER_NOT_FOUND")
    expect_error(lambda: transfer(gid, owner, owner), INVALID, "INVALID_ARGUMENT")


@promise("group.proto", "INVALID_ARGUMENT (mode UNSPECIFIED when muting, roles with a mode other than ROLES")
def _(api):
    gid, owner = api.group()
    mute = lambda **fields: api.groups.SetGroupMute(group_pb2.SetGroupMuteRequest(group_id=gid, **fields),
                                                    metadata=user_md(owner), timeout=TIMEOUT)
    expect_error(lambda: mute(muted=True), INVALID, "INVALID_ARGUMENT")
    expect_error(lambda: mute(muted=True, mode=common_pb2.GROUP_MUTE_MODE_ALL, roles=[MEMBER]), INVALID, "INVALID_ARGUMENT")
    assert mute(muted=True, mode=common_pb2.GROUP_MUTE_MODE_ALL).mute.mode == common_pb2.GROUP_MUTE_MODE_ALL


@promise("group.proto", "The new mute state; absent when unmuted.")
def _(api):
    gid, owner = api.group()
    mute = lambda **fields: api.groups.SetGroupMute(group_pb2.SetGroupMuteRequest(group_id=gid, **fields),
                                                    metadata=user_md(owner), timeout=TIMEOUT)
    assert mute(muted=True, mode=common_pb2.GROUP_MUTE_MODE_ORDINARY_MEMBERS).HasField("mute")
    assert not mute(muted=False).HasField("mute")
    assert not api.info([gid]).groups[0].HasField("mute")


@promise("group.proto", "Lists the groups the operator belongs to, newest join first, excluding AVChatRooms")
def _(api):
    user = uid("u")
    first, _ = api.group(MEETING, members=[user])
    room, _ = api.group(AVCHAT)
    api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=room), metadata=user_md(user), timeout=TIMEOUT)
    second, _ = api.group(WORK, members=[user])
    listed = api.groups.ListJoinedGroups(group_pb2.ListJoinedGroupsRequest(), metadata=user_md(user), timeout=TIMEOUT)
    assert [g.group_id for g in listed.groups] == [second, first] and listed.total_count == 2
    assert all(g.self_info.user_id == user for g in listed.groups)
    only = api.groups.ListJoinedGroups(group_pb2.ListJoinedGroupsRequest(types=[AVCHAT]), metadata=user_md(user),
                                       timeout=TIMEOUT)
    assert not only.groups


@promise("group.proto", "How many groups the user has joined in total (with the type filter).")
def _(api):
    user = uid("u")
    made = [api.group(PUBLIC, members=[user])[0] for _ in range(3)]
    seen, token = [], ""
    while True:
        page = api.groups.ListJoinedGroups(group_pb2.ListJoinedGroupsRequest(page_size=2, page_token=token),
                                           metadata=user_md(user), timeout=TIMEOUT)
        assert page.total_count == 3 and len(page.groups) <= 2
        seen += [g.group_id for g in page.groups]
        token = page.next_page_token
        if not token:
            break
    assert seen == made[::-1]


@promise("group.proto", "Errors: INVALID_ARGUMENT (empty keyword).")
def _(api):
    search = lambda keyword: api.groups.SearchGroups(group_pb2.SearchGroupsRequest(keyword=keyword),
                                                     metadata=user_md(uid("u")), timeout=TIMEOUT)
    assert expect_error(lambda: search(""), INVALID, "INVALID_ARGUMENT").metadata["field"] == "keyword"
    assert expect_error(lambda: search("k" * 31), INVALID, "INVALID_ARGUMENT").metadata["field"] == "keyword"


@promise("group.proto", "Imports an existing group with its members and times from another system (Tencent import_group, RongCloud hosting import). Admin token only.")
def _(api):
    gid, owner, member = uid("imported"), uid("o"), uid("m")
    request = group_pb2.ImportGroupRequest(group_id=gid, type=PUBLIC, owner_user_id=owner,
                                           profile=common_pb2.GroupProfile(name="old"),
                                           members=[group_pb2.ImportedMember(user_id=member, role=MEMBER)])
    expect_error(lambda: api.groups.ImportGroup(request, metadata=user_md(owner), timeout=TIMEOUT),
                 DENIED, "ADMIN_TOKEN_REQUIRED")
    imported = api.groups.ImportGroup(request, metadata=admin_md(), timeout=TIMEOUT)
    assert imported.group.group_id == gid and imported.group.member_count == 2
    assert [(r.user_id, r.result) for r in imported.member_results] == [(member, SUCCESS)]
    got = api.members.GetMembersInfo(member_pb2.GetMembersInfoRequest(group_id=gid, user_ids=[owner, member]),
                                     metadata=admin_md(), timeout=TIMEOUT).results
    assert [r.member.join_source for r in got] == [common_pb2.JOIN_SOURCE_IMPORTED] * 2


@promise("group.proto", "The group id (required: imports keep their ids).")
def _(api):
    request = group_pb2.ImportGroupRequest(type=PUBLIC, owner_user_id=uid("o"), profile=common_pb2.GroupProfile(name="n"))
    assert expect_error(lambda: api.groups.ImportGroup(request, metadata=admin_md(), timeout=TIMEOUT),
                        INVALID, "INVALID_ARGUMENT").metadata["field"] == "group_id"


@promise("group.proto", "more initial members than the app's batch limit)")
def _(api):
    request = group_pb2.CreateGroupRequest(type=PUBLIC, owner_user_id=uid("o"), profile=common_pb2.GroupProfile(name="n"),
                                           members=[group_pb2.InitialMember(user_id=uid("m")) for _ in range(101)])
    assert expect_error(lambda: api.groups.CreateGroup(request, metadata=admin_md(), timeout=TIMEOUT),
                        INVALID, "INVALID_ARGUMENT").metadata["field"] == "members"


@promise("group.proto", "One result per initial member: SUCCESS with the member as stored")
def _(api):
    admin, member = uid("a"), uid("m")
    created = api.groups.CreateGroup(group_pb2.CreateGroupRequest(
        type=PUBLIC, owner_user_id=uid("o"), profile=common_pb2.GroupProfile(name="n"),
        members=[group_pb2.InitialMember(user_id=admin, role=ADMIN, name_card="boss"), group_pb2.InitialMember(user_id=member)]),
        metadata=admin_md(), timeout=TIMEOUT)
    results = created.member_results
    assert [(r.user_id, r.result, r.member.role) for r in results] == [(admin, SUCCESS, ADMIN), (member, SUCCESS, MEMBER)]
    assert results[0].member.name_card == "boss"
    assert results[1].member.join_source == common_pb2.JOIN_SOURCE_INITIAL_MEMBER
    assert created.group.member_count == 3


@promise("group.proto", "The id is malformed.")
def _(api):
    failure = api.info(["#malformed"]).failures[0]
    assert (failure.group_id, failure.error, failure.reason) == (
        "#malformed", group_pb2.GROUP_LOOKUP_ERROR_INVALID_ID, "INVALID_ARGUMENT")


@promise("group.proto", "The owner (required except for AVChatRoom).")
def _(api):
    request = group_pb2.ImportGroupRequest(group_id=uid("imp"), type=PUBLIC, profile=common_pb2.GroupProfile(name="n"))
    assert expect_error(lambda: api.groups.ImportGroup(request, metadata=admin_md(), timeout=TIMEOUT),
                        INVALID, "INVALID_ARGUMENT").metadata["field"] == "owner_user_id"
    room = api.groups.ImportGroup(group_pb2.ImportGroupRequest(
        group_id=uid("imp"), type=AVCHAT, profile=common_pb2.GroupProfile(name="live")), metadata=admin_md(), timeout=TIMEOUT)
    assert room.group.owner_user_id == ""


@promise("group.proto", "The original creation time (absent = now).")
def _(api):
    from google.protobuf import timestamp_pb2
    gid, owner, member = uid("imp"), uid("o"), uid("m")
    created, joined = timestamp_pb2.Timestamp(seconds=1_500_000_000), timestamp_pb2.Timestamp(seconds=1_600_000_000)
    group = api.groups.ImportGroup(group_pb2.ImportGroupRequest(
        group_id=gid, type=PUBLIC, owner_user_id=owner, profile=common_pb2.GroupProfile(name="old"), create_time=created,
        members=[group_pb2.ImportedMember(user_id=member, join_time=joined)]), metadata=admin_md(), timeout=TIMEOUT).group
    assert group.create_time.seconds == created.seconds
    got = api.members.GetMembersInfo(member_pb2.GetMembersInfoRequest(group_id=gid, user_ids=[member]),
                                     metadata=admin_md(), timeout=TIMEOUT).results[0].member
    assert got.join_time.seconds == joined.seconds
    fresh = api.groups.ImportGroup(group_pb2.ImportGroupRequest(
        group_id=uid("imp"), type=PUBLIC, owner_user_id=owner, profile=common_pb2.GroupProfile(name="new")),
        metadata=admin_md(), timeout=TIMEOUT).group
    assert fresh.create_time.seconds > created.seconds


def filled(answer):
    """The names of the fields of `answer` that are set (proto3: non-default)."""
    return sorted(field.name for field, _ in answer.ListFields())


@promise("group.proto", "A version newer than the app's latest event answers `full_reload_required`.")
def _(api):
    me = uid("me")
    gid, _ = api.group(PUBLIC, members=[me])
    sync = lambda version: api.groups.SyncJoinedGroups(group_pb2.SyncJoinedGroupsRequest(version=version),
                                                       metadata=user_md(me), timeout=TIMEOUT)
    latest = sync(0).version
    assert latest > 0
    # The latest event itself is not newer: nothing changed since.
    current = sync(latest)
    assert not current.full_reload_required and not current.groups and current.version >= latest
    assert sync(latest + 10**9).full_reload_required


@promise("group.proto", "local list and sync from 0. Nothing else is filled: `version` is 0, as are the lists and the page token.")
def _(api):
    me = uid("me")
    for _ in range(3):
        api.group(PUBLIC, members=[me])
    latest = api.groups.SyncJoinedGroups(group_pb2.SyncJoinedGroupsRequest(), metadata=user_md(me),
                                         timeout=TIMEOUT).version
    answer = api.groups.SyncJoinedGroups(group_pb2.SyncJoinedGroupsRequest(version=latest + 10**9, page_size=1),
                                         metadata=user_md(me), timeout=TIMEOUT)
    assert filled(answer) == ["full_reload_required"], answer


# ----------------------------------------------------------------------------------------------
# member.proto
# ----------------------------------------------------------------------------------------------

@promise("member.proto", "GROUP_NOT_FOUND (also a Work group: non-members cannot see one), JOIN_FORBIDDEN (join option FORBIDDEN), ALREADY_MEMBER")
def _(api):
    join = lambda gid, user: api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=gid), metadata=user_md(user),
                                                   timeout=TIMEOUT)
    work, owner = api.group(WORK)
    expect_error(lambda: join(work, uid("u")), NOT_FOUND, "GROUP_NOT_FOUND")
    closed, owner = api.group(PUBLIC, settings=common_pb2.GroupSettings(join_option=common_pb2.JOIN_OPTION_FORBIDDEN))
    expect_error(lambda: join(closed, uid("u")), DENIED, "JOIN_FORBIDDEN")
    expect_error(lambda: join(closed, owner), grpc.StatusCode.ALREADY_EXISTS, "ALREADY_MEMBER")


@promise("member.proto", "Join option ANY (Meeting, AVChatRoom, Public set to any): joins at once, emits MEMBER_JOINED.")
def _(api):
    for group_type, settings in [(MEETING, None), (AVCHAT, None),
                                 (PUBLIC, common_pb2.GroupSettings(join_option=common_pb2.JOIN_OPTION_ANY))]:
        gid, _ = api.group(group_type, settings=settings)
        user = uid("u")
        joined = api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=gid), metadata=user_md(user), timeout=TIMEOUT)
        assert joined.outcome == member_pb2.JOIN_OUTCOME_JOINED and joined.member.user_id == user
        assert joined.member.role == MEMBER


@promise("member.proto", "APPROVAL: creates (or refreshes) a pending application, emits APPLICATION_RECEIVED to the approvers, answers PENDING_APPROVAL.")
def _(api):
    gid, owner = api.group(PUBLIC)
    user = uid("u")
    join = lambda text: api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=gid, message=text),
                                              metadata=user_md(user), timeout=TIMEOUT)
    first, again = join("first"), join("again")
    assert first.outcome == again.outcome == member_pb2.JOIN_OUTCOME_PENDING_APPROVAL
    assert first.application.application_id == again.application.application_id
    assert again.application.message == "again" and again.application.state == common_pb2.APPLICATION_STATE_PENDING
    listed = api.applications.ListApplications(application_pb2.ListApplicationsRequest(group_id=gid),
                                               metadata=user_md(owner), timeout=TIMEOUT).applications
    assert [a.application_id for a in listed] == [first.application.application_id]


@promise("member.proto", "Per invitee: joins at once (SUCCESS, emits MEMBER_INVITED and INVITED), or a pending invitation when consent or approval is needed (PENDING")
def _(api):
    member = uid("m")
    work, owner = api.group(WORK, members=[member])
    newcomer = uid("new")
    results = api.members.InviteMembers(member_pb2.InviteMembersRequest(group_id=work, user_ids=[newcomer, member]),
                                        metadata=user_md(owner), timeout=TIMEOUT).results
    assert [(r.user_id, r.result) for r in results] == [(newcomer, SUCCESS),
                                                        (member, common_pb2.MEMBER_RESULT_CODE_ALREADY_MEMBER)]
    public, owner = api.group(PUBLIC)
    invited = api.members.InviteMembers(member_pb2.InviteMembersRequest(group_id=public, user_ids=[uid("i")]),
                                        metadata=user_md(owner), timeout=TIMEOUT).results[0]
    assert invited.result == common_pb2.MEMBER_RESULT_CODE_PENDING and invited.application_id


@promise("member.proto", "INVALID_ARGUMENT (empty list, over the batch limit).")
def _(api):
    gid, owner = api.group(WORK)
    invite = lambda users: api.members.InviteMembers(member_pb2.InviteMembersRequest(group_id=gid, user_ids=users),
                                                     metadata=user_md(owner), timeout=TIMEOUT)
    expect_error(lambda: invite([]), INVALID, "INVALID_ARGUMENT")
    assert expect_error(lambda: invite([uid("u") for _ in range(101)]), INVALID,
                        "INVALID_ARGUMENT").metadata["limit"] == "100"


@promise("member.proto", "nobody removes the owner, admins are removed only by the owner.")
def _(api):
    admin, other_admin, member = uid("a"), uid("a2"), uid("m")
    gid, owner = api.group(PUBLIC, admins=[admin, other_admin], members=[member])
    kick = lambda by, users: api.members.KickMembers(member_pb2.KickMembersRequest(group_id=gid, user_ids=users),
                                                     metadata=user_md(by), timeout=TIMEOUT).results
    results = kick(admin, [owner, other_admin, member])
    assert [r.result for r in results] == [FAILED, FAILED, SUCCESS], results
    assert [r.result for r in kick(owner, [other_admin])] == [SUCCESS]


@promise("member.proto", "FAILED (TARGET_IS_OWNER for the owner, PERMISSION_DENIED for an admin removed by an admin), INVALID.")
def _(api):
    admin, other_admin = uid("a"), uid("a2")
    gid, owner = api.group(PUBLIC, admins=[admin, other_admin])
    results = api.members.KickMembers(member_pb2.KickMembersRequest(group_id=gid, user_ids=[owner, other_admin, uid("no"), ""]),
                                      metadata=user_md(admin), timeout=TIMEOUT).results
    assert [(r.result, r.reason) for r in results] == [
        (FAILED, "TARGET_IS_OWNER"), (FAILED, "PERMISSION_DENIED"), (common_pb2.MEMBER_RESULT_CODE_NOT_MEMBER, "NOT_A_MEMBER"),
        (common_pb2.MEMBER_RESULT_CODE_INVALID, "INVALID_ARGUMENT")], results


@promise("common.proto", "TARGET_IS_OWNER (FAILED_PRECONDITION): the operation cannot target the owner (kick, mute, demote).")
def _(api):
    admin = uid("a")
    gid, owner = api.group(PUBLIC, admins=[admin])
    expect_error(lambda: api.members.SetMemberRole(member_pb2.SetMemberRoleRequest(group_id=gid, user_id=owner, role=MEMBER),
                                                   metadata=user_md(owner), timeout=TIMEOUT), PRECONDITION, "TARGET_IS_OWNER")
    muted = api.members.MuteMembers(member_pb2.MuteMembersRequest(group_id=gid, user_ids=[owner], duration_seconds=60),
                                    metadata=admin_md(), timeout=TIMEOUT).results
    kicked = api.members.KickMembers(member_pb2.KickMembersRequest(group_id=gid, user_ids=[owner]), metadata=user_md(admin),
                                     timeout=TIMEOUT).results
    assert [(r.result, r.reason) for r in list(muted) + list(kicked)] == [(FAILED, "TARGET_IS_OWNER")] * 2


@promise("member.proto", "KICK_NOT_SUPPORTED (AVChatRoom)")
def _(api):
    room, owner = api.group(AVCHAT)
    expect_error(lambda: api.members.KickMembers(member_pb2.KickMembersRequest(group_id=room, user_ids=[uid("u")]),
                                                 metadata=user_md(owner), timeout=TIMEOUT), PRECONDITION, "KICK_NOT_SUPPORTED")


@promise("member.proto", "Lists members, filtered by role, in pages of at most 50 with an opaque cursor")
def _(api):
    admin = uid("a")
    members = [uid("m") for _ in range(4)]
    gid, owner = api.group(PUBLIC, admins=[admin], members=members)
    listing = lambda member_filter: [m.user_id for m in api.members.ListMembers(member_pb2.ListMembersRequest(
        group_id=gid, filter=member_filter), metadata=user_md(owner), timeout=TIMEOUT).members]
    assert listing(member_pb2.MEMBER_FILTER_OWNER) == [owner]
    assert listing(member_pb2.MEMBER_FILTER_ADMINS) == [admin]
    assert sorted(listing(member_pb2.MEMBER_FILTER_ORDINARY)) == sorted(members)
    assert len(listing(member_pb2.MEMBER_FILTER_ALL)) == 6


@promise("member.proto", "The members of this page, in join order.")
def _(api):
    gid, owner = api.group(MEETING)
    joiners = [uid("j") for _ in range(5)]
    for user in joiners:
        api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=gid), metadata=user_md(user), timeout=TIMEOUT)
    seen, token = [], ""
    while True:
        page = api.members.ListMembers(member_pb2.ListMembersRequest(group_id=gid, page_size=2, page_token=token),
                                       metadata=user_md(owner), timeout=TIMEOUT)
        assert page.member_count == 6
        seen += [m.user_id for m in page.members]
        token = page.next_page_token
        if not token:
            break
    assert seen == [owner] + joiners


@promise("member.proto", "Members only (a non-member gets NOT_A_MEMBER; the public subset of a group is in GetGroupsInfo)")
def _(api):
    stranger, member = uid("stranger"), uid("m")
    for group_type in (PUBLIC, MEETING, AVCHAT, COMMUNITY):
        gid, owner = api.group(group_type)
        expect_error(lambda: api.members.ListMembers(member_pb2.ListMembersRequest(group_id=gid),
                                                     metadata=user_md(stranger), timeout=TIMEOUT), DENIED, "NOT_A_MEMBER")
    gid, owner = api.group(PUBLIC, members=[member])
    listed = api.members.ListMembers(member_pb2.ListMembersRequest(group_id=gid), metadata=user_md(member), timeout=TIMEOUT)
    assert [m.user_id for m in listed.members] == [owner, member]


@promise("member.proto", "One result per requested user: SUCCESS with `member`, NOT_MEMBER or INVALID.")
def _(api):
    member = uid("m")
    gid, owner = api.group(members=[member])
    results = api.members.GetMembersInfo(member_pb2.GetMembersInfoRequest(
        group_id=gid, user_ids=[member, uid("no"), ""]), metadata=user_md(owner), timeout=TIMEOUT).results
    assert [r.result for r in results] == [SUCCESS, common_pb2.MEMBER_RESULT_CODE_NOT_MEMBER,
                                           common_pb2.MEMBER_RESULT_CODE_INVALID]
    assert results[0].member.user_id == member and not results[1].HasField("member")


@promise("member.proto", "Reads the operator's own member record and remark. Errors: GROUP_NOT_FOUND, NOT_A_MEMBER.")
def _(api):
    gid, owner = api.group(PUBLIC)
    me = api.members.GetSelfMemberInfo(member_pb2.GetSelfMemberInfoRequest(group_id=gid), metadata=user_md(owner),
                                       timeout=TIMEOUT)
    assert me.member.user_id == owner
    expect_error(lambda: api.members.GetSelfMemberInfo(member_pb2.GetSelfMemberInfoRequest(group_id=gid),
                                                       metadata=user_md(uid("stranger")), timeout=TIMEOUT),
                 DENIED, "NOT_A_MEMBER")
    expect_error(lambda: api.members.GetSelfMemberInfo(member_pb2.GetSelfMemberInfoRequest(group_id=uid("absent")),
                                                       metadata=user_md(owner), timeout=TIMEOUT),
                 NOT_FOUND, "GROUP_NOT_FOUND")


@promise("member.proto", "Owner only; types with admins only (Public, Meeting, Community).")
def _(api):
    set_role = lambda by, group, user, role: api.members.SetMemberRole(member_pb2.SetMemberRoleRequest(
        group_id=group, user_id=user, role=role), metadata=user_md(by), timeout=TIMEOUT)
    for group_type in (PUBLIC, COMMUNITY):
        admin, member = uid("a"), uid("m")
        gid, owner = api.group(group_type, admins=[admin], members=[member])
        assert set_role(owner, gid, member, ADMIN).member.role == ADMIN
        expect_error(lambda: set_role(admin, gid, member, MEMBER), DENIED, "PERMISSION_DENIED")
    work_member = uid("m")
    work, work_owner = api.group(WORK, members=[work_member])
    expect_error(lambda: set_role(work_owner, work, work_member, ADMIN), PRECONDITION, "ROLE_NOT_SUPPORTED")


@promise("member.proto", "MEMBER_NOT_FOUND (target not a member), TARGET_IS_OWNER (target is the owner), INVALID_ARGUMENT (role OWNER or UNSPECIFIED).")
def _(api):
    member = uid("m")
    gid, owner = api.group(PUBLIC, members=[member])
    set_role = lambda user, role: api.members.SetMemberRole(member_pb2.SetMemberRoleRequest(
        group_id=gid, user_id=user, role=role), metadata=user_md(owner), timeout=TIMEOUT)
    expect_error(lambda: set_role(member, OWNER), INVALID, "INVALID_ARGUMENT")
    expect_error(lambda: set_role(member, common_pb2.MEMBER_ROLE_UNSPECIFIED), INVALID, "INVALID_ARGUMENT")
    expect_error(lambda: set_role(owner, ADMIN), PRECONDITION, "TARGET_IS_OWNER")
    expect_error(lambda: set_role(uid("stranger"), ADMIN), NOT_FOUND, "MEMBER_NOT_FOUND")


@promise("member.proto", "never on the owner, admins only by the owner.")
def _(api):
    admin, other_admin, member = uid("a"), uid("a2"), uid("m")
    gid, owner = api.group(PUBLIC, admins=[admin, other_admin], members=[member])
    mute = lambda by, users: api.members.MuteMembers(member_pb2.MuteMembersRequest(
        group_id=gid, user_ids=users, duration_seconds=600), metadata=user_md(by), timeout=TIMEOUT).results
    results = mute(admin, [owner, other_admin, member])
    assert [r.result for r in results] == [FAILED, FAILED, SUCCESS], results
    assert [r.result for r in mute(owner, [other_admin])] == [SUCCESS]


@promise("member.proto", "One result per requested user; SUCCESS carries the member with its new mute_until.")
def _(api):
    member = uid("m")
    gid, owner = api.group(PUBLIC, members=[member])
    mute = lambda seconds: api.members.MuteMembers(member_pb2.MuteMembersRequest(
        group_id=gid, user_ids=[member], duration_seconds=seconds), metadata=user_md(owner), timeout=TIMEOUT).results[0]
    muted = mute(600)
    assert muted.result == SUCCESS and muted.member.HasField("mute_until") and muted.member.mute_until.seconds > 0
    unmuted = mute(0)
    assert unmuted.result == SUCCESS and not unmuted.member.HasField("mute_until")


@promise("member.proto", "GROUP_NOT_FOUND, NOT_A_MEMBER, MEMBER_NOT_FOUND (target not a member), PERMISSION_DENIED, INVALID_ARGUMENT, POLICY_REJECTED.")
def _(api):
    member = uid("m")
    gid, owner = api.group(PUBLIC, members=[member])
    changed = api.members.UpdateMemberInfo(member_pb2.UpdateMemberInfoRequest(
        group_id=gid, update_mask=mask("name_card"), name_card="me"), metadata=user_md(member), timeout=TIMEOUT).member
    assert changed.user_id == member and changed.name_card == "me"
    expect_error(lambda: api.members.UpdateMemberInfo(member_pb2.UpdateMemberInfoRequest(
        group_id=gid, user_id=uid("stranger"), update_mask=mask("name_card"), name_card="x"), metadata=user_md(owner),
        timeout=TIMEOUT), NOT_FOUND, "MEMBER_NOT_FOUND")


@promise("member.proto", "OWNER_CHANGED, GROUP_DISMISSED). Errors: GROUP_NOT_FOUND, NOT_A_MEMBER, OWNER_CANNOT_QUIT.")
def _(api):
    gid, _ = api.group(PUBLIC)
    quit = lambda group, user: api.members.QuitGroup(member_pb2.QuitGroupRequest(group_id=group), metadata=user_md(user),
                                                     timeout=TIMEOUT)
    expect_error(lambda: quit(gid, uid("stranger")), DENIED, "NOT_A_MEMBER")
    expect_error(lambda: quit(uid("absent"), uid("u")), NOT_FOUND, "GROUP_NOT_FOUND")


@promise("member.proto", "Sets the operator's receive option for the group. Members only.")
def _(api):
    member = uid("m")
    gid, _ = api.group(PUBLIC, members=[member])
    set_option = lambda user, option: api.members.SetReceiveMessageOption(member_pb2.SetReceiveMessageOptionRequest(
        group_id=gid, option=option), metadata=user_md(user), timeout=TIMEOUT)
    expect_error(lambda: set_option(member, common_pb2.RECEIVE_MESSAGE_OPTION_UNSPECIFIED), INVALID, "INVALID_ARGUMENT")
    expect_error(lambda: set_option(uid("stranger"), common_pb2.RECEIVE_MESSAGE_OPTION_RECEIVE), DENIED, "NOT_A_MEMBER")
    set_option(member, common_pb2.RECEIVE_MESSAGE_OPTION_RECEIVE_WITHOUT_PUSH)
    me = api.members.GetSelfMemberInfo(member_pb2.GetSelfMemberInfoRequest(group_id=gid), metadata=user_md(member),
                                       timeout=TIMEOUT).member
    assert me.receive_message_option == common_pb2.RECEIVE_MESSAGE_OPTION_RECEIVE_WITHOUT_PUSH


@promise("member.proto", "newer than the group's answers `full_reload_required` with nothing else: sync again from 0.")
def _(api):
    member = uid("m")
    gid, owner = api.group(PUBLIC, members=[member])
    sync = lambda version: api.members.SyncMembers(member_pb2.SyncMembersRequest(group_id=gid, version=version),
                                                   metadata=user_md(owner), timeout=TIMEOUT)
    current = api.info([gid]).groups[0].member_version
    assert current > 0
    same = sync(current)
    assert not same.full_reload_required and same.version == current and not same.changed_members
    assert filled(sync(current + 1)) == ["full_reload_required"]
    again = sync(0)
    assert sorted(m.user_id for m in again.changed_members) == sorted([owner, member])
    assert again.version == current and not again.full_reload_required


@promise("member.proto", "drop the local list and sync from 0. Nothing else is filled: `version` is 0, as are the lists and the page token.")
def _(api):
    members = [uid("m") for _ in range(3)]
    gid, owner = api.group(PUBLIC, members=members)
    api.members.QuitGroup(member_pb2.QuitGroupRequest(group_id=gid), metadata=user_md(members[0]), timeout=TIMEOUT)
    current = api.info([gid]).groups[0].member_version
    answer = api.members.SyncMembers(member_pb2.SyncMembersRequest(group_id=gid, version=current + 5, page_size=1),
                                     metadata=user_md(owner), timeout=TIMEOUT)
    assert filled(answer) == ["full_reload_required"], answer


# ----------------------------------------------------------------------------------------------
# application.proto
# ----------------------------------------------------------------------------------------------

def pending_application(api):
    gid, owner = api.group(PUBLIC)
    applicant = uid("applicant")
    joined = api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=gid), metadata=user_md(applicant), timeout=TIMEOUT)
    return gid, owner, applicant, joined.application.application_id


@promise("application.proto", "Two concurrent accepts: exactly one wins.")
def _(api):
    gid, owner, applicant, application_id = pending_application(api)
    admin = uid("a")
    api.members.InviteMembers(member_pb2.InviteMembersRequest(group_id=gid, user_ids=[admin]), metadata=admin_md(),
                              timeout=TIMEOUT)
    api.members.SetMemberRole(member_pb2.SetMemberRoleRequest(group_id=gid, user_id=admin, role=ADMIN),
                              metadata=user_md(owner), timeout=TIMEOUT)
    outcomes, gate = [], threading.Barrier(2)

    def accept(by):
        gate.wait()
        try:
            api.applications.AcceptApplication(application_pb2.AcceptApplicationRequest(application_id=application_id),
                                               metadata=user_md(by), timeout=TIMEOUT)
            outcomes.append("accepted")
        except grpc.RpcError as error:
            outcomes.append(error_info(error).reason)
    threads = [threading.Thread(target=accept, args=(by,)) for by in (owner, admin)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["APPLICATION_ALREADY_HANDLED", "accepted"], outcomes
    assert api.info([gid]).groups[0].member_count == 3


@promise("application.proto", "PERMISSION_DENIED (not an approver or the invitee)")
def _(api):
    gid, owner, applicant, application_id = pending_application(api)
    member = uid("m")
    api.members.InviteMembers(member_pb2.InviteMembersRequest(group_id=gid, user_ids=[member]), metadata=admin_md(),
                              timeout=TIMEOUT)
    for by in (member, applicant):
        expect_error(lambda: api.applications.AcceptApplication(application_pb2.AcceptApplicationRequest(
            application_id=application_id), metadata=user_md(by), timeout=TIMEOUT), DENIED, "PERMISSION_DENIED")


@promise("application.proto", "APPLICATION_NOT_FOUND, PERMISSION_DENIED (not the sender), APPLICATION_ALREADY_HANDLED, APPLICATION_EXPIRED.")
def _(api):
    gid, owner, applicant, application_id = pending_application(api)
    withdraw = lambda by, item: api.applications.WithdrawApplication(application_pb2.WithdrawApplicationRequest(
        application_id=item), metadata=user_md(by), timeout=TIMEOUT)
    expect_error(lambda: withdraw(owner, application_id), DENIED, "PERMISSION_DENIED")
    expect_error(lambda: withdraw(applicant, uid("absent")), NOT_FOUND, "APPLICATION_NOT_FOUND")
    assert withdraw(applicant, application_id).application.state == common_pb2.APPLICATION_STATE_WITHDRAWN
    expect_error(lambda: withdraw(applicant, application_id), PRECONDITION, "APPLICATION_ALREADY_HANDLED")


@promise("application.proto", "Lists the items where the caller approves, those addressed to the caller as invitee and those the caller sent, newest first")
def _(api):
    gid, owner = api.group(PUBLIC)
    ids = []
    for _ in range(3):
        joined = api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=gid), metadata=user_md(uid("u")),
                                       timeout=TIMEOUT)
        ids.append(joined.application.application_id)
    listed = api.applications.ListApplications(application_pb2.ListApplicationsRequest(group_id=gid),
                                               metadata=user_md(owner), timeout=TIMEOUT)
    assert [a.application_id for a in listed.applications] == ids[::-1]
    assert listed.unread_count == 3


@promise("application.proto", "Marks every item created at or before `read_time` as read for the caller")
def _(api):
    gid, owner, _, _ = pending_application(api)
    reported = api.applications.ReportApplicationsRead(application_pb2.ReportApplicationsReadRequest(),
                                                       metadata=user_md(owner), timeout=TIMEOUT)
    assert reported.unread_count == 0
    listed = api.applications.ListApplications(application_pb2.ListApplicationsRequest(group_id=gid),
                                               metadata=user_md(owner), timeout=TIMEOUT)
    assert listed.unread_count == 0 and len(listed.applications) == 1


@promise("common.proto", "APPLICATION_ALREADY_HANDLED (FAILED_PRECONDITION): the item is no longer pending; metadata `state`, `handled_by`.")
def _(api):
    gid, owner, applicant, application_id = pending_application(api)
    refused = api.applications.RefuseApplication(application_pb2.RefuseApplicationRequest(
        application_id=application_id, message="no"), metadata=user_md(owner), timeout=TIMEOUT).application
    assert refused.state == common_pb2.APPLICATION_STATE_REFUSED and refused.handled_by_user_id == owner
    info = expect_error(lambda: api.applications.AcceptApplication(application_pb2.AcceptApplicationRequest(
        application_id=application_id), metadata=user_md(owner), timeout=TIMEOUT), PRECONDITION, "APPLICATION_ALREADY_HANDLED")
    assert info.metadata["state"] and info.metadata["handled_by"] == owner, info
    assert api.info([gid]).groups[0].member_count == 1


@promise("application.proto", "The user joins once every needed decision is yes")
def _(api):
    gid, owner = api.group(PUBLIC)
    invitee = uid("invitee")
    pending = api.members.InviteMembers(member_pb2.InviteMembersRequest(group_id=gid, user_ids=[invitee]),
                                        metadata=user_md(owner), timeout=TIMEOUT).results[0]
    assert pending.result == common_pb2.MEMBER_RESULT_CODE_PENDING
    expect_error(lambda: api.members.GetSelfMemberInfo(member_pb2.GetSelfMemberInfoRequest(group_id=gid),
                                                       metadata=user_md(invitee), timeout=TIMEOUT), DENIED, "NOT_A_MEMBER")
    accepted = api.applications.AcceptApplication(application_pb2.AcceptApplicationRequest(
        application_id=pending.application_id), metadata=user_md(invitee), timeout=TIMEOUT)
    assert accepted.application.state == common_pb2.APPLICATION_STATE_ACCEPTED
    assert accepted.member.user_id == invitee and accepted.member.join_source == common_pb2.JOIN_SOURCE_INVITATION


@promise("application.proto", "Page size (default 20, max 100).")
def _(api):
    gid, owner = api.group(PUBLIC)
    ids = [api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=gid), metadata=user_md(uid("u")),
                                 timeout=TIMEOUT).application.application_id for _ in range(23)]
    page = api.applications.ListApplications(application_pb2.ListApplicationsRequest(group_id=gid),
                                             metadata=user_md(owner), timeout=TIMEOUT)
    assert len(page.applications) == 20 and page.next_page_token
    rest = api.applications.ListApplications(application_pb2.ListApplicationsRequest(
        group_id=gid, page_token=page.next_page_token), metadata=user_md(owner), timeout=TIMEOUT)
    assert [a.application_id for a in list(page.applications) + list(rest.applications)] == ids[::-1]
    assert not rest.next_page_token


# ----------------------------------------------------------------------------------------------
# message.proto
# ----------------------------------------------------------------------------------------------

@promise("message.proto", "A retry with the same `client_message_id` returns the first result.")
def _(api):
    gid, owner = api.group(PUBLIC)
    first = api.send(gid, owner, "once", client_message_id="c-1")
    again = api.send(gid, owner, "once", client_message_id="c-1")
    assert not first.deduplicated and again.deduplicated
    assert again.message.sequence == first.message.sequence and again.message.message_id == first.message.message_id
    history = api.messages.GetGroupMessages(message_pb2.GetGroupMessagesRequest(group_id=gid), metadata=user_md(owner),
                                            timeout=TIMEOUT)
    assert [m.text for m in history.messages] == ["once"]


@promise("message.proto", "At least one of `text` and `payload` is needed.")
def _(api):
    gid, owner = api.group(PUBLIC)
    expect_error(lambda: api.send(gid, owner, ""), INVALID, "INVALID_ARGUMENT")
    assert api.send(gid, owner, "", payload=b"\x01").result == message_pb2.SEND_RESULT_SENT


@promise("message.proto", "Errors: GROUP_NOT_FOUND, NOT_A_MEMBER, MEMBER_MUTED, GROUP_MUTED")
def _(api):
    member = uid("m")
    gid, owner = api.group(PUBLIC, members=[member])
    expect_error(lambda: api.send(gid, uid("stranger")), DENIED, "NOT_A_MEMBER")
    expect_error(lambda: api.send(uid("absent"), owner), NOT_FOUND, "GROUP_NOT_FOUND")
    api.members.MuteMembers(member_pb2.MuteMembersRequest(group_id=gid, user_ids=[member], duration_seconds=600),
                            metadata=user_md(owner), timeout=TIMEOUT)
    expect_error(lambda: api.send(gid, member), DENIED, "MEMBER_MUTED")
    other = uid("m")
    muted_group, muted_owner = api.group(PUBLIC, members=[other])
    api.groups.SetGroupMute(group_pb2.SetGroupMuteRequest(group_id=muted_group, muted=True,
                                                          mode=common_pb2.GROUP_MUTE_MODE_ORDINARY_MEMBERS),
                            metadata=user_md(muted_owner), timeout=TIMEOUT)
    expect_error(lambda: api.send(muted_group, other), DENIED, "GROUP_MUTED")
    assert api.send(muted_group, muted_owner).result == message_pb2.SEND_RESULT_SENT


@promise("message.proto", "Meeting and Community members see messages from before they joined; Work and Public members only from their join on.")
def _(api):
    for group_type, sees_earlier in [(MEETING, True), (COMMUNITY, True), (WORK, False), (PUBLIC, False)]:
        gid, owner = api.group(group_type)
        api.send(gid, owner, "before")
        late = uid("late")
        api.members.InviteMembers(member_pb2.InviteMembersRequest(group_id=gid, user_ids=[late]), metadata=admin_md(),
                                  timeout=TIMEOUT)
        api.send(gid, owner, "after")
        history = api.messages.GetGroupMessages(message_pb2.GetGroupMessagesRequest(group_id=gid),
                                                metadata=user_md(late), timeout=TIMEOUT)
        assert [m.text for m in history.messages] == (["before", "after"] if sees_earlier else ["after"]), group_type


@promise("message.proto", "The messages of this page, ascending by sequence whatever the direction.")
def _(api):
    gid, owner = api.group(PUBLIC)
    for n in range(5):
        api.send(gid, owner, f"m{n}")
    read = lambda **fields: api.messages.GetGroupMessages(message_pb2.GetGroupMessagesRequest(group_id=gid, **fields),
                                                          metadata=user_md(owner), timeout=TIMEOUT)
    older = read(page_size=2)
    assert [m.text for m in older.messages] == ["m3", "m4"] and older.next_page_token
    assert [m.text for m in read(page_token=older.next_page_token, page_size=2).messages] == ["m1", "m2"]
    newer = read(direction=message_pb2.HISTORY_DIRECTION_NEWER, page_size=2)
    assert [m.text for m in newer.messages] == ["m0", "m1"]
    sequences = [m.sequence for m in read(page_size=5).messages]
    assert sequences == sorted(sequences) and read().latest_sequence == sequences[-1]


@promise("message.proto", "HISTORY_NOT_KEPT (AVChatRoom), INVALID_ARGUMENT.")
def _(api):
    room, owner = api.group(AVCHAT)
    expect_error(lambda: api.messages.GetGroupMessages(message_pb2.GetGroupMessagesRequest(group_id=room),
                                                       metadata=user_md(owner), timeout=TIMEOUT),
                 PRECONDITION, "HISTORY_NOT_KEPT")


@promise("message.proto", "Never moves the read position backwards.")
def _(api):
    member = uid("m")
    gid, owner = api.group(PUBLIC, members=[member])
    sequences = [api.send(gid, owner, f"m{n}").message.sequence for n in range(3)]
    mark = lambda sequence: api.messages.MarkGroupRead(message_pb2.MarkGroupReadRequest(
        group_id=gid, read_sequence=sequence), metadata=user_md(member), timeout=TIMEOUT)
    assert mark(sequences[1]).unread_count == 1
    back = mark(sequences[0])
    assert back.read_sequence == sequences[1] and back.unread_count == 1
    assert mark(0).unread_count == 0


@promise("message.proto", "The unread count after the call (0 for Meeting and AVChatRoom).")
def _(api):
    member = uid("m")
    gid, owner = api.group(MEETING, members=[member])
    sequence = api.send(gid, owner, "one").message.sequence
    api.send(gid, owner, "two")
    read = api.messages.MarkGroupRead(message_pb2.MarkGroupReadRequest(group_id=gid, read_sequence=sequence),
                                      metadata=user_md(member), timeout=TIMEOUT)
    assert read.unread_count == 0 and read.read_sequence == sequence


@promise("message.proto", "Admin token only. Stored and streamed as a CUSTOM_NOTIFICATION event. Errors: ADMIN_TOKEN_REQUIRED")
def _(api):
    gid, owner = api.group(PUBLIC)
    notify = lambda md, **fields: api.messages.SendSystemNotification(message_pb2.SendSystemNotificationRequest(
        group_id=gid, **fields), metadata=md, timeout=TIMEOUT)
    expect_error(lambda: notify(user_md(owner), text="hello"), DENIED, "ADMIN_TOKEN_REQUIRED")
    expect_error(lambda: notify(admin_md()), INVALID, "INVALID_ARGUMENT")
    sent = notify(admin_md(), text="hello")
    assert sent.event.kind == common_pb2.EVENT_KIND_CUSTOM_NOTIFICATION and sent.event.group_id == gid


# ----------------------------------------------------------------------------------------------
# Remarks, privacy, search, who edits settings, an owner's quit, mutes, event details, presence
# ----------------------------------------------------------------------------------------------

def subscribe(api, request, metadata):
    """A Subscribe stream read in the background, once it has caught up."""
    stream = EventStream(api.channel, request, metadata)
    stream.until_caught_up()
    return stream


def next_event(stream):
    return stream.events(1)[0].event


def update_settings(api, gid, md, paths, **settings):
    return api.groups.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
        group_id=gid, update_mask=mask(*paths), settings=common_pb2.GroupSettings(**settings)),
        metadata=md, timeout=TIMEOUT)


@promise("common.proto", "Filled by GetGroupsInfo and ListJoinedGroups for a member who set one.")
def _(api):
    member = uid("m")
    gid, owner = api.group(members=[member])
    api.members.SetGroupRemark(member_pb2.SetGroupRemarkRequest(group_id=gid, remark="my team"),
                               metadata=user_md(member), timeout=TIMEOUT)
    assert api.info([gid], member).groups[0].remark == "my team"
    assert api.info([gid], owner).groups[0].remark == ""
    joined = api.groups.ListJoinedGroups(group_pb2.ListJoinedGroupsRequest(), metadata=user_md(member), timeout=TIMEOUT)
    assert {g.group_id: g.remark for g in joined.groups}[gid] == "my team"


@promise("common.proto", "The member's receive option. Only filled in the caller's own record (UNSPECIFIED in anyone else's, for the owner and admins too")
def _(api):
    member, admin = uid("m"), uid("a")
    gid, owner = api.group(members=[member], admins=[admin])
    api.members.SetReceiveMessageOption(member_pb2.SetReceiveMessageOptionRequest(
        group_id=gid, option=common_pb2.RECEIVE_MESSAGE_OPTION_NOT_RECEIVE), metadata=user_md(member), timeout=TIMEOUT)
    for viewer, seen in [(owner, common_pb2.RECEIVE_MESSAGE_OPTION_UNSPECIFIED),
                         (admin, common_pb2.RECEIVE_MESSAGE_OPTION_UNSPECIFIED),
                         (member, common_pb2.RECEIVE_MESSAGE_OPTION_NOT_RECEIVE)]:
        listed = api.members.ListMembers(member_pb2.ListMembersRequest(group_id=gid), metadata=user_md(viewer),
                                         timeout=TIMEOUT)
        assert {m.user_id: m.receive_message_option for m in listed.members}[member] == seen, viewer


@promise("group.proto", "The group id: equal to the keyword or starting with it, byte for byte (`%` and `_` are ordinary characters).")
def _(api):
    base = uid("pfx").replace("-", "")
    owner = uid("owner")
    made = [f"{base}_1", f"{base}_2", f"{base}x"]
    for group_id in made:
        api.groups.CreateGroup(group_pb2.CreateGroupRequest(group_id=group_id, type=PUBLIC, owner_user_id=owner,
                                                            profile=common_pb2.GroupProfile(name="p")),
                               metadata=admin_md(), timeout=TIMEOUT)
    def found(keyword):
        response = api.groups.SearchGroups(group_pb2.SearchGroupsRequest(
            keyword=keyword, fields=[group_pb2.SEARCH_FIELD_GROUP_ID], page_size=100), metadata=user_md(owner),
            timeout=TIMEOUT)
        return sorted(r.group.group_id for r in response.results)
    assert found(base) == sorted(made)
    assert found(f"{base}_") == [f"{base}_1", f"{base}_2"]
    assert found(f"{base}%") == []
    assert found(f"{base}_1") == [f"{base}_1"]


@promise("common.proto", "Public, Meeting and Community: OWNER_AND_ADMINS (Tencent: \"only the group owner or admin can modify the option for joining the group\"); Work and AVChatRoom: OWNER.")
def _(api):
    for group_type, scope in [(WORK, common_pb2.OPERATOR_SCOPE_OWNER), (PUBLIC, common_pb2.OPERATOR_SCOPE_OWNER_AND_ADMINS),
                              (MEETING, common_pb2.OPERATOR_SCOPE_OWNER_AND_ADMINS),
                              (AVCHAT, common_pb2.OPERATOR_SCOPE_OWNER),
                              (COMMUNITY, common_pb2.OPERATOR_SCOPE_OWNER_AND_ADMINS)]:
        gid, _ = api.group(group_type)
        assert api.info([gid]).groups[0].settings.settings_edit_scope == scope, group_type
    admin = uid("a")
    gid, _ = api.group(PUBLIC, admins=[admin])
    update_settings(api, gid, user_md(admin), ["join_option"], join_option=common_pb2.JOIN_OPTION_ANY)
    assert api.info([gid]).groups[0].settings.join_option == common_pb2.JOIN_OPTION_ANY


def invite(api, gid, inviter_md, user):
    """InviteMembers of one user; returns (result code, the invitation as the inviter lists it, if pending)."""
    result = api.members.InviteMembers(member_pb2.InviteMembersRequest(group_id=gid, user_ids=[user]),
                                       metadata=inviter_md, timeout=TIMEOUT).results[0]
    if result.result != common_pb2.MEMBER_RESULT_CODE_PENDING:
        return result.result, None
    listed = api.applications.ListApplications(application_pb2.ListApplicationsRequest(group_id=gid, page_size=100),
                                               metadata=inviter_md, timeout=TIMEOUT).applications
    return result.result, next(a for a in listed if a.application_id == result.application_id)


def check_requirement_defaults(api, path, defaults):
    """`path` starts at `defaults[type]` in every type; REQUIRED and NOT_REQUIRED swap where changeable
    (Work, Public, Community), and SETTING_FIXED_BY_TYPE names it where fixed (Meeting, AVChatRoom)."""
    required, not_required = common_pb2.REQUIREMENT_REQUIRED, common_pb2.REQUIREMENT_NOT_REQUIRED
    for group_type, default in defaults.items():
        gid, _ = api.group(group_type)
        assert getattr(api.info([gid]).groups[0].settings, path) == default, (group_type, path)
        other = not_required if default == required else required
        if group_type in (WORK, PUBLIC, COMMUNITY):
            update_settings(api, gid, admin_md(), [path], **{path: other})
            assert getattr(api.info([gid]).groups[0].settings, path) == other, (group_type, path)
        else:
            info = expect_error(lambda: update_settings(api, gid, admin_md(), [path], **{path: other}), PRECONDITION,
                                "SETTING_FIXED_BY_TYPE")
            assert info.metadata["setting"] == path, info


REQUIRED, NOT_REQUIRED = common_pb2.REQUIREMENT_REQUIRED, common_pb2.REQUIREMENT_NOT_REQUIRED


@promise("common.proto", "Public: REQUIRED (changeable; Tencent: \"The invitation needs to be both accepted by the invitee and approved by the group owner or group admin\"), so even the owner's invitation is PENDING until the invitee accepts; Work and Community: NOT_REQUIRED (changeable); Meeting and AVChatRoom: NOT_REQUIRED (fixed).")
def _(api):
    check_requirement_defaults(api, "invitee_consent", {WORK: NOT_REQUIRED, PUBLIC: REQUIRED, MEETING: NOT_REQUIRED,
                                                        AVCHAT: NOT_REQUIRED, COMMUNITY: NOT_REQUIRED})
    gid, owner = api.group(PUBLIC)
    code, invitation = invite(api, gid, user_md(owner), uid("i"))
    assert code == common_pb2.MEMBER_RESULT_CODE_PENDING
    assert invitation.needs_consent and not invitation.needs_approval, invitation
    gid, owner = api.group(WORK)
    assert invite(api, gid, user_md(owner), uid("i"))[0] == SUCCESS


@promise("common.proto", "The backend's own invitations (without x-operator-id) need no consent.")
def _(api):
    gid, owner = api.group(PUBLIC)
    # Acting for the owner (x-operator-id) the backend is the owner, whose invitee is asked.
    assert invite(api, gid, admin_md(operator=owner), uid("i"))[0] == common_pb2.MEMBER_RESULT_CODE_PENDING
    assert invite(api, gid, admin_md(), uid("i"))[0] == SUCCESS


@promise("common.proto", "(Tencent Public, OpenIM needVerification). Public: REQUIRED (changeable); Work and Community: NOT_REQUIRED (changeable); Meeting and AVChatRoom: NOT_REQUIRED (fixed).")
def _(api):
    check_requirement_defaults(api, "invite_approval", {WORK: NOT_REQUIRED, PUBLIC: REQUIRED, MEETING: NOT_REQUIRED,
                                                        AVCHAT: NOT_REQUIRED, COMMUNITY: NOT_REQUIRED})
    # Public: an inviter outside approver_scope needs an approver; the owner and admins do not.
    admin, member = uid("a"), uid("m")
    gid, owner = api.group(PUBLIC, admins=[admin], members=[member])
    update_settings(api, gid, user_md(owner), ["invite_scope", "invitee_consent"],
                    invite_scope=common_pb2.OPERATOR_SCOPE_ALL_MEMBERS, invitee_consent=NOT_REQUIRED)
    code, invitation = invite(api, gid, user_md(member), uid("i"))
    assert code == common_pb2.MEMBER_RESULT_CODE_PENDING
    assert invitation.needs_approval and not invitation.needs_consent, invitation
    assert invite(api, gid, user_md(admin), uid("i"))[0] == SUCCESS
    assert invite(api, gid, user_md(owner), uid("i"))[0] == SUCCESS
    # Work and Community: a member's invitation is not sent to an approver.
    for group_type in (WORK, COMMUNITY):
        gid, _ = api.group(group_type, members=[member])
        assert invite(api, gid, user_md(member), uid("i"))[0] == SUCCESS, group_type


@promise("common.proto", "The backend's own invitations (without x-operator-id) need no approval.")
def _(api):
    member = uid("m")
    gid, _ = api.group(PUBLIC, members=[member])
    update_settings(api, gid, admin_md(), ["invite_scope", "invitee_consent"],
                    invite_scope=common_pb2.OPERATOR_SCOPE_ALL_MEMBERS, invitee_consent=NOT_REQUIRED)
    # Acting for the member (x-operator-id) the backend has the member's role; without it, none.
    assert invite(api, gid, admin_md(operator=member), uid("i"))[0] == common_pb2.MEMBER_RESULT_CODE_PENDING
    assert invite(api, gid, admin_md(), uid("i"))[0] == SUCCESS


@promise("common.proto", "names the GroupSettings field that decided, where one did.")
def _(api):
    member = uid("m")
    gid, _ = api.group(WORK, members=[member])
    info = expect_error(lambda: update_settings(api, gid, user_md(member), ["invite_scope"],
                                                invite_scope=common_pb2.OPERATOR_SCOPE_OWNER), DENIED, "PERMISSION_DENIED")
    assert info.metadata["setting"] == "settings_edit_scope", info
    info = expect_error(lambda: api.groups.CreateGroup(group_pb2.CreateGroupRequest(
        group_id=uid("g"), type=AVCHAT, owner_user_id=uid("o"), profile=common_pb2.GroupProfile(name="r"),
        settings=common_pb2.GroupSettings(remove_scope=common_pb2.OPERATOR_SCOPE_OWNER)), metadata=admin_md(),
        timeout=TIMEOUT), PRECONDITION, "SETTING_FIXED_BY_TYPE")
    assert info.metadata["setting"] == "remove_scope", info


@promise("common.proto", "This setting and owner_quit are changed only by the owner (and the backend), whatever this grants.")
def _(api):
    admin = uid("a")
    gid, owner = api.group(PUBLIC, admins=[admin])
    for path, value in [("settings_edit_scope", {"settings_edit_scope": common_pb2.OPERATOR_SCOPE_ALL_MEMBERS}),
                        ("owner_quit", {"owner_quit": common_pb2.OWNER_QUIT_RULE_TO_LONGEST_STANDING_MEMBER})]:
        info = expect_error(lambda: update_settings(api, gid, user_md(admin), [path], **value), DENIED, "PERMISSION_DENIED")
        assert info.metadata["setting"] == path, info
    update_settings(api, gid, user_md(owner), ["owner_quit"], owner_quit=common_pb2.OWNER_QUIT_RULE_TO_LONGEST_STANDING_MEMBER)
    assert api.info([gid]).groups[0].settings.owner_quit == common_pb2.OWNER_QUIT_RULE_TO_LONGEST_STANDING_MEMBER


@promise("common.proto", "What the owner's quit does. Work: TO_LONGEST_STANDING_MEMBER; Public, Meeting and Community: REFUSED")
def _(api):
    first, second = uid("first"), uid("second")
    gid, owner = api.group(WORK, members=[first, second])
    api.members.QuitGroup(member_pb2.QuitGroupRequest(group_id=gid), metadata=user_md(owner), timeout=TIMEOUT)
    assert api.info([gid]).groups[0].owner_user_id == first
    for group_type in (PUBLIC, MEETING, COMMUNITY):
        gid, owner = api.group(group_type, members=[first])
        info = expect_error(lambda: api.members.QuitGroup(member_pb2.QuitGroupRequest(group_id=gid),
                                                          metadata=user_md(owner), timeout=TIMEOUT),
                            PRECONDITION, "OWNER_CANNOT_QUIT")
        assert info.metadata["setting"] == "owner_quit", info


@promise("common.proto", "Who set this state (in a GROUP_MUTED event: who muted or unmuted)")
def _(api):
    gid, owner = api.group(PUBLIC)
    api.groups.SetGroupMute(group_pb2.SetGroupMuteRequest(group_id=gid, muted=True, mode=common_pb2.GROUP_MUTE_MODE_ALL),
                            metadata=user_md(owner), timeout=TIMEOUT)
    assert api.info([gid]).groups[0].mute.operator_user_id == owner


@promise("common.proto", "Tip: settings or the maximum member count changed (UpdateGroupSettings; ZIM groupVerifyInfoUpdated). Detail: settings_change.")
def _(api):
    gid, owner = api.group(PUBLIC)
    settings = subscribe(api, event_pb2.SubscribeRequest(group_ids=[gid], kinds=[common_pb2.EVENT_KIND_GROUP_SETTINGS_CHANGED]),
                         admin_md())
    update_settings(api, gid, user_md(owner), ["join_option"], join_option=common_pb2.JOIN_OPTION_ANY)
    api.groups.UpdateGroupProfile(group_pb2.UpdateGroupProfileRequest(
        group_id=gid, update_mask=mask("name"), profile=common_pb2.GroupProfile(name="renamed")),
        metadata=user_md(owner), timeout=TIMEOUT)
    update_settings(api, gid, user_md(owner), ["join_option"], join_option=common_pb2.JOIN_OPTION_APPROVAL)
    first, second = next_event(settings), next_event(settings)
    settings.cancel()
    assert [e.kind for e in (first, second)] == [common_pb2.EVENT_KIND_GROUP_SETTINGS_CHANGED] * 2
    assert list(first.settings_change.changed_fields) == ["join_option"]
    assert first.settings_change.settings.join_option == common_pb2.JOIN_OPTION_ANY
    assert second.settings_change.settings.join_option == common_pb2.JOIN_OPTION_APPROVAL


@promise("common.proto", "Tip: members were muted or unmuted; operator = who did it. Detail: member_change: changed_fields `mute_until`, each member's user_id and mute_until (the mute's end; absent = unmuted).")
def _(api):
    member = uid("m")
    gid, owner = api.group(PUBLIC, members=[member])
    stream = subscribe(api, event_pb2.SubscribeRequest(group_ids=[gid], kinds=[common_pb2.EVENT_KIND_MEMBER_MUTED]),
                       admin_md())
    for seconds in (60, 0):
        api.members.MuteMembers(member_pb2.MuteMembersRequest(group_id=gid, user_ids=[member], duration_seconds=seconds),
                                metadata=user_md(owner), timeout=TIMEOUT)
    muted, unmuted = next_event(stream), next_event(stream)
    stream.cancel()
    assert muted.operator_user_id == owner and list(muted.member_change.changed_fields) == ["mute_until"]
    assert muted.member_change.members[0].user_id == member and muted.member_change.members[0].HasField("mute_until")
    assert not unmuted.member_change.members[0].HasField("mute_until")


@promise("common.proto", "The member count after the change (joins, quits, kicks). 0 in an AVChatRoom, whose count is of viewers online: read Group.member_count.")
def _(api):
    viewer, member = uid("viewer"), uid("m")
    gid, _ = api.group(MEETING)  # anyone joins a Meeting group
    stream = subscribe(api, event_pb2.SubscribeRequest(group_ids=[gid], kinds=[common_pb2.EVENT_KIND_MEMBER_JOINED]),
                       admin_md())
    api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=gid), metadata=user_md(member), timeout=TIMEOUT)
    joined = next_event(stream)
    stream.cancel()
    assert joined.member_count == api.info([gid]).groups[0].member_count == 2
    room, _ = api.group(AVCHAT)
    stream = subscribe(api, event_pb2.SubscribeRequest(group_ids=[room], kinds=[common_pb2.EVENT_KIND_MEMBER_JOINED]),
                       admin_md())
    viewing = subscribe(api, event_pb2.SubscribeRequest(), user_md(viewer))
    api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=room), metadata=user_md(viewer), timeout=TIMEOUT)
    joined = next_event(stream)
    stream.cancel()
    viewing.cancel()
    assert joined.member_count == 0 and joined.target_user_ids == [viewer]


@promise("event.proto", "a kicked user receives the KICKED event, then nothing more of that group.")
def _(api):
    member = uid("m")
    gid, owner = api.group(PUBLIC, members=[member])
    other, _ = api.group(PUBLIC, owner=owner, members=[member])
    stream = subscribe(api, event_pb2.SubscribeRequest(), user_md(member))
    api.members.KickMembers(member_pb2.KickMembersRequest(group_id=gid, user_ids=[member]), metadata=user_md(owner),
                            timeout=TIMEOUT)
    api.send(gid, owner, "after the kick")
    api.send(other, owner, "elsewhere")
    items = stream.until(lambda item: item.WhichOneof("item") == "message" and item.message.group_id == other)
    stream.cancel()
    from_group = [item for item in items if (item.event.group_id if item.HasField("event") else item.message.group_id) == gid]
    assert from_group[-1].WhichOneof("item") == "event" and from_group[-1].event.kind == common_pb2.EVENT_KIND_KICKED, items


@promise("event.proto", "Resume cursor: subscribing again with it continues right after this item.")
def _(api):
    gid, owner = api.group(PUBLIC)
    request = lambda cursor="": event_pb2.SubscribeRequest(group_ids=[gid], cursor=cursor)
    stream = subscribe(api, request(), user_md(owner))
    for text in ("one", "two", "three"):
        api.send(gid, owner, text)
    first, second, third = stream.take(3)
    stream.cancel()
    assert [i.message.text for i in (first, second, third)] == ["one", "two", "three"]
    resumed = EventStream(api.channel, request(first.cursor), user_md(owner))
    backlog = resumed.until_caught_up()
    resumed.cancel()
    assert [i.message.text for i in backlog if i.HasField("message")] == ["two", "three"]


@promise("event.proto", "Errors: INVALID_ARGUMENT (malformed cursor).")
def _(api):
    gid, owner = api.group(PUBLIC)
    stream = EventStream(api.channel, event_pb2.SubscribeRequest(cursor="not a cursor"), user_md(owner))
    stream.done.wait(TIMEOUT)
    assert stream.error is not None and stream.error.code() == INVALID, stream.error
    assert error_info(stream.error).reason == "INVALID_ARGUMENT"


@promise("event.proto", "Do not deliver group messages, only events.")
def _(api):
    gid, owner = api.group(PUBLIC)
    stream = subscribe(api, event_pb2.SubscribeRequest(group_ids=[gid], exclude_messages=True), user_md(owner))
    api.send(gid, owner, "not delivered")
    api.groups.UpdateGroupProfile(group_pb2.UpdateGroupProfileRequest(
        group_id=gid, update_mask=mask("name"), profile=common_pb2.GroupProfile(name="renamed")),
        metadata=user_md(owner), timeout=TIMEOUT)
    item = stream.next()
    stream.cancel()
    assert item.WhichOneof("item") == "event" and item.event.kind == common_pb2.EVENT_KIND_GROUP_INFO_CHANGED, item


@promise("event.proto", "A user's streams keep them online in the AVChatRooms they joined (Group.member_count), on whichever node they are held.")
def _(api):
    viewer = uid("viewer")
    gid, _ = api.group(AVCHAT)
    before = api.info([gid]).groups[0].member_count
    stream = subscribe(api, event_pb2.SubscribeRequest(), user_md(viewer))
    api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=gid), metadata=user_md(viewer), timeout=TIMEOUT)
    assert api.info([gid]).groups[0].member_count == before + 1
    # A second stream of the same viewer counts once.
    again = subscribe(api, event_pb2.SubscribeRequest(), user_md(viewer))
    assert api.info([gid]).groups[0].member_count == before + 1
    again.cancel()
    stream.cancel()



# ----------------------------------------------------------------------------------------------
# Group attributes, counters and invite links
# ----------------------------------------------------------------------------------------------

@promise("group.proto", "one that does not hold fails the call with ABORTED / ATTRIBUTE_VERSION_MISMATCH naming the key.")
def _(api):
    gid, owner = api.group()
    write = lambda version: api.groups.SetGroupAttributes(group_pb2.SetGroupAttributesRequest(
        group_id=gid, attributes=[group_pb2.AttributeWrite(key="k", value=b"v", expected_version=version)]),
        metadata=user_md(owner), timeout=TIMEOUT)
    version = write(-1).attributes[0].version
    info = expect_error(lambda: write(-1), grpc.StatusCode.ABORTED, "ATTRIBUTE_VERSION_MISMATCH")
    assert info.metadata["key"] == "k" and info.metadata["current_version"] == str(version)


@promise("group.proto", "The increments run in the store's write transaction: concurrent calls never lose one another.")
def _(api):
    gid, owner = api.group()
    def bump(_):
        api.groups.IncrementGroupCounters(group_pb2.IncrementGroupCountersRequest(group_id=gid, deltas={"n": 1}),
                                          metadata=user_md(owner), timeout=TIMEOUT)
    threads = [threading.Thread(target=bump, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    values = api.groups.GetGroupCounters(group_pb2.GetGroupCountersRequest(group_id=gid), metadata=admin_md(),
                                         timeout=TIMEOUT).values
    assert dict(values) == {"n": 16}


@promise("common.proto", "Only in the CreateInviteLink response: groupd keeps only its SHA-256.")
def _(api):
    gid, owner = api.group()
    link = api.members.CreateInviteLink(member_pb2.CreateInviteLinkRequest(group_id=gid), metadata=user_md(owner),
                                        timeout=TIMEOUT).link
    assert len(link.token) == 22
    listed = api.members.ListInviteLinks(member_pb2.ListInviteLinksRequest(group_id=gid), metadata=user_md(owner),
                                         timeout=TIMEOUT).links
    assert [(l.link_id, l.token) for l in listed] == [(link.link_id, "")]


def _react(api, method, gid, sequence, key, md):
    request = getattr(message_pb2, method + "Request")(group_id=gid, sequence=sequence, reaction_key=key)
    return getattr(api.messages, method)(request, metadata=md, timeout=TIMEOUT)


@promise("message.proto", "Idempotent: adding a reaction the operator already has changes nothing, emits nothing and answers `changed` false.")
def _(api):
    member = uid("m")
    gid, owner = api.group(PUBLIC, members=[member])
    sequence = api.send(gid, owner).message.sequence
    events = EventStream(api.channel, event_pb2.SubscribeRequest(
        group_ids=[gid], kinds=[common_pb2.EVENT_KIND_MESSAGE_REACTION_ADDED]), user_md(owner))
    events.until_caught_up()
    first = _react(api, "AddMessageReaction", gid, sequence, "+1", user_md(member))
    again = _react(api, "AddMessageReaction", gid, sequence, "+1", user_md(member))
    assert first.changed and not again.changed and again.reaction.count == 1
    _react(api, "AddMessageReaction", gid, sequence, "ok", user_md(owner))
    # The next event after the first add is the owner's: the repeat emitted nothing.
    added = [item.event for item in events.events(2)]
    events.cancel()
    assert [(e.operator_user_id, e.reaction.reaction_key, e.reaction.count) for e in added] == [
        (member, "+1", 1), (owner, "ok", 1)]


@promise("message.proto", "a muted member too (a reaction is not a message)")
def _(api):
    member = uid("m")
    gid, owner = api.group(PUBLIC, members=[member])
    sequence = api.send(gid, owner).message.sequence
    api.members.MuteMembers(member_pb2.MuteMembersRequest(group_id=gid, user_ids=[member], duration_seconds=600),
                            metadata=user_md(owner), timeout=TIMEOUT)
    assert _react(api, "AddMessageReaction", gid, sequence, "+1", user_md(member)).changed


@promise("common.proto", "MESSAGE_RECALLED (FAILED_PRECONDITION): EditGroupMessage, AddMessageReaction or RemoveMessageReaction on a recalled message")
def _(api):
    gid, owner = api.group(PUBLIC)
    sequence = api.send(gid, owner).message.sequence
    _react(api, "AddMessageReaction", gid, sequence, "+1", user_md(owner))
    api.messages.RecallGroupMessage(message_pb2.RecallGroupMessageRequest(group_id=gid, sequence=sequence),
                                    metadata=user_md(owner), timeout=TIMEOUT)
    for method in ("AddMessageReaction", "RemoveMessageReaction"):
        expect_error(lambda: _react(api, method, gid, sequence, "+1", user_md(owner)), PRECONDITION, "MESSAGE_RECALLED")
    info = expect_error(lambda: api.messages.EditGroupMessage(message_pb2.EditGroupMessageRequest(
        group_id=gid, sequence=sequence, text="back"), metadata=user_md(owner), timeout=TIMEOUT), PRECONDITION,
        "MESSAGE_RECALLED")
    assert info.metadata["field"] == "sequence"


@promise("common.proto", "INVALID_REACTION_KEY (INVALID_ARGUMENT): a reaction key that is empty")
def _(api):
    gid, owner = api.group(PUBLIC)
    sequence = api.send(gid, owner).message.sequence
    for key in ("", "a" * 33, "a b", "\x00"):
        info = expect_error(lambda: _react(api, "AddMessageReaction", gid, sequence, key, user_md(owner)), INVALID,
                            "INVALID_REACTION_KEY")
        assert info.metadata["field"] == "reaction_key"


@promise("message.proto", "The reactions of up to 50 messages: per message its keys with their counts, whether the caller reacted with each, and the first users of each key.")
def _(api):
    member = uid("m")
    gid, owner = api.group(PUBLIC, members=[member])
    sequence = api.send(gid, owner).message.sequence
    _react(api, "AddMessageReaction", gid, sequence, "+1", user_md(member))
    _react(api, "AddMessageReaction", gid, sequence, "+1", user_md(owner))
    _react(api, "AddMessageReaction", gid, sequence, "ok", user_md(owner))
    answer = api.messages.GetMessageReactions(message_pb2.GetMessageReactionsRequest(
        group_id=gid, sequences=[sequence], max_users_per_reaction=5), metadata=user_md(member), timeout=TIMEOUT)
    assert [(r.reaction_key, r.count, r.reacted_by_caller, list(r.user_ids)) for r in answer.messages[0].reactions] == [
        ("+1", 2, True, [member, owner]), ("ok", 1, False, [owner])]


@promise("message.proto", "Who reacted to a message with one key, earliest first, paged.")
def _(api):
    users = [uid("m") for _ in range(3)]
    gid, owner = api.group(PUBLIC, members=users)
    sequence = api.send(gid, owner).message.sequence
    for user in users:
        _react(api, "AddMessageReaction", gid, sequence, "+1", user_md(user))
    listed, token = [], ""
    while True:
        page = api.messages.ListMessageReactionUsers(message_pb2.ListMessageReactionUsersRequest(
            group_id=gid, sequence=sequence, reaction_key="+1", page_size=2, page_token=token),
            metadata=user_md(owner), timeout=TIMEOUT)
        listed += page.user_ids
        token = page.next_page_token
        if not token:
            break
    assert listed == users and page.count == 3

def _replies(api, gid, sequence, md, **fields):
    return api.messages.ListMessageReplies(message_pb2.ListMessageRepliesRequest(
        group_id=gid, sequence=sequence, **fields), metadata=md, timeout=TIMEOUT)


@promise("message.proto", "The replies to one message (the stored messages whose reply_to names it), oldest first, paged.")
def _(api):
    member = uid("m")
    gid, owner = api.group(PUBLIC, members=[member])
    original = api.send(gid, owner, "question").message
    sent = [api.send(gid, user, "answer", reply_to_sequence=original.sequence).message.sequence
            for user in (member, owner, member)]
    listed, token = [], ""
    while True:
        page = _replies(api, gid, original.sequence, user_md(member), page_size=2, page_token=token)
        listed += [reply.sequence for reply in page.replies]
        token = page.next_page_token
        if not token:
            break
    assert listed == sent


@promise("message.proto", "that follows the original's edits and becomes a tombstone when the original is recalled.")
def _(api):
    member = uid("m")
    gid, owner = api.group(PUBLIC, members=[member])
    original = api.send(gid, member, "first words").message
    reply = api.send(gid, owner, "noted", reply_to_sequence=original.sequence).message
    assert (reply.reply_to.preview, reply.reply_to.recalled) == ("first words", False)
    api.messages.EditGroupMessage(message_pb2.EditGroupMessageRequest(
        group_id=gid, sequence=original.sequence, text="better words"), metadata=user_md(member), timeout=TIMEOUT)
    (shown,) = _replies(api, gid, original.sequence, user_md(owner)).replies
    assert shown.reply_to.preview == "better words"
    api.messages.RecallGroupMessage(message_pb2.RecallGroupMessageRequest(
        group_id=gid, sequence=original.sequence), metadata=user_md(member), timeout=TIMEOUT)
    (shown,) = _replies(api, gid, original.sequence, user_md(owner)).replies
    assert (shown.reply_to.recalled, shown.reply_to.preview, shown.reply_to.type) == (True, "", "")


@promise("common.proto", "and SendGroupMessage replying to one")
def _(api):
    gid, owner = api.group(PUBLIC)
    sequence = api.send(gid, owner, "gone").message.sequence
    api.messages.RecallGroupMessage(message_pb2.RecallGroupMessageRequest(group_id=gid, sequence=sequence),
                                    metadata=user_md(owner), timeout=TIMEOUT)
    info = expect_error(lambda: api.send(gid, owner, "re", reply_to_sequence=sequence), PRECONDITION, "MESSAGE_RECALLED")
    assert info.metadata["field"] == "reply_to_sequence"


# ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def api(groupd):
    with api_channel(groupd.address) as channel:
        yield API(channel)


@pytest.mark.parametrize("row", CONTRACT, ids=lambda row: row.id)
def test_the_proto_still_says_it(row):
    assert fold(row.quote) in comments(row.proto), (
        f"{row.proto} no longer says {row.quote!r}: update the row (or the comment) in tests/test_contract.py")


@pytest.mark.parametrize("row", CONTRACT, ids=lambda row: row.id)
def test_groupd_keeps_it(row, api):
    row.check(api)


def test_every_row_quotes_a_different_sentence():
    quotes = [(row.proto, fold(row.quote)) for row in CONTRACT]
    assert len(quotes) == len(set(quotes))
