"""A reaction added to a message with 10 reactions and to one with 10,000, in instructions per call
(`make bench-reactions`).

  python3 scripts/bench_reactions.py BINARY [--calls 200] [--reactions 10000] [--json FILE]

One Public group holds two messages of the same sender: `small` with 10 reactions and `large` with
--reactions (10,000), every one of them the same key (👍) by a distinct member, so the large
message's key count row, its user rows and its key's ordinal index are 1,000 times those of the
small one. The fill runs on groupd as it is (many calls in flight); groupd then restarts on the
same SQLite store (durability full) under `valgrind --tool=callgrind`, as
`scripts/bench_instructions.py` runs it, and a grpcio client makes the measured calls one at a
time: per row a warm-up of 20 calls, the counters zeroed, --calls calls, a dump; the row is the
instructions of every thread of groupd divided by the calls. Rows: AddMessageReaction of 👍 by a
member who has none yet, on the small message and on the large one (each call adds one more);
RemoveMessageReaction of those same reactions. The figure is the ratio large / small of each pair:
1.00 means the call costs the same whatever the message's reaction count (no COUNT, no scan).
"""
import argparse
import concurrent.futures
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from bench_instructions import WARMUP, Callgrind  # noqa: E402
from benchlib import auth_md, free_port, server_config, wait_listening  # noqa: E402
import grpc  # noqa: E402
from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc, message_pb2, message_pb2_grpc  # noqa: E402

GROUP, OWNER, KEY = "reactions", "owner", "\U0001F44D"
LIMITS = {"max_members": {"work": 200, "public": 0, "meeting": 6000, "av_chat_room": 0},
          "max_users_per_batch": 100000, "max_groups_per_user": 1000000}
ROWS = [("add_small", "AddMessageReaction, message with 10 reactions"),
        ("add_large", "AddMessageReaction, message with {large:,} reactions"),
        ("remove_small", "RemoveMessageReaction, message with 10 reactions"),
        ("remove_large", "RemoveMessageReaction, message with {large:,} reactions")]


def fill(binary: Path, workdir: Path, reactions: int, extra_users: int):
    """Creates the group and the two messages and adds their reactions, on groupd without valgrind;
    returns the two sequences. The members `x*` stay without a reaction for the measured calls."""
    port = free_port()
    config = workdir / "fill.yaml"
    config.write_text(server_config(port, workdir / "data", limits=LIMITS))
    process = subprocess.Popen([str(binary), "serve", "--config", str(config)],
                               stdout=open(workdir / "fill.log", "ab"), stderr=subprocess.STDOUT)
    try:
        wait_listening(port, process)
        fillers = [f"r{n:05}" for n in range(reactions)]
        measured = [f"x{n:05}" for n in range(extra_users)]
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            group_pb2_grpc.GroupServiceStub(channel).CreateGroup(group_pb2.CreateGroupRequest(
                group_id=GROUP, type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id=OWNER,
                profile=common_pb2.GroupProfile(name="reactions"),
                members=[group_pb2.InitialMember(user_id=user, role=common_pb2.MEMBER_ROLE_MEMBER)
                         for user in fillers + measured]), metadata=auth_md(), timeout=120)
            messages = message_pb2_grpc.MessageServiceStub(channel)
            small, large = (messages.SendGroupMessage(message_pb2.SendGroupMessageRequest(
                group_id=GROUP, type="text", text=text), metadata=auth_md(OWNER), timeout=10).message.sequence
                for text in ("small", "large"))
            admin = auth_md()

            def react(sequence, user):
                messages.AddMessageReaction(message_pb2.AddMessageReactionRequest(
                    group_id=GROUP, sequence=sequence, reaction_key=KEY),
                    metadata=admin + [("x-operator-id", user)], timeout=30)

            with concurrent.futures.ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda user: react(small, user), fillers[:10]))
                list(pool.map(lambda user: react(large, user), fillers))
            counts = messages.GetMessageReactions(message_pb2.GetMessageReactionsRequest(
                group_id=GROUP, sequences=[small, large]), metadata=auth_md(OWNER), timeout=30)
            got = [m.reactions[0].count for m in counts.messages]
            if got != [10, reactions]:
                raise SystemExit(f"the fill left {got} reactions, not [10, {reactions}]")
        return small, large, measured
    finally:
        process.terminate()
        process.wait(timeout=60)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary", type=Path)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--reactions", type=int, default=10_000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="groupd-reactions-"))
    per_row = WARMUP + args.calls
    started = time.monotonic()
    small, large, users = fill(args.binary, workdir, args.reactions, 2 * per_row)
    print(f"fill: 10 + {args.reactions} reactions in {time.monotonic() - started:.0f} s", flush=True)
    server = Callgrind(args.binary, workdir)
    results = {}
    try:
        with grpc.insecure_channel(server.address) as channel:
            messages = message_pb2_grpc.MessageServiceStub(channel)
            admin = auth_md()

            def call(method, sequence, user):
                request = (message_pb2.AddMessageReactionRequest if method == "add"
                           else message_pb2.RemoveMessageReactionRequest)(group_id=GROUP, sequence=sequence, reaction_key=KEY)
                answer = getattr(messages, "AddMessageReaction" if method == "add" else "RemoveMessageReaction")(
                    request, metadata=admin + [("x-operator-id", user)], timeout=60)
                if not answer.changed:
                    raise SystemExit(f"{method} by {user} changed nothing")

            # Each row's users: the small message's and the large one's are distinct halves.
            plan = {"add_small": ("add", small, users[:per_row]), "add_large": ("add", large, users[per_row:]),
                    "remove_small": ("remove", small, users[:per_row]),
                    "remove_large": ("remove", large, users[per_row:])}
            for row, _ in ROWS:
                method, sequence, row_users = plan[row]
                for user in row_users[:WARMUP]:
                    call(method, sequence, user)
                measured = row_users[WARMUP:]
                total = server.count(lambda: [call(method, sequence, user) for user in measured])
                results[row] = round(total / len(measured))
                print(f"{row}: {results[row]:,} instructions a call", flush=True)
    finally:
        server.stop()
    print()
    print(f"| row | instructions / call ({args.calls} calls) |")
    print("| --- | ---: |")
    for row, title in ROWS:
        print(f"| {title.format(large=args.reactions)} | {results[row]:,} |")
    for kind in ("add", "remove"):
        ratio = results[f"{kind}_large"] / results[f"{kind}_small"]
        results[f"{kind}_ratio"] = round(ratio, 4)
        print(f"{kind}: {args.reactions:,} / 10 = {ratio:.3f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
