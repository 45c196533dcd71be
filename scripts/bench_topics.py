"""Topics at the rate of groups (`make bench-topics`), on a fresh SQLite store and, with --postgres,
on a new database of a PostgreSQL cluster (issue 28's two figures):

1. Sends into one topic of a big community against sends into a Public group of the same size.
   A Community group of --members members (the owner, 16 senders, the rest added by the backend's
   InviteMembers, 1,000 a call, 4 calls in flight) with --topics topics (CreateTopic by the
   backend), and a Public group with the same members. 16 concurrent grpcio clients (one user
   each, as bench_replies) send SendGroupMessage for --seconds into one topic (A), then into the
   Public group (B), in the order A B A B after a warm-up of each; printed: each block's rate, the
   mean of each kind and their ratio. Target: the topic within 10 % of the Public group.
2. The joined-group list of a member of --communities communities with --community-topics topics
   each (a few messages in every fourth topic, so unread counts are not all zero): --lists
   sequential ListJoinedGroups calls (page_size 50) after 10 of warm-up, each timed in the client
   until the answer's bytes are in (grpcio's Python decode of the answer, the client's own cost,
   is timed apart and printed); printed: median and p99 in ms, and, as a check, how many groups
   and topics the list holds. Target: under 20 ms.

  python3 scripts/bench_topics.py BINARY [--postgres postgres://groupd@127.0.0.1:PORT/groupd]
      [--members 100000] [--topics 100] [--seconds 10] [--communities 50] [--community-topics 20]
      [--lists 200]
  (make bench-topics runs it on the release build, SQLite then PostgreSQL)
"""
import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "scripts"))
import grpc  # noqa: E402

THREADS, BATCH, WARMUP_SENDS = 16, 1000, 20
# Both big groups past their types' default sizes (Public 2,000), invites of 1,000 users a call.
LIMITS = {"max_members": "{ public: 0, community: 0 }", "max_users_per_batch": BATCH}


def percentile(sorted_values, fraction):
    """The nearest-rank percentile of an ascending list."""
    return sorted_values[min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values) + 0.5) - 1))]


def seed_big_groups(server, args, senders):
    """The community and the Public group of --members members each (the owner, `senders`, the
    rest invited by the backend); then --topics topics in the community. Returns the topic ids."""
    import support
    from benchlib import run_calls
    from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc, member_pb2, member_pb2_grpc

    md = support.admin_md()
    rest = [f"member{n:06d}" for n in range(args.members - 1 - len(senders))]
    batches = [rest[i:i + BATCH] for i in range(0, len(rest), BATCH)]
    with grpc.insecure_channel(server.address) as channel:
        groups = group_pb2_grpc.GroupServiceStub(channel)
        for group, kind in (("community", common_pb2.GROUP_TYPE_COMMUNITY), ("public", common_pb2.GROUP_TYPE_PUBLIC)):
            groups.CreateGroup(group_pb2.CreateGroupRequest(
                group_id=group, type=kind, owner_user_id="owner", profile=common_pb2.GroupProfile(name=group),
                members=[group_pb2.InitialMember(user_id=user) for user in senders]), metadata=md, timeout=60)

            async def invite(aio_channel, index, group=group):
                answer = await member_pb2_grpc.MemberServiceStub(aio_channel).InviteMembers(
                    member_pb2.InviteMembersRequest(group_id=group, user_ids=batches[index]), metadata=md, timeout=600)
                ok = sum(r.result == common_pb2.MEMBER_RESULT_CODE_SUCCESS for r in answer.results)
                assert ok == len(batches[index]), f"{ok} of {len(batches[index])} invited into {group}"

            seconds = asyncio.run(run_calls(server.address, invite, len(batches), in_flight=4))[1]
            count = groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[group]), metadata=md,
                                         timeout=60).groups[0].member_count
            assert count == args.members, f"{group}: {count} members, not {args.members}"
            print(f"  seeded {group}: {count:,} members in {seconds:.1f} s ({len(rest) / seconds:,.0f} invited/s)",
                  flush=True)
        started = time.perf_counter()
        topics = [groups.CreateTopic(group_pb2.CreateTopicRequest(
            group_id="community", profile=common_pb2.GroupProfile(name=f"topic {n}")), metadata=md, timeout=60).topic.topic_id
            for n in range(args.topics)]
        print(f"  {len(topics)} topics created in {time.perf_counter() - started:.1f} s", flush=True)
    return topics


def measure_sends(server, args, senders, topic):
    """Blocks of --seconds of sends from THREADS clients, A (the topic) B (the Public group) A B
    after a warm-up of each: [(kind, calls/s)]."""
    from benchlib import send_blocks

    order = [("topic", topic), ("public", "public")] * 2
    return send_blocks(server.address, senders, order, args.seconds, warmup=WARMUP_SENDS)


def measure_joined_list(server, args):
    """The hub user in --communities communities of --community-topics topics each; --lists
    ListJoinedGroups calls timed (sorted ms) and the first answer's (groups, topics per group,
    unread total)."""
    import support
    from benchlib import run_calls
    from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc, message_pb2, message_pb2_grpc

    md, hub, poster = support.admin_md(), "hub", "poster"
    communities = [f"joined{n:03d}" for n in range(args.communities)]

    async def create(channel, index):
        await group_pb2_grpc.GroupServiceStub(channel).CreateGroup(group_pb2.CreateGroupRequest(
            group_id=communities[index], type=common_pb2.GROUP_TYPE_COMMUNITY, owner_user_id=f"owner{index}",
            profile=common_pb2.GroupProfile(name=f"community {index}"),
            members=[group_pb2.InitialMember(user_id=hub), group_pb2.InitialMember(user_id=poster)]),
            metadata=md, timeout=60)

    started = time.perf_counter()
    asyncio.run(run_calls(server.address, create, len(communities), in_flight=8))
    topics = {}

    async def create_topic(channel, index):
        community, n = communities[index // args.community_topics], index % args.community_topics
        answer = await group_pb2_grpc.GroupServiceStub(channel).CreateTopic(group_pb2.CreateTopicRequest(
            group_id=community, profile=common_pb2.GroupProfile(name=f"topic {n}")), metadata=md, timeout=60)
        topics[index] = answer.topic.topic_id

    asyncio.run(run_calls(server.address, create_topic, len(communities) * args.community_topics, in_flight=8))
    # 1 to 3 messages from the poster in every fourth topic: the hub's unread counts.
    sends = [(topics[index], index % 3 + 1) for index in range(0, len(topics), 4)]
    expected_unread = sum(count for _, count in sends)
    poster_md = support.user_md(poster)

    async def send(channel, index):
        topic, count = sends[index]
        for _ in range(count):
            await message_pb2_grpc.MessageServiceStub(channel).SendGroupMessage(message_pb2.SendGroupMessageRequest(
                group_id=topic, text="unread"), metadata=poster_md, timeout=60)

    asyncio.run(run_calls(server.address, send, len(sends), in_flight=8))
    print(f"  seeded {len(communities)} communities, {len(topics):,} topics, {expected_unread} messages in "
          f"{len(sends)} of them in {time.perf_counter() - started:.1f} s", flush=True)

    hub_md = support.user_md(hub)
    with grpc.insecure_channel(server.address) as channel:
        groups = group_pb2_grpc.GroupServiceStub(channel)

        # The answer's bytes, not decoded: grpcio's Python decode of a 1,000-topic answer is the
        # client's cost, timed apart below.
        raw = channel.unary_unary(
            "/groupd.v1.GroupService/ListJoinedGroups",
            request_serializer=group_pb2.ListJoinedGroupsRequest.SerializeToString, response_deserializer=None)
        request = group_pb2.ListJoinedGroupsRequest(page_size=50)

        def call():
            return raw(request, metadata=hub_md, timeout=60)

        answer = call()
        first = group_pb2.ListJoinedGroupsResponse.FromString(answer)
        assert first == groups.ListJoinedGroups(request, metadata=hub_md, timeout=60)
        for _ in range(9):
            call()
        times = []
        for _ in range(args.lists):
            started = time.perf_counter()
            call()
            times.append((time.perf_counter() - started) * 1000)
        decode_started = time.perf_counter()
        for _ in range(20):
            group_pb2.ListJoinedGroupsResponse.FromString(answer)
        decode_ms = (time.perf_counter() - decode_started) * 1000 / 20
        print(f"  the answer: {len(answer):,} bytes; grpcio's decode of it in the client: {decode_ms:.2f} ms "
              f"(not in the times)", flush=True)
    shape = (len(first.groups), sorted({len(group.topics) for group in first.groups}),
             sum(topic.unread_count for group in first.groups for topic in group.topics), expected_unread,
             first.next_page_token == "")
    return sorted(times), shape


def measure(database, args):
    import support

    senders = [f"sender{n:02d}" for n in range(THREADS)]
    server = support.Groupd(Path(tempfile.mkdtemp(prefix="bench-topics-")), database=database, limits=LIMITS)
    server.start()
    try:
        started = time.perf_counter()
        topics = seed_big_groups(server, args, senders)
        print(f"  setup of the big groups: {time.perf_counter() - started:.0f} s", flush=True)
        rates = measure_sends(server, args, senders, topics[0])
        times, shape = measure_joined_list(server, args)
        return rates, times, shape
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary", type=Path)
    parser.add_argument("--postgres", help="a PostgreSQL cluster URL (a new database is made in it)")
    parser.add_argument("--members", type=int, default=100_000, help="members of the community and of the Public group")
    parser.add_argument("--topics", type=int, default=100, help="topics of the big community")
    parser.add_argument("--seconds", type=float, default=10, help="length of each send block")
    parser.add_argument("--communities", type=int, default=50, help="communities of the joined-list user")
    parser.add_argument("--community-topics", type=int, default=20, help="topics of each of those communities")
    parser.add_argument("--lists", type=int, default=200, help="timed ListJoinedGroups calls")
    args = parser.parse_args()
    # Before support is imported: it reads both when imported.
    os.environ["GROUPD_BIN"] = str(args.binary.resolve())
    if args.postgres:
        os.environ["GROUPD_TEST_POSTGRES_URL"] = args.postgres
    import support  # noqa: E402
    store = "postgres" if args.postgres else "sqlite"
    print(f"{store}: {args.members:,} members, {args.topics} topics; {args.communities} communities x "
          f"{args.community_topics} topics", flush=True)
    rates, times, (groups, topic_counts, unread, expected_unread, one_page) = measure(
        support.new_database() if args.postgres else None, args)
    topic = statistics.mean(rate for kind, rate in rates if kind == "topic")
    public = statistics.mean(rate for kind, rate in rates if kind == "public")
    ratio = topic / public
    print(f"{store}: {THREADS} clients, {args.members:,} members: topic {topic:,.0f} messages/s, Public group "
          f"{public:,.0f} messages/s, topic/public {ratio:.3f} "
          f"({'meets' if ratio >= 0.9 else 'misses'} the target of 0.9)")
    median, p99 = statistics.median(times), percentile(times, 0.99)
    print(f"{store}: ListJoinedGroups (page_size 50) of a member of {groups} communities x {topic_counts} topics "
          f"(one page: {one_page}, unread {unread} of {expected_unread} sent): median {median:.2f} ms, "
          f"p99 {p99:.2f} ms, max {times[-1]:.2f} ms over {len(times)} calls "
          f"(target under 20 ms: median {'meets' if median < 20 else 'misses'}, p99 {'meets' if p99 < 20 else 'misses'})")
    assert groups == args.communities and topic_counts == [args.community_topics], (groups, topic_counts)


if __name__ == "__main__":
    main()
