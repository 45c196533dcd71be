"""Policy plugins through a real groupd with stock grpcio: the shipped plugin libraries (built by
`swift build` next to the groupd binary) loaded per app from the YAML configuration."""

import grpc
import pytest
from google.protobuf import field_mask_pb2
from google.rpc import error_details_pb2, status_pb2

from support import APP_ID, GROUPD_BIN, OTHER_APP_ID, OTHER_APP_SECRET, admin_md, error_info, uid, user_md
from groupd.v1 import (common_pb2, group_pb2, group_pb2_grpc, member_pb2, member_pb2_grpc, message_pb2,
                       message_pb2_grpc)

PLUGIN_DIR = GROUPD_BIN.resolve().parent

# app-one: typed custom fields, banned words rejected in names, masked in name cards and messages
# (edits too), invitees starting with "bad" refused, message edits holding "hush" and replies holding "psst" discarded.
# app-two: every message discarded.
POLICY_APP_ONE = f"""\
    policy:
      budget_ms: 5000
      plugins:
        - path: libCustomFieldSchemaPolicy.so
          config: {{group: {{level: {{type: integer, min: 1, max: 10}}}}, unknown: allow}}
          hooks: [validate_group_custom]
        - path: libKeywordPolicy.so
          config: {{words: [forbidden], mode: reject, fields: [name, introduction]}}
          hooks: [before_create_group, before_update_profile]
        - path: libKeywordPolicy.so
          config: {{words: [darn], mode: mask}}
          hooks: [before_set_member_info, before_send_group_message, before_apply_to_join]
        - path: {PLUGIN_DIR}/libPolicyFixtureBehaviors.so
          config: "mode=invite;tag=pytest-invite"
          hooks: [before_invite]
        - path: {PLUGIN_DIR}/libPolicyFixtureBehaviors.so
          config: "mode=edits;key=hush;tag=pytest-edits"
          hooks: [before_send_group_message]
        - path: {PLUGIN_DIR}/libPolicyFixtureBehaviors.so
          config: "mode=replies;key=psst;tag=pytest-replies"
          hooks: [before_send_group_message]
"""
POLICY_APP_TWO = """\
    policy:
      plugins:
        - path: libPolicyFixtureBehaviors.so
          config: "mode=discard;tag=pytest-discard"
          hooks: [before_send_group_message]
"""


def with_policy(config_text):
    """The test config with app-one's and app-two's policy blocks after their secrets."""
    lines = config_text.splitlines(keepends=True)
    out, app = [], None
    for line in lines:
        if line.startswith("  - id: "):
            if app is not None:
                out.append(POLICY_APP_ONE if app == APP_ID else POLICY_APP_TWO)
            app = line.split(":", 1)[1].strip()
        out.append(line)
    out.append(POLICY_APP_ONE if app == APP_ID else POLICY_APP_TWO)
    return "".join(out)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from support import Groupd, new_database

    workdir = tmp_path_factory.mktemp("groupd-policy")
    groupd = Groupd(workdir, database=new_database())
    groupd.config.write_text(with_policy(groupd.config.read_text()))
    groupd.start()
    yield groupd
    groupd.stop()


@pytest.fixture(scope="module")
def stubs(server):
    channel = grpc.insecure_channel(server.address)

    class Stubs:
        groups = group_pb2_grpc.GroupServiceStub(channel)
        members = member_pb2_grpc.MemberServiceStub(channel)
        messages = message_pb2_grpc.MessageServiceStub(channel)

    yield Stubs
    channel.close()


def status_details(rpc_error):
    for key, value in rpc_error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            return status_pb2.Status.FromString(value)
    return None


def bad_request(rpc_error):
    status = status_details(rpc_error)
    for detail in status.details if status else ():
        if detail.type_url.endswith("google.rpc.BadRequest"):
            request = error_details_pb2.BadRequest()
            detail.Unpack(request)
            return request
    return None


def create(stubs, name="team", owner="alice", members=(), group_type=common_pb2.GROUP_TYPE_PUBLIC, custom=None,
           app_md=None):
    request = group_pb2.CreateGroupRequest(
        group_id=uid("g"), type=group_type, owner_user_id=owner, profile=common_pb2.GroupProfile(name=name),
        members=[group_pb2.InitialMember(user_id=user) for user in members], custom=custom or {})
    return stubs.groups.CreateGroup(request, metadata=app_md or admin_md(), timeout=10).group


def rejected(call, code):
    with pytest.raises(grpc.RpcError) as caught:
        call()
    assert caught.value.code() == code, caught.value
    info = error_info(caught.value)
    assert info is not None and info.reason == "POLICY_REJECTED", info
    return caught.value, info


def test_create_group_with_a_banned_word_is_rejected_with_error_keys(stubs):
    error, info = rejected(lambda: create(stubs, name="a FORBIDDEN team"), grpc.StatusCode.FAILED_PRECONDITION)
    assert info.metadata["error_keys"].split(",") == ["name"]
    violations = bad_request(error).field_violations
    assert [v.field for v in violations] == ["name"]
    # Nothing was created: the same id is still free (a clean name goes through).
    assert create(stubs, name="a fine team").profile.name == "a fine team"


def test_update_profile_with_a_banned_word_is_rejected_and_changes_nothing(stubs):
    group = create(stubs, name="before")
    mask = field_mask_pb2.FieldMask(paths=["introduction"])
    _, info = rejected(lambda: stubs.groups.UpdateGroupProfile(group_pb2.UpdateGroupProfileRequest(
        group_id=group.group_id, profile=common_pb2.GroupProfile(introduction="forbidden things"), update_mask=mask),
        metadata=admin_md(), timeout=10), grpc.StatusCode.FAILED_PRECONDITION)
    assert info.metadata["error_keys"] == "introduction"
    got = stubs.groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[group.group_id]),
                                     metadata=admin_md(), timeout=10).groups[0]
    assert got.profile.introduction == ""


def test_topic_names_pass_the_profile_policy_on_create_and_update(stubs):
    community = create(stubs, name="community", group_type=common_pb2.GROUP_TYPE_COMMUNITY)
    _, info = rejected(lambda: stubs.groups.CreateTopic(group_pb2.CreateTopicRequest(
        group_id=community.group_id, profile=common_pb2.GroupProfile(name="forbidden talk")),
        metadata=admin_md(), timeout=10), grpc.StatusCode.FAILED_PRECONDITION)
    assert info.metadata["error_keys"] == "name"
    topic = stubs.groups.CreateTopic(group_pb2.CreateTopicRequest(
        group_id=community.group_id, profile=common_pb2.GroupProfile(name="talk")), metadata=admin_md(),
        timeout=10).topic
    _, info = rejected(lambda: stubs.groups.UpdateTopic(group_pb2.UpdateTopicRequest(
        topic_id=topic.topic_id, profile=common_pb2.GroupProfile(introduction="forbidden things"),
        update_mask=field_mask_pb2.FieldMask(paths=["introduction"])), metadata=admin_md(), timeout=10),
        grpc.StatusCode.FAILED_PRECONDITION)
    assert info.metadata["error_keys"] == "introduction"
    listed = stubs.groups.ListTopics(group_pb2.ListTopicsRequest(group_id=community.group_id), metadata=admin_md(),
                                     timeout=10).topics
    assert [(t.profile.name, t.profile.introduction) for t in listed] == [("talk", "")]


def test_name_card_is_masked_in_what_is_stored(stubs):
    group = create(stubs, owner="alice", members=["bob"])
    stubs.members.UpdateMemberInfo(member_pb2.UpdateMemberInfoRequest(
        group_id=group.group_id, name_card="darn good bob", update_mask=field_mask_pb2.FieldMask(paths=["name_card"])),
        metadata=user_md("bob"), timeout=10)
    got = stubs.members.GetMembersInfo(member_pb2.GetMembersInfoRequest(group_id=group.group_id, user_ids=["bob"]),
                                       metadata=admin_md(), timeout=10)
    assert got.results[0].member.name_card == "*** good bob"


def test_message_text_is_masked_before_it_is_stored(stubs):
    group = create(stubs, owner="alice", members=["bob"])
    sent = stubs.messages.SendGroupMessage(message_pb2.SendGroupMessageRequest(
        group_id=group.group_id, type="text", text="oh darn"), metadata=user_md("bob"), timeout=10)
    assert sent.message.text == "oh ***"
    page = stubs.messages.GetGroupMessages(message_pb2.GetGroupMessagesRequest(
        group_id=group.group_id, direction=message_pb2.HISTORY_DIRECTION_NEWER, page_size=100),
        metadata=user_md("bob"), timeout=10)
    assert [m.text for m in page.messages if m.sender_user_id == "bob"] == ["oh ***"]


def test_a_discarded_message_answers_success_and_is_not_stored(stubs):
    other = admin_md(app=OTHER_APP_ID, secret=OTHER_APP_SECRET)
    group = create(stubs, owner="carol", members=["dave"], app_md=other)
    sent = stubs.messages.SendGroupMessage(message_pb2.SendGroupMessageRequest(
        group_id=group.group_id, type="text", text="hello"),
        metadata=user_md("dave", app=OTHER_APP_ID, secret=OTHER_APP_SECRET), timeout=10)
    assert sent.result == message_pb2.SEND_RESULT_SENT
    page = stubs.messages.GetGroupMessages(message_pb2.GetGroupMessagesRequest(
        group_id=group.group_id, direction=message_pb2.HISTORY_DIRECTION_NEWER, page_size=100),
        metadata=user_md("dave", app=OTHER_APP_ID, secret=OTHER_APP_SECRET), timeout=10)
    assert [m for m in page.messages if m.sender_user_id == "dave"] == []


def test_invite_where_the_plugin_refuses_one_invitee(stubs):
    group = create(stubs, owner="alice", group_type=common_pb2.GROUP_TYPE_WORK)
    response = stubs.members.InviteMembers(member_pb2.InviteMembersRequest(
        group_id=group.group_id, user_ids=["good-1", "bad-2", "good-3"]), metadata=admin_md(operator="alice"), timeout=10)
    by_user = {r.user_id: r for r in response.results}
    assert [r.user_id for r in response.results] == ["good-1", "bad-2", "good-3"]
    assert by_user["bad-2"].result == common_pb2.MEMBER_RESULT_CODE_FAILED
    assert by_user["bad-2"].reason == "POLICY_REJECTED"
    assert by_user["good-1"].result == common_pb2.MEMBER_RESULT_CODE_SUCCESS
    assert by_user["good-3"].result == common_pb2.MEMBER_RESULT_CODE_SUCCESS
    listed = stubs.members.GetMembersInfo(member_pb2.GetMembersInfoRequest(
        group_id=group.group_id, user_ids=["bad-2", "good-1"]), metadata=admin_md(), timeout=10)
    results = {r.user_id: r.result for r in listed.results}
    assert results["bad-2"] == common_pb2.MEMBER_RESULT_CODE_NOT_MEMBER
    assert results["good-1"] == common_pb2.MEMBER_RESULT_CODE_SUCCESS


def test_custom_field_of_the_wrong_type_is_invalid_argument(stubs):
    error, info = rejected(lambda: create(stubs, custom={"level": b"high"}), grpc.StatusCode.INVALID_ARGUMENT)
    assert info.metadata["error_keys"] == "custom.group.level"
    assert [v.field for v in bad_request(error).field_violations] == ["custom.group.level"]
    # A valid value is normalised (integer "007" -> "7") in what is stored.
    group = create(stubs, custom={"level": b"007"})
    assert group.custom["level"] == b"7"


def test_join_message_is_masked(stubs):
    group = create(stubs, owner="alice")
    response = stubs.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=group.group_id, message="darn let me in"),
                                       metadata=user_md(uid("joiner")), timeout=10)
    # A Public group asks for approval by default: the stored application carries the masked message.
    assert response.outcome == member_pb2.JOIN_OUTCOME_PENDING_APPROVAL
    assert response.application.message == "*** let me in"


def test_a_reply_is_moderated_with_the_sequence_it_answers(stubs):
    group = create(stubs, owner="alice", members=["bob"])

    def send(text, reply_to=0):
        return stubs.messages.SendGroupMessage(message_pb2.SendGroupMessageRequest(
            group_id=group.group_id, type="text", text=text, reply_to_sequence=reply_to),
            metadata=user_md("bob"), timeout=10)

    def stored():
        page = stubs.messages.GetGroupMessages(message_pb2.GetGroupMessagesRequest(
            group_id=group.group_id, direction=message_pb2.HISTORY_DIRECTION_NEWER, page_size=100),
            metadata=user_md("bob"), timeout=10)
        return [(m.text, m.reply_to.sequence) for m in page.messages if m.sender_user_id == "bob"]

    # The plugin discards replies holding "psst": it sees message.reply_to only on a reply.
    original = send("psst, not a reply").message
    masked = send("darn right", reply_to=original.sequence).message
    assert (masked.text, masked.reply_to.sequence) == ("*** right", original.sequence)
    discarded = send("psst", reply_to=original.sequence)
    assert discarded.result == message_pb2.SEND_RESULT_SENT and discarded.message.text == "psst"
    assert stored() == [("psst, not a reply", 0), ("*** right", original.sequence)]


def test_an_edit_is_moderated_as_a_send_masked_or_discarded(stubs):
    group = create(stubs, owner="alice", members=["bob"])
    sent = stubs.messages.SendGroupMessage(message_pb2.SendGroupMessageRequest(
        group_id=group.group_id, type="text", text="fine"), metadata=user_md("bob"), timeout=10).message

    def edit(text):
        return stubs.messages.EditGroupMessage(message_pb2.EditGroupMessageRequest(
            group_id=group.group_id, sequence=sent.sequence, text=text), metadata=user_md("bob"), timeout=10)

    def stored():
        page = stubs.messages.GetGroupMessages(message_pb2.GetGroupMessagesRequest(
            group_id=group.group_id, direction=message_pb2.HISTORY_DIRECTION_NEWER, page_size=100),
            metadata=user_md("bob"), timeout=10)
        return [(m.text, m.edit_count) for m in page.messages if m.sender_user_id == "bob"]

    masked = edit("oh darn").message
    assert (masked.text, masked.edit_count) == ("oh ***", 1)
    assert stored() == [("oh ***", 1)]
    # A discarded edit answers as if edited, and nothing is stored.
    discarded = edit("hush now")
    assert not discarded.unchanged and (discarded.message.text, discarded.message.edit_count) == ("hush now", 2)
    assert stored() == [("oh ***", 1)]
