"""What permission groups cost a send (`make bench-permission-groups`), on a fresh SQLite store and,
with --postgres, on a new database of a PostgreSQL cluster.

Two Community groups of --members members (the owner and 16 senders, the rest invited by the
backend) with --topics topics each. Community A holds the app's limit of permission groups (20),
each with a value for every topic (the largest permission text a community row holds), and each
sender is in 3 of them; A's topic 0 is read-only (the `everyone` group's value for it is empty), and
one of each sender's groups grants SEND_MESSAGE there, so every send in A is decided through the
grants. Community B has no permission groups. 16 concurrent grpcio clients send SendGroupMessage for
--seconds into topic 0 of A, then of B, in the order A B A B after a warm-up of each; printed: each
block's rate, the mean of each kind and their ratio (A / B).

  python3 scripts/bench_permission_groups.py BINARY [--postgres URL] [--members 1000] [--topics 100]
      [--seconds 10]
  (make bench-permission-groups runs it on the release build, SQLite then PostgreSQL)
"""
import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "scripts"))
import grpc  # noqa: E402

THREADS, BATCH, WARMUP_SENDS, GROUPS, PER_SENDER = 16, 1000, 20, 20, 3
LIMITS = {"max_members": "{ community: 0 }", "max_users_per_batch": BATCH}


def seed(server, args, senders):
    """The two communities; returns {community: topic 0's id}."""
    import support
    from google.protobuf import field_mask_pb2
    from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc, member_pb2, member_pb2_grpc

    P = common_pb2
    md = support.admin_md()
    rest = [f"member{n:06d}" for n in range(args.members - 1 - len(senders))]
    first = {}
    with grpc.insecure_channel(server.address) as channel:
        groups = group_pb2_grpc.GroupServiceStub(channel)
        members = member_pb2_grpc.MemberServiceStub(channel)
        for community in ("granted", "plain"):
            groups.CreateGroup(group_pb2.CreateGroupRequest(
                group_id=community, type=common_pb2.GROUP_TYPE_COMMUNITY, owner_user_id="owner",
                profile=common_pb2.GroupProfile(name=community),
                members=[group_pb2.InitialMember(user_id=user) for user in senders]), metadata=md, timeout=60)
            for i in range(0, len(rest), BATCH):
                members.InviteMembers(member_pb2.InviteMembersRequest(group_id=community, user_ids=rest[i:i + BATCH]),
                                      metadata=md, timeout=600)
            topics = [groups.CreateTopic(group_pb2.CreateTopicRequest(
                group_id=community, profile=common_pb2.GroupProfile(name=f"topic {n}")), metadata=md, timeout=60).topic.topic_id
                for n in range(args.topics)]
            first[community] = topics[0]
            if community != "granted":
                continue
            values = [P.PERMISSION_MANAGE_MESSAGES, P.PERMISSION_PIN_MESSAGES]
            ids = []
            for n in range(GROUPS):
                topic_values = [P.TopicPermissions(topic_id=t, permissions=values) for t in topics]
                topic_values[0] = P.TopicPermissions(topic_id=topics[0], permissions=[P.PERMISSION_SEND_MESSAGE] + values)
                ids.append(groups.CreatePermissionGroup(group_pb2.CreatePermissionGroupRequest(
                    group_id=community, name=f"group {n}", permissions=[P.PERMISSION_PIN_MESSAGES],
                    topic_permissions=topic_values), metadata=md, timeout=60).permission_group.permission_group_id)
            for index, sender in enumerate(senders):
                for k in range(PER_SENDER):
                    groups.AddPermissionGroupMembers(group_pb2.AddPermissionGroupMembersRequest(
                        group_id=community, permission_group_id=ids[(index + k) % GROUPS], user_ids=[sender]),
                        metadata=md, timeout=60)
            groups.UpdatePermissionGroup(group_pb2.UpdatePermissionGroupRequest(
                group_id=community, permission_group_id="everyone",
                update_mask=field_mask_pb2.FieldMask(paths=["topic_permissions." + topics[0]]),
                topic_permissions=[P.TopicPermissions(topic_id=topics[0], permissions=[])]), metadata=md, timeout=60)
        # The check that A's sends go through the grants: a member outside them is refused.
        from groupd.v1 import message_pb2, message_pb2_grpc
        try:
            message_pb2_grpc.MessageServiceStub(channel).SendGroupMessage(message_pb2.SendGroupMessageRequest(
                group_id=first["granted"], text="x"), metadata=support.user_md(rest[0]), timeout=30)
            raise AssertionError("a member outside the grants sent into the read-only topic")
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.PERMISSION_DENIED, error
    print(f"  seeded two communities of {args.members:,} members and {args.topics} topics; "
          f"{GROUPS} permission groups x {args.topics} topic values in one", flush=True)
    return first


def measure(server, args, senders, topics):
    """Blocks of --seconds: A (granted) B (plain) A B after a warm-up of each: [(kind, calls/s)]."""
    from benchlib import send_blocks

    order = [("granted", topics["granted"]), ("plain", topics["plain"])] * 2
    return send_blocks(server.address, senders, order, args.seconds, warmup=WARMUP_SENDS)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary", type=Path)
    parser.add_argument("--postgres", help="a PostgreSQL cluster URL (a new database is made in it)")
    parser.add_argument("--members", type=int, default=1000, help="members of each community")
    parser.add_argument("--topics", type=int, default=100, help="topics of each community")
    parser.add_argument("--seconds", type=float, default=10, help="length of each send block")
    args = parser.parse_args()
    # Before support is imported: it reads both when imported.
    os.environ["GROUPD_BIN"] = str(args.binary.resolve())
    if args.postgres:
        os.environ["GROUPD_TEST_POSTGRES_URL"] = args.postgres
    import support  # noqa: E402

    store = "postgres" if args.postgres else "sqlite"
    senders = [f"sender{n:02d}" for n in range(THREADS)]
    server = support.Groupd(Path(tempfile.mkdtemp(prefix="bench-permission-groups-")),
                            database=support.new_database() if args.postgres else None, limits=LIMITS)
    server.start()
    try:
        print(f"{store}: {args.binary}", flush=True)
        rates = measure(server, args, senders, seed(server, args, senders))
    finally:
        server.stop()
    granted = statistics.mean(rate for kind, rate in rates if kind == "granted")
    plain = statistics.mean(rate for kind, rate in rates if kind == "plain")
    print(f"{store}: {THREADS} clients: sends decided through permission groups {granted:,.0f} messages/s, "
          f"in a community without them {plain:,.0f} messages/s, ratio {granted / plain:.3f}", flush=True)


if __name__ == "__main__":
    main()
