"""Join applications and invitations (ApplicationService, JoinGroup, InviteMembers) through a real
groupd with stock grpcio: the main flows and their errors on the wire."""
import concurrent.futures
import time

import grpc
import pytest
from google.protobuf import timestamp_pb2

from support import Groupd, admin_md, error_info, expect_error, uid, user_md
from groupd.v1 import (application_pb2, application_pb2_grpc, common_pb2, group_pb2, group_pb2_grpc, member_pb2,
                       member_pb2_grpc)


@pytest.fixture
def groups(channel):
    return group_pb2_grpc.GroupServiceStub(channel)


@pytest.fixture
def members(channel):
    return member_pb2_grpc.MemberServiceStub(channel)


@pytest.fixture
def apps(channel):
    return application_pb2_grpc.ApplicationServiceStub(channel)


def public_group(groups, settings=None, max_members=0):
    """A Public group with a fresh owner, admin and member; returns (group id, owner, admin, member)."""
    owner, admin, member = uid("owner"), uid("admin"), uid("member")
    request = group_pb2.CreateGroupRequest(
        group_id=uid("g"), type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id=owner,
        profile=common_pb2.GroupProfile(name="club"), max_member_count=max_members,
        members=[group_pb2.InitialMember(user_id=admin, role=common_pb2.MEMBER_ROLE_ADMIN),
                 group_pb2.InitialMember(user_id=member, role=common_pb2.MEMBER_ROLE_MEMBER)])
    if settings is not None:
        request.settings.CopyFrom(settings)
    gid = groups.CreateGroup(request, metadata=admin_md(), timeout=10).group.group_id
    return gid, owner, admin, member


def join(members, gid, user, message=""):
    return members.JoinGroup(member_pb2.JoinGroupRequest(group_id=gid, message=message), metadata=user_md(user), timeout=10)


def listing(apps, user, **filters):
    return apps.ListApplications(application_pb2.ListApplicationsRequest(**filters), metadata=user_md(user), timeout=10)


def is_member(members, gid, user):
    try:
        members.GetSelfMemberInfo(member_pb2.GetSelfMemberInfoRequest(group_id=gid), metadata=user_md(user), timeout=10)
        return True
    except grpc.RpcError:
        return False


def test_join_by_approval_accept(groups, members, apps):
    gid, owner, admin, member = public_group(groups)
    user = uid("user")
    pending = join(members, gid, user, "let me in")
    assert pending.outcome == member_pb2.JOIN_OUTCOME_PENDING_APPROVAL
    item = pending.application
    assert item.kind == common_pb2.APPLICATION_KIND_JOIN and item.state == common_pb2.APPLICATION_STATE_PENDING
    assert item.applicant_user_id == user and item.message == "let me in" and item.needs_approval
    again = join(members, gid, user, "please")
    assert again.application.application_id == item.application_id and again.application.message == "please"

    seen = listing(apps, owner)
    assert [a.application_id for a in seen.applications] == [item.application_id]
    assert list(seen.applications[0].caller_roles) == [common_pb2.APPLICATION_ROLE_APPROVER]
    assert seen.unread_count == 1 and not seen.HasField("read_time")
    assert listing(apps, member).applications == []

    expect_error(lambda: join(members, gid, user, "é" * 51), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    expect_error(lambda: join(members, gid, member), grpc.StatusCode.ALREADY_EXISTS, "ALREADY_MEMBER")
    expect_error(lambda: apps.AcceptApplication(application_pb2.AcceptApplicationRequest(application_id=item.application_id),
                                                metadata=user_md(member), timeout=10),
                 grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    expect_error(lambda: apps.AcceptApplication(application_pb2.AcceptApplicationRequest(application_id="ap-missing"),
                                                metadata=user_md(owner), timeout=10),
                 grpc.StatusCode.NOT_FOUND, "APPLICATION_NOT_FOUND")

    accepted = apps.AcceptApplication(application_pb2.AcceptApplicationRequest(
        application_id=item.application_id, message="welcome"), metadata=user_md(admin), timeout=10)
    assert accepted.application.state == common_pb2.APPLICATION_STATE_ACCEPTED
    assert accepted.application.handled_by_user_id == admin and accepted.member.user_id == user
    assert is_member(members, gid, user)

    by_owner = listing(apps, owner).applications[0]
    assert by_owner.handle_status == common_pb2.HANDLE_STATUS_HANDLED_BY_OTHER
    assert by_owner.handled_by_user_id == admin and by_owner.handle_message == "welcome"
    info = expect_error(lambda: apps.AcceptApplication(application_pb2.AcceptApplicationRequest(
        application_id=item.application_id), metadata=user_md(owner), timeout=10),
        grpc.StatusCode.FAILED_PRECONDITION, "APPLICATION_ALREADY_HANDLED")
    assert info.metadata["state"] == "accepted" and info.metadata["handled_by"] == admin


def test_refuse_and_withdraw(groups, members, apps):
    gid, owner, admin, member = public_group(groups)
    refused_user, withdrawing_user = uid("user"), uid("user")
    first = join(members, gid, refused_user).application
    second = join(members, gid, withdrawing_user).application
    refused = apps.RefuseApplication(application_pb2.RefuseApplicationRequest(
        application_id=first.application_id, message="not now"), metadata=user_md(owner), timeout=10)
    assert refused.application.state == common_pb2.APPLICATION_STATE_REFUSED
    assert refused.application.handle_message == "not now"
    assert not is_member(members, gid, refused_user)

    expect_error(lambda: apps.WithdrawApplication(application_pb2.WithdrawApplicationRequest(
        application_id=second.application_id), metadata=user_md(owner), timeout=10),
        grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    withdrawn = apps.WithdrawApplication(application_pb2.WithdrawApplicationRequest(
        application_id=second.application_id), metadata=user_md(withdrawing_user), timeout=10)
    assert withdrawn.application.state == common_pb2.APPLICATION_STATE_WITHDRAWN
    expect_error(lambda: apps.WithdrawApplication(application_pb2.WithdrawApplicationRequest(
        application_id=second.application_id), metadata=user_md(withdrawing_user), timeout=10),
        grpc.StatusCode.FAILED_PRECONDITION, "APPLICATION_ALREADY_HANDLED")
    states = listing(apps, owner, states=[common_pb2.APPLICATION_STATE_REFUSED, common_pb2.APPLICATION_STATE_WITHDRAWN])
    assert {a.application_id for a in states.applications} == {first.application_id, second.application_id}


def test_group_full_at_accept(groups, members, apps):
    gid, owner, _, _ = public_group(groups, max_members=4)
    a, b = uid("user"), uid("user")
    first = join(members, gid, a).application
    second = join(members, gid, b).application
    apps.AcceptApplication(application_pb2.AcceptApplicationRequest(application_id=first.application_id),
                           metadata=user_md(owner), timeout=10)
    expect_error(lambda: apps.AcceptApplication(application_pb2.AcceptApplicationRequest(
        application_id=second.application_id), metadata=user_md(owner), timeout=10),
        grpc.StatusCode.FAILED_PRECONDITION, "GROUP_FULL")


def test_invitation_with_approval_and_consent(groups, members, apps):
    settings = common_pb2.GroupSettings(invite_scope=common_pb2.OPERATOR_SCOPE_ALL_MEMBERS)
    gid, owner, admin, member = public_group(groups, settings)
    invitee = uid("invitee")
    result = members.InviteMembers(member_pb2.InviteMembersRequest(group_id=gid, user_ids=[invitee], message="join us"),
                                   metadata=user_md(member), timeout=10).results[0]
    assert result.result == common_pb2.MEMBER_RESULT_CODE_PENDING and result.application_id
    assert listing(apps, invitee).applications == []
    expect_error(lambda: apps.AcceptApplication(application_pb2.AcceptApplicationRequest(
        application_id=result.application_id), metadata=user_md(invitee), timeout=10),
        grpc.StatusCode.NOT_FOUND, "APPLICATION_NOT_FOUND")

    approved = apps.AcceptApplication(application_pb2.AcceptApplicationRequest(application_id=result.application_id),
                                      metadata=user_md(owner), timeout=10)
    assert approved.application.state == common_pb2.APPLICATION_STATE_PENDING
    assert approved.application.approval.state == common_pb2.DECISION_STATE_ACCEPTED
    assert not approved.HasField("member")
    inbox = listing(apps, invitee, roles=[common_pb2.APPLICATION_ROLE_INVITEE])
    assert [a.application_id for a in inbox.applications] == [result.application_id]
    assert inbox.applications[0].inviter_user_id == member

    joined = apps.AcceptApplication(application_pb2.AcceptApplicationRequest(application_id=result.application_id),
                                    metadata=user_md(invitee), timeout=10)
    assert joined.application.state == common_pb2.APPLICATION_STATE_ACCEPTED and joined.member.user_id == invitee
    assert is_member(members, gid, invitee)
    sent = listing(apps, member, roles=[common_pb2.APPLICATION_ROLE_SENDER])
    assert sent.applications[0].state == common_pb2.APPLICATION_STATE_ACCEPTED
    # The member record keeps how the invitee came in and who invited them.
    assert joined.member.join_source == common_pb2.JOIN_SOURCE_INVITATION
    assert joined.member.inviter_user_id == member


def test_member_records_keep_how_each_member_came_in(groups, members, apps):
    gid, owner, admin, member = public_group(groups)
    applicant = uid("applicant")
    item = join(members, gid, applicant).application
    apps.AcceptApplication(application_pb2.AcceptApplicationRequest(application_id=item.application_id),
                           metadata=user_md(admin), timeout=10)
    info = members.GetMembersInfo(member_pb2.GetMembersInfoRequest(group_id=gid, user_ids=[owner, admin, applicant]),
                                  metadata=admin_md(), timeout=10)
    by_user = {r.member.user_id: (r.member.join_source, r.member.inviter_user_id) for r in info.results}
    assert by_user == {owner: (common_pb2.JOIN_SOURCE_CREATOR, ""),
                       admin: (common_pb2.JOIN_SOURCE_INITIAL_MEMBER, ""),
                       applicant: (common_pb2.JOIN_SOURCE_APPLICATION, admin)}


@pytest.fixture
def clocked(fresh_groupd):
    """A groupd of the test's own on the manual clock, and its (groups, members, apps) stubs."""
    server = fresh_groupd(manual_clock=True).start()
    with grpc.insecure_channel(server.address) as channel:
        yield server, (group_pb2_grpc.GroupServiceStub(channel), member_pb2_grpc.MemberServiceStub(channel),
                       application_pb2_grpc.ApplicationServiceStub(channel))


def test_listing_paging_and_read_report(clocked):
    server, (groups, members, apps) = clocked
    gid, owner, _, _ = public_group(groups)
    ids = []
    for _ in range(5):
        ids.append(join(members, gid, uid("user")).application.application_id)
        server.advance_clock(ms=1)  # distinct creation milliseconds, so the expected order is known
    seen, token = [], ""
    while True:
        page = listing(apps, owner, page_size=2, page_token=token)
        assert len(page.applications) <= 2 and page.unread_count == 5
        seen += [a.application_id for a in page.applications]
        token = page.next_page_token
        if not token:
            break
    assert seen == list(reversed(ids))
    expect_error(lambda: listing(apps, owner, page_token="garbage"), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    expect_error(lambda: listing(apps, owner, page_size=-1), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")

    third = listing(apps, owner).applications[2].create_time
    report = apps.ReportApplicationsRead(application_pb2.ReportApplicationsReadRequest(read_time=third),
                                         metadata=user_md(owner), timeout=10)
    assert report.unread_count == 2 and report.read_time == third
    assert listing(apps, owner).unread_count == 2
    assert listing(apps, owner, group_id=gid, kind=common_pb2.APPLICATION_KIND_INVITATION).applications == []
    report = apps.ReportApplicationsRead(application_pb2.ReportApplicationsReadRequest(), metadata=user_md(owner), timeout=10)
    assert report.unread_count == 0
    expect_error(lambda: apps.ReportApplicationsRead(application_pb2.ReportApplicationsReadRequest(),
                                                     metadata=admin_md(), timeout=10),
                 grpc.StatusCode.INVALID_ARGUMENT, "OPERATOR_REQUIRED")


def test_concurrent_accepts_one_wins(groups, members, apps):
    gid, owner, admin, _ = public_group(groups)
    item = join(members, gid, uid("user")).application

    def accept(user):
        try:
            apps.AcceptApplication(application_pb2.AcceptApplicationRequest(application_id=item.application_id),
                                   metadata=user_md(user), timeout=10)
            return "won"
        except grpc.RpcError as error:
            return error_info(error).reason

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = sorted(pool.map(accept, [owner, admin]))
    assert outcomes == ["APPLICATION_ALREADY_HANDLED", "won"]


def test_expiry_through_the_wire(fresh_groupd):
    """A groupd on the manual clock whose apps expire items after one second."""
    server = fresh_groupd(manual_clock=True, limits={"application_expiry_seconds": 1}).start()
    with grpc.insecure_channel(server.address) as channel:
        groups = group_pb2_grpc.GroupServiceStub(channel)
        members = member_pb2_grpc.MemberServiceStub(channel)
        apps = application_pb2_grpc.ApplicationServiceStub(channel)
        gid, owner, _, _ = public_group(groups)
        user = uid("user")
        item = join(members, gid, user).application
        assert item.expire_time.ToMilliseconds() - item.create_time.ToMilliseconds() == 1000
        assert item.create_time.ToMilliseconds() == server.clock_ms()
        server.advance_clock(ms=999)
        assert listing(apps, owner).applications[0].state == common_pb2.APPLICATION_STATE_PENDING
        server.advance_clock(ms=1)
        listed = listing(apps, owner).applications[0]
        assert listed.state == common_pb2.APPLICATION_STATE_EXPIRED
        expect_error(lambda: apps.AcceptApplication(application_pb2.AcceptApplicationRequest(
            application_id=item.application_id), metadata=user_md(owner), timeout=10),
            grpc.StatusCode.FAILED_PRECONDITION, "APPLICATION_EXPIRED")
        fresh = join(members, gid, user).application
        assert fresh.application_id != item.application_id
