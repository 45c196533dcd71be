"""Write-path benchmarks, run by `make bench-writes`.

  python3 scripts/bench_writes.py .build/release/groupd [--seconds 10] [--json FILE]

groupd runs on core 0 (taskset), every load on core 1, loopback only, durability `full`, each
load bounded in time. In the same run, the C++ gRPC callback server of Benchmarks/LoadGen/peer.cc
(also on core 0) answers Health/Check and a 100,000-message server stream, for the ratios the
targets are stated in. Rows (each with rate, p50/p99 and groupd's CPU per call):
  1. Health/Check, h2load -c8 -m32: the C++ peer, then groupd.
  2. GetGroupsInfo, one id, h2load -c8 -m32 (one fixed body: the group cache serves it).
  3. SendGroupMessage into one group, C++ loadgen 8 connections x 32 in flight, one fixed body.
  4. SendGroupMessage spread over 1,000 groups (each call the next of 1,000 bodies), 8 x 32.
  5. CreateGroup, generated (distinct) ids, 4 connections x 8 = 32 in flight.
  6. JoinGroup into one Public group (join option ANY), a distinct user per call, 8 x 32.
  7. Subscribe catch-up: one subscriber reads 100,000 stored messages of one group; beside it
     the C++ peer's stream of 100,000 16-byte messages.
"""
import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import Peer, Server, frame, h2load, loadgen, write_requests  # noqa: E402
from support import mint_token  # noqa: E402
import grpc  # noqa: E402
from groupd.v1 import common_pb2, event_pb2, group_pb2, group_pb2_grpc, member_pb2, message_pb2  # noqa: E402

LIMITS = {"max_members": {"work": 200, "public": 0, "meeting": 6000, "av_chat_room": 0}, "max_groups_per_user": 1000000}

SEND = "/groupd.v1.MessageService/SendGroupMessage"
TEXT = "a group message of sixty-four bytes, as a short chat line is...."


def row(name, result, target=""):
    cpu = f"{result['cpu_us']:.1f}" if "cpu_us" in result else "–"
    rate = result.get("rate", 0)
    failed = result.get("failed", 0)
    print(f"| {name} | {rate:,.0f} | {result.get('p50_us', '–')} | {result.get('p99_us', '–')} | {cpu} | {failed} | {target} |",
          flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--json", help="also write every result to this file")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="groupd-writes-"))
    token = mint_token(exp_in=24 * 3600)
    auth = ("authorization", f"Bearer {token}")
    md = [auth]
    results = {}
    server = Server(Path(args.binary).resolve(), workdir, limits=LIMITS)
    peer = Peer()
    print(f"machine: {os.cpu_count()} cores; groupd and the C++ peer on core 0, load on core 1; "
          f"durability full; {args.seconds} s per load; workdir {workdir}")
    print("| row | calls/s | p50 µs | p99 µs | groupd CPU µs/call | failed | target |\n|---|---|---|---|---|---|---|")
    try:
        server.start("full")
        with grpc.insecure_channel(server.address) as channel:
            groups = group_pb2_grpc.GroupServiceStub(channel)

            def create(group_id, owner, join_any=False):
                groups.CreateGroup(group_pb2.CreateGroupRequest(
                    group_id=group_id, type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id=owner,
                    profile=common_pb2.GroupProfile(name=group_id),
                    settings=common_pb2.GroupSettings(join_option=common_pb2.JOIN_OPTION_ANY) if join_any else None),
                    metadata=md)

            create("hot", "sender")
            create("catchup", "reader")
            create("open", "owner", join_any=True)
            futures = [groups.CreateGroup.future(group_pb2.CreateGroupRequest(
                group_id=f"g{n}", type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id=f"s{n % 10}",
                profile=common_pb2.GroupProfile(name=f"g{n}")), metadata=md) for n in range(1000)]
            for future in futures:
                future.result()

        health = b"\0\0\0\0\0"
        peer.start()
        results["peer_health"] = h2load(peer.address, peer.process.pid, "/grpc.health.v1.Health/Check", health, [],
                                        8, 32, args.seconds, workdir)
        row("C++ peer Health/Check, h2load 8x32", results["peer_health"])
        results["health"] = h2load(server.address, server.pid, "/grpc.health.v1.Health/Check", health, [],
                                   8, 32, args.seconds, workdir)
        row("groupd Health/Check, h2load 8x32", results["health"])

        body = frame(group_pb2.GetGroupsInfoRequest(group_ids=["g7"]))
        results["get_groups_info"] = h2load(server.address, server.pid, "/groupd.v1.GroupService/GetGroupsInfo", body,
                                            [f"{auth[0]}: {auth[1]}"], 8, 32, args.seconds, workdir)
        ratio = results["get_groups_info"]["rate"] / results["peer_health"]["rate"]
        row("GetGroupsInfo 1 id, h2load 8x32", results["get_groups_info"],
            f"≥ 1.0× C++ Health ({ratio:.2f}×), ≤ 15 µs CPU")

        one = workdir / "send-one.bin"
        write_requests(one, [(md + [("x-operator-id", "sender")],
                              message_pb2.SendGroupMessageRequest(group_id="hot", text=TEXT))])
        results["send_one"] = loadgen(server.address, server.pid, SEND, one, seconds=args.seconds)
        row("SendGroupMessage, one group, 8x32", results["send_one"], "≥ 10,000/s, p99 ≤ 60 ms, ≤ 80 µs CPU")

        spread = workdir / "send-spread.bin"
        write_requests(spread, [(md + [("x-operator-id", f"s{n % 10}")],
                                 message_pb2.SendGroupMessageRequest(group_id=f"g{n}", text=TEXT)) for n in range(1000)])
        results["send_spread"] = loadgen(server.address, server.pid, SEND, spread, seconds=args.seconds)
        row("SendGroupMessage, 1,000 groups, 8x32", results["send_spread"], "≥ 20,000/s")

        creates = workdir / "create.bin"
        write_requests(creates, [(md, group_pb2.CreateGroupRequest(
            type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id=f"c{n}", profile=common_pb2.GroupProfile(name="created")))
            for n in range(1000)])
        results["create"] = loadgen(server.address, server.pid, "/groupd.v1.GroupService/CreateGroup", creates,
                                    connections=4, inflight=8, seconds=args.seconds)
        row("CreateGroup, distinct ids, 32 in flight", results["create"], "≥ 10,000/s")

        joins = workdir / "join.bin"
        write_requests(joins, [(md + [("x-operator-id", f"j{n}")], member_pb2.JoinGroupRequest(group_id="open"))
                               for n in range(40_000 * (args.seconds + 1))])
        results["join"] = loadgen(server.address, server.pid, "/groupd.v1.MemberService/JoinGroup", joins,
                                  seconds=args.seconds, cycle=False)
        row("JoinGroup, one Public group, distinct users, 8x32", results["join"], "≥ 10,000/s")

        seed = workdir / "seed.bin"
        write_requests(seed, [(md + [("x-operator-id", "reader")],
                               message_pb2.SendGroupMessageRequest(group_id="catchup", text=TEXT))] * 100_000)
        loadgen(server.address, None, SEND, seed, seconds=600, cycle=False)
        subscribe = workdir / "subscribe.bin"
        write_requests(subscribe, [(md + [("x-operator-id", "reader")],
                                    event_pb2.SubscribeRequest(group_ids=["catchup"], from_oldest=True))])
        results["catchup"] = loadgen(server.address, server.pid, "/groupd.v1.EventService/Subscribe", subscribe,
                                     stream=100_000)
        stream = workdir / "peer-stream.bin"
        write_requests(stream, [([("x-count", "100000")], group_pb2.GetGroupsInfoRequest())])
        results["peer_stream"] = loadgen(peer.address, peer.process.pid, "/peer.v1.Peer/Stream", stream, stream=100_000)
        row("C++ peer server stream, 100,000 × 16 B, one call", results["peer_stream"])
        ratio = results["catchup"]["rate"] / results["peer_stream"]["rate"]
        row("Subscribe catch-up, 100,000 stored messages, one subscriber", results["catchup"],
            f"≥ 150,000 items/s ({ratio:.2f}× the C++ stream)")
    finally:
        peer.stop()
        server.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
