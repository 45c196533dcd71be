"""Permission groups of Community groups through a real groupd with stock grpcio, on SQLite and
(with GROUPD_TEST_POSTGRES_URL) PostgreSQL: CreatePermissionGroup, UpdatePermissionGroup,
DeletePermissionGroup, ListPermissionGroups, AddPermissionGroupMembers,
RemovePermissionGroupMembers, ListPermissionGroupMembers and GetMemberPermissions; each permission
granted and refused through the call it allows, on the community and on a topic; the `everyone`
group's topic defaults (a read-only topic); the events; and every refusal, which changes nothing.
"""
import grpc
import pytest

from support import EventStream, MessageApi, admin_md, expect_error, uid, user_md
from groupd.v1 import common_pb2, event_pb2, group_pb2, member_pb2, message_pb2
from google.protobuf import field_mask_pb2

K = common_pb2
P = K.Permission
COMMUNITY, PUBLIC, MEMBER, ADMIN = K.GROUP_TYPE_COMMUNITY, K.GROUP_TYPE_PUBLIC, K.MEMBER_ROLE_MEMBER, K.MEMBER_ROLE_ADMIN


@pytest.fixture
def api(channel):
    return MessageApi(channel)


def community(api):
    return api.community_of_five()


def create(api, group, user, name="mods", permissions=(), topics=None, data=b""):
    return api.groups.CreatePermissionGroup(group_pb2.CreatePermissionGroupRequest(
        group_id=group, name=name, custom_data=data, permissions=list(permissions),
        topic_permissions=[K.TopicPermissions(topic_id=t, permissions=list(p)) for t, p in (topics or {}).items()]),
        metadata=user_md(user) if user else admin_md(), timeout=10).permission_group


def update(api, group, user, pg, paths, **fields):
    topics = fields.pop("topics", None)
    if topics is not None:
        fields["topic_permissions"] = [K.TopicPermissions(topic_id=t, permissions=list(p)) for t, p in topics.items()]
    return api.groups.UpdatePermissionGroup(group_pb2.UpdatePermissionGroupRequest(
        group_id=group, permission_group_id=pg, update_mask=field_mask_pb2.FieldMask(paths=paths), **fields),
        metadata=user_md(user) if user else admin_md(), timeout=10).permission_group


def add(api, group, user, pg, users):
    return list(api.groups.AddPermissionGroupMembers(group_pb2.AddPermissionGroupMembersRequest(
        group_id=group, permission_group_id=pg, user_ids=list(users)), metadata=user_md(user), timeout=10).results)


def remove(api, group, user, pg, users):
    return list(api.groups.RemovePermissionGroupMembers(group_pb2.RemovePermissionGroupMembersRequest(
        group_id=group, permission_group_id=pg, user_ids=list(users)), metadata=user_md(user), timeout=10).results)


def listed(api, group, user, ids=(), member=""):
    return list(api.groups.ListPermissionGroups(group_pb2.ListPermissionGroupsRequest(
        group_id=group, permission_group_ids=list(ids), user_id=member), metadata=user_md(user), timeout=10).permission_groups)


def permissions_of(api, group, user, member=""):
    return api.groups.GetMemberPermissions(group_pb2.GetMemberPermissionsRequest(group_id=group, user_id=member),
                                           metadata=user_md(user), timeout=10)


def create_topic(api, group, user, name="general"):
    return api.groups.CreateTopic(group_pb2.CreateTopicRequest(group_id=group, profile=K.GroupProfile(name=name)),
                                  metadata=user_md(user), timeout=10).topic.topic_id


def test_a_permission_group_is_created_listed_updated_and_deleted(api):
    group, owner, admin, mia, max_, zoe = community(api)
    topic = create_topic(api, group, owner)
    made = create(api, group, owner, "mods", [P.PERMISSION_PIN_MESSAGES, P.PERMISSION_MUTE_MEMBERS],
                  {topic: [P.PERMISSION_SEND_MESSAGE]}, data=b"\x00\xff")
    assert made.permission_group_id.startswith("PG") and len(made.permission_group_id) == 14
    assert (made.group_id, made.name, made.custom_data, made.member_count) == (group, "mods", b"\x00\xff", 0)
    assert list(made.permissions) == [P.PERMISSION_MUTE_MEMBERS, P.PERMISSION_PIN_MESSAGES]
    assert [(t.topic_id, list(t.permissions)) for t in made.topic_permissions] == [(topic, [P.PERMISSION_SEND_MESSAGE])]
    second = create(api, group, admin, "helpers")
    pg = made.permission_group_id
    # `everyone` first, with the community's member count; then in creation order.
    groups = listed(api, group, zoe)
    assert [g.permission_group_id for g in groups] == ["everyone", pg, second.permission_group_id]
    assert groups[0].member_count == 5 and groups[0].name == "everyone" and not groups[0].permissions
    assert [g.permission_group_id for g in listed(api, group, zoe, [pg, "nope"])] == [pg]
    # Members, their counts, the groups one member is in.
    results = add(api, group, owner, pg, [mia, max_])
    assert [r.result for r in results] == [K.MEMBER_RESULT_CODE_SUCCESS] * 2
    assert [g.member_count for g in listed(api, group, zoe, [pg])] == [2]
    assert [g.permission_group_id for g in listed(api, group, zoe, member=mia)] == ["everyone", pg]
    # Update: the masked fields only.
    after = update(api, group, owner, pg, ["name", "permissions"], name="moderators",
                   permissions=[P.PERMISSION_BAN_MEMBERS])
    assert (after.name, list(after.permissions), after.member_count) == ("moderators", [P.PERMISSION_BAN_MEMBERS], 2)
    assert [t.topic_id for t in after.topic_permissions] == [topic]
    after = update(api, group, owner, pg, ["topic_permissions." + topic])
    assert not after.topic_permissions
    # Deletion: its members lose it.
    api.groups.DeletePermissionGroup(group_pb2.DeletePermissionGroupRequest(group_id=group, permission_group_id=pg),
                                     metadata=user_md(owner), timeout=10)
    assert [g.permission_group_id for g in listed(api, group, zoe)] == ["everyone", second.permission_group_id]
    assert list(permissions_of(api, group, owner, mia).permission_group_ids) == []


def test_members_of_a_permission_group_are_paged_and_their_permissions_read(api):
    group, owner, admin, mia, max_, zoe = community(api)
    pg = create(api, group, owner, "pins", [P.PERMISSION_PIN_MESSAGES]).permission_group_id
    stranger = uid("stranger")
    results = add(api, group, owner, pg, [zoe, mia, stranger, mia, ""])
    assert [r.result for r in results] == [
        K.MEMBER_RESULT_CODE_SUCCESS, K.MEMBER_RESULT_CODE_SUCCESS, K.MEMBER_RESULT_CODE_NOT_MEMBER,
        K.MEMBER_RESULT_CODE_INVALID, K.MEMBER_RESULT_CODE_INVALID]
    # Adding again changes nothing; removing one not in it neither.
    assert [r.result for r in add(api, group, owner, pg, [zoe])] == [K.MEMBER_RESULT_CODE_SUCCESS]
    assert [r.result for r in remove(api, group, owner, pg, [max_])] == [K.MEMBER_RESULT_CODE_SUCCESS]
    first = api.groups.ListPermissionGroupMembers(group_pb2.ListPermissionGroupMembersRequest(
        group_id=group, permission_group_id=pg, page_size=1), metadata=user_md(max_), timeout=10)
    assert list(first.user_ids) == [min(mia, zoe)] and first.next_page_token
    rest = api.groups.ListPermissionGroupMembers(group_pb2.ListPermissionGroupMembersRequest(
        group_id=group, permission_group_id=pg, page_size=1, page_token=first.next_page_token),
        metadata=user_md(max_), timeout=10)
    assert list(rest.user_ids) == [max(mia, zoe)] and not rest.next_page_token
    info = expect_error(lambda: api.groups.ListPermissionGroupMembers(group_pb2.ListPermissionGroupMembersRequest(
        group_id=group, permission_group_id=pg, page_token="not hex"), metadata=user_md(max_), timeout=10),
        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "page_token"
    got = permissions_of(api, group, max_, mia)
    assert got.role == MEMBER and list(got.permission_group_ids) == [pg]
    assert P.PERMISSION_PIN_MESSAGES in got.permissions and P.PERMISSION_BAN_MEMBERS not in got.permissions
    mine = permissions_of(api, group, max_)
    assert list(mine.permissions) == [P.PERMISSION_INVITE, P.PERMISSION_SEND_MESSAGE]
    assert len(permissions_of(api, group, owner).permissions) == len(P.keys()) - 1
    remove(api, group, owner, pg, [mia])
    assert list(permissions_of(api, group, owner, mia).permission_group_ids) == []


# Each permission through the call it allows: (permission, whether it applies in a topic, the call as
# `user` in `where` (the community or a topic); the call's target `victim` is an ordinary member).
def _call(api, permission, where, user, victim, community):
    md = user_md(user)
    mask = field_mask_pb2.FieldMask
    if permission == P.PERMISSION_MANAGE_PROFILE:
        return api.groups.UpdateGroupProfile(group_pb2.UpdateGroupProfileRequest(
            group_id=where, update_mask=mask(paths=["introduction"]), profile=K.GroupProfile(introduction=uid("i"))),
            metadata=md, timeout=10)
    if permission == P.PERMISSION_MANAGE_MEMBERS:
        results = api.members.KickMembers(member_pb2.KickMembersRequest(group_id=where, user_ids=[victim]),
                                          metadata=md, timeout=10).results
        assert results[0].result == K.MEMBER_RESULT_CODE_SUCCESS, results
        return results
    if permission == P.PERMISSION_MANAGE_PERMISSION_GROUPS:
        return create(api, where, user, uid("pg")[:20])
    if permission == P.PERMISSION_MANAGE_TOPICS:
        return create_topic(api, where, user, "new")
    if permission == P.PERMISSION_MUTE_MEMBERS:
        return api.groups.SetGroupMute(group_pb2.SetGroupMuteRequest(group_id=where, muted=True, mode=K.GROUP_MUTE_MODE_ALL), metadata=md, timeout=10)
    if permission == P.PERMISSION_BAN_MEMBERS:
        return api.members.BanMembers(member_pb2.BanMembersRequest(group_id=where, user_ids=[uid("outsider")]),
                                      metadata=md, timeout=10)
    if permission == P.PERMISSION_MENTION_ALL:
        return api.send(where, user, "@all", mention_all=True)
    if permission == P.PERMISSION_MANAGE_MESSAGES:
        sequence = api.send_sequence(where, victim, "to recall")
        return api.messages.RecallGroupMessage(message_pb2.RecallGroupMessageRequest(group_id=where, sequence=sequence),
                                               metadata=md, timeout=10)
    if permission == P.PERMISSION_PIN_MESSAGES:
        sequence = api.send_sequence(where, victim, "to pin")
        return api.messages.PinGroupMessage(message_pb2.PinGroupMessageRequest(group_id=where, sequence=sequence),
                                            metadata=md, timeout=10)
    raise AssertionError(permission)


GRANTABLE = [
    ("manage_profile", P.PERMISSION_MANAGE_PROFILE, False),
    ("manage_members", P.PERMISSION_MANAGE_MEMBERS, False),
    ("manage_permission_groups", P.PERMISSION_MANAGE_PERMISSION_GROUPS, False),
    ("manage_topics", P.PERMISSION_MANAGE_TOPICS, False),
    ("mute_members", P.PERMISSION_MUTE_MEMBERS, True),
    ("ban_members", P.PERMISSION_BAN_MEMBERS, False),
    ("mention_all", P.PERMISSION_MENTION_ALL, True),
    ("manage_messages", P.PERMISSION_MANAGE_MESSAGES, True),
    ("pin_messages", P.PERMISSION_PIN_MESSAGES, True),
]


@pytest.mark.parametrize("name,permission,in_topic", GRANTABLE, ids=[g[0] for g in GRANTABLE])
def test_each_permission_is_refused_without_a_grant_and_allowed_with_one(api, name, permission, in_topic):
    group, owner, admin, mia, max_, zoe = community(api)
    topic = create_topic(api, group, owner)
    other = create_topic(api, group, owner, "other")
    # Without a grant: PERMISSION_DENIED, on the community and on the topic.
    expect_error(lambda: _call(api, permission, group, mia, max_, group), grpc.StatusCode.PERMISSION_DENIED,
                 "PERMISSION_DENIED")
    if in_topic:
        expect_error(lambda: _call(api, permission, topic, mia, max_, group), grpc.StatusCode.PERMISSION_DENIED,
                     "PERMISSION_DENIED")
        # A value for another topic grants nothing here; a value for this topic grants it here only.
        scoped = create(api, group, owner, "scoped", topics={other: [permission]}).permission_group_id
        add(api, group, owner, scoped, [mia])
        expect_error(lambda: _call(api, permission, topic, mia, max_, group), grpc.StatusCode.PERMISSION_DENIED,
                     "PERMISSION_DENIED")
        update(api, group, owner, scoped, ["topic_permissions." + topic], topics={topic: [permission]})
        _call(api, permission, topic, mia, zoe, group)
        expect_error(lambda: _call(api, permission, group, mia, max_, group), grpc.StatusCode.PERMISSION_DENIED,
                     "PERMISSION_DENIED")
        remove(api, group, owner, scoped, [mia])
    # A community grant: allowed on the community (and in every topic).
    granted = create(api, group, owner, "granted", [permission]).permission_group_id
    add(api, group, owner, granted, [mia])
    _call(api, permission, group, mia, max_, group)
    if in_topic:
        _call(api, permission, other, mia, zoe, group)
    # Taken away again: refused again.
    remove(api, group, owner, granted, [mia])
    expect_error(lambda: _call(api, permission, group, mia, zoe, group), grpc.StatusCode.PERMISSION_DENIED,
                 "PERMISSION_DENIED")


def test_a_grant_never_reaches_admins_or_the_owner(api):
    group, owner, admin, mia, max_, zoe = community(api)
    pg = create(api, group, owner, "mods", [P.PERMISSION_MANAGE_MEMBERS]).permission_group_id
    add(api, group, owner, pg, [mia])
    kicked = api.members.KickMembers(member_pb2.KickMembersRequest(group_id=group, user_ids=[admin, owner]),
                                     metadata=user_md(mia), timeout=10).results
    assert [r.result for r in kicked] == [K.MEMBER_RESULT_CODE_FAILED, K.MEMBER_RESULT_CODE_FAILED]
    assert [r.reason for r in kicked] == ["PERMISSION_DENIED", "TARGET_IS_OWNER"]
    # Roles and settings are never granted.
    expect_error(lambda: api.members.SetMemberRole(member_pb2.SetMemberRoleRequest(
        group_id=group, user_id=max_, role=ADMIN), metadata=user_md(mia), timeout=10),
        grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")


def test_everyones_topic_value_makes_a_read_only_topic_where_speakers_send(api):
    group, owner, admin, mia, max_, zoe = community(api)
    news = create_topic(api, group, owner, "news")
    update(api, group, owner, "everyone", ["topic_permissions." + news], topics={news: []})
    info = expect_error(lambda: api.send(news, mia, "hello"), grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    assert info.metadata["permission"] == "send_message"
    api.send(group, mia, "the community itself is not read-only")
    api.send(news, admin, "admins keep their role")
    speakers = create(api, group, owner, "speakers", topics={news: [P.PERMISSION_SEND_MESSAGE]}).permission_group_id
    add(api, group, owner, speakers, [mia])
    api.send(news, mia, "a speaker")
    assert P.PERMISSION_SEND_MESSAGE in permissions_of(api, news, owner, mia).permissions
    assert P.PERMISSION_SEND_MESSAGE not in permissions_of(api, news, owner, max_).permissions
    # @all for every member of one topic, through everyone's value.
    update(api, group, owner, "everyone", ["topic_permissions." + news], topics={news: [P.PERMISSION_MENTION_ALL,
                                                                                        P.PERMISSION_SEND_MESSAGE]})
    api.send(news, max_, "@all", mention_all=True)
    expect_error(lambda: api.send(group, max_, "@all", mention_all=True), grpc.StatusCode.PERMISSION_DENIED,
                 "PERMISSION_DENIED")
    # Reset: the topic's defaults are the role's again.
    api.groups.DeletePermissionGroup(group_pb2.DeletePermissionGroupRequest(group_id=group, permission_group_id="everyone"),
                                     metadata=user_md(owner), timeout=10)
    api.send(news, zoe, "back to normal")
    expect_error(lambda: api.send(news, max_, "@all", mention_all=True), grpc.StatusCode.PERMISSION_DENIED,
                 "PERMISSION_DENIED")


def test_a_topic_manage_value_updates_and_deletes_that_topic_only(api):
    group, owner, admin, mia, max_, zoe = community(api)
    mine, theirs = create_topic(api, group, owner, "mine"), create_topic(api, group, owner, "theirs")
    pg = create(api, group, owner, "stewards", topics={mine: [P.PERMISSION_MANAGE_TOPICS]}).permission_group_id
    add(api, group, owner, pg, [mia])
    api.groups.UpdateTopic(group_pb2.UpdateTopicRequest(
        topic_id=mine, update_mask=field_mask_pb2.FieldMask(paths=["name"]), profile=K.GroupProfile(name="ours")),
        metadata=user_md(mia), timeout=10)
    expect_error(lambda: api.groups.DeleteTopic(group_pb2.DeleteTopicRequest(topic_id=theirs), metadata=user_md(mia),
                                                timeout=10), grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    api.groups.DeleteTopic(group_pb2.DeleteTopicRequest(topic_id=mine), metadata=user_md(mia), timeout=10)
    # The deleted topic's value is left out of the listing.
    assert not listed(api, group, owner, [pg])[0].topic_permissions


def test_permission_group_events_reach_the_community(api):
    group, owner, admin, mia, max_, zoe = community(api)
    stream = EventStream(api.channel, event_pb2.SubscribeRequest(group_ids=[group]), user_md(zoe))
    stream.until_caught_up()
    pg = create(api, group, owner, "mods", [P.PERMISSION_PIN_MESSAGES]).permission_group_id
    update(api, group, admin, pg, ["name"], name="moderators")
    update(api, group, admin, pg, ["name"], name="moderators")  # nothing changed: no event
    add(api, group, owner, pg, [mia, max_])
    remove(api, group, owner, pg, [max_])
    api.groups.DeletePermissionGroup(group_pb2.DeletePermissionGroupRequest(group_id=group, permission_group_id=pg),
                                     metadata=user_md(owner), timeout=10)
    events = [i.event for i in stream.events(5)]
    stream.cancel()
    assert [e.kind for e in events] == [
        K.EVENT_KIND_PERMISSION_GROUP_CREATED, K.EVENT_KIND_PERMISSION_GROUP_UPDATED,
        K.EVENT_KIND_MEMBER_PERMISSIONS_CHANGED, K.EVENT_KIND_MEMBER_PERMISSIONS_CHANGED,
        K.EVENT_KIND_PERMISSION_GROUP_DELETED]
    assert all(e.group_id == group and e.permission_group.permission_group_id == pg for e in events)
    created, updated, added, removed, deleted = events
    assert (created.permission_group.name, list(created.permission_group.permissions)) == ("mods", [P.PERMISSION_PIN_MESSAGES])
    assert list(updated.permission_group.changed_fields) == ["name"] and updated.operator_user_id == admin
    assert list(added.target_user_ids) == [mia, max_] and list(added.permission_group.changed_fields) == ["added"]
    assert list(removed.target_user_ids) == [max_] and list(removed.permission_group.changed_fields) == ["removed"]
    assert list(deleted.permission_group.changed_fields) == []


def test_refusals_name_their_reason_and_change_nothing(api, fresh_groupd):
    group, owner, admin, mia, max_, zoe = community(api)
    topic = create_topic(api, group, owner)
    pg = create(api, group, owner, "mods", [P.PERMISSION_PIN_MESSAGES]).permission_group_id
    add(api, group, owner, pg, [zoe])
    before = listed(api, group, owner)
    expect_error(lambda: create(api, group, mia), grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    expect_error(lambda: create(api, group, uid("stranger")), grpc.StatusCode.PERMISSION_DENIED, "NOT_A_MEMBER")
    expect_error(lambda: create(api, uid("missing"), owner), grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")
    public = api.create(PUBLIC, owner)
    info = expect_error(lambda: create(api, public, owner), grpc.StatusCode.FAILED_PRECONDITION,
                        "PERMISSION_GROUPS_NOT_SUPPORTED")
    assert info.metadata["group_type"] == "Public"
    expect_error(lambda: listed(api, public, owner), grpc.StatusCode.FAILED_PRECONDITION, "PERMISSION_GROUPS_NOT_SUPPORTED")
    expect_error(lambda: create(api, topic, owner), grpc.StatusCode.FAILED_PRECONDITION, "NOT_ALLOWED_ON_TOPIC")
    expect_error(lambda: listed(api, topic, owner), grpc.StatusCode.FAILED_PRECONDITION, "NOT_ALLOWED_ON_TOPIC")
    for fields, field in [
        (dict(name=""), "name"),
        (dict(name="n" * 31), "name"),
        (dict(permissions=[P.PERMISSION_UNSPECIFIED]), "permissions[0]"),
        (dict(permissions=[99]), "permissions[0]"),
        (dict(topics={topic: [P.PERMISSION_BAN_MEMBERS]}), "topic_permissions"),
        (dict(data=b"x" * 1025), "custom_data"),
    ]:
        args = dict(name="ok")
        args.update(fields)
        info = expect_error(lambda: create(api, group, owner, **args), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
        assert info.metadata["field"] == field, fields
    info = expect_error(lambda: create(api, group, owner, "x", topics={group + "@TOPIC#_NOSUCHTOPIC00": [P.PERMISSION_SEND_MESSAGE]}),
                        grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")
    assert info.metadata["topic_id"] == group + "@TOPIC#_NOSUCHTOPIC00"
    info = expect_error(lambda: update(api, group, owner, "PG0000000000NONE", ["name"], name="x"),
                        grpc.StatusCode.NOT_FOUND, "PERMISSION_GROUP_NOT_FOUND")
    assert info.metadata["field"] == "permission_group_id"
    expect_error(lambda: update(api, group, owner, pg, []), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    expect_error(lambda: update(api, group, owner, pg, ["color"]), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    expect_error(lambda: update(api, group, owner, "everyone", ["name"], name="all"), grpc.StatusCode.INVALID_ARGUMENT,
                 "INVALID_ARGUMENT")
    expect_error(lambda: add(api, group, owner, "everyone", [mia]), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    expect_error(lambda: add(api, group, owner, pg, []), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    expect_error(lambda: add(api, group, mia, pg, [max_]), grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    expect_error(lambda: api.groups.ListPermissionGroupMembers(group_pb2.ListPermissionGroupMembersRequest(
        group_id=group, permission_group_id="everyone"), metadata=user_md(owner), timeout=10),
        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    expect_error(lambda: listed(api, group, owner, member=uid("nobody")), grpc.StatusCode.NOT_FOUND, "MEMBER_NOT_FOUND")
    expect_error(lambda: permissions_of(api, group, owner, uid("nobody")), grpc.StatusCode.NOT_FOUND, "MEMBER_NOT_FOUND")
    expect_error(lambda: permissions_of(api, group, uid("stranger"), mia), grpc.StatusCode.PERMISSION_DENIED,
                 "NOT_A_MEMBER")
    # A manager grants only what they hold; nor do they touch a stronger group.
    managers = create(api, group, owner, "managers", [P.PERMISSION_MANAGE_PERMISSION_GROUPS]).permission_group_id
    add(api, group, owner, managers, [mia])
    info = expect_error(lambda: create(api, group, mia, "x", [P.PERMISSION_BAN_MEMBERS]), grpc.StatusCode.PERMISSION_DENIED,
                        "PERMISSION_DENIED")
    assert info.metadata["permission"] == "ban_members"
    expect_error(lambda: add(api, group, mia, pg, [mia]), grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    assert [g.name for g in listed(api, group, owner)] == [g.name for g in before] + ["managers"]
    assert [g.member_count for g in listed(api, group, owner, [pg])] == [1]
    # The app's limits.
    server = fresh_groupd(limits={"max_permission_groups_per_community": 1, "max_permission_groups_per_member": 1}).start()
    with grpc.insecure_channel(server.address) as channel:
        limited = MessageApi(channel)
        small = limited.create(COMMUNITY, owner, [(mia, MEMBER)])
        first = create(limited, small, owner, "one").permission_group_id
        info = expect_error(lambda: create(limited, small, owner, "two"), grpc.StatusCode.FAILED_PRECONDITION,
                            "TOO_MANY_PERMISSION_GROUPS")
        assert info.metadata["limit"] == "1"
        add(limited, small, owner, first, [mia])
        update(limited, small, None, "everyone", ["permissions"], permissions=[P.PERMISSION_PIN_MESSAGES])
        assert [g.permission_group_id for g in listed(limited, small, owner)] == ["everyone", first]
        # Adding her again changes nothing.
        assert [r.result for r in add(limited, small, owner, first, [mia])] == [K.MEMBER_RESULT_CODE_SUCCESS]


def test_the_per_member_limit_is_a_failed_result(api, fresh_groupd):
    owner, mia = uid("owner"), uid("mia")
    server = fresh_groupd(limits={"max_permission_groups_per_member": 1}).start()
    with grpc.insecure_channel(server.address) as channel:
        limited = MessageApi(channel)
        group = limited.create(COMMUNITY, owner, [(mia, MEMBER)])
        one = create(limited, group, owner, "one").permission_group_id
        two = create(limited, group, owner, "two").permission_group_id
        add(limited, group, owner, one, [mia])
        results = add(limited, group, owner, two, [mia])
        assert [(r.result, r.reason) for r in results] == [
            (K.MEMBER_RESULT_CODE_FAILED, "TOO_MANY_PERMISSION_GROUPS_PER_MEMBER")]
        assert list(permissions_of(limited, group, owner, mia).permission_group_ids) == [one]
