"""make bench-fanout: the event stream's fan-out, measured from outside through real HTTP/2.

1. One event fanned out to 10,000 subscribers (10,000 members of one Public group, one
   `Subscribe` stream each) over 100 connections: per round, the time from the write's call
   to each stream's arrival; reported: the latency to the LAST subscriber (p50 / p99 over the
   rounds) and the per-stream latencies (p50 / p99 over all streams and rounds).
2. Memory per idle subscriber stream: the slope of the server's RSS between 5,000 and 10,000
   open idle streams (connections already open), and the plain delta over all 10,000.
3. Messages per second into a 1,000-member Public group with 1,000 subscribers: SendGroupMessage
   from the owner with 16 calls in flight; the accepted rate, and the rate at which all 1,000
   streams received them.

The subscribers are a raw asyncio HTTP/2 client (no protobuf decoding, no HPACK decoding: it
counts gRPC messages per stream), so that the client is not what is measured. groupd runs on
core 0 (taskset), this client on core 1; the machine is shared, so figures are noisy.
    python3 scripts/bench_fanout.py .build/release/groupd [--subscribers 10000] [--rounds 30]
"""
import asyncio
import os
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

import grpc
import hpack

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import Server, arguments, auth_md, frame, wait_all  # noqa: E402
from support import mint_token  # noqa: E402
from groupd.v1 import (common_pb2, event_pb2, group_pb2, group_pb2_grpc, member_pb2,  # noqa: E402
                       member_pb2_grpc, message_pb2, message_pb2_grpc)
from google.protobuf import field_mask_pb2  # noqa: E402

LIMITS = {"max_members": {"work": 200, "public": 1000000, "meeting": 6000, "av_chat_room": 0}, "max_users_per_batch": 500}

SUBSCRIBE = "/groupd.v1.EventService/Subscribe"
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0, 1, 3, 4, 6, 7


def h2frame(kind, flags, stream_id, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream_id) + payload


class Stream:
    __slots__ = ("buffer", "arrivals", "ended")

    def __init__(self):
        self.buffer = b""
        self.arrivals = []
        self.ended = False


class Connection:
    """A raw HTTP/2 client connection carrying many Subscribe streams."""

    def __init__(self, port):
        self.port = port
        self.streams = {}
        self.next_id = 1
        self.encoder = hpack.Encoder()

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        settings = struct.pack(">HI", 0x4, 2**31 - 1) + struct.pack(">HI", 0x2, 0)
        self.writer.write(PREFACE + h2frame(SETTINGS, 0, 0, settings)
                          + h2frame(8, 0, 0, struct.pack(">I", 2**31 - 1 - 65535)))
        self.task = asyncio.ensure_future(self.read_loop())

    def subscribe(self, token, request: bytes):
        stream_id = self.next_id
        self.next_id += 2
        self.streams[stream_id] = Stream()
        block = self.encoder.encode([
            (":method", "POST"), (":scheme", "http"), (":path", SUBSCRIBE), (":authority", "127.0.0.1"),
            ("content-type", "application/grpc"), ("te", "trailers"), ("authorization", "Bearer " + token)])
        self.writer.write(h2frame(HEADERS, 0x4, stream_id, block) + h2frame(DATA, 0x1, stream_id, request))

    def clock(self):
        """The time an arrival is stamped with."""
        return time.perf_counter()

    def on_message(self, stream, message, now):
        """One whole gRPC message (length prefix included) of `stream`, read at `now`."""
        stream.arrivals.append(now)

    def on_headers(self, stream_id, flags, block):
        """A HEADERS frame; END_STREAM (trailers) ends the stream."""
        if flags & 0x1:
            self.streams[stream_id].ended = True

    def on_reset(self, stream_id, payload):
        self.streams[stream_id].ended = True

    async def read_loop(self):
        """Splits what arrives into HTTP/2 frames and the DATA into gRPC messages (the hooks
        above), answers SETTINGS and PING, stops at GOAWAY."""
        buffer = b""
        reader, streams = self.reader, self.streams
        while True:
            data = await reader.read(1 << 20)
            if not data:
                return
            now = self.clock()
            buffer += data
            offset = 0
            while len(buffer) - offset >= 9:
                length = int.from_bytes(buffer[offset:offset + 3], "big")
                if len(buffer) - offset < 9 + length:
                    break
                kind, flags = buffer[offset + 3], buffer[offset + 4]
                stream_id = int.from_bytes(buffer[offset + 5:offset + 9], "big") & 0x7FFFFFFF
                payload = buffer[offset + 9:offset + 9 + length]
                offset += 9 + length
                if kind == DATA:
                    stream = streams[stream_id]
                    pending = stream.buffer + payload
                    while len(pending) >= 5:
                        size = int.from_bytes(pending[1:5], "big")
                        if len(pending) < 5 + size:
                            break
                        self.on_message(stream, pending[:5 + size], now)
                        pending = pending[5 + size:]
                    stream.buffer = pending
                elif kind == HEADERS:
                    self.on_headers(stream_id, flags, payload)
                elif kind == RST_STREAM:
                    self.on_reset(stream_id, payload)
                elif kind == SETTINGS and not flags & 0x1:
                    self.writer.write(h2frame(SETTINGS, 0x1, 0))
                elif kind == PING and not flags & 0x1:
                    self.writer.write(h2frame(PING, 0x1, 0, payload))
                elif kind == GOAWAY:
                    return
            buffer = buffer[offset:]

    def close(self):
        self.task.cancel()
        self.writer.close()


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


async def seed_group(channel, md, group_id, users):
    await group_pb2_grpc.GroupServiceStub(channel).CreateGroup(group_pb2.CreateGroupRequest(
        group_id=group_id, type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id="owner",
        max_member_count=len(users) + 1, profile=common_pb2.GroupProfile(name=group_id)), metadata=md)
    members = member_pb2_grpc.MemberServiceStub(channel)
    for start in range(0, len(users), 500):
        await members.InviteMembers(member_pb2.InviteMembersRequest(
            group_id=group_id, user_ids=users[start:start + 500]), metadata=md)


async def open_streams(port, users, per_connection):
    connections = []
    for start in range(0, len(users), per_connection):
        connection = Connection(port)
        await connection.open()
        connections.append(connection)
    return connections


def subscribe_all(connections, users, per_connection, request):
    streams = []
    for index, user in enumerate(users):
        connection = connections[index // per_connection]
        connection.subscribe(mint_token(sub=user, role="user", exp_in=3600), request)
        streams.append(connection.streams[connection.next_id - 2])
    return streams


async def fanout(server, args):
    md = auth_md(exp_in=3600)
    users = [f"u{n}" for n in range(1, args.subscribers + 1)]
    per_connection = args.subscribers // args.connections
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        await seed_group(channel, md, "fan", users)
        request = frame(event_pb2.SubscribeRequest())
        # Memory: the slope of the server's RSS between the first and the second half of the
        # streams (what the first streams grow once, such as allocator arenas, SQLite page caches
        # and the token cache, is in the first half), and the plain delta over all of them.
        connections = await open_streams(server.port, users, per_connection)
        await asyncio.sleep(1.0)
        rss_start = server.rss_kib()
        half = len(users) // 2
        streams = subscribe_all(connections, users[:half], per_connection, request)
        if not await wait_all(streams, 1, 120):
            raise RuntimeError("not every stream caught up")
        await asyncio.sleep(2.0)
        rss_half = server.rss_kib()
        streams += subscribe_all(connections[half // per_connection:], users[half:], per_connection, request)
        if not await wait_all(streams, 1, 120):
            raise RuntimeError("not every stream caught up")
        await asyncio.sleep(2.0)
        rss_all = server.rss_kib()
        print(f"idle streams: {len(streams):,} over {len(connections)} connections; server RSS "
              f"{rss_start / 1024:,.1f} -> {rss_half / 1024:,.1f} -> {rss_all / 1024:,.1f} MiB: "
              f"{(rss_all - rss_half) * 1024 / (len(streams) - half):,.0f} bytes per idle stream (second half), "
              f"{(rss_all - rss_start) * 1024 / len(streams):,.0f} bytes (all, first-use growth included)")
        groups = group_pb2_grpc.GroupServiceStub(channel)
        owner = auth_md("owner", exp_in=3600)
        last, per_stream, after_ack = [], [], []
        cpu_before = server.cpu_seconds()
        for round_index in range(args.rounds):
            start = time.perf_counter()
            await groups.UpdateGroupProfile(group_pb2.UpdateGroupProfileRequest(
                group_id="fan", update_mask=field_mask_pb2.FieldMask(paths=["name"]),
                profile=common_pb2.GroupProfile(name=f"round {round_index}")), metadata=owner)
            acked = time.perf_counter()
            if not await wait_all(streams, round_index + 2, 30):
                raise RuntimeError(f"round {round_index}: not every stream got the event")
            arrivals = [stream.arrivals[round_index + 1] for stream in streams]
            last.append((max(arrivals) - start) * 1000)
            after_ack.append((max(arrivals) - acked) * 1000)
            per_stream += [(arrival - start) * 1000 for arrival in arrivals]
            await asyncio.sleep(0.2)
        cpu_per_round = (server.cpu_seconds() - cpu_before) / args.rounds * 1000
        print(f"fan-out of one event to {len(streams):,} subscribers, {args.rounds} rounds (from the write's call, "
              f"commit with fsync included): last subscriber p50 {statistics.median(last):.1f} ms, "
              f"p99 {pct(last, 0.99):.1f} ms, max {max(last):.1f} ms; after the write's answer: last subscriber "
              f"p50 {statistics.median(after_ack):.1f} ms, p99 {pct(after_ack, 0.99):.1f} ms; per stream p50 "
              f"{pct(per_stream, 0.5):.1f} ms, p99 {pct(per_stream, 0.99):.1f} ms; server CPU "
              f"{cpu_per_round:.1f} ms per round (write and fan-out)")
        ended = sum(stream.ended for stream in streams)
        if ended:
            print(f"WARNING: {ended} streams ended during the run")
        for connection in connections:
            connection.close()


async def messages(server, args):
    md = auth_md(exp_in=3600)
    users = [f"m{n}" for n in range(1, args.members + 1)]
    per_connection = 100
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        await seed_group(channel, md, "chat", users)
        connections = await open_streams(server.port, users, per_connection)
        request = frame(event_pb2.SubscribeRequest())
        streams = subscribe_all(connections, users, per_connection, request)
        if not await wait_all(streams, 1, 60):
            raise RuntimeError("not every stream caught up")
        sender = message_pb2_grpc.MessageServiceStub(channel)
        owner = auth_md("owner", exp_in=3600)
        total, in_flight = args.messages, 16
        numbers = iter(range(total))
        start = time.perf_counter()

        async def send():
            for number in numbers:
                await sender.SendGroupMessage(message_pb2.SendGroupMessageRequest(
                    group_id="chat", text=f"message {number}"), metadata=owner)

        await asyncio.gather(*(send() for _ in range(in_flight)))
        sent = time.perf_counter() - start
        if not await wait_all(streams, total + 1, 120):
            got = min(len(stream.arrivals) for stream in streams) - 1
            raise RuntimeError(f"not every stream got every message (slowest: {got})")
        delivered = max(stream.arrivals[-1] for stream in streams) - start
        print(f"messages into a {args.members + 1:,}-member Public group with {len(streams):,} subscribers: "
              f"{total / sent:,.0f} messages/s accepted (16 in flight, durability full), all {len(streams):,} streams "
              f"had all {total:,} after {delivered:.2f} s: {total / delivered:,.0f} messages/s, "
              f"{total * len(streams) / delivered:,.0f} deliveries/s")
        for connection in connections:
            connection.close()


def main():
    args = arguments(subscribers=10_000, connections=100, rounds=30, members=1000, messages=500)
    if os.cpu_count() > 1:
        os.sched_setaffinity(0, {1})
    workdir = Path(tempfile.mkdtemp(prefix="groupd-fanout-"))
    print(f"machine: {os.cpu_count()} cores (shared); groupd on core 0, client on core 1; workdir {workdir}")
    server = Server(Path(args.binary).resolve(), workdir, limits=LIMITS,
                    extra="max_concurrent_streams: 256\nmax_connections: 1000\n").start()
    try:
        asyncio.run(fanout(server, args))
        asyncio.run(messages(server, args))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
