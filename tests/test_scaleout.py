"""Scale-out on the PostgreSQL store: several groupd nodes on one database, real processes, stock
grpcio. A write acknowledged by one node is read at once on another (no cache); events of one
node's writes reach the streams of another, in order, once each, and a cursor of one node resumes
on another; concurrent writes to one group through two nodes keep its sequence gap-free; a node
SIGKILLed mid-write loses no acknowledged message and the other node goes on, and one killed
between its commit and its doorbell loses no event on the other node's streams; a node reports
NOT_SERVING and fails fast with STORE_UNAVAILABLE while its database is down, and recovers;
PostgreSQL restarted while two nodes write loses nothing acknowledged, and both recover by
themselves; a node cut from PostgreSQL without a close (its packets dropped in a network namespace)
fails fast while the other serves, and recovers; two nodes starting at once on an empty database migrate it once.

Every test needs GROUPD_TEST_POSTGRES_URL (`make test-postgres`). Nothing here waits by sleeping:
streams are read until an expected item (with a deadline), and health is polled with a deadline.
"""
import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import time
from urllib.parse import urlsplit

import grpc
import pytest
from google.protobuf import field_mask_pb2

import support
from support import StreamReader, admin_md, error_info, uid, user_md
from grpc.health.v1 import health_pb2, health_pb2_grpc
from groupd.v1 import (common_pb2, event_pb2, event_pb2_grpc, group_pb2, group_pb2_grpc, member_pb2,
                       member_pb2_grpc, message_pb2, message_pb2_grpc)

pytestmark = pytest.mark.postgres_only

WORK, PUBLIC = common_pb2.GROUP_TYPE_WORK, common_pb2.GROUP_TYPE_PUBLIC
SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
SENT = message_pb2.SEND_RESULT_SENT
RPC_TIMEOUT = 10


class Node:
    """A channel to one groupd node and its stubs."""

    def __init__(self, server):
        self.server = server
        self.channel = grpc.insecure_channel(server.address)
        self.groups = group_pb2_grpc.GroupServiceStub(self.channel)
        self.members = member_pb2_grpc.MemberServiceStub(self.channel)
        self.messages = message_pb2_grpc.MessageServiceStub(self.channel)
        self.events = event_pb2_grpc.EventServiceStub(self.channel)
        self.health = health_pb2_grpc.HealthStub(self.channel)

    def close(self):
        self.channel.close()

    # --- writes ------------------------------------------------------------------------------

    def create(self, owner, members=(), group_type=WORK, name="team", settings=None):
        return self.groups.CreateGroup(group_pb2.CreateGroupRequest(
            group_id=uid("g"), type=group_type, owner_user_id=owner, profile=common_pb2.GroupProfile(name=name),
            settings=settings,
            members=[group_pb2.InitialMember(user_id=user, role=common_pb2.MEMBER_ROLE_MEMBER) for user in members]),
            metadata=admin_md(), timeout=RPC_TIMEOUT).group.group_id

    def update_profile(self, group, owner, **fields):
        return self.groups.UpdateGroupProfile(group_pb2.UpdateGroupProfileRequest(
            group_id=group, update_mask=field_mask_pb2.FieldMask(paths=sorted(fields)),
            profile=common_pb2.GroupProfile(**fields)), metadata=user_md(owner), timeout=RPC_TIMEOUT).group

    def invite(self, group, owner, users):
        return self.members.InviteMembers(member_pb2.InviteMembersRequest(group_id=group, user_ids=list(users)),
                                          metadata=user_md(owner), timeout=RPC_TIMEOUT)

    def kick(self, group, owner, users):
        return self.members.KickMembers(member_pb2.KickMembersRequest(group_id=group, user_ids=list(users)),
                                        metadata=user_md(owner), timeout=RPC_TIMEOUT)

    def send(self, group, sender, text, client_id="", timeout=RPC_TIMEOUT, priority=0):
        return self.messages.SendGroupMessage(message_pb2.SendGroupMessageRequest(
            group_id=group, type="text", text=text, client_message_id=client_id, priority=priority),
            metadata=admin_md(operator=sender), timeout=timeout)

    # --- reads -------------------------------------------------------------------------------

    def group(self, group):
        found = self.groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[group]),
                                          metadata=admin_md(), timeout=RPC_TIMEOUT)
        assert [g.group_id for g in found.groups] == [group], found
        return found.groups[0]

    def member_ids(self, group):
        users, token = [], ""
        while True:
            page = self.members.ListMembers(member_pb2.ListMembersRequest(group_id=group, page_size=50,
                                                                          page_token=token),
                                            metadata=admin_md(), timeout=RPC_TIMEOUT)
            users += [member.user_id for member in page.members]
            if not page.next_page_token:
                return users
            token = page.next_page_token

    def history(self, group, reader):
        """Every stored message of the group, oldest first, as `reader` sees them."""
        messages, token = [], ""
        while True:
            page = self.messages.GetGroupMessages(message_pb2.GetGroupMessagesRequest(
                group_id=group, direction=message_pb2.HISTORY_DIRECTION_NEWER, page_size=50, page_token=token),
                metadata=admin_md(operator=reader), timeout=RPC_TIMEOUT)
            messages += page.messages
            if not page.next_page_token:
                return messages
            token = page.next_page_token

    def log(self, group):
        """The group's whole log (events and messages) from the backend firehose, oldest first."""
        stream = Stream(self, event_pb2.SubscribeRequest(from_oldest=True, group_ids=[group]), admin_md())
        try:
            return [item for item in stream.until_caught_up() if item.WhichOneof("item") != "caught_up"]
        finally:
            stream.cancel()

    def check(self, timeout=2):
        return self.health.Check(health_pb2.HealthCheckRequest(), timeout=timeout).status


class Stream(StreamReader):
    """A Subscribe call on `node` (or any server stream: `Stream(call=...)`)."""

    def __init__(self, node=None, request=None, metadata=None, call=None):
        super().__init__(call or node.events.Subscribe(request, metadata=metadata, timeout=120))


def body(item):
    kind = item.WhichOneof("item")
    return item.event if kind == "event" else item.message if kind == "message" else None


def position(item):
    """(group, sequence, event or message, event kind, id) of an item: equal for the same stored item."""
    if item.WhichOneof("item") == "event":
        return item.event.group_id, item.event.sequence, "event", item.event.kind, item.event.event_id
    return item.message.group_id, item.message.sequence, "message", 0, item.message.message_id


def is_rename_to(name):
    return lambda item: (item.WhichOneof("item") == "event" and item.event.kind == common_pb2.EVENT_KIND_GROUP_INFO_CHANGED
                         and item.event.group_name == name)


@pytest.fixture
def two_nodes(fresh_groupd):
    """Two nodes on one new database, and a Node (channel) to each."""
    a = fresh_groupd().start()
    b = fresh_groupd(database=a.database).start()
    nodes = Node(a), Node(b)
    yield nodes
    for node in nodes:
        node.close()


# --- 1. read-your-writes across nodes ------------------------------------------------------------

def test_a_write_on_one_node_is_read_at_once_on_the_other(two_nodes):
    a, b = two_nodes
    owner, carol, dan = uid("owner"), uid("carol"), uid("dan")
    group = a.create(owner, name="first")
    seen = b.group(group)
    assert (seen.profile.name, seen.owner_user_id, seen.member_count) == ("first", owner, 1)

    # B has read the group; each later change through either node shows on the other at once.
    for round_number in range(15):
        writer, reader = (a, b) if round_number % 2 == 0 else (b, a)
        name, intro = f"name-{round_number}", f"intro {round_number}"
        updated = writer.update_profile(group, owner, name=name, introduction=intro)
        assert updated.profile.name == name
        seen = reader.group(group)
        assert (seen.profile.name, seen.profile.introduction) == (name, intro), round_number
        assert seen.latest_sequence == updated.latest_sequence, round_number
        assert writer.group(group).profile.name == name

    assert b.member_ids(group) == [owner]
    a.invite(group, owner, [carol, dan])
    assert sorted(b.member_ids(group)) == sorted([owner, carol, dan])
    assert b.group(group).member_count == 3
    b.kick(group, owner, [carol])
    assert sorted(a.member_ids(group)) == sorted([owner, dan])
    assert a.group(group).member_count == 2
    a.kick(group, owner, [dan])
    assert b.member_ids(group) == [owner]
    assert b.group(group).member_count == 1

    # A message sent on one node is in the history read on the other.
    sent = a.send(group, owner, "hello from a")
    assert [(m.message_id, m.text) for m in b.history(group, owner)] == [(sent.message.message_id, "hello from a")]


# --- 2. events across nodes -----------------------------------------------------------------------

def test_streams_on_one_node_get_the_other_nodes_writes_in_order_once(two_nodes):
    a, b = two_nodes
    owner, bob, carol = uid("owner"), uid("bob"), uid("carol")
    group = a.create(owner, [bob])

    # Live streams on B: the backend firehose of the group, and bob's own stream.
    firehose_b = Stream(b, event_pb2.SubscribeRequest(group_ids=[group]), admin_md())
    bob_b = Stream(b, event_pb2.SubscribeRequest(), user_md(bob))
    # And a firehose on A, for B's writes.
    firehose_a = Stream(a, event_pb2.SubscribeRequest(group_ids=[group]), admin_md())
    for stream in (firehose_b, bob_b, firehose_a):
        assert [item.WhichOneof("item") for item in stream.until_caught_up()] == ["caught_up"]

    # Writes on A: 50 messages, a member in and out, a rename as the end marker.
    texts = [f"a-{n}" for n in range(50)]
    acked = [a.send(group, owner, text).message for text in texts[:25]]
    a.invite(group, owner, [carol])
    acked += [a.send(group, owner, text).message for text in texts[25:]]
    a.kick(group, owner, [carol])
    a.update_profile(group, owner, name="end-a")

    log = a.log(group)
    expected = [position(item) for item in log if body(item).sequence > 1]  # after the creation
    got = firehose_b.until(is_rename_to("end-a"))
    assert [position(item) for item in got] == expected
    assert [m.text for m in map(body, got) if isinstance(m, common_pb2.GroupMessage)] == texts
    assert [(m.sequence, m.message_id) for m in map(body, got) if isinstance(m, common_pb2.GroupMessage)] == \
        [(m.sequence, m.message_id) for m in acked]
    kinds = [item.event.kind for item in got if item.WhichOneof("item") == "event"]
    assert common_pb2.EVENT_KIND_MEMBER_INVITED in kinds and common_pb2.EVENT_KIND_MEMBER_KICKED in kinds
    sequences = [body(item).sequence for item in got]
    assert sequences == list(range(2, 2 + len(sequences)))

    # bob (a member throughout) gets every message once, in order, with the member changes.
    mine = bob_b.until(is_rename_to("end-a"))
    assert [position(item) for item in mine] == [p for p in expected if p in {position(i) for i in mine}]
    assert len({position(item) for item in mine}) == len(mine)
    assert [item.message.text for item in mine if item.WhichOneof("item") == "message"] == texts
    mine_kinds = [item.event.kind for item in mine if item.WhichOneof("item") == "event"]
    assert mine_kinds[0] == common_pb2.EVENT_KIND_MEMBER_INVITED
    assert common_pb2.EVENT_KIND_MEMBER_KICKED in mine_kinds

    # The firehose on A got the same items (written on its own node) ...
    assert [position(item) for item in firehose_a.until(is_rename_to("end-a"))] == expected
    # ... and now B's writes.
    texts_b = [f"b-{n}" for n in range(30)]
    for text in texts_b:
        b.send(group, bob, text)
    b.invite(group, owner, [carol])
    b.update_profile(group, owner, name="end-b")
    log = b.log(group)
    expected_b = [position(item) for item in log][len(expected) + 1:]
    got_a = firehose_a.until(is_rename_to("end-b"))
    assert [position(item) for item in got_a] == expected_b
    assert [item.message.text for item in got_a if item.WhichOneof("item") == "message"] == texts_b
    # And B's own streams saw them once too.
    assert [position(item) for item in firehose_b.until(is_rename_to("end-b"))] == expected_b
    for stream in (firehose_b, bob_b, firehose_a):
        assert stream.error is None, stream.error
        stream.cancel()


def test_a_cursor_from_one_node_resumes_on_the_other(two_nodes):
    a, b = two_nodes
    owner, bob = uid("owner"), uid("bob")
    group = b.create(owner, [bob])
    for n in range(20):
        b.send(group, owner, f"first-{n}")

    # bob reads 12 items on B (the creation and 11 messages), then goes away.
    on_b = Stream(b, event_pb2.SubscribeRequest(from_oldest=True), user_md(bob))
    first = on_b.take(12)
    on_b.cancel()
    assert all(item.WhichOneof("item") != "caught_up" for item in first)
    cursor = first[-1].cursor

    # More writes on B meanwhile, then bob resumes on A with B's cursor.
    for n in range(10):
        b.send(group, owner, f"second-{n}")
    on_a = Stream(a, event_pb2.SubscribeRequest(cursor=cursor), user_md(bob))
    backlog = on_a.until_caught_up()
    assert backlog[-1].WhichOneof("item") == "caught_up"
    # Live on A, while B writes.
    for n in range(10):
        b.send(group, owner, f"third-{n}")
    b.update_profile(group, owner, name="end")
    live = on_a.until(is_rename_to("end"))
    on_a.cancel()

    received = [item for item in first + backlog + live if item.WhichOneof("item") != "caught_up"]
    log = a.log(group)
    assert [position(item) for item in received] == [position(item) for item in log]
    assert [body(item).sequence for item in received] == list(range(1, 43))  # creation, 40 messages, rename
    texts = [item.message.text for item in received if item.WhichOneof("item") == "message"]
    assert texts == [f"first-{n}" for n in range(20)] + [f"second-{n}" for n in range(10)] + \
        [f"third-{n}" for n in range(10)]


# --- 3. concurrent writes to one group through both nodes ---------------------------------------

def test_concurrent_writes_through_both_nodes_keep_one_gap_free_sequence(two_nodes):
    a, b = two_nodes
    owner = uid("owner")
    senders = [uid(f"s{n}") for n in range(8)]
    group = a.create(owner, senders, group_type=PUBLIC,
                     settings=common_pb2.GroupSettings(join_option=common_pb2.JOIN_OPTION_ANY))
    per_thread, lock = 50, threading.Lock()
    acked, joined, failures = {}, [], []

    def sender(node, index):
        try:
            for n in range(per_thread):
                client_id = f"{index}-{n}"
                response = node.send(group, senders[index], client_id, client_id=client_id)
                assert response.result == SENT and not response.deduplicated, response
                with lock:
                    acked[client_id] = (response.message.sequence, response.message.message_id)
        except BaseException as error:  # reported by the main thread
            failures.append(error)

    def joiner(node, prefix):
        try:
            for n in range(15):
                user = f"{prefix}-{n}"
                node.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=group),
                                       metadata=admin_md(operator=user), timeout=RPC_TIMEOUT)
                with lock:
                    joined.append(user)
        except BaseException as error:
            failures.append(error)

    # 8 senders (4 through each node, 2 x 200 messages) and a joiner through each node.
    threads = [threading.Thread(target=sender, args=(a if index % 2 == 0 else b, index)) for index in range(8)]
    threads += [threading.Thread(target=joiner, args=(node, uid(f"joiner{n}"))) for n, node in enumerate((a, b))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "writers still running after 120 s"
    assert not failures, failures
    assert len(acked) == 8 * per_thread and len(joined) == 30

    # The whole log, read on each node: sequences 1..n, every message once, every ack in it.
    latest = a.group(group).latest_sequence
    for node in (a, b):
        log = node.log(group)
        assert [body(item).sequence for item in log] == list(range(1, latest + 1))
        stored = {}
        for item in log:
            if item.WhichOneof("item") == "message":
                message = item.message
                assert message.client_message_id not in stored, f"duplicated {message.client_message_id}"
                stored[message.client_message_id] = (message.sequence, message.message_id)
        assert stored == acked
        history = node.history(group, owner)
        assert {m.client_message_id: (m.sequence, m.message_id) for m in history} == acked
        assert len(history) == len(acked)
        assert [m.sequence for m in history] == sorted(m.sequence for m in history)
        members = node.member_ids(group)
        assert len(members) == len(set(members)) == 1 + len(senders) + len(joined)
        assert set(joined) <= set(members)
        assert node.group(group).member_count == len(members)
    assert latest == 1 + len(acked) + len(joined)  # the creation, the messages, one event per join


# --- 4. a node killed mid-write ------------------------------------------------------------------

def test_a_rooms_audience_is_the_rooms_on_every_node(two_nodes):
    """AVChatRoom audiences live in memory, and every node follows the rooms' events: a viewer
    who joined through one node is counted, found, heard and muted through the other."""
    a, b = two_nodes
    host = uid("host")
    viewers = [uid("viewer") for _ in range(5)]
    room = a.create(host, group_type=common_pb2.GROUP_TYPE_AV_CHAT_ROOM, name="live")
    for n, viewer in enumerate(viewers):
        node = a if n % 2 == 0 else b
        node.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=room), metadata=user_md(viewer), timeout=RPC_TIMEOUT)
    # Each join was answered before the read, on whichever node: both count all five.
    assert a.group(room).member_count == 6 and b.group(room).member_count == 6
    found = b.members.GetMembersInfo(member_pb2.GetMembersInfoRequest(group_id=room, user_ids=viewers),
                                     metadata=admin_md(), timeout=RPC_TIMEOUT)
    assert [r.result for r in found.results] == [common_pb2.MEMBER_RESULT_CODE_SUCCESS] * 5
    # A viewer who joined on A speaks through B (B knows them as a member).
    assert b.send(room, viewers[0], "hello").result == SENT
    # Muted through B, refused through A.
    muted = b.members.MuteMembers(member_pb2.MuteMembersRequest(group_id=room, user_ids=[viewers[2]], duration_seconds=120),
                                  metadata=user_md(host), timeout=RPC_TIMEOUT)
    assert muted.results[0].result == common_pb2.MEMBER_RESULT_CODE_SUCCESS
    support.expect_error(lambda: a.send(room, viewers[2], "let me speak"), grpc.StatusCode.PERMISSION_DENIED, "MEMBER_MUTED")
    # A viewer who joined on B leaves through A: gone on both.
    a.members.QuitGroup(member_pb2.QuitGroupRequest(group_id=room), metadata=user_md(viewers[1]), timeout=RPC_TIMEOUT)
    assert a.group(room).member_count == 5 and b.group(room).member_count == 5
    gone = b.members.GetMembersInfo(member_pb2.GetMembersInfoRequest(group_id=room, user_ids=[viewers[1]]),
                                    metadata=admin_md(), timeout=RPC_TIMEOUT)
    assert gone.results[0].result == common_pb2.MEMBER_RESULT_CODE_NOT_MEMBER


def test_a_rooms_messages_and_rate_are_the_rooms_on_every_node(fresh_groupd):
    """AVChatRoom messages keep no history: a node relays each through the database, so a
    viewer on another node hears it, and every node counts it against the room's rate."""
    server_a = fresh_groupd(limits={"av_chat_room_messages_per_second": 3}).start()
    server_b = fresh_groupd(database=server_a.database, limits={"av_chat_room_messages_per_second": 3}).start()
    a, b = Node(server_a), Node(server_b)
    try:
        host, viewer = uid("host"), uid("viewer")
        room = a.create(host, group_type=common_pb2.GROUP_TYPE_AV_CHAT_ROOM, name="live")
        b.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=room), metadata=user_md(viewer), timeout=RPC_TIMEOUT)
        stream = Stream(b, event_pb2.SubscribeRequest(group_ids=[room]), admin_md())
        try:
            stream.until_caught_up()
            # A full bucket of 3 through A: all sent, and a stream on B hears each, in order.
            sent = [a.send(room, host, f"a{n}") for n in range(3)]
            assert [r.result for r in sent] == [SENT] * 3
            heard = stream.until(lambda item: item.WhichOneof("item") == "message" and item.message.text == "a2")
            assert [item.message.text for item in heard if item.WhichOneof("item") == "message"] == ["a0", "a1", "a2"]
            # B counted them against the room: 3 more at once through B do not all pass (a
            # node with a bucket of its own would send all 3).
            through_b = [b.send(room, host, f"b{n}").result for n in range(3)]
            assert through_b.count(message_pb2.SEND_RESULT_SHED) >= 1, through_b
            # Once B has relayed a message of A, a retry of it through B answers the first one.
            first = a.send(room, host, "once", client_id="c-1", priority=common_pb2.MESSAGE_PRIORITY_HIGH)
            stream.until(lambda item: item.WhichOneof("item") == "message" and item.message.text == "once")
            retry = b.send(room, host, "once", client_id="c-1", priority=common_pb2.MESSAGE_PRIORITY_HIGH)
            assert retry.deduplicated and retry.message.message_id == first.message.message_id
        finally:
            stream.cancel()
    finally:
        a.close()
        b.close()


def test_acknowledged_writes_of_a_killed_node_are_on_the_other(fresh_groupd):
    server_a = fresh_groupd().start()
    server_b = fresh_groupd(database=server_a.database).start()
    a, b = Node(server_a), Node(server_b)
    owner = uid("owner")
    senders = [uid(f"s{n}") for n in range(4)]
    group = b.create(owner, senders)
    kill_after = 300
    lock = threading.Lock()
    acked, sent = {}, {}
    kill_moment = threading.Event()

    def writer(index):
        # A channel of its own per writer, so several sends are in flight at the kill.
        node = Node(server_a)
        try:
            for n in range(100_000):
                client_id = f"w{index}-{n}"
                with lock:
                    sent[client_id] = senders[index]
                try:
                    response = node.send(group, senders[index], client_id, client_id=client_id)
                except grpc.RpcError:
                    return
                with lock:
                    acked[client_id] = (response.message.sequence, response.message.message_id)
                    if len(acked) >= kill_after:
                        kill_moment.set()
        finally:
            node.close()

    threads = [threading.Thread(target=writer, args=(index,)) for index in range(len(senders))]
    for thread in threads:
        thread.start()
    try:
        assert kill_moment.wait(timeout=60), f"only {len(acked)} acks in 60 s"
        server_a.signal(signal.SIGKILL)
        server_a.wait(timeout=30)
    finally:
        if server_a.process.poll() is None:
            server_a.signal(signal.SIGKILL)
        for thread in threads:
            thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    with lock:
        acked_at_kill = dict(acked)
    assert len(acked_at_kill) >= kill_after

    # On B: every acknowledged message, once, as acknowledged; a gap-free log.
    history = b.history(group, owner)
    stored = {}
    for message in history:
        assert message.client_message_id not in stored, f"duplicated {message.client_message_id}"
        stored[message.client_message_id] = (message.sequence, message.message_id)
    missing = sorted(set(acked_at_kill) - set(stored))
    assert not missing, f"{len(missing)} acknowledged messages missing on B, e.g. {missing[:5]}"
    assert all(stored[client_id] == value for client_id, value in acked_at_kill.items())
    assert [body(item).sequence for item in b.log(group)] == list(range(1, len(history) + 2))

    # B goes on serving writes: the sends A never acknowledged, retried on B with their client
    # ids, end up stored once (whether A committed them or not), and new messages.
    for client_id, sender_id in sorted(sent.items()):
        if client_id not in acked_at_kill:
            response = b.send(group, sender_id, client_id, client_id=client_id)
            assert response.deduplicated == (client_id in stored), client_id
            acked[client_id] = (response.message.sequence, response.message.message_id)
    for n in range(20):
        response = b.send(group, owner, f"after-{n}", client_id=f"after-{n}")
        assert response.result == SENT and not response.deduplicated
        acked[f"after-{n}"] = (response.message.sequence, response.message.message_id)
    final = {m.client_message_id: (m.sequence, m.message_id) for m in b.history(group, owner)}
    assert final == acked
    assert b.check() == SERVING
    unacked = len(sent) - len(acked_at_kill)
    print(f"\nkilled A after {len(acked_at_kill)} acks; {unacked} sends in flight, "
          f"{len(set(stored) - set(acked_at_kill))} of them committed without an ack")
    a.close()
    b.close()


def test_a_node_killed_between_its_commit_and_its_doorbell_loses_no_event_on_the_other(fresh_groupd, tmp_path):
    """Node A commits a message and is SIGKILLed before its doorbell goes out (the server kills
    itself there once GROUPD_TEST_DIE_BEFORE_DOORBELL names a file that exists): B's streams get
    the message anyway, from B's poll of the heads, once and in order; B serves the group on."""
    trigger = tmp_path / "die-before-doorbell"
    server_a = fresh_groupd()
    server_a.environment["GROUPD_TEST_DIE_BEFORE_DOORBELL"] = str(trigger)
    server_a.start()
    server_b = fresh_groupd(database=server_a.database).start()
    a, b = Node(server_a), Node(server_b)
    owner, bob = uid("owner"), uid("bob")
    group = a.create(owner, [bob])
    firehose = Stream(b, event_pb2.SubscribeRequest(group_ids=[group]), admin_md())
    bob_b = Stream(b, event_pb2.SubscribeRequest(), user_md(bob))
    for stream in (firehose, bob_b):
        assert [item.WhichOneof("item") for item in stream.until_caught_up()] == ["caught_up"]
    try:
        # With the doorbell: B's streams follow A's writes.
        before = a.send(group, owner, "before", client_id="before").message
        is_message = lambda text: lambda item: item.WhichOneof("item") == "message" and item.message.text == text
        assert [body(item).sequence for item in firehose.until(is_message("before"))] == [before.sequence]
        assert [body(item).sequence for item in bob_b.until(is_message("before"))] == [before.sequence]

        # The next commit of A is its last: it dies after COMMIT, before the doorbell.
        trigger.touch()
        with pytest.raises(grpc.RpcError) as caught:
            a.send(group, owner, "last", client_id="last")
        assert caught.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL), caught.value
        assert server_a.wait(timeout=30) == -signal.SIGKILL
        assert "killing this process between a commit and its doorbell" in server_a.log.read_text()

        # B delivers the message A committed (no doorbell rang for it), after "before", once.
        for stream in (firehose, bob_b):
            got = stream.until(is_message("last"))
            assert [body(item).sequence for item in got] == [before.sequence + 1]
            assert got[-1].message.sender_user_id == owner
        assert [(m.text, m.sequence) for m in b.history(group, owner)] == [("before", before.sequence), ("last", before.sequence + 1)]

        # B serves on: a retry of the unacknowledged send is a duplicate, a new one is sent and
        # reaches both streams.
        retried = b.send(group, owner, "last", client_id="last")
        assert retried.deduplicated and retried.message.sequence == before.sequence + 1
        after = b.send(group, owner, "after").message
        for stream in (firehose, bob_b):
            assert [body(item).sequence for item in stream.until(is_message("after"))] == [after.sequence]
            assert stream.error is None, stream.error
            stream.cancel()
    finally:
        a.close()
        b.close()


# --- 5. readiness while the database is down ----------------------------------------------------

def fails_fast_with_store_unavailable(call, deadline_seconds=5.0):
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as caught:
        call(deadline_seconds)
    elapsed = time.monotonic() - started
    error = caught.value
    assert error.code() == grpc.StatusCode.UNAVAILABLE, (error.code(), error.details(), elapsed)
    info = error_info(error)
    assert info is not None and info.domain == "groupd" and info.reason == "STORE_UNAVAILABLE", (info, error.details())
    assert elapsed < deadline_seconds / 2, f"answered after {elapsed:.2f} s of a {deadline_seconds} s deadline"
    return elapsed


def test_health_and_calls_follow_the_database(own_postgres, fresh_groupd):
    server = fresh_groupd(database=own_postgres.create_database()).start()
    node = Node(server)
    owner = uid("owner")
    group = node.create(owner)
    assert node.check() == SERVING
    watch = Stream(call=node.health.Watch(health_pb2.HealthCheckRequest(), timeout=120))
    assert watch.next().status == SERVING

    stopped = time.monotonic()
    own_postgres.stop_server(mode="immediate")
    # The health Watch stream reports the change: an event, waited on with a deadline.
    assert watch.next(timeout=10).status == NOT_SERVING
    noticed = time.monotonic()
    assert node.check() == NOT_SERVING
    elapsed = [
        fails_fast_with_store_unavailable(lambda t: node.groups.CreateGroup(group_pb2.CreateGroupRequest(
            group_id=uid("g"), type=WORK, owner_user_id=owner, profile=common_pb2.GroupProfile(name="down")),
            metadata=admin_md(), timeout=t)),
        fails_fast_with_store_unavailable(lambda t: node.send(group, owner, "down", timeout=t)),
        fails_fast_with_store_unavailable(lambda t: node.groups.GetGroupsInfo(
            group_pb2.GetGroupsInfoRequest(group_ids=[group]), metadata=admin_md(), timeout=t))]
    assert node.check() == NOT_SERVING

    restarted = time.monotonic()
    own_postgres.start_server()
    assert watch.next(timeout=20).status == SERVING
    recovered = time.monotonic()
    assert node.check() == SERVING
    print(f"\nNOT_SERVING {noticed - stopped:.2f} s after the stop; failed calls answered in "
          f"{', '.join(f'{e * 1000:.0f}' for e in elapsed)} ms; SERVING {recovered - restarted:.2f} s after the restart")
    watch.cancel()
    # Serving again: writes and reads succeed, and what was written before the outage is there.
    response = node.send(group, owner, "back")
    assert response.result == SENT
    other = node.create(owner, name="after")
    assert node.group(other).profile.name == "after"
    assert [m.text for m in node.history(group, owner)] == ["back"]
    node.close()


class Writers:
    """Threads sending to `group`, one per (server, sender), each on a channel of its own: a failed
    send is retried with its client id until acknowledged (also after stop(), so every message that
    may be stored is known). Records every acknowledgement (`acked`: client id -> (sequence,
    message id)) and every failure (`failures`: code, seconds, ErrorInfo, client id)."""

    def __init__(self, group, writers, deadline):
        self.group, self.writers, self.deadline = group, writers, deadline
        self.lock = threading.Condition()
        self.acked, self.failures = {}, []
        self.stopping = threading.Event()
        # Daemon threads: a test that fails with the store down leaves them retrying.
        self.threads = [threading.Thread(target=self.run, args=(index,), daemon=True) for index in range(len(writers))]

    def start(self):
        for thread in self.threads:
            thread.start()
        return self

    def run(self, index):
        server, sender = self.writers[index]
        node = Node(server)
        try:
            n, retrying = 0, None
            while retrying or not self.stopping.is_set():
                client_id = retrying or f"w{index}-{n}"
                started = time.monotonic()
                try:
                    response = node.send(self.group, sender, client_id, client_id=client_id, timeout=self.deadline)
                except grpc.RpcError as error:
                    with self.lock:
                        self.failures.append((error.code(), time.monotonic() - started, error_info(error), client_id))
                    retrying = client_id
                    # Pacing while the store is down (failures answer at once), not a wait for a state.
                    self.stopping.wait(0.02)
                    continue
                retrying, n = None, n + 1
                with self.lock:
                    self.acked[client_id] = (response.message.sequence, response.message.message_id)
                    self.lock.notify_all()
        finally:
            node.close()

    def wait_acks(self, count, timeout=60):
        """Returns once `count` sends were acknowledged in all (fails after `timeout` seconds)."""
        with self.lock:
            assert self.lock.wait_for(lambda: len(self.acked) >= count, timeout=timeout), \
                f"{len(self.acked)} of {count} acks in {timeout} s; failures: {self.failures[-3:]}"
            return len(self.acked)

    def stop(self):
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=60)
        assert not any(thread.is_alive() for thread in self.threads)

    def check_failures(self):
        """Every failed call answered within its deadline, UNAVAILABLE with the store's reason."""
        for code, elapsed, info, client_id in self.failures:
            assert code == grpc.StatusCode.UNAVAILABLE, (code, info, client_id)
            assert info is not None and info.reason in ("STORE_UNAVAILABLE", "STORE_TIMEOUT"), (info, client_id)
            assert elapsed < self.deadline, (elapsed, client_id)

    def check_stored(self, node, reader):
        """On `node`: every acknowledged message once, as acknowledged, nothing else; one gap-free log."""
        history = node.history(self.group, reader)
        stored = {}
        for message in history:
            assert message.client_message_id not in stored, f"duplicated {message.client_message_id}"
            stored[message.client_message_id] = (message.sequence, message.message_id)
        assert stored == self.acked
        assert [body(item).sequence for item in node.log(self.group)] == list(range(1, len(history) + 2))


def test_postgres_restarted_under_load_through_two_nodes_loses_nothing_acknowledged(own_postgres, fresh_groupd):
    """PostgreSQL stopped (fast shutdown: every session ended) and started again while writers send
    through both nodes: every call answers within its deadline, those that fail with UNAVAILABLE;
    both nodes report NOT_SERVING, then SERVING by themselves; every acknowledged message is stored
    once, as acknowledged, under a gap-free sequence; a send retried with its client id after a
    failure is stored once."""
    database = own_postgres.create_database()
    servers = fresh_groupd(database=database).start(), fresh_groupd(database=database).start()
    a, b = Node(servers[0]), Node(servers[1])
    owner = uid("owner")
    senders = [uid(f"s{n}") for n in range(4)]
    group = a.create(owner, senders)
    watches = [Stream(call=node.health.Watch(health_pb2.HealthCheckRequest(), timeout=120)) for node in (a, b)]
    for watch in watches:
        assert watch.next().status == SERVING
    writers = Writers(group, [(servers[n % 2], sender) for n, sender in enumerate(senders)], deadline=5.0).start()
    down = False
    try:
        before = writers.wait_acks(200)
        own_postgres.stop_server(mode="fast")
        down = True
        for watch in watches:
            status = watch.next(timeout=20).status
            assert status == NOT_SERVING, (status, watch.error)
        own_postgres.start_server()
        down = False
        for watch in watches:
            status = watch.next(timeout=30).status
            assert status == SERVING, (status, watch.error)
        writers.wait_acks(len(writers.acked) + 100)
    except BaseException:
        # The failure above is the one to report: PostgreSQL back (the writers' retries end) and
        # the writers stopped without a check of their own that would hide it.
        writers.stopping.set()
        if down:
            own_postgres.start_server()
        raise
    finally:
        for watch in watches:
            watch.cancel()
    writers.stop()
    assert writers.failures, "no call failed while PostgreSQL was down"
    writers.check_failures()
    for node in (a, b):
        writers.check_stored(node, owner)
        assert node.check() == SERVING
    print(f"\n{before} acks before the stop, {len(writers.acked)} in all; {len(writers.failures)} failed calls, "
          f"answered in at most {max(e for _, e, _, _ in writers.failures) * 1000:.0f} ms")
    a.close()
    b.close()


class CutNetwork:
    """A network namespace for one groupd node, joined to this one by two veth pairs: `db` (the
    node's traffic to PostgreSQL) and `api` (the clients' traffic to the node). cut() sets the
    host's end of `db` down: the node's packets to PostgreSQL and PostgreSQL's to it vanish (no
    reset, no refusal), while the clients still reach the node; mend() sets it up again."""

    def __init__(self):
        tag = os.getpid() % 10_000
        net = 20 + os.getpid() % 200
        self.name = f"groupd-cut-{tag}"
        self.db_host, self.db_node = f"10.{net}.1.1", f"10.{net}.1.2"
        self.api_host, self.api_node = f"10.{net}.2.1", f"10.{net}.2.2"
        self.links = [(f"gdc{tag}h", f"gdc{tag}n", self.db_host, self.db_node),
                      (f"gda{tag}h", f"gda{tag}n", self.api_host, self.api_node)]

    @staticmethod
    def ip(*arguments, namespace=None):
        command = (["ip", "netns", "exec", namespace] if namespace else []) + ["ip", *arguments]
        result = subprocess.run(command, capture_output=True, text=True)
        assert result.returncode == 0, (command, result.stderr)

    def create(self):
        self.ip("netns", "add", self.name)
        self.ip("link", "set", "lo", "up", namespace=self.name)
        for host_end, node_end, host_address, node_address in self.links:
            self.ip("link", "add", host_end, "type", "veth", "peer", "name", node_end)
            self.ip("link", "set", node_end, "netns", self.name)
            self.ip("addr", "add", f"{host_address}/24", "dev", host_end)
            self.ip("link", "set", host_end, "up")
            self.ip("addr", "add", f"{node_address}/24", "dev", node_end, namespace=self.name)
            self.ip("link", "set", node_end, "up", namespace=self.name)
        return self

    def cut(self):
        self.ip("link", "set", self.links[0][0], "down")

    def mend(self):
        self.ip("link", "set", self.links[0][0], "up")

    def delete(self):
        for host_end, *_ in self.links:
            subprocess.run(["ip", "link", "del", host_end], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


class NamespacedGroupd(support.Groupd):
    """A groupd run inside `network`'s namespace, listening on its `api` address, with a statement
    timeout of 1 s (so its side gives up on an unanswered statement after 11 s)."""

    def __init__(self, workdir, database, network):
        super().__init__(workdir, database=database)
        self.network = network
        text = self.config.read_text()
        self.config.write_text(text.replace("  host: 127.0.0.1\n", f"  host: {network.api_node}\n", 1)
                               .replace("statement_timeout_ms: 5000", "statement_timeout_ms: 1000"))

    @property
    def address(self):
        return f"{self.network.api_node}:{self.port}"

    def start(self):
        log = open(self.log, "ab")
        self.process = subprocess.Popen(
            ["ip", "netns", "exec", self.network.name, str(support.GROUPD_BIN), "serve", "--config", str(self.config)],
            stdout=log, stderr=subprocess.STDOUT, env=self.environment)
        log.close()
        wait_serving(self)
        return self


def test_a_node_cut_from_postgres_fails_fast_the_other_serves_both_recover(fresh_groupd, tmp_path):
    """One node loses PostgreSQL without a close while it writes (its packets dropped in a network
    namespace): its calls fail with UNAVAILABLE within their deadline and it reports NOT_SERVING; the
    other node keeps writing the same group (a transaction the cut node left open on the server is
    ended, with its locks, after the node's statement timeout); when the network comes back the cut
    node serves again by itself, and nothing acknowledged through either node is lost."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 (a network namespace and veth pairs)")
    support.postgres_cluster()  # puts scripts/ (pg_cluster) on sys.path
    from pg_cluster import PostgresCluster

    network = CutNetwork()
    cluster, cut_node, writers = None, None, None
    try:
        network.create()
        cluster = PostgresCluster(settings={"listen_addresses": f"127.0.0.1,{network.db_host}"}).start()
        with (cluster.data_dir / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {network.db_node}/32 trust\n")
        cluster.psql("SELECT pg_reload_conf()")
        database = cluster.create_database()
        (tmp_path / "a").mkdir()
        cut_node = NamespacedGroupd(tmp_path / "a", database.replace("@127.0.0.1:", f"@{network.db_host}:"), network)
        cut_node.start()
        other = fresh_groupd(database=database).start()
        a, b = Node(cut_node), Node(other)
        owner = uid("owner")
        senders = [uid(f"s{n}") for n in range(3)]
        group = b.create(owner, senders)
        watch = Stream(call=a.health.Watch(health_pb2.HealthCheckRequest(), timeout=300))
        assert watch.next().status == SERVING
        # Writers on the cut node only (the first node to lose PostgreSQL mid-transaction); the
        # other node's sends below go to the same group. A cut node's first failure may wait for
        # it to give up on its connection (11 s with its 1 s statement timeout).
        writers = Writers(group, [(cut_node, sender) for sender in senders], deadline=20.0).start()
        writers.wait_acks(100)
        network.cut()
        assert watch.next(timeout=30).status == NOT_SERVING
        with writers.lock:
            assert writers.lock.wait_for(lambda: len(writers.failures) >= 3, timeout=30), writers.failures
        for n in range(5):
            response = b.send(group, owner, f"b-cut-{n}", client_id=f"b-cut-{n}", timeout=30)
            with writers.lock:
                writers.acked[f"b-cut-{n}"] = (response.message.sequence, response.message.message_id)
        assert b.check() == SERVING
        network.mend()
        assert watch.next(timeout=60).status == SERVING
        watch.cancel()
        writers.wait_acks(len(writers.acked) + 50)
        writers.stop()
        writers.check_failures()
        for node in (a, b):
            writers.check_stored(node, owner)
        print(f"\n{len(writers.acked)} acks; {len(writers.failures)} failed calls on the cut node, answered in at "
              f"most {max(e for _, e, _, _ in writers.failures) * 1000:.0f} ms")
        a.close()
        b.close()
    finally:
        if writers is not None:
            writers.stopping.set()
        if cut_node is not None:
            cut_node.stop()
        if cluster is not None:
            cluster.stop()
        network.delete()


# --- 6. two nodes starting at once on an empty database ----------------------------------------

def migration_ids():
    """The migrations groupd ships (PostgresSchema.migrations)."""
    source = (support.ROOT / "Sources/GroupStorePostgres/PostgresSchema.swift").read_text()
    line = re.search(r"static let migrations: \[\(id: String, sql: String\)\] = \[(.*?)\]", source, re.S)
    assert line, "PostgresSchema.migrations not found"
    ids = re.findall(r'\("([^"]+)",', line.group(1))
    assert ids
    return ids


def launch(server):
    """Starts the process without waiting for it to listen (Groupd.start waits)."""
    log = open(server.log, "ab")
    server.process = subprocess.Popen([str(support.GROUPD_BIN), "serve", "--config", str(server.config)],
                                      stdout=log, stderr=subprocess.STDOUT)
    log.close()


def wait_serving(server, timeout=30):
    """One health Check that waits for the port to accept (gRPC's wait_for_ready: the channel
    reports when it connects) and must answer SERVING."""
    with grpc.insecure_channel(server.address) as channel:
        try:
            status = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=timeout, wait_for_ready=True).status
        except grpc.RpcError as error:
            raise AssertionError(f"groupd not serving within {timeout} s ({error.code()}; exit code "
                                 f"{server.process.poll()}):\n{server.log.read_text()}") from None
    assert status == SERVING, status


@pytest.mark.parametrize("round_number", range(3))
def test_two_nodes_starting_at_once_migrate_once(fresh_groupd, round_number):
    first = fresh_groupd()  # on a new empty database
    second = fresh_groupd(database=first.database)
    launch(first)
    launch(second)
    wait_serving(first)
    wait_serving(second)

    a, b = Node(first), Node(second)
    owner = uid("owner")
    group = a.create(owner, name="from a")
    assert b.group(group).profile.name == "from a"
    b.update_profile(group, owner, name="from b")
    assert a.group(group).profile.name == "from b"
    a.close()
    b.close()

    expected = migration_ids()
    database = urlsplit(first.database).path.lstrip("/")
    rows = support.postgres_cluster().psql("SELECT id FROM groupd_migrations ORDER BY id", database=database)
    assert sorted(rows.split()) == sorted(expected), rows
    count = support.postgres_cluster().psql("SELECT count(*), count(DISTINCT id) FROM groupd_migrations",
                                            database=database)
    assert count.strip() == f"{len(expected)}|{len(expected)}"
    for server in (first, second):
        assert "migrations=" + ",".join(expected) in server.log.read_text(), server.log.read_text()
