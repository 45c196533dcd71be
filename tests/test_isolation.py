"""Cross-app isolation for every RPC of the API, through a real groupd: app-two's tokens (its
backend, its backend acting for a user id that also exists in app-one, and that user's own token)
run every method against app-one's group, applications and messages, and get NOT_FOUND or an
empty answer, never app-one's data; app-one's state is unchanged afterwards.

The table holds every method of every service in Protos/ (a test checks that none is missing).
Every method is implemented: a method answering UNIMPLEMENTED fails its row.
"""

import grpc
import pytest
from google.protobuf import field_mask_pb2, timestamp_pb2

from support import OTHER_APP_ID, OTHER_APP_SECRET, admin_md, api_channel, error_info, uid, user_md
from groupd.v1 import (application_pb2, application_pb2_grpc, common_pb2, event_pb2, event_pb2_grpc, group_pb2,
                       group_pb2_grpc, member_pb2, member_pb2_grpc, message_pb2, message_pb2_grpc)

MASK = field_mask_pb2.FieldMask
SERVICES = {"GroupService": group_pb2, "MemberService": member_pb2, "MessageService": message_pb2,
            "ApplicationService": application_pb2, "EventService": event_pb2}

# Refusals that do not depend on the group (so they reveal nothing about it): a user token on an
# admin-only RPC, the backend without x-operator-id on an RPC that needs a user.
NEUTRAL = {("PERMISSION_DENIED", "ADMIN_TOKEN_REQUIRED"), ("INVALID_ARGUMENT", "OPERATOR_REQUIRED")}
NOT_FOUND = {("NOT_FOUND", "GROUP_NOT_FOUND"), ("NOT_FOUND", "APPLICATION_NOT_FOUND"),
             ("NOT_FOUND", "INVITE_LINK_NOT_FOUND")}


class Stubs:
    def __init__(self, channel):
        self.group = group_pb2_grpc.GroupServiceStub(channel)
        self.member = member_pb2_grpc.MemberServiceStub(channel)
        self.message = message_pb2_grpc.MessageServiceStub(channel)
        self.application = application_pb2_grpc.ApplicationServiceStub(channel)
        self.event = event_pb2_grpc.EventServiceStub(channel)


class AppOne:
    """App-one's world: a Public group needing approval, with an owner, a member, a pending
    join application and a message, every name carrying a unique marker."""

    def __init__(self, stubs):
        self.marker = uid("secret")
        self.owner, self.member, self.applicant = uid("owner"), uid("member"), uid("applicant")
        self.group_id = uid("g")
        self.creator_owner = ""
        request = group_pb2.CreateGroupRequest(
            group_id=self.group_id, type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id=self.owner,
            profile=common_pb2.GroupProfile(name=self.marker[:30], introduction=self.marker),
            settings=common_pb2.GroupSettings(join_option=common_pb2.JOIN_OPTION_APPROVAL),
            members=[group_pb2.InitialMember(user_id=self.member, role=common_pb2.MEMBER_ROLE_MEMBER)])
        stubs.group.CreateGroup(request, metadata=admin_md(), timeout=10)
        # A pending join application.
        stubs.member.JoinGroup(member_pb2.JoinGroupRequest(
            group_id=self.group_id, message=self.marker), metadata=user_md(self.applicant), timeout=10)
        listed = stubs.application.ListApplications(
            application_pb2.ListApplicationsRequest(group_id=self.group_id), metadata=user_md(self.owner), timeout=10)
        assert len(listed.applications) == 1, listed
        self.application_id = listed.applications[0].application_id
        self.message_sequence = stubs.message.SendGroupMessage(message_pb2.SendGroupMessageRequest(
            group_id=self.group_id, client_message_id=uid("m"), type="text", text=self.marker),
            metadata=user_md(self.owner), timeout=10).message.sequence
        # An invite link, a group attribute and a counter.
        self.link = stubs.member.CreateInviteLink(member_pb2.CreateInviteLinkRequest(group_id=self.group_id),
                                                  metadata=user_md(self.owner), timeout=10).link
        stubs.group.SetGroupAttributes(group_pb2.SetGroupAttributesRequest(
            group_id=self.group_id, attributes=[group_pb2.AttributeWrite(key="k", value=self.marker.encode())]),
            metadata=user_md(self.owner), timeout=10)
        stubs.group.IncrementGroupCounters(group_pb2.IncrementGroupCountersRequest(
            group_id=self.group_id, deltas={"n": 1}), metadata=user_md(self.owner), timeout=10)
        # A Community with a topic.
        self.community_id = uid("c")
        stubs.group.CreateGroup(group_pb2.CreateGroupRequest(
            group_id=self.community_id, type=common_pb2.GROUP_TYPE_COMMUNITY, owner_user_id=self.owner,
            profile=common_pb2.GroupProfile(name=self.marker[:30])), metadata=admin_md(), timeout=10)
        self.topic_id = stubs.group.CreateTopic(group_pb2.CreateTopicRequest(
            group_id=self.community_id, profile=common_pb2.GroupProfile(name=self.marker[:30])),
            metadata=admin_md(), timeout=10).topic.topic_id
        # A permission group of the community, with its owner in it.
        self.permission_group_id = stubs.group.CreatePermissionGroup(group_pb2.CreatePermissionGroupRequest(
            group_id=self.community_id, name=self.marker[:30], permissions=[common_pb2.PERMISSION_PIN_MESSAGES]),
            metadata=admin_md(), timeout=10).permission_group.permission_group_id
        stubs.group.AddPermissionGroupMembers(group_pb2.AddPermissionGroupMembersRequest(
            group_id=self.community_id, permission_group_id=self.permission_group_id, user_ids=[self.owner]),
            metadata=admin_md(), timeout=10)
        # A reaction to the message, by the member.
        stubs.message.AddMessageReaction(message_pb2.AddMessageReactionRequest(
            group_id=self.group_id, sequence=self.message_sequence, reaction_key="+1"),
            metadata=user_md(self.member), timeout=10)

    def secrets(self, method):
        """Byte strings no answer to app-two may contain (GetGroupsInfo echoes the id it misses)."""
        ids = [] if method == "GetGroupsInfo" else [self.group_id.encode()]
        return [self.marker.encode(), self.application_id.encode(), self.link.token.encode(),
                self.link.link_id.encode()] + ids

    def state(self, stubs):
        """Everything app-one can read about its group, members, bans, applications and messages."""
        parts = [
            stubs.group.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[self.group_id]),
                                      metadata=admin_md(), timeout=10),
            stubs.member.ListMembers(member_pb2.ListMembersRequest(group_id=self.group_id),
                                     metadata=admin_md(), timeout=10),
            stubs.member.GetSelfMemberInfo(member_pb2.GetSelfMemberInfoRequest(group_id=self.group_id),
                                           metadata=admin_md(operator=self.member), timeout=10),
            stubs.application.ListApplications(
                application_pb2.ListApplicationsRequest(group_id=self.group_id), metadata=user_md(self.owner),
                timeout=10),
            stubs.message.GetGroupMessages(
                message_pb2.GetGroupMessagesRequest(group_id=self.group_id), metadata=user_md(self.owner),
                timeout=10),
            stubs.member.ListBannedMembers(member_pb2.ListBannedMembersRequest(group_id=self.group_id),
                                           metadata=admin_md(), timeout=10),
            stubs.group.GetGroupAttributes(group_pb2.GetGroupAttributesRequest(group_id=self.group_id),
                                           metadata=admin_md(), timeout=10),
            stubs.group.GetGroupCounters(group_pb2.GetGroupCountersRequest(group_id=self.group_id),
                                         metadata=admin_md(), timeout=10),
            stubs.member.ListInviteLinks(member_pb2.ListInviteLinksRequest(group_id=self.group_id),
                                         metadata=admin_md(), timeout=10),
            stubs.group.ListTopics(group_pb2.ListTopicsRequest(group_id=self.community_id),
                                   metadata=admin_md(), timeout=10),
            stubs.group.ListPermissionGroups(group_pb2.ListPermissionGroupsRequest(group_id=self.community_id),
                                             metadata=admin_md(), timeout=10),
            stubs.group.ListPermissionGroupMembers(group_pb2.ListPermissionGroupMembersRequest(
                group_id=self.community_id, permission_group_id=self.permission_group_id), metadata=admin_md(), timeout=10),
            stubs.message.GetMessageReactions(message_pb2.GetMessageReactionsRequest(
                group_id=self.group_id, sequences=[self.message_sequence], max_users_per_reaction=10),
                metadata=user_md(self.owner), timeout=10),
        ]
        return [part.SerializeToString(deterministic=True) for part in parts]


@pytest.fixture
def stubs(groupd):
    # grpcio's channel, or a ConnectChannel under GROUPD_TEST_PROTOCOL (support.api_channel).
    with api_channel(groupd.address) as channel:
        yield Stubs(channel)


# Every method: (call, which answers are allowed besides NOT_FOUND / neutral refusals).
# `call(stubs, world, kwargs)`; "ok" means the method may succeed, and then its answer is checked
# for app-one's secrets.
def _subscribe(stubs, world, kw, group_ids):
    """Read a Subscribe stream for a moment; the events it delivered."""
    kw = dict(kw, timeout=1.5)
    events = []
    try:
        for response in stubs.event.Subscribe(event_pb2.SubscribeRequest(group_ids=group_ids, from_oldest=True), **kw):
            events.append(response)
    except grpc.RpcError as error:
        if error.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
            raise
    return event_pb2.SubscribeResponse() if not events else events


G, M, S, A, E = "GroupService", "MemberService", "MessageService", "ApplicationService", "EventService"
TABLE = {
    (G, "CreateGroup"): ("ok", lambda s, w, kw: s.group.CreateGroup(group_pb2.CreateGroupRequest(
        group_id=uid("own"), type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id=w.creator_owner,
        profile=common_pb2.GroupProfile(name="theirs")), **kw)),
    (G, "GetGroupsInfo"): ("ok", lambda s, w, kw: s.group.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(
        group_ids=[w.group_id]), **kw)),
    (G, "UpdateGroupProfile"): ("", lambda s, w, kw: s.group.UpdateGroupProfile(group_pb2.UpdateGroupProfileRequest(
        group_id=w.group_id, update_mask=MASK(paths=["name"]), profile=common_pb2.GroupProfile(name="hijacked")), **kw)),
    (G, "UpdateGroupSettings"): ("", lambda s, w, kw: s.group.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
        group_id=w.group_id, update_mask=MASK(paths=["join_option"]),
        settings=common_pb2.GroupSettings(join_option=common_pb2.JOIN_OPTION_ANY)), **kw)),
    (G, "DismissGroup"): ("", lambda s, w, kw: s.group.DismissGroup(group_pb2.DismissGroupRequest(group_id=w.group_id), **kw)),
    (G, "RevokeGroup"): ("", lambda s, w, kw: s.group.RevokeGroup(group_pb2.RevokeGroupRequest(
        group_id=w.group_id, reason="hijacked"), **kw)),
    (G, "TransferOwnership"): ("", lambda s, w, kw: s.group.TransferOwnership(group_pb2.TransferOwnershipRequest(
        group_id=w.group_id, new_owner_user_id=w.member), **kw)),
    (G, "SetGroupMute"): ("", lambda s, w, kw: s.group.SetGroupMute(group_pb2.SetGroupMuteRequest(
        group_id=w.group_id, muted=True, mode=common_pb2.GROUP_MUTE_MODE_ALL), **kw)),
    (G, "UpdateMuteBypassList"): ("", lambda s, w, kw: s.group.UpdateMuteBypassList(
        group_pb2.UpdateMuteBypassListRequest(group_id=w.group_id, add_user_ids=[w.member]), **kw)),
    (G, "ListJoinedGroups"): ("ok", lambda s, w, kw: s.group.ListJoinedGroups(group_pb2.ListJoinedGroupsRequest(), **kw)),
    (G, "SearchGroups"): ("ok", lambda s, w, kw: [s.group.SearchGroups(group_pb2.SearchGroupsRequest(keyword=k), **kw)
                                                  for k in (w.group_id, w.marker[:30])]),
    (G, "SyncJoinedGroups"): ("ok", lambda s, w, kw: s.group.SyncJoinedGroups(group_pb2.SyncJoinedGroupsRequest(), **kw)),
    (G, "CreateTopic"): ("", lambda s, w, kw: s.group.CreateTopic(group_pb2.CreateTopicRequest(
        group_id=w.community_id, profile=common_pb2.GroupProfile(name="hijacked")), **kw)),
    (G, "UpdateTopic"): ("", lambda s, w, kw: s.group.UpdateTopic(group_pb2.UpdateTopicRequest(
        topic_id=w.topic_id, update_mask=MASK(paths=["name"]), profile=common_pb2.GroupProfile(name="hijacked")), **kw)),
    (G, "DeleteTopic"): ("", lambda s, w, kw: s.group.DeleteTopic(group_pb2.DeleteTopicRequest(topic_id=w.topic_id), **kw)),
    (G, "ListTopics"): ("", lambda s, w, kw: s.group.ListTopics(group_pb2.ListTopicsRequest(group_id=w.community_id), **kw)),
    (G, "CreatePermissionGroup"): ("", lambda s, w, kw: s.group.CreatePermissionGroup(
        group_pb2.CreatePermissionGroupRequest(group_id=w.community_id, name="hijacked"), **kw)),
    (G, "UpdatePermissionGroup"): ("", lambda s, w, kw: s.group.UpdatePermissionGroup(
        group_pb2.UpdatePermissionGroupRequest(group_id=w.community_id, permission_group_id=w.permission_group_id,
                                               update_mask=MASK(paths=["name"]), name="hijacked"), **kw)),
    (G, "DeletePermissionGroup"): ("", lambda s, w, kw: s.group.DeletePermissionGroup(
        group_pb2.DeletePermissionGroupRequest(group_id=w.community_id, permission_group_id=w.permission_group_id), **kw)),
    (G, "ListPermissionGroups"): ("", lambda s, w, kw: s.group.ListPermissionGroups(
        group_pb2.ListPermissionGroupsRequest(group_id=w.community_id), **kw)),
    (G, "AddPermissionGroupMembers"): ("", lambda s, w, kw: s.group.AddPermissionGroupMembers(
        group_pb2.AddPermissionGroupMembersRequest(group_id=w.community_id, permission_group_id=w.permission_group_id,
                                                   user_ids=[w.member]), **kw)),
    (G, "RemovePermissionGroupMembers"): ("", lambda s, w, kw: s.group.RemovePermissionGroupMembers(
        group_pb2.RemovePermissionGroupMembersRequest(group_id=w.community_id, permission_group_id=w.permission_group_id,
                                                      user_ids=[w.owner]), **kw)),
    (G, "ListPermissionGroupMembers"): ("", lambda s, w, kw: s.group.ListPermissionGroupMembers(
        group_pb2.ListPermissionGroupMembersRequest(group_id=w.community_id, permission_group_id=w.permission_group_id),
        **kw)),
    (G, "GetMemberPermissions"): ("", lambda s, w, kw: s.group.GetMemberPermissions(
        group_pb2.GetMemberPermissionsRequest(group_id=w.community_id, user_id=w.owner), **kw)),
    (G, "ImportGroup"): ("ok", lambda s, w, kw: s.group.ImportGroup(group_pb2.ImportGroupRequest(
        group_id=uid("own"), type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id=w.creator_owner or uid("owner"),
        profile=common_pb2.GroupProfile(name="theirs")), **kw)),
    (G, "SetGroupAttributes"): ("", lambda s, w, kw: s.group.SetGroupAttributes(group_pb2.SetGroupAttributesRequest(
        group_id=w.group_id, attributes=[group_pb2.AttributeWrite(key="k", value=b"hijacked")]), **kw)),
    (G, "DeleteGroupAttributes"): ("", lambda s, w, kw: s.group.DeleteGroupAttributes(
        group_pb2.DeleteGroupAttributesRequest(group_id=w.group_id, keys=[group_pb2.AttributeKey(key="k")]), **kw)),
    (G, "GetGroupAttributes"): ("", lambda s, w, kw: s.group.GetGroupAttributes(group_pb2.GetGroupAttributesRequest(
        group_id=w.group_id), **kw)),
    (G, "IncrementGroupCounters"): ("", lambda s, w, kw: s.group.IncrementGroupCounters(
        group_pb2.IncrementGroupCountersRequest(group_id=w.group_id, deltas={"n": 5}), **kw)),
    (G, "GetGroupCounters"): ("", lambda s, w, kw: s.group.GetGroupCounters(group_pb2.GetGroupCountersRequest(
        group_id=w.group_id), **kw)),
    (M, "CreateInviteLink"): ("", lambda s, w, kw: s.member.CreateInviteLink(member_pb2.CreateInviteLinkRequest(
        group_id=w.group_id), **kw)),
    (M, "RevokeInviteLink"): ("", lambda s, w, kw: s.member.RevokeInviteLink(member_pb2.RevokeInviteLinkRequest(
        group_id=w.group_id, link_id=w.link.link_id), **kw)),
    (M, "ListInviteLinks"): ("", lambda s, w, kw: s.member.ListInviteLinks(member_pb2.ListInviteLinksRequest(
        group_id=w.group_id), **kw)),
    (M, "JoinByInviteLink"): ("", lambda s, w, kw: s.member.JoinByInviteLink(member_pb2.JoinByInviteLinkRequest(
        token=w.link.token), **kw)),
    (M, "JoinGroup"): ("", lambda s, w, kw: s.member.JoinGroup(member_pb2.JoinGroupRequest(group_id=w.group_id), **kw)),
    (M, "QuitGroup"): ("", lambda s, w, kw: s.member.QuitGroup(member_pb2.QuitGroupRequest(group_id=w.group_id), **kw)),
    (M, "InviteMembers"): ("", lambda s, w, kw: s.member.InviteMembers(member_pb2.InviteMembersRequest(
        group_id=w.group_id, user_ids=["intruder"]), **kw)),
    (M, "KickMembers"): ("", lambda s, w, kw: s.member.KickMembers(member_pb2.KickMembersRequest(
        group_id=w.group_id, user_ids=[w.member]), **kw)),
    (M, "BanMembers"): ("", lambda s, w, kw: s.member.BanMembers(member_pb2.BanMembersRequest(
        group_id=w.group_id, user_ids=[w.member]), **kw)),
    (M, "UnbanMembers"): ("", lambda s, w, kw: s.member.UnbanMembers(member_pb2.UnbanMembersRequest(
        group_id=w.group_id, user_ids=[w.member]), **kw)),
    (M, "ListBannedMembers"): ("", lambda s, w, kw: s.member.ListBannedMembers(member_pb2.ListBannedMembersRequest(
        group_id=w.group_id), **kw)),
    (M, "ListMembers"): ("", lambda s, w, kw: s.member.ListMembers(member_pb2.ListMembersRequest(group_id=w.group_id), **kw)),
    (M, "GetMembersInfo"): ("", lambda s, w, kw: s.member.GetMembersInfo(member_pb2.GetMembersInfoRequest(
        group_id=w.group_id, user_ids=[w.member, w.owner]), **kw)),
    (M, "GetSelfMemberInfo"): ("", lambda s, w, kw: s.member.GetSelfMemberInfo(member_pb2.GetSelfMemberInfoRequest(
        group_id=w.group_id), **kw)),
    (M, "SetMemberRole"): ("", lambda s, w, kw: s.member.SetMemberRole(member_pb2.SetMemberRoleRequest(
        group_id=w.group_id, user_id=w.member, role=common_pb2.MEMBER_ROLE_ADMIN), **kw)),
    (M, "MuteMembers"): ("", lambda s, w, kw: s.member.MuteMembers(member_pb2.MuteMembersRequest(
        group_id=w.group_id, user_ids=[w.member], duration_seconds=60), **kw)),
    (M, "UpdateMemberInfo"): ("", lambda s, w, kw: s.member.UpdateMemberInfo(member_pb2.UpdateMemberInfoRequest(
        group_id=w.group_id, user_id=w.member, update_mask=MASK(paths=["name_card"]), name_card="hijacked"), **kw)),
    (M, "SetReceiveMessageOption"): ("", lambda s, w, kw: s.member.SetReceiveMessageOption(
        member_pb2.SetReceiveMessageOptionRequest(group_id=w.group_id,
                                                  option=common_pb2.RECEIVE_MESSAGE_OPTION_NOT_RECEIVE), **kw)),
    (M, "SetGroupRemark"): ("", lambda s, w, kw: s.member.SetGroupRemark(member_pb2.SetGroupRemarkRequest(
        group_id=w.group_id, remark="hijacked"), **kw)),
    (M, "SyncMembers"): ("", lambda s, w, kw: s.member.SyncMembers(member_pb2.SyncMembersRequest(group_id=w.group_id), **kw)),
    (M, "SearchMembers"): ("", lambda s, w, kw: s.member.SearchMembers(member_pb2.SearchMembersRequest(
        group_id=w.group_id, keyword=w.member[:10], by=member_pb2.MEMBER_SEARCH_FIELD_USER_ID_PREFIX), **kw)),
    (S, "SendGroupMessage"): ("", lambda s, w, kw: s.message.SendGroupMessage(message_pb2.SendGroupMessageRequest(
        group_id=w.group_id, client_message_id=uid("m"), type="text", text="hijacked"), **kw)),
    (S, "GetGroupMessages"): ("", lambda s, w, kw: s.message.GetGroupMessages(message_pb2.GetGroupMessagesRequest(
        group_id=w.group_id), **kw)),
    (S, "MarkGroupRead"): ("", lambda s, w, kw: s.message.MarkGroupRead(message_pb2.MarkGroupReadRequest(
        group_id=w.group_id, read_sequence=1), **kw)),
    (S, "SendSystemNotification"): ("", lambda s, w, kw: s.message.SendSystemNotification(
        message_pb2.SendSystemNotificationRequest(group_id=w.group_id, text="hijacked"), **kw)),
    (S, "RecallGroupMessage"): ("", lambda s, w, kw: s.message.RecallGroupMessage(message_pb2.RecallGroupMessageRequest(
        group_id=w.group_id, sequence=w.message_sequence), **kw)),
    (S, "EditGroupMessage"): ("", lambda s, w, kw: s.message.EditGroupMessage(message_pb2.EditGroupMessageRequest(
        group_id=w.group_id, sequence=w.message_sequence, text="hijacked"), **kw)),
    (S, "PinGroupMessage"): ("", lambda s, w, kw: s.message.PinGroupMessage(message_pb2.PinGroupMessageRequest(
        group_id=w.group_id, sequence=3), **kw)),
    (S, "UnpinGroupMessage"): ("", lambda s, w, kw: s.message.UnpinGroupMessage(message_pb2.UnpinGroupMessageRequest(
        group_id=w.group_id, sequence=3), **kw)),
    (S, "GetMessageReadReceipts"): ("", lambda s, w, kw: s.message.GetMessageReadReceipts(
        message_pb2.GetMessageReadReceiptsRequest(group_id=w.group_id, sequence=3), **kw)),
    (S, "AddMessageReaction"): ("", lambda s, w, kw: s.message.AddMessageReaction(
        message_pb2.AddMessageReactionRequest(group_id=w.group_id, sequence=w.message_sequence, reaction_key="+1"), **kw)),
    (S, "RemoveMessageReaction"): ("", lambda s, w, kw: s.message.RemoveMessageReaction(
        message_pb2.RemoveMessageReactionRequest(group_id=w.group_id, sequence=w.message_sequence, reaction_key="+1"),
        **kw)),
    (S, "GetMessageReactions"): ("", lambda s, w, kw: s.message.GetMessageReactions(
        message_pb2.GetMessageReactionsRequest(group_id=w.group_id, sequences=[w.message_sequence],
                                               max_users_per_reaction=10), **kw)),
    (S, "ListMessageReactionUsers"): ("", lambda s, w, kw: s.message.ListMessageReactionUsers(
        message_pb2.ListMessageReactionUsersRequest(group_id=w.group_id, sequence=w.message_sequence,
                                                    reaction_key="+1"), **kw)),
    (S, "ListMessageReplies"): ("", lambda s, w, kw: s.message.ListMessageReplies(
        message_pb2.ListMessageRepliesRequest(group_id=w.group_id, sequence=w.message_sequence), **kw)),
    (A, "ListApplications"): ("ok", lambda s, w, kw: [
        s.application.ListApplications(application_pb2.ListApplicationsRequest(), **kw),
        s.application.ListApplications(application_pb2.ListApplicationsRequest(group_id=w.group_id), **kw)]),
    (A, "ReportApplicationsRead"): ("ok", lambda s, w, kw: s.application.ReportApplicationsRead(
        application_pb2.ReportApplicationsReadRequest(read_time=timestamp_pb2.Timestamp(seconds=2_000_000_000)), **kw)),
    (A, "AcceptApplication"): ("", lambda s, w, kw: s.application.AcceptApplication(
        application_pb2.AcceptApplicationRequest(application_id=w.application_id), **kw)),
    (A, "RefuseApplication"): ("", lambda s, w, kw: s.application.RefuseApplication(
        application_pb2.RefuseApplicationRequest(application_id=w.application_id), **kw)),
    (A, "WithdrawApplication"): ("", lambda s, w, kw: s.application.WithdrawApplication(
        application_pb2.WithdrawApplicationRequest(application_id=w.application_id), **kw)),
    (E, "Subscribe"): ("ok", lambda s, w, kw: [_subscribe(s, w, kw, [w.group_id]), _subscribe(s, w, kw, [])]),
}


def identities(world):
    """App-two's callers, by name: its backend, its backend acting for a user id that is app-one's
    owner (and member), and that user id's own app-two token."""
    other = {"app": OTHER_APP_ID, "secret": OTHER_APP_SECRET}
    return {
        "backend": admin_md(**other),
        "backend-as-owner": admin_md(operator=world.owner, **other),
        "owner-id-user": user_md(world.owner, **other),
        "member-id-user": user_md(world.member, **other),
    }


def test_the_table_covers_every_method_of_the_api():
    declared = {(service.name, method.name) for module in SERVICES.values()
                for service in module.DESCRIPTOR.services_by_name.values() for method in service.methods}
    assert declared == set(TABLE), (declared - set(TABLE), set(TABLE) - declared)


@pytest.mark.parametrize("service,method", sorted(TABLE))
def test_other_apps_tokens_see_nothing_and_change_nothing(stubs, service, method):
    allowed, call = TABLE[(service, method)]
    world = AppOne(stubs)
    before = world.state(stubs)
    outcomes = []
    for name, metadata in identities(world).items():
        # A group app-two creates for itself: the backend names a fresh owner, a user owns it.
        world.creator_owner = uid("their-owner") if name == "backend" else ""
        try:
            answer = call(stubs, world, {"metadata": metadata, "timeout": 10})
        except grpc.RpcError as error:
            # Every method of the API is implemented: UNIMPLEMENTED fails here, as any answer
            # outside the refusals below does.
            info = error_info(error)
            refusal = (error.code().name, info.reason if info else "")
            assert refusal in NOT_FOUND | NEUTRAL, f"{name}: {error.code()} {info}"
            outcomes.append(refusal)
            continue
        assert allowed == "ok", f"{name}: {method} on another app's group succeeded: {answer}"
        answers = answer if isinstance(answer, list) else [answer]
        for one in answers:
            for item in (one if isinstance(one, list) else [one]):
                serialized = item.SerializeToString()
                for secret in world.secrets(method):
                    assert secret not in serialized, f"{name}: {method} answered app-one's data: {item}"
        outcomes.append("ok")
    # At least one caller got past the identity checks to the group's (absent) data.
    assert any(o == "ok" or o in NOT_FOUND for o in outcomes), outcomes
    assert world.state(stubs) == before


def test_get_groups_info_reports_not_found_for_another_apps_group(stubs):
    world = AppOne(stubs)
    for name, metadata in identities(world).items():
        response = stubs.group.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[world.group_id]),
                                             metadata=metadata, timeout=10)
        assert not response.groups, name
        assert [(f.group_id, f.reason) for f in response.failures] == [(world.group_id, "GROUP_NOT_FOUND")], name
