"""Private topics of Community groups through a real groupd with stock grpcio, on SQLite and (with
GROUPD_TEST_POSTGRES_URL) PostgreSQL: a topic created or made private (`is_private`) is seen by the
community's owner and admins, the backend, and the members whose permission groups grant
PERMISSION_VIEW_TOPIC (as a community value, a value for the topic, or `everyone`'s value for it).
Who does not see it finds it nowhere: ListTopics, the joined-group list, the event stream (live and
backlog) leave it out, and every call naming it answers as for a topic that does not exist.
"""
import grpc
import pytest

from support import EventStream, MessageApi, admin_md, expect_error, uid, user_md
from groupd.v1 import common_pb2, event_pb2, group_pb2, member_pb2, message_pb2
from google.protobuf import field_mask_pb2

K = common_pb2
P = K.Permission
COMMUNITY, MEMBER, ADMIN = K.GROUP_TYPE_COMMUNITY, K.MEMBER_ROLE_MEMBER, K.MEMBER_ROLE_ADMIN
NOT_FOUND = grpc.StatusCode.NOT_FOUND


@pytest.fixture
def api(channel):
    return MessageApi(channel)


def community(api):
    return api.community_of_five()


def create_topic(api, group, user, name, private=False):
    return api.groups.CreateTopic(group_pb2.CreateTopicRequest(
        group_id=group, profile=K.GroupProfile(name=name), is_private=private),
        metadata=user_md(user) if user else admin_md(), timeout=10).topic


def set_private(api, topic, user, private):
    return api.groups.UpdateTopic(group_pb2.UpdateTopicRequest(
        topic_id=topic, update_mask=field_mask_pb2.FieldMask(paths=["is_private"]), is_private=private),
        metadata=user_md(user), timeout=10).topic


def listed(api, group, user):
    metadata = user_md(user) if user else admin_md()
    return [t.topic_id for t in api.groups.ListTopics(group_pb2.ListTopicsRequest(group_id=group),
                                                      metadata=metadata, timeout=10).topics]


def joined_topics(api, group, user):
    groups = api.groups.ListJoinedGroups(group_pb2.ListJoinedGroupsRequest(page_size=100), metadata=user_md(user),
                                         timeout=10).groups
    return [t.topic_id for g in groups if g.group_id == group for t in g.topics]


def permission_group(api, group, owner, name, permissions=(), topics=None):
    return api.groups.CreatePermissionGroup(group_pb2.CreatePermissionGroupRequest(
        group_id=group, name=name, permissions=list(permissions),
        topic_permissions=[K.TopicPermissions(topic_id=t, permissions=list(p)) for t, p in (topics or {}).items()]),
        metadata=user_md(owner), timeout=10).permission_group.permission_group_id


def assign(api, group, owner, pg, users, adding=True):
    if adding:
        api.groups.AddPermissionGroupMembers(group_pb2.AddPermissionGroupMembersRequest(
            group_id=group, permission_group_id=pg, user_ids=list(users)), metadata=user_md(owner), timeout=10)
    else:
        api.groups.RemovePermissionGroupMembers(group_pb2.RemovePermissionGroupMembersRequest(
            group_id=group, permission_group_id=pg, user_ids=list(users)), metadata=user_md(owner), timeout=10)


def held(api, group, user, member=""):
    return list(api.groups.GetMemberPermissions(group_pb2.GetMemberPermissionsRequest(group_id=group, user_id=member),
                                                metadata=user_md(user), timeout=10).permissions)


def stream(api, user, **request):
    opened = EventStream(api.channel, event_pb2.SubscribeRequest(**request), user_md(user))
    opened.until_caught_up()
    return opened


def until_message(opened, sequence, group):
    """The stream's items up to the message `sequence` of `group` (a marker committed after what the
    test expects the stream not to carry: a stream receives its items in commit order)."""
    return opened.until(lambda item: item.WhichOneof("item") == "message" and item.message.group_id == group
                        and item.message.sequence == sequence)


def mentions(items, topic):
    """Whether `items` carry anything of `topic`: its messages or events, or a TOPIC_* event naming it."""
    for item in items:
        kind = item.WhichOneof("item")
        if kind == "message" and item.message.group_id == topic:
            return True
        if kind == "event" and (item.event.group_id == topic or item.event.topic.topic_id == topic):
            return True
    return False


def test_a_private_topic_is_listed_for_the_owner_admins_backend_and_members_granted_view_topic(api):
    group, owner, admin, mia, max_, zoe = community(api)
    general = create_topic(api, group, owner, "general").topic_id
    made = create_topic(api, group, admin, "secret", private=True)
    secret = made.topic_id
    assert made.is_private and made.profile.name == "secret"
    for user in (owner, admin, None):
        assert listed(api, group, user) == [general, secret]
    for user in (mia, max_, zoe, uid("guest")):
        assert listed(api, group, user) == [general]
    # A value for the topic: its members see it; a community value: every private topic.
    seers = permission_group(api, group, owner, "seers", topics={secret: [P.PERMISSION_VIEW_TOPIC]})
    assign(api, group, owner, seers, [mia])
    watchers = permission_group(api, group, owner, "watchers", [P.PERMISSION_VIEW_TOPIC])
    assign(api, group, owner, watchers, [zoe])
    assert listed(api, group, mia) == [general, secret] and listed(api, group, zoe) == [general, secret]
    assert listed(api, group, max_) == [general]
    shown = api.groups.ListTopics(group_pb2.ListTopicsRequest(group_id=group, topic_ids=[secret]),
                                  metadata=user_md(mia), timeout=10).topics
    assert [(t.topic_id, t.is_private) for t in shown] == [(secret, True)]
    # Named, it is still left out for who does not see it.
    assert api.groups.ListTopics(group_pb2.ListTopicsRequest(group_id=group, topic_ids=[secret]),
                                 metadata=user_md(max_), timeout=10).topics == []
    # `everyone`'s value for the topic: every member sees it (its other permissions stay the
    # topic's defaults).
    api.groups.UpdatePermissionGroup(group_pb2.UpdatePermissionGroupRequest(
        group_id=group, permission_group_id="everyone",
        update_mask=field_mask_pb2.FieldMask(paths=["topic_permissions." + secret]),
        topic_permissions=[K.TopicPermissions(topic_id=secret, permissions=[P.PERMISSION_VIEW_TOPIC,
                                                                            P.PERMISSION_SEND_MESSAGE])]),
        metadata=user_md(owner), timeout=10)
    assert listed(api, group, max_) == [general, secret]
    api.send(secret, max_, "now everyone sees it")


def test_the_joined_group_list_carries_only_the_topics_the_member_sees(api):
    group, owner, admin, mia, max_, _ = community(api)
    general = create_topic(api, group, owner, "general").topic_id
    secret = create_topic(api, group, owner, "secret", private=True).topic_id
    assert joined_topics(api, group, owner) == [general, secret]
    assert joined_topics(api, group, admin) == [general, secret]
    assert joined_topics(api, group, mia) == [general]
    assign(api, group, owner, permission_group(api, group, owner, "seers", topics={secret: [P.PERMISSION_VIEW_TOPIC]}),
           [mia])
    assert joined_topics(api, group, mia) == [general, secret]
    assert joined_topics(api, group, max_) == [general]


def test_calls_naming_a_private_topic_answer_as_for_a_topic_that_does_not_exist(api):
    group, owner, admin, mia, max_, _ = community(api)
    secret = create_topic(api, group, owner, "secret", private=True).topic_id
    api.send(secret, owner, "for the few")
    missing = group + "@TOPIC#_0000000000ZZ"
    calls = {
        "send": lambda t: api.send(t, max_, "hello"),
        "history": lambda t: api.history(t, max_),
        "mark_read": lambda t: api.messages.MarkGroupRead(message_pb2.MarkGroupReadRequest(group_id=t, read_sequence=1),
                                                          metadata=user_md(max_), timeout=10),
        "react": lambda t: api.messages.AddMessageReaction(message_pb2.AddMessageReactionRequest(
            group_id=t, sequence=1, reaction_key="+1"), metadata=user_md(max_), timeout=10),
        "permissions": lambda t: held(api, t, max_),
    }
    for name, call in calls.items():
        absent = expect_error(lambda: call(missing), NOT_FOUND, "GROUP_NOT_FOUND")
        hidden = expect_error(lambda: call(secret), NOT_FOUND, "GROUP_NOT_FOUND")
        assert hidden.reason == absent.reason, name
    # Managing it: refused as for a topic that does not exist (the role decides first).
    for call in (lambda t: set_private(api, t, max_, False),
                 lambda t: api.groups.DeleteTopic(group_pb2.DeleteTopicRequest(topic_id=t), metadata=user_md(max_),
                                                  timeout=10)):
        expect_error(lambda: call(missing), grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
        expect_error(lambda: call(secret), grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    # A member granted manage_topics on the community but not view_topic: still not found.
    managers = permission_group(api, group, owner, "managers", [P.PERMISSION_MANAGE_TOPICS])
    assign(api, group, owner, managers, [max_])
    expect_error(lambda: set_private(api, secret, max_, False), NOT_FOUND, "GROUP_NOT_FOUND")
    expect_error(lambda: api.groups.DeleteTopic(group_pb2.DeleteTopicRequest(topic_id=secret),
                                                metadata=user_md(max_), timeout=10), NOT_FOUND, "GROUP_NOT_FOUND")
    # Nothing changed: the one message, still private, still there.
    assert [(m.sequence, m.text) for m in api.history(secret, admin)] == [(1, "for the few")]
    assert listed(api, group, owner) == [secret]
    assert api.groups.ListTopics(group_pb2.ListTopicsRequest(group_id=group), metadata=user_md(owner),
                                 timeout=10).topics[0].is_private


def test_view_topic_is_held_by_admins_and_by_members_granted_it(api):
    group, owner, admin, mia, max_, zoe = community(api)
    secret = create_topic(api, group, owner, "secret", private=True).topic_id
    assert P.PERMISSION_VIEW_TOPIC in held(api, group, owner) and P.PERMISSION_VIEW_TOPIC in held(api, group, admin)
    assert P.PERMISSION_VIEW_TOPIC not in held(api, group, mia)
    assign(api, group, owner, permission_group(api, group, owner, "seers", topics={secret: [P.PERMISSION_VIEW_TOPIC]}),
           [mia])
    assign(api, group, owner, permission_group(api, group, owner, "watchers", [P.PERMISSION_VIEW_TOPIC]), [zoe])
    # A topic value: held in that topic, not in the community; a community value: in both.
    assert P.PERMISSION_VIEW_TOPIC not in held(api, group, mia) and P.PERMISSION_VIEW_TOPIC in held(api, secret, mia)
    assert P.PERMISSION_VIEW_TOPIC in held(api, group, zoe) and P.PERMISSION_VIEW_TOPIC in held(api, secret, zoe)
    # What a member may do in a topic they do not see: nothing (read by an admin).
    assert held(api, secret, admin, member=max_) == []
    assert P.PERMISSION_SEND_MESSAGE in held(api, secret, admin, member=mia)
    # Only who holds view_topic grants it.
    expect_error(lambda: permission_group(api, group, mia, "mine", [P.PERMISSION_VIEW_TOPIC]),
                 grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")


def test_the_stream_carries_a_private_topics_items_to_who_sees_it(api):
    group, owner, admin, mia, max_, zoe = community(api)
    general = create_topic(api, group, owner, "general").topic_id
    watchers = permission_group(api, group, owner, "watchers", [P.PERMISSION_VIEW_TOPIC])
    assign(api, group, owner, watchers, [zoe])
    streams = {user: stream(api, user, group_ids=[group]) for user in (admin, mia, max_, zoe)}
    secret = create_topic(api, group, owner, "secret", private=True).topic_id
    first = api.send(secret, owner, "one")
    marker = api.send(general, owner, "marker").sequence
    for user in (admin, zoe):
        items = until_message(streams[user], marker, general)
        created = [i.event for i in items if i.WhichOneof("item") == "event" and i.event.kind == K.EVENT_KIND_TOPIC_CREATED]
        assert [(e.topic.topic_id, e.topic.is_private) for e in created] == [(secret, True)]
        assert [i.message.sequence for i in items if i.WhichOneof("item") == "message"
                and i.message.group_id == secret] == [first.sequence]
    for user in (mia, max_):
        assert not mentions(until_message(streams[user], marker, general), secret)

    # Granted a value for the topic (the grant reaches mia's stream), mia receives what follows.
    seers = permission_group(api, group, owner, "seers", topics={secret: [P.PERMISSION_VIEW_TOPIC]})
    assign(api, group, owner, seers, [mia])
    second = api.send(secret, owner, "two").sequence
    marker = api.send(general, owner, "marker").sequence
    assert [i.message.sequence for i in until_message(streams[mia], marker, general)
            if i.WhichOneof("item") == "message" and i.message.group_id == secret] == [second]
    assert not mentions(until_message(streams[max_], marker, general), secret)

    # Taken out again: no more; made an admin: everything.
    assign(api, group, owner, seers, [mia], adding=False)
    api.members.SetMemberRole(member_pb2.SetMemberRoleRequest(group_id=group, user_id=max_, role=ADMIN),
                              metadata=user_md(owner), timeout=10)
    third = api.send(secret, owner, "three").sequence
    marker = api.send(general, owner, "marker").sequence
    assert not mentions(until_message(streams[mia], marker, general), secret)
    assert [i.message.sequence for i in until_message(streams[max_], marker, general)
            if i.WhichOneof("item") == "message" and i.message.group_id == secret] == [third]
    for opened in streams.values():
        opened.cancel()

    # The backlog follows who sees the topic now.
    def backlog(user):
        opened = EventStream(api.channel, event_pb2.SubscribeRequest(from_oldest=True, group_ids=[group]),
                             user_md(user))
        items = opened.until_caught_up()
        opened.cancel()
        return [i.message.sequence for i in items if i.WhichOneof("item") == "message" and i.message.group_id == secret]

    assert backlog(zoe) == [first.sequence, second, third] and backlog(max_) == [first.sequence, second, third]
    assert backlog(mia) == []


def test_a_topic_made_private_tells_who_saw_it_and_public_again_tells_everyone(api):
    group, owner, admin, mia, _, _ = community(api)
    general = create_topic(api, group, owner, "general").topic_id
    topic = create_topic(api, group, owner, "news").topic_id
    mias = stream(api, mia, group_ids=[group])
    made = set_private(api, topic, admin, True)
    assert made.is_private
    hidden = api.send(topic, owner, "hidden").sequence
    marker = api.send(general, owner, "marker").sequence
    items = until_message(mias, marker, general)
    updates = [i.event.topic for i in items if i.WhichOneof("item") == "event" and i.event.kind == K.EVENT_KIND_TOPIC_UPDATED]
    assert [(u.topic_id, list(u.changed_fields), u.is_private) for u in updates] == [(topic, ["is_private"], True)]
    assert not any(i.WhichOneof("item") == "message" and i.message.sequence == hidden and i.message.group_id == topic
                   for i in items)
    assert listed(api, group, mia) == [general]
    # Public again: mia learns it and receives its items.
    assert not set_private(api, topic, owner, False).is_private
    shown = api.send(topic, owner, "shown").sequence
    items = until_message(mias, shown, topic)
    updates = [i.event.topic for i in items if i.WhichOneof("item") == "event" and i.event.kind == K.EVENT_KIND_TOPIC_UPDATED]
    assert [(u.topic_id, list(u.changed_fields), u.is_private) for u in updates] == [(topic, ["is_private"], False)]
    assert listed(api, group, mia) == [general, topic]
    # Setting what it is already changes nothing and emits nothing.
    set_private(api, topic, owner, False)
    marker = api.send(general, owner, "marker").sequence
    assert not any(i.WhichOneof("item") == "event" and i.event.kind == K.EVENT_KIND_TOPIC_UPDATED
                   for i in until_message(mias, marker, general))
    mias.cancel()
