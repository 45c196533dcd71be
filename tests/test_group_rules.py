"""The contract of the per-group rules, through stock grpcio, on SQLite and (GROUPD_TEST_POSTGRES_URL)
PostgreSQL: who edits settings and what an owner's quit does (settings_edit_scope, owner_quit, with
each type's default), the caller's remark in GetGroupsInfo, the privacy of receive_message_option,
and SearchGroups' group-id prefix.
"""
import sqlite3
from urllib.parse import urlsplit

import grpc
import pytest
from google.protobuf import field_mask_pb2

import support
from support import admin_md, error_info, expect_error, uid, user_md
from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc, member_pb2, member_pb2_grpc

ADMIN = common_pb2.MEMBER_ROLE_ADMIN
MEMBER = common_pb2.MEMBER_ROLE_MEMBER
WORK, PUBLIC = common_pb2.GROUP_TYPE_WORK, common_pb2.GROUP_TYPE_PUBLIC
MEETING, AV = common_pb2.GROUP_TYPE_MEETING, common_pb2.GROUP_TYPE_AV_CHAT_ROOM
COMMUNITY = common_pb2.GROUP_TYPE_COMMUNITY
REFUSED = common_pb2.OWNER_QUIT_RULE_REFUSED
TO_MEMBER = common_pb2.OWNER_QUIT_RULE_TO_LONGEST_STANDING_MEMBER
TO_ADMIN = common_pb2.OWNER_QUIT_RULE_TO_LONGEST_STANDING_ADMIN
SCOPE_OWNER = common_pb2.OPERATOR_SCOPE_OWNER
SCOPE_OWNER_AND_ADMINS = common_pb2.OPERATOR_SCOPE_OWNER_AND_ADMINS
SCOPE_ALL = common_pb2.OPERATOR_SCOPE_ALL_MEMBERS

# Each type's defaults (the type table): who edits settings, what an owner's quit does.
DEFAULTS = {
    WORK: (SCOPE_OWNER, TO_MEMBER),
    PUBLIC: (SCOPE_OWNER_AND_ADMINS, REFUSED),
    MEETING: (SCOPE_OWNER_AND_ADMINS, REFUSED),
    AV: (SCOPE_OWNER, REFUSED),
    COMMUNITY: (SCOPE_OWNER_AND_ADMINS, REFUSED),
}


@pytest.fixture
def groups(channel):
    return group_pb2_grpc.GroupServiceStub(channel)


@pytest.fixture
def members(channel):
    return member_pb2_grpc.MemberServiceStub(channel)


def create(stub, group_type, owner, initial=(), settings=None, group_id=None):
    request = group_pb2.CreateGroupRequest(
        group_id=group_id or uid("g"), type=group_type, owner_user_id=owner,
        profile=common_pb2.GroupProfile(name="rules"), settings=settings,
        members=[group_pb2.InitialMember(user_id=user, role=role) for user, role in initial])
    return stub.CreateGroup(request, metadata=admin_md(), timeout=10).group


def update_settings(stub, group_id, user, metadata=None, **settings):
    return stub.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
        group_id=group_id, update_mask=field_mask_pb2.FieldMask(paths=list(settings)),
        settings=common_pb2.GroupSettings(**settings)), metadata=metadata or user_md(user), timeout=10)


def read(stub, group_id, user):
    response = stub.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[group_id]),
                                  metadata=user_md(user), timeout=10)
    assert len(response.groups) == 1, response
    return response.groups[0]


# Who edits settings: settings_edit_scope


@pytest.mark.parametrize("group_type", [WORK, PUBLIC, MEETING, AV, COMMUNITY])
def test_each_type_starts_with_its_defaults(groups, group_type):
    owner = uid("owner")
    group = create(groups, group_type, owner)
    assert (group.settings.settings_edit_scope, group.settings.owner_quit) == DEFAULTS[group_type]
    seen = read(groups, group.group_id, owner)
    assert (seen.settings.settings_edit_scope, seen.settings.owner_quit) == DEFAULTS[group_type]


def test_an_admin_changes_the_join_option_of_a_public_group_as_tencent_allows(groups):
    owner, admin, member = uid("owner"), uid("admin"), uid("member")
    group = create(groups, PUBLIC, owner, [(admin, ADMIN), (member, MEMBER)])
    changed = update_settings(groups, group.group_id, admin, join_option=common_pb2.JOIN_OPTION_FORBIDDEN)
    assert changed.group.settings.join_option == common_pb2.JOIN_OPTION_FORBIDDEN
    info = expect_error(lambda: update_settings(groups, group.group_id, member, join_option=common_pb2.JOIN_OPTION_ANY),
                        grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    assert info.metadata["setting"] == "settings_edit_scope"
    assert read(groups, group.group_id, owner).settings.join_option == common_pb2.JOIN_OPTION_FORBIDDEN


# Each owner-only setting with the value an admin or member tries, the owner's and the backend's.
OWNER_ONLY = [
    ("settings_edit_scope", "settings_edit_scope", SCOPE_OWNER, SCOPE_OWNER_AND_ADMINS),
    ("owner_quit", "owner_quit", TO_MEMBER, TO_ADMIN),
]


@pytest.mark.parametrize("path,setting,value,backend_value", OWNER_ONLY)
def test_only_the_owner_changes_who_edits_settings_and_the_owner_quit_rule(groups, path, setting, value, backend_value):
    owner, admin, member = uid("owner"), uid("admin"), uid("member")
    # Every member may edit the other settings, still not these two.
    group = create(groups, MEETING, owner, [(admin, ADMIN), (member, MEMBER)],
                   settings=common_pb2.GroupSettings(settings_edit_scope=SCOPE_ALL))
    for user in (admin, member):
        info = expect_error(lambda: update_settings(groups, group.group_id, user, **{path: value}),
                            grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
        assert info.metadata["setting"] == setting
    before = read(groups, group.group_id, owner).settings
    assert (before.settings_edit_scope, before.owner_quit) == (SCOPE_ALL, REFUSED)  # unchanged
    assert getattr(update_settings(groups, group.group_id, owner, **{path: value}).group.settings, path) == value
    backend = update_settings(groups, group.group_id, None, metadata=admin_md(), **{path: backend_value})
    assert getattr(backend.group.settings, path) == backend_value


def test_the_owner_narrows_and_widens_who_edits_settings(groups):
    owner, admin, member = uid("owner"), uid("admin"), uid("member")
    group = create(groups, PUBLIC, owner, [(admin, ADMIN), (member, MEMBER)])
    update_settings(groups, group.group_id, owner, settings_edit_scope=SCOPE_OWNER)
    expect_error(lambda: update_settings(groups, group.group_id, admin, join_option=common_pb2.JOIN_OPTION_ANY),
                 grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    update_settings(groups, group.group_id, owner, settings_edit_scope=SCOPE_ALL)
    changed = update_settings(groups, group.group_id, member, join_option=common_pb2.JOIN_OPTION_ANY)
    assert changed.group.settings.join_option == common_pb2.JOIN_OPTION_ANY
    update_settings(groups, group.group_id, owner, settings_edit_scope=common_pb2.OPERATOR_SCOPE_NOBODY)
    expect_error(lambda: update_settings(groups, group.group_id, owner, join_option=common_pb2.JOIN_OPTION_APPROVAL),
                 grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    # The owner keeps the two owner-only settings: the grant can be taken back.
    update_settings(groups, group.group_id, owner, settings_edit_scope=SCOPE_OWNER)
    assert update_settings(groups, group.group_id, owner, join_option=common_pb2.JOIN_OPTION_APPROVAL) \
        .group.settings.join_option == common_pb2.JOIN_OPTION_APPROVAL


def test_bad_owner_settings_are_refused_and_change_nothing(groups):
    owner = uid("owner")
    info = expect_error(lambda: create(groups, AV, owner, settings=common_pb2.GroupSettings(owner_quit=TO_MEMBER)),
                        grpc.StatusCode.FAILED_PRECONDITION, "SETTING_FIXED_BY_TYPE")
    assert info.metadata["setting"] == "owner_quit"
    group_id = uid("g")
    info = expect_error(lambda: create(groups, PUBLIC, owner, group_id=group_id,
                                       settings=common_pb2.GroupSettings(owner_quit=42)),
                        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "settings.owner_quit"
    info = expect_error(lambda: create(groups, PUBLIC, owner, group_id=group_id,
                                       settings=common_pb2.GroupSettings(settings_edit_scope=42)),
                        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "settings.settings_edit_scope"
    missing = groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[group_id]),
                                   metadata=admin_md(), timeout=10)
    assert not missing.groups  # nothing was created

    group = create(groups, PUBLIC, owner)
    for path in ("owner_quit", "settings_edit_scope"):
        info = expect_error(lambda: groups.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
            group_id=group.group_id, update_mask=field_mask_pb2.FieldMask(paths=[path])),
            metadata=user_md(owner), timeout=10), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
        assert info.metadata["field"] == f"settings.{path}"
    room = create(groups, AV, owner)
    info = expect_error(lambda: update_settings(groups, room.group_id, owner, owner_quit=TO_ADMIN),
                        grpc.StatusCode.FAILED_PRECONDITION, "SETTING_FIXED_BY_TYPE")
    assert info.metadata["setting"] == "owner_quit"
    after = read(groups, group.group_id, owner).settings
    assert (after.settings_edit_scope, after.owner_quit) == DEFAULTS[PUBLIC]


# What an owner's quit does: owner_quit


def test_a_public_owner_cannot_quit_by_default(groups, members):
    owner, admin = uid("owner"), uid("admin")
    group = create(groups, PUBLIC, owner, [(admin, ADMIN)])
    info = expect_error(lambda: members.QuitGroup(member_pb2.QuitGroupRequest(group_id=group.group_id),
                                                  metadata=user_md(owner), timeout=10),
                        grpc.StatusCode.FAILED_PRECONDITION, "OWNER_CANNOT_QUIT")
    assert info.metadata["setting"] == "owner_quit"
    assert read(groups, group.group_id, owner).owner_user_id == owner


@pytest.mark.parametrize("group_type", [WORK, PUBLIC, MEETING])
@pytest.mark.parametrize("rule", [TO_MEMBER, TO_ADMIN])
def test_ownership_passes_as_owner_quit_says(groups, members, group_type, rule):
    # Join order: owner, first (member), second (admin where the type has admins), third.
    owner, first, second, third = uid("owner"), uid("first"), uid("second"), uid("third")
    has_admins = group_type != WORK
    group = create(groups, group_type, owner,
                   [(first, MEMBER), (second, ADMIN if has_admins else MEMBER), (third, MEMBER)],
                   settings=common_pb2.GroupSettings(owner_quit=rule))
    quit = members.QuitGroup(member_pb2.QuitGroupRequest(group_id=group.group_id), metadata=user_md(owner), timeout=10)
    heir = second if rule == TO_ADMIN and has_admins else first
    assert quit.new_owner_user_id == heir
    seen = read(groups, group.group_id, heir)
    assert seen.owner_user_id == heir
    assert seen.self_info.role == common_pb2.MEMBER_ROLE_OWNER
    assert seen.member_count == 3


def test_a_work_owner_kept_in_by_the_setting(groups, members):
    owner, member = uid("owner"), uid("member")
    group = create(groups, WORK, owner, [(member, MEMBER)])
    update_settings(groups, group.group_id, owner, owner_quit=REFUSED)
    expect_error(lambda: members.QuitGroup(member_pb2.QuitGroupRequest(group_id=group.group_id),
                                           metadata=user_md(owner), timeout=10),
                 grpc.StatusCode.FAILED_PRECONDITION, "OWNER_CANNOT_QUIT")
    update_settings(groups, group.group_id, owner, owner_quit=TO_ADMIN)  # no admins: the longest-standing member
    quit = members.QuitGroup(member_pb2.QuitGroupRequest(group_id=group.group_id), metadata=user_md(owner), timeout=10)
    assert quit.new_owner_user_id == member


def test_groups_stored_before_the_owner_settings_get_their_types_defaults(fresh_groupd):
    """The migration that adds settings_edit_scope and owner_quit (SQLite v8, PostgreSQL v3): the
    columns are taken away and the migration forgotten, as a database of the version before has them."""
    server = fresh_groupd().start()
    owner = uid("owner")
    ids = {}
    with grpc.insecure_channel(server.address) as channel:
        stub = group_pb2_grpc.GroupServiceStub(channel)
        # The types there were before these settings (Community came later).
        for group_type in (WORK, PUBLIC, MEETING, AV):
            # Non-default values, which the older schema could not hold: the defaults come back.
            settings = common_pb2.GroupSettings(settings_edit_scope=common_pb2.OPERATOR_SCOPE_NOBODY)
            ids[group_type] = create(stub, group_type, owner, settings=settings).group_id
    server.stop()
    if server.database:
        database = urlsplit(server.database).path.lstrip("/")
        support.postgres_cluster().psql(
            "ALTER TABLE groups DROP COLUMN edit_settings_permission, DROP COLUMN owner_quit; "
            "DROP INDEX groups_by_id_bytes; DELETE FROM groupd_migrations WHERE id = 'v3'", database=database)
    else:
        with sqlite3.connect(server.data_dir / "groupd.sqlite") as db:
            db.execute("ALTER TABLE groups DROP COLUMN edit_settings_permission")
            db.execute("ALTER TABLE groups DROP COLUMN owner_quit")
            db.execute("DELETE FROM grdb_migrations WHERE identifier = 'v8'")
    server.start()
    with grpc.insecure_channel(server.address) as channel:
        stub = group_pb2_grpc.GroupServiceStub(channel)
        for group_type, group_id in ids.items():
            seen = read(stub, group_id, owner)
            assert (seen.settings.settings_edit_scope, seen.settings.owner_quit) == DEFAULTS[group_type], group_type


# The caller's remark in GetGroupsInfo (RongCloud's getGroupsInfo)


def test_get_groups_info_returns_the_callers_own_remark(groups, members):
    owner, member = uid("owner"), uid("member")
    group = create(groups, PUBLIC, owner, [(member, MEMBER)])
    members.SetGroupRemark(member_pb2.SetGroupRemarkRequest(group_id=group.group_id, remark="my team"),
                           metadata=user_md(member), timeout=10)
    assert read(groups, group.group_id, member).remark == "my team"
    assert read(groups, group.group_id, owner).remark == ""  # another member's remark stays theirs
    backend = groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[group.group_id]),
                                   metadata=admin_md(), timeout=10)
    assert backend.groups[0].remark == ""
    acting = groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[group.group_id]),
                                  metadata=admin_md(operator=member), timeout=10)
    assert acting.groups[0].remark == "my team"
    members.SetGroupRemark(member_pb2.SetGroupRemarkRequest(group_id=group.group_id, remark=""),
                           metadata=user_md(member), timeout=10)
    assert read(groups, group.group_id, member).remark == ""


# receive_message_option: the caller's own record only


def test_receive_option_is_filled_only_in_the_callers_own_record(groups, members):
    owner, admin, private, other = uid("owner"), uid("admin"), uid("private"), uid("other")
    group = create(groups, PUBLIC, owner, [(admin, ADMIN), (private, MEMBER), (other, MEMBER)])
    members.SetReceiveMessageOption(member_pb2.SetReceiveMessageOptionRequest(
        group_id=group.group_id, option=common_pb2.RECEIVE_MESSAGE_OPTION_NOT_RECEIVE),
        metadata=user_md(private), timeout=10)
    hidden = common_pb2.RECEIVE_MESSAGE_OPTION_UNSPECIFIED
    for viewer in (other, admin, owner):
        info = members.GetMembersInfo(member_pb2.GetMembersInfoRequest(group_id=group.group_id, user_ids=[private]),
                                      metadata=user_md(viewer), timeout=10)
        assert info.results[0].member.user_id == private
        assert info.results[0].member.receive_message_option == hidden, viewer
        listed = members.ListMembers(member_pb2.ListMembersRequest(group_id=group.group_id, page_size=50),
                                     metadata=user_md(viewer), timeout=10)
        by_user = {m.user_id: m for m in listed.members}
        assert by_user[private].receive_message_option == hidden, viewer
        # The viewer's own record keeps theirs.
        assert by_user[viewer].receive_message_option == common_pb2.RECEIVE_MESSAGE_OPTION_RECEIVE, viewer
    own = members.GetMembersInfo(member_pb2.GetMembersInfoRequest(group_id=group.group_id, user_ids=[private]),
                                 metadata=user_md(private), timeout=10)
    assert own.results[0].member.receive_message_option == common_pb2.RECEIVE_MESSAGE_OPTION_NOT_RECEIVE
    # The app's backend (no x-operator-id) sees every member's; acting for a user, that user's view.
    backend = members.GetMembersInfo(member_pb2.GetMembersInfoRequest(group_id=group.group_id, user_ids=[private]),
                                     metadata=admin_md(), timeout=10)
    assert backend.results[0].member.receive_message_option == common_pb2.RECEIVE_MESSAGE_OPTION_NOT_RECEIVE
    acting = members.ListMembers(member_pb2.ListMembersRequest(group_id=group.group_id, page_size=50),
                                 metadata=admin_md(operator=other), timeout=10)
    assert {m.user_id: m for m in acting.members}[private].receive_message_option == hidden


# SearchGroups: group-id prefix


def search_ids(stub, keyword, user):
    response = stub.SearchGroups(group_pb2.SearchGroupsRequest(
        keyword=keyword, fields=[group_pb2.SEARCH_FIELD_GROUP_ID], page_size=100), metadata=user_md(user), timeout=10)
    for result in response.results:
        assert list(result.matched_fields) == [group_pb2.SEARCH_FIELD_GROUP_ID]
    return sorted(result.group.group_id for result in response.results)


def test_search_matches_a_group_id_prefix_with_like_metacharacters_taken_literally(groups):
    owner = uid("owner")
    base = uid("pfx").replace("-", "")  # unique to this test: letters and digits
    made = [f"{base}_a%1", f"{base}_a%2", f"{base}_ab", f"{base}Xa%1", f"{base}_aX1", base]
    for group_id in made:
        create(groups, PUBLIC, owner, group_id=group_id)
    assert search_ids(groups, base, owner) == sorted(made)
    assert search_ids(groups, f"{base}_", owner) == sorted([f"{base}_a%1", f"{base}_a%2", f"{base}_ab", f"{base}_aX1"])
    assert search_ids(groups, f"{base}_a%", owner) == sorted([f"{base}_a%1", f"{base}_a%2"])
    assert search_ids(groups, f"{base}_a%1", owner) == [f"{base}_a%1"]  # exact
    assert search_ids(groups, f"{base}%", owner) == []  # no wildcard
    assert search_ids(groups, f"{base}_a%10", owner) == []
    # Paged: two at a time, each once.
    seen, token = [], ""
    while True:
        page = groups.SearchGroups(group_pb2.SearchGroupsRequest(
            keyword=f"{base}_", fields=[group_pb2.SEARCH_FIELD_GROUP_ID], page_size=2, page_token=token),
            metadata=user_md(owner), timeout=10)
        seen += [result.group.group_id for result in page.results]
        token = page.next_page_token
        if not token:
            break
    assert sorted(seen) == sorted([f"{base}_a%1", f"{base}_a%2", f"{base}_ab", f"{base}_aX1"])


def test_search_by_id_prefix_keeps_work_groups_hidden_from_non_members(groups):
    owner, outsider = uid("owner"), uid("outsider")
    base = uid("wpx").replace("-", "")
    create(groups, WORK, owner, group_id=f"{base}-work")
    create(groups, PUBLIC, owner, group_id=f"{base}-public")
    assert search_ids(groups, base, owner) == sorted([f"{base}-public", f"{base}-work"])
    assert search_ids(groups, base, outsider) == [f"{base}-public"]


# The same cells on the wire: type x setting value x acting role (owner, admin, member, non-member,
# backend); None = allowed, else (status code, reason). Work and AVChatRoom have no admins.

DENIED = (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
NOT_MEMBER = (grpc.StatusCode.PERMISSION_DENIED, "NOT_A_MEMBER")
NOT_FOUND = (grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")
CANNOT_QUIT = (grpc.StatusCode.FAILED_PRECONDITION, "OWNER_CANNOT_QUIT")
OPERATOR_REQUIRED = (grpc.StatusCode.INVALID_ARGUMENT, "OPERATOR_REQUIRED")
ROLES = ("owner", "admin", "member", "non-member", "backend")

SETTINGS_EDIT_CELLS = {
    common_pb2.OPERATOR_SCOPE_NOBODY: (DENIED, DENIED, DENIED, NOT_MEMBER, None),
    SCOPE_OWNER: (None, DENIED, DENIED, NOT_MEMBER, None),
    SCOPE_OWNER_AND_ADMINS: (None, None, DENIED, NOT_MEMBER, None),
    SCOPE_ALL: (None, None, None, NOT_MEMBER, None),
}
OWNER_QUIT_CELLS = {
    REFUSED: (CANNOT_QUIT, None, None, NOT_MEMBER, OPERATOR_REQUIRED),
    TO_MEMBER: (None, None, None, NOT_MEMBER, OPERATOR_REQUIRED),
    TO_ADMIN: (None, None, None, NOT_MEMBER, OPERATOR_REQUIRED),
}


def cast(groups, members, group_type, settings):
    """A group of `group_type` with an owner, an admin (where the type has them) and two members;
    returns the group id and the user id per acting role (None: the backend; absent: no such role)."""
    owner, admin, member, other, outsider = uid("owner"), uid("admin"), uid("member"), uid("other"), uid("outsider")
    has_admins = group_type in (PUBLIC, MEETING)
    initial = [] if group_type == AV else ([(admin, ADMIN)] if has_admins else []) + [(member, MEMBER), (other, MEMBER)]
    group = create(groups, group_type, owner, initial, settings=settings)
    if group_type == AV:  # the audience joins by itself
        for user in (member, other):
            members.JoinGroup(member_pb2.JoinGroupRequest(group_id=group.group_id), metadata=user_md(user), timeout=10)
    users = {"owner": owner, "member": member, "non-member": outsider, "backend": None}
    if has_admins:
        users["admin"] = admin
    return group.group_id, users


def outcome(call):
    try:
        call()
        return None
    except grpc.RpcError as error:
        return error.code(), error_info(error).reason


@pytest.mark.parametrize("scope", list(SETTINGS_EDIT_CELLS))
@pytest.mark.parametrize("group_type", [WORK, PUBLIC, MEETING, AV])
def test_settings_edit_scope_cells(groups, members, group_type, scope):
    for role, expected in zip(ROLES, SETTINGS_EDIT_CELLS[scope]):
        group_id, users = cast(groups, members, group_type, common_pb2.GroupSettings(settings_edit_scope=scope))
        if role not in users:
            continue
        if group_type == WORK and expected == NOT_MEMBER:
            expected = NOT_FOUND  # a Work group does not exist for a non-member
        user = users[role]
        metadata = admin_md() if user is None else user_md(user)
        got = outcome(lambda: update_settings(groups, group_id, user, metadata=metadata,
                                              profile_edit_scope=common_pb2.OPERATOR_SCOPE_NOBODY))
        assert got == expected, (group_type, scope, role)
        changed = read(groups, group_id, users["owner"]).settings.profile_edit_scope == common_pb2.OPERATOR_SCOPE_NOBODY
        assert changed == (expected is None), (group_type, scope, role)


@pytest.mark.parametrize("rule,group_type", [(rule, t) for rule in OWNER_QUIT_CELLS for t in (WORK, PUBLIC, MEETING)]
                         + [(REFUSED, AV)])
def test_owner_quit_cells(groups, members, group_type, rule):
    for role, expected in zip(ROLES, OWNER_QUIT_CELLS[rule]):
        group_id, users = cast(groups, members, group_type, common_pb2.GroupSettings(owner_quit=rule))
        if role not in users:
            continue
        if group_type == WORK and expected == NOT_MEMBER:
            expected = NOT_FOUND
        user = users[role]
        metadata = admin_md() if user is None else user_md(user)
        got = outcome(lambda: members.QuitGroup(member_pb2.QuitGroupRequest(group_id=group_id), metadata=metadata,
                                                timeout=10))
        assert got == expected, (group_type, rule, role)
