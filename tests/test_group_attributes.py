"""Group attributes (with compare-and-set) and group counters through a real groupd with stock
grpcio: each RPC, its event, its permissions, its limits and every refusal, each refusal checked
to have changed nothing."""
import concurrent.futures

import grpc
import pytest

from support import EventStream, admin_md, expect_error, uid, user_md
from groupd.v1 import common_pb2, event_pb2, group_pb2, group_pb2_grpc, member_pb2, member_pb2_grpc

K = common_pb2
G = group_pb2


@pytest.fixture
def groups(channel):
    return group_pb2_grpc.GroupServiceStub(channel)


def create(groups, group_type, owner, members=()):
    gid = uid("g")
    groups.CreateGroup(G.CreateGroupRequest(
        group_id=gid, type=group_type, owner_user_id=owner, profile=K.GroupProfile(name="t"),
        members=[G.InitialMember(user_id=user, role=K.MEMBER_ROLE_MEMBER) for user in members]),
        metadata=admin_md(), timeout=10)
    return gid


@pytest.fixture
def public(groups):
    owner, member = uid("owner"), uid("member")
    return create(groups, K.GROUP_TYPE_PUBLIC, owner, [member]), owner, member


def put(groups, gid, md, *writes):
    request = G.SetGroupAttributesRequest(
        group_id=gid, attributes=[G.AttributeWrite(key=k, value=v, expected_version=e) for k, v, e in writes])
    return groups.SetGroupAttributes(request, metadata=md, timeout=10)


def get(groups, gid, md=None, keys=()):
    response = groups.GetGroupAttributes(G.GetGroupAttributesRequest(group_id=gid, keys=keys),
                                         metadata=md or admin_md(), timeout=10)
    return {a.key: (a.value, a.version) for a in response.attributes}


def counters(groups, gid, md=None, keys=()):
    return dict(groups.GetGroupCounters(G.GetGroupCountersRequest(group_id=gid, keys=keys),
                                        metadata=md or admin_md(), timeout=10).values)


def increment(groups, gid, md, **deltas):
    return dict(groups.IncrementGroupCounters(G.IncrementGroupCountersRequest(group_id=gid, deltas=deltas),
                                              metadata=md, timeout=10).values)


def test_set_get_delete_with_versions_and_events(channel, groups, public):
    gid, owner, member = public
    stream = EventStream(channel, event_pb2.SubscribeRequest(
        group_ids=[gid], kinds=[K.EVENT_KIND_GROUP_ATTRIBUTES_CHANGED]), admin_md())
    stream.until_caught_up()
    written = put(groups, gid, user_md(member), ("color", b"red", 0), ("size", b"\x00\x01", -1))
    assert [(a.key, a.value, a.updated_by_user_id) for a in written.attributes] == [
        ("color", b"red", member), ("size", b"\x00\x01", member)]
    version = written.attributes[0].version
    assert version > 0 and written.attributes[1].version == version
    (item,) = stream.events(1)
    event = item.event
    assert event.operator_user_id == member
    assert [(v.key, v.version) for v in event.attributes_change.set] == [("color", version), ("size", version)]
    assert event.sequence == version  # the version is the sequence of the event that wrote it

    # Conditional write at the version read: applies, and the version moves on.
    again = put(groups, gid, user_md(owner), ("color", b"blue", version))
    assert again.attributes[0].version > version
    assert get(groups, gid, user_md(member)) == {"color": (b"blue", again.attributes[0].version),
                                                 "size": (b"\x00\x01", version)}
    assert get(groups, gid, keys=["size", "absent"]) == {"size": (b"\x00\x01", version)}

    deleted = groups.DeleteGroupAttributes(G.DeleteGroupAttributesRequest(
        group_id=gid, keys=[G.AttributeKey(key="size", expected_version=version), G.AttributeKey(key="absent")]),
        metadata=user_md(member), timeout=10)
    assert list(deleted.deleted_keys) == ["size"]
    events = [item.event for item in stream.events(2)]
    assert list(events[1].attributes_change.deleted_keys) == ["size"] and not events[1].attributes_change.set
    assert set(get(groups, gid)) == {"color"}
    # Deleting only absent keys writes nothing: no event.
    none = groups.DeleteGroupAttributes(G.DeleteGroupAttributesRequest(group_id=gid, keys=[G.AttributeKey(key="size")]),
                                        metadata=admin_md(), timeout=10)
    assert list(none.deleted_keys) == []
    put(groups, gid, admin_md(), ("marker", b"", 0))
    (marker,) = stream.events(1)
    assert [v.key for v in marker.event.attributes_change.set] == ["marker"]
    assert marker.event.operator_user_id == ""
    stream.cancel()


def test_a_deleted_and_recreated_key_never_reuses_a_version(groups, public):
    gid, owner, _ = public
    first = put(groups, gid, user_md(owner), ("k", b"1", -1)).attributes[0].version
    groups.DeleteGroupAttributes(G.DeleteGroupAttributesRequest(group_id=gid, keys=[G.AttributeKey(key="k")]),
                                 metadata=user_md(owner), timeout=10)
    second = put(groups, gid, user_md(owner), ("k", b"2", -1)).attributes[0].version
    assert second > first
    info = expect_error(lambda: put(groups, gid, user_md(owner), ("k", b"3", first)),
                        grpc.StatusCode.ABORTED, "ATTRIBUTE_VERSION_MISMATCH")
    assert info.metadata["key"] == "k" and info.metadata["current_version"] == str(second)


def test_a_condition_that_fails_aborts_the_whole_batch(groups, public):
    gid, owner, member = public
    version = put(groups, gid, user_md(owner), ("a", b"1", 0)).attributes[0].version
    before = get(groups, gid)
    # `b` must not exist (holds) but `a` must not exist either (fails): nothing is written.
    info = expect_error(lambda: put(groups, gid, user_md(member), ("b", b"2", -1), ("a", b"x", -1)),
                        grpc.StatusCode.ABORTED, "ATTRIBUTE_VERSION_MISMATCH")
    assert info.metadata == {"key": "a", "expected_version": "-1", "current_version": str(version)}
    # A stale version.
    info = expect_error(lambda: put(groups, gid, user_md(member), ("a", b"x", version + 7)),
                        grpc.StatusCode.ABORTED, "ATTRIBUTE_VERSION_MISMATCH")
    assert info.metadata["expected_version"] == str(version + 7)
    # A version on an absent key.
    info = expect_error(lambda: put(groups, gid, user_md(member), ("c", b"x", 3)),
                        grpc.StatusCode.ABORTED, "ATTRIBUTE_VERSION_MISMATCH")
    assert info.metadata["current_version"] == "0"
    # A conditional delete of a moved key.
    expect_error(lambda: groups.DeleteGroupAttributes(G.DeleteGroupAttributesRequest(
        group_id=gid, keys=[G.AttributeKey(key="a", expected_version=version + 1)]), metadata=user_md(owner), timeout=10),
        grpc.StatusCode.ABORTED, "ATTRIBUTE_VERSION_MISMATCH")
    assert get(groups, gid) == before


BAD_WRITES = [
    ([], "attributes"),
    ([("", b"v", 0)], "attributes[0].key"),
    ([("ok", b"v", 0), ("ok", b"w", 0)], "attributes[1].key"),
    ([("k" * 65, b"v", 0)], "attributes[0].key"),
    ([("tab\tkey", b"v", 0)], "attributes[0].key"),
    ([("ok", b"v", 0), ("fine", b"v", -2)], "attributes[1].expected_version"),
]


@pytest.mark.parametrize("writes, field", BAD_WRITES)
def test_bad_writes_name_the_field_and_change_nothing(groups, public, writes, field):
    gid, owner, _ = public
    info = expect_error(lambda: put(groups, gid, user_md(owner), *writes), grpc.StatusCode.INVALID_ARGUMENT,
                        "INVALID_ARGUMENT")
    assert info.metadata["field"] == field
    assert get(groups, gid) == {}


def test_bad_deletions_and_reads_name_the_field(groups, public):
    gid, owner, _ = public
    put(groups, gid, user_md(owner), ("keep", b"1", 0))
    for keys, field in [([], "keys"), ([G.AttributeKey(key="")], "keys[0]"),
                        ([G.AttributeKey(key="keep"), G.AttributeKey(key="keep")], "keys[1]"),
                        ([G.AttributeKey(key="keep", expected_version=-5)], "keys[0].expected_version")]:
        info = expect_error(lambda: groups.DeleteGroupAttributes(
            G.DeleteGroupAttributesRequest(group_id=gid, keys=keys), metadata=user_md(owner), timeout=10),
            grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
        assert info.metadata["field"] == field
    assert set(get(groups, gid)) == {"keep"}
    info = expect_error(lambda: get(groups, gid, keys=["x" * 65]), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "keys[0]"
    info = expect_error(lambda: counters(groups, gid, keys=[""]), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "keys[0]"
    info = expect_error(lambda: put(groups, "", admin_md(), ("k", b"", 0)), grpc.StatusCode.INVALID_ARGUMENT,
                        "INVALID_ARGUMENT")
    assert info.metadata["field"] == "group_id"
    expect_error(lambda: put(groups, uid("nope"), admin_md(), ("k", b"", 0)), grpc.StatusCode.NOT_FOUND,
                 "GROUP_NOT_FOUND")
    expect_error(lambda: get(groups, uid("nope")), grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")


def test_who_may_read_and_write(channel, groups, public):
    gid, owner, member = public
    put(groups, gid, user_md(owner), ("k", b"v", 0))
    stranger = uid("stranger")
    for call in (lambda: put(groups, gid, user_md(stranger), ("k", b"w", 0)),
                 lambda: get(groups, gid, user_md(stranger)),
                 lambda: increment(groups, gid, user_md(stranger), n=1),
                 lambda: counters(groups, gid, user_md(stranger)),
                 lambda: groups.DeleteGroupAttributes(G.DeleteGroupAttributesRequest(
                     group_id=gid, keys=[G.AttributeKey(key="k")]), metadata=user_md(stranger), timeout=10)):
        expect_error(call, grpc.StatusCode.PERMISSION_DENIED, "NOT_A_MEMBER")
    # A Work group does not exist for a non-member.
    work = create(groups, K.GROUP_TYPE_WORK, owner)
    expect_error(lambda: get(groups, work, user_md(stranger)), grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")
    expect_error(lambda: put(groups, work, user_md(stranger), ("k", b"", 0)), grpc.StatusCode.NOT_FOUND,
                 "GROUP_NOT_FOUND")
    # An AVChatRoom viewer reads, but only the owner, admins and the backend write.
    host, viewer = uid("host"), uid("viewer")
    room = create(groups, K.GROUP_TYPE_AV_CHAT_ROOM, host)
    member_pb2_grpc.MemberServiceStub(channel).JoinGroup(member_pb2.JoinGroupRequest(group_id=room),
                                                         metadata=user_md(viewer), timeout=10)
    put(groups, room, user_md(host), ("topic", b"live", 0))
    assert get(groups, room, user_md(viewer))["topic"][0] == b"live"
    info = expect_error(lambda: put(groups, room, user_md(viewer), ("topic", b"mine", 0)),
                        grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    assert info.metadata["role"] == "member"
    expect_error(lambda: increment(groups, room, user_md(viewer), likes=1), grpc.StatusCode.PERMISSION_DENIED,
                 "PERMISSION_DENIED")
    assert increment(groups, room, admin_md(), likes=2) == {"likes": 2}
    assert get(groups, room)["topic"][0] == b"live"
    assert get(groups, gid) == get(groups, gid, user_md(member))
    assert set(get(groups, gid)) == {"k"}


def test_counters_add_exactly_under_concurrent_calls(groups, public):
    gid, owner, member = public
    assert increment(groups, gid, user_md(owner), likes=5, views=0) == {"likes": 5, "views": 0}
    assert increment(groups, gid, user_md(member), likes=-2) == {"likes": 3}
    users = [owner, member]
    calls = 60

    def bump(i):
        return increment(groups, gid, user_md(users[i % 2]), likes=1, views=2)["likes"]

    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
        seen = list(pool.map(bump, range(calls)))
    # Every call saw a distinct value: none lost another's increment.
    assert sorted(seen) == list(range(4, 4 + calls))
    assert counters(groups, gid) == {"likes": 3 + calls, "views": 2 * calls}
    assert counters(groups, gid, user_md(member), keys=["likes", "never"]) == {"likes": 3 + calls, "never": 0}


def test_counter_overflow_is_refused_and_changes_nothing(groups, public):
    gid, owner, _ = public
    top = 2**63 - 1
    increment(groups, gid, user_md(owner), big=top - 1, other=1)
    info = expect_error(lambda: increment(groups, gid, user_md(owner), big=2, other=1), grpc.StatusCode.OUT_OF_RANGE,
                        "COUNTER_OVERFLOW")
    assert info.metadata["key"] == "big" and info.metadata["field"] == "deltas[big]"
    assert counters(groups, gid) == {"big": top - 1, "other": 1}
    increment(groups, gid, user_md(owner), low=-(2**63))
    expect_error(lambda: increment(groups, gid, user_md(owner), low=-1), grpc.StatusCode.OUT_OF_RANGE, "COUNTER_OVERFLOW")
    info = expect_error(lambda: increment(groups, gid, user_md(owner)), grpc.StatusCode.INVALID_ARGUMENT,
                        "INVALID_ARGUMENT")
    assert info.metadata["field"] == "deltas"
    info = expect_error(lambda: increment(groups, gid, user_md(owner), **{"": 1}), grpc.StatusCode.INVALID_ARGUMENT,
                        "INVALID_ARGUMENT")
    assert info.metadata["field"] == "deltas[]"
    assert counters(groups, gid) == {"big": top - 1, "other": 1, "low": -(2**63)}


def test_per_app_limits(fresh_groupd):
    server = fresh_groupd(limits={"max_group_attribute_keys": 2, "group_attribute_bytes": 12,
                                  "group_attribute_key_bytes": 4, "max_group_counters": 2}).start()
    with grpc.insecure_channel(server.address) as channel:
        groups = group_pb2_grpc.GroupServiceStub(channel)
        owner = uid("owner")
        gid = create(groups, K.GROUP_TYPE_PUBLIC, owner)
        md = user_md(owner)
        put(groups, gid, md, ("a", b"12345", 0))
        info = expect_error(lambda: put(groups, gid, md, ("b", b"1234567", 0)), grpc.StatusCode.FAILED_PRECONDITION,
                            "GROUP_ATTRIBUTES_FULL")
        assert info.metadata == {"limit_name": "group_attribute_bytes", "limit": "12"}
        put(groups, gid, md, ("b", b"1", 0))
        info = expect_error(lambda: put(groups, gid, md, ("c", b"", 0)), grpc.StatusCode.FAILED_PRECONDITION,
                            "GROUP_ATTRIBUTES_FULL")
        assert info.metadata == {"limit_name": "max_group_attribute_keys", "limit": "2"}
        # Replacing a key within the limits is fine; three keys in one call are refused as input.
        put(groups, gid, md, ("a", b"x", 0))
        info = expect_error(lambda: put(groups, gid, md, ("a", b"", 0), ("b", b"", 0), ("c", b"", 0)),
                            grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
        assert info.metadata["field"] == "attributes" and info.metadata["limit"] == "2"
        info = expect_error(lambda: put(groups, gid, md, ("long", b"", 0), ("longer", b"", 0)),
                            grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
        assert info.metadata["field"] == "attributes[1].key" and info.metadata["limit"] == "4"
        assert get(groups, gid) == {"a": (b"x", get(groups, gid)["a"][1]), "b": (b"1", get(groups, gid)["b"][1])}

        increment(groups, gid, md, x=1, y=1)
        info = expect_error(lambda: increment(groups, gid, md, z=1), grpc.StatusCode.FAILED_PRECONDITION,
                            "GROUP_COUNTERS_FULL")
        assert info.metadata == {"limit_name": "max_group_counters", "limit": "2"}
        info = expect_error(lambda: increment(groups, gid, md, x=1, y=1, z=1), grpc.StatusCode.INVALID_ARGUMENT,
                            "INVALID_ARGUMENT")
        assert info.metadata["field"] == "deltas"
        assert counters(groups, gid) == {"x": 1, "y": 1}



def test_a_read_names_at_most_its_own_limit_of_keys(fresh_groupd):
    server = fresh_groupd(limits={"max_group_attribute_keys": 1, "max_group_counters": 3}).start()
    with grpc.insecure_channel(server.address) as channel:
        groups = group_pb2_grpc.GroupServiceStub(channel)
        owner = uid("owner")
        gid = create(groups, K.GROUP_TYPE_PUBLIC, owner)
        increment(groups, gid, user_md(owner), x=2)
        # Counters are read by up to max_group_counters keys, attributes by max_group_attribute_keys.
        assert counters(groups, gid, keys=["x", "y", "z"]) == {"x": 2, "y": 0, "z": 0}
        info = expect_error(lambda: counters(groups, gid, keys=["w", "x", "y", "z"]), grpc.StatusCode.INVALID_ARGUMENT,
                            "INVALID_ARGUMENT")
        assert info.metadata["field"] == "keys" and info.metadata["limit"] == "3"
        info = expect_error(lambda: get(groups, gid, keys=["a", "b"]), grpc.StatusCode.INVALID_ARGUMENT,
                            "INVALID_ARGUMENT")
        assert info.metadata["field"] == "keys" and info.metadata["limit"] == "1"


@pytest.mark.postgres_only
def test_two_nodes_add_to_one_counter_exactly_and_see_each_others_attributes(fresh_groupd):
    first = fresh_groupd()
    second = fresh_groupd(database=first.database)
    first.start()
    second.start()
    with grpc.insecure_channel(first.address) as a, grpc.insecure_channel(second.address) as b:
        stubs = [group_pb2_grpc.GroupServiceStub(a), group_pb2_grpc.GroupServiceStub(b)]
        owner = uid("owner")
        gid = create(stubs[0], K.GROUP_TYPE_PUBLIC, owner)
        version = put(stubs[0], gid, user_md(owner), ("k", b"from a", -1)).attributes[0].version
        assert get(stubs[1], gid) == {"k": (b"from a", version)}
        # A stale condition on the other node is refused there too.
        expect_error(lambda: put(stubs[1], gid, user_md(owner), ("k", b"from b", -1)), grpc.StatusCode.ABORTED,
                     "ATTRIBUTE_VERSION_MISMATCH")

        def bump(i):
            return increment(stubs[i % 2], gid, user_md(owner), n=1)["n"]

        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            seen = list(pool.map(bump, range(40)))
        assert sorted(seen) == list(range(1, 41))
        assert counters(stubs[0], gid) == counters(stubs[1], gid) == {"n": 40}
