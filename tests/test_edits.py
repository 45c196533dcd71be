"""EditGroupMessage through a real groupd with stock grpcio: who may edit (the sender within the
app's edit window on the manual clock, the owner and admins at any time, the backend), what history
shows (the new body, edit count, time and editor; type, mentions and send time as sent), the
MESSAGE_EDITED event with the new body on every member's stream, retries that change nothing, and
every refusal, each changing nothing. Moderation of edits is in tests/test_policy.py.
"""
import grpc
import pytest

from support import EventStream, MessageApi, admin_md, expect_error, uid, user_md
from groupd.v1 import common_pb2, event_pb2, group_pb2, member_pb2, message_pb2

K = common_pb2
MEMBER, ADMIN = K.MEMBER_ROLE_MEMBER, K.MEMBER_ROLE_ADMIN


class Api(MessageApi):
    def edit(self, group, sequence, metadata, text="", payload=b""):
        return self.messages.EditGroupMessage(message_pb2.EditGroupMessageRequest(
            group_id=group, sequence=sequence, text=text, payload=payload), metadata=metadata, timeout=10)


def ms(timestamp):
    return timestamp.seconds * 1000 + timestamp.nanos // 1_000_000


@pytest.fixture
def clocked(fresh_groupd):
    """A groupd of the test's own on the manual clock, with a 600 s edit window (the default day
    would outlive the tests' tokens; the default is checked by the model's tests)."""
    server = fresh_groupd(manual_clock=True, limits={"edit_window_seconds": 600}).start()
    with grpc.insecure_channel(server.address) as channel:
        yield server, Api(channel)


def test_sender_edits_within_the_window_and_every_member_sees_the_new_body(clocked):
    server, api = clocked
    owner, mia, max_ = uid("owner"), uid("mia"), uid("max")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, [(mia, MEMBER), (max_, MEMBER)])
    # A member who receives no messages still gets the edit (they may hold the message from history).
    api.members.SetReceiveMessageOption(member_pb2.SetReceiveMessageOptionRequest(
        group_id=group, option=K.RECEIVE_MESSAGE_OPTION_NOT_RECEIVE), metadata=user_md(max_), timeout=10)
    streams = {user: EventStream(api.channel, event_pb2.SubscribeRequest(group_ids=[group]), user_md(user))
               for user in (owner, max_)}
    for stream in streams.values():
        stream.until_caught_up()
    sent = api.send(group, mia, "tpyo", mentioned_user_ids=[max_])
    server.advance_clock(seconds=600)  # the last moment of the window
    answer = api.edit(group, sent.sequence, user_md(mia), text="typo", payload=b"new")
    edited = answer.message
    assert not answer.unchanged
    assert (edited.text, edited.payload, edited.edit_count, edited.edited_by_user_id) == ("typo", b"new", 1, mia)
    assert ms(edited.edit_time) == server.clock_ms()
    # Everything else stays as sent.
    assert (edited.sequence, edited.message_id, edited.sender_user_id, edited.type) == (
        sent.sequence, sent.message_id, mia, "text")
    assert list(edited.mentioned_user_ids) == [max_] and edited.send_time == sent.send_time
    (shown,) = api.history(group, owner)
    assert shown == edited
    for user, stream in streams.items():
        items = stream.until(lambda item: item.WhichOneof("item") == "event"
                             and item.event.kind == K.EVENT_KIND_MESSAGE_EDITED)
        event = items[-1].event
        assert event.operator_user_id == mia and list(event.target_user_ids) == [mia], user
        detail = event.message_edit
        assert (detail.sequence, detail.message_id, detail.sender_user_id, detail.edited_by_user_id,
                detail.edit_count, detail.text, detail.payload) == (
            sent.sequence, sent.message_id, mia, mia, 1, "typo", b"new"), user

    # A retry changes nothing and emits nothing, even out of the window now; the next edit (by the
    # owner, at any time) is the next event, counted 2.
    server.advance_clock(seconds=1)
    again = api.edit(group, sent.sequence, user_md(mia), text="typo", payload=b"new")
    assert again.unchanged and again.message == edited
    by_owner = api.edit(group, sent.sequence, user_md(owner), text="", payload=b"only bytes").message
    assert (by_owner.text, by_owner.payload, by_owner.edit_count, by_owner.edited_by_user_id) == ("", b"only bytes", 2, owner)
    for stream in streams.values():
        (item,) = stream.events(1)
        assert item.event.kind == K.EVENT_KIND_MESSAGE_EDITED and item.event.message_edit.edit_count == 2
        stream.cancel()
    assert api.history(group, mia) == [by_owner]


def test_window_passed_other_members_mutes_and_recalls_are_refused_and_change_nothing(clocked):
    server, api = clocked
    owner, adam, mia, max_ = uid("owner"), uid("adam"), uid("mia"), uid("max")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, [(adam, ADMIN), (mia, MEMBER), (max_, MEMBER)])
    sent = api.send(group, mia, "first")
    before = api.history(group, owner)
    info = expect_error(lambda: api.edit(group, sent.sequence, user_md(max_), text="x"), grpc.StatusCode.PERMISSION_DENIED,
                        "PERMISSION_DENIED")
    expect_error(lambda: api.edit(group, sent.sequence, user_md(uid("stranger")), text="x"),
                 grpc.StatusCode.PERMISSION_DENIED, "NOT_A_MEMBER")
    # A muted member edits nothing (an edit is content as a send is); nor does anyone under a group mute.
    api.members.MuteMembers(member_pb2.MuteMembersRequest(group_id=group, user_ids=[mia], duration_seconds=60),
                            metadata=admin_md(), timeout=10)
    info = expect_error(lambda: api.edit(group, sent.sequence, user_md(mia), text="x"), grpc.StatusCode.PERMISSION_DENIED,
                        "MEMBER_MUTED")
    assert info.metadata["mute_until"]
    server.advance_clock(seconds=61)
    api.groups.SetGroupMute(group_pb2.SetGroupMuteRequest(group_id=group, muted=True, mode=K.GROUP_MUTE_MODE_ALL),
                            metadata=admin_md(), timeout=10)
    expect_error(lambda: api.edit(group, sent.sequence, user_md(mia), text="x"), grpc.StatusCode.PERMISSION_DENIED,
                 "GROUP_MUTED")
    api.groups.SetGroupMute(group_pb2.SetGroupMuteRequest(group_id=group, muted=False), metadata=admin_md(), timeout=10)
    server.advance_clock(ms=600_000 - 61_000 + 1)
    info = expect_error(lambda: api.edit(group, sent.sequence, user_md(mia), text="x"),
                        grpc.StatusCode.FAILED_PRECONDITION, "EDIT_WINDOW_PASSED")
    assert info.metadata["window_seconds"] == "600"
    assert api.history(group, owner) == before
    # An admin edits at any time; once recalled, nobody edits it.
    assert api.edit(group, sent.sequence, user_md(adam), text="by adam").message.edited_by_user_id == adam
    api.messages.RecallGroupMessage(message_pb2.RecallGroupMessageRequest(group_id=group, sequence=sent.sequence),
                                    metadata=user_md(owner), timeout=10)
    recalled = api.history(group, owner)
    info = expect_error(lambda: api.edit(group, sent.sequence, user_md(owner), text="back"),
                        grpc.StatusCode.FAILED_PRECONDITION, "MESSAGE_RECALLED")
    assert info.metadata["field"] == "sequence" and info.metadata["sequence"] == str(sent.sequence)
    assert api.history(group, owner) == recalled and recalled[0].recalled and recalled[0].text == ""


def test_backend_edits_any_message_and_acting_for_a_member_has_their_rights(clocked):
    server, api = clocked
    owner, mia = uid("owner"), uid("mia")
    group = api.create(K.GROUP_TYPE_WORK, owner, [(mia, MEMBER)])
    first, second = api.send(group, owner, "a"), api.send(group, mia, "b")
    server.advance_clock(seconds=601)
    backend = api.edit(group, first.sequence, admin_md(), text="by the backend").message
    assert backend.edit_count == 1 and backend.edited_by_user_id == ""
    expect_error(lambda: api.edit(group, second.sequence, admin_md(operator=mia), text="late"),
                 grpc.StatusCode.FAILED_PRECONDITION, "EDIT_WINDOW_PASSED")
    assert [m.text for m in api.history(group, owner)] == ["by the backend", "b"]


def test_bad_input_unknown_messages_and_avchatroom(groupd):
    with grpc.insecure_channel(groupd.address) as channel:
        api = Api(channel)
        owner = uid("owner")
        group = api.create(K.GROUP_TYPE_PUBLIC, owner)
        sent = api.send(group, owner, "before")
        for sequence, text, payload, field in [
            (0, "x", b"", "sequence"),
            (sent.sequence, "", b"", "text"),
            (sent.sequence, "x", b"y" * (12 * 1024), "payload"),
            (sent.sequence, "x" * (12 * 1024 + 1), b"", "text"),
        ]:
            info = expect_error(lambda: api.edit(group, sequence, user_md(owner), text=text, payload=payload),
                                grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
            assert info.metadata["field"] == field, (sequence, len(text), len(payload))
        info = expect_error(lambda: api.edit("", 1, user_md(owner), text="x"), grpc.StatusCode.INVALID_ARGUMENT,
                            "INVALID_ARGUMENT")
        assert info.metadata["field"] == "group_id"
        info = expect_error(lambda: api.edit(group, sent.sequence + 50, user_md(owner), text="x"),
                            grpc.StatusCode.NOT_FOUND, "MESSAGE_NOT_FOUND")
        assert info.metadata["field"] == "sequence"
        # A sequence that is an event, not a message (the group's creation).
        expect_error(lambda: api.edit(group, 1, user_md(owner), text="x"), grpc.StatusCode.NOT_FOUND, "MESSAGE_NOT_FOUND")
        expect_error(lambda: api.edit(uid("nope"), 1, user_md(owner), text="x"), grpc.StatusCode.NOT_FOUND,
                     "GROUP_NOT_FOUND")
        room = api.create(K.GROUP_TYPE_AV_CHAT_ROOM, owner)
        expect_error(lambda: api.edit(room, 1, user_md(owner), text="x"), grpc.StatusCode.FAILED_PRECONDITION,
                     "HISTORY_NOT_KEPT")
        assert [(m.text, m.edit_count) for m in api.history(group, owner)] == [("before", 0)]


def test_edit_window_is_per_app(fresh_groupd):
    server = fresh_groupd(manual_clock=True, limits={"edit_window_seconds": 5}).start()
    with grpc.insecure_channel(server.address) as channel:
        api = Api(channel)
        owner, mia = uid("owner"), uid("mia")
        group = api.create(K.GROUP_TYPE_WORK, owner, [(mia, MEMBER)])
        sent = api.send(group, mia, "x")
        server.advance_clock(seconds=5)
        assert api.edit(group, sent.sequence, user_md(mia), text="y").message.edit_count == 1
        server.advance_clock(ms=1)
        info = expect_error(lambda: api.edit(group, sent.sequence, user_md(mia), text="z"),
                            grpc.StatusCode.FAILED_PRECONDITION, "EDIT_WINDOW_PASSED")
        assert info.metadata["window_seconds"] == "5"
