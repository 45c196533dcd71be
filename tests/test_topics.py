"""Topics of Community groups through a real groupd with stock grpcio, on SQLite and (with
GROUPD_TEST_POSTGRES_URL) PostgreSQL: CreateTopic, UpdateTopic, DeleteTopic and ListTopics; a
topic as a conversation of its own (its sequence, history, unread counts and mentions, read
marks, mute, pins, recall, edits, reactions, replies, receipts), shared by the community's
members; topics in the joined-group list; topic events and topic messages on the community's
stream; and every refusal, which changes nothing.
"""
import grpc
import pytest

from support import EventStream, MessageApi, admin_md, expect_error, uid, user_md
from groupd.v1 import common_pb2, event_pb2, group_pb2, member_pb2, message_pb2
from google.protobuf import field_mask_pb2

K = common_pb2
COMMUNITY, PUBLIC, MEMBER, ADMIN = K.GROUP_TYPE_COMMUNITY, K.GROUP_TYPE_PUBLIC, K.MEMBER_ROLE_MEMBER, K.MEMBER_ROLE_ADMIN


@pytest.fixture
def api(channel):
    return MessageApi(channel)


def create_topic(api, group, user, name="general", **profile):
    return api.groups.CreateTopic(group_pb2.CreateTopicRequest(
        group_id=group, profile=K.GroupProfile(name=name, **profile)), metadata=user_md(user), timeout=10).topic


def list_topics(api, group, user, ids=()):
    return list(api.groups.ListTopics(group_pb2.ListTopicsRequest(group_id=group, topic_ids=list(ids)),
                                      metadata=user_md(user), timeout=10).topics)


def joined(api, user):
    return {g.group_id: g for g in api.groups.ListJoinedGroups(
        group_pb2.ListJoinedGroupsRequest(page_size=100), metadata=user_md(user), timeout=10).groups}


def community(api):
    owner, admin, mia, max_ = uid("owner"), uid("admin"), uid("mia"), uid("max")
    group = api.create(COMMUNITY, owner, [(admin, ADMIN), (mia, MEMBER), (max_, MEMBER)])
    return group, owner, admin, mia, max_


def test_the_owner_and_admins_create_topics_which_every_member_lists(api):
    group, owner, admin, mia, _ = community(api)
    first = create_topic(api, group, owner, "general", introduction="talk", notification="be kind", face_url="f")
    assert first.topic_id.startswith(group + "@TOPIC#_") and first.group_id == group
    assert (first.profile.name, first.profile.introduction, first.profile.notification, first.profile.face_url) == (
        "general", "talk", "be kind", "f")
    assert first.latest_sequence == 0 and not first.public_view_only and first.HasField("create_time")
    second = create_topic(api, group, admin, "random")
    assert [t.topic_id for t in list_topics(api, group, mia)] == [first.topic_id, second.topic_id]
    assert [t.topic_id for t in list_topics(api, group, mia, [second.topic_id, "nope"])] == [second.topic_id]
    # A non-member sees the public subset (no notification), as of the community.
    public = list_topics(api, group, uid("guest"))
    assert [t.public_view_only for t in public] == [True, True] and public[0].profile.notification == ""
    # The backend creates too.
    backend = api.groups.CreateTopic(group_pb2.CreateTopicRequest(group_id=group, profile=K.GroupProfile(name="ops")),
                                     metadata=admin_md(), timeout=10).topic
    assert len(list_topics(api, group, owner)) == 3 and backend.profile.name == "ops"


def test_refusals_name_their_reason_and_change_nothing(api, fresh_groupd):
    group, owner, admin, mia, _ = community(api)
    topic = create_topic(api, group, owner).topic_id
    before = list_topics(api, group, owner)
    expect_error(lambda: create_topic(api, group, mia), grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    expect_error(lambda: create_topic(api, group, uid("stranger")), grpc.StatusCode.PERMISSION_DENIED, "NOT_A_MEMBER")
    expect_error(lambda: create_topic(api, uid("missing"), owner), grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")
    public = api.create(PUBLIC, owner)
    expect_error(lambda: create_topic(api, public, owner), grpc.StatusCode.FAILED_PRECONDITION, "TOPICS_NOT_SUPPORTED")
    expect_error(lambda: list_topics(api, public, owner), grpc.StatusCode.FAILED_PRECONDITION, "TOPICS_NOT_SUPPORTED")
    info = expect_error(lambda: create_topic(api, group, owner, ""), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "profile.name"
    info = expect_error(lambda: create_topic(api, group, owner, "n" * 31), grpc.StatusCode.INVALID_ARGUMENT,
                        "INVALID_ARGUMENT")
    assert info.metadata["field"] == "profile.name" and info.metadata["limit"] == "30"
    # A topic id where a community is named, and the reverse.
    expect_error(lambda: create_topic(api, topic, owner), grpc.StatusCode.FAILED_PRECONDITION, "NOT_ALLOWED_ON_TOPIC")
    info = expect_error(lambda: api.groups.UpdateTopic(group_pb2.UpdateTopicRequest(
        topic_id=group, update_mask=field_mask_pb2.FieldMask(paths=["name"]), profile=K.GroupProfile(name="x")),
        metadata=user_md(owner), timeout=10), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "topic_id"
    expect_error(lambda: api.groups.DeleteTopic(group_pb2.DeleteTopicRequest(topic_id=topic), metadata=user_md(mia),
                                                timeout=10), grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    expect_error(lambda: api.groups.DeleteTopic(group_pb2.DeleteTopicRequest(topic_id=group + "@TOPIC#_NOSUCHTOPIC00"),
                                                metadata=user_md(owner), timeout=10),
                 grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")
    expect_error(lambda: api.groups.UpdateTopic(group_pb2.UpdateTopicRequest(
        topic_id=topic, update_mask=field_mask_pb2.FieldMask(paths=["color"])), metadata=user_md(owner), timeout=10),
        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert list_topics(api, group, owner) == before
    # The app's topic limit.
    server = fresh_groupd(limits={"max_topics_per_community": 1}).start()
    with grpc.insecure_channel(server.address) as channel:
        limited = MessageApi(channel)
        small, small_owner = limited.create(COMMUNITY, owner), owner
        create_topic(limited, small, small_owner)
        info = expect_error(lambda: create_topic(limited, small, small_owner), grpc.StatusCode.FAILED_PRECONDITION,
                            "TOO_MANY_TOPICS")
        assert info.metadata["limit"] == "1" and len(list_topics(limited, small, small_owner)) == 1


def test_what_acts_on_members_settings_or_the_group_names_the_community(api):
    group, owner, admin, mia, max_ = community(api)
    topic = create_topic(api, group, owner).topic_id
    md = user_md(owner)
    calls = [
        lambda: api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=topic), metadata=user_md(uid("new")), timeout=10),
        lambda: api.members.QuitGroup(member_pb2.QuitGroupRequest(group_id=topic), metadata=user_md(mia), timeout=10),
        lambda: api.members.InviteMembers(member_pb2.InviteMembersRequest(group_id=topic, user_ids=[uid("u")]),
                                          metadata=md, timeout=10),
        lambda: api.members.KickMembers(member_pb2.KickMembersRequest(group_id=topic, user_ids=[mia]), metadata=md,
                                        timeout=10),
        lambda: api.members.SetMemberRole(member_pb2.SetMemberRoleRequest(group_id=topic, user_id=mia, role=ADMIN),
                                          metadata=md, timeout=10),
        lambda: api.members.ListMembers(member_pb2.ListMembersRequest(group_id=topic), metadata=md, timeout=10),
        lambda: api.groups.UpdateGroupProfile(group_pb2.UpdateGroupProfileRequest(
            group_id=topic, update_mask=field_mask_pb2.FieldMask(paths=["name"]), profile=K.GroupProfile(name="x")),
            metadata=md, timeout=10),
        lambda: api.groups.DismissGroup(group_pb2.DismissGroupRequest(group_id=topic), metadata=md, timeout=10),
        lambda: api.groups.TransferOwnership(group_pb2.TransferOwnershipRequest(group_id=topic, new_owner_user_id=mia),
                                             metadata=md, timeout=10),
    ]
    for call in calls:
        info = expect_error(call, grpc.StatusCode.FAILED_PRECONDITION, "NOT_ALLOWED_ON_TOPIC")
        assert info.metadata["community_id"] == group
    # Nothing changed: the community keeps its members and owner.
    members = api.members.ListMembers(member_pb2.ListMembersRequest(group_id=group), metadata=md, timeout=10).members
    assert sorted(m.user_id for m in members) == sorted([owner, admin, mia, max_])
    # GetGroupsInfo reads groups; a topic is read with ListTopics.
    answer = api.groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[topic, group]), metadata=md, timeout=10)
    assert [g.group_id for g in answer.groups] == [group] and [f.group_id for f in answer.failures] == [topic]


def test_a_topic_is_a_conversation_of_its_own(api):
    group, owner, admin, mia, max_ = community(api)
    topic = create_topic(api, group, owner).topic_id
    other = create_topic(api, group, owner, "random").topic_id
    community_before = api.history(group, mia)
    first = api.send(topic, mia, "in the topic")
    assert first.group_id == topic and first.sequence == 1
    second = api.send(topic, max_, "@mia", mentioned_user_ids=[mia])
    assert second.sequence == 2 and api.send(other, mia, "elsewhere").sequence == 1
    assert [m.sequence for m in api.history(topic, owner)] == [1, 2]
    assert api.history(group, mia) == community_before
    expect_error(lambda: api.send(topic, uid("stranger")), grpc.StatusCode.PERMISSION_DENIED, "NOT_A_MEMBER")
    # Unread counts per topic in the joined list, with the mention.
    listed = {t.topic_id: t for t in joined(api, mia)[group].topics}
    assert list(listed) == [topic, other]
    assert (listed[topic].unread_count, listed[topic].unread_mention, listed[topic].latest_sequence) == (
        1, K.UNREAD_MENTION_ME, 2)
    assert listed[other].unread_count == 0 and listed[topic].HasField("last_message_time")
    read = api.messages.MarkGroupRead(message_pb2.MarkGroupReadRequest(group_id=topic), metadata=user_md(mia), timeout=10)
    assert read.unread_count == 0
    listed = {t.topic_id: t for t in joined(api, mia)[group].topics}
    assert (listed[topic].unread_count, listed[topic].read_sequence) == (0, 2)
    assert [t.unread_count for t in list_topics(api, group, owner)] == [2, 1]
    # Recall, edit, pin, react, reply, receipts: on the topic's own messages.
    edited = api.messages.EditGroupMessage(message_pb2.EditGroupMessageRequest(
        group_id=topic, sequence=first.sequence, text="edited"), metadata=user_md(mia), timeout=10).message
    assert edited.text == "edited" and edited.group_id == topic
    api.messages.PinGroupMessage(message_pb2.PinGroupMessageRequest(group_id=topic, sequence=first.sequence),
                                 metadata=user_md(owner), timeout=10)
    assert [p.sequence for p in list_topics(api, group, mia, [topic])[0].pinned_messages] == [first.sequence]
    api.messages.AddMessageReaction(message_pb2.AddMessageReactionRequest(
        group_id=topic, sequence=first.sequence, reaction_key="👍"), metadata=user_md(max_), timeout=10)
    reply = api.send(topic, owner, "answer", reply_to_sequence=first.sequence)
    assert reply.reply_to.sequence == first.sequence
    replies = api.messages.ListMessageReplies(message_pb2.ListMessageRepliesRequest(
        group_id=topic, sequence=first.sequence), metadata=user_md(max_), timeout=10).replies
    assert [m.sequence for m in replies] == [reply.sequence]
    receipts = api.messages.GetMessageReadReceipts(message_pb2.GetMessageReadReceiptsRequest(
        group_id=topic, sequence=first.sequence), metadata=user_md(mia), timeout=10)
    assert receipts.read_count + receipts.unread_count >= 3
    api.messages.RecallGroupMessage(message_pb2.RecallGroupMessageRequest(group_id=topic, sequence=second.sequence),
                                    metadata=user_md(max_), timeout=10)
    assert [m.recalled for m in api.history(topic, mia)][:2] == [False, True]


def test_mutes_of_a_topic_and_of_its_community(api):
    group, owner, admin, mia, _ = community(api)
    topic = create_topic(api, group, owner).topic_id
    other = create_topic(api, group, owner, "random").topic_id
    expect_error(lambda: api.groups.SetGroupMute(group_pb2.SetGroupMuteRequest(
        group_id=topic, muted=True, mode=K.GROUP_MUTE_MODE_ORDINARY_MEMBERS), metadata=user_md(mia), timeout=10),
        grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    api.groups.SetGroupMute(group_pb2.SetGroupMuteRequest(group_id=topic, muted=True,
                                                          mode=K.GROUP_MUTE_MODE_ORDINARY_MEMBERS),
                            metadata=user_md(admin), timeout=10)
    expect_error(lambda: api.send(topic, mia), grpc.StatusCode.PERMISSION_DENIED, "GROUP_MUTED")
    api.send(topic, admin)
    api.send(other, mia)
    api.send(group, mia)
    assert list_topics(api, group, mia, [topic])[0].mute.mode == K.GROUP_MUTE_MODE_ORDINARY_MEMBERS
    api.groups.SetGroupMute(group_pb2.SetGroupMuteRequest(group_id=topic, muted=False), metadata=user_md(admin),
                            timeout=10)
    # The community's mute silences its topics too.
    api.groups.SetGroupMute(group_pb2.SetGroupMuteRequest(group_id=group, muted=True, mode=K.GROUP_MUTE_MODE_ALL),
                            metadata=user_md(owner), timeout=10)
    expect_error(lambda: api.send(other, mia), grpc.StatusCode.PERMISSION_DENIED, "GROUP_MUTED")
    expect_error(lambda: api.send(topic, admin), grpc.StatusCode.PERMISSION_DENIED, "GROUP_MUTED")


def test_update_and_delete_keep_the_community(api):
    group, owner, admin, mia, _ = community(api)
    topic = create_topic(api, group, owner).topic_id
    api.send(topic, mia)
    updated = api.groups.UpdateTopic(group_pb2.UpdateTopicRequest(
        topic_id=topic, update_mask=field_mask_pb2.FieldMask(paths=["name", "introduction"]),
        profile=K.GroupProfile(name="news", introduction="what happened")), metadata=user_md(admin), timeout=10).topic
    assert (updated.profile.name, updated.profile.introduction, updated.latest_sequence) == ("news", "what happened", 1)
    assert list_topics(api, group, mia)[0].profile.name == "news"
    api.groups.DeleteTopic(group_pb2.DeleteTopicRequest(topic_id=topic), metadata=user_md(owner), timeout=10)
    assert list_topics(api, group, mia) == []
    expect_error(lambda: api.send(topic, mia), grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")
    api.send(group, mia)
    # Dismissing the community takes its topics.
    kept = create_topic(api, group, owner, "kept").topic_id
    api.groups.DismissGroup(group_pb2.DismissGroupRequest(group_id=group), metadata=user_md(owner), timeout=10)
    expect_error(lambda: api.send(kept, mia), grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")


def test_a_member_who_rejoins_starts_over_in_each_topic(api):
    group, owner, admin, mia, max_ = community(api)
    topic = create_topic(api, group, owner).topic_id
    api.send(topic, max_)
    api.messages.MarkGroupRead(message_pb2.MarkGroupReadRequest(group_id=topic), metadata=user_md(mia), timeout=10)
    api.members.QuitGroup(member_pb2.QuitGroupRequest(group_id=group), metadata=user_md(mia), timeout=10)
    assert group not in joined(api, mia)
    expect_error(lambda: api.send(topic, mia), grpc.StatusCode.PERMISSION_DENIED, "NOT_A_MEMBER")
    api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=group), metadata=user_md(mia), timeout=10)
    listed = joined(api, mia)[group].topics[0]
    assert (listed.read_sequence, listed.unread_count) == (0, 0)
    api.send(topic, max_)
    assert joined(api, mia)[group].topics[0].unread_count == 1


def test_topic_messages_and_topic_events_reach_the_communitys_stream(api):
    group, owner, admin, mia, _ = community(api)
    stream = EventStream(api.channel, event_pb2.SubscribeRequest(group_ids=[group]), user_md(mia))
    stream.until_caught_up()
    topic = create_topic(api, group, owner).topic_id
    sent = api.send(topic, owner, "to the topic")
    items = stream.until(lambda item: item.WhichOneof("item") == "message" and item.message.sequence == sent.sequence
                         and item.message.group_id == topic)
    events = [i.event for i in items if i.WhichOneof("item") == "event"]
    assert any(e.group_id == group and e.kind == K.EVENT_KIND_TOPIC_CREATED for e in events)
    stream.cancel()
    # Subscribed to one topic: only its items.
    other = create_topic(api, group, owner, "random").topic_id
    only = EventStream(api.channel, event_pb2.SubscribeRequest(group_ids=[topic]), user_md(mia))
    only.until_caught_up()
    api.send(other, owner, "elsewhere")
    last = api.send(topic, owner, "here")
    got = only.until(lambda item: item.WhichOneof("item") == "message" and item.message.sequence == last.sequence)
    assert all(i.message.group_id == topic for i in got if i.WhichOneof("item") == "message")
    only.cancel()


def test_topic_events_carry_what_changed(api):
    group, owner, admin, mia, _ = community(api)
    stream = EventStream(api.channel, event_pb2.SubscribeRequest(group_ids=[group]), user_md(mia))
    stream.until_caught_up()
    topic = create_topic(api, group, owner, "general", introduction="talk").topic_id
    api.groups.UpdateTopic(group_pb2.UpdateTopicRequest(
        topic_id=topic, update_mask=field_mask_pb2.FieldMask(paths=["name", "face_url"]),
        profile=K.GroupProfile(name="news", face_url="f")), metadata=user_md(admin), timeout=10)
    # An update that changes nothing emits nothing; the deletion comes next.
    api.groups.UpdateTopic(group_pb2.UpdateTopicRequest(
        topic_id=topic, update_mask=field_mask_pb2.FieldMask(paths=["name"]), profile=K.GroupProfile(name="news")),
        metadata=user_md(admin), timeout=10)
    api.groups.DeleteTopic(group_pb2.DeleteTopicRequest(topic_id=topic), metadata=user_md(owner), timeout=10)
    created, updated, deleted = [i.event for i in stream.events(3)]
    stream.cancel()
    assert [e.kind for e in (created, updated, deleted)] == [
        K.EVENT_KIND_TOPIC_CREATED, K.EVENT_KIND_TOPIC_UPDATED, K.EVENT_KIND_TOPIC_DELETED]
    assert all(e.group_id == group for e in (created, updated, deleted))
    assert created.sequence < updated.sequence < deleted.sequence
    assert (created.topic.topic_id, created.topic.name, created.topic.introduction) == (topic, "general", "talk")
    assert (updated.topic.topic_id, sorted(updated.topic.changed_fields), updated.topic.name,
            updated.topic.face_url) == (topic, ["face_url", "name"], "news", "f")
    assert updated.operator_user_id == admin and deleted.operator_user_id == owner
    assert deleted.topic.topic_id == topic


def test_every_method_that_takes_a_group_id_answers_a_topic_id(api):
    """A topic id on each method: the conversation's methods work on the topic, the others refuse
    it (NOT_ALLOWED_ON_TOPIC naming the community), and nothing of the community changes."""
    from groupd.v1 import application_pb2, application_pb2_grpc

    group, owner, admin, mia, max_ = community(api)
    topic = create_topic(api, group, owner).topic_id
    md, mask = user_md(owner), field_mask_pb2.FieldMask
    applications = application_pb2_grpc.ApplicationServiceStub(api.channel)
    refused = {
        "UpdateGroupSettings": lambda: api.groups.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
            group_id=topic, update_mask=mask(paths=["join_option"]),
            settings=K.GroupSettings(join_option=K.JOIN_OPTION_APPROVAL)), metadata=md, timeout=10),
        "RevokeGroup": lambda: api.groups.RevokeGroup(group_pb2.RevokeGroupRequest(group_id=topic, reason="r"),
                                                      metadata=admin_md(), timeout=10),
        "UpdateMuteBypassList": lambda: api.groups.UpdateMuteBypassList(group_pb2.UpdateMuteBypassListRequest(
            group_id=topic, add_user_ids=[mia]), metadata=md, timeout=10),
        "SetGroupAttributes": lambda: api.groups.SetGroupAttributes(group_pb2.SetGroupAttributesRequest(
            group_id=topic, attributes=[group_pb2.AttributeWrite(key="k", value=b"v")]), metadata=md, timeout=10),
        "DeleteGroupAttributes": lambda: api.groups.DeleteGroupAttributes(group_pb2.DeleteGroupAttributesRequest(
            group_id=topic, keys=[group_pb2.AttributeKey(key="k")]), metadata=md, timeout=10),
        "GetGroupAttributes": lambda: api.groups.GetGroupAttributes(group_pb2.GetGroupAttributesRequest(
            group_id=topic), metadata=md, timeout=10),
        "IncrementGroupCounters": lambda: api.groups.IncrementGroupCounters(group_pb2.IncrementGroupCountersRequest(
            group_id=topic, deltas={"n": 1}), metadata=md, timeout=10),
        "GetGroupCounters": lambda: api.groups.GetGroupCounters(group_pb2.GetGroupCountersRequest(group_id=topic),
                                                                metadata=md, timeout=10),
        "GetMembersInfo": lambda: api.members.GetMembersInfo(member_pb2.GetMembersInfoRequest(
            group_id=topic, user_ids=[mia]), metadata=md, timeout=10),
        "GetSelfMemberInfo": lambda: api.members.GetSelfMemberInfo(member_pb2.GetSelfMemberInfoRequest(
            group_id=topic), metadata=md, timeout=10),
        "MuteMembers": lambda: api.members.MuteMembers(member_pb2.MuteMembersRequest(
            group_id=topic, user_ids=[mia], duration_seconds=60), metadata=md, timeout=10),
        "UpdateMemberInfo": lambda: api.members.UpdateMemberInfo(member_pb2.UpdateMemberInfoRequest(
            group_id=topic, update_mask=mask(paths=["name_card"]), name_card="n"), metadata=user_md(mia), timeout=10),
        "SetReceiveMessageOption": lambda: api.members.SetReceiveMessageOption(
            member_pb2.SetReceiveMessageOptionRequest(group_id=topic, option=K.RECEIVE_MESSAGE_OPTION_NOT_RECEIVE),
            metadata=user_md(mia), timeout=10),
        "SetGroupRemark": lambda: api.members.SetGroupRemark(member_pb2.SetGroupRemarkRequest(
            group_id=topic, remark="r"), metadata=user_md(mia), timeout=10),
        "BanMembers": lambda: api.members.BanMembers(member_pb2.BanMembersRequest(group_id=topic, user_ids=[mia]),
                                                     metadata=md, timeout=10),
        "UnbanMembers": lambda: api.members.UnbanMembers(member_pb2.UnbanMembersRequest(
            group_id=topic, user_ids=[mia]), metadata=md, timeout=10),
        "ListBannedMembers": lambda: api.members.ListBannedMembers(member_pb2.ListBannedMembersRequest(
            group_id=topic), metadata=md, timeout=10),
        "CreateInviteLink": lambda: api.members.CreateInviteLink(member_pb2.CreateInviteLinkRequest(group_id=topic),
                                                                 metadata=md, timeout=10),
        "ListInviteLinks": lambda: api.members.ListInviteLinks(member_pb2.ListInviteLinksRequest(group_id=topic),
                                                               metadata=md, timeout=10),
        "SyncMembers": lambda: api.members.SyncMembers(member_pb2.SyncMembersRequest(group_id=topic), metadata=md,
                                                       timeout=10),
        "SearchMembers": lambda: api.members.SearchMembers(member_pb2.SearchMembersRequest(
            group_id=topic, keyword="m", by=member_pb2.MEMBER_SEARCH_FIELD_NAME_CARD), metadata=md, timeout=10),
        "SendSystemNotification": lambda: api.messages.SendSystemNotification(
            message_pb2.SendSystemNotificationRequest(group_id=topic, text="x"), metadata=admin_md(),
            timeout=10),
        "ListApplications": lambda: applications.ListApplications(application_pb2.ListApplicationsRequest(
            group_id=topic), metadata=md, timeout=10),
    }
    unexpected = {}
    for name, call in refused.items():
        try:
            call()
            unexpected[name] = "answered"
        except grpc.RpcError as error:
            from support import error_info
            info = error_info(error)
            outcome = (error.code().name, info.reason if info else "", dict(info.metadata) if info else {})
            if outcome[:2] != ("FAILED_PRECONDITION", "NOT_ALLOWED_ON_TOPIC") or outcome[2].get("community_id") != group:
                unexpected[name] = outcome
    assert unexpected == {}
    # ImportGroup cannot make a group with a topic's id.
    info = expect_error(lambda: api.groups.ImportGroup(group_pb2.ImportGroupRequest(
        group_id=group + "@TOPIC#_IMPORTED0000", type=COMMUNITY, owner_user_id=owner,
        profile=K.GroupProfile(name="x")), metadata=admin_md(), timeout=10),
        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "group_id"
    # Nothing of the community changed.
    self_info = api.members.GetSelfMemberInfo(member_pb2.GetSelfMemberInfoRequest(group_id=group),
                                              metadata=user_md(mia), timeout=10)
    assert self_info.member.name_card == "" and not self_info.member.HasField("mute_until")
    assert self_info.member.receive_message_option != K.RECEIVE_MESSAGE_OPTION_NOT_RECEIVE and self_info.remark == ""


def test_a_stream_from_the_oldest_delivers_the_topics_messages_before_caught_up(api):
    group, owner, admin, mia, _ = community(api)
    topic = create_topic(api, group, owner).topic_id
    first = api.send(topic, owner, "before the join")
    late, stranger = uid("late"), uid("stranger")
    api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=group), metadata=user_md(late), timeout=10)
    second = api.send(topic, owner, "after the join")

    def backlog(user, **request):
        stream = EventStream(api.channel, event_pb2.SubscribeRequest(from_oldest=True, **request), user_md(user))
        items = stream.until_caught_up()
        stream.cancel()
        return [i.message.sequence for i in items if i.WhichOneof("item") == "message" and i.message.group_id == topic]

    # Sent before the stream began, delivered by its backlog (the live hub never saw them for it).
    assert backlog(mia) == [first.sequence, second.sequence]
    assert backlog(mia, group_ids=[group]) == [first.sequence, second.sequence]
    assert backlog(late) == [second.sequence]
    assert backlog(stranger) == []
