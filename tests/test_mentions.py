"""@mentions through a real groupd with stock grpcio: SendGroupMessage with mentioned_user_ids and
mention_all (who may @all: GroupSettings.mention_all_scope, per type and changeable), the unread
mention ListJoinedGroups and GetGroupsInfo show per group (@me, @all, both), cleared by a
MarkGroupRead that covers the mentioning message, and every refusal (malformed, repeated or too
many ids, @all without the grant), each storing nothing.
"""
import grpc
import pytest
from google.protobuf import field_mask_pb2

from support import admin_md, expect_error, uid, user_md
from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc, message_pb2, message_pb2_grpc

K = common_pb2
MEMBER, ADMIN = K.MEMBER_ROLE_MEMBER, K.MEMBER_ROLE_ADMIN
NONE, ME, ALL, BOTH = K.UNREAD_MENTION_UNSPECIFIED, K.UNREAD_MENTION_ME, K.UNREAD_MENTION_ALL, K.UNREAD_MENTION_ALL_AND_ME


class Api:
    def __init__(self, channel):
        self.groups = group_pb2_grpc.GroupServiceStub(channel)
        self.messages = message_pb2_grpc.MessageServiceStub(channel)

    def create(self, group_type, owner, members=()):
        return self.groups.CreateGroup(group_pb2.CreateGroupRequest(
            group_id=uid("g"), type=group_type, owner_user_id=owner, profile=K.GroupProfile(name="team"),
            members=[group_pb2.InitialMember(user_id=user, role=role) for user, role in members]),
            metadata=admin_md(), timeout=10).group

    def send(self, group, user, mentions=(), everyone=False, text="hi"):
        return self.messages.SendGroupMessage(message_pb2.SendGroupMessageRequest(
            group_id=group, type="text", text=text, mentioned_user_ids=list(mentions), mention_all=everyone),
            metadata=user_md(user), timeout=10).message

    def mention(self, group, user):
        """The user's unread mention in the group, as ListJoinedGroups and GetGroupsInfo show it
        (checked to agree)."""
        listed = {g.group_id: g for g in self.groups.ListJoinedGroups(
            group_pb2.ListJoinedGroupsRequest(), metadata=user_md(user), timeout=10).groups}
        (info,) = self.groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[group]),
                                            metadata=user_md(user), timeout=10).groups
        assert listed[group].unread_mention == info.unread_mention
        return info.unread_mention

    def read(self, group, user, sequence=0):
        return self.messages.MarkGroupRead(message_pb2.MarkGroupReadRequest(group_id=group, read_sequence=sequence),
                                           metadata=user_md(user), timeout=10)

    def history(self, group, user):
        return list(self.messages.GetGroupMessages(message_pb2.GetGroupMessagesRequest(
            group_id=group, direction=message_pb2.HISTORY_DIRECTION_NEWER, page_size=100),
            metadata=user_md(user), timeout=10).messages)


@pytest.fixture
def api(groupd):
    with grpc.insecure_channel(groupd.address) as channel:
        yield Api(channel)


def test_mentions_mark_unread_kinds_until_read(api):
    owner, mia, max_, zoe = uid("owner"), uid("mia"), uid("max"), uid("zoe")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, [(mia, MEMBER), (max_, MEMBER), (zoe, MEMBER)]).group_id
    first = api.send(group, mia, [max_, mia])
    assert list(first.mentioned_user_ids) == [max_, mia] and not first.mention_all
    # The sender's own mention marks nothing; an unmentioned member has none.
    assert (api.mention(group, max_), api.mention(group, mia), api.mention(group, zoe)) == (ME, NONE, NONE)
    second = api.send(group, owner, [zoe], everyone=True)
    assert second.mention_all
    assert (api.mention(group, max_), api.mention(group, zoe), api.mention(group, mia)) == (BOTH, BOTH, ALL)
    assert api.mention(group, owner) == NONE  # their own @all
    # History keeps the mentions.
    assert [(list(m.mentioned_user_ids), m.mention_all) for m in api.history(group, owner)] == [
        ([max_, mia], False), ([zoe], True)]
    # Reading up to the first message clears @me of it, not the later @all.
    api.read(group, max_, first.sequence)
    assert api.mention(group, max_) == ALL
    api.read(group, max_)
    assert api.mention(group, max_) == NONE
    api.read(group, zoe, second.sequence)
    assert api.mention(group, zoe) == NONE
    # A later mention marks again.
    api.send(group, mia, [max_])
    assert api.mention(group, max_) == ME


def test_mention_all_scope_per_type_and_setting(api):
    owner, adam, mia = uid("owner"), uid("adam"), uid("mia")
    public = api.create(K.GROUP_TYPE_PUBLIC, owner, [(adam, ADMIN), (mia, MEMBER)])
    assert public.settings.mention_all_scope == K.OPERATOR_SCOPE_OWNER_AND_ADMINS
    work = api.create(K.GROUP_TYPE_WORK, owner, [(mia, MEMBER)])
    assert work.settings.mention_all_scope == K.OPERATOR_SCOPE_ALL_MEMBERS
    meeting = api.create(K.GROUP_TYPE_MEETING, owner, [(mia, MEMBER)])
    assert meeting.settings.mention_all_scope == K.OPERATOR_SCOPE_OWNER_AND_ADMINS
    room = api.create(K.GROUP_TYPE_AV_CHAT_ROOM, owner)
    assert room.settings.mention_all_scope == K.OPERATOR_SCOPE_OWNER

    info = expect_error(lambda: api.send(public.group_id, mia, everyone=True), grpc.StatusCode.PERMISSION_DENIED,
                        "PERMISSION_DENIED")
    assert info.metadata["setting"] == "mention_all_scope"
    assert api.history(public.group_id, owner) == []
    assert api.send(public.group_id, adam, everyone=True).mention_all
    assert api.send(work.group_id, mia, everyone=True).mention_all
    # The owner widens it; an ordinary member may not change it back (settings_edit_scope).
    updated = api.groups.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
        group_id=public.group_id, settings=K.GroupSettings(mention_all_scope=K.OPERATOR_SCOPE_ALL_MEMBERS),
        update_mask=field_mask_pb2.FieldMask(paths=["mention_all_scope"])), metadata=user_md(owner), timeout=10).group
    assert updated.settings.mention_all_scope == K.OPERATOR_SCOPE_ALL_MEMBERS
    assert api.send(public.group_id, mia, everyone=True).mention_all
    expect_error(lambda: api.groups.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
        group_id=public.group_id, settings=K.GroupSettings(mention_all_scope=K.OPERATOR_SCOPE_NOBODY),
        update_mask=field_mask_pb2.FieldMask(paths=["mention_all_scope"])), metadata=user_md(mia), timeout=10),
        grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    info = expect_error(lambda: api.groups.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
        group_id=public.group_id, settings=K.GroupSettings(),
        update_mask=field_mask_pb2.FieldMask(paths=["mention_all_scope"])), metadata=user_md(owner), timeout=10),
        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "settings.mention_all_scope"
    # Meeting groups count no unread messages, so they show no unread mention.
    api.send(meeting.group_id, owner, [mia], everyone=True)
    assert api.mention(meeting.group_id, mia) == NONE


def test_malformed_repeated_and_too_many_ids_store_nothing(api):
    owner, mia = uid("owner"), uid("mia")
    group = api.create(K.GROUP_TYPE_WORK, owner, [(mia, MEMBER)]).group_id
    info = expect_error(lambda: api.send(group, owner, [mia, ""]), grpc.StatusCode.INVALID_ARGUMENT,
                        "INVALID_ARGUMENT")
    assert info.metadata["field"] == "mentioned_user_ids[1]"
    info = expect_error(lambda: api.send(group, owner, [mia, mia]), grpc.StatusCode.INVALID_ARGUMENT,
                        "INVALID_ARGUMENT")
    assert info.metadata["field"] == "mentioned_user_ids[1]"
    info = expect_error(lambda: api.send(group, owner, ["x" * 65]), grpc.StatusCode.INVALID_ARGUMENT,
                        "INVALID_ARGUMENT")
    assert info.metadata["field"] == "mentioned_user_ids[0]"
    info = expect_error(lambda: api.send(group, owner, [f"u{i}" for i in range(31)]), grpc.StatusCode.INVALID_ARGUMENT,
                        "INVALID_ARGUMENT")
    assert info.metadata["field"] == "mentioned_user_ids" and info.metadata["limit"] == "30"
    assert api.history(group, owner) == []
    assert api.mention(group, mia) == NONE
    # Thirty is allowed; a non-member may be mentioned (it marks nothing for anyone).
    sent = api.send(group, owner, [mia] + [f"u{i}" for i in range(29)])
    assert len(sent.mentioned_user_ids) == 30
    assert api.mention(group, mia) == ME


def test_mention_limit_is_per_app(fresh_groupd):
    server = fresh_groupd(limits={"max_mentions_per_message": 2}).start()
    with grpc.insecure_channel(server.address) as channel:
        api = Api(channel)
        owner = uid("owner")
        group = api.create(K.GROUP_TYPE_WORK, owner).group_id
        api.send(group, owner, ["a", "b"])
        info = expect_error(lambda: api.send(group, owner, ["a", "b", "c"]), grpc.StatusCode.INVALID_ARGUMENT,
                            "INVALID_ARGUMENT")
        assert info.metadata["limit"] == "2"
