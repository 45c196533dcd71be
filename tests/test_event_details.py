"""Every event kind carries the detail event.proto promises, through a real Subscribe stream: one
table row per operation (what it does → the kind a firehose filtered to that kind receives, and its
detail). Each row's event is read twice: live, and replayed from the store by a second stream from
the oldest item, which must be the same message (the detail survives the store round trip).

Then the expired state: a group mute and a member mute that have ended (on the manual clock) are
not shown by any read, and a group mute names who set it.
"""
import grpc
import pytest

from support import EventStream, admin_md, uid, user_md
from groupd.v1 import (application_pb2, application_pb2_grpc, common_pb2, event_pb2, event_pb2_grpc, group_pb2,
                       group_pb2_grpc, member_pb2, member_pb2_grpc, message_pb2, message_pb2_grpc)
from google.protobuf import field_mask_pb2, timestamp_pb2

K = common_pb2


class Stream(EventStream):
    def events(self, count, timeout=15):
        """The next `count` events."""
        return [item.event for item in super().events(count, timeout)]


class Api:
    def __init__(self, channel):
        self.channel = channel
        self.groups = group_pb2_grpc.GroupServiceStub(channel)
        self.members = member_pb2_grpc.MemberServiceStub(channel)
        self.apps = application_pb2_grpc.ApplicationServiceStub(channel)

    def create(self, group_type, owner, members=(), join_option=K.JOIN_OPTION_UNSPECIFIED, group_id=None,
               introduction=""):
        group_id = group_id or uid("g")
        self.groups.CreateGroup(group_pb2.CreateGroupRequest(
            group_id=group_id, type=group_type, owner_user_id=owner,
            profile=K.GroupProfile(name="t", introduction=introduction),
            settings=K.GroupSettings(join_option=join_option),
            members=[group_pb2.InitialMember(user_id=user, role=K.MEMBER_ROLE_MEMBER) for user in members]),
            metadata=admin_md(), timeout=10)
        return group_id

    def mute_members(self, group, by, users, seconds):
        self.members.MuteMembers(member_pb2.MuteMembersRequest(group_id=group, user_ids=users, duration_seconds=seconds),
                                 metadata=user_md(by), timeout=10)

    def mute_group(self, group, by, muted, seconds=0):
        self.groups.SetGroupMute(group_pb2.SetGroupMuteRequest(
            group_id=group, muted=muted, mode=K.GROUP_MUTE_MODE_ALL if muted else K.GROUP_MUTE_MODE_UNSPECIFIED,
            duration_seconds=seconds), metadata=user_md(by), timeout=10)


def observe(api, group, kind, action):
    """Runs `action` with a firehose filtered to `group` and `kind` listening; returns the event it
    receives, after checking that a replay from the store gives the same message."""
    stream = Stream(api.channel, event_pb2.SubscribeRequest(group_ids=[group], kinds=[kind]), admin_md())
    stream.until_caught_up()
    action()
    (live,) = stream.events(1)
    stream.cancel()
    assert live.kind == kind and live.group_id == group
    replay = Stream(api.channel, event_pb2.SubscribeRequest(group_ids=[group], kinds=[kind], from_oldest=True),
                    admin_md())
    stored = [item.event for item in replay.until_caught_up() if item.WhichOneof("item") == "event"]
    replay.cancel()
    replayed = [event for event in stored if event.sequence == live.sequence]
    assert replayed == [live], "the replayed event differs from the live one"
    return live


# Each case: (name, kind, run(api) -> (group, action, check(event, context))).

def profile_change(api):
    owner = uid("alice")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner)

    def action():
        api.groups.UpdateGroupProfile(group_pb2.UpdateGroupProfileRequest(
            group_id=group, update_mask=field_mask_pb2.FieldMask(paths=["name", "introduction"]),
            profile=K.GroupProfile(name="renamed", introduction="about")), metadata=user_md(owner), timeout=10)

    def check(event):
        assert event.WhichOneof("detail") == "profile_change"
        assert list(event.profile_change.changed_fields) == ["introduction", "name"]
        assert event.profile_change.profile.name == "renamed"
        assert event.profile_change.profile.introduction == "about"
        assert event.operator_user_id == owner
    return group, action, check


def settings_change(api):
    owner = uid("alice")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner)

    def action():
        api.groups.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
            group_id=group, update_mask=field_mask_pb2.FieldMask(paths=["join_option", "max_member_count"]),
            settings=K.GroupSettings(join_option=K.JOIN_OPTION_FORBIDDEN), max_member_count=50),
            metadata=admin_md(), timeout=10)

    def check(event):
        assert event.WhichOneof("detail") == "settings_change"
        assert list(event.settings_change.changed_fields) == ["join_option", "max_member_count"]
        assert event.settings_change.settings.join_option == K.JOIN_OPTION_FORBIDDEN
        # Settings that did not change are left unset.
        assert event.settings_change.settings.invite_scope == K.OPERATOR_SCOPE_UNSPECIFIED
        assert event.settings_change.max_member_count == 50
    return group, action, check


def mention_and_slow_mode_settings(api):
    owner = uid("alice")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner)

    def action():
        api.groups.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
            group_id=group, update_mask=field_mask_pb2.FieldMask(paths=["mention_all_scope", "slow_mode_interval_seconds"]),
            settings=K.GroupSettings(mention_all_scope=K.OPERATOR_SCOPE_NOBODY, slow_mode_interval_seconds=15)),
            metadata=admin_md(), timeout=10)

    def check(event):
        assert list(event.settings_change.changed_fields) == ["mention_all_scope", "slow_mode_interval_seconds"]
        assert event.settings_change.settings.mention_all_scope == K.OPERATOR_SCOPE_NOBODY
        assert event.settings_change.settings.slow_mode_interval_seconds == 15
        assert event.settings_change.settings.join_option == K.JOIN_OPTION_UNSPECIFIED
    return group, action, check


def message_recall(api):
    owner, bob = uid("alice"), uid("bob")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, [bob])
    sent = message_pb2_grpc.MessageServiceStub(api.channel).SendGroupMessage(
        message_pb2.SendGroupMessageRequest(group_id=group, text="oops"), metadata=user_md(bob), timeout=10).message

    def action():
        message_pb2_grpc.MessageServiceStub(api.channel).RecallGroupMessage(
            message_pb2.RecallGroupMessageRequest(group_id=group, sequence=sent.sequence),
            metadata=user_md(owner), timeout=10)

    def check(event):
        assert event.WhichOneof("detail") == "message_recall"
        detail = event.message_recall
        assert (detail.sequence, detail.message_id, detail.sender_user_id, detail.recalled_by_user_id) == (
            sent.sequence, sent.message_id, bob, owner)
        assert event.operator_user_id == owner and list(event.target_user_ids) == [bob]
    return group, action, check


def message_edit(api):
    owner, bob = uid("alice"), uid("bob")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, [bob])
    sent = message_pb2_grpc.MessageServiceStub(api.channel).SendGroupMessage(
        message_pb2.SendGroupMessageRequest(group_id=group, text="tpyo"), metadata=user_md(bob), timeout=10).message

    def action():
        message_pb2_grpc.MessageServiceStub(api.channel).EditGroupMessage(
            message_pb2.EditGroupMessageRequest(group_id=group, sequence=sent.sequence, text="typo", payload=b"\x00\xff"),
            metadata=user_md(owner), timeout=10)

    def check(event):
        assert event.WhichOneof("detail") == "message_edit"
        detail = event.message_edit
        assert (detail.sequence, detail.message_id, detail.sender_user_id, detail.edited_by_user_id, detail.edit_count,
                detail.text, detail.payload) == (sent.sequence, sent.message_id, bob, owner, 1, "typo", b"\x00\xff")
        assert event.operator_user_id == owner and list(event.target_user_ids) == [bob]
    return group, action, check


def member_mute(api):
    owner, bob = uid("alice"), uid("bob")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, [bob])

    def check(event):
        assert event.WhichOneof("detail") == "member_change"
        assert list(event.member_change.changed_fields) == ["mute_until"]
        (member,) = event.member_change.members
        assert member.user_id == bob and member.HasField("mute_until")
        assert member.mute_until.seconds - event.time.seconds in (59, 60, 61)
        assert list(event.target_user_ids) == [bob]
    return group, lambda: api.mute_members(group, owner, [bob], 60), check


def member_unmute(api):
    owner, bob = uid("alice"), uid("bob")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, [bob])
    api.mute_members(group, owner, [bob], 60)

    def check(event):
        assert event.WhichOneof("detail") == "member_change"
        assert list(event.member_change.changed_fields) == ["mute_until"]
        (member,) = event.member_change.members
        assert member.user_id == bob and not member.HasField("mute_until")
    return group, lambda: api.mute_members(group, owner, [bob], 0), check


def group_mute(api):
    owner = uid("alice")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner)

    def check(event):
        assert event.WhichOneof("detail") == "group_mute"
        assert event.group_mute.mode == K.GROUP_MUTE_MODE_ALL
        assert event.group_mute.mute_until.seconds - event.time.seconds in (119, 120, 121)
        assert event.group_mute.operator_user_id == owner
    return group, lambda: api.mute_group(group, owner, True, 120), check


def group_unmute(api):
    owner = uid("alice")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner)
    api.mute_group(group, owner, True)

    def check(event):
        assert event.WhichOneof("detail") == "group_mute"
        assert event.group_mute.mode == K.GROUP_MUTE_MODE_UNSPECIFIED
        assert not event.group_mute.HasField("mute_until")
        assert event.group_mute.operator_user_id == owner
    return group, lambda: api.mute_group(group, owner, False), check


def free_join(api):
    owner, carol = uid("alice"), uid("carol")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, join_option=K.JOIN_OPTION_ANY)

    def action():
        api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=group), metadata=user_md(carol), timeout=10)

    def check(event):
        assert event.WhichOneof("detail") == "member_change"
        (member,) = event.member_change.members
        assert member.user_id == carol and member.role == K.MEMBER_ROLE_MEMBER
        assert member.join_source == K.JOIN_SOURCE_FREE_JOIN and member.inviter_user_id == ""
        assert member.join_time == event.time
    return group, action, check


def application_join(api):
    owner, carol = uid("alice"), uid("carol")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, join_option=K.JOIN_OPTION_APPROVAL)

    def action():
        applied = api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=group), metadata=user_md(carol),
                                        timeout=10)
        api.apps.AcceptApplication(application_pb2.AcceptApplicationRequest(
            application_id=applied.application.application_id), metadata=user_md(owner), timeout=10)

    def check(event):
        (member,) = event.member_change.members
        assert member.user_id == carol
        assert member.join_source == K.JOIN_SOURCE_APPLICATION and member.inviter_user_id == owner
    return group, action, check


def invitation(api):
    owner, dave, erin = uid("alice"), uid("dave"), uid("erin")
    group = api.create(K.GROUP_TYPE_WORK, owner)

    def action():
        api.members.InviteMembers(member_pb2.InviteMembersRequest(group_id=group, user_ids=[dave, erin]),
                                  metadata=user_md(owner), timeout=10)

    def check(event):
        assert event.WhichOneof("detail") == "member_change"
        assert [m.user_id for m in event.member_change.members] == [dave, erin]
        for member in event.member_change.members:
            assert member.join_source == K.JOIN_SOURCE_INVITATION and member.inviter_user_id == owner
        assert event.member_count == 3
    return group, action, check


def invited_notification(api):
    group, action, _ = invitation(api)

    def check(event):
        assert event.WhichOneof("detail") == "member_change"
        (member,) = event.member_change.members
        assert member.join_source == K.JOIN_SOURCE_INVITATION and member.inviter_user_id == event.operator_user_id
        assert list(event.recipient_user_ids) == [member.user_id]
    return group, action, check


def member_info(api):
    owner, bob = uid("alice"), uid("bob")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, [bob])

    def action():
        api.members.UpdateMemberInfo(member_pb2.UpdateMemberInfoRequest(
            group_id=group, user_id=bob, update_mask=field_mask_pb2.FieldMask(paths=["name_card"]), name_card="Bobby"),
            metadata=user_md(bob), timeout=10)

    def check(event):
        assert list(event.member_change.changed_fields) == ["name_card"]
        (member,) = event.member_change.members
        assert member.user_id == bob and member.name_card == "Bobby"
    return group, action, check


def created(api):
    owner, bob = uid("alice"), uid("bob")
    group = uid("g")

    def check(event):
        assert event.WhichOneof("detail") == "group"
        made = event.group
        assert made.group_id == group and made.type == K.GROUP_TYPE_PUBLIC
        assert made.profile.name == "t" and made.profile.introduction == "hello"
        assert made.owner_user_id == owner and made.member_count == 2
        assert made.settings.join_option == K.JOIN_OPTION_ANY
        assert made.create_time == event.time
    return group, lambda: api.create(K.GROUP_TYPE_PUBLIC, owner, [bob], join_option=K.JOIN_OPTION_ANY,
                                     group_id=group, introduction="hello"), check


def imported(api):
    owner, bob = uid("alice"), uid("bob")
    group = uid("g")

    def action():
        api.groups.ImportGroup(group_pb2.ImportGroupRequest(
            group_id=group, type=K.GROUP_TYPE_PUBLIC, owner_user_id=owner, profile=K.GroupProfile(name="old"),
            create_time=timestamp_pb2.Timestamp(seconds=1_600_000_000),
            members=[group_pb2.ImportedMember(user_id=owner, role=K.MEMBER_ROLE_OWNER),
                     group_pb2.ImportedMember(user_id=bob)]), metadata=admin_md(), timeout=10)

    def check(event):
        made = event.group
        assert made.group_id == group and made.profile.name == "old" and made.owner_user_id == owner
        assert made.member_count == 2 and made.create_time.seconds == 1_600_000_000
        assert list(event.recipient_user_ids) == [owner]
    return group, action, check


def owner_change(api):
    owner, bob = uid("alice"), uid("bob")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, [bob])

    def action():
        api.groups.TransferOwnership(group_pb2.TransferOwnershipRequest(group_id=group, new_owner_user_id=bob),
                                     metadata=user_md(owner), timeout=10)

    def check(event):
        assert event.owner_change.previous_owner_user_id == owner and event.owner_change.new_owner_user_id == bob
    return group, action, check


def kick(api):
    owner, bob = uid("alice"), uid("bob")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, [bob])

    def action():
        api.members.KickMembers(member_pb2.KickMembersRequest(group_id=group, user_ids=[bob], reason="spam"),
                                metadata=user_md(owner), timeout=10)

    def check(event):
        assert event.kick.reason == "spam" and list(event.target_user_ids) == [bob]
    return group, action, check


CASES = [
    ("UpdateGroupProfile", K.EVENT_KIND_GROUP_INFO_CHANGED, profile_change),
    ("UpdateGroupSettings", K.EVENT_KIND_GROUP_SETTINGS_CHANGED, settings_change),
    ("UpdateGroupSettings (mention_all_scope, slow mode)", K.EVENT_KIND_GROUP_SETTINGS_CHANGED,
     mention_and_slow_mode_settings),
    ("RecallGroupMessage", K.EVENT_KIND_MESSAGE_RECALLED, message_recall),
    ("EditGroupMessage", K.EVENT_KIND_MESSAGE_EDITED, message_edit),
    ("MuteMembers", K.EVENT_KIND_MEMBER_MUTED, member_mute),
    ("MuteMembers 0 (unmute)", K.EVENT_KIND_MEMBER_MUTED, member_unmute),
    ("SetGroupMute", K.EVENT_KIND_GROUP_MUTED, group_mute),
    ("SetGroupMute off", K.EVENT_KIND_GROUP_MUTED, group_unmute),
    ("JoinGroup (free join)", K.EVENT_KIND_MEMBER_JOINED, free_join),
    ("AcceptApplication", K.EVENT_KIND_MEMBER_JOINED, application_join),
    ("InviteMembers", K.EVENT_KIND_MEMBER_INVITED, invitation),
    ("InviteMembers (to the invitee)", K.EVENT_KIND_INVITED, invited_notification),
    ("UpdateMemberInfo", K.EVENT_KIND_MEMBER_INFO_CHANGED, member_info),
    ("CreateGroup", K.EVENT_KIND_GROUP_CREATED, created),
    ("ImportGroup", K.EVENT_KIND_GROUP_CREATED, imported),
    ("TransferOwnership", K.EVENT_KIND_OWNER_CHANGED, owner_change),
    ("KickMembers", K.EVENT_KIND_MEMBER_KICKED, kick),
]


@pytest.mark.parametrize("name,kind,case", CASES, ids=[case[0] for case in CASES])
def test_event_detail(channel, name, kind, case):
    api = Api(channel)
    group, action, check = case(api)
    check(observe(api, group, kind, action))


def test_settings_change_is_not_an_info_change_and_mute_differs_from_unmute(channel):
    api = Api(channel)
    owner, bob = uid("alice"), uid("bob")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, [bob])
    info = Stream(channel, event_pb2.SubscribeRequest(group_ids=[group], kinds=[K.EVENT_KIND_GROUP_INFO_CHANGED]),
                  admin_md())
    info.until_caught_up()
    settings_change_of(api, group)
    api.groups.UpdateGroupProfile(group_pb2.UpdateGroupProfileRequest(
        group_id=group, update_mask=field_mask_pb2.FieldMask(paths=["name"]), profile=K.GroupProfile(name="n2")),
        metadata=user_md(owner), timeout=10)
    # The settings change came first, but only the profile change is an info change.
    (first,) = info.events(1)
    info.cancel()
    assert first.profile_change.changed_fields == ["name"]

    muted = observe(api, group, K.EVENT_KIND_MEMBER_MUTED, lambda: api.mute_members(group, owner, [bob], 30))
    unmuted = observe(api, group, K.EVENT_KIND_MEMBER_MUTED, lambda: api.mute_members(group, owner, [bob], 0))
    assert muted.member_change != unmuted.member_change
    assert muted.member_change.members[0].HasField("mute_until")
    assert not unmuted.member_change.members[0].HasField("mute_until")
    on = observe(api, group, K.EVENT_KIND_GROUP_MUTED, lambda: api.mute_group(group, owner, True))
    off = observe(api, group, K.EVENT_KIND_GROUP_MUTED, lambda: api.mute_group(group, owner, False))
    assert on.group_mute.mode == K.GROUP_MUTE_MODE_ALL and off.group_mute.mode == K.GROUP_MUTE_MODE_UNSPECIFIED


def settings_change_of(api, group):
    api.groups.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
        group_id=group, update_mask=field_mask_pb2.FieldMask(paths=["join_option"]),
        settings=K.GroupSettings(join_option=K.JOIN_OPTION_FORBIDDEN)), metadata=admin_md(), timeout=10)


# Expired state on the manual clock.

@pytest.fixture
def clocked(fresh_groupd):
    server = fresh_groupd(manual_clock=True).start()
    with grpc.insecure_channel(server.address) as channel:
        yield server, Api(channel)


def test_ended_mutes_are_not_shown(clocked):
    server, api = clocked
    owner, bob = uid("alice"), uid("bob")
    group = api.create(K.GROUP_TYPE_PUBLIC, owner, [bob], group_id=uid("muted"))
    api.mute_group(group, owner, True, 60)
    api.mute_members(group, owner, [bob], 60)

    def group_views(user):
        info = api.groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[group]), metadata=user_md(user),
                                        timeout=10).groups[0]
        joined = [g for g in api.groups.ListJoinedGroups(group_pb2.ListJoinedGroupsRequest(), metadata=user_md(user),
                                                         timeout=10).groups if g.group_id == group]
        found = [r.group for r in api.groups.SearchGroups(group_pb2.SearchGroupsRequest(keyword=group),
                                                          metadata=user_md(user), timeout=10).results
                 if r.group.group_id == group]
        assert len(joined) == 1 and len(found) == 1
        return [info, joined[0], found[0]]

    def member_views():
        got = api.members.GetMembersInfo(member_pb2.GetMembersInfoRequest(group_id=group, user_ids=[bob]),
                                         metadata=user_md(owner), timeout=10).results
        listed = [m for m in api.members.ListMembers(member_pb2.ListMembersRequest(group_id=group),
                                                     metadata=user_md(owner), timeout=10).members if m.user_id == bob]
        own = api.groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[group]), metadata=user_md(bob),
                                       timeout=10).groups[0].self_info
        return [result.member for result in got] + listed + [own]

    for view in group_views(owner):
        assert view.HasField("mute") and view.mute.mode == K.GROUP_MUTE_MODE_ALL
        assert view.mute.operator_user_id == owner
    for member in member_views():
        assert member.user_id == bob and member.HasField("mute_until")

    server.advance_clock(seconds=59)
    assert all(view.HasField("mute") for view in group_views(owner))
    assert all(member.HasField("mute_until") for member in member_views())

    server.advance_clock(seconds=1)
    for view in group_views(owner):
        assert not view.HasField("mute"), view
    for member in member_views():
        assert not member.HasField("mute_until"), member
