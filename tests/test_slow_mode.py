"""Slow mode (GroupSettings.slow_mode_interval_seconds) through a real groupd with stock grpcio, on the
manual clock: an ordinary member's message sooner than the interval after their previous one is
RESOURCE_EXHAUSTED / SLOW_MODE with a google.rpc.RetryInfo giving the remaining delay, and is not
stored; the owner and admins are exempt; the setting's refusals (over the app's maximum, a role
without the settings grant, AVChatRoom) change nothing.
"""
import grpc
import pytest
from google.protobuf import field_mask_pb2
from google.rpc import error_details_pb2, status_pb2

from support import admin_md, expect_error, uid, user_md
from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc, message_pb2, message_pb2_grpc

K = common_pb2
MEMBER, ADMIN = K.MEMBER_ROLE_MEMBER, K.MEMBER_ROLE_ADMIN


def retry_delay_ms(error):
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                if detail.type_url.endswith("google.rpc.RetryInfo"):
                    info = error_details_pb2.RetryInfo()
                    detail.Unpack(info)
                    return info.retry_delay.seconds * 1000 + info.retry_delay.nanos // 1_000_000
    raise AssertionError("no RetryInfo in the details")


class Api:
    def __init__(self, channel):
        self.groups = group_pb2_grpc.GroupServiceStub(channel)
        self.messages = message_pb2_grpc.MessageServiceStub(channel)

    def create(self, group_type, owner, members=(), slow=0):
        return self.groups.CreateGroup(group_pb2.CreateGroupRequest(
            group_id=uid("g"), type=group_type, owner_user_id=owner, profile=K.GroupProfile(name="team"),
            settings=K.GroupSettings(slow_mode_interval_seconds=slow),
            members=[group_pb2.InitialMember(user_id=user, role=role) for user, role in members]),
            metadata=admin_md(), timeout=10).group

    def set_slow(self, group, seconds, metadata):
        return self.groups.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
            group_id=group, settings=K.GroupSettings(slow_mode_interval_seconds=seconds),
            update_mask=field_mask_pb2.FieldMask(paths=["slow_mode_interval_seconds"])),
            metadata=metadata, timeout=10).group

    def interval(self, group, user):
        (info,) = self.groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[group]),
                                            metadata=user_md(user), timeout=10).groups
        return info.settings.slow_mode_interval_seconds

    def send(self, group, user, text="hi"):
        return self.messages.SendGroupMessage(message_pb2.SendGroupMessageRequest(
            group_id=group, type="text", text=text), metadata=user_md(user), timeout=10)

    def texts(self, group, user):
        return [m.text for m in self.messages.GetGroupMessages(message_pb2.GetGroupMessagesRequest(
            group_id=group, direction=message_pb2.HISTORY_DIRECTION_NEWER, page_size=100),
            metadata=user_md(user), timeout=10).messages]


@pytest.fixture
def clocked(fresh_groupd):
    server = fresh_groupd(manual_clock=True).start()
    with grpc.insecure_channel(server.address) as channel:
        yield server, Api(channel)


def test_member_waits_the_interval_and_gets_retry_info(clocked):
    server, api = clocked
    owner, adam, mia = uid("owner"), uid("adam"), uid("mia")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, [(adam, ADMIN), (mia, MEMBER)]).group_id
    assert api.interval(group, mia) == 0
    assert api.set_slow(group, 30, user_md(adam)).settings.slow_mode_interval_seconds == 30
    assert api.interval(group, mia) == 30
    api.send(group, mia, "one")
    with pytest.raises(grpc.RpcError) as caught:
        api.send(group, mia, "two")
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert retry_delay_ms(caught.value) == 30_000
    server.advance_clock(seconds=29)
    info = expect_error(lambda: api.send(group, mia, "two"), grpc.StatusCode.RESOURCE_EXHAUSTED, "SLOW_MODE")
    assert info.metadata["interval_seconds"] == "30" and info.metadata["retry_delay_ms"] == "1000"
    server.advance_clock(seconds=1)
    api.send(group, mia, "two")
    # The owner and admins are exempt.
    for user in (owner, adam, owner, adam):
        api.send(group, user, "staff")
    assert api.texts(group, owner) == ["one", "two", "staff", "staff", "staff", "staff"]
    # 0 turns it off.
    api.set_slow(group, 0, user_md(owner))
    api.send(group, mia, "three")
    api.send(group, mia, "four")
    assert api.texts(group, owner)[-2:] == ["three", "four"]


def test_slow_mode_from_creation_and_refusals_change_nothing(clocked):
    server, api = clocked
    owner, mia = uid("owner"), uid("mia")
    created = api.create(K.GROUP_TYPE_PUBLIC, owner, [(mia, MEMBER)], slow=10)
    group = created.group_id
    assert created.settings.slow_mode_interval_seconds == 10
    api.send(group, mia, "a")
    expect_error(lambda: api.send(group, mia, "b"), grpc.StatusCode.RESOURCE_EXHAUSTED, "SLOW_MODE")
    # Over the app's maximum (21600 by default).
    info = expect_error(lambda: api.set_slow(group, 21_601, user_md(owner)), grpc.StatusCode.INVALID_ARGUMENT,
                        "INVALID_ARGUMENT")
    assert info.metadata["field"] == "settings.slow_mode_interval_seconds" and info.metadata["limit"] == "21600"
    # An ordinary member may not change settings in a Public group.
    info = expect_error(lambda: api.set_slow(group, 0, user_md(mia)), grpc.StatusCode.PERMISSION_DENIED,
                        "PERMISSION_DENIED")
    assert info.metadata["setting"] == "settings_edit_scope"
    assert api.interval(group, owner) == 10
    assert api.texts(group, owner) == ["a"]
    # AVChatRoom: the type fixes slow mode off (its audience is not stored).
    room = api.create(K.GROUP_TYPE_AV_CHAT_ROOM, owner).group_id
    info = expect_error(lambda: api.set_slow(room, 5, user_md(owner)), grpc.StatusCode.FAILED_PRECONDITION,
                        "SETTING_FIXED_BY_TYPE")
    assert info.metadata["setting"] == "slow_mode_interval_seconds"
    expect_error(lambda: api.create(K.GROUP_TYPE_AV_CHAT_ROOM, owner, slow=5), grpc.StatusCode.FAILED_PRECONDITION,
                 "SETTING_FIXED_BY_TYPE")
    info = expect_error(lambda: api.create(K.GROUP_TYPE_WORK, owner, slow=99_999), grpc.StatusCode.INVALID_ARGUMENT,
                        "INVALID_ARGUMENT")
    assert info.metadata["field"] == "settings.slow_mode_interval_seconds"


def test_maximum_interval_is_per_app(fresh_groupd):
    server = fresh_groupd(manual_clock=True, limits={"max_slow_mode_interval_seconds": 60}).start()
    with grpc.insecure_channel(server.address) as channel:
        api = Api(channel)
        owner = uid("owner")
        group = api.create(K.GROUP_TYPE_WORK, owner).group_id
        assert api.set_slow(group, 60, user_md(owner)).settings.slow_mode_interval_seconds == 60
        info = expect_error(lambda: api.set_slow(group, 61, user_md(owner)), grpc.StatusCode.INVALID_ARGUMENT,
                            "INVALID_ARGUMENT")
        assert info.metadata["limit"] == "60"
        assert api.interval(group, owner) == 60
