"""Durability under SIGKILL: groupd is killed while clients write concurrently
through grpcio (messages with client ids, joins, creations), once a random number of the round's
writes are acknowledged, then restarted on the same data, and every acknowledged write is read
back: nothing lost, nothing duplicated, sequences without gaps, member counts equal to member
lists. Unacknowledged messages are sent again with
their client ids after the restart and must end up stored exactly once.

CRASH_ROUNDS sets the number of kills (default 10; `make bench-crash` runs 100).
"""
import os
import random
import signal
import threading

import grpc

from support import admin_md
from groupd.v1 import (common_pb2, event_pb2, event_pb2_grpc, group_pb2, group_pb2_grpc, member_pb2,
                       member_pb2_grpc, message_pb2, message_pb2_grpc)

ROUNDS = int(os.environ.get("CRASH_ROUNDS", "10"))
GROUP = "crash"
SENDERS = [f"s{n}" for n in range(8)]


class Ledger:
    """What clients sent and what groupd acknowledged, across rounds."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sent = {}        # client id -> sender
        self.acked = {}       # client id -> (sequence, message id)
        self.acked_first = set()  # client ids acknowledged before any kill cut them off
        self.joins_acked = set()
        self.creates_acked = set()
        self.round_acks = 0
        self.kill_after = 0
        self.kill_moment = threading.Event()

    def start_round(self, kill_after):
        """The kill comes once `kill_after` writes of the round are acknowledged."""
        with self.lock:
            self.round_acks = 0
            self.kill_after = kill_after
            self.kill_moment.clear()

    def count(self):
        """One more write of the round acknowledged (with the lock held)."""
        self.round_acks += 1
        if self.round_acks >= self.kill_after:
            self.kill_moment.set()

    def ack(self, client_id, message):
        with self.lock:
            earlier = self.acked.get(client_id)
            assert earlier is None or earlier == (message.sequence, message.message_id), (client_id, earlier, message)
            self.acked[client_id] = (message.sequence, message.message_id)
            self.count()


def write_until_killed(address, ledger, round_number, stop):
    """Three kinds of writers, each a thread with its own connection, until the server goes away."""
    md = admin_md()

    def writer(call, acknowledge):
        """Calls `call(channel, n)` for n = 0, 1, … and `acknowledge(n, response)` after each answer."""
        with grpc.insecure_channel(address) as channel:
            n = 0
            while not stop.is_set():
                try:
                    response = call(channel, n)
                except grpc.RpcError:
                    return
                acknowledge(n, response)
                n += 1

    def send(index):
        sender_id = SENDERS[index]

        def call(channel, n):
            client_id = f"r{round_number}-w{index}-{n}"
            with ledger.lock:
                ledger.sent[client_id] = sender_id
            return message_pb2_grpc.MessageServiceStub(channel).SendGroupMessage(
                message_pb2.SendGroupMessageRequest(group_id=GROUP, client_message_id=client_id, text=client_id),
                metadata=md + [("x-operator-id", sender_id)], timeout=10)

        writer(call, lambda n, response: ledger.ack(response.message.client_message_id, response.message))

    def joiner(n):
        return f"j{round_number}-{n}"

    def created(n):
        return f"c{round_number}-{n}"

    def join(channel, n):
        return member_pb2_grpc.MemberServiceStub(channel).JoinGroup(
            member_pb2.JoinGroupRequest(group_id=GROUP), metadata=md + [("x-operator-id", joiner(n))], timeout=10)

    def create(channel, n):
        group_id = created(n)
        return group_pb2_grpc.GroupServiceStub(channel).CreateGroup(group_pb2.CreateGroupRequest(
            group_id=group_id, type=common_pb2.GROUP_TYPE_WORK, owner_user_id="owner",
            profile=common_pb2.GroupProfile(name=group_id)), metadata=md, timeout=10)

    def acknowledged(into, name):
        def record(n, _):
            with ledger.lock:
                into.add(name(n))
                ledger.count()
        return record

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(SENDERS))]
    threads.append(threading.Thread(target=writer, args=(join, acknowledged(ledger.joins_acked, joiner))))
    threads.append(threading.Thread(target=writer, args=(create, acknowledged(ledger.creates_acked, created))))
    for thread in threads:
        thread.start()
    return threads


def history(channel, md):
    """Every stored message of the group, oldest first."""
    stub = message_pb2_grpc.MessageServiceStub(channel)
    messages, token = [], ""
    while True:
        page = stub.GetGroupMessages(message_pb2.GetGroupMessagesRequest(
            group_id=GROUP, direction=message_pb2.HISTORY_DIRECTION_NEWER, page_size=100, page_token=token),
            metadata=md + [("x-operator-id", "owner")])
        messages += page.messages
        if not page.next_page_token:
            return messages
        token = page.next_page_token


def members(channel, md):
    stub = member_pb2_grpc.MemberServiceStub(channel)
    users, token = [], ""
    while True:
        page = stub.ListMembers(member_pb2.ListMembersRequest(group_id=GROUP, page_size=50, page_token=token), metadata=md)
        users += [m.user_id for m in page.members]
        if not page.next_page_token:
            return users
        token = page.next_page_token


def group_sequences(channel, md):
    """Per group, the sequences of its events in the app's log (the backend firehose), in order."""
    stream = event_pb2_grpc.EventServiceStub(channel).Subscribe(
        event_pb2.SubscribeRequest(from_oldest=True), metadata=md, timeout=120)
    sequences = {}
    for item in stream:
        kind = item.WhichOneof("item")
        if kind == "caught_up":
            stream.cancel()
            return sequences
        body = item.event if kind == "event" else item.message
        sequences.setdefault(body.group_id, []).append(body.sequence)
    return sequences


def test_acknowledged_writes_survive_sigkill(fresh_groupd):
    server = fresh_groupd(limits={"max_members": "{ work: 200, public: 0, meeting: 6000, av_chat_room: 0 }",
                                  "max_groups_per_user": 1000000}).start()
    md = admin_md()
    with grpc.insecure_channel(server.address) as channel:
        group_pb2_grpc.GroupServiceStub(channel).CreateGroup(group_pb2.CreateGroupRequest(
            group_id=GROUP, type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id="owner",
            settings=common_pb2.GroupSettings(join_option=common_pb2.JOIN_OPTION_ANY),
            members=[group_pb2.InitialMember(user_id=s) for s in SENDERS],
            profile=common_pb2.GroupProfile(name=GROUP)), metadata=md)

    ledger = Ledger()
    rng = random.Random(int(os.environ.get("CRASH_SEED", "12")))
    for round_number in range(ROUNDS):
        stop = threading.Event()
        ledger.start_round(rng.randint(10, 1500))
        threads = write_until_killed(server.address, ledger, round_number, stop)
        assert ledger.kill_moment.wait(timeout=120), "the writers stalled before the kill"
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(timeout=30)
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        server.start()

    ledger.acked_first = set(ledger.acked)
    with grpc.insecure_channel(server.address) as channel:
        # Messages never acknowledged are sent again: each ends up stored once, whether or not
        # its first attempt committed before a kill.
        stub = message_pb2_grpc.MessageServiceStub(channel)
        for client_id, sender_id in sorted(ledger.sent.items()):
            if client_id not in ledger.acked:
                response = stub.SendGroupMessage(
                    message_pb2.SendGroupMessageRequest(group_id=GROUP, client_message_id=client_id, text=client_id),
                    metadata=md + [("x-operator-id", sender_id)])
                ledger.ack(client_id, response.message)

        stored = history(channel, md)
        by_client = {}
        for message in stored:
            assert message.client_message_id not in by_client, f"duplicated {message.client_message_id}"
            by_client[message.client_message_id] = (message.sequence, message.message_id)
        assert by_client == ledger.acked, "stored messages differ from the acknowledged ones"

        listed = members(channel, md)
        assert len(listed) == len(set(listed))
        assert ledger.joins_acked <= set(listed), "an acknowledged join is missing"
        info = group_pb2_grpc.GroupServiceStub(channel).GetGroupsInfo(
            group_pb2.GetGroupsInfoRequest(group_ids=[GROUP]), metadata=md).groups[0]
        assert info.member_count == len(listed)

        created = sorted(ledger.creates_acked)
        for start in range(0, len(created), 50):
            found = group_pb2_grpc.GroupServiceStub(channel).GetGroupsInfo(
                group_pb2.GetGroupsInfoRequest(group_ids=created[start:start + 50]), metadata=md).groups
            assert {g.group_id for g in found} == set(created[start:start + 50]), "an acknowledged creation is missing"

        for group_id, sequences in group_sequences(channel, md).items():
            assert sequences == list(range(1, len(sequences) + 1)), f"{group_id}: sequences with a gap or out of order"

    assert len(ledger.acked) > ROUNDS and ledger.joins_acked and ledger.creates_acked
    print(f"\n{ROUNDS} kills: {len(ledger.acked)} messages ({len(ledger.sent) - len(ledger.acked_first)} sent again "
          f"after a kill), {len(ledger.joins_acked)} joins, {len(ledger.creates_acked)} groups created, all read back")
