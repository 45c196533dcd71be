"""RecallGroupMessage through a real groupd with stock grpcio: who may recall (the sender within the
app's window on the manual clock, the owner and admins at any time, the backend), the tombstone
history shows, the MESSAGE_RECALLED event on every member's stream, the unread count (a recalled
unread message still counts) and every refusal, each changing nothing.
"""
import grpc
import pytest

from support import EventStream, MessageApi, admin_md, expect_error, uid, user_md
from groupd.v1 import common_pb2, event_pb2, group_pb2, member_pb2, message_pb2

K = common_pb2
MEMBER, ADMIN = K.MEMBER_ROLE_MEMBER, K.MEMBER_ROLE_ADMIN


class Api(MessageApi):
    def recall(self, group, sequence, metadata):
        return self.messages.RecallGroupMessage(message_pb2.RecallGroupMessageRequest(
            group_id=group, sequence=sequence), metadata=metadata, timeout=10).message

    def listed(self, user):
        return {g.group_id: g for g in self.groups.ListJoinedGroups(
            group_pb2.ListJoinedGroupsRequest(), metadata=user_md(user), timeout=10).groups}


@pytest.fixture
def clocked(fresh_groupd):
    """A groupd of the test's own on the manual clock (recall window 120 s by default)."""
    server = fresh_groupd(manual_clock=True).start()
    with grpc.insecure_channel(server.address) as channel:
        yield server, Api(channel)


def test_sender_recalls_within_the_window_and_every_member_sees_it(clocked):
    server, api = clocked
    owner, mia, max_ = uid("owner"), uid("mia"), uid("max")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, [(mia, MEMBER), (max_, MEMBER)])
    # A member who receives no messages still gets the recall (they may hold it from history).
    api.members.SetReceiveMessageOption(member_pb2.SetReceiveMessageOptionRequest(
        group_id=group, option=K.RECEIVE_MESSAGE_OPTION_NOT_RECEIVE), metadata=user_md(max_), timeout=10)
    streams = {user: EventStream(api.channel, event_pb2.SubscribeRequest(group_ids=[group]), user_md(user))
               for user in (owner, max_)}
    for stream in streams.values():
        stream.until_caught_up()
    sent = api.send(group, mia, "oops", mentioned_user_ids=[max_], mention_all=False)
    assert api.listed(max_)[group].unread_mention == K.UNREAD_MENTION_ME
    server.advance_clock(seconds=120)  # the last moment of the window
    tomb = api.recall(group, sent.sequence, user_md(mia))
    assert tomb.recalled and tomb.recalled_by_user_id == mia
    assert tomb.text == "" and tomb.payload == b"" and tomb.type == "" and list(tomb.mentioned_user_ids) == []
    assert tomb.sequence == sent.sequence and tomb.message_id == sent.message_id and tomb.sender_user_id == mia
    assert tomb.recall_time.seconds * 1000 + tomb.recall_time.nanos // 1_000_000 == server.clock_ms()

    (shown,) = api.history(group, owner)
    assert shown == tomb
    for user, stream in streams.items():
        items = stream.until(lambda item: item.WhichOneof("item") == "event"
                             and item.event.kind == K.EVENT_KIND_MESSAGE_RECALLED)
        event = items[-1].event
        assert event.operator_user_id == mia and list(event.target_user_ids) == [mia], user
        detail = event.message_recall
        assert (detail.sequence, detail.message_id, detail.sender_user_id, detail.recalled_by_user_id) == (
            sent.sequence, sent.message_id, mia, mia)
        stream.cancel()
    # A recalled unread message still counts as unread (its tombstone is an item of the
    # conversation), but gives no unread mention any more.
    entry = api.listed(max_)[group]
    assert entry.unread_count == 1 and entry.unread_mention == K.UNREAD_MENTION_UNSPECIFIED


def test_window_passed_and_other_members_refused(clocked):
    server, api = clocked
    owner, adam, mia, max_ = uid("owner"), uid("adam"), uid("mia"), uid("max")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, [(adam, ADMIN), (mia, MEMBER), (max_, MEMBER)])
    sent = api.send(group, mia, "late")
    server.advance_clock(ms=120_001)
    info = expect_error(lambda: api.recall(group, sent.sequence, user_md(mia)), grpc.StatusCode.FAILED_PRECONDITION,
                        "RECALL_WINDOW_PASSED")
    assert info.metadata["window_seconds"] == "120"
    info = expect_error(lambda: api.recall(group, sent.sequence, user_md(max_)), grpc.StatusCode.PERMISSION_DENIED,
                        "PERMISSION_DENIED")
    expect_error(lambda: api.recall(group, sent.sequence, user_md(uid("stranger"))), grpc.StatusCode.PERMISSION_DENIED,
                 "NOT_A_MEMBER")
    (still,) = api.history(group, owner)
    assert not still.recalled and still.text == "late"
    # An admin recalls at any time; a second recall is refused and changes nothing.
    tomb = api.recall(group, sent.sequence, user_md(adam))
    assert tomb.recalled and tomb.recalled_by_user_id == adam
    info = expect_error(lambda: api.recall(group, sent.sequence, user_md(owner)), grpc.StatusCode.FAILED_PRECONDITION,
                        "MESSAGE_ALREADY_RECALLED")
    assert info.metadata["recalled_by"] == adam
    assert api.history(group, owner) == [tomb]


def test_owner_and_backend_recall_any_message_at_any_time(clocked):
    server, api = clocked
    owner, adam, mia = uid("owner"), uid("adam"), uid("mia")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, [(adam, ADMIN), (mia, MEMBER)])
    first, second, third = api.send(group, adam, "a"), api.send(group, owner, "b"), api.send(group, mia, "c")
    server.advance_clock(seconds=600)
    assert api.recall(group, first.sequence, user_md(owner)).recalled_by_user_id == owner
    backend = api.recall(group, second.sequence, admin_md())
    assert backend.recalled and backend.recalled_by_user_id == ""
    # The backend acting for a member has that member's rights: past the window, refused.
    expect_error(lambda: api.recall(group, third.sequence, admin_md(operator=mia)), grpc.StatusCode.FAILED_PRECONDITION,
                 "RECALL_WINDOW_PASSED")
    assert [m.recalled for m in api.history(group, owner)] == [True, True, False]


def test_bad_input_unknown_messages_and_avchatroom(groupd):
    with grpc.insecure_channel(groupd.address) as channel:
        api = Api(channel)
        owner, late = uid("owner"), uid("late")
        group = api.create(K.GROUP_TYPE_PUBLIC, owner, [(late, MEMBER)])
        sent = api.send(group, owner, "before")
        info = expect_error(lambda: api.recall(group, 0, user_md(owner)), grpc.StatusCode.INVALID_ARGUMENT,
                            "INVALID_ARGUMENT")
        assert info.metadata["field"] == "sequence"
        info = expect_error(lambda: api.recall("", 1, user_md(owner)), grpc.StatusCode.INVALID_ARGUMENT,
                            "INVALID_ARGUMENT")
        assert info.metadata["field"] == "group_id"
        info = expect_error(lambda: api.recall(group, sent.sequence + 50, user_md(owner)), grpc.StatusCode.NOT_FOUND,
                            "MESSAGE_NOT_FOUND")
        assert info.metadata["field"] == "sequence"
        # A sequence that is an event, not a message (the group's creation).
        expect_error(lambda: api.recall(group, 1, user_md(owner)), grpc.StatusCode.NOT_FOUND, "MESSAGE_NOT_FOUND")
        expect_error(lambda: api.recall(uid("nope"), 1, user_md(owner)), grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")
        room = api.create(K.GROUP_TYPE_AV_CHAT_ROOM, owner)
        expect_error(lambda: api.recall(room, 1, user_md(owner)), grpc.StatusCode.FAILED_PRECONDITION,
                     "HISTORY_NOT_KEPT")
        assert [m.recalled for m in api.history(group, owner)] == [False]


def test_recall_window_is_per_app(fresh_groupd):
    server = fresh_groupd(manual_clock=True, limits={"recall_window_seconds": 5}).start()
    with grpc.insecure_channel(server.address) as channel:
        api = Api(channel)
        owner, mia = uid("owner"), uid("mia")
        group = api.create(K.GROUP_TYPE_WORK, owner, [(mia, MEMBER)])
        sent = api.send(group, mia, "x")
        server.advance_clock(seconds=6)
        info = expect_error(lambda: api.recall(group, sent.sequence, user_md(mia)),
                            grpc.StatusCode.FAILED_PRECONDITION, "RECALL_WINDOW_PASSED")
        assert info.metadata["window_seconds"] == "5"
