"""Invite links through a real groupd with stock grpcio: create (token once, hashed at rest),
list, revoke, join by token (at once or by application) through JoinGroup's checks, with the
events, the setting that decides who manages links, the per-app limit and every refusal, each
refusal checked to have changed nothing."""
import base64

import grpc
import pytest
from google.protobuf import field_mask_pb2

from support import EventStream, admin_md, expect_error, uid, user_md
from groupd.v1 import (application_pb2, application_pb2_grpc, common_pb2, event_pb2, group_pb2, group_pb2_grpc,
                       member_pb2, member_pb2_grpc)

K = common_pb2
M = member_pb2


@pytest.fixture
def groups(channel):
    return group_pb2_grpc.GroupServiceStub(channel)


@pytest.fixture
def members(channel):
    return member_pb2_grpc.MemberServiceStub(channel)


def create(groups, group_type, owner, users=(), admins=(), max_members=0):
    gid = uid("g")
    groups.CreateGroup(group_pb2.CreateGroupRequest(
        group_id=gid, type=group_type, owner_user_id=owner, profile=K.GroupProfile(name="t"),
        max_member_count=max_members,
        members=[group_pb2.InitialMember(user_id=u, role=K.MEMBER_ROLE_MEMBER) for u in users]
        + [group_pb2.InitialMember(user_id=u, role=K.MEMBER_ROLE_ADMIN) for u in admins]),
        metadata=admin_md(), timeout=10)
    return gid


def new_link(members, gid, md, **kwargs):
    return members.CreateInviteLink(M.CreateInviteLinkRequest(group_id=gid, **kwargs), metadata=md, timeout=10).link


def listed(members, gid, md=None):
    return [link.link_id for link in members.ListInviteLinks(M.ListInviteLinksRequest(group_id=gid),
                                                             metadata=md or admin_md(), timeout=10).links]


def join(members, token, user, message=""):
    return members.JoinByInviteLink(M.JoinByInviteLinkRequest(token=token, message=message), metadata=user_md(user),
                                    timeout=10)


def member_ids(members, gid):
    response = members.ListMembers(M.ListMembersRequest(group_id=gid), metadata=admin_md(), timeout=10)
    return {m.user_id for m in response.members}


def test_create_list_join_revoke_with_events(channel, groups, members):
    owner, admin = uid("owner"), uid("admin")
    gid = create(groups, K.GROUP_TYPE_PUBLIC, owner, admins=[admin])
    stream = EventStream(channel, event_pb2.SubscribeRequest(
        group_ids=[gid], kinds=[K.EVENT_KIND_INVITE_LINK_CREATED, K.EVENT_KIND_INVITE_LINK_REVOKED,
                                K.EVENT_KIND_MEMBER_JOINED]), admin_md())
    stream.until_caught_up()
    link = new_link(members, gid, user_md(admin), max_uses=5)
    # 128 random bits, base64url without padding.
    assert len(link.token) == 22 and len(base64.urlsafe_b64decode(link.token + "==")) == 16
    assert link.link_id and link.link_id != link.token and link.creator_user_id == admin
    assert link.max_uses == 5 and link.use_count == 0 and not link.require_approval and not link.HasField("expire_time")
    other = new_link(members, gid, user_md(owner))
    assert other.token != link.token and other.link_id != link.link_id
    (created, _) = [item.event for item in stream.events(2)]
    assert created.kind == K.EVENT_KIND_INVITE_LINK_CREATED and created.invite_link.link_id == link.link_id
    assert created.invite_link.token == "" and created.operator_user_id == admin
    assert set(created.recipient_user_ids) == {owner, admin}

    # Listing gives ids, never tokens.
    links = members.ListInviteLinks(M.ListInviteLinksRequest(group_id=gid), metadata=user_md(owner), timeout=10).links
    assert [l.link_id for l in links] == [link.link_id, other.link_id] and all(l.token == "" for l in links)

    # A Public group's join option is APPROVAL; the link joins at once.
    user = uid("user")
    joined = join(members, link.token, user)
    assert joined.outcome == M.JOIN_OUTCOME_JOINED
    assert joined.member.join_source == K.JOIN_SOURCE_INVITE_LINK and joined.member.invite_link_id == link.link_id
    (event,) = [item.event for item in stream.events(1)]
    assert event.kind == K.EVENT_KIND_MEMBER_JOINED and list(event.target_user_ids) == [user]
    assert event.member_change.members[0].join_source == K.JOIN_SOURCE_INVITE_LINK
    assert event.member_change.members[0].invite_link_id == link.link_id
    info = members.GetMembersInfo(M.GetMembersInfoRequest(group_id=gid, user_ids=[user]), metadata=admin_md(), timeout=10)
    assert info.results[0].member.invite_link_id == link.link_id
    used = members.ListInviteLinks(M.ListInviteLinksRequest(group_id=gid), metadata=admin_md(), timeout=10).links[0]
    assert used.use_count == 1

    revoked = members.RevokeInviteLink(M.RevokeInviteLinkRequest(group_id=gid, link_id=link.link_id),
                                       metadata=user_md(admin), timeout=10).link
    assert revoked.link_id == link.link_id and revoked.token == ""
    (gone,) = [item.event for item in stream.events(1)]
    assert gone.kind == K.EVENT_KIND_INVITE_LINK_REVOKED and gone.invite_link.link_id == link.link_id
    assert listed(members, gid) == [other.link_id]
    late = uid("late")
    expect_error(lambda: join(members, link.token, late), grpc.StatusCode.FAILED_PRECONDITION, "INVITE_LINK_REVOKED")
    expect_error(lambda: members.RevokeInviteLink(M.RevokeInviteLinkRequest(group_id=gid, link_id=link.link_id),
                                                  metadata=user_md(owner), timeout=10),
                 grpc.StatusCode.FAILED_PRECONDITION, "INVITE_LINK_REVOKED")
    assert late not in member_ids(members, gid)
    stream.cancel()


def test_a_link_that_needs_approval_files_an_application(channel, groups, members):
    owner = uid("owner")
    gid = create(groups, K.GROUP_TYPE_MEETING, owner)  # Meeting joins freely; the link asks for approval
    link = new_link(members, gid, user_md(owner), require_approval=True)
    assert link.require_approval
    user = uid("user")
    pending = join(members, link.token, user, message="let me in")
    assert pending.outcome == M.JOIN_OUTCOME_PENDING_APPROVAL
    assert pending.application.message == "let me in" and pending.application.group_id == gid
    assert user not in member_ids(members, gid)
    apps = application_pb2_grpc.ApplicationServiceStub(channel)
    apps.AcceptApplication(application_pb2.AcceptApplicationRequest(application_id=pending.application.application_id),
                           metadata=user_md(owner), timeout=10)
    assert user in member_ids(members, gid)
    # The member came in by the link, let in by the approver.
    joined = members.GetMembersInfo(M.GetMembersInfoRequest(group_id=gid, user_ids=[user]), metadata=admin_md(),
                                    timeout=10).results[0].member
    assert joined.join_source == K.JOIN_SOURCE_INVITE_LINK and joined.invite_link_id == link.link_id
    assert joined.inviter_user_id == owner
    assert members.ListInviteLinks(M.ListInviteLinksRequest(group_id=gid), metadata=admin_md(),
                                   timeout=10).links[0].use_count == 1


def test_a_work_group_is_joined_through_its_link_only(groups, members):
    owner, member = uid("owner"), uid("member")
    work = create(groups, K.GROUP_TYPE_WORK, owner, users=[member])
    link = new_link(members, work, user_md(member))  # Work: every member manages links
    user = uid("user")
    expect_error(lambda: members.JoinGroup(M.JoinGroupRequest(group_id=work), metadata=user_md(user), timeout=10),
                 grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")
    assert join(members, link.token, user).outcome == M.JOIN_OUTCOME_JOINED
    expect_error(lambda: join(members, link.token, user), grpc.StatusCode.ALREADY_EXISTS, "ALREADY_MEMBER")


def test_used_up_expired_and_unknown_links(fresh_groupd):
    server = fresh_groupd(manual_clock=True)
    server.start()
    with grpc.insecure_channel(server.address) as channel:
        groups = group_pb2_grpc.GroupServiceStub(channel)
        members = member_pb2_grpc.MemberServiceStub(channel)
        owner = uid("owner")
        gid = create(groups, K.GROUP_TYPE_PUBLIC, owner)
        once = new_link(members, gid, user_md(owner), max_uses=1)
        first, second = uid("first"), uid("second")
        join(members, once.token, first)
        expect_error(lambda: join(members, once.token, second), grpc.StatusCode.FAILED_PRECONDITION,
                     "INVITE_LINK_USED_UP")
        assert listed(members, gid) == []  # used up: no longer live

        timed = new_link(members, gid, user_md(owner), expire_seconds=60)
        assert timed.expire_time.ToMilliseconds() - timed.create_time.ToMilliseconds() == 60_000
        server.advance_clock(seconds=59)
        assert listed(members, gid) == [timed.link_id]
        server.advance_clock(seconds=1)
        expect_error(lambda: join(members, timed.token, second), grpc.StatusCode.FAILED_PRECONDITION,
                     "INVITE_LINK_EXPIRED")
        assert listed(members, gid) == []
        # An expired link can still be revoked.
        members.RevokeInviteLink(M.RevokeInviteLinkRequest(group_id=gid, link_id=timed.link_id),
                                 metadata=user_md(owner), timeout=10)

        info = expect_error(lambda: join(members, "A" * 22, second), grpc.StatusCode.NOT_FOUND, "INVITE_LINK_NOT_FOUND")
        assert info.metadata["field"] == "token"
        info = expect_error(lambda: join(members, "", second), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
        assert info.metadata["field"] == "token"
        assert member_ids(members, gid) == {owner, first}


def test_join_checks_of_join_group_apply(groups, members):
    owner, member = uid("owner"), uid("member")
    full = create(groups, K.GROUP_TYPE_PUBLIC, owner, users=[member], max_members=2)
    link = new_link(members, full, user_md(owner))
    expect_error(lambda: join(members, link.token, uid("user")), grpc.StatusCode.FAILED_PRECONDITION, "GROUP_FULL")
    expect_error(lambda: join(members, link.token, member), grpc.StatusCode.ALREADY_EXISTS, "ALREADY_MEMBER")
    expect_error(lambda: members.JoinByInviteLink(M.JoinByInviteLinkRequest(token=link.token), metadata=admin_md(),
                                                  timeout=10),
                 grpc.StatusCode.INVALID_ARGUMENT, "OPERATOR_REQUIRED")
    info = expect_error(lambda: join(members, link.token, uid("user"), message="x" * 101),
                        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "message"
    # Refusals use nothing up.
    assert members.ListInviteLinks(M.ListInviteLinksRequest(group_id=full), metadata=admin_md(),
                                   timeout=10).links[0].use_count == 0


def test_too_many_groups_applies(fresh_groupd):
    server = fresh_groupd(limits={"max_groups_per_user": 1}).start()
    with grpc.insecure_channel(server.address) as channel:
        groups = group_pb2_grpc.GroupServiceStub(channel)
        members = member_pb2_grpc.MemberServiceStub(channel)
        user = uid("user")
        create(groups, K.GROUP_TYPE_PUBLIC, uid("owner"), users=[user])
        owner = uid("owner")
        gid = create(groups, K.GROUP_TYPE_PUBLIC, owner)
        link = new_link(members, gid, user_md(owner))
        expect_error(lambda: join(members, link.token, user), grpc.StatusCode.FAILED_PRECONDITION, "TOO_MANY_GROUPS")
        assert user not in member_ids(members, gid)


def test_invite_link_scope_decides_who_manages_links(groups, members):
    owner, admin, member = uid("owner"), uid("admin"), uid("member")
    gid = create(groups, K.GROUP_TYPE_PUBLIC, owner, users=[member], admins=[admin])
    settings = groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[gid]), metadata=admin_md(),
                                    timeout=10).groups[0].settings
    assert settings.invite_link_scope == K.OPERATOR_SCOPE_OWNER_AND_ADMINS
    for call in (lambda: new_link(members, gid, user_md(member)),
                 lambda: listed(members, gid, user_md(member))):
        info = expect_error(call, grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
        assert info.metadata["setting"] == "invite_link_scope"
    link = new_link(members, gid, user_md(admin))
    expect_error(lambda: members.RevokeInviteLink(M.RevokeInviteLinkRequest(group_id=gid, link_id=link.link_id),
                                                  metadata=user_md(member), timeout=10),
                 grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    stranger = uid("stranger")
    expect_error(lambda: new_link(members, gid, user_md(stranger)), grpc.StatusCode.PERMISSION_DENIED, "NOT_A_MEMBER")

    groups.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
        group_id=gid, settings=K.GroupSettings(invite_link_scope=K.OPERATOR_SCOPE_ALL_MEMBERS),
        update_mask=field_mask_pb2.FieldMask(paths=["invite_link_scope"])), metadata=user_md(owner), timeout=10)
    assert new_link(members, gid, user_md(member)).creator_user_id == member
    assert link.link_id in listed(members, gid, user_md(member))
    info = expect_error(lambda: groups.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
        group_id=gid, settings=K.GroupSettings(), update_mask=field_mask_pb2.FieldMask(paths=["invite_link_scope"])),
        metadata=user_md(owner), timeout=10), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "settings.invite_link_scope"

    # A Work group's default lets every member manage links; an AVChatRoom has none.
    work = create(groups, K.GROUP_TYPE_WORK, owner)
    assert groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[work]), metadata=admin_md(),
                                timeout=10).groups[0].settings.invite_link_scope == K.OPERATOR_SCOPE_ALL_MEMBERS
    room = create(groups, K.GROUP_TYPE_AV_CHAT_ROOM, owner)
    expect_error(lambda: new_link(members, room, admin_md()), grpc.StatusCode.FAILED_PRECONDITION,
                 "INVITE_LINK_NOT_SUPPORTED")
    info = expect_error(lambda: groups.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
        group_id=room, settings=K.GroupSettings(invite_link_scope=K.OPERATOR_SCOPE_OWNER),
        update_mask=field_mask_pb2.FieldMask(paths=["invite_link_scope"])), metadata=admin_md(), timeout=10),
        grpc.StatusCode.FAILED_PRECONDITION, "SETTING_FIXED_BY_TYPE")
    assert info.metadata["setting"] == "invite_link_scope"


def test_bad_revocations(groups, members):
    owner = uid("owner")
    gid = create(groups, K.GROUP_TYPE_PUBLIC, owner)
    elsewhere = create(groups, K.GROUP_TYPE_PUBLIC, owner)
    link = new_link(members, elsewhere, user_md(owner))
    info = expect_error(lambda: members.RevokeInviteLink(M.RevokeInviteLinkRequest(group_id=gid, link_id=link.link_id),
                                                         metadata=user_md(owner), timeout=10),
                        grpc.StatusCode.NOT_FOUND, "INVITE_LINK_NOT_FOUND")
    assert info.metadata["field"] == "link_id"
    info = expect_error(lambda: members.RevokeInviteLink(M.RevokeInviteLinkRequest(group_id=gid),
                                                         metadata=user_md(owner), timeout=10),
                        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "link_id"
    expect_error(lambda: new_link(members, uid("nope"), admin_md()), grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")
    assert listed(members, elsewhere) == [link.link_id]


def test_live_link_limit(fresh_groupd):
    server = fresh_groupd(limits={"max_invite_links_per_group": 2}).start()
    with grpc.insecure_channel(server.address) as channel:
        groups = group_pb2_grpc.GroupServiceStub(channel)
        members = member_pb2_grpc.MemberServiceStub(channel)
        owner = uid("owner")
        gid = create(groups, K.GROUP_TYPE_PUBLIC, owner)
        first = new_link(members, gid, user_md(owner))
        new_link(members, gid, user_md(owner))
        info = expect_error(lambda: new_link(members, gid, user_md(owner)), grpc.StatusCode.FAILED_PRECONDITION,
                            "INVITE_LINKS_FULL")
        assert info.metadata == {"limit_name": "max_invite_links_per_group", "limit": "2"}
        assert len(listed(members, gid)) == 2
        # A revoked link is no longer live: room for a new one.
        members.RevokeInviteLink(M.RevokeInviteLinkRequest(group_id=gid, link_id=first.link_id),
                                 metadata=user_md(owner), timeout=10)
        new_link(members, gid, user_md(owner))
        assert len(listed(members, gid)) == 2


def test_a_one_use_link_admits_one_of_many_racing_users(groups, members):
    import concurrent.futures

    owner = uid("owner")
    gid = create(groups, K.GROUP_TYPE_PUBLIC, owner)
    link = new_link(members, gid, user_md(owner), max_uses=1)
    users = [uid("racer") for _ in range(8)]

    def attempt(user):
        try:
            join(members, link.token, user)
            return "joined"
        except grpc.RpcError as error:
            return error.code().name

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = sorted(pool.map(attempt, users))
    assert outcomes == ["FAILED_PRECONDITION"] * 7 + ["joined"]
    assert len(member_ids(members, gid) & set(users)) == 1


def test_a_banned_user_cannot_join_by_link(channel, members, groups):
    owner, banned, other = uid("owner"), uid("banned"), uid("other")
    at_once = create(groups, K.GROUP_TYPE_WORK, owner)
    by_approval = create(groups, K.GROUP_TYPE_MEETING, owner)
    for gid in (at_once, by_approval):
        members.BanMembers(M.BanMembersRequest(group_id=gid, user_ids=[banned]), metadata=admin_md(), timeout=10)
    open_link = new_link(members, at_once, user_md(owner))
    approval_link = new_link(members, by_approval, user_md(owner), require_approval=True)
    apps = application_pb2_grpc.ApplicationServiceStub(channel)
    for gid, link in ((at_once, open_link), (by_approval, approval_link)):
        expect_error(lambda: join(members, link.token, banned), grpc.StatusCode.PERMISSION_DENIED, "USER_BANNED")
        # Nothing changed: not a member, no application filed, the link's use not counted.
        assert banned not in member_ids(members, gid)
        assert not apps.ListApplications(application_pb2.ListApplicationsRequest(group_id=gid),
                                         metadata=user_md(owner), timeout=10).applications
        assert members.ListInviteLinks(M.ListInviteLinksRequest(group_id=gid), metadata=admin_md(),
                                       timeout=10).links[0].use_count == 0
    # Anyone else still joins through the same link.
    assert join(members, open_link.token, other).outcome == M.JOIN_OUTCOME_JOINED
