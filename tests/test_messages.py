"""MessageService through a real groupd with stock grpcio: SendGroupMessage (idempotent retries,
member and group mutes with expiry, AVChatRoom shedding order), GetGroupMessages (history rules
per type, paging both ways), MarkGroupRead with the unread counts of ListJoinedGroups, and
SendSystemNotification: each RPC once, with its main error.
"""
import concurrent.futures

import grpc
import pytest
from google.protobuf import field_mask_pb2

from support import Groupd, admin_md, error_info, expect_error, uid, user_md
from groupd.v1 import (common_pb2, group_pb2, group_pb2_grpc, member_pb2, member_pb2_grpc, message_pb2,
                       message_pb2_grpc)

PUBLIC, WORK, MEETING, AV = (common_pb2.GROUP_TYPE_PUBLIC, common_pb2.GROUP_TYPE_WORK,
                             common_pb2.GROUP_TYPE_MEETING, common_pb2.GROUP_TYPE_AV_CHAT_ROOM)
MEMBER, ADMIN = common_pb2.MEMBER_ROLE_MEMBER, common_pb2.MEMBER_ROLE_ADMIN
HIGH, NORMAL, LOW = common_pb2.MESSAGE_PRIORITY_HIGH, common_pb2.MESSAGE_PRIORITY_NORMAL, common_pb2.MESSAGE_PRIORITY_LOW
SENT, SHED = message_pb2.SEND_RESULT_SENT, message_pb2.SEND_RESULT_SHED


class Stubs:
    def __init__(self, channel):
        self.groups = group_pb2_grpc.GroupServiceStub(channel)
        self.members = member_pb2_grpc.MemberServiceStub(channel)
        self.messages = message_pb2_grpc.MessageServiceStub(channel)

    def create(self, group_type, owner, members=()):
        return self.groups.CreateGroup(group_pb2.CreateGroupRequest(
            group_id=uid("g"), type=group_type, owner_user_id=owner, profile=common_pb2.GroupProfile(name="team"),
            members=[group_pb2.InitialMember(user_id=user, role=role) for user, role in members]),
            metadata=admin_md(), timeout=10).group.group_id

    def send(self, group, user, text="hi", client_id="", priority=0):
        return self.messages.SendGroupMessage(message_pb2.SendGroupMessageRequest(
            group_id=group, type="text", text=text, client_message_id=client_id, priority=priority),
            metadata=user_md(user), timeout=10)

    def texts(self, group, user):
        page = self.messages.GetGroupMessages(message_pb2.GetGroupMessagesRequest(
            group_id=group, direction=message_pb2.HISTORY_DIRECTION_NEWER, page_size=100),
            metadata=user_md(user), timeout=10)
        return [m.text for m in page.messages]


@pytest.fixture
def stubs(channel):
    return Stubs(channel)


def test_send_is_idempotent_and_members_only(stubs):
    owner, mia = uid("owner"), uid("mia")
    group = stubs.create(PUBLIC, owner, [(mia, MEMBER)])
    first = stubs.send(group, mia, "hello", client_id="c-1")
    assert first.result == SENT and not first.deduplicated
    assert first.message.sequence > 0 and len(first.message.message_id) == 32
    assert first.message.sender_user_id == mia
    again = stubs.send(group, mia, "hello", client_id="c-1")
    assert again.deduplicated and again.message == first.message
    # Concurrent retries of one send: one message.
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda _: stubs.send(group, mia, "burst", client_id="c-2"), range(8)))
    assert len({a.message.message_id for a in answers}) == 1
    assert sum(not a.deduplicated for a in answers) == 1
    assert stubs.texts(group, owner) == ["hello", "burst"]
    expect_error(lambda: stubs.send(group, uid("stranger")), grpc.StatusCode.PERMISSION_DENIED, "NOT_A_MEMBER")
    info = expect_error(lambda: stubs.send(group, mia, ""), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "text"


@pytest.fixture
def clocked(fresh_groupd):
    """A groupd of the test's own on the manual clock, and Stubs on it."""
    server = fresh_groupd(manual_clock=True).start()
    with grpc.insecure_channel(server.address) as channel:
        yield server, Stubs(channel)


def test_member_and_group_mutes(clocked):
    server, stubs = clocked
    owner, adam, mia = uid("owner"), uid("adam"), uid("mia")
    group = stubs.create(PUBLIC, owner, [(adam, ADMIN), (mia, MEMBER)])
    stubs.members.MuteMembers(member_pb2.MuteMembersRequest(group_id=group, user_ids=[mia], duration_seconds=60),
                              metadata=user_md(owner), timeout=10)
    expect_error(lambda: stubs.send(group, mia), grpc.StatusCode.PERMISSION_DENIED, "MEMBER_MUTED")
    server.advance_clock(seconds=59)
    expect_error(lambda: stubs.send(group, mia), grpc.StatusCode.PERMISSION_DENIED, "MEMBER_MUTED")
    server.advance_clock(seconds=1)  # the mute ends
    assert stubs.send(group, mia).result == SENT

    modes = [
        (common_pb2.GROUP_MUTE_MODE_ALL, [], {owner, adam, mia}),
        (common_pb2.GROUP_MUTE_MODE_ORDINARY_MEMBERS, [], {mia}),
        (common_pb2.GROUP_MUTE_MODE_ROLES, [ADMIN], {adam}),
    ]
    for mode, roles, muted in modes:
        stubs.groups.SetGroupMute(group_pb2.SetGroupMuteRequest(group_id=group, muted=True, mode=mode, roles=roles),
                                  metadata=user_md(owner), timeout=10)
        for user in (owner, adam, mia):
            if user in muted:
                expect_error(lambda: stubs.send(group, user), grpc.StatusCode.PERMISSION_DENIED, "GROUP_MUTED")
            else:
                assert stubs.send(group, user).result == SENT
    # A group mute with a duration ends by itself.
    stubs.groups.SetGroupMute(group_pb2.SetGroupMuteRequest(
        group_id=group, muted=True, mode=common_pb2.GROUP_MUTE_MODE_ALL, duration_seconds=60),
        metadata=user_md(owner), timeout=10)
    expect_error(lambda: stubs.send(group, adam), grpc.StatusCode.PERMISSION_DENIED, "GROUP_MUTED")
    server.advance_clock(seconds=59)
    expect_error(lambda: stubs.send(group, adam), grpc.StatusCode.PERMISSION_DENIED, "GROUP_MUTED")
    server.advance_clock(seconds=1)
    assert stubs.send(group, adam).result == SENT


def test_history_rules_per_type_and_paging(stubs):
    owner, late = uid("owner"), uid("late")
    work, public, meeting, room = (stubs.create(WORK, owner), stubs.create(PUBLIC, owner),
                                   stubs.create(MEETING, owner), stubs.create(AV, owner))
    stubs.groups.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
        group_id=public, update_mask=field_mask_pb2.FieldMask(paths=["join_option"]),
        settings=common_pb2.GroupSettings(join_option=common_pb2.JOIN_OPTION_ANY)), metadata=user_md(owner), timeout=10)
    for group in (work, public, meeting):
        stubs.send(group, owner, "before")
    stubs.members.InviteMembers(member_pb2.InviteMembersRequest(group_id=work, user_ids=[late]),
                                metadata=user_md(owner), timeout=10)
    for group in (public, meeting, room):
        stubs.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=group), metadata=user_md(late), timeout=10)
    for group in (work, public, meeting):
        stubs.send(group, owner, "after")
    assert stubs.texts(work, late) == ["after"]
    assert stubs.texts(public, late) == ["after"]
    assert stubs.texts(meeting, late) == ["before", "after"]
    expect_error(lambda: stubs.texts(room, late), grpc.StatusCode.FAILED_PRECONDITION, "HISTORY_NOT_KEPT")

    for index in range(5):
        stubs.send(public, owner, f"m{index}")
    pages, token = [], ""
    while True:
        page = stubs.messages.GetGroupMessages(message_pb2.GetGroupMessagesRequest(
            group_id=public, page_size=3, page_token=token), metadata=user_md(owner), timeout=10)
        pages.append([m.text for m in page.messages])
        token = page.next_page_token
        if not token:
            break
    assert pages == [["m2", "m3", "m4"], ["after", "m0", "m1"], ["before"]]
    expect_error(lambda: stubs.messages.GetGroupMessages(message_pb2.GetGroupMessagesRequest(
        group_id=public, page_token="bogus"), metadata=user_md(owner), timeout=10),
        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")


def test_mark_read_and_unread_counts(stubs):
    owner, mia = uid("owner"), uid("mia")
    public, meeting = stubs.create(PUBLIC, owner, [(mia, MEMBER)]), stubs.create(MEETING, owner, [(mia, MEMBER)])
    for group in (public, meeting):
        for _ in range(3):
            stubs.send(group, owner)
    listed = {g.group_id: g for g in stubs.groups.ListJoinedGroups(
        group_pb2.ListJoinedGroupsRequest(), metadata=user_md(mia), timeout=10).groups}
    assert listed[public].unread_count == 3
    assert listed[meeting].unread_count == 0
    newest = stubs.messages.GetGroupMessages(message_pb2.GetGroupMessagesRequest(group_id=public, page_size=1),
                                             metadata=user_md(mia), timeout=10).messages[0]
    marked = stubs.messages.MarkGroupRead(message_pb2.MarkGroupReadRequest(group_id=public), metadata=user_md(mia), timeout=10)
    assert marked.read_sequence == newest.sequence and marked.unread_count == 0
    assert listed[public].last_message_time == newest.send_time
    listed = {g.group_id: g for g in stubs.groups.ListJoinedGroups(
        group_pb2.ListJoinedGroupsRequest(), metadata=user_md(mia), timeout=10).groups}
    assert listed[public].unread_count == 0 and listed[public].read_sequence == newest.sequence
    expect_error(lambda: stubs.messages.MarkGroupRead(message_pb2.MarkGroupReadRequest(group_id=public),
                                                      metadata=user_md(uid("stranger")), timeout=10),
                 grpc.StatusCode.PERMISSION_DENIED, "NOT_A_MEMBER")


def test_system_notification(stubs):
    owner, mia = uid("owner"), uid("mia")
    group = stubs.create(PUBLIC, owner, [(mia, MEMBER)])
    response = stubs.messages.SendSystemNotification(message_pb2.SendSystemNotificationRequest(
        group_id=group, recipient_user_ids=[mia], text="psst", payload=b"\x00\x01"), metadata=admin_md(), timeout=10)
    event = response.event
    assert event.kind == common_pb2.EVENT_KIND_CUSTOM_NOTIFICATION
    assert list(event.recipient_user_ids) == [mia]
    assert event.custom.text == "psst" and event.custom.payload == b"\x00\x01"
    assert event.sequence > 0 and event.event_id
    expect_error(lambda: stubs.messages.SendSystemNotification(message_pb2.SendSystemNotificationRequest(
        group_id=group, text="x"), metadata=user_md(owner), timeout=10),
        grpc.StatusCode.PERMISSION_DENIED, "ADMIN_TOKEN_REQUIRED")


def test_av_chat_room_sheds_low_then_normal_keeps_high(fresh_groupd):
    # A room rate of 2 a second: a bucket of 2 that refills one token every 500 ms, so the six
    # sends below (each a few milliseconds) see the bucket as the comments say.
    server = fresh_groupd()
    server.config.write_text(server.config.read_text().replace(
        "        secret: interop-secret-for-app-one-0123456789\n",
        "        secret: interop-secret-for-app-one-0123456789\n    limits:\n      av_chat_room_messages_per_second: 2\n", 1))
    server.start()
    with grpc.insecure_channel(server.address) as channel:
        stubs = Stubs(channel)
        owner, viewer = uid("owner"), uid("viewer")
        room = stubs.create(AV, owner)
        expect_error(lambda: stubs.send(room, viewer), grpc.StatusCode.PERMISSION_DENIED, "NOT_A_MEMBER")
        stubs.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=room), metadata=user_md(viewer), timeout=10)
        results = [stubs.send(room, viewer, priority=p) for p in (LOW, LOW, NORMAL, NORMAL, HIGH, HIGH)]
        # Full bucket: one low; then low is shed while normal still passes; then normal is shed;
        # high is always kept.
        assert [r.result for r in results] == [SENT, SHED, SENT, SHED, SENT, SENT]
        assert all(r.message.sequence == 0 for r in results)
        assert results[1].message.text == "hi"
        expect_error(lambda: stubs.texts(room, viewer), grpc.StatusCode.FAILED_PRECONDITION, "HISTORY_NOT_KEPT")
