"""Replies through a real groupd with stock grpcio: SendGroupMessage's reply_to_sequence, the
reference and snapshot history, send answers and streams carry, the snapshot following the
original's edit and recall, ListMessageReplies paged and bounded by the caller's history, retries,
and every refusal, each changing nothing. Moderation of replies is in tests/test_policy.py.
"""
import grpc
import pytest

from support import EventStream, MessageApi, admin_md, expect_error, uid, user_md
from groupd.v1 import common_pb2, event_pb2, group_pb2, member_pb2, message_pb2

K = common_pb2
MEMBER = K.MEMBER_ROLE_MEMBER


class Api(MessageApi):
    def reply(self, group, user, to, text="re", **fields):
        return self.send(group, user, text, reply_to_sequence=to, **fields)

    def replies(self, group, sequence, metadata, page_size=0, page_token=""):
        return self.messages.ListMessageReplies(message_pb2.ListMessageRepliesRequest(
            group_id=group, sequence=sequence, page_size=page_size, page_token=page_token), metadata=metadata, timeout=10)

    def recall(self, group, sequence, user):
        self.messages.RecallGroupMessage(message_pb2.RecallGroupMessageRequest(group_id=group, sequence=sequence),
                                         metadata=user_md(user), timeout=10)

    def edit(self, group, sequence, user, text):
        self.messages.EditGroupMessage(message_pb2.EditGroupMessageRequest(group_id=group, sequence=sequence, text=text),
                                       metadata=user_md(user), timeout=10)


@pytest.fixture
def api(channel):
    return Api(channel)


def reference(message, preview=None):
    return K.MessageReference(sequence=message.sequence, message_id=message.message_id,
                              sender_user_id=message.sender_user_id, type=message.type,
                              preview=message.text[:100] if preview is None else preview)


def test_a_reply_carries_its_reference_in_the_answer_history_and_streams(api):
    owner, mia, max_ = uid("owner"), uid("mia"), uid("max")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, [(mia, MEMBER), (max_, MEMBER)])
    stream = EventStream(api.channel, event_pb2.SubscribeRequest(group_ids=[group]), user_md(owner))
    stream.until_caught_up()
    # 150 characters, some of them two bytes: the preview keeps the first 100 characters.
    original = api.send(group, mia, "é" * 50 + "x" * 100)
    answer = api.reply(group, max_, original.sequence, "agreed", client_message_id="c-1")
    expected = reference(original, preview="é" * 50 + "x" * 50)
    assert answer.reply_to == expected and not answer.reply_to.recalled
    assert answer.text == "agreed" and answer.sender_user_id == max_
    assert api.history(group, owner) == [original, answer]
    assert not api.history(group, owner)[0].HasField("reply_to")
    items = stream.until(lambda item: item.WhichOneof("item") == "message" and item.message.sequence == answer.sequence)
    assert items[-1].message.reply_to == expected
    stream.cancel()
    # A retry with the same client id answers the first reply, reference and all, and sends nothing.
    retry = api.messages.SendGroupMessage(message_pb2.SendGroupMessageRequest(
        group_id=group, type="text", text="agreed", payload=b"body", client_message_id="c-1",
        reply_to_sequence=original.sequence), metadata=user_md(max_), timeout=10)
    assert retry.deduplicated and retry.message == answer
    assert len(api.history(group, owner)) == 2


def test_the_list_pages_and_the_snapshot_follows_the_originals_edit_and_recall(api):
    owner, mia, max_ = uid("owner"), uid("mia"), uid("max")
    group = api.create(K.GROUP_TYPE_WORK, owner, [(mia, MEMBER), (max_, MEMBER)])
    original = api.send(group, mia, "lunch at noon?")
    replies = [api.reply(group, user, original.sequence, text)
               for user, text in ((max_, "yes"), (owner, "12:30"), (mia, "ok"))]
    api.send(group, max_, "unrelated")
    first = api.replies(group, original.sequence, user_md(max_), page_size=2)
    assert list(first.replies) == replies[:2] and first.next_page_token
    second = api.replies(group, original.sequence, user_md(max_), page_size=2, page_token=first.next_page_token)
    assert list(second.replies) == replies[2:] and second.next_page_token == ""
    # The backend lists them too; a message without replies lists none.
    assert list(api.replies(group, original.sequence, admin_md()).replies) == replies
    assert list(api.replies(group, replies[0].sequence, user_md(mia)).replies) == []

    # An edit of the original rewrites every snapshot's preview.
    api.edit(group, original.sequence, mia, "lunch at one?")
    listed = api.replies(group, original.sequence, user_md(owner)).replies
    assert [r.reply_to.preview for r in listed] == ["lunch at one?"] * 3
    assert [m.reply_to.preview for m in api.history(group, owner) if m.HasField("reply_to")] == ["lunch at one?"] * 3

    # Its recall turns them into tombstones; the replies stay listed.
    api.recall(group, original.sequence, mia)
    tombstone = K.MessageReference(sequence=original.sequence, message_id=original.message_id, sender_user_id=mia,
                                   recalled=True)
    listed = api.replies(group, original.sequence, user_md(owner)).replies
    assert [r.reply_to for r in listed] == [tombstone] * 3
    # A recalled reply is no reply any more.
    api.recall(group, replies[1].sequence, owner)
    assert [r.sequence for r in api.replies(group, original.sequence, user_md(owner)).replies] == [
        replies[0].sequence, replies[2].sequence]
    recalled = [m for m in api.history(group, owner) if m.sequence == replies[1].sequence][0]
    assert recalled.recalled and not recalled.HasField("reply_to")


def test_a_member_lists_the_replies_their_history_shows(api):
    owner, mia, late = uid("owner"), uid("mia"), uid("late")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, [(mia, MEMBER)], settings=K.GroupSettings(join_option=K.JOIN_OPTION_ANY))
    original = api.send(group, mia, "before you came")
    early = api.reply(group, owner, original.sequence, "early")
    api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=group), metadata=user_md(late), timeout=10)
    later = api.reply(group, mia, original.sequence, "later")
    assert list(api.replies(group, original.sequence, user_md(late)).replies) == [later]
    assert list(api.replies(group, original.sequence, user_md(owner)).replies) == [early, later]
    # A Public member cannot reply to what their history does not show.
    info = expect_error(lambda: api.reply(group, late, original.sequence), grpc.StatusCode.NOT_FOUND, "MESSAGE_NOT_FOUND")
    assert info.metadata["field"] == "reply_to_sequence"


def test_refused_replies_change_nothing(api):
    owner, mia, stranger = uid("owner"), uid("mia"), uid("stranger")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, [(mia, MEMBER)])
    other = api.create(K.GROUP_TYPE_PUBLIC, owner, [(mia, MEMBER)])
    sent = api.send(group, mia, "first")
    gone = api.send(group, mia, "soon recalled")
    api.recall(group, gone.sequence, mia)
    in_other = [api.send(other, mia, f"other {n}") for n in range(6)][-1]
    before = api.history(group, owner)
    # No such message, a sequence of the other group only, an event that is no message (the
    # group's creation, sequence 1).
    for sequence in (999, in_other.sequence, 1):
        info = expect_error(lambda: api.reply(group, mia, sequence), grpc.StatusCode.NOT_FOUND, "MESSAGE_NOT_FOUND")
        assert info.metadata["field"] == "reply_to_sequence", sequence
    info = expect_error(lambda: api.reply(group, mia, gone.sequence), grpc.StatusCode.FAILED_PRECONDITION,
                        "MESSAGE_RECALLED")
    assert info.metadata["field"] == "reply_to_sequence" and info.metadata["sequence"] == str(gone.sequence)
    info = expect_error(lambda: api.reply(group, mia, 2 ** 63), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "reply_to_sequence"
    # The send rule comes first: a non-member is refused as such.
    expect_error(lambda: api.reply(group, stranger, sent.sequence), grpc.StatusCode.PERMISSION_DENIED, "NOT_A_MEMBER")
    assert api.history(group, owner) == before
    # An AVChatRoom keeps no history to reply to.
    room = api.create(K.GROUP_TYPE_AV_CHAT_ROOM, owner)
    api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=room), metadata=user_md(mia), timeout=10)
    expect_error(lambda: api.reply(room, mia, 1), grpc.StatusCode.FAILED_PRECONDITION, "HISTORY_NOT_KEPT")


def test_listing_refusals(api):
    owner, mia = uid("owner"), uid("mia")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, [(mia, MEMBER)])
    sent = api.send(group, mia, "first")
    api.reply(group, owner, sent.sequence)
    api.reply(group, owner, sent.sequence)
    token = api.replies(group, sent.sequence, user_md(mia), page_size=1).next_page_token
    assert token
    info = expect_error(lambda: api.replies(group, 0, user_md(mia)), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "sequence"
    for bad in ("nonsense", token + ".0", "1.1"):
        info = expect_error(lambda: api.replies(group, sent.sequence, user_md(mia), page_token=bad),
                            grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
        assert info.metadata["field"] == "page_token", bad
    # A token of another message's list is refused.
    expect_error(lambda: api.replies(group, sent.sequence + 1, user_md(mia), page_token=token),
                 grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    info = expect_error(lambda: api.replies(group, sent.sequence, user_md(mia), page_size=-1),
                        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "page_size"
    expect_error(lambda: api.replies(group, sent.sequence, user_md(uid("stranger"))),
                 grpc.StatusCode.PERMISSION_DENIED, "NOT_A_MEMBER")
    expect_error(lambda: api.replies(uid("nope"), sent.sequence, user_md(mia)), grpc.StatusCode.NOT_FOUND,
                 "GROUP_NOT_FOUND")
    room = api.create(K.GROUP_TYPE_AV_CHAT_ROOM, owner)
    expect_error(lambda: api.replies(room, 1, admin_md()), grpc.StatusCode.FAILED_PRECONDITION, "HISTORY_NOT_KEPT")
