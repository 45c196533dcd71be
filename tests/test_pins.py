"""PinGroupMessage and UnpinGroupMessage through a real groupd with stock grpcio: pins listed on the
group (GetGroupsInfo), MESSAGE_PINNED / MESSAGE_UNPINNED on the stream, the pin_scope setting, the
app's max_pinned_messages, and every refusal (permission, limit, bad input, no such message,
AVChatRoom), each of which leaves the pins as they were.
"""
import grpc
import pytest
from google.protobuf import field_mask_pb2

from support import EventStream, MessageApi, admin_md, expect_error, uid, user_md
from groupd.v1 import common_pb2, event_pb2, group_pb2, member_pb2, message_pb2

K = common_pb2
PUBLIC, WORK, MEETING, AV = K.GROUP_TYPE_PUBLIC, K.GROUP_TYPE_WORK, K.GROUP_TYPE_MEETING, K.GROUP_TYPE_AV_CHAT_ROOM
MEMBER, ADMIN = K.MEMBER_ROLE_MEMBER, K.MEMBER_ROLE_ADMIN


class Api(MessageApi):
    def pin(self, group, sequence, md):
        return self.messages.PinGroupMessage(message_pb2.PinGroupMessageRequest(group_id=group, sequence=sequence),
                                             metadata=md, timeout=10)

    def unpin(self, group, sequence, md):
        return self.messages.UnpinGroupMessage(message_pb2.UnpinGroupMessageRequest(group_id=group, sequence=sequence),
                                               metadata=md, timeout=10)

    def info(self, group, md):
        return self.groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[group]), metadata=md,
                                         timeout=10).groups[0]

    def pinned(self, group):
        return [p.sequence for p in self.info(group, admin_md()).pinned_messages]


@pytest.fixture
def api(channel):
    return Api(channel)


def test_pin_and_unpin_listed_on_the_group_with_events(api):
    owner, admin, mia = uid("owner"), uid("admin"), uid("mia")
    group = api.create(PUBLIC, owner, [(admin, ADMIN), (mia, MEMBER)])
    first, second = api.send_sequence(group, mia, "one"), api.send_sequence(group, mia, "two")
    stream = EventStream(api.channel, event_pb2.SubscribeRequest(
        group_ids=[group], kinds=[K.EVENT_KIND_MESSAGE_PINNED, K.EVENT_KIND_MESSAGE_UNPINNED]), user_md(mia))
    stream.until_caught_up()

    answer = api.pin(group, second, user_md(admin))
    assert [p.sequence for p in answer.pinned_messages] == [second]
    assert answer.pinned_messages[0].pinned_by_user_id == admin
    assert answer.pinned_messages[0].pin_time.seconds > 0
    answer = api.pin(group, first, user_md(owner))
    assert [p.sequence for p in answer.pinned_messages] == [second, first]  # the earliest pinned first

    # Listed on the group for members; not in the public view of a non-member.
    seen = api.info(group, user_md(mia))
    assert [(p.sequence, p.pinned_by_user_id) for p in seen.pinned_messages] == [(second, admin), (first, owner)]
    stranger = api.info(group, user_md(uid("stranger")))
    assert stranger.public_view_only and list(stranger.pinned_messages) == []

    pinned, pinned_again = [item.event for item in stream.events(2)]
    assert pinned.kind == K.EVENT_KIND_MESSAGE_PINNED and pinned.operator_user_id == admin
    assert pinned.pin.sequence == second and pinned.pin.pinned_by_user_id == admin
    assert pinned_again.pin.sequence == first and list(pinned_again.recipient_user_ids) == []

    answer = api.unpin(group, second, user_md(admin))
    assert [p.sequence for p in answer.pinned_messages] == [first]
    (unpinned,) = [item.event for item in stream.events(1)]
    assert unpinned.kind == K.EVENT_KIND_MESSAGE_UNPINNED and unpinned.operator_user_id == admin
    assert unpinned.pin.sequence == second and unpinned.pin.pinned_by_user_id == admin
    assert api.pinned(group) == [first]
    # The backend pins too (no pinner named).
    answer = api.pin(group, second, admin_md())
    assert answer.pinned_messages[-1].pinned_by_user_id == ""
    stream.cancel()


def test_pin_scope_decides_who_pins(api):
    owner, admin, mia = uid("owner"), uid("admin"), uid("mia")
    group = api.create(PUBLIC, owner, [(admin, ADMIN), (mia, MEMBER)])
    sequence = api.send_sequence(group, mia)
    assert api.info(group, user_md(owner)).settings.pin_scope == K.OPERATOR_SCOPE_OWNER_AND_ADMINS
    info = expect_error(lambda: api.pin(group, sequence, user_md(mia)), grpc.StatusCode.PERMISSION_DENIED,
                        "PERMISSION_DENIED")
    assert info.metadata["setting"] == "pin_scope"
    expect_error(lambda: api.pin(group, sequence, user_md(uid("stranger"))), grpc.StatusCode.PERMISSION_DENIED,
                 "NOT_A_MEMBER")
    assert api.pinned(group) == []

    # Everyone may pin once the owner says so; NOBODY leaves only the backend.
    api.groups.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
        group_id=group, settings=K.GroupSettings(pin_scope=K.OPERATOR_SCOPE_ALL_MEMBERS),
        update_mask=field_mask_pb2.FieldMask(paths=["pin_scope"])), metadata=user_md(owner), timeout=10)
    assert api.info(group, user_md(mia)).settings.pin_scope == K.OPERATOR_SCOPE_ALL_MEMBERS
    api.pin(group, sequence, user_md(mia))
    api.groups.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
        group_id=group, settings=K.GroupSettings(pin_scope=K.OPERATOR_SCOPE_NOBODY),
        update_mask=field_mask_pb2.FieldMask(paths=["pin_scope"])), metadata=user_md(owner), timeout=10)
    expect_error(lambda: api.unpin(group, sequence, user_md(owner)), grpc.StatusCode.PERMISSION_DENIED,
                 "PERMISSION_DENIED")
    assert api.pinned(group) == [sequence]
    api.unpin(group, sequence, admin_md())
    assert api.pinned(group) == []


def test_pin_scope_defaults_per_type_and_at_creation(api):
    owner, mia = uid("owner"), uid("mia")
    work = api.create(WORK, owner, [(mia, MEMBER)])
    assert api.info(work, user_md(owner)).settings.pin_scope == K.OPERATOR_SCOPE_OWNER
    sequence = api.send_sequence(work, mia)
    expect_error(lambda: api.pin(work, sequence, user_md(mia)), grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    api.pin(work, sequence, user_md(owner))
    assert api.pinned(work) == [sequence]
    meeting = api.create(MEETING, owner, [(mia, MEMBER)],
                         settings=K.GroupSettings(pin_scope=K.OPERATOR_SCOPE_ALL_MEMBERS))
    assert api.info(meeting, user_md(owner)).settings.pin_scope == K.OPERATOR_SCOPE_ALL_MEMBERS
    sequence = api.send_sequence(meeting, owner)
    api.pin(meeting, sequence, user_md(mia))
    assert api.pinned(meeting) == [sequence]


def test_pin_refusals_change_nothing(api):
    owner, mia = uid("owner"), uid("mia")
    group = api.create(PUBLIC, owner, [(mia, MEMBER)])
    sequence = api.send_sequence(group, mia)
    api.pin(group, sequence, user_md(owner))

    info = expect_error(lambda: api.pin(group, sequence, user_md(owner)), grpc.StatusCode.ALREADY_EXISTS,
                        "MESSAGE_ALREADY_PINNED")
    assert info.metadata["field"] == "sequence"
    info = expect_error(lambda: api.pin(group, 0, user_md(owner)), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "sequence"
    expect_error(lambda: api.unpin(group, 0, user_md(owner)), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    # No such message: past the latest, and an event's sequence (the group's creation, 1).
    info = expect_error(lambda: api.pin(group, sequence + 50, user_md(owner)), grpc.StatusCode.NOT_FOUND,
                        "MESSAGE_NOT_FOUND")
    assert info.metadata["field"] == "sequence"
    expect_error(lambda: api.pin(group, 1, user_md(owner)), grpc.StatusCode.NOT_FOUND, "MESSAGE_NOT_FOUND")
    info = expect_error(lambda: api.unpin(group, sequence + 50, user_md(owner)), grpc.StatusCode.NOT_FOUND,
                        "MESSAGE_NOT_PINNED")
    assert info.metadata["field"] == "sequence"
    expect_error(lambda: api.pin(uid("nogroup"), sequence, user_md(owner)), grpc.StatusCode.NOT_FOUND,
                 "GROUP_NOT_FOUND")
    assert api.pinned(group) == [sequence]


def test_a_message_from_before_joining_cannot_be_pinned_by_the_newcomer(api):
    owner, late = uid("owner"), uid("late")
    group = api.create(PUBLIC, owner, settings=K.GroupSettings(pin_scope=K.OPERATOR_SCOPE_ALL_MEMBERS,
                                                               join_option=K.JOIN_OPTION_ANY))
    before = api.send_sequence(group, owner, "before")
    api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=group), metadata=user_md(late), timeout=10)
    expect_error(lambda: api.pin(group, before, user_md(late)), grpc.StatusCode.NOT_FOUND, "MESSAGE_NOT_FOUND")
    after = api.send_sequence(group, owner, "after")
    api.pin(group, after, user_md(late))
    assert api.pinned(group) == [after]


def test_av_chat_room_has_nothing_to_pin(api):
    owner = uid("owner")
    room = api.create(AV, owner)
    expect_error(lambda: api.pin(room, 1, user_md(owner)), grpc.StatusCode.FAILED_PRECONDITION, "HISTORY_NOT_KEPT")
    expect_error(lambda: api.unpin(room, 1, user_md(owner)), grpc.StatusCode.FAILED_PRECONDITION, "HISTORY_NOT_KEPT")
    assert list(api.info(room, user_md(owner)).pinned_messages) == []


@pytest.fixture
def limited(fresh_groupd):
    server = fresh_groupd(limits={"max_pinned_messages": 2}).start()
    with grpc.insecure_channel(server.address) as channel:
        yield Api(channel)


def test_max_pinned_messages(limited):
    api = limited
    owner = uid("owner")
    group = api.create(PUBLIC, owner)
    first, second, third = (api.send_sequence(group, owner, text) for text in ("a", "b", "c"))
    api.pin(group, first, user_md(owner))
    api.pin(group, second, user_md(owner))
    info = expect_error(lambda: api.pin(group, third, user_md(owner)), grpc.StatusCode.FAILED_PRECONDITION,
                        "TOO_MANY_PINNED_MESSAGES")
    assert info.metadata["limit"] == "2"
    assert api.pinned(group) == [first, second]
    api.unpin(group, first, user_md(owner))
    api.pin(group, third, user_md(owner))
    assert api.pinned(group) == [second, third]
