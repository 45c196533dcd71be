"""Versioned member sync against a full reload, run by `make bench-sync`.

  python3 scripts/bench_sync.py .build/release/groupd [--members 100000] [--changes 10] [--rounds 21]

A Meeting group of --members members (seeded by the backend's InviteMembers, 1,000 a call) has a
client holding its member version; then --changes writes change its member list (half joins of
new users, half kicks). The figures, groupd pinned to core 0 and the client on core 1:
- SyncMembers from the client's version (one call: the changed members and the removed ids),
  median of --rounds calls;
- a full reload through ListMembers (every page of the app's max_page_size, 50), median of 3;
- a full reload through SyncMembers from version 0 (every page), median of 3.

Then the joined-group list: a user in --groups Work groups (the app's max_groups_per_user) holds
its SyncJoinedGroups version; --changes writes change it (half renames of groups the user is in,
half kicks of the user). The figures: SyncJoinedGroups from that version (median of --rounds), a
full reload through ListJoinedGroups (pages of 100), and SyncJoinedGroups from version 0 (pages
of 100), medians of 3.
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
from google.protobuf import field_mask_pb2  # noqa: E402
from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc, member_pb2, member_pb2_grpc  # noqa: E402

GROUP = "big"
BATCH = 1000


def seed(server, args):
    md = auth_md()
    with grpc.insecure_channel(server.address) as channel:
        group_pb2_grpc.GroupServiceStub(channel).CreateGroup(group_pb2.CreateGroupRequest(
            group_id=GROUP, type=common_pb2.GROUP_TYPE_MEETING, owner_user_id="owner",
            profile=common_pb2.GroupProfile(name="big")), metadata=md, timeout=60)

    async def invite(channel, index):
        users = [f"user{index * BATCH + n:06d}" for n in range(BATCH)]
        answer = await member_pb2_grpc.MemberServiceStub(channel).InviteMembers(
            member_pb2.InviteMembersRequest(group_id=GROUP, user_ids=users), metadata=md, timeout=600)
        ok = sum(r.result == common_pb2.MEMBER_RESULT_CODE_SUCCESS for r in answer.results)
        assert ok == BATCH, f"{ok} of {BATCH} invited"

    return asyncio.run(run_calls(server.address, invite, args.members // BATCH, in_flight=4))[1]


def joined_groups(server, args):
    """The SyncJoinedGroups figures (see the module's text)."""
    hub = "hub"
    md = auth_md()
    hub_md = auth_md(hub, exp_in=3600)

    async def create(channel, index):
        await group_pb2_grpc.GroupServiceStub(channel).CreateGroup(group_pb2.CreateGroupRequest(
            group_id=f"joined{index:05d}", type=common_pb2.GROUP_TYPE_WORK, owner_user_id=f"owner{index}",
            profile=common_pb2.GroupProfile(name=f"joined {index}"), members=[group_pb2.InitialMember(user_id=hub)]),
            metadata=md, timeout=60)

    seconds = asyncio.run(run_calls(server.address, create, args.groups, in_flight=16))[1]
    with grpc.insecure_channel(server.address) as channel:
        groups = group_pb2_grpc.GroupServiceStub(channel)
        members = member_pb2_grpc.MemberServiceStub(channel)

        def sync_all(version=0):
            token, count, removed = "", 0, 0
            while True:
                page = groups.SyncJoinedGroups(group_pb2.SyncJoinedGroupsRequest(
                    version=version, page_size=100, page_token=token), metadata=hub_md, timeout=60)
                assert not page.full_reload_required
                count += len(page.groups)
                removed += len(page.removed_group_ids)
                token = page.next_page_token
                if not token:
                    return count, removed, page.version

        count, _, version = sync_all()
        assert count == args.groups, f"{count} joined groups of {args.groups}"
        print(f"seeded {args.groups:,} Work groups with user {hub} in {seconds:.1f} s; joined-group version {version}")
        renames = args.changes // 2
        for n in range(renames):
            groups.UpdateGroupProfile(group_pb2.UpdateGroupProfileRequest(
                group_id=f"joined{n * 3:05d}", update_mask=field_mask_pb2.FieldMask(paths=["name"]),
                profile=common_pb2.GroupProfile(name=f"renamed {n}")), metadata=md, timeout=10)
        for n in range(args.changes - renames):
            members.KickMembers(member_pb2.KickMembersRequest(group_id=f"joined{n * 3 + 1:05d}", user_ids=[hub]),
                                metadata=md, timeout=10)

        def delta():
            changed, removed, _ = sync_all(version)
            assert (changed, removed) == (renames, args.changes - renames), (changed, removed)

        def list_all():
            return every_page(lambda token: groups.ListJoinedGroups(group_pb2.ListJoinedGroupsRequest(
                page_size=100, page_token=token), metadata=hub_md, timeout=60), lambda page: page.groups)

        deltas, (lists, syncs) = measure(delta, [list_all, sync_all], args.rounds)
        size = args.groups - (args.changes - renames)
        assert {count for _, count in lists} == {size} and {value[0] for _, value in syncs} == {size}
        print(f"SyncJoinedGroups with {args.changes} changes since the client's version, user in {size:,} groups: "
              f"median {statistics.median(deltas):.2f} ms, min {deltas[0]:.2f} ms, max {deltas[-1]:.2f} ms "
              f"over {args.rounds} calls")
        print(f"full reload through ListJoinedGroups ({size:,} groups, pages of 100): median "
              f"{statistics.median(t for t, _ in lists):.0f} ms over 3")
        print(f"full reload through SyncJoinedGroups from version 0 (pages of 100): median "
              f"{statistics.median(t for t, _ in syncs):.0f} ms over 3")


def timed(call):
    start = time.perf_counter()
    value = call()
    return (time.perf_counter() - start) * 1000, value


def every_page(fetch, items):
    """How many `items(page)` every page of `fetch(page_token)` holds together."""
    token, count = "", 0
    while True:
        page = fetch(token)
        count += len(items(page))
        token = page.next_page_token
        if not token:
            return count


def measure(delta, reloads, rounds):
    """`delta` timed `rounds` times after one call to warm up (sorted, ms), and each of `reloads`
    timed 3 times: [(ms, value)]."""
    delta()
    return sorted(timed(delta)[0] for _ in range(rounds)), [[timed(reload) for _ in range(3)] for reload in reloads]


def main():
    args = arguments(members=100_000, changes=10, rounds=21, groups=1000)
    server = client_and_server(args.binary, "sync", limits={"max_members": {"meeting": 0}, "max_users_per_batch": 1000})
    try:
        server.start("full")
        seconds = seed(server, args)
        md = auth_md()
        with grpc.insecure_channel(server.address) as channel:
            members = member_pb2_grpc.MemberServiceStub(channel)
            groups = group_pb2_grpc.GroupServiceStub(channel)
            group = groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[GROUP]), metadata=md, timeout=10).groups[0]
            print(f"seeded {group.member_count:,} members in {seconds:.0f} s; member version {group.member_version}")
            version = group.member_version
            joins = args.changes // 2
            for n in range(joins):
                user = f"newcomer{n}"
                members.JoinGroup(member_pb2.JoinGroupRequest(group_id=GROUP), timeout=10,
                                  metadata=auth_md(user, exp_in=3600))
            for n in range(args.changes - joins):
                members.KickMembers(member_pb2.KickMembersRequest(group_id=GROUP, user_ids=[f"user{n * 7:06d}"]),
                                    metadata=md, timeout=10)

            def delta():
                answer = members.SyncMembers(member_pb2.SyncMembersRequest(group_id=GROUP, version=version),
                                             metadata=md, timeout=60)
                assert not answer.next_page_token and not answer.full_reload_required
                assert len(answer.changed_members) + len(answer.removed_user_ids) == args.changes, answer
                return answer

            def list_all():
                return every_page(lambda token: members.ListMembers(member_pb2.ListMembersRequest(
                    group_id=GROUP, page_token=token), metadata=md, timeout=60), lambda page: page.members)

            def sync_all():
                return every_page(lambda token: members.SyncMembers(member_pb2.SyncMembersRequest(
                    group_id=GROUP, version=0, page_token=token), metadata=md, timeout=60), lambda page: page.changed_members)

            deltas, (lists, syncs) = measure(delta, [list_all, sync_all], args.rounds)
            size = lists[0][1]
            assert {count for _, count in lists} == {size} and {count for _, count in syncs} == {size}
            print(f"SyncMembers with {args.changes} changes since the client's version, group of {size:,} members: "
                  f"median {statistics.median(deltas):.2f} ms, min {deltas[0]:.2f} ms, max {deltas[-1]:.2f} ms "
                  f"over {args.rounds} calls")
            print(f"full reload through ListMembers ({size:,} members, pages of 50): median "
                  f"{statistics.median(t for t, _ in lists):.0f} ms over 3")
            print(f"full reload through SyncMembers from version 0 (pages of 50): median "
                  f"{statistics.median(t for t, _ in syncs):.0f} ms over 3")
        joined_groups(server, args)
    finally:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
