"""Gaps closed in applications, messages and plugin checks, through the real binary and stock grpcio:
- application events carry the item (`detail.application`) on the wire;
- the retention pass expires due applications without traffic (APPLICATION_EXPIRED on the
  stream) and purges messages past `message_retention_seconds` (here: the periodic pass, every 60 s
  of the server's manual clock, which the test advances; the advance answers once the pass ran);
- `groupd check-config` loads and instantiates every configured plugin and names the entry
  that fails by its key path.
"""
import subprocess

import grpc
import pytest

from support import GROUPD_BIN, admin_md, uid, user_md
from groupd.v1 import (common_pb2, event_pb2, group_pb2, group_pb2_grpc, member_pb2, member_pb2_grpc, message_pb2,
                       message_pb2_grpc)
from test_events import Stream, events_of

PLUGIN_DIR = GROUPD_BIN.resolve().parent
SECRET = "0123456789abcdef0123456789abcdef"


def public_group(channel, owner):
    gid = uid("g")
    group_pb2_grpc.GroupServiceStub(channel).CreateGroup(group_pb2.CreateGroupRequest(
        group_id=gid, type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id=owner,
        profile=common_pb2.GroupProfile(name="club")), metadata=admin_md(), timeout=10)
    return gid


def test_application_events_carry_the_item(groupd, channel):
    owner, zoe = uid("owner"), uid("zoe")
    gid = public_group(channel, owner)
    stream = Stream(channel, event_pb2.SubscribeRequest(), user_md(owner))
    stream.until_caught_up()
    pending = member_pb2_grpc.MemberServiceStub(channel).JoinGroup(
        member_pb2.JoinGroupRequest(group_id=gid, message="let me in"), metadata=user_md(zoe), timeout=10)
    item = pending.application
    event = stream.events(1)[0].event
    stream.cancel()
    assert event.kind == common_pb2.EVENT_KIND_APPLICATION_RECEIVED
    assert event.WhichOneof("detail") == "application"
    assert event.application.application_id == item.application_id
    assert event.application.applicant_user_id == zoe
    assert event.application.message == "let me in"
    assert event.application.state == common_pb2.APPLICATION_STATE_PENDING


def test_due_applications_expire_without_traffic(fresh_groupd):
    server = fresh_groupd(manual_clock=True, limits={"application_expiry_seconds": 1}).start()
    owner, zoe = uid("owner"), uid("zoe")
    with grpc.insecure_channel(server.address) as channel:
        gid = public_group(channel, owner)
        item = member_pb2_grpc.MemberServiceStub(channel).JoinGroup(
            member_pb2.JoinGroupRequest(group_id=gid), metadata=user_md(zoe), timeout=10).application
        # Due after 1 s, but the retention pass comes every 60 s: until its turn, nothing is expired.
        server.advance_clock(seconds=59)
        stream = Stream(channel, event_pb2.SubscribeRequest(from_oldest=True), user_md(zoe))
        assert not [e for e in events_of(stream.until_caught_up()) if e.kind == common_pb2.EVENT_KIND_APPLICATION_EXPIRED]
        # No write to the group and no listing: only the retention pass can expire it, and the
        # open stream gets the event it commits.
        server.advance_clock(seconds=1)
        expired = [e for e in events_of(stream.until(lambda item: item.WhichOneof("item") == "event"))
                   if e.kind == common_pb2.EVENT_KIND_APPLICATION_EXPIRED]
        stream.cancel()
    assert len(expired) == 1
    assert expired[0].application.application_id == item.application_id
    assert expired[0].application.state == common_pb2.APPLICATION_STATE_EXPIRED
    assert list(expired[0].recipient_user_ids) == [zoe]


def test_messages_past_retention_are_purged(fresh_groupd):
    server = fresh_groupd(manual_clock=True, limits={"message_retention_seconds": 1}).start()
    owner = uid("owner")
    with grpc.insecure_channel(server.address) as channel:
        gid = public_group(channel, owner)
        stub = message_pb2_grpc.MessageServiceStub(channel)
        stub.SendGroupMessage(message_pb2.SendGroupMessageRequest(group_id=gid, type="text", text="old"),
                              metadata=user_md(owner), timeout=10)
        request = message_pb2.GetGroupMessagesRequest(group_id=gid, direction=message_pb2.HISTORY_DIRECTION_NEWER)

        def texts():
            return [m.text for m in stub.GetGroupMessages(request, metadata=user_md(owner), timeout=10).messages]

        server.advance_clock(seconds=59)  # past the retention, before the pass's turn
        assert texts() == ["old"]
        server.advance_clock(seconds=1)  # answered once the pass purged
        assert texts() == []
        sent = stub.SendGroupMessage(message_pb2.SendGroupMessageRequest(group_id=gid, type="text", text="new"),
                                     metadata=user_md(owner), timeout=10)
        assert texts() == ["new"]
        # Sequences are not reused after a purge.
        assert sent.message.sequence > 1


# check-config and plugins

APP = f"""apps:
  - id: demo
    secrets:
      - kid: k1
        secret: "{SECRET}"
"""


def check(tmp_path, policy):
    path = tmp_path / "groupd.yaml"
    path.write_text(APP + policy)
    return path, subprocess.run([str(GROUPD_BIN), "check-config", str(path)], capture_output=True, text=True,
                                timeout=30)


def test_check_config_loads_good_plugins(tmp_path):
    path, result = check(tmp_path, f"""\
    policy:
      plugins:
        - path: libKeywordPolicy.so
          config: {{words: [darn], mode: mask}}
          hooks: [before_set_member_info]
        - path: {PLUGIN_DIR}/libExampleCPolicy.so
          config: {{}}
          hooks: [before_send_group_message]
""")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{path}: ok (1 app, 2 plugins loaded)"


@pytest.mark.parametrize("kind,plugin,code,detail", [
    ("missing library", "path: libNoSuchPolicy.so", "open_failed", "libNoSuchPolicy.so"),
    ("wrong major version", f"path: {PLUGIN_DIR}/libPolicyFixtureWrongMajor.so", "major_version_mismatch", ""),
    ("missing entry symbol", f"path: {PLUGIN_DIR}/libPolicyFixtureNoEntry.so", "missing_entry_symbol",
     "groupd_policy_entry_v1"),
    ("instance_new fails", f"path: {PLUGIN_DIR}/libPolicyFixtureBehaviors.so\n          config: \"mode=init_fail\"",
     "instance_failed", "init_fail requested by config"),
    ("bad plugin config", "path: libKeywordPolicy.so\n          config: \"{not json\"", "instance_failed", ""),
])
def test_check_config_names_the_plugin_that_fails(tmp_path, kind, plugin, code, detail):
    path, result = check(tmp_path, f"""\
    policy:
      plugins:
        - path: libKeywordPolicy.so
          config: {{words: [darn]}}
          hooks: [before_set_member_info]
        - {plugin}
          hooks: [before_send_group_message]
""")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "ok" not in result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"groupd: {path}: apps[0].policy.plugins[1]: policy plugin "), lines[0]
    assert "for app demo" in lines[0] and f": {code}: " in lines[0], lines[0]
    assert detail in lines[0], lines[0]
