"""Replies against plain sends (`make bench-replies`): SendGroupMessage from 16 concurrent clients
into one Public group, alternating blocks of plain messages and of replies (reply_to_sequence naming
the group's first message), on a fresh SQLite store and, with --postgres, on a new database of a
PostgreSQL cluster. Prints each store's median rates over 4 blocks of each kind and their ratio.

  python3 scripts/bench_replies.py BINARY [--postgres postgres://groupd@127.0.0.1:PORT/groupd]
  (make bench-replies runs it on the release build, SQLite then PostgreSQL)
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import grpc  # noqa: E402

THREADS, PER_THREAD, BLOCKS = 16, 40, 4


def measure(database):
    import support  # noqa: E402
    from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc, message_pb2, message_pb2_grpc

    server = support.Groupd(Path(tempfile.mkdtemp(prefix="bench-replies-")), database=database).start()
    channels = [grpc.insecure_channel(server.address) for _ in range(THREADS)]
    try:
        stubs = [message_pb2_grpc.MessageServiceStub(channel) for channel in channels]
        group, users = support.uid("g"), [f"u{n}" for n in range(THREADS)]
        group_pb2_grpc.GroupServiceStub(channels[0]).CreateGroup(group_pb2.CreateGroupRequest(
            group_id=group, type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id="owner",
            profile=common_pb2.GroupProfile(name="bench"),
            members=[group_pb2.InitialMember(user_id=user) for user in users]), metadata=support.admin_md(), timeout=10)
        first = stubs[0].SendGroupMessage(message_pb2.SendGroupMessageRequest(group_id=group, text="the original"),
                                          metadata=support.user_md(users[0]), timeout=10).message.sequence

        def client(n, reply):
            for _ in range(PER_THREAD):
                stubs[n].SendGroupMessage(message_pb2.SendGroupMessageRequest(
                    group_id=group, text="a line of chat", reply_to_sequence=first if reply else 0),
                    metadata=support.user_md(users[n]), timeout=30)

        def block(reply):
            started = time.perf_counter()
            with ThreadPoolExecutor(THREADS) as pool:
                list(pool.map(lambda n: client(n, reply), range(THREADS)))
            return THREADS * PER_THREAD / (time.perf_counter() - started)

        block(False), block(True)  # warm-up
        plain, replies = [], []
        for _ in range(BLOCKS):
            plain.append(block(False))
            replies.append(block(True))
        return statistics.median(plain), statistics.median(replies)
    finally:
        for channel in channels:
            channel.close()
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary", type=Path)
    parser.add_argument("--postgres", help="a PostgreSQL cluster URL (a new database is made in it)")
    args = parser.parse_args()
    # Before support is imported: it reads both when imported.
    os.environ["GROUPD_BIN"] = str(args.binary.resolve())
    if args.postgres:
        os.environ["GROUPD_TEST_POSTGRES_URL"] = args.postgres
    import support  # noqa: E402
    store = "postgres" if args.postgres else "sqlite"
    plain, reply = measure(support.new_database() if args.postgres else None)
    print(f"{store}: {THREADS} clients, plain {plain:.0f} calls/s, reply {reply:.0f} calls/s, reply/plain {reply / plain:.3f}")


if __name__ == "__main__":
    main()
