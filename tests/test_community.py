"""The Community group type through a real groupd with stock grpcio, on SQLite and (with
GROUPD_TEST_POSTGRES_URL) PostgreSQL: its defaults as Tencent's type table gives them (100,000
members, free join, members invite, admins, history visible from before joining, unread counts and
@mentions, the owner cannot quit), the join option changing how one joins, searching and listing,
and the per-app member limit.
"""
import grpc
import pytest

from support import MessageApi, admin_md, expect_error, uid, user_md
from groupd.v1 import common_pb2, group_pb2, member_pb2, message_pb2

K = common_pb2
COMMUNITY, MEMBER, ADMIN = K.GROUP_TYPE_COMMUNITY, K.MEMBER_ROLE_MEMBER, K.MEMBER_ROLE_ADMIN


@pytest.fixture
def api(channel):
    return MessageApi(channel)


def info(api, group, user):
    return api.groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[group]), metadata=user_md(user),
                                    timeout=10).groups[0]


def joined(api, user):
    return {g.group_id: g for g in api.groups.ListJoinedGroups(
        group_pb2.ListJoinedGroupsRequest(page_size=100), metadata=user_md(user), timeout=10).groups}


def test_a_community_starts_with_tencents_defaults(api):
    owner = uid("owner")
    group = api.create(COMMUNITY, owner)
    created = info(api, group, owner)
    assert created.type == COMMUNITY and created.max_member_count == 100_000
    s = created.settings
    assert (s.join_option, s.invite_scope, s.invitee_consent, s.invite_approval) == (
        K.JOIN_OPTION_ANY, K.OPERATOR_SCOPE_ALL_MEMBERS, K.REQUIREMENT_NOT_REQUIRED, K.REQUIREMENT_NOT_REQUIRED)
    assert (s.remove_scope, s.profile_edit_scope, s.mute_scope, s.settings_edit_scope, s.owner_quit) == (
        K.OPERATOR_SCOPE_OWNER_AND_ADMINS, K.OPERATOR_SCOPE_OWNER_AND_ADMINS, K.OPERATOR_SCOPE_OWNER_AND_ADMINS,
        K.OPERATOR_SCOPE_OWNER_AND_ADMINS, K.OWNER_QUIT_RULE_REFUSED)
    assert (s.mention_all_scope, s.invite_link_scope, s.pin_scope) == (
        K.OPERATOR_SCOPE_OWNER_AND_ADMINS, K.OPERATOR_SCOPE_ALL_MEMBERS, K.OPERATOR_SCOPE_OWNER_AND_ADMINS)


def test_anyone_joins_members_invite_and_newcomers_read_earlier_history(api):
    owner, mia, late, guest = uid("owner"), uid("mia"), uid("late"), uid("guest")
    group = api.create(COMMUNITY, owner, [(mia, MEMBER)])
    before = api.send(group, mia, "before you came")
    # A non-member finds it and joins without approval.
    found = api.groups.SearchGroups(group_pb2.SearchGroupsRequest(keyword=group), metadata=user_md(late), timeout=10)
    assert [r.group.group_id for r in found.results] == [group] and found.results[0].group.public_view_only
    outcome = api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=group), metadata=user_md(late), timeout=10)
    assert outcome.outcome == member_pb2.JOIN_OUTCOME_JOINED
    # History from before the join is theirs to read, and to reply to.
    assert [m.sequence for m in api.history(group, late)] == [before.sequence]
    api.send(group, late, "hello", reply_to_sequence=before.sequence)
    # An ordinary member invites a user straight in: no consent, no approval.
    invited = api.members.InviteMembers(member_pb2.InviteMembersRequest(group_id=group, user_ids=[guest]),
                                        metadata=user_md(mia), timeout=10).results
    assert [(r.user_id, r.result) for r in invited] == [(guest, K.MEMBER_RESULT_CODE_SUCCESS)]
    assert info(api, group, guest).self_info.user_id == guest


def test_unread_counts_mentions_admins_and_the_owner_who_cannot_quit(api):
    owner, mia, max_ = uid("owner"), uid("mia"), uid("max")
    group = api.create(COMMUNITY, owner, [(mia, MEMBER), (max_, MEMBER)])
    api.members.SetMemberRole(member_pb2.SetMemberRoleRequest(group_id=group, user_id=mia, role=ADMIN),
                              metadata=user_md(owner), timeout=10)
    assert info(api, group, mia).self_info.role == ADMIN
    # An admin @alls (owner and admins may); an ordinary member may not.
    api.send(group, mia, "all hands", mention_all=True)
    expect_error(lambda: api.send(group, max_, "me too", mention_all=True), grpc.StatusCode.PERMISSION_DENIED,
                 "PERMISSION_DENIED")
    api.send(group, mia, "and you", mentioned_user_ids=[max_])
    listed = joined(api, max_)[group]
    assert listed.unread_count == 2 and listed.unread_mention == K.UNREAD_MENTION_ALL_AND_ME
    read = api.messages.MarkGroupRead(message_pb2.MarkGroupReadRequest(group_id=group), metadata=user_md(max_),
                                      timeout=10)
    assert read.unread_count == 0
    assert joined(api, max_)[group].unread_count == 0
    expect_error(lambda: api.members.QuitGroup(member_pb2.QuitGroupRequest(group_id=group), metadata=user_md(owner),
                                               timeout=10), grpc.StatusCode.FAILED_PRECONDITION, "OWNER_CANNOT_QUIT")


def test_the_join_option_asks_for_approval_or_forbids_joining(api):
    owner, applicant = uid("owner"), uid("applicant")
    group = api.create(COMMUNITY, owner, settings=K.GroupSettings(join_option=K.JOIN_OPTION_APPROVAL))
    outcome = api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=group), metadata=user_md(applicant),
                                    timeout=10)
    assert outcome.outcome == member_pb2.JOIN_OUTCOME_PENDING_APPROVAL
    closed = api.create(COMMUNITY, owner, settings=K.GroupSettings(join_option=K.JOIN_OPTION_FORBIDDEN))
    expect_error(lambda: api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=closed),
                                               metadata=user_md(applicant), timeout=10),
                 grpc.StatusCode.PERMISSION_DENIED, "JOIN_FORBIDDEN")


def test_the_apps_member_limit_applies(fresh_groupd):
    server = fresh_groupd(limits={"max_members": {"community": 2}}).start()
    with grpc.insecure_channel(server.address) as channel:
        api = MessageApi(channel)
        owner = uid("owner")
        group = api.create(COMMUNITY, owner, [(uid("m"), MEMBER)])
        assert info(api, group, owner).max_member_count == 2
        expect_error(lambda: api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=group),
                                                   metadata=user_md(uid("third")), timeout=10),
                     grpc.StatusCode.FAILED_PRECONDITION, "GROUP_FULL")
