"""Per-message read receipts through a real groupd with stock grpcio: GetMessageReadReceipts (who read a
message and who has not, derived from the members' read positions, paged), the read counts on
GetGroupMessages, the batched MESSAGE_READ_RECEIPT events to the sender (driven by the manual clock),
the app's read_receipt_max_members, and every refusal (type, size, bad input, no such message).
"""
import grpc
import pytest

from support import EventStream, MessageApi, admin_md, expect_error, uid, user_md
from groupd.v1 import common_pb2, event_pb2, member_pb2, message_pb2

K = common_pb2
PUBLIC, WORK, MEETING, AV = K.GROUP_TYPE_PUBLIC, K.GROUP_TYPE_WORK, K.GROUP_TYPE_MEETING, K.GROUP_TYPE_AV_CHAT_ROOM
MEMBER = K.MEMBER_ROLE_MEMBER
READ, UNREAD = message_pb2.READ_RECEIPT_FILTER_READ, message_pb2.READ_RECEIPT_FILTER_UNREAD


def members(users):
    """`users` as plain members, in the (user, role) pairs MessageApi.create takes."""
    return [(user, MEMBER) for user in users]


class Api(MessageApi):
    def mark(self, group, user, sequence=0):
        return self.messages.MarkGroupRead(message_pb2.MarkGroupReadRequest(group_id=group, read_sequence=sequence),
                                           metadata=user_md(user), timeout=10)

    def receipts(self, group, sequence, md, filter=READ, page_size=0, page_token=""):
        return self.messages.GetMessageReadReceipts(message_pb2.GetMessageReadReceiptsRequest(
            group_id=group, sequence=sequence, filter=filter, page_size=page_size, page_token=page_token),
            metadata=md, timeout=10)


@pytest.fixture
def api(channel):
    return Api(channel)


def test_readers_follow_read_positions(api):
    owner, ann, bob, cat = uid("owner"), uid("a-ann"), uid("b-bob"), uid("c-cat")
    group = api.create(PUBLIC, owner, members([ann, bob, cat]), settings=K.GroupSettings(join_option=K.JOIN_OPTION_ANY))
    first, second = api.send_sequence(group, owner, "one"), api.send_sequence(group, owner, "two")
    api.mark(group, ann, first)
    api.mark(group, bob)  # the latest

    answer = api.receipts(group, first, user_md(owner))
    assert list(answer.user_ids) == [ann, bob] and (answer.read_count, answer.unread_count) == (2, 1)
    assert answer.next_page_token == ""
    assert list(api.receipts(group, first, user_md(ann), filter=UNREAD).user_ids) == [cat]
    answer = api.receipts(group, second, admin_md(), filter=UNREAD)
    assert list(answer.user_ids) == [ann, cat] and (answer.read_count, answer.unread_count) == (1, 2)

    # A member who joins later counts for later messages only; the sender never counts.
    late = uid("d-late")
    api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=group), metadata=user_md(late), timeout=10)
    third = api.send_sequence(group, ann, "three")
    api.mark(group, late)
    assert list(api.receipts(group, second, user_md(owner), filter=UNREAD).user_ids) == [ann, cat]
    answer = api.receipts(group, third, user_md(owner))
    assert list(answer.user_ids) == [late] and (answer.read_count, answer.unread_count) == (1, 3)
    assert list(api.receipts(group, third, user_md(owner), filter=UNREAD).user_ids) == sorted([owner, bob, cat])

    # GetGroupMessages carries the counts.
    counts = [(m.sequence, m.read_count, m.unread_count, m.read_receipts_counted)
              for m in api.history(group, owner, with_read_counts=True)]
    assert counts == [(first, 2, 1, True), (second, 1, 2, True), (third, 1, 3, True)]


def test_receipts_are_paged_by_user_id(api):
    owner = uid("owner")
    readers = sorted(uid(f"r{i}") for i in range(5))
    group = api.create(WORK, owner, members(readers))
    sequence = api.send_sequence(group, owner)
    for user in readers:
        api.mark(group, user)
    listed, token, pages = [], "", 0
    while True:
        page = api.receipts(group, sequence, user_md(owner), page_size=2, page_token=token)
        listed += page.user_ids
        pages += 1
        token = page.next_page_token
        if not token:
            break
    assert listed == readers and pages == 3
    info = expect_error(lambda: api.receipts(group, sequence, user_md(owner), filter=UNREAD, page_token=token or "r.61"),
                        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "page_token"
    for bad in ("garbage", "r.zz", "r.6"):
        info = expect_error(lambda: api.receipts(group, sequence, user_md(owner), page_token=bad),
                            grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
        assert info.metadata["field"] == "page_token"


def test_receipt_refusals(api):
    owner, mia = uid("owner"), uid("mia")
    group = api.create(PUBLIC, owner, members([mia]))
    sequence = api.send_sequence(group, owner)
    for field, call in (
        ("sequence", lambda: api.receipts(group, 0, user_md(owner))),
        ("filter", lambda: api.receipts(group, sequence, user_md(owner), filter=7)),
        ("page_size", lambda: api.receipts(group, sequence, user_md(owner), page_size=-1)),
    ):
        info = expect_error(call, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
        assert info.metadata["field"] == field
    info = expect_error(lambda: api.receipts(group, sequence + 40, user_md(owner)), grpc.StatusCode.NOT_FOUND,
                        "MESSAGE_NOT_FOUND")
    assert info.metadata["field"] == "sequence"
    expect_error(lambda: api.receipts(group, 1, user_md(owner)), grpc.StatusCode.NOT_FOUND, "MESSAGE_NOT_FOUND")
    expect_error(lambda: api.receipts(group, sequence, user_md(uid("stranger"))), grpc.StatusCode.PERMISSION_DENIED,
                 "NOT_A_MEMBER")
    expect_error(lambda: api.receipts(uid("nogroup"), sequence, user_md(owner)), grpc.StatusCode.NOT_FOUND,
                 "GROUP_NOT_FOUND")

    meeting = api.create(MEETING, owner, members([mia]))
    sent = api.send_sequence(meeting, owner)
    info = expect_error(lambda: api.receipts(meeting, sent, user_md(owner)), grpc.StatusCode.FAILED_PRECONDITION,
                        "READ_RECEIPTS_NOT_SUPPORTED")
    assert info.metadata["group_type"] == "Meeting"
    assert [m.read_receipts_counted for m in api.history(meeting, owner, with_read_counts=True)] == [False]
    room = api.create(AV, owner)
    expect_error(lambda: api.receipts(room, 1, user_md(owner)), grpc.StatusCode.FAILED_PRECONDITION,
                 "HISTORY_NOT_KEPT")


@pytest.fixture
def small(fresh_groupd):
    server = fresh_groupd(limits={"read_receipt_max_members": 2}).start()
    with grpc.insecure_channel(server.address) as channel:
        yield Api(channel)


def test_groups_over_the_member_limit_have_no_receipts(small):
    api = small
    owner, mia, bob = uid("owner"), uid("mia"), uid("bob")
    pair = api.create(WORK, owner, members([mia]))
    sequence = api.send_sequence(pair, owner)
    api.mark(pair, mia)
    assert api.receipts(pair, sequence, user_md(owner)).read_count == 1
    trio = api.create(WORK, owner, members([mia, bob]))
    sequence = api.send_sequence(trio, owner)
    info = expect_error(lambda: api.receipts(trio, sequence, user_md(owner)), grpc.StatusCode.FAILED_PRECONDITION,
                        "READ_RECEIPTS_NOT_SUPPORTED")
    assert info.metadata["limit"] == "2"
    message = api.history(trio, owner, with_read_counts=True)[0]
    assert not message.read_receipts_counted and message.read_count == 0


@pytest.fixture
def clocked(fresh_groupd):
    """A groupd on the manual clock (read_receipt_interval_ms 1000, the default), and Api on it."""
    server = fresh_groupd(manual_clock=True).start()
    with grpc.insecure_channel(server.address) as channel:
        yield server, Api(channel)


def receipt_stream(api, user):
    stream = EventStream(api.channel, event_pb2.SubscribeRequest(
        kinds=[K.EVENT_KIND_MESSAGE_READ_RECEIPT], exclude_messages=True), user_md(user))
    stream.until_caught_up()
    return stream


def counts(event):
    return [(m.sequence, m.read_count, m.unread_count) for m in event.read_receipts.messages]


def test_receipt_events_are_batched_per_sender(clocked):
    server, api = clocked
    owner, ann = uid("owner"), uid("ann")
    readers = [uid(f"r{i}") for i in range(4)]
    group = api.create(WORK, owner, members([ann] + readers))
    first, second = api.send_sequence(group, owner, "one"), api.send_sequence(group, owner, "two")
    own = api.send_sequence(group, ann, "ann's")
    owner_stream, ann_stream = receipt_stream(api, owner), receipt_stream(api, ann)

    # Reads within one interval (from the first read that makes the batch): one event per sender,
    # with the counts at the report.
    api.mark(group, readers[0], first)
    api.mark(group, readers[1], second)
    server.advance_clock(ms=500)
    api.mark(group, readers[2])  # to the latest: ann's message too, whose batch starts now
    api.mark(group, readers[3])
    server.advance_clock(ms=500)
    (event,) = [item.event for item in owner_stream.events(1)]
    assert event.kind == K.EVENT_KIND_MESSAGE_READ_RECEIPT and event.group_id == group
    assert list(event.recipient_user_ids) == [owner] and event.operator_user_id == ""
    assert counts(event) == [(first, 4, 1), (second, 3, 2)]
    server.advance_clock(ms=500)
    (event,) = [item.event for item in ann_stream.events(1)]
    assert list(event.recipient_user_ids) == [ann]
    assert counts(event) == [(own, 2, 3)]

    # The next read makes the next event: the batches above were the only ones. A reader's own
    # message is not reported to them.
    api.mark(group, ann)
    server.advance_clock(seconds=1)
    (event,) = [item.event for item in owner_stream.events(1)]
    assert counts(event) == [(first, 5, 0), (second, 4, 1)]
    api.mark(group, readers[0])
    server.advance_clock(seconds=1)
    (event,) = [item.event for item in ann_stream.events(1)]
    assert counts(event) == [(own, 3, 2)]
    (event,) = [item.event for item in owner_stream.events(1)]
    assert counts(event) == [(second, 5, 0)]
    owner_stream.cancel()
    ann_stream.cancel()
