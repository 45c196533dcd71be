"""Stream catch-up cost, run by `make bench-catchup`.

  python3 scripts/bench_catchup.py .build/release/groupd [--groups 10000] [--messages 10] [--member-of 10]

A user in --member-of groups of an app with --groups busy groups resumes a Subscribe stream from
a cursor taken before the app's groups wrote --messages messages each: the backlog holds the
user's groups' messages (--member-of x --messages items) among the app's (--groups x --messages
rows). The figure is the time from the call to `caught_up` (median of --rounds resumes, with the
items delivered), groupd pinned to core 0 and the client on core 1. Seeding uses
`durability: normal` and grpc.aio with 256 calls in flight.
"""
import asyncio
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import arguments, auth_md, client_and_server, run_calls  # noqa: E402
import grpc  # noqa: E402
import support  # noqa: F401,E402  (generates the stubs and puts them on sys.path)
from groupd.v1 import (common_pb2, event_pb2, event_pb2_grpc, group_pb2, group_pb2_grpc, message_pb2,  # noqa: E402
                       message_pb2_grpc)

READER = "reader"


def reader_groups(args):
    """The groups the reader is in, spread over the app's."""
    step = args.groups // args.member_of
    return {n * step for n in range(args.member_of)}


def seed_groups(server, args):
    md = auth_md()
    mine = reader_groups(args)

    async def create(channel, n):
        members = [group_pb2.InitialMember(user_id=READER, role=common_pb2.MEMBER_ROLE_MEMBER)] if n in mine else []
        await group_pb2_grpc.GroupServiceStub(channel).CreateGroup(group_pb2.CreateGroupRequest(
            group_id=f"g{n}", type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id=f"owner{n}",
            profile=common_pb2.GroupProfile(name=f"group {n}"), members=members), metadata=md)

    return asyncio.run(run_calls(server.address, create, args.groups))[1]


def seed_messages(server, args):
    mds = {}

    async def send(channel, index):
        n = index % args.groups
        owner = f"owner{n}"
        md = mds.get(owner) or mds.setdefault(owner, auth_md(owner))
        await message_pb2_grpc.MessageServiceStub(channel).SendGroupMessage(message_pb2.SendGroupMessageRequest(
            group_id=f"g{n}", type="text", text=f"message {index}"), metadata=md)

    return asyncio.run(run_calls(server.address, send, args.groups * args.messages))[1]


def subscribe(server, cursor):
    """Subscribes as the reader from `cursor`; returns (seconds to caught_up, items before it, its cursor)."""
    md = auth_md(READER)
    with grpc.insecure_channel(server.address) as channel:
        grpc.channel_ready_future(channel).result(timeout=10)
        stub = event_pb2_grpc.EventServiceStub(channel)
        start = time.perf_counter()
        call = stub.Subscribe(event_pb2.SubscribeRequest(cursor=cursor), metadata=md)
        items = 0
        for item in call:
            if item.WhichOneof("item") == "caught_up":
                elapsed = time.perf_counter() - start
                call.cancel()
                return elapsed, items, item.cursor
            items += 1
    raise RuntimeError("the stream ended before caught_up")


def main():
    args = arguments(groups=10_000, messages=10, member_of=10, rounds=9)
    server = client_and_server(args.binary, "catchup")
    try:
        server.start("normal")
        seconds = seed_groups(server, args)
        print(f"seeded {args.groups:,} groups in {seconds:.0f} s; the reader is in {args.member_of}")
        _, _, cursor = subscribe(server, "")
        seconds = seed_messages(server, args)
        print(f"seeded {args.groups * args.messages:,} messages ({args.messages} per group) in {seconds:.0f} s")
        server.stop()
        server.start("full")
        subscribe(server, cursor)  # warm the page cache
        runs = [subscribe(server, cursor) for _ in range(args.rounds)]
        times = sorted(run[0] * 1000 for run in runs)
        items = {run[1] for run in runs}
        assert items == {args.member_of * args.messages}, f"delivered {items}, expected {args.member_of * args.messages}"
        print(f"catch-up of a user in {args.member_of} groups ({args.member_of * args.messages} items) among "
              f"{args.groups * args.messages:,} rows of the app: median {statistics.median(times):.1f} ms, "
              f"min {times[0]:.1f} ms, max {times[-1]:.1f} ms over {args.rounds} resumes")
    finally:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
