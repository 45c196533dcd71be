"""Scale benchmarks for groups and members, run by `make bench-scale`.

  python3 scripts/bench_scale.py .build/release/groupd [--groups 1000000] [--members 100000]

What it measures, with groupd pinned to core 0 and the load on core 1, loopback only, every
load bounded in time:
  1. GetGroupsInfo (one id) with 1,000 groups in the store, then with --groups groups: h2load on
     one hot id (served from the group cache), and a grpc.aio client reading random ids
     (mostly cache misses once the store holds more groups than the cache).
  2. ListMembers, first page (50) and a page deep in the list, of a group with --members members:
     h2load, -c1 -m1 and -c8 -m32.
  3. JoinGroup throughput into one Public group (join option ANY), distinct users, grpc.aio
     client with 256 calls in flight, durability full.
Seeding uses `durability: normal` (an fsync per commit would make a million creations take an
hour); the measurement phases restart groupd on the same data with `durability: full`.
"""
import asyncio
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
from benchlib import Server, arguments, frame, run_calls  # noqa: E402
import grpc  # noqa: E402
from support import mint_token  # noqa: E402
from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc, member_pb2, member_pb2_grpc  # noqa: E402

LIMITS = {"max_members": {"work": 200, "public": 1000000, "meeting": 6000, "av_chat_room": 0}, "max_users_per_batch": 500}


def h2load(server, path, body: bytes, token, clients, streams, seconds, workdir):
    result = benchlib.h2load(server.address, server.pid, path, body, [f"authorization: Bearer {token}"],
                             clients, streams, seconds, workdir)
    return (f"{result['rate']:,.0f} req/s, p50 {result['p50_us']} µs, p99 {result['p99_us']} µs, "
            f"failed {result['failed']}, server CPU {result['cpu_us']:.1f} µs/call")


def seed_groups(server, first, count, token):
    md = [("authorization", f"Bearer {token}")]

    async def create(channel, index):
        stub = group_pb2_grpc.GroupServiceStub(channel)
        n = first + index
        try:
            await stub.CreateGroup(group_pb2.CreateGroupRequest(
                group_id=f"g{n}", type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id=f"owner{n % 1000}",
                profile=common_pb2.GroupProfile(name=f"group {n}")), metadata=md)
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.ALREADY_EXISTS:
                raise

    done, elapsed = asyncio.run(run_calls(server.address, create, count))
    return done / elapsed


def random_reads(server, groups, token, seconds=10):
    md = [("authorization", f"Bearer {token}")]
    rng = random.Random(7)

    async def read(channel, _):
        stub = group_pb2_grpc.GroupServiceStub(channel)
        response = await stub.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[f"g{rng.randrange(groups)}"]), metadata=md)
        assert len(response.groups) == 1

    cpu_before = server.cpu_seconds()
    done, elapsed = asyncio.run(run_calls(server.address, read, 10**9, seconds=seconds))
    cpu = (server.cpu_seconds() - cpu_before) / max(done, 1) * 1e6
    return f"{done / elapsed:,.0f} req/s (client-bound), server CPU {cpu:.1f} µs/call"


def main():
    args = arguments(groups=1_000_000, members=100_000, seconds=10)
    workdir = Path(tempfile.mkdtemp(prefix="groupd-scale-"))
    token = mint_token(exp_in=24 * 3600)
    server = Server(Path(args.binary).resolve(), workdir, limits=LIMITS)
    print(f"machine: {os.cpu_count()} cores; groupd on core 0, load on core 1; workdir {workdir}")
    try:
        # 1. GetGroupsInfo at 1,000 groups, then at --groups.
        server.start("normal")
        rate = seed_groups(server, 0, 1000, token)
        server.stop()
        server.start("full")
        body = frame(group_pb2.GetGroupsInfoRequest(group_ids=["g7"]))
        print(f"GetGroupsInfo, 1,000 groups, hot id, 8x32: {h2load(server, '/groupd.v1.GroupService/GetGroupsInfo', body, token, 8, 32, args.seconds, workdir)}")
        print(f"GetGroupsInfo, 1,000 groups, random ids (grpc.aio, 256 in flight): {random_reads(server, 1000, token, args.seconds)}")
        server.stop()
        server.start("normal")
        started = time.perf_counter()
        rate = seed_groups(server, 1000, args.groups - 1000, token)
        print(f"seeded {args.groups:,} groups ({rate:,.0f} CreateGroup/s, durability normal, {time.perf_counter() - started:.0f} s)")
        server.stop()
        server.start("full")
        print(f"GetGroupsInfo, {args.groups:,} groups, hot id, 8x32: {h2load(server, '/groupd.v1.GroupService/GetGroupsInfo', body, token, 8, 32, args.seconds, workdir)}")
        print(f"GetGroupsInfo, {args.groups:,} groups, random ids (grpc.aio, 256 in flight): {random_reads(server, args.groups, token, args.seconds)}")
        size = sum(f.stat().st_size for f in (workdir / "data").iterdir())
        print(f"data directory: {size / 2**20:,.0f} MiB")
        server.stop()

        # 2. ListMembers on a group of --members members (added by the backend, 500 a call).
        server.start("normal")
        md = [("authorization", f"Bearer {token}")]
        with grpc.insecure_channel(server.address) as channel:
            group_pb2_grpc.GroupServiceStub(channel).CreateGroup(group_pb2.CreateGroupRequest(
                group_id="big", type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id="u0", max_member_count=args.members + 1,
                profile=common_pb2.GroupProfile(name="big")), metadata=md)

        async def invite(channel, index):
            users = [f"u{index * 500 + k + 1}" for k in range(500)]
            await member_pb2_grpc.MemberServiceStub(channel).InviteMembers(
                member_pb2.InviteMembersRequest(group_id="big", user_ids=users), metadata=md)

        done, elapsed = asyncio.run(run_calls(server.address, invite, args.members // 500, in_flight=8))
        print(f"seeded a group of {args.members + 1:,} members ({done * 500 / elapsed:,.0f} members/s through InviteMembers)")
        server.stop()
        server.start("full")
        with grpc.insecure_channel(server.address) as channel:
            stub = member_pb2_grpc.MemberServiceStub(channel)
            token_mid = ""
            for _ in range(args.members // 100):
                token_mid = stub.ListMembers(member_pb2.ListMembersRequest(group_id="big", page_size=50, page_token=token_mid), metadata=md).next_page_token
        first = frame(member_pb2.ListMembersRequest(group_id="big", page_size=50))
        deep = frame(member_pb2.ListMembersRequest(group_id="big", page_size=50, page_token=token_mid))
        for label, body in (("first page", first), ("page at the middle", deep)):
            for c, m in ((1, 1), (8, 32)):
                print(f"ListMembers {label} (50 of {args.members + 1:,}), {c}x{m}: {h2load(server, '/groupd.v1.MemberService/ListMembers', body, token, c, m, args.seconds, workdir)}")

        # 3. JoinGroup throughput: distinct users, each with their own token, durability full.
        with grpc.insecure_channel(server.address) as channel:
            group_pb2_grpc.GroupServiceStub(channel).CreateGroup(group_pb2.CreateGroupRequest(
                group_id="open", type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id="owner", max_member_count=1_000_000,
                settings=common_pb2.GroupSettings(join_option=common_pb2.JOIN_OPTION_ANY),
                profile=common_pb2.GroupProfile(name="open")), metadata=md)
        tokens = [mint_token(sub=f"joiner{n}", role="user", exp_in=3600) for n in range(200_000)]

        async def join(channel, index):
            await member_pb2_grpc.MemberServiceStub(channel).JoinGroup(
                member_pb2.JoinGroupRequest(group_id="open"), metadata=[("authorization", f"Bearer {tokens[index]}")])

        cpu_before = server.cpu_seconds()
        done, elapsed = asyncio.run(run_calls(server.address, join, len(tokens), seconds=args.seconds))
        cpu = (server.cpu_seconds() - cpu_before) / max(done, 1) * 1e6
        print(f"JoinGroup into one Public group, distinct users, durability full: {done / elapsed:,.0f} joins/s ({done:,} in {elapsed:.1f} s), server CPU {cpu:.0f} µs/join")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
