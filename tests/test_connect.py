"""The Connect protocol (connectrpc.com/docs/protocol) beside gRPC on groupd's port, through
tests/connect_client.py (HTTP/1.1 by http.client, HTTP/2 with prior knowledge by python-h2):

- every unary method of every groupd.v1 service (found in the descriptors, so a new one fails the
  coverage test until it has a row) in JSON and in binary protobuf over HTTP/1.1, a subset over
  HTTP/2, each row with a specific outcome, checked over gRPC too so the row itself is right;
- every refusal of the protocol: JSON that does not parse, an unknown field, a wrong type, a field
  given twice, a missing or unsupported content type, a body over max_message_bytes, GET, an
  unknown method, a bad protocol version, a bad timeout, an unsupported content encoding, a unary
  content type on a streaming method and the reverse, a bidirectional method; each answered with
  the Connect error object under the right HTTP status, and gRPC calls still served after it;
- gzip and deflate requests, gzip responses from 1024 bytes on (unary and per stream message);
- deadlines: a Subscribe stream and a unary call held by a hanging policy webhook, both ended by
  Connect-Timeout-Ms: 1 with deadline_exceeded;
- tenant isolation: app-two's tokens see nothing of app-one's group over Connect;
- Subscribe as a Connect stream: an event the test causes, then a resume from its cursor;
- the `protocol` label of groupd_rpc_calls_total and field of the access log;
- HTTP/1.1 keep-alive (two calls on one connection) and pipelining (two requests written at once,
  two responses in order).
"""
import gzip
import http.client
import json
import socket
import threading
import time
import urllib.request
import zlib
from pathlib import Path

import grpc
import pytest
from google.protobuf import field_mask_pb2, timestamp_pb2
from grpc.health.v1 import health_pb2, health_pb2_grpc

from connect_client import ConnectClient, ConnectError, HTTP_STATUS, envelope, read_http1_response
from support import (GROUPD_BIN, OTHER_APP_ID, OTHER_APP_SECRET, Groupd, admin_md, error_info, free_port, mint_token,
                     new_database, uid, user_md, wait_for)
from groupd.v1 import (application_pb2, application_pb2_grpc, common_pb2, event_pb2, group_pb2, group_pb2_grpc,
                       member_pb2, member_pb2_grpc, message_pb2, message_pb2_grpc)

SERVICES = {"GroupService": group_pb2, "MemberService": member_pb2, "MessageService": message_pb2,
            "ApplicationService": application_pb2, "EventService": event_pb2}
SUBSCRIBE = "/groupd.v1.EventService/Subscribe"
INFO = "/groupd.v1.GroupService/GetGroupsInfo"
CREATE = "/groupd.v1.GroupService/CreateGroup"
MASK = field_mask_pb2.FieldMask
PUBLIC = common_pb2.GROUP_TYPE_PUBLIC
SUCCESS = common_pb2.MEMBER_RESULT_CODE_SUCCESS
PLUGIN_DIR = GROUPD_BIN.resolve().parent


def other_admin_md():
    return [("authorization", "Bearer " + mint_token(app=OTHER_APP_ID, secret=OTHER_APP_SECRET))]


class Stubs:
    def __init__(self, channel):
        self.group = group_pb2_grpc.GroupServiceStub(channel)
        self.member = member_pb2_grpc.MemberServiceStub(channel)
        self.message = message_pb2_grpc.MessageServiceStub(channel)
        self.application = application_pb2_grpc.ApplicationServiceStub(channel)
        self.health = health_pb2_grpc.HealthStub(channel)


@pytest.fixture(scope="module")
def grpc_channel(groupd):
    with grpc.insecure_channel(groupd.address) as channel:
        yield channel


@pytest.fixture(scope="module")
def stubs(grpc_channel):
    return Stubs(grpc_channel)


@pytest.fixture(scope="module")
def client(groupd):
    return ConnectClient(groupd.address)


def grpc_serves(stubs):
    """gRPC on the same port still answers (after whatever a Connect request did)."""
    assert stubs.health.Check(health_pb2.HealthCheckRequest(), timeout=10).status == \
        health_pb2.HealthCheckResponse.SERVING
    gid = uid("g")
    stubs.group.CreateGroup(group_pb2.CreateGroupRequest(
        group_id=gid, type=PUBLIC, owner_user_id=uid("o"), profile=common_pb2.GroupProfile(name="after")),
        metadata=admin_md(), timeout=10)
    assert stubs.group.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[gid]), metadata=admin_md(),
                                     timeout=10).groups[0].profile.name == "after"


class World:
    """App-one's group for one row, made over gRPC: a Public group (joins need approval) with an
    owner and a member, an applicant's pending application, a message, an invite link, an
    attribute and a counter."""

    def __init__(self, stubs):
        self.stubs = stubs
        self.owner, self.member, self.applicant = uid("owner"), uid("member"), uid("applicant")
        self.group_id = uid("g")
        self.name = uid("name")[:30]
        stubs.group.CreateGroup(group_pb2.CreateGroupRequest(
            group_id=self.group_id, type=PUBLIC, owner_user_id=self.owner,
            profile=common_pb2.GroupProfile(name=self.name, introduction="connect"),
            members=[group_pb2.InitialMember(user_id=self.member, role=common_pb2.MEMBER_ROLE_MEMBER)]),
            metadata=admin_md(), timeout=10)
        stubs.member.JoinGroup(member_pb2.JoinGroupRequest(group_id=self.group_id, message="let me in"),
                               metadata=user_md(self.applicant), timeout=10)
        self.application_id = stubs.application.ListApplications(application_pb2.ListApplicationsRequest(
            group_id=self.group_id), metadata=user_md(self.owner), timeout=10).applications[0].application_id
        self.text = uid("text")
        self.sequence = stubs.message.SendGroupMessage(message_pb2.SendGroupMessageRequest(
            group_id=self.group_id, client_message_id=uid("m"), type="text", text=self.text),
            metadata=user_md(self.owner), timeout=10).message.sequence
        self.link = stubs.member.CreateInviteLink(member_pb2.CreateInviteLinkRequest(group_id=self.group_id),
                                                  metadata=user_md(self.owner), timeout=10).link
        stubs.group.SetGroupAttributes(group_pb2.SetGroupAttributesRequest(
            group_id=self.group_id, attributes=[group_pb2.AttributeWrite(key="k", value=b"\x00\xffvalue")]),
            metadata=user_md(self.owner), timeout=10)
        stubs.group.IncrementGroupCounters(group_pb2.IncrementGroupCountersRequest(
            group_id=self.group_id, deltas={"n": 1}), metadata=user_md(self.owner), timeout=10)

    def info(self):
        return self.stubs.group.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[self.group_id]),
                                              metadata=admin_md(), timeout=10).groups[0]


def community_with_permission_group(w, members=()):
    """A Community owned by the world's owner with its member, and a permission group granting
    PIN_MESSAGES with `members` in it (made over gRPC); (community id, permission group id)."""
    community = uid("c")
    w.stubs.group.CreateGroup(group_pb2.CreateGroupRequest(
        group_id=community, type=common_pb2.GROUP_TYPE_COMMUNITY, owner_user_id=w.owner,
        profile=common_pb2.GroupProfile(name="community"),
        members=[group_pb2.InitialMember(user_id=w.member, role=common_pb2.MEMBER_ROLE_MEMBER)]),
        metadata=admin_md(), timeout=10)
    pg = w.stubs.group.CreatePermissionGroup(group_pb2.CreatePermissionGroupRequest(
        group_id=community, name="pins", permissions=[common_pb2.PERMISSION_PIN_MESSAGES]),
        metadata=admin_md(), timeout=10).permission_group.permission_group_id
    if members:
        w.stubs.group.AddPermissionGroupMembers(group_pb2.AddPermissionGroupMembersRequest(
            group_id=community, permission_group_id=pg, user_ids=list(members)), metadata=admin_md(), timeout=10)
    return community, pg


def ok(check=lambda response, world: True):
    return ("ok", check)


def fails(code, reason):
    return ("error", (code, reason))


G, M, S, A = "GroupService", "MemberService", "MessageService", "ApplicationService"
# (service, method): (request(world) -> message, metadata(world), expected outcome). A request
# builder may prepare over gRPC (world.stubs) first.
UNARY = {
    (G, "CreateGroup"): (lambda w: group_pb2.CreateGroupRequest(
        group_id=w.group_id + "-new", type=common_pb2.GROUP_TYPE_WORK, owner_user_id=w.owner,
        profile=common_pb2.GroupProfile(name="créé ✓", face_url="https://x/y.png"),
        members=[group_pb2.InitialMember(user_id=w.member, role=common_pb2.MEMBER_ROLE_MEMBER)],
        settings=common_pb2.GroupSettings(join_option=common_pb2.JOIN_OPTION_FORBIDDEN)),
        lambda w: admin_md(),
        ok(lambda r, w: (r.group.group_id, r.group.profile.name, r.group.member_count,
                         r.group.settings.join_option) == (w.group_id + "-new", "créé ✓", 2,
                                                           common_pb2.JOIN_OPTION_FORBIDDEN))),
    (G, "GetGroupsInfo"): (lambda w: group_pb2.GetGroupsInfoRequest(group_ids=[w.group_id, w.group_id + "-none"]),
                           lambda w: admin_md(),
                           ok(lambda r, w: [g.profile.name for g in r.groups] == [w.name] and
                              [(f.group_id, f.reason) for f in r.failures] == [(w.group_id + "-none", "GROUP_NOT_FOUND")])),
    (G, "UpdateGroupProfile"): (lambda w: group_pb2.UpdateGroupProfileRequest(
        group_id=w.group_id, update_mask=MASK(paths=["name", "introduction"]),
        profile=common_pb2.GroupProfile(name="renamed", introduction="")),
        lambda w: user_md(w.owner),
        ok(lambda r, w: (w.info().profile.name, w.info().profile.introduction) == ("renamed", ""))),
    (G, "UpdateGroupSettings"): (lambda w: group_pb2.UpdateGroupSettingsRequest(
        group_id=w.group_id, update_mask=MASK(paths=["join_option"]),
        settings=common_pb2.GroupSettings(join_option=common_pb2.JOIN_OPTION_ANY)),
        lambda w: user_md(w.owner), ok(lambda r, w: w.info().settings.join_option == common_pb2.JOIN_OPTION_ANY)),
    (G, "DismissGroup"): (lambda w: group_pb2.DismissGroupRequest(group_id=w.group_id),
                          lambda w: user_md(w.member), fails("PERMISSION_DENIED", "PERMISSION_DENIED")),
    (G, "RevokeGroup"): (lambda w: group_pb2.RevokeGroupRequest(group_id=w.group_id, reason="spam"),
                         lambda w: user_md(w.owner), fails("PERMISSION_DENIED", "ADMIN_TOKEN_REQUIRED")),
    (G, "TransferOwnership"): (lambda w: group_pb2.TransferOwnershipRequest(group_id=w.group_id,
                                                                            new_owner_user_id=w.member),
                               lambda w: user_md(w.owner), ok(lambda r, w: w.info().owner_user_id == w.member)),
    (G, "SetGroupMute"): (lambda w: group_pb2.SetGroupMuteRequest(group_id=w.group_id, muted=True,
                                                                  mode=common_pb2.GROUP_MUTE_MODE_ALL),
                          lambda w: user_md(w.owner), ok(lambda r, w: w.info().mute.operator_user_id == w.owner)),
    (G, "UpdateMuteBypassList"): (lambda w: group_pb2.UpdateMuteBypassListRequest(group_id=w.group_id,
                                                                                  add_user_ids=[w.member]),
                                  lambda w: user_md(w.owner), ok()),
    (G, "ListJoinedGroups"): (lambda w: group_pb2.ListJoinedGroupsRequest(), lambda w: user_md(w.member),
                              ok(lambda r, w: w.group_id in str(r))),
    (G, "SearchGroups"): (lambda w: group_pb2.SearchGroupsRequest(keyword=w.group_id), lambda w: user_md(w.member),
                          ok(lambda r, w: w.group_id in str(r))),
    (G, "SyncJoinedGroups"): (lambda w: group_pb2.SyncJoinedGroupsRequest(), lambda w: user_md(w.member),
                              ok(lambda r, w: w.group_id in str(r))),
    (G, "CreateTopic"): (lambda w: group_pb2.CreateTopicRequest(group_id=w.group_id,
                                                                profile=common_pb2.GroupProfile(name="t")),
                         lambda w: user_md(w.owner), fails("FAILED_PRECONDITION", "TOPICS_NOT_SUPPORTED")),
    (G, "UpdateTopic"): (lambda w: group_pb2.UpdateTopicRequest(topic_id=w.group_id, update_mask=MASK(paths=["name"]),
                                                                profile=common_pb2.GroupProfile(name="t")),
                         lambda w: user_md(w.owner), fails("INVALID_ARGUMENT", "INVALID_ARGUMENT")),
    (G, "DeleteTopic"): (lambda w: group_pb2.DeleteTopicRequest(topic_id=w.group_id + "@TOPIC#_NOSUCHTOPIC00"),
                         lambda w: user_md(w.owner), fails("FAILED_PRECONDITION", "TOPICS_NOT_SUPPORTED")),
    (G, "ListTopics"): (lambda w: group_pb2.ListTopicsRequest(group_id=w.group_id), lambda w: user_md(w.member),
                        fails("FAILED_PRECONDITION", "TOPICS_NOT_SUPPORTED")),
    (G, "CreatePermissionGroup"): (
        lambda w: group_pb2.CreatePermissionGroupRequest(
            group_id=community_with_permission_group(w)[0], name="mods", custom_data=b"\x00\xff",
            permissions=[common_pb2.PERMISSION_MUTE_MEMBERS, common_pb2.PERMISSION_PIN_MESSAGES]),
        lambda w: user_md(w.owner),
        ok(lambda r, w: list(r.permission_group.permissions) == [common_pb2.PERMISSION_MUTE_MEMBERS,
                                                                 common_pb2.PERMISSION_PIN_MESSAGES]
           and r.permission_group.custom_data == b"\x00\xff")),
    (G, "UpdatePermissionGroup"): (
        lambda w: group_pb2.UpdatePermissionGroupRequest(
            group_id=(ids := community_with_permission_group(w))[0], permission_group_id=ids[1],
            update_mask=MASK(paths=["name"]), name="renamed"),
        lambda w: user_md(w.owner), ok(lambda r, w: r.permission_group.name == "renamed")),
    (G, "DeletePermissionGroup"): (
        lambda w: group_pb2.DeletePermissionGroupRequest(
            group_id=(ids := community_with_permission_group(w))[0], permission_group_id=ids[1]),
        lambda w: user_md(w.owner), ok()),
    (G, "ListPermissionGroups"): (
        lambda w: group_pb2.ListPermissionGroupsRequest(group_id=community_with_permission_group(w)[0]),
        lambda w: user_md(w.member),
        ok(lambda r, w: [g.name for g in r.permission_groups] == ["everyone", "pins"])),
    (G, "AddPermissionGroupMembers"): (
        lambda w: group_pb2.AddPermissionGroupMembersRequest(
            group_id=(ids := community_with_permission_group(w))[0], permission_group_id=ids[1], user_ids=[w.member]),
        lambda w: user_md(w.owner),
        ok(lambda r, w: [x.result for x in r.results] == [common_pb2.MEMBER_RESULT_CODE_SUCCESS])),
    (G, "RemovePermissionGroupMembers"): (
        lambda w: group_pb2.RemovePermissionGroupMembersRequest(
            group_id=(ids := community_with_permission_group(w, [w.member]))[0], permission_group_id=ids[1],
            user_ids=[w.member]),
        lambda w: user_md(w.owner),
        ok(lambda r, w: [x.result for x in r.results] == [common_pb2.MEMBER_RESULT_CODE_SUCCESS])),
    (G, "ListPermissionGroupMembers"): (
        lambda w: group_pb2.ListPermissionGroupMembersRequest(
            group_id=(ids := community_with_permission_group(w, [w.member]))[0], permission_group_id=ids[1]),
        lambda w: user_md(w.owner), ok(lambda r, w: list(r.user_ids) == [w.member])),
    (G, "GetMemberPermissions"): (
        lambda w: group_pb2.GetMemberPermissionsRequest(
            group_id=community_with_permission_group(w, [w.member])[0], user_id=w.member),
        lambda w: user_md(w.owner),
        ok(lambda r, w: common_pb2.PERMISSION_PIN_MESSAGES in r.permissions and len(r.permission_group_ids) == 1)),
    (G, "ImportGroup"): (lambda w: group_pb2.ImportGroupRequest(group_id=w.group_id, type=PUBLIC, owner_user_id=w.owner,
                                                                profile=common_pb2.GroupProfile(name="again")),
                         lambda w: admin_md(), fails("ALREADY_EXISTS", "GROUP_ID_TAKEN")),
    (G, "SetGroupAttributes"): (lambda w: group_pb2.SetGroupAttributesRequest(
        group_id=w.group_id, attributes=[group_pb2.AttributeWrite(key="k2", value=b"\x01\x02+/=")]),
        lambda w: user_md(w.owner), ok(lambda r, w: [a.key for a in r.attributes] == ["k2"])),
    (G, "DeleteGroupAttributes"): (lambda w: group_pb2.DeleteGroupAttributesRequest(
        group_id=w.group_id, keys=[group_pb2.AttributeKey(key="k")]), lambda w: user_md(w.owner), ok()),
    (G, "GetGroupAttributes"): (lambda w: group_pb2.GetGroupAttributesRequest(group_id=w.group_id),
                                lambda w: admin_md(),
                                ok(lambda r, w: [(a.key, a.value) for a in r.attributes] == [("k", b"\x00\xffvalue")])),
    (G, "IncrementGroupCounters"): (lambda w: group_pb2.IncrementGroupCountersRequest(
        group_id=w.group_id, deltas={"n": -3, "big": 2**40}), lambda w: user_md(w.owner),
        ok(lambda r, w: dict(r.values) == {"n": -2, "big": 2**40})),
    (G, "GetGroupCounters"): (lambda w: group_pb2.GetGroupCountersRequest(group_id=w.group_id), lambda w: admin_md(),
                              ok(lambda r, w: dict(r.values) == {"n": 1})),
    (M, "CreateInviteLink"): (lambda w: member_pb2.CreateInviteLinkRequest(group_id=w.group_id),
                              lambda w: user_md(w.owner), ok(lambda r, w: len(r.link.token) == 22)),
    (M, "RevokeInviteLink"): (lambda w: member_pb2.RevokeInviteLinkRequest(group_id=w.group_id, link_id=w.link.link_id),
                              lambda w: user_md(w.owner), ok()),
    (M, "ListInviteLinks"): (lambda w: member_pb2.ListInviteLinksRequest(group_id=w.group_id), lambda w: user_md(w.owner),
                             ok(lambda r, w: [l.link_id for l in r.links] == [w.link.link_id])),
    (M, "JoinByInviteLink"): (lambda w: member_pb2.JoinByInviteLinkRequest(token="x" * 22),
                              lambda w: user_md(uid("u")), fails("NOT_FOUND", "INVITE_LINK_NOT_FOUND")),
    (M, "JoinGroup"): (lambda w: member_pb2.JoinGroupRequest(group_id=w.group_id, message="hello"),
                       lambda w: user_md(uid("u")), ok(lambda r, w: r.outcome == member_pb2.JOIN_OUTCOME_PENDING_APPROVAL)),
    (M, "QuitGroup"): (lambda w: member_pb2.QuitGroupRequest(group_id=w.group_id), lambda w: user_md(w.member),
                       ok(lambda r, w: w.info().member_count == 1)),
    (M, "InviteMembers"): (lambda w: member_pb2.InviteMembersRequest(group_id=w.group_id, user_ids=[w.member]),
                           lambda w: user_md(w.owner),
                           ok(lambda r, w: [(x.user_id, x.result) for x in r.results] ==
                              [(w.member, common_pb2.MEMBER_RESULT_CODE_ALREADY_MEMBER)])),
    (M, "KickMembers"): (lambda w: member_pb2.KickMembersRequest(group_id=w.group_id, user_ids=[w.member]),
                         lambda w: user_md(w.owner), ok(lambda r, w: [x.result for x in r.results] == [SUCCESS])),
    (M, "BanMembers"): (lambda w: member_pb2.BanMembersRequest(group_id=w.group_id, user_ids=[w.member]),
                        lambda w: user_md(w.owner), ok(lambda r, w: [x.result for x in r.results] == [SUCCESS])),
    (M, "UnbanMembers"): (lambda w: member_pb2.UnbanMembersRequest(group_id=w.group_id, user_ids=[w.member]),
                          lambda w: user_md(w.member), fails("PERMISSION_DENIED", "PERMISSION_DENIED")),
    (M, "ListBannedMembers"): (lambda w: member_pb2.ListBannedMembersRequest(group_id=w.group_id),
                               lambda w: user_md(w.owner), ok(lambda r, w: len(r.ListFields()) == 0)),
    (M, "ListMembers"): (lambda w: member_pb2.ListMembersRequest(group_id=w.group_id), lambda w: user_md(w.owner),
                         ok(lambda r, w: sorted(m.user_id for m in r.members) == sorted([w.owner, w.member]))),
    (M, "GetMembersInfo"): (lambda w: member_pb2.GetMembersInfoRequest(group_id=w.group_id,
                                                                      user_ids=[w.member, w.applicant]),
                            lambda w: user_md(w.owner),
                            ok(lambda r, w: [(x.user_id, x.result) for x in r.results] ==
                               [(w.member, SUCCESS), (w.applicant, common_pb2.MEMBER_RESULT_CODE_NOT_MEMBER)])),
    (M, "GetSelfMemberInfo"): (lambda w: member_pb2.GetSelfMemberInfoRequest(group_id=w.group_id),
                               lambda w: user_md(w.member), ok(lambda r, w: r.member.user_id == w.member)),
    (M, "SetMemberRole"): (lambda w: member_pb2.SetMemberRoleRequest(group_id=w.group_id, user_id=w.member,
                                                                     role=common_pb2.MEMBER_ROLE_ADMIN),
                           lambda w: user_md(w.owner), ok()),
    (M, "MuteMembers"): (lambda w: member_pb2.MuteMembersRequest(group_id=w.group_id, user_ids=[w.member],
                                                                 duration_seconds=60),
                         lambda w: user_md(w.owner), ok(lambda r, w: [x.result for x in r.results] == [SUCCESS])),
    (M, "UpdateMemberInfo"): (lambda w: member_pb2.UpdateMemberInfoRequest(
        group_id=w.group_id, update_mask=MASK(paths=["name_card"]), name_card="card ✓"), lambda w: user_md(w.member),
        ok(lambda r, w: r.member.name_card == "card ✓")),
    (M, "SetReceiveMessageOption"): (lambda w: member_pb2.SetReceiveMessageOptionRequest(
        group_id=w.group_id, option=common_pb2.RECEIVE_MESSAGE_OPTION_NOT_RECEIVE), lambda w: user_md(w.member), ok()),
    (M, "SetGroupRemark"): (lambda w: member_pb2.SetGroupRemarkRequest(group_id=w.group_id, remark="mine"),
                            lambda w: user_md(w.member), ok()),
    (M, "SyncMembers"): (lambda w: member_pb2.SyncMembersRequest(group_id=w.group_id), lambda w: user_md(w.owner),
                         ok(lambda r, w: w.member in str(r))),
    (M, "SearchMembers"): (lambda w: member_pb2.SearchMembersRequest(
        group_id=w.group_id, keyword=w.member[:10], by=member_pb2.MEMBER_SEARCH_FIELD_USER_ID_PREFIX),
        lambda w: user_md(w.owner), ok(lambda r, w: w.member in str(r))),
    (S, "SendGroupMessage"): (lambda w: message_pb2.SendGroupMessageRequest(
        group_id=w.group_id, client_message_id=uid("m"), type="text", text="über ✓", payload=b"\x00\x01\xfe\xff",
        mentioned_user_ids=[w.member]), lambda w: user_md(w.owner),
        ok(lambda r, w: r.message.sequence > w.sequence and r.message.payload == b"\x00\x01\xfe\xff")),
    (S, "GetGroupMessages"): (lambda w: message_pb2.GetGroupMessagesRequest(group_id=w.group_id),
                              lambda w: user_md(w.owner), ok(lambda r, w: w.text in str(r))),
    (S, "MarkGroupRead"): (lambda w: message_pb2.MarkGroupReadRequest(group_id=w.group_id, read_sequence=w.sequence),
                           lambda w: user_md(w.member), ok()),
    (S, "SendSystemNotification"): (lambda w: message_pb2.SendSystemNotificationRequest(group_id=w.group_id,
                                                                                        text="maintenance"),
                                    lambda w: user_md(w.owner), fails("PERMISSION_DENIED", "ADMIN_TOKEN_REQUIRED")),
    (S, "RecallGroupMessage"): (lambda w: message_pb2.RecallGroupMessageRequest(group_id=w.group_id, sequence=w.sequence),
                                lambda w: user_md(w.owner), ok()),
    (S, "EditGroupMessage"): (lambda w: message_pb2.EditGroupMessageRequest(
        group_id=w.group_id, sequence=w.sequence, text="edited \u2713", payload=b"\x00\xff"), lambda w: user_md(w.owner),
        ok(lambda r, w: (r.message.text, r.message.payload, r.message.edit_count, r.unchanged) == (
            "edited \u2713", b"\x00\xff", 1, False))),
    (S, "PinGroupMessage"): (lambda w: message_pb2.PinGroupMessageRequest(group_id=w.group_id, sequence=w.sequence),
                             lambda w: user_md(w.owner),
                             ok(lambda r, w: [p.sequence for p in r.pinned_messages] == [w.sequence])),
    (S, "UnpinGroupMessage"): (lambda w: message_pb2.UnpinGroupMessageRequest(group_id=w.group_id, sequence=w.sequence),
                               lambda w: user_md(w.member), fails("PERMISSION_DENIED", "PERMISSION_DENIED")),
    (S, "GetMessageReadReceipts"): (lambda w: message_pb2.GetMessageReadReceiptsRequest(
        group_id=w.group_id, sequence=w.sequence), lambda w: user_md(uid("stranger")),
        fails("PERMISSION_DENIED", "NOT_A_MEMBER")),
    (S, "AddMessageReaction"): (lambda w: message_pb2.AddMessageReactionRequest(
        group_id=w.group_id, sequence=w.sequence, reaction_key="\U0001F44D"), lambda w: user_md(w.member),
        ok(lambda r, w: r.changed and r.reaction.count == 1 and r.reaction.reaction_key == "\U0001F44D")),
    (S, "RemoveMessageReaction"): (lambda w: message_pb2.RemoveMessageReactionRequest(
        group_id=w.group_id, sequence=w.sequence, reaction_key="+1"), lambda w: user_md(w.member),
        ok(lambda r, w: not r.changed and r.reaction.count == 0)),
    (S, "GetMessageReactions"): (lambda w: message_pb2.GetMessageReactionsRequest(
        group_id=w.group_id, sequences=[w.sequence]), lambda w: user_md(w.owner),
        ok(lambda r, w: [(m.sequence, list(m.reactions)) for m in r.messages] == [(w.sequence, [])])),
    (S, "ListMessageReactionUsers"): (lambda w: message_pb2.ListMessageReactionUsersRequest(
        group_id=w.group_id, sequence=w.sequence, reaction_key="+1"), lambda w: user_md(w.owner),
        ok(lambda r, w: list(r.user_ids) == [] and r.count == 0)),
    (S, "ListMessageReplies"): (lambda w: message_pb2.ListMessageRepliesRequest(group_id=w.group_id, sequence=w.sequence),
                                lambda w: user_md(w.owner), ok(lambda r, w: list(r.replies) == [] and r.next_page_token == "")),
    (A, "ListApplications"): (lambda w: application_pb2.ListApplicationsRequest(group_id=w.group_id),
                              lambda w: user_md(w.owner),
                              ok(lambda r, w: [a.application_id for a in r.applications] == [w.application_id])),
    (A, "ReportApplicationsRead"): (lambda w: application_pb2.ReportApplicationsReadRequest(
        read_time=timestamp_pb2.Timestamp(seconds=1_700_000_000, nanos=500_000_000)), lambda w: user_md(w.owner),
        ok(lambda r, w: (r.read_time.seconds, r.read_time.nanos) == (1_700_000_000, 500_000_000))),
    (A, "AcceptApplication"): (lambda w: application_pb2.AcceptApplicationRequest(application_id=w.application_id),
                               lambda w: user_md(w.owner), ok(lambda r, w: w.info().member_count == 3)),
    (A, "RefuseApplication"): (lambda w: application_pb2.RefuseApplicationRequest(application_id=w.application_id),
                               lambda w: user_md(w.owner), ok(lambda r, w: w.info().member_count == 2)),
    (A, "WithdrawApplication"): (lambda w: application_pb2.WithdrawApplicationRequest(application_id=w.application_id),
                                 lambda w: user_md(w.owner), fails("PERMISSION_DENIED", "PERMISSION_DENIED")),
}
# The methods also called over HTTP/2 (h2c with prior knowledge).
HTTP2_SUBSET = [(G, "CreateGroup"), (G, "GetGroupsInfo"), (G, "ImportGroup"), (G, "IncrementGroupCounters"),
                (M, "JoinGroup"), (M, "ListMembers"), (S, "SendGroupMessage"), (A, "ReportApplicationsRead")]

TRANSPORTS = ["json", "proto"]
ROWS = [(key, transport) for key in sorted(UNARY) for transport in ["grpc"] + TRANSPORTS] + \
       [(key, transport + "-h2") for key in HTTP2_SUBSET for transport in TRANSPORTS]


def unary_methods():
    return {(service.name, method.name) for module in SERVICES.values()
            for service in module.DESCRIPTOR.services_by_name.values() for method in service.methods
            if not method.client_streaming and not method.server_streaming}


def test_the_table_has_every_unary_method():
    assert unary_methods() == set(UNARY), (unary_methods() - set(UNARY), set(UNARY) - unary_methods())


def call(transport, client, grpc_channel, path, request, metadata):
    """The response message of `path`, or the error raised (grpc.RpcError or ConnectError)."""
    if transport == "grpc":
        from connect_client import method_types

        _, response_class, _ = method_types(path)
        return grpc_channel.unary_unary(path, request_serializer=type(request).SerializeToString,
                                        response_deserializer=response_class.FromString)(
            request, metadata=metadata, timeout=10)
    codec, http2 = transport.split("-")[0], transport.endswith("-h2")
    response = client.unary(path, request, codec=codec, headers=metadata, http2=http2, timeout_ms=10000)
    if response.status != 200:
        assert response.headers["content-type"] == "application/json", response
        assert response.status == HTTP_STATUS[response.code], response
        raise response.exception()
    assert response.headers["content-type"] == "application/" + codec, response
    return response.message


@pytest.mark.parametrize("key,transport", ROWS, ids=lambda value: value if isinstance(value, str) else "/".join(value))
def test_every_unary_method(stubs, client, grpc_channel, key, transport):
    service, method = key
    build, metadata, (kind, expected) = UNARY[key]
    world = World(stubs)
    path = f"/groupd.v1.{service}/{method}"
    request = build(world)
    if kind == "ok":
        response = call(transport, client, grpc_channel, path, request, metadata(world))
        assert expected(response, world), response
    else:
        with pytest.raises(grpc.RpcError) as caught:
            call(transport, client, grpc_channel, path, request, metadata(world))
        info = error_info(caught.value)
        assert (caught.value.code().name, info.reason if info else None) == expected, caught.value
        assert info.domain == "groupd"


# ------------------------------------------------------------------------------------------------
# Refusals
# ------------------------------------------------------------------------------------------------

def refused(response, http_status, code, message_part=None):
    """Checks a refusal: the HTTP status, a JSON Connect error object with `code`."""
    assert response.status == http_status, response
    assert response.headers["content-type"].split(";")[0] == "application/json", response
    assert response.error is not None and response.error["code"] == code, response
    if message_part:
        assert message_part in response.error.get("message", ""), response
    return response


def field_refusal(response, field):
    """400 invalid_argument, ErrorInfo INVALID_ARGUMENT naming `field`, a BadRequest violation of it."""
    refused(response, 400, "invalid_argument")
    info = response.error_info()
    assert info is not None and info.reason == "INVALID_ARGUMENT" and info.domain == "groupd", response
    assert info.metadata["field"] == field, (info, response)
    types = [detail["type"] for detail in response.error["details"]]
    assert "google.rpc.ErrorInfo" in types and "google.rpc.BadRequest" in types, response
    violations = [v.field for v in response.bad_request().field_violations]
    assert field in violations, (violations, response)
    debug = next(d for d in response.error["details"] if d["type"] == "google.rpc.ErrorInfo").get("debug")
    assert debug is None or debug.get("reason") == "INVALID_ARGUMENT", response


@pytest.mark.parametrize("http2", [False, True], ids=["http1", "http2"])
def test_json_that_does_not_parse(client, stubs, http2):
    for body in ['{"groupIds": ["x"]', "not json at all", '{"groupIds": ["x"]} trailing', "[1, 2]", '"text"']:
        response = client.unary(INFO, body, headers=admin_md(), http2=http2)
        refused(response, 400, "invalid_argument")
        info = response.error_info()
        assert info is not None and info.reason == "INVALID_JSON", response
    grpc_serves(stubs)


def test_unknown_json_field_is_named(client, stubs):
    response = client.unary(INFO, {"groupIds": ["x"], "noSuchField": 1}, headers=admin_md())
    field_refusal(response, "noSuchField")
    response = client.unary(CREATE, {"groupId": uid("g"), "type": "GROUP_TYPE_PUBLIC", "ownerUserId": "o",
                                     "profile": {"name": "n", "colour": "blue"}}, headers=admin_md())
    field_refusal(response, "profile.colour")
    grpc_serves(stubs)


def test_wrong_json_type_is_named(client, stubs):
    gid = uid("g")
    response = client.unary(CREATE, {"groupId": gid, "type": "GROUP_TYPE_PUBLIC", "ownerUserId": "o",
                                     "profile": {"name": 5}}, headers=admin_md())
    field_refusal(response, "profile.name")
    response = client.unary(INFO, {"groupIds": "not-a-list"}, headers=admin_md())
    field_refusal(response, "group_ids")
    response = client.unary(CREATE, {"groupId": gid, "type": "NO_SUCH_TYPE", "ownerUserId": "o",
                                     "profile": {"name": "n"}}, headers=admin_md())
    field_refusal(response, "type")
    # Nothing was created.
    info = stubs.group.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[gid]), metadata=admin_md(), timeout=10)
    assert not info.groups
    grpc_serves(stubs)


def test_field_given_twice_is_named(client, stubs):
    # Once by its JSON name and once by its proto name, and the same key twice.
    for body in ['{"groupIds": ["a"], "group_ids": ["b"]}', '{"group_ids": ["a"], "group_ids": ["b"]}']:
        field_refusal(client.unary(INFO, body, headers=admin_md()), "group_ids")
    grpc_serves(stubs)


def test_proto_json_names_and_proto_names_are_both_read(client, stubs):
    world = World(stubs)
    for key in ("groupIds", "group_ids"):
        response = client.unary(INFO, {key: [world.group_id]}, headers=admin_md())
        assert response.status == 200, response
        assert response.json["groups"][0]["groupId"] == world.group_id, response.json


def test_missing_and_unsupported_content_types(client, stubs):
    body = group_pb2.GetGroupsInfoRequest(group_ids=["x"]).SerializeToString()
    refused(client.unary(INFO, body, content_type=None, headers=admin_md()), 415, "invalid_argument")
    for content_type in ("text/plain", "application/grpc-web", "application/xml", "application/protobuf"):
        response = refused(client.unary(INFO, body, content_type=content_type, headers=admin_md()), 415,
                           "invalid_argument")
        assert content_type in response.error["message"], response
    # Over HTTP/2 (a stream with a content type that is not gRPC's is Connect's).
    refused(client.unary(INFO, body, content_type="text/plain", headers=admin_md(), http2=True), 415,
            "invalid_argument")
    grpc_serves(stubs)


def test_unary_content_type_on_a_streaming_method_and_the_reverse(client, stubs):
    request = event_pb2.SubscribeRequest()
    for codec in ("json", "proto"):
        for http2 in (False, True):
            refused(client.unary(SUBSCRIBE, request, codec=codec, headers=admin_md(), http2=http2), 415,
                    "invalid_argument")
            refused(client.unary(INFO, group_pb2.GetGroupsInfoRequest(group_ids=["x"]), codec=codec,
                                 content_type="application/connect+" + codec, headers=admin_md(), http2=http2),
                    415, "invalid_argument")
    grpc_serves(stubs)


def test_body_over_max_message_bytes(observed):
    server, client, stubs = observed
    # Under the limit: served.
    small = group_pb2.GetGroupsInfoRequest(group_ids=["x"] * 1000)
    assert client.unary(INFO, small, codec="proto", headers=admin_md()).status != 429
    big = group_pb2.GetGroupsInfoRequest(group_ids=["x" * 1000] * 80).SerializeToString()
    assert len(big) > OBSERVED_MAX_MESSAGE_BYTES
    for http2 in (False, True):
        refused(client.unary(INFO, body=big, codec="proto", headers=admin_md(), http2=http2), 429,
                "resource_exhausted")
        # A compressed body that inflates past the limit.
        refused(client.unary(INFO, body=gzip.compress(big), gzip="gzip", codec="proto", headers=admin_md(),
                             http2=http2), 429, "resource_exhausted")
    grpc_serves(stubs)


def test_get_is_refused_with_405(client, stubs):
    for http2 in (False, True):
        response = refused(client.unary(INFO, b"", method="GET", headers=admin_md(), http2=http2), 405, "unimplemented")
        assert response.headers["allow"] == "POST", response
    grpc_serves(stubs)


def test_unknown_method_is_404_unimplemented(client, stubs):
    for path in ("/groupd.v1.GroupService/NoSuchMethod", "/groupd.v1.NoSuchService/GetGroupsInfo", "/", "/metrics"):
        for http2 in (False, True):
            refused(client.unary(path, {}, headers=admin_md(), http2=http2), 404, "unimplemented")
    grpc_serves(stubs)


def test_bidirectional_method_is_unimplemented(client, stubs):
    path = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
    for http2 in (False, True):
        response = client.unary(path, b"", codec="proto", content_type="application/connect+proto",
                                body=envelope(b""), http2=http2)
        refused(response, 501, "unimplemented")
    grpc_serves(stubs)


def test_bad_protocol_version(client, stubs):
    request = group_pb2.GetGroupsInfoRequest(group_ids=["x"])
    for version in ("2", "0", "v1", ""):
        for http2 in (False, True):
            refused(client.unary(INFO, request, codec="proto", protocol_version=version, headers=admin_md(),
                                 http2=http2), 400, "invalid_argument")
    # Absent is allowed.
    assert client.unary(INFO, request, codec="proto", protocol_version=None, headers=admin_md()).status == 200
    grpc_serves(stubs)


def test_bad_timeout_header(client, stubs):
    request = group_pb2.GetGroupsInfoRequest(group_ids=["x"])
    for value in ("abc", "12345678901", "-1", "1.5", "+5", "1 0", ""):
        for http2 in (False, True):
            refused(client.unary(INFO, request, codec="proto", timeout_ms=value, headers=admin_md(), http2=http2),
                    400, "invalid_argument")
    # Ten digits is the longest allowed.
    assert client.unary(INFO, request, codec="proto", timeout_ms="9999999999", headers=admin_md()).status == 200
    grpc_serves(stubs)


def test_unsupported_content_encoding(client, stubs):
    request = group_pb2.GetGroupsInfoRequest(group_ids=["x"])
    for encoding in ("br", "zstd", "snappy"):
        for http2 in (False, True):
            refused(client.unary(INFO, request, codec="proto", gzip=encoding, headers=admin_md(), http2=http2),
                    501, "unimplemented")
    # On a stream: the same, as a refusal of the whole call.
    with pytest.raises(ConnectError) as caught:
        client.stream(SUBSCRIBE, event_pb2.SubscribeRequest(), codec="proto", gzip="br", body=envelope(b""),
                      headers=admin_md())
    assert caught.value.connect_code == "unimplemented" and caught.value.http_status == 501
    grpc_serves(stubs)


def test_a_body_that_does_not_inflate(client, stubs):
    refused(client.unary(INFO, body=b"not gzip at all", gzip="gzip", codec="proto", headers=admin_md()), 400,
            "invalid_argument")
    grpc_serves(stubs)


def test_error_object_carries_the_groupd_error(client, stubs):
    """A groupd error over Connect: code, message, ErrorInfo with its reason and metadata (its bytes
    in unpadded base64, and as JSON in `debug`), under the HTTP status of the code."""
    world = World(stubs)
    request = group_pb2.CreateGroupRequest(group_id=world.group_id, type=PUBLIC, owner_user_id="o",
                                           profile=common_pb2.GroupProfile(name="again"))
    for codec in ("json", "proto"):
        response = refused(client.unary(CREATE, request, codec=codec, headers=admin_md()), 409, "already_exists")
        detail = response.error["details"][0]
        assert detail["type"] == "google.rpc.ErrorInfo" and "=" not in detail["value"], detail
        info = response.error_info()
        assert (info.reason, info.domain, info.metadata["group_id"]) == ("GROUP_ID_TAKEN", "groupd", world.group_id)
        assert response.error["message"], response
    # A field over its limit: ErrorInfo names it (metadata field, limit) and a BadRequest violation too.
    too_long = group_pb2.CreateGroupRequest(group_id=uid("g"), type=PUBLIC, owner_user_id="o",
                                            profile=common_pb2.GroupProfile(name="n" * 31))
    response = client.unary(CREATE, too_long, codec="proto", headers=admin_md())
    refused(response, 400, "invalid_argument")
    info = response.error_info()
    assert (info.reason, info.metadata["field"], info.metadata["limit"]) == ("INVALID_ARGUMENT", "profile.name", "30")
    # Authentication: 401 unauthenticated.
    for metadata, reason in [([], "TOKEN_MISSING"), ([("authorization", "Bearer not.a.token")], "TOKEN_MALFORMED")]:
        response = refused(client.unary(INFO, group_pb2.GetGroupsInfoRequest(group_ids=["x"]), codec="proto",
                                        headers=metadata), 401, "unauthenticated")
        assert response.error_info().reason == reason


# ------------------------------------------------------------------------------------------------
# Compression
# ------------------------------------------------------------------------------------------------

def big_groups(stubs, count=8):
    gids = [uid("big") for _ in range(count)]
    for gid in gids:
        stubs.group.CreateGroup(group_pb2.CreateGroupRequest(
            group_id=gid, type=PUBLIC, owner_user_id=uid("o"),
            profile=common_pb2.GroupProfile(name="big", introduction="i" * 120)), metadata=admin_md(), timeout=10)
    return gids


@pytest.mark.parametrize("codec", TRANSPORTS)
@pytest.mark.parametrize("http2", [False, True], ids=["http1", "http2"])
def test_gzip_and_deflate_requests(client, stubs, codec, http2):
    world = World(stubs)
    request = group_pb2.GetGroupsInfoRequest(group_ids=[world.group_id])
    from connect_client import encode_message

    for encoding, compress in (("gzip", gzip.compress), ("deflate", zlib.compress)):
        response = client.unary(INFO, body=compress(encode_message(request, codec)), gzip=encoding, codec=codec,
                                headers=admin_md(), http2=http2)
        assert response.status == 200, response
        assert response.message.groups[0].group_id == world.group_id


@pytest.mark.parametrize("codec", TRANSPORTS)
@pytest.mark.parametrize("http2", [False, True], ids=["http1", "http2"])
def test_gzip_responses_from_1024_bytes(client, stubs, codec, http2):
    gids = big_groups(stubs)
    request = group_pb2.GetGroupsInfoRequest(group_ids=gids)
    response = client.unary(INFO, request, codec=codec, headers=admin_md(), accept_gzip=True, http2=http2)
    assert response.status == 200 and response.headers.get("content-encoding") == "gzip", response
    assert len(response.body) >= 1024 and response.raw[:2] == b"\x1f\x8b", response
    assert [g.group_id for g in response.message.groups] == gids
    # Without Accept-Encoding: plain.
    plain = client.unary(INFO, request, codec=codec, headers=admin_md(), http2=http2)
    assert "content-encoding" not in plain.headers and plain.message == response.message
    # A small response is not compressed even when gzip is accepted.
    small = client.unary(INFO, group_pb2.GetGroupsInfoRequest(group_ids=[uid("none")]), codec=codec,
                         headers=admin_md(), accept_gzip=True, http2=http2)
    assert len(small.body) < 1024 and "content-encoding" not in small.headers, small


@pytest.mark.parametrize("codec", TRANSPORTS)
@pytest.mark.parametrize("http2", [False, True], ids=["http1", "http2"])
def test_compressed_stream_messages(client, stubs, codec, http2):
    """Connect-Content-Encoding on the request envelope (flag 0x01), Connect-Accept-Encoding for the
    responses: a message of 1024 bytes and more comes compressed, flag 0x01."""
    world = World(stubs)
    long_text = "long " * 400
    stubs.message.SendGroupMessage(message_pb2.SendGroupMessageRequest(
        group_id=world.group_id, client_message_id=uid("m"), type="text", text=long_text),
        metadata=user_md(world.owner), timeout=10)
    stream = client.stream(SUBSCRIBE, event_pb2.SubscribeRequest(group_ids=[world.group_id], from_oldest=True),
                           codec=codec, headers=admin_md(), gzip=True, accept_gzip=True, http2=http2)
    assert stream.headers.get("content-type") == "application/connect+" + codec, stream.headers
    assert stream.headers.get("connect-content-encoding") == "gzip", stream.headers
    items = []
    for item in stream:
        items.append(item)
        if item.WhichOneof("item") == "caught_up":
            break
    stream.cancel()
    texts = [item.message.text for item in items if item.WhichOneof("item") == "message"]
    assert texts == [world.text, long_text], items
    flags = [flags for flags, payload in stream.envelopes]
    assert 1 in flags, flags  # the long message's envelope
    big = next(payload for flags, payload in stream.envelopes if flags == 1)
    assert big[:2] == b"\x1f\x8b"


# ------------------------------------------------------------------------------------------------
# Deadlines
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", TRANSPORTS)
@pytest.mark.parametrize("http2", [False, True], ids=["http1", "http2"])
def test_deadline_ends_a_waiting_stream(client, stubs, codec, http2):
    world = World(stubs)
    stream = client.stream(SUBSCRIBE, event_pb2.SubscribeRequest(group_ids=[world.group_id]), codec=codec,
                           headers=admin_md(), timeout_ms=1, http2=http2)
    assert stream.status == 200
    with pytest.raises(ConnectError) as caught:
        for _ in stream:
            pass
    assert caught.value.connect_code == "deadline_exceeded", caught.value
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    grpc_serves(stubs)


@pytest.mark.parametrize("codec", TRANSPORTS)
@pytest.mark.parametrize("http2", [False, True], ids=["http1", "http2"])
def test_deadline_ends_a_unary_call_held_by_a_hanging_webhook(observed, codec, http2):
    """app-two's CreateGroup waits on a before-hook webhook that never answers (its budget is 20 s):
    Connect-Timeout-Ms: 1 answers 504 deadline_exceeded long before."""
    server, client, stubs = observed
    request = group_pb2.CreateGroupRequest(group_id=uid("g"), type=PUBLIC, owner_user_id="o",
                                           profile=common_pb2.GroupProfile(name="held"))
    started = time.monotonic()
    response = client.unary(CREATE, request, codec=codec, headers=other_admin_md(), timeout_ms=1, http2=http2)
    took = time.monotonic() - started
    refused(response, 504, "deadline_exceeded")
    assert took < 10, took
    grpc_serves(stubs)


# ------------------------------------------------------------------------------------------------
# Tenant isolation
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", TRANSPORTS)
def test_another_apps_token_sees_nothing_over_connect(client, stubs, codec):
    world = World(stubs)
    other_user = [("authorization", "Bearer " + mint_token(app=OTHER_APP_ID, secret=OTHER_APP_SECRET,
                                                           sub=world.owner, role="user"))]
    for metadata in (other_admin_md(), other_user):
        response = client.unary(INFO, group_pb2.GetGroupsInfoRequest(group_ids=[world.group_id]), codec=codec,
                                headers=metadata)
        assert response.status == 200, response
        assert not response.message.groups
        assert [(f.group_id, f.reason) for f in response.message.failures] == [(world.group_id, "GROUP_NOT_FOUND")]
        for path, request in [
            ("/groupd.v1.MemberService/ListMembers", member_pb2.ListMembersRequest(group_id=world.group_id)),
            ("/groupd.v1.MessageService/GetGroupMessages", message_pb2.GetGroupMessagesRequest(group_id=world.group_id)),
            ("/groupd.v1.GroupService/GetGroupAttributes", group_pb2.GetGroupAttributesRequest(group_id=world.group_id)),
            ("/groupd.v1.GroupService/UpdateGroupProfile", group_pb2.UpdateGroupProfileRequest(
                group_id=world.group_id, update_mask=MASK(paths=["name"]), profile=common_pb2.GroupProfile(name="x"))),
        ]:
            response = refused(client.unary(path, request, codec=codec, headers=metadata), 404, "not_found")
            assert response.error_info().reason == "GROUP_NOT_FOUND", response
            assert world.text.encode() not in response.body and world.name.encode() not in response.body
    # The firehose of app-two's backend holds nothing of app-one's group.
    stream = client.stream(SUBSCRIBE, event_pb2.SubscribeRequest(group_ids=[world.group_id], from_oldest=True),
                           codec=codec, headers=other_admin_md(), timeout_ms=3000)
    items = []
    with pytest.raises(ConnectError) as caught:
        for item in stream:
            items.append(item)
    assert caught.value.connect_code == "deadline_exceeded", caught.value
    assert [item.WhichOneof("item") for item in items] in ([], ["caught_up"]), items
    assert world.info().profile.name == world.name


# ------------------------------------------------------------------------------------------------
# Subscribe as a Connect stream
# ------------------------------------------------------------------------------------------------

def read_until(stream, predicate, timeout=15):
    """Items from `stream` (read by a thread) up to the first one `predicate` accepts."""
    got, done = [], threading.Event()
    error = []

    def read():
        try:
            for item in stream:
                got.append(item)
                if predicate(item):
                    break
        except Exception as failure:  # reported below
            error.append(failure)
        done.set()

    threading.Thread(target=read, daemon=True).start()
    if not done.wait(timeout):
        stream.cancel()
        raise AssertionError(f"nothing accepted within {timeout} s: {got}")
    assert not error, error
    return got


@pytest.mark.parametrize("codec", TRANSPORTS)
@pytest.mark.parametrize("http2", [False, True], ids=["http1", "http2"])
def test_subscribe_receives_an_event_and_resumes_from_its_cursor(client, stubs, codec, http2):
    world = World(stubs)
    request = lambda cursor="": event_pb2.SubscribeRequest(group_ids=[world.group_id], cursor=cursor)
    stream = client.stream(SUBSCRIBE, request(), codec=codec, headers=user_md(world.owner), timeout_ms=60000,
                           http2=http2)
    assert stream.status == 200 and stream.headers["content-type"] == "application/connect+" + codec
    read_until(stream, lambda item: item.WhichOneof("item") == "caught_up")
    # An event the test causes, then messages.
    stubs.group.UpdateGroupProfile(group_pb2.UpdateGroupProfileRequest(
        group_id=world.group_id, update_mask=MASK(paths=["name"]), profile=common_pb2.GroupProfile(name="renamed")),
        metadata=user_md(world.owner), timeout=10)
    event = read_until(stream, lambda item: item.WhichOneof("item") == "event")[-1]
    assert event.event.kind == common_pb2.EVENT_KIND_GROUP_INFO_CHANGED and event.event.group_id == world.group_id
    for text in ("one", "two"):
        stubs.message.SendGroupMessage(message_pb2.SendGroupMessageRequest(
            group_id=world.group_id, client_message_id=uid("m"), type="text", text=text),
            metadata=user_md(world.owner), timeout=10)
    got = read_until(stream, lambda item: item.WhichOneof("item") == "message" and item.message.text == "two")
    stream.cancel()
    assert [item.message.text for item in got if item.WhichOneof("item") == "message"] == ["one", "two"]
    # Resumed from the event's cursor: what followed it, then caught_up.
    resumed = client.stream(SUBSCRIBE, request(event.cursor), codec=codec, headers=user_md(world.owner),
                            timeout_ms=60000, http2=http2)
    backlog = read_until(resumed, lambda item: item.WhichOneof("item") == "caught_up")
    resumed.cancel()
    assert [item.message.text for item in backlog if item.WhichOneof("item") == "message"] == ["one", "two"], backlog
    assert not [item for item in backlog if item.WhichOneof("item") == "event"
                and item.event.kind == common_pb2.EVENT_KIND_GROUP_INFO_CHANGED], backlog


@pytest.mark.parametrize("codec", TRANSPORTS)
def test_subscribe_error_comes_in_the_end_of_stream_envelope(client, stubs, codec):
    stream = client.stream(SUBSCRIBE, event_pb2.SubscribeRequest(cursor="not a cursor"), codec=codec,
                           headers=admin_md(), timeout_ms=10000)
    assert stream.status == 200
    with pytest.raises(ConnectError) as caught:
        list(stream)
    assert caught.value.connect_code == "invalid_argument", caught.value
    assert caught.value.error_info().reason == "INVALID_ARGUMENT"
    assert stream.envelopes[-1][0] == 0x02
    # Without a token: unauthenticated (at the end of a 200 stream, or as the whole answer: 401).
    with pytest.raises(ConnectError) as caught:
        list(client.stream(SUBSCRIBE, event_pb2.SubscribeRequest(), codec=codec, timeout_ms=10000))
    assert caught.value.connect_code == "unauthenticated" and caught.value.error_info().reason == "TOKEN_MISSING"
    assert caught.value.http_status in (200, 401), caught.value


def test_stream_request_must_be_one_envelope(client, stubs):
    request = event_pb2.SubscribeRequest(from_oldest=True).SerializeToString()
    # No envelope, two envelopes, a cut envelope, unknown flags, a compressed flag without an encoding.
    for body in (b"", request, envelope(request) + envelope(request), envelope(request)[:-1],
                 b"\x80" + envelope(request)[1:], b"\x01" + envelope(request)[1:]):
        try:
            stream = client.stream(SUBSCRIBE, None, codec="proto", body=body, headers=admin_md(), timeout_ms=5000)
            with pytest.raises(ConnectError) as caught:
                list(stream)
            error = caught.value
        except ConnectError as refusal:
            error = refusal
        assert error.connect_code in ("invalid_argument", "internal"), (body, error)
        assert error.connect_code == "invalid_argument" or body[:1] == b"\x01", (body, error)
    grpc_serves(stubs)


# ------------------------------------------------------------------------------------------------
# The protocol in metrics and the access log
# ------------------------------------------------------------------------------------------------

OBSERVED_MAX_MESSAGE_BYTES = 64 * 1024


class HangingReceiver:
    """A TCP listener that accepts connections and never answers (a webhook URL that hangs)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.held = []
        self.closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed.is_set():
            try:
                connection, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(connection)

    def close(self):
        self.closed.set()
        self.sock.close()
        for connection in self.held:
            connection.close()


@pytest.fixture(scope="module")
def observed(tmp_path_factory):
    """A groupd of this module's own: metrics and the access log on, max_message_bytes 64 KiB, and
    app-two's CreateGroup held by a before-hook webhook that never answers."""
    receiver = HangingReceiver()
    workdir = Path(tmp_path_factory.mktemp("groupd-connect"))
    server = Groupd(workdir, max_message_bytes=OBSERVED_MAX_MESSAGE_BYTES, database=new_database())
    server.metrics_port = free_port()
    server.set_top_level(f"metrics:\n  host: 127.0.0.1\n  port: {server.metrics_port}\n"
                         "access_log: {enabled: true}\n")
    text = server.config.read_text().rstrip("\n") + "\n"
    text += (f"    policy:\n      budget_ms: 20000\n      plugins:\n"
             f"        - path: {PLUGIN_DIR}/libWebhookPolicy.so\n"
             f"          config: {{url: \"http://127.0.0.1:{receiver.port}/hook\", secret: hook-secret}}\n"
             f"          hooks: [before_create_group]\n")
    # The policy block goes under the last app of the config, app-two.
    assert text.rindex("  - id: ") == text.index("  - id: " + OTHER_APP_ID)
    server.config.write_text(text)
    server.start()
    with grpc.insecure_channel(server.address) as channel:
        yield server, ConnectClient(server.address), Stubs(channel)
    server.stop()
    receiver.close()


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return response.read().decode()


def calls_total(text, method, code, protocol, reason=""):
    want = {"method": method, "code": code, "reason": reason, "protocol": protocol}
    import re

    total = 0.0
    for line in text.splitlines():
        if not line.startswith("groupd_rpc_calls_total{"):
            continue
        labels = dict(re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', line.split("{", 1)[1].rsplit("}", 1)[0]))
        if labels == want:
            total += float(line.rsplit(" ", 1)[1])
    return total


def method_label(text, path):
    """How the metrics name a method (the full path or its last part), from what they list."""
    return path if f'method="{path}"' in text else path.rsplit("/", 1)[1]


def test_protocol_label_in_metrics(observed):
    server, client, stubs = observed
    before = scrape(server.metrics_port)
    method = method_label(before, INFO)
    counts = {(p, c): calls_total(before, method, c, p) for p in ("grpc", "connect") for c in ("OK", "UNAUTHENTICATED")}
    request = group_pb2.GetGroupsInfoRequest(group_ids=["x"])
    for codec in ("proto", "json"):
        assert client.unary(INFO, request, codec=codec, headers=admin_md()).status == 200
    assert client.unary(INFO, request, codec="proto", headers=admin_md(), http2=True).status == 200
    assert client.unary(INFO, request, codec="proto").status == 401
    stubs.group.GetGroupsInfo(request, metadata=admin_md(), timeout=10)
    # A call is counted as its response goes out: the scrape may come a moment before.
    expected = lambda text: (calls_total(text, method, "OK", "connect") - counts[("connect", "OK")],
                             calls_total(text, method, "OK", "grpc") - counts[("grpc", "OK")],
                             calls_total(text, method, "UNAUTHENTICATED", "connect", "TOKEN_MISSING") >= 1)
    wait_for(lambda: expected(scrape(server.metrics_port)) == (3, 1, True), "the calls in the metrics", timeout=10)


def access_lines(server):
    import re

    field = re.compile(r'([a-z_]+)=("(?:[^"\\]|\\.)*"|\S*)')
    lines = []
    for line in server.log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            if entry.get("label") == "groupd.access":
                lines.append(entry)
        elif " groupd.access :" in line:
            fields = line.split(" groupd.access :", 1)[1].rsplit(" [access] ", 1)[0]
            entry = {}
            for key, value in field.findall(fields):
                entry[key] = json.loads(value) if value.startswith('"') else value
            lines.append(entry)
    return lines


def test_protocol_in_the_access_log(observed):
    server, client, stubs = observed
    ids = {name: uid(name) for name in ("connect-h1", "connect-h2", "connect-err", "grpc")}
    request = group_pb2.GetGroupsInfoRequest(group_ids=["x"])
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert client.unary(INFO, request, codec="proto", headers=admin_md() + [
        ("x-request-id", ids["connect-h1"]), ("traceparent", traceparent)]).status == 200
    assert client.unary(INFO, request, codec="proto", http2=True,
                        headers=admin_md() + [("x-request-id", ids["connect-h2"])]).status == 200
    assert client.unary(INFO, request, codec="proto", headers=[("x-request-id", ids["connect-err"])]).status == 401
    stubs.group.GetGroupsInfo(request, metadata=admin_md() + [("x-request-id", ids["grpc"])], timeout=10)
    wait_for(lambda: {line.get("request_id") for line in access_lines(server)} >= set(ids.values()),
             "the access-log lines of the four calls")
    by_id = {line.get("request_id"): line for line in access_lines(server)}
    for name, request_id in ids.items():
        assert by_id[request_id]["protocol"] == ("grpc" if name == "grpc" else "connect"), by_id[request_id]
    assert by_id[ids["connect-h1"]].get("trace_id") == "4bf92f3577b34da6a3ce929d0e0e4736", by_id[ids["connect-h1"]]
    assert by_id[ids["connect-err"]].get("reason") == "TOKEN_MISSING", by_id[ids["connect-err"]]


# ------------------------------------------------------------------------------------------------
# HTTP/1.1 connections
# ------------------------------------------------------------------------------------------------

def http1_request(path, body, headers, content_type="application/proto"):
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Type: {content_type}",
             f"Content-Length: {len(body)}"] + [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def test_keep_alive_two_calls_on_one_connection(groupd, stubs):
    worlds = [World(stubs), World(stubs)]
    connection = http.client.HTTPConnection("127.0.0.1", groupd.port, timeout=10)
    sockets = []
    try:
        for world, codec in zip(worlds, ("proto", "json")):
            body = group_pb2.GetGroupsInfoRequest(group_ids=[world.group_id])
            from connect_client import encode_message

            connection.request("POST", INFO, body=encode_message(body, codec),
                               headers=dict(admin_md(), **{"content-type": "application/" + codec}))
            response = connection.getresponse()
            data = response.read()
            assert response.status == 200, data
            assert response.getheader("connection", "").lower() != "close"
            assert world.group_id.encode() in data
            sockets.append(connection.sock)
        assert sockets[0] is sockets[1] and sockets[0] is not None
    finally:
        connection.close()


def test_pipelining_two_requests_two_responses_in_order(groupd, stubs):
    worlds = [World(stubs), World(stubs)]
    auth = admin_md()
    requests = [http1_request(INFO, group_pb2.GetGroupsInfoRequest(group_ids=[w.group_id]).SerializeToString(), auth)
                for w in worlds]
    # A third one, refused (not POST), and a fourth that is served: the connection goes on.
    requests.append(b"GET " + INFO.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
    requests.append(requests[0])
    with socket.create_connection(("127.0.0.1", groupd.port), timeout=10) as sock:
        sock.sendall(b"".join(requests))
        reader = sock.makefile("rb")
        responses = [read_http1_response(reader) for _ in requests]
    statuses = [status for status, _, _ in responses]
    assert statuses == [200, 200, 405, 200], responses
    ids = [group_pb2.GetGroupsInfoResponse.FromString(body).groups[0].group_id
           for status, _, body in responses if status == 200]
    assert ids == [worlds[0].group_id, worlds[1].group_id, worlds[0].group_id]


def test_connection_close_is_honoured(groupd):
    request = http1_request(INFO, group_pb2.GetGroupsInfoRequest(group_ids=["x"]).SerializeToString(),
                            admin_md() + [("Connection", "close")])
    with socket.create_connection(("127.0.0.1", groupd.port), timeout=10) as sock:
        sock.sendall(request)
        reader = sock.makefile("rb")
        status, headers, _ = read_http1_response(reader)
        assert status == 200 and dict(headers).get("connection", "").lower() == "close", headers
        assert reader.read() == b""  # closed by the server


def read_until_closed(sock):
    """Everything the server sends until it closes the connection."""
    received = b""
    while True:
        data = sock.recv(65536)
        if not data:
            return received
        received += data


@pytest.mark.parametrize("request_bytes,status", [
    (b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    (b"Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 400),
    (b"Transfer-Encoding: gzip\r\n\r\n", 501),
    (b"Expect: 101-switch\r\n\r\n", 417),
    (b"X-Big: " + b"a" * (90 * 1024) + b"\r\n\r\n", 431),
], ids=["content-length-and-chunked", "content-length-twice", "gzip-transfer-coding", "other-expectation", "head-too-large"])
def test_http1_framing_refused_then_closed(groupd, request_bytes, status):
    """Framing a proxy could read another way (request smuggling) and heads over the limits: the
    status in plain text, `connection: close`, and the close; the request behind it is never read."""
    head = b"POST " + INFO.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    follow = http1_request(INFO, b'{"groupIds":["x"]}', admin_md(), content_type="application/json")
    with socket.create_connection(("127.0.0.1", groupd.port), timeout=10) as sock:
        sock.sendall(head + request_bytes + follow)
        received = read_until_closed(sock)
    assert received.startswith(b"HTTP/1.1 %d " % status), received[:200]
    assert b"connection: close\r\n" in received and received.count(b"HTTP/1.1 ") == 1, received[:400]


def test_http1_version_other_than_1x_is_505(groupd):
    with socket.create_connection(("127.0.0.1", groupd.port), timeout=10) as sock:
        sock.sendall(b"POST " + INFO.encode() + b" HTTP/3.0\r\nHost: 127.0.0.1\r\n\r\n")
        assert read_until_closed(sock).startswith(b"HTTP/1.1 505 ")


def test_http1_chunked_body_and_expect_continue(groupd, stubs):
    """A chunked JSON body (with an extension and a trailer) is served; `Expect: 100-continue`
    gets `100` before the body is sent, then the answer."""
    world = World(stubs)
    body = json.dumps({"groupIds": [world.group_id]}).encode()
    auth = "".join(f"{name}: {value}\r\n" for name, value in admin_md()).encode()
    head = (b"POST " + INFO.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + auth)
    with socket.create_connection(("127.0.0.1", groupd.port), timeout=10) as sock:
        sock.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n%x;ext=1\r\n%s\r\n0\r\nX-Trailer: t\r\n\r\n"
                     % (len(body), body))
        reader = sock.makefile("rb")
        status, _, answer = read_http1_response(reader)
        assert status == 200 and world.group_id.encode() in answer, answer
        sock.sendall(head + b"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % len(body))
        assert reader.readline() == b"HTTP/1.1 100 Continue\r\n" and reader.readline() == b"\r\n"
        sock.sendall(body)
        status, _, answer = read_http1_response(reader)
        assert status == 200 and world.group_id.encode() in answer, answer


def test_http1_expect_continue_on_a_refused_call_answers_at_once(groupd):
    """No `100` for a call that is refused: the refusal instead, at once, and the close."""
    with socket.create_connection(("127.0.0.1", groupd.port), timeout=10) as sock:
        sock.sendall(b"POST /groupd.v1.GroupService/Nope HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 2\r\nExpect: 100-continue\r\n\r\n")
        received = read_until_closed(sock)
    assert received.startswith(b"HTTP/1.1 404 ") and b"connection: close\r\n" in received, received[:300]
    assert b"100 Continue" not in received


def test_http10_keep_alive_only_when_asked(groupd, stubs):
    world = World(stubs)
    request = http1_request(INFO, group_pb2.GetGroupsInfoRequest(group_ids=[world.group_id]).SerializeToString(), admin_md())
    request_10 = request.replace(b" HTTP/1.1\r\n", b" HTTP/1.0\r\n", 1)
    with socket.create_connection(("127.0.0.1", groupd.port), timeout=10) as sock:
        sock.sendall(request_10.replace(b"\r\n\r\n", b"\r\nConnection: keep-alive\r\n\r\n", 1))
        reader = sock.makefile("rb")
        status, headers, _ = read_http1_response(reader)
        assert status == 200 and dict(headers).get("connection") == "keep-alive", headers
        sock.sendall(request_10)
        status, headers, _ = read_http1_response(reader)
        assert status == 200 and dict(headers).get("connection") == "close", headers
        assert reader.read() == b""


def test_many_bad_requests_then_grpc_and_connect_still_serve(groupd, client, stubs):
    """A mix of malformed HTTP/1.1 and Connect requests, then both protocols serve."""
    junk = [b"POST / HTTP/1.1\r\nContent-Length: nope\r\n\r\n", b"GARBAGE\r\n\r\n",
            b"POST " + INFO.encode() + b" HTTP/1.1\r\nContent-Type: application/proto\r\nContent-Length: 5\r\n\r\n\xff\xff\xff\xff\xff",
            b"POST " + INFO.encode() + b" HTTP/1.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"]
    for data in junk:
        with socket.create_connection(("127.0.0.1", groupd.port), timeout=10) as sock:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            try:
                while sock.recv(65536):
                    pass
            except ConnectionResetError:
                pass
    grpc_serves(stubs)
    assert client.unary(INFO, group_pb2.GetGroupsInfoRequest(group_ids=["x"]), codec="proto",
                        headers=admin_md()).status == 200
