"""The online count of AVChatRooms (Group.member_count): the stored owner plus the viewers who
hold a Subscribe stream, on any node, or whose last stream ended less than the grace period
(60 s) ago; a viewer who joined without a stream counts for the grace period. Several streams of
one viewer count once, a reconnect within the grace period keeps them counted, a viewer who
quits stops counting at once, and one whose grace period passed is gone (their
stream no longer renews them; they join again). On PostgreSQL the count is the same through
every node and survives a node's restart.

Time is the servers' manual clock, moved by `advance_clock()` in steps shorter than the renewal
interval (20 s), as a real clock moves; a stream's end is waited for on the metrics endpoint
(`groupd_event_subscribers`), never by sleeping.
"""
import re
import urllib.request

import grpc
import pytest

import support
from support import StreamReader, admin_md, free_port, uid, user_md, wait_for
from groupd.v1 import common_pb2, event_pb2, event_pb2_grpc, group_pb2, group_pb2_grpc, member_pb2, member_pb2_grpc

AV = common_pb2.GROUP_TYPE_AV_CHAT_ROOM
RPC_TIMEOUT = 10
GRACE = 60
RENEWAL = 20


def start_node(fresh_groupd, database=None):
    """A node with the manual clock and a metrics endpoint."""
    server = fresh_groupd(manual_clock=True, database=database)
    server.metrics_port = free_port()
    server.set_top_level(f"metrics:\n  host: 127.0.0.1\n  port: {server.metrics_port}\n")
    return server.start()


def subscribers(server):
    """The node's open Subscribe streams (its `groupd_event_subscribers` gauge)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10) as response:
        text = response.read().decode()
    match = re.search(r"^groupd_event_subscribers (\S+)$", text, re.M)
    return int(float(match.group(1))) if match else 0


class Node:
    """A channel to one node and its stubs."""

    def __init__(self, server):
        self.server = server
        self.channel = grpc.insecure_channel(server.address)
        self.groups = group_pb2_grpc.GroupServiceStub(self.channel)
        self.members = member_pb2_grpc.MemberServiceStub(self.channel)
        self.events = event_pb2_grpc.EventServiceStub(self.channel)
        self.streams = []

    def close(self):
        for stream in self.streams:
            stream.call.cancel()
        self.channel.close()

    def room(self, host):
        return self.groups.CreateGroup(group_pb2.CreateGroupRequest(
            group_id=uid("room"), type=AV, owner_user_id=host, profile=common_pb2.GroupProfile(name="live")),
            metadata=admin_md(), timeout=RPC_TIMEOUT).group.group_id

    def count(self, room):
        return self.groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[room]), metadata=admin_md(),
                                         timeout=RPC_TIMEOUT).groups[0].member_count

    def join(self, room, viewer):
        """Joins `viewer` and returns the room's count after."""
        joined = self.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=room), metadata=user_md(viewer),
                                        timeout=RPC_TIMEOUT)
        assert joined.outcome == member_pb2.JOIN_OUTCOME_JOINED
        return self.count(room)

    def watch(self, viewer):
        """Opens a stream of `viewer` and waits for its caught_up (the viewer is then online here)."""
        stream = StreamReader(self.events.Subscribe(event_pb2.SubscribeRequest(), metadata=user_md(viewer)))
        stream.until(lambda item: item.WhichOneof("item") == "caught_up")
        self.streams.append(stream)
        return stream

    def drop(self, stream):
        """Ends a stream and waits until the node has seen it end."""
        before = subscribers(self.server)
        stream.call.cancel()
        self.streams.remove(stream)
        wait_for(lambda: subscribers(self.server) == before - 1, "the node to see the stream end")


def advance(servers, seconds):
    """Moves every node's clock by `seconds`, in steps of at most a renewal interval."""
    while seconds > 0:
        step = min(seconds, RENEWAL)
        for server in servers:
            server.advance_clock(step)
        seconds -= step


@pytest.fixture
def node(fresh_groupd):
    node = Node(start_node(fresh_groupd))
    yield node
    node.close()


def test_a_viewer_counts_while_streaming_and_for_the_grace_period_after(node):
    host, viewer, passer_by = uid("host"), uid("viewer"), uid("passer")
    room = node.room(host)
    assert node.count(room) == 1
    stream = node.watch(viewer)
    assert node.join(room, viewer) == 2
    # Minutes pass: the stream keeps the viewer counted.
    advance([node.server], 10 * GRACE)
    assert node.count(room) == 2
    # A viewer who joined without a stream counts for the grace period only.
    assert node.join(room, passer_by) == 3
    advance([node.server], GRACE - 1)
    assert node.count(room) == 3
    advance([node.server], 1)
    assert node.count(room) == 2
    # The stream ends: counted for the grace period after, then gone.
    node.drop(stream)
    advance([node.server], GRACE - 1)
    assert node.count(room) == 2
    advance([node.server], 1)
    assert node.count(room) == 1
    # Gone: a new stream does not bring the viewer back, and they are no longer in the audience.
    node.watch(viewer)
    advance([node.server], RENEWAL)
    assert node.count(room) == 1
    own = node.groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[room]), metadata=user_md(viewer),
                                    timeout=RPC_TIMEOUT).groups[0]
    assert not own.HasField("self_info")
    # Joining again counts them (with the stream, for as long as it lasts).
    assert node.join(room, viewer) == 2
    advance([node.server], 3 * GRACE)
    assert node.count(room) == 2


def test_several_streams_and_reconnects_count_a_viewer_once(node):
    host, viewer = uid("host"), uid("viewer")
    room = node.room(host)
    first, second = node.watch(viewer), node.watch(viewer)
    assert node.join(room, viewer) == 2
    advance([node.server], 2 * GRACE)
    assert node.count(room) == 2
    # One of two streams ends: the other holds the viewer.
    node.drop(first)
    advance([node.server], 2 * GRACE)
    assert node.count(room) == 2
    # The last one ends; a reconnect within the grace period keeps the viewer, counted once.
    node.drop(second)
    advance([node.server], GRACE - RENEWAL)
    assert node.count(room) == 2
    node.watch(viewer)
    node.watch(viewer)
    assert node.count(room) == 2
    advance([node.server], 3 * GRACE)
    assert node.count(room) == 2


def test_a_viewer_who_quits_stops_counting_at_once(node):
    host, leaver, stayer = uid("host"), uid("leaver"), uid("stayer")
    room = node.room(host)
    for viewer in (leaver, stayer):
        node.watch(viewer)
        node.join(room, viewer)
    assert node.count(room) == 3
    node.members.QuitGroup(member_pb2.QuitGroupRequest(group_id=room), metadata=user_md(leaver), timeout=RPC_TIMEOUT)
    assert node.count(room) == 2
    # The leaver's stream goes on, and renews nothing: they left.
    advance([node.server], 2 * GRACE)
    assert node.count(room) == 2


def test_the_count_is_the_rooms_on_every_node_and_survives_a_restart(fresh_groupd):
    """PostgreSQL, two nodes: viewers online through either node count on both; a node's restart
    keeps the viewers streaming through the other, and those of its own who reconnect within the
    grace period; nobody is counted for ever."""
    if not support.POSTGRES_URL:
        pytest.skip("two nodes need PostgreSQL (GROUPD_TEST_POSTGRES_URL)")
    a_server = start_node(fresh_groupd)
    b_server = start_node(fresh_groupd, database=a_server.database)
    sync_clocks(a_server, b_server)
    a, b = Node(a_server), Node(b_server)
    try:
        host = uid("host")
        on_a, on_b, returning = uid("on-a"), uid("on-b"), uid("returning")
        room = a.room(host)
        a.watch(on_a)
        b.watch(on_b)
        b.watch(returning)
        a.join(room, on_a)
        b.join(room, on_b)
        a.join(room, returning)  # joins through A, streams through B
        assert a.count(room) == 4 and b.count(room) == 4
        advance([a_server, b_server], 3 * GRACE)
        assert a.count(room) == 4 and b.count(room) == 4
        # B restarts: its streams end with it.
        b.close()
        b_server.stop()
        b_server.start()
        sync_clocks(a_server, b_server)
        b = Node(b_server)
        # The viewer streaming through A still counts, through the restarted B too.
        assert a.count(room) == 4 and b.count(room) == 4
        advance([a_server, b_server], RENEWAL)
        b.watch(returning)  # back within the grace period
        advance([a_server, b_server], 2 * GRACE)
        # on_b never came back: gone; on_a (through A) and returning (through B) still count.
        assert a.count(room) == 3 and b.count(room) == 3
        # on_a's stream through A ends: counted on both for the grace period, then gone from both.
        a.drop(a.streams[0])
        advance([a_server, b_server], GRACE - 1)
        assert a.count(room) == 3 and b.count(room) == 3
        advance([a_server, b_server], 1)
        assert a.count(room) == 2 and b.count(room) == 2
    finally:
        a.close()
        b.close()


def sync_clocks(*servers):
    """Moves the nodes' manual clocks to the latest of them (each starts at its start time)."""
    times = [server.clock_ms() for server in servers]
    for server, at in zip(servers, times):
        if at < max(times):
            server.advance_clock(ms=max(times) - at)
