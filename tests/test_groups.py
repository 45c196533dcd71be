"""CreateGroup, GetGroupsInfo and DismissGroup through a real groupd, with stock grpcio.

Each RPC once with its main error, the ErrorInfo reason read from grpc-status-details-bin;
cross-app isolation; a user-created group owned by and readable for that user.
"""
import uuid

import grpc
import pytest

from support import OTHER_APP_ID, OTHER_APP_SECRET, admin_md, error_info, user_md
from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc
from google.rpc import error_details_pb2, status_pb2


@pytest.fixture
def stub(channel):
    return group_pb2_grpc.GroupServiceStub(channel)


def new_id(prefix="g"):
    """A custom id no other test of the shared server uses."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def create(stub, md, group_type, group_id="", name="team", members=(), owner="", **profile):
    request = group_pb2.CreateGroupRequest(
        group_id=group_id, type=group_type, owner_user_id=owner,
        profile=common_pb2.GroupProfile(name=name, **profile),
        members=[group_pb2.InitialMember(user_id=user, role=role) for user, role in members])
    return stub.CreateGroup(request, metadata=md, timeout=10)


def info(stub, md, *ids):
    return stub.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=list(ids)), metadata=md, timeout=10)


def status_details(rpc_error):
    """The whole google.rpc.Status of grpc-status-details-bin."""
    for key, value in rpc_error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            return status_pb2.Status.FromString(value)
    return None


def expect_error(call, code, reason):
    """Runs `call`, which must fail with `code`; returns the error and its ErrorInfo (checked)."""
    with pytest.raises(grpc.RpcError) as caught:
        call()
    error = caught.value
    assert error.code() == code, error
    info_ = error_info(error)
    assert info_ is not None, f"no ErrorInfo in {error.trailing_metadata()}"
    assert info_.reason == reason
    assert info_.domain == "groupd"
    status = status_details(error)
    assert status.code == code.value[0]
    assert status.message == error.details()
    return error, info_


def test_create_group(stub):
    group_id = new_id()
    response = create(stub, admin_md(), common_pb2.GROUP_TYPE_PUBLIC, group_id, name="wire",
                      members=[("bob", common_pb2.MEMBER_ROLE_ADMIN), ("carol", common_pb2.MEMBER_ROLE_MEMBER)],
                      owner="alice", introduction="hello")
    group = response.group
    assert group.group_id == group_id
    assert group.type == common_pb2.GROUP_TYPE_PUBLIC
    assert group.owner_user_id == "alice"
    assert group.member_count == 3
    assert group.max_member_count == 2000
    assert group.profile.name == "wire" and group.profile.introduction == "hello"
    assert [(r.user_id, r.result, r.member.role) for r in response.member_results] == [
        ("bob", common_pb2.MEMBER_RESULT_CODE_SUCCESS, common_pb2.MEMBER_ROLE_ADMIN),
        ("carol", common_pb2.MEMBER_RESULT_CODE_SUCCESS, common_pb2.MEMBER_ROLE_MEMBER)]

    # Generated ids and the legacy PRIVATE name.
    legacy = create(stub, user_md("alice"), common_pb2.GROUP_TYPE_PRIVATE).group
    assert legacy.group_id.startswith("@TGS#")
    assert legacy.type == common_pb2.GROUP_TYPE_WORK

    # The main errors: a taken id, and a field over its limit (named, with the limit).
    _, taken = expect_error(lambda: create(stub, user_md("bob"), common_pb2.GROUP_TYPE_WORK, group_id, name="other"),
                            grpc.StatusCode.ALREADY_EXISTS, "GROUP_ID_TAKEN")
    assert taken.metadata["group_id"] == group_id
    assert info(stub, admin_md(), group_id).groups[0].profile.name == "wire"

    long_id = new_id()
    error, invalid = expect_error(lambda: create(stub, user_md("alice"), common_pb2.GROUP_TYPE_WORK, long_id, name="n" * 31),
                                  grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert invalid.metadata["field"] == "profile.name"
    assert invalid.metadata["limit"] == "30"
    bad_requests = [d for d in status_details(error).details if d.type_url.endswith("google.rpc.BadRequest")]
    assert len(bad_requests) == 1
    bad_request = error_details_pb2.BadRequest()
    bad_requests[0].Unpack(bad_request)
    assert [v.field for v in bad_request.field_violations] == ["profile.name"]
    assert info(stub, admin_md(), long_id).failures[0].error == group_pb2.GROUP_LOOKUP_ERROR_NOT_FOUND


def test_get_groups_info(stub):
    work, public = new_id("w"), new_id("p")
    create(stub, user_md("alice"), common_pb2.GROUP_TYPE_WORK, work, members=[("bob", common_pb2.MEMBER_ROLE_MEMBER)])
    create(stub, user_md("alice"), common_pb2.GROUP_TYPE_PUBLIC, public, notification="members only")

    as_member = info(stub, user_md("bob"), work, public, work)
    assert [g.group_id for g in as_member.groups] == [work, public]
    member_view, outsider_view = as_member.groups
    assert not member_view.public_view_only
    assert member_view.member_count == 2 and member_view.owner_user_id == "alice"
    assert member_view.self_info.role == common_pb2.MEMBER_ROLE_MEMBER
    # bob is not in the Public group: its public subset only.
    assert outsider_view.public_view_only
    assert outsider_view.owner_user_id == "alice" and outsider_view.member_count == 1
    assert outsider_view.profile.notification == ""
    assert not outsider_view.HasField("self_info")

    # A non-member does not see the Work group at all.
    as_outsider = info(stub, user_md("eve"), work, public)
    assert [g.group_id for g in as_outsider.groups] == [public]
    assert [(f.group_id, f.error, f.reason) for f in as_outsider.failures] == [
        (work, group_pb2.GROUP_LOOKUP_ERROR_NOT_FOUND, "GROUP_NOT_FOUND")]

    # The main error: a malformed request (empty list, over the batch limit) fails as a whole.
    _, empty = expect_error(lambda: info(stub, user_md("bob")), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert empty.metadata["field"] == "group_ids"
    _, over = expect_error(lambda: info(stub, user_md("bob"), *[new_id() for _ in range(51)]),
                           grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert over.metadata["limit"] == "50"


def test_dismiss_group(stub):
    work, public = new_id("w"), new_id("p")
    create(stub, user_md("olivia"), common_pb2.GROUP_TYPE_WORK, work)
    create(stub, user_md("olivia"), common_pb2.GROUP_TYPE_PUBLIC, public, members=[("mia", common_pb2.MEMBER_ROLE_MEMBER)])
    dismiss = lambda md, group_id: stub.DismissGroup(group_pb2.DismissGroupRequest(group_id=group_id), metadata=md, timeout=10)

    # The main errors: the owner of a Work group needs the admin token; a member may not dismiss.
    expect_error(lambda: dismiss(user_md("olivia"), work), grpc.StatusCode.PERMISSION_DENIED, "ADMIN_TOKEN_REQUIRED")
    expect_error(lambda: dismiss(user_md("mia"), public), grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    expect_error(lambda: dismiss(user_md("eve"), work), grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")
    assert len(info(stub, admin_md(), work, public).groups) == 2

    assert dismiss(admin_md(), work) == group_pb2.DismissGroupResponse()
    assert dismiss(user_md("olivia"), public) == group_pb2.DismissGroupResponse()
    gone = info(stub, admin_md(), work, public)
    assert not gone.groups
    assert [(f.group_id, f.error) for f in gone.failures] == [
        (work, group_pb2.GROUP_LOOKUP_ERROR_NOT_FOUND), (public, group_pb2.GROUP_LOOKUP_ERROR_NOT_FOUND)]
    expect_error(lambda: dismiss(admin_md(), work), grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")


def test_cross_app_isolation(stub):
    group_id = new_id()
    create(stub, user_md("alice"), common_pb2.GROUP_TYPE_PUBLIC, group_id)
    other_admin = admin_md(app=OTHER_APP_ID, secret=OTHER_APP_SECRET)

    read = info(stub, other_admin, group_id)
    assert not read.groups
    assert [(f.group_id, f.error, f.reason) for f in read.failures] == [
        (group_id, group_pb2.GROUP_LOOKUP_ERROR_NOT_FOUND, "GROUP_NOT_FOUND")]
    expect_error(lambda: stub.DismissGroup(group_pb2.DismissGroupRequest(group_id=group_id), metadata=other_admin, timeout=10),
                 grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")
    # Untouched in its own app.
    assert info(stub, user_md("alice"), group_id).groups[0].owner_user_id == "alice"
    # And app-two may use the same id for a group of its own.
    mine = create(stub, other_admin, common_pb2.GROUP_TYPE_PUBLIC, group_id, owner="zed").group
    assert mine.owner_user_id == "zed"
    assert info(stub, user_md("alice"), group_id).groups[0].owner_user_id == "alice"


def test_user_created_group_is_owned_by_the_user(stub):
    group = create(stub, user_md("ursula"), common_pb2.GROUP_TYPE_MEETING, name="mine").group
    assert group.owner_user_id == "ursula"
    assert group.self_info.user_id == "ursula"
    assert group.self_info.role == common_pb2.MEMBER_ROLE_OWNER
    read = info(stub, user_md("ursula"), group.group_id).groups
    assert len(read) == 1
    assert read[0].owner_user_id == "ursula"
    assert read[0].member_count == 1
    assert read[0].self_info.role == common_pb2.MEMBER_ROLE_OWNER
    assert not read[0].public_view_only
    assert read[0].profile.name == "mine"
