"""The mute bypass list through a real groupd with stock grpcio: UpdateMuteBypassList, the list on the group
(Group.mute_bypass_user_ids), SendGroupMessage under a group mute (the list is exempt, a member mute still
applies), a leaver dropping off, MUTE_BYPASS_CHANGED, who may change it, bad input and the per-group limit
(a clear status naming the field, nothing changed)."""

import grpc
import pytest

from support import EventStream, admin_md, expect_error, uid, user_md
from groupd.v1 import (common_pb2, event_pb2, group_pb2, group_pb2_grpc, member_pb2, member_pb2_grpc, message_pb2,
                       message_pb2_grpc)

K = common_pb2


class Api:
    def __init__(self, channel):
        self.channel = channel
        self.groups = group_pb2_grpc.GroupServiceStub(channel)
        self.members = member_pb2_grpc.MemberServiceStub(channel)
        self.messages = message_pb2_grpc.MessageServiceStub(channel)

    def create(self, group_type, owner, members=(), admins=()):
        gid = uid("g")
        self.groups.CreateGroup(group_pb2.CreateGroupRequest(
            group_id=gid, type=group_type, owner_user_id=owner, profile=K.GroupProfile(name="bypass"),
            members=[group_pb2.InitialMember(user_id=u, role=K.MEMBER_ROLE_ADMIN) for u in admins]
            + [group_pb2.InitialMember(user_id=u, role=K.MEMBER_ROLE_MEMBER) for u in members]),
            metadata=admin_md(), timeout=10)
        return gid

    def update(self, gid, md, add=(), remove=()):
        return self.groups.UpdateMuteBypassList(group_pb2.UpdateMuteBypassListRequest(
            group_id=gid, add_user_ids=list(add), remove_user_ids=list(remove)), metadata=md, timeout=10)

    def bypass(self, gid, md=None):
        (group,) = self.groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[gid]),
                                             metadata=md or admin_md(), timeout=10).groups
        return list(group.mute_bypass_user_ids)

    def send(self, gid, user):
        return self.messages.SendGroupMessage(message_pb2.SendGroupMessageRequest(group_id=gid, type="text", text="hi"),
                                              metadata=user_md(user), timeout=10)

    def mute_group(self, gid, md):
        self.groups.SetGroupMute(group_pb2.SetGroupMuteRequest(group_id=gid, muted=True, mode=K.GROUP_MUTE_MODE_ALL),
                                 metadata=md, timeout=10)


@pytest.fixture
def api(channel):
    return Api(channel)


def test_the_bypass_list_is_exempt_from_a_group_mute(api):
    owner, bob, carol = uid("owner"), uid("bob"), uid("carol")
    gid = api.create(K.GROUP_TYPE_PUBLIC, owner, [bob, carol])
    assert list(api.update(gid, user_md(owner), add=[bob]).mute_bypass_user_ids) == [bob]
    assert api.bypass(gid) == [bob] and api.bypass(gid, user_md(carol)) == [bob]
    api.mute_group(gid, user_md(owner))
    assert api.send(gid, bob).message.sender_user_id == bob
    expect_error(lambda: api.send(gid, carol), grpc.StatusCode.PERMISSION_DENIED, "GROUP_MUTED")
    # A member mute still applies to someone on the list.
    api.members.MuteMembers(member_pb2.MuteMembersRequest(group_id=gid, user_ids=[bob], duration_seconds=60),
                            metadata=user_md(owner), timeout=10)
    expect_error(lambda: api.send(gid, bob), grpc.StatusCode.PERMISSION_DENIED, "MEMBER_MUTED")
    # Removed: the group mute applies again.
    api.members.MuteMembers(member_pb2.MuteMembersRequest(group_id=gid, user_ids=[bob], duration_seconds=0),
                            metadata=user_md(owner), timeout=10)
    assert list(api.update(gid, user_md(owner), remove=[bob]).mute_bypass_user_ids) == []
    expect_error(lambda: api.send(gid, bob), grpc.StatusCode.PERMISSION_DENIED, "GROUP_MUTED")


def test_non_members_see_no_bypass_list(api):
    owner, bob = uid("owner"), uid("bob")
    gid = api.create(K.GROUP_TYPE_PUBLIC, owner, [bob])
    api.update(gid, user_md(owner), add=[bob])
    assert api.bypass(gid, user_md(uid("outsider"))) == []


def test_a_member_who_leaves_drops_off_the_list(api):
    owner, bob, carol, dave = uid("owner"), uid("bob"), uid("carol"), uid("dave")
    gid = api.create(K.GROUP_TYPE_PUBLIC, owner, [bob, carol, dave])
    api.update(gid, user_md(owner), add=[bob, carol, dave])
    api.members.QuitGroup(member_pb2.QuitGroupRequest(group_id=gid), metadata=user_md(bob), timeout=10)
    assert api.bypass(gid) == [carol, dave]
    api.members.KickMembers(member_pb2.KickMembersRequest(group_id=gid, user_ids=[carol]), metadata=user_md(owner),
                            timeout=10)
    assert api.bypass(gid) == [dave]
    api.members.BanMembers(member_pb2.BanMembersRequest(group_id=gid, user_ids=[dave]), metadata=user_md(owner),
                           timeout=10)
    assert api.bypass(gid) == []
    # Rejoining does not put anyone back.
    api.members.InviteMembers(member_pb2.InviteMembersRequest(group_id=gid, user_ids=[bob]), metadata=admin_md(),
                              timeout=10)
    assert api.bypass(gid) == []


def test_mute_bypass_changed_event(api):
    owner, bob, carol = uid("owner"), uid("bob"), uid("carol")
    gid = api.create(K.GROUP_TYPE_PUBLIC, owner, [bob, carol])
    api.update(gid, user_md(owner), add=[bob])
    stream = EventStream(api.channel, event_pb2.SubscribeRequest(group_ids=[gid], kinds=[K.EVENT_KIND_MUTE_BYPASS_CHANGED]),
                         user_md(carol))
    stream.until_caught_up()
    api.update(gid, user_md(owner), add=[carol], remove=[bob])
    (item,) = stream.events(1)
    stream.cancel()
    event = item.event
    assert event.kind == K.EVENT_KIND_MUTE_BYPASS_CHANGED and event.operator_user_id == owner
    assert list(event.recipient_user_ids) == []
    assert event.WhichOneof("detail") == "mute_bypass"
    assert list(event.mute_bypass.added_user_ids) == [carol]
    assert list(event.mute_bypass.removed_user_ids) == [bob]
    assert list(event.mute_bypass.user_ids) == [carol]
    # Replayed from the store: the same event, detail included.
    replay = EventStream(api.channel, event_pb2.SubscribeRequest(
        group_ids=[gid], kinds=[K.EVENT_KIND_MUTE_BYPASS_CHANGED], from_oldest=True), admin_md())
    stored = [item.event for item in replay.until_caught_up() if item.WhichOneof("item") == "event"]
    replay.cancel()
    assert [e for e in stored if e.sequence == event.sequence] == [event]
    assert len(stored) == 2  # the first addition too
    # A change that changes nothing emits nothing and answers the list.
    assert list(api.update(gid, user_md(owner), add=[carol]).mute_bypass_user_ids) == [carol]


def test_who_may_change_the_list(api):
    owner, admin, bob = uid("owner"), uid("admin"), uid("bob")
    public = api.create(K.GROUP_TYPE_PUBLIC, owner, [bob], admins=[admin])
    assert list(api.update(public, user_md(admin), add=[bob]).mute_bypass_user_ids) == [bob]
    info = expect_error(lambda: api.update(public, user_md(bob), remove=[bob]), grpc.StatusCode.PERMISSION_DENIED,
                        "PERMISSION_DENIED")
    assert info.metadata["role"] == "member"
    expect_error(lambda: api.update(public, user_md(uid("out")), add=[bob]), grpc.StatusCode.PERMISSION_DENIED,
                 "NOT_A_MEMBER")
    work = api.create(K.GROUP_TYPE_WORK, owner, [bob], admins=[])
    expect_error(lambda: api.update(work, user_md(bob), add=[bob]), grpc.StatusCode.PERMISSION_DENIED,
                 "PERMISSION_DENIED")
    assert list(api.update(work, admin_md(), add=[bob]).mute_bypass_user_ids) == [bob]
    assert api.bypass(public) == [bob]


def test_bad_requests_change_nothing(api):
    owner, bob = uid("owner"), uid("bob")
    gid = api.create(K.GROUP_TYPE_PUBLIC, owner, [bob])
    info = expect_error(lambda: api.update(gid, user_md(owner)), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "add_user_ids"
    stranger = uid("stranger")
    info = expect_error(lambda: api.update(gid, user_md(owner), add=[bob, stranger]), grpc.StatusCode.NOT_FOUND,
                        "MEMBER_NOT_FOUND")
    assert info.metadata["field"] == "add_user_ids[1]"
    info = expect_error(lambda: api.update(gid, user_md(owner), add=[bob], remove=[bob]),
                        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "remove_user_ids[0]"
    info = expect_error(lambda: api.update(gid, user_md(owner), add=[""]), grpc.StatusCode.INVALID_ARGUMENT,
                        "INVALID_ARGUMENT")
    assert info.metadata["field"] == "add_user_ids[0]"
    info = expect_error(lambda: api.update(gid, user_md(owner), remove=[uid("u") for _ in range(101)]),
                        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["limit"] == "100"
    expect_error(lambda: api.update(uid("nope"), admin_md(), add=[bob]), grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")
    assert api.bypass(gid) == []


def test_the_bypass_list_limit(fresh_groupd):
    server = fresh_groupd(limits={"max_mute_bypass_per_group": 1}).start()
    with grpc.insecure_channel(server.address) as channel:
        api = Api(channel)
        owner, bob, carol = uid("owner"), uid("bob"), uid("carol")
        gid = api.create(K.GROUP_TYPE_PUBLIC, owner, [bob, carol])
        api.update(gid, user_md(owner), add=[bob])
        info = expect_error(lambda: api.update(gid, user_md(owner), add=[carol]), grpc.StatusCode.FAILED_PRECONDITION,
                            "MUTE_BYPASS_FULL")
        assert info.metadata["limit"] == "1"
        assert api.bypass(gid) == [bob]
        # Swapping in one call stays within the limit.
        assert list(api.update(gid, user_md(owner), add=[carol], remove=[bob]).mute_bypass_user_ids) == [carol]
