"""EventService.Subscribe through a real groupd with stock grpcio (and one raw HTTP/2 client
for a subscriber that stops reading): backlog, caught_up and live items; resume after a killed
connection compared with the full log; order per group; two devices; join and kick; the
firehose's filters; malformed and expired cursors; a slow consumer ended with its cursor.
"""
import queue
import threading

import grpc
import pytest

from support import EventStream, Groupd, admin_md, error_info, uid, user_md
from h2raw import RawConnection, grpc_frame, grpc_messages
from groupd.v1 import (common_pb2, event_pb2, event_pb2_grpc, group_pb2, group_pb2_grpc, member_pb2,
                       member_pb2_grpc)
from google.protobuf import field_mask_pb2
from google.rpc import status_pb2

SUBSCRIBE = "/groupd.v1.EventService/Subscribe"


Stream = EventStream


def events_of(items):
    return [item.event for item in items if item.WhichOneof("item") == "event"]


def create(stubs, group_type, owner, members=(), group_id=None):
    group_id = group_id or uid("g")
    stubs["groups"].CreateGroup(group_pb2.CreateGroupRequest(
        group_id=group_id, type=group_type, owner_user_id=owner, profile=common_pb2.GroupProfile(name="t"),
        members=[group_pb2.InitialMember(user_id=user, role=common_pb2.MEMBER_ROLE_MEMBER) for user in members]),
        metadata=admin_md(), timeout=10)
    return group_id


def rename(stubs, group_id, name, owner):
    stubs["groups"].UpdateGroupProfile(group_pb2.UpdateGroupProfileRequest(
        group_id=group_id, update_mask=field_mask_pb2.FieldMask(paths=["name"]),
        profile=common_pb2.GroupProfile(name=name)), metadata=user_md(owner), timeout=10)


def resume_info(error):
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                if detail.type_url.endswith("groupd.v1.StreamResumeInfo"):
                    info = event_pb2.StreamResumeInfo()
                    detail.Unpack(info)
                    return info
    return None


@pytest.fixture
def stubs(channel):
    return {"groups": group_pb2_grpc.GroupServiceStub(channel), "members": member_pb2_grpc.MemberServiceStub(channel)}


def test_backlog_then_caught_up_then_live(channel, stubs):
    owner, bob = uid("alice"), uid("bob")
    group = create(stubs, common_pb2.GROUP_TYPE_PUBLIC, owner, [bob])
    stream = Stream(channel, event_pb2.SubscribeRequest(from_oldest=True), user_md(bob))
    backlog = stream.until_caught_up()
    assert [event.kind for event in events_of(backlog)] == [common_pb2.EVENT_KIND_GROUP_CREATED]
    assert backlog[-1].cursor == backlog[-2].cursor
    rename(stubs, group, "live", owner)
    (live,) = stream.events(1)
    assert live.event.kind == common_pb2.EVENT_KIND_GROUP_INFO_CHANGED and live.event.group_id == group
    assert live.cursor
    stream.cancel()


def test_resume_after_killed_connection_loses_and_repeats_nothing(groupd, stubs):
    owner, bob = uid("alice"), uid("bob")
    groups = [create(stubs, common_pb2.GROUP_TYPE_PUBLIC, owner, [bob]),
              create(stubs, common_pb2.GROUP_TYPE_WORK, owner, [bob])]
    rounds = 80

    def write():
        for index in range(rounds):
            rename(stubs, groups[index % 2], f"n{index}", owner)

    writer = threading.Thread(target=write)
    writer.start()
    received, cursor = [], ""
    for _ in range(6):
        # A connection of its own, dropped mid-stream without any goodbye.
        channel = grpc.insecure_channel(groupd.address)
        stream = Stream(channel, event_pb2.SubscribeRequest(cursor=cursor, from_oldest=not cursor), user_md(bob))
        for _ in range(7):
            try:
                item = stream.items.get(timeout=2)
            except queue.Empty:
                break
            if item.WhichOneof("item") == "event":
                received.append(item)
            cursor = item.cursor
        channel.close()
        stream.done.wait(10)
    writer.join()
    last = Stream(grpc.insecure_channel(groupd.address),
                  event_pb2.SubscribeRequest(cursor=cursor, from_oldest=not cursor), user_md(bob))
    received += [item for item in last.until_caught_up() if item.WhichOneof("item") == "event"]
    last.cancel()

    # The full log of both groups, from the backend's firehose.
    with grpc.insecure_channel(groupd.address) as admin_channel:
        firehose = Stream(admin_channel, event_pb2.SubscribeRequest(from_oldest=True, group_ids=groups), admin_md())
        log = events_of(firehose.until_caught_up())
        firehose.cancel()
    assert len(log) == 2 + rounds
    positions = [(item.event.group_id, item.event.sequence) for item in received]
    assert positions == [(event.group_id, event.sequence) for event in log]
    for group in groups:
        sequences = [sequence for gid, sequence in positions if gid == group]
        assert sequences == list(range(1, len(sequences) + 1))


def test_two_devices_get_the_same_items(channel, stubs):
    owner, bob = uid("alice"), uid("bob")
    group = create(stubs, common_pb2.GROUP_TYPE_WORK, owner, [bob])
    phone = Stream(channel, event_pb2.SubscribeRequest(), user_md(bob))
    laptop = Stream(channel, event_pb2.SubscribeRequest(), user_md(bob))
    phone.until_caught_up()
    laptop.until_caught_up()
    for index in range(5):
        rename(stubs, group, f"n{index}", owner)
    on_phone, on_laptop = phone.events(5), laptop.events(5)
    assert [item.event.event_id for item in on_phone] == [item.event.event_id for item in on_laptop]
    assert [item.event.sequence for item in on_phone] == [2, 3, 4, 5, 6]
    phone.cancel()
    laptop.cancel()


def test_join_starts_delivery_and_kick_ends_it(channel, stubs):
    owner, carol = uid("alice"), uid("carol")
    group = create(stubs, common_pb2.GROUP_TYPE_WORK, owner)
    stream = Stream(channel, event_pb2.SubscribeRequest(), user_md(carol))
    stream.until_caught_up()
    rename(stubs, group, "before", owner)
    stubs["members"].InviteMembers(member_pb2.InviteMembersRequest(group_id=group, user_ids=[carol]),
                                   metadata=user_md(owner), timeout=10)
    rename(stubs, group, "member", owner)
    stubs["members"].KickMembers(member_pb2.KickMembersRequest(group_id=group, user_ids=[carol], reason="bye"),
                                 metadata=user_md(owner), timeout=10)
    rename(stubs, group, "after", owner)
    # A marker addressed to carol after the last rename: everything before it has been routed.
    other = create(stubs, common_pb2.GROUP_TYPE_WORK, owner, [carol])
    got = [item.event for item in stream.events(6)]
    assert [(event.group_id, event.kind) for event in got] == [
        (group, common_pb2.EVENT_KIND_MEMBER_INVITED), (group, common_pb2.EVENT_KIND_INVITED),
        (group, common_pb2.EVENT_KIND_GROUP_INFO_CHANGED), (group, common_pb2.EVENT_KIND_MEMBER_KICKED),
        (group, common_pb2.EVENT_KIND_KICKED), (other, common_pb2.EVENT_KIND_GROUP_CREATED)]
    assert got[4].kick.reason == "bye"
    stream.cancel()


def test_firehose_filters_by_group_and_kind(channel, stubs):
    owner, bob = uid("alice"), uid("bob")
    g1 = create(stubs, common_pb2.GROUP_TYPE_WORK, owner)
    g2 = create(stubs, common_pb2.GROUP_TYPE_WORK, owner)
    start = Stream(channel, event_pb2.SubscribeRequest(), admin_md())
    cursor = start.until_caught_up()[-1].cursor
    start.cancel()
    for group in (g1, g2):
        stubs["members"].InviteMembers(member_pb2.InviteMembersRequest(group_id=group, user_ids=[bob]),
                                       metadata=user_md(owner), timeout=10)
        rename(stubs, group, "x", owner)
    filtered = Stream(channel, event_pb2.SubscribeRequest(
        cursor=cursor, group_ids=[g2], kinds=[common_pb2.EVENT_KIND_MEMBER_INVITED]), admin_md())
    got = events_of(filtered.until_caught_up())
    assert [(event.group_id, event.kind) for event in got] == [(g2, common_pb2.EVENT_KIND_MEMBER_INVITED)]
    everything = Stream(channel, event_pb2.SubscribeRequest(cursor=cursor, group_ids=[g1, g2]), admin_md())
    assert len(events_of(everything.until_caught_up())) == 6
    filtered.cancel()
    everything.cancel()
    # A user token acting for nobody is not the firehose: it sees only its own groups.
    stranger = Stream(channel, event_pb2.SubscribeRequest(cursor=cursor), user_md(uid("nobody")))
    assert events_of(stranger.until_caught_up()) == []
    stranger.cancel()


def test_malformed_cursor_is_invalid_argument(channel):
    for cursor in ["bogus", "1.x.1", "9.1.1"]:
        stream = Stream(channel, event_pb2.SubscribeRequest(cursor=cursor), admin_md())
        stream.done.wait(10)
        assert stream.error is not None and stream.error.code() == grpc.StatusCode.INVALID_ARGUMENT
        info = error_info(stream.error)
        assert info.metadata["field"] == "cursor"


def test_expired_cursor_is_out_of_range_with_the_oldest_cursor(fresh_groupd):
    server = fresh_groupd(manual_clock=True, limits={"event_retention_seconds": 1}).start()
    with grpc.insecure_channel(server.address) as channel:
        stubs = {"groups": group_pb2_grpc.GroupServiceStub(channel)}
        group = create(stubs, common_pb2.GROUP_TYPE_WORK, "alice", ["bob"])
        first = Stream(channel, event_pb2.SubscribeRequest(from_oldest=True), user_md("bob"))
        old_cursor = first.until_caught_up()[0].cursor
        first.cancel()
        server.advance_clock(ms=1001)  # the first events fall out of the retention
        rename(stubs, group, "recent", "alice")
        expired = Stream(channel, event_pb2.SubscribeRequest(cursor=old_cursor), user_md("bob"))
        expired.done.wait(10)
        assert expired.error.code() == grpc.StatusCode.OUT_OF_RANGE
        assert error_info(expired.error).reason == "CURSOR_EXPIRED"
        oldest = resume_info(expired.error).cursor
        resumed = Stream(channel, event_pb2.SubscribeRequest(cursor=oldest), user_md("bob"))
        assert [event.kind for event in events_of(resumed.until_caught_up())] == [
            common_pb2.EVENT_KIND_GROUP_INFO_CHANGED]
        resumed.cancel()


def test_slow_consumer_is_ended_with_its_cursor(groupd, channel, stubs):
    owner, bob = uid("alice"), uid("bob")
    group = create(stubs, common_pb2.GROUP_TYPE_WORK, owner, [bob])
    request = event_pb2.SubscribeRequest().SerializeToString()
    headers = [("authorization", user_md(bob)[0][1])]
    # A receive window of 0: the server can queue but never send, like a client that stopped reading.
    with RawConnection(groupd.port, timeout=30, initial_window_size=0) as raw:
        stream_id = raw.start_request(SUBSCRIBE, [grpc_frame(request)], headers=headers)
        raw.read_for(0.5)
        # More items than the stream's queue holds (128).
        for index in range(140):
            rename(stubs, group, f"n{index}", owner)
        raw.read_for(0.5)
        raw.conn.increment_flow_control_window(1 << 24, stream_id)
        raw.conn.increment_flow_control_window(1 << 24)
        raw.flush()
        result = raw.read_response(stream_id, timeout=20)
    assert result.trailers["grpc-status"] == str(grpc.StatusCode.UNAVAILABLE.value[0])
    items = [event_pb2.SubscribeResponse.FromString(message) for message in grpc_messages(result.data)]
    # Bounded: caught_up and what fit in the queue, not the 140 items.
    assert len(items) <= 129 and items[0].WhichOneof("item") == "caught_up"
    status = status_pb2.Status.FromString(__import__("base64").b64decode(
        result.trailers["grpc-status-details-bin"] + "=="))
    reasons, cursors = [], []
    for detail in status.details:
        if detail.type_url.endswith("ErrorInfo"):
            from google.rpc import error_details_pb2
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reasons.append(info.reason)
        if detail.type_url.endswith("StreamResumeInfo"):
            info = event_pb2.StreamResumeInfo()
            detail.Unpack(info)
            cursors.append(info.cursor)
    assert reasons == ["SUBSCRIBER_TOO_SLOW"]
    assert cursors == [items[-1].cursor]
    # Resuming from it delivers the rest, nothing twice.
    resumed = Stream(channel, event_pb2.SubscribeRequest(cursor=cursors[0]), user_md(bob))
    rest = events_of(resumed.until_caught_up())
    delivered = [item.event.sequence for item in items if item.WhichOneof("item") == "event"]
    assert delivered + [event.sequence for event in rest] == list(range(2, 142))
    resumed.cancel()


def test_live_stream_ends_at_its_deadline_and_others_go_on(groupd, channel, stubs):
    # A live stream is served without a waiting task; its grpc-timeout still ends it, with
    # DEADLINE_EXCEEDED after what it had, and the hub drops it while other streams go on.
    owner, bob = uid("alice"), uid("bob")
    group = create(stubs, common_pb2.GROUP_TYPE_WORK, owner, [bob])
    request = event_pb2.SubscribeRequest().SerializeToString()
    headers = [("authorization", user_md(bob)[0][1]), ("grpc-timeout", "1500m")]
    other = Stream(channel, event_pb2.SubscribeRequest(), user_md(bob))
    other.until_caught_up()
    with RawConnection(groupd.port, timeout=30) as raw:
        stream_id = raw.start_request(SUBSCRIBE, [grpc_frame(request)], headers=headers)
        raw.read_for(0.3)
        rename(stubs, group, "before the deadline", owner)
        result = raw.read_response(stream_id, timeout=10)
    assert result.trailers["grpc-status"] == str(grpc.StatusCode.DEADLINE_EXCEEDED.value[0])
    items = [event_pb2.SubscribeResponse.FromString(message) for message in grpc_messages(result.data)]
    assert [item.WhichOneof("item") for item in items] == ["caught_up", "event"]
    rename(stubs, group, "after the deadline", owner)
    assert [event.event.kind for event in other.events(2)] == [common_pb2.EVENT_KIND_GROUP_INFO_CHANGED] * 2
    other.cancel()


def test_shutdown_ends_streams_with_their_cursor(fresh_groupd):
    import signal as signals
    server = fresh_groupd().start()
    with grpc.insecure_channel(server.address) as channel:
        stubs = {"groups": group_pb2_grpc.GroupServiceStub(channel)}
        create(stubs, common_pb2.GROUP_TYPE_WORK, "alice", ["bob"])
        stream = Stream(channel, event_pb2.SubscribeRequest(from_oldest=True), user_md("bob"))
        items = stream.until_caught_up()
        server.signal(signals.SIGTERM)
        assert stream.done.wait(15)
        assert stream.error.code() == grpc.StatusCode.UNAVAILABLE
        assert error_info(stream.error).reason == "SERVER_SHUTTING_DOWN"
        assert resume_info(stream.error).cursor == items[-1].cursor
    assert server.wait(30) == 0
