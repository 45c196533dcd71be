"""Message reactions through a real groupd with stock grpcio: AddMessageReaction and
RemoveMessageReaction (idempotent, with MESSAGE_REACTION_ADDED / MESSAGE_REACTION_REMOVED on the
stream), GetMessageReactions (keys with counts, the caller's own, the first users),
ListMessageReactionUsers (paged, earliest first), who may react (one test per type and role), the
app's limits, key validation, and every refusal, each of which leaves the reactions as they were.
"""
import grpc
import pytest

from support import EventStream, MessageApi, admin_md, expect_error, uid, user_md
from groupd.v1 import common_pb2, event_pb2, member_pb2, message_pb2

K = common_pb2
PUBLIC, WORK, MEETING, AV = K.GROUP_TYPE_PUBLIC, K.GROUP_TYPE_WORK, K.GROUP_TYPE_MEETING, K.GROUP_TYPE_AV_CHAT_ROOM
MEMBER, ADMIN = K.MEMBER_ROLE_MEMBER, K.MEMBER_ROLE_ADMIN
ADDED, REMOVED = K.EVENT_KIND_MESSAGE_REACTION_ADDED, K.EVENT_KIND_MESSAGE_REACTION_REMOVED
INVALID, NOT_FOUND = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND
PRECONDITION, DENIED = grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.PERMISSION_DENIED
THUMBS, PARTY, HEART = "\U0001F44D", "\U0001F389", "\u2764\ufe0f"


class Api(MessageApi):
    def add(self, group, sequence, key, md):
        return self.messages.AddMessageReaction(message_pb2.AddMessageReactionRequest(
            group_id=group, sequence=sequence, reaction_key=key), metadata=md, timeout=10)

    def remove(self, group, sequence, key, md):
        return self.messages.RemoveMessageReaction(message_pb2.RemoveMessageReactionRequest(
            group_id=group, sequence=sequence, reaction_key=key), metadata=md, timeout=10)

    def get(self, group, sequences, md, users=10):
        return self.messages.GetMessageReactions(message_pb2.GetMessageReactionsRequest(
            group_id=group, sequences=sequences, max_users_per_reaction=users), metadata=md, timeout=10)

    def users(self, group, sequence, key, md, page_size=0, page_token=""):
        return self.messages.ListMessageReactionUsers(message_pb2.ListMessageReactionUsersRequest(
            group_id=group, sequence=sequence, reaction_key=key, page_size=page_size, page_token=page_token),
            metadata=md, timeout=10)

    def summary(self, group, sequence, md=None):
        """The message's reactions as (key, count, reacted_by_caller, users) tuples, as the backend
        sees them unless `md` says who asks."""
        answer = self.get(group, [sequence], md or admin_md())
        if not answer.messages:
            return None
        (message,) = answer.messages
        assert message.sequence == sequence
        return [(r.reaction_key, r.count, r.reacted_by_caller, list(r.user_ids)) for r in message.reactions]


@pytest.fixture
def api(channel):
    return Api(channel)


def test_add_and_remove_with_counts_users_and_events(api):
    owner, mia, bob = uid("owner"), uid("mia"), uid("bob")
    group = api.create(PUBLIC, owner, [(mia, MEMBER), (bob, MEMBER)])
    sequence = api.send_sequence(group, owner)
    stream = EventStream(api.channel, event_pb2.SubscribeRequest(group_ids=[group], kinds=[ADDED, REMOVED]),
                         user_md(bob))
    stream.until_caught_up()

    answer = api.add(group, sequence, THUMBS, user_md(mia))
    assert answer.changed and answer.reaction.reaction_key == THUMBS and answer.reaction.count == 1
    assert answer.reaction.reacted_by_caller
    # The same reaction again counts once, changes nothing and emits nothing.
    again = api.add(group, sequence, THUMBS, user_md(mia))
    assert not again.changed and again.reaction.count == 1
    assert api.add(group, sequence, THUMBS, user_md(bob)).reaction.count == 2
    assert api.add(group, sequence, PARTY, user_md(owner)).reaction.count == 1
    # The backend reacts for a user with x-operator-id.
    assert api.add(group, sequence, HEART, admin_md(operator=bob)).reaction.count == 1

    events = [item.event for item in stream.events(4)]
    assert [(e.kind, e.operator_user_id, e.reaction.reaction_key, e.reaction.count) for e in events] == [
        (ADDED, mia, THUMBS, 1), (ADDED, bob, THUMBS, 2), (ADDED, owner, PARTY, 1), (ADDED, bob, HEART, 1)]
    assert all(e.reaction.sequence == sequence and e.group_id == group for e in events)

    # Keys in the order first used, the caller's own marked, the first users earliest first.
    assert api.summary(group, sequence, user_md(mia)) == [
        (THUMBS, 2, True, [mia, bob]), (PARTY, 1, False, [owner]), (HEART, 1, False, [bob])]
    assert api.summary(group, sequence, user_md(bob))[0][2]
    answer = api.get(group, [sequence], user_md(mia), users=1)
    assert [list(r.user_ids) for r in answer.messages[0].reactions] == [[mia], [owner], [bob]]
    answer = api.get(group, [sequence], user_md(mia), users=0)
    assert [list(r.user_ids) for r in answer.messages[0].reactions] == [[], [], []]

    removed = api.remove(group, sequence, THUMBS, user_md(mia))
    assert removed.changed and removed.reaction.count == 1 and not removed.reaction.reacted_by_caller
    # Removing a reaction the user does not have changes nothing and emits nothing.
    assert not api.remove(group, sequence, THUMBS, user_md(mia)).changed
    assert not api.remove(group, sequence, "never", user_md(mia)).changed
    gone = api.remove(group, sequence, PARTY, user_md(owner))
    assert gone.changed and gone.reaction.count == 0
    events = [item.event for item in stream.events(2)]
    assert [(e.kind, e.operator_user_id, e.reaction.reaction_key, e.reaction.count) for e in events] == [
        (REMOVED, mia, THUMBS, 1), (REMOVED, owner, PARTY, 0)]
    assert api.summary(group, sequence, user_md(mia)) == [(THUMBS, 1, False, [bob]), (HEART, 1, False, [bob])]
    # A key that fell to 0 comes back last, with its users from the start.
    api.add(group, sequence, PARTY, user_md(mia))
    assert api.summary(group, sequence, user_md(mia))[-1] == (PARTY, 1, True, [mia])
    stream.cancel()


def test_get_reactions_of_several_messages_in_request_order(api):
    owner, mia = uid("owner"), uid("mia")
    group = api.create(PUBLIC, owner, [(mia, MEMBER)])
    first, second, third = (api.send_sequence(group, owner, text) for text in "abc")
    api.add(group, third, THUMBS, user_md(mia))
    api.add(group, first, PARTY, user_md(mia))
    answer = api.get(group, [third, second, first, third + 100], user_md(owner))
    # A message without reactions has an empty list; a sequence naming no message is left out.
    assert [(m.sequence, [r.reaction_key for r in m.reactions]) for m in answer.messages] == [
        (third, [THUMBS]), (second, []), (first, [PARTY])]


def test_list_reaction_users_paged_earliest_first(api):
    owner = uid("owner")
    users = [uid(f"u{index}") for index in range(7)]
    group = api.create(PUBLIC, owner, [(user, MEMBER) for user in users])
    sequence = api.send_sequence(group, owner)
    for user in users:
        api.add(group, sequence, THUMBS, user_md(user))
    api.add(group, sequence, PARTY, user_md(users[0]))
    listed, token = [], ""
    pages = 0
    while True:
        page = api.users(group, sequence, THUMBS, user_md(owner), page_size=3, page_token=token)
        assert page.count == 7
        listed += page.user_ids
        pages += 1
        token = page.next_page_token
        if not token:
            break
    assert listed == users and pages == 3
    # A user who leaves the list and comes back is listed last.
    api.remove(group, sequence, THUMBS, user_md(users[0]))
    api.add(group, sequence, THUMBS, user_md(users[0]))
    assert list(api.users(group, sequence, THUMBS, user_md(owner)).user_ids) == users[1:] + users[:1]
    # A token continues only the listing it came from.
    token = api.users(group, sequence, THUMBS, user_md(owner), page_size=2).next_page_token
    info = expect_error(lambda: api.users(group, sequence, PARTY, user_md(owner), page_token=token), INVALID,
                        "INVALID_ARGUMENT")
    assert info.metadata["field"] == "page_token"
    expect_error(lambda: api.users(group, sequence, THUMBS, user_md(owner), page_token="x.y.z"), INVALID,
                 "INVALID_ARGUMENT")
    info = expect_error(lambda: api.users(group, sequence, THUMBS, user_md(owner), page_size=-1), INVALID,
                        "INVALID_ARGUMENT")
    assert info.metadata["field"] == "page_size"
    # A key nobody used lists nobody.
    empty = api.users(group, sequence, HEART, user_md(owner))
    assert list(empty.user_ids) == [] and empty.count == 0 and empty.next_page_token == ""


@pytest.mark.parametrize("key", [THUMBS, HEART, "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466",
                                 "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F",
                                 "\U0001F44D\U0001F3FD", "+1", "thumbs_up"])
def test_keys_emoji_sequences_and_short_words_are_accepted(api, key):
    owner = uid("owner")
    group = api.create(PUBLIC, owner)
    sequence = api.send_sequence(group, owner)
    assert api.add(group, sequence, key, user_md(owner)).reaction.reaction_key == key
    assert api.summary(group, sequence) == [(key, 1, False, [owner])]


@pytest.mark.parametrize("key,limit", [("", None), ("a" * 33, "32"), ("abcdefghijklmnopq", "16"), ("a b", None),
                                       ("a\nb", None), ("\x07", None), ("a\u2028", None), ("a\u200b", None),
                                       ("\u00a0", None), ("\ue000", None)])
def test_invalid_keys_are_refused_and_change_nothing(api, key, limit):
    owner = uid("owner")
    group = api.create(PUBLIC, owner)
    sequence = api.send_sequence(group, owner)
    api.add(group, sequence, THUMBS, user_md(owner))
    for call in (lambda: api.add(group, sequence, key, user_md(owner)),
                 lambda: api.remove(group, sequence, key, user_md(owner)),
                 lambda: api.users(group, sequence, key, user_md(owner))):
        info = expect_error(call, INVALID, "INVALID_REACTION_KEY")
        assert info.metadata["field"] == "reaction_key"
        if limit:
            assert info.metadata["limit"] == limit
    assert api.summary(group, sequence) == [(THUMBS, 1, False, [owner])]


def test_refusals_change_nothing(api):
    owner, mia, stranger = uid("owner"), uid("mia"), uid("stranger")
    group = api.create(PUBLIC, owner, [(mia, MEMBER)])
    sequence = api.send_sequence(group, owner)
    api.add(group, sequence, THUMBS, user_md(mia))
    before = api.summary(group, sequence)

    for call in (api.add, api.remove):
        info = expect_error(lambda: call(group, 0, THUMBS, user_md(mia)), INVALID, "INVALID_ARGUMENT")
        assert info.metadata["field"] == "sequence"
        # No such message: past the latest, and an event's sequence (the group's creation, 1).
        info = expect_error(lambda: call(group, sequence + 50, THUMBS, user_md(mia)), NOT_FOUND, "MESSAGE_NOT_FOUND")
        assert info.metadata["field"] == "sequence"
        expect_error(lambda: call(group, 1, THUMBS, user_md(mia)), NOT_FOUND, "MESSAGE_NOT_FOUND")
        expect_error(lambda: call(group, sequence, THUMBS, user_md(stranger)), DENIED, "NOT_A_MEMBER")
        expect_error(lambda: call(uid("nogroup"), sequence, THUMBS, user_md(mia)), NOT_FOUND, "GROUP_NOT_FOUND")
        info = expect_error(lambda: call(group, sequence, THUMBS, admin_md()), INVALID, "OPERATOR_REQUIRED")
        assert info.metadata["field"] == "x-operator-id"
        expect_error(lambda: call("", sequence, THUMBS, user_md(mia)), INVALID, "INVALID_ARGUMENT")

    expect_error(lambda: api.get(group, [], user_md(mia)), INVALID, "INVALID_ARGUMENT")
    info = expect_error(lambda: api.get(group, [sequence, 0], user_md(mia)), INVALID, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "sequences[1]"
    info = expect_error(lambda: api.get(group, [sequence, sequence], user_md(mia)), INVALID, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "sequences[1]"
    info = expect_error(lambda: api.get(group, list(range(2, 53)), user_md(mia)), INVALID, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "sequences" and info.metadata["limit"] == "50"
    info = expect_error(lambda: api.get(group, [sequence], user_md(mia), users=-1), INVALID, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "max_users_per_reaction"
    expect_error(lambda: api.get(group, [sequence], user_md(stranger)), DENIED, "NOT_A_MEMBER")
    expect_error(lambda: api.users(group, sequence, THUMBS, user_md(stranger)), DENIED, "NOT_A_MEMBER")
    expect_error(lambda: api.users(group, 0, THUMBS, user_md(mia)), INVALID, "INVALID_ARGUMENT")
    expect_error(lambda: api.users(group, sequence + 50, THUMBS, user_md(mia)), NOT_FOUND, "MESSAGE_NOT_FOUND")
    expect_error(lambda: api.get(uid("nogroup"), [sequence], user_md(mia)), NOT_FOUND, "GROUP_NOT_FOUND")
    assert api.summary(group, sequence) == before


def test_a_recalled_message_takes_no_reactions_and_shows_none(api):
    owner, mia = uid("owner"), uid("mia")
    group = api.create(PUBLIC, owner, [(mia, MEMBER)])
    sequence = api.send_sequence(group, mia)
    api.add(group, sequence, THUMBS, user_md(owner))
    api.messages.RecallGroupMessage(message_pb2.RecallGroupMessageRequest(group_id=group, sequence=sequence),
                                    metadata=user_md(mia), timeout=10)
    for call in (api.add, api.remove):
        info = expect_error(lambda: call(group, sequence, THUMBS, user_md(owner)), PRECONDITION, "MESSAGE_RECALLED")
        assert info.metadata["field"] == "sequence" and info.metadata["sequence"] == str(sequence)
    assert api.get(group, [sequence], user_md(owner)).messages == []
    listed = api.users(group, sequence, THUMBS, user_md(owner))
    assert list(listed.user_ids) == [] and listed.count == 0


def test_a_muted_member_may_react(api):
    owner, mia = uid("owner"), uid("mia")
    group = api.create(PUBLIC, owner, [(mia, MEMBER)])
    sequence = api.send_sequence(group, owner)
    api.members.MuteMembers(member_pb2.MuteMembersRequest(group_id=group, user_ids=[mia], duration_seconds=600),
                            metadata=user_md(owner), timeout=10)
    expect_error(lambda: api.send_sequence(group, mia), DENIED, "MEMBER_MUTED")
    assert api.add(group, sequence, THUMBS, user_md(mia)).changed
    assert api.remove(group, sequence, THUMBS, user_md(mia)).changed


def test_history_from_before_joining(api):
    owner, late = uid("owner"), uid("late")
    public = api.create(PUBLIC, owner, settings=K.GroupSettings(join_option=K.JOIN_OPTION_ANY))
    before = api.send_sequence(public, owner, "before")
    api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=public), metadata=user_md(late), timeout=10)
    expect_error(lambda: api.add(public, before, THUMBS, user_md(late)), NOT_FOUND, "MESSAGE_NOT_FOUND")
    expect_error(lambda: api.users(public, before, THUMBS, user_md(late)), NOT_FOUND, "MESSAGE_NOT_FOUND")
    assert api.get(public, [before], user_md(late)).messages == []
    after = api.send_sequence(public, owner, "after")
    assert api.add(public, after, THUMBS, user_md(late)).changed
    # A Meeting shows history from before joining: the newcomer reacts to it.
    meeting = api.create(MEETING, owner)
    earlier = api.send_sequence(meeting, owner, "before")
    api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=meeting), metadata=user_md(late), timeout=10)
    assert api.add(meeting, earlier, THUMBS, user_md(late)).changed


# Who may react, one cell per type and role: every member (owner, admin, member) and the backend
# acting for a member; a non-member is refused (a Work group, private, is not found by one);
# AVChatRoom keeps no history to react to.
CELLS = [
    (WORK, "owner", None), (WORK, "member", None), (WORK, "backend-as-member", None),
    (WORK, "stranger", ("NOT_FOUND", "GROUP_NOT_FOUND")),
    (PUBLIC, "owner", None), (PUBLIC, "admin", None), (PUBLIC, "member", None), (PUBLIC, "backend-as-member", None),
    (PUBLIC, "stranger", ("PERMISSION_DENIED", "NOT_A_MEMBER")),
    (MEETING, "owner", None), (MEETING, "admin", None), (MEETING, "member", None),
    (MEETING, "backend-as-member", None), (MEETING, "stranger", ("PERMISSION_DENIED", "NOT_A_MEMBER")),
    (AV, "owner", ("FAILED_PRECONDITION", "HISTORY_NOT_KEPT")), (AV, "member", ("FAILED_PRECONDITION", "HISTORY_NOT_KEPT")),
    (AV, "backend-as-member", ("FAILED_PRECONDITION", "HISTORY_NOT_KEPT")),
]


@pytest.mark.parametrize("group_type,who,refusal", CELLS)
def test_who_may_react(api, group_type, who, refusal):
    owner, admin, member = uid("owner"), uid("admin"), uid("member")
    members = [] if group_type == AV else [(member, MEMBER)] + ([(admin, ADMIN)] if group_type in (PUBLIC, MEETING) else [])
    group = api.create(group_type, owner, members)
    if group_type == AV:
        api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=group), metadata=user_md(member), timeout=10)
        sequence = 1
    else:
        sequence = api.send_sequence(group, owner)
    md = {"owner": user_md(owner), "admin": user_md(admin), "member": user_md(member),
          "backend-as-member": admin_md(operator=member), "stranger": user_md(uid("stranger"))}[who]
    calls = [lambda: api.add(group, sequence, THUMBS, md), lambda: api.remove(group, sequence, THUMBS, md),
             lambda: api.get(group, [sequence], md), lambda: api.users(group, sequence, THUMBS, md)]
    if refusal is None:
        assert calls[0]().changed
        assert api.summary(group, sequence, md)[0][:3] == (THUMBS, 1, True)
        assert calls[1]().changed
        assert list(calls[3]().user_ids) == []
        return
    for call in calls:
        expect_error(call, getattr(grpc.StatusCode, refusal[0]), refusal[1])


@pytest.fixture
def limited(fresh_groupd):
    server = fresh_groupd(limits={"max_reaction_keys_per_message": 2, "max_reactions_per_message": 4,
                                  "max_reactions_per_user_per_message": 2, "reaction_key_bytes": 8}).start()
    with grpc.insecure_channel(server.address) as channel:
        yield Api(channel)


def test_the_apps_reaction_limits(limited):
    api = limited
    owner, mia, bob, eve = uid("owner"), uid("mia"), uid("bob"), uid("eve")
    group = api.create(PUBLIC, owner, [(mia, MEMBER), (bob, MEMBER), (eve, MEMBER)])
    sequence = api.send_sequence(group, owner)
    api.add(group, sequence, "a", user_md(mia))
    api.add(group, sequence, "b", user_md(mia))
    # Per user: mia has 2 keys.
    info = expect_error(lambda: api.add(group, sequence, "c", user_md(mia)), PRECONDITION, "TOO_MANY_REACTIONS")
    assert info.metadata["limit_name"] == "max_reactions_per_user_per_message" and info.metadata["limit"] == "2"
    # Distinct keys: "a" and "b" are the message's 2 keys; an existing key is still fine.
    info = expect_error(lambda: api.add(group, sequence, "c", user_md(bob)), PRECONDITION, "TOO_MANY_REACTION_KEYS")
    assert info.metadata["limit_name"] == "max_reaction_keys_per_message" and info.metadata["limit"] == "2"
    api.add(group, sequence, "a", user_md(bob))
    api.add(group, sequence, "b", user_md(bob))
    # All keys together: 4 reactions.
    info = expect_error(lambda: api.add(group, sequence, "a", user_md(eve)), PRECONDITION, "TOO_MANY_REACTIONS")
    assert info.metadata["limit_name"] == "max_reactions_per_message" and info.metadata["limit"] == "4"
    # A reaction already held is no new one: answered as before, not refused.
    assert not api.add(group, sequence, "a", user_md(mia)).changed
    # The app's key length.
    info = expect_error(lambda: api.add(group, sequence, "abcdefghi", user_md(eve)), INVALID, "INVALID_REACTION_KEY")
    assert info.metadata["limit"] == "8"
    assert api.summary(group, sequence) == [("a", 2, False, [mia, bob]), ("b", 2, False, [mia, bob])]
    # Taking one back makes room.
    api.remove(group, sequence, "b", user_md(mia))
    api.add(group, sequence, "a", user_md(eve))
    assert api.summary(group, sequence) == [("a", 3, False, [mia, bob, eve]), ("b", 1, False, [bob])]
