"""HTTP webhooks (Plugins/WebhookPolicy) through a real groupd and a real HTTP server started here:
signed synchronous before-hooks (allow, reject with error keys, a hanging URL costing at most its
budget under fail-open and fail-closed), after-events delivered in order per group from the durable
journal, across a receiver outage and across a SIGKILL of groupd."""

import hashlib
import hmac
import json
import queue
import select
import signal
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import grpc
import pytest
from google.protobuf import field_mask_pb2
from google.rpc import error_details_pb2, status_pb2

from support import (APP_ID, OTHER_APP_ID, OTHER_APP_SECRET, Groupd, admin_md, error_info, expect_error, free_port,
                     new_database, uid, wait_for)
from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc, member_pb2, member_pb2_grpc

SECRET_ONE = "webhook-secret-of-app-one"
SECRET_TWO = "webhook-secret-of-app-two"
# app-two's budget: what a hanging webhook costs a call. An answered webhook must come back within it
# on a loaded machine too (four test passes on 2 cores once took a create past 300 ms).
APP_TWO_BUDGET_MS = 1000
# What a call may take past its budget on a loaded test machine: the gRPC round trip, the store.
MARGIN_S = 1.5


class Received:
    """One request the receiver got: path, query, headers, raw body and its JSON."""

    def __init__(self, path, headers, body):
        split = urlsplit(path)
        self.path = split.path
        self.query = {key: values[0] for key, values in parse_qs(split.query).items()}
        self.headers = headers
        self.body = body
        self.json = json.loads(body)


class Receiver:
    """A real HTTP/1.0 server on a loopback port. Every POST is put in `requests` (a queue the tests
    wait on with a deadline) and answered by `respond(received) -> (status, answer)`: a JSON value,
    raw bytes, or None to hold the request until `release` is set or the client hangs up (a URL
    that hangs). `max_in_flight` is the most requests it ever held open at once from clients still
    connected."""

    def __init__(self, port=None):
        self.port = port or free_port()
        self.requests = queue.Queue()
        self.respond = lambda received: (200, {"ActionStatus": "OK", "ErrorCode": 0, "ErrorInfo": ""})
        self.release = threading.Event()
        self.server = None
        self.lock = threading.Lock()
        self.in_flight = set()
        self.max_in_flight = 0

    @staticmethod
    def hung_up(connection):
        readable, _, _ = select.select([connection], [], [], 0)
        try:
            return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def arrived(self, connection):
        with self.lock:
            self.in_flight = {c for c in self.in_flight if not self.hung_up(c)}
            self.in_flight.add(connection)
            self.max_in_flight = max(self.max_in_flight, len(self.in_flight))

    def left(self, connection):
        with self.lock:
            self.in_flight.discard(connection)

    def hold(self, connection):
        """Wait for `release` or for the client to hang up; True if released."""
        while not self.release.wait(0.02):
            if self.hung_up(connection):
                return False
        return True

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received = Received(self.path, dict(self.headers.items()), body)
                receiver.arrived(self.connection)
                try:
                    self.answer(received)
                finally:
                    receiver.left(self.connection)

            def answer(self, received):
                receiver.requests.put(received)
                status, answer = receiver.respond(received)
                if answer is None:
                    if not receiver.hold(self.connection):
                        return
                    status, answer = 200, {"ErrorCode": 0}
                data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the plugin gave up on a hanging answer and closed the connection

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def next(self, timeout=20):
        try:
            return self.requests.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no webhook request within {timeout} s") from None


def verify_signature(received, secret, max_age_s=300):
    """The documented check: X-Groupd-Signature is t=<unix seconds>,v1=<hex HMAC-SHA256 of
    "<t>.<body>">; refuse a timestamp older than max_age_s (a replay)."""
    parts = dict(part.split("=", 1) for part in received.headers["X-Groupd-Signature"].split(","))
    timestamp = int(parts["t"])
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + received.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(expected, parts["v1"]), received.headers
    assert abs(time.time() - timestamp) < max_age_s


def policy_blocks(before_url_one, events_url_one, queue_dir, before_url_two):
    one = f"""\
    policy:
      budget_ms: 3000
      plugins:
        - path: libWebhookPolicy.so
          config: {{url: "{before_url_one}", secret: {SECRET_ONE}}}
          hooks: [before_create_group, before_update_profile, before_invite]
        - path: libWebhookPolicy.so
          config: {{url: "{events_url_one}", secret: {SECRET_ONE}, queue_dir: "{queue_dir}", retry_min_ms: 20, retry_max_ms: 200}}
          hooks: [after_event]
"""
    two = f"""\
    policy:
      budget_ms: {APP_TWO_BUDGET_MS}
      failure_modes: {{before_create_group: fail_closed, before_update_profile: fail_open}}
      plugins:
        - path: libWebhookPolicy.so
          config: {{url: "{before_url_two}", secret: {SECRET_TWO}}}
          hooks: [before_create_group, before_update_profile]
"""
    return {APP_ID: one, OTHER_APP_ID: two}


def with_policy(config_text, blocks):
    """The test config with each app's policy block after its secrets."""
    out, app = [], None
    for line in config_text.splitlines(keepends=True):
        if line.startswith("  - id: "):
            if app is not None:
                out.append(blocks[app])
            app = line.split(":", 1)[1].strip()
        out.append(line)
    out.append(blocks[app])
    return "".join(out)


def before_answer(received):
    """app-one's before-hooks: names with "reject-me" refused with an error key, invitees starting
    with "blocked" refused one by one, names with "rewrite-me" rewritten; app-two's: allow, or hang
    while `hang_app_two` is set."""
    body = received.json
    if received.path == "/app-two/before":
        if HANG_APP_TWO.is_set():
            return 200, None
        return APP_TWO_ANSWER[0] or (200, {"ErrorCode": 0})
    name = body["fields"].get("name", "")
    if "reject-me" in name:
        return 200, {"ActionStatus": "OK", "ErrorCode": 1, "ErrorInfo": "names may not say reject-me",
                     "reject_fields": {"name": "says reject-me"}}
    if body["hook"] == "before_invite":
        refused = {user: "on the block list" for user in body["users"] if user.startswith("blocked")}
        if refused:
            return 200, {"ErrorCode": 1, "reject_members": refused}
    if "rewrite-me" in name:
        return 200, {"ErrorCode": 0, "rewrite": {"name": name.replace("rewrite-me", "rewritten")}}
    return 200, {"ActionStatus": "OK", "ErrorCode": 0, "ErrorInfo": ""}


HANG_APP_TWO = threading.Event()
# app-two's answer when set (status, body), else allow.
APP_TWO_ANSWER = [None]


class Setup:
    """One groupd with webhook chains for both apps, the before-hook receiver and the event receiver."""

    def __init__(self, workdir):
        self.before = Receiver().start()
        self.before.respond = before_answer
        self.events = Receiver().start()
        self.queue_dir = workdir / "webhooks"
        self.groupd = Groupd(workdir, database=new_database())
        blocks = policy_blocks(self.before.url("/app-one/before"), self.events.url("/app-one/events"),
                               self.queue_dir, self.before.url("/app-two/before"))
        self.groupd.config.write_text(with_policy(self.groupd.config.read_text(), blocks))
        self.groupd.start()
        self.connect()

    def connect(self):
        self.channel = grpc.insecure_channel(self.groupd.address)
        self.groups = group_pb2_grpc.GroupServiceStub(self.channel)
        self.members = member_pb2_grpc.MemberServiceStub(self.channel)

    def close(self):
        HANG_APP_TWO.clear()
        self.before.release.set()
        self.channel.close()
        self.groupd.stop()
        self.before.stop()
        self.events.stop()

    @property
    def journal(self):
        return self.queue_dir / f"{APP_ID}.journal"

    def create(self, name, group_id=None, owner="alice", app_md=None, timeout=10, group_type=common_pb2.GROUP_TYPE_PUBLIC):
        request = group_pb2.CreateGroupRequest(
            group_id=group_id or uid("g"), type=group_type, owner_user_id=owner,
            profile=common_pb2.GroupProfile(name=name))
        return self.groups.CreateGroup(request, metadata=app_md or admin_md(), timeout=timeout).group

    def rename(self, group_id, name, app_md=None, timeout=10):
        return self.groups.UpdateGroupProfile(group_pb2.UpdateGroupProfileRequest(
            group_id=group_id, profile=common_pb2.GroupProfile(name=name),
            update_mask=field_mask_pb2.FieldMask(paths=["name"])), metadata=app_md or admin_md(), timeout=timeout)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    setup = Setup(tmp_path_factory.mktemp("groupd-webhooks"))
    yield setup
    setup.close()


def before_requests(receiver, path, callback, predicate=lambda received: True, timeout=20):
    """The next request to `path` for `callback` that `predicate` accepts (others are skipped)."""
    deadline = time.time() + timeout
    while True:
        received = receiver.next(max(0.1, deadline - time.time()))
        if received.path == path and received.json["callback"] == callback and predicate(received):
            return received


def collect_events(receiver, secret, done, timeout=30, already=()):
    """Every event the receiver gets (after those `already` taken from it) until `done(events by
    group)` holds, deduplicated by event_id (delivery is at least once), each signature verified.
    Returns {group_id: [event, ...]} in arrival order and the list of event_ids in arrival order."""
    by_group, seen, order = {}, set(), []
    deadline = time.time() + timeout
    already = list(already)
    while not done(by_group):
        received = already.pop(0) if already else receiver.next(max(0.1, deadline - time.time()))
        verify_signature(received, secret)
        event = received.json
        assert received.headers["X-Groupd-Event-Id"] == str(event["event_id"])
        assert received.query["CallbackCommand"] == event["callback"] == received.headers["X-Groupd-Callback"]
        if event["event_id"] in seen:
            continue
        seen.add(event["event_id"])
        order.append(event["event_id"])
        by_group.setdefault(event["group_id"], []).append(event)
    return by_group, order


def named(final_names):
    """done() for collect_events: every group has received the event that set its final name."""
    def done(by_group):
        return all(any(e["event_type"] == "GROUP_INFO_CHANGED" and e["fields"].get("name") == name
                       for e in by_group.get(group, ())) for group, name in final_names.items())
    return done


def assert_in_order(by_group, groups):
    """Each group's events arrived in its sequence, with none missing."""
    for group in groups:
        sequences = [event["group_sequence"] for event in by_group[group]]
        assert sequences == list(range(1, len(sequences) + 1)), (group, sequences)


def make_events(setup, groups, renames):
    """Create each group and rename it `renames` times; the last name is the group's marker."""
    finals = {}
    for group in groups:
        setup.create("first", group_id=group)
    for round_ in range(renames):
        for group in groups:
            setup.rename(group, f"{group}-name-{round_}")
            finals[group] = f"{group}-name-{round_}"
    return finals


# ---- before-hooks ----

def test_create_group_allowed_signs_and_names_the_callback(setup):
    group_id = uid("g")
    group = setup.create("a fine team", group_id=group_id)
    assert group.profile.name == "a fine team"
    received = before_requests(setup.before, "/app-one/before", "Group.CallbackBeforeCreateGroup",
                               lambda r: r.json["group_id"] == group_id)
    verify_signature(received, SECRET_ONE)
    assert received.query == {"CallbackCommand": "Group.CallbackBeforeCreateGroup", "AppId": APP_ID}
    body = received.json
    assert body["hook"] == "before_create_group" and body["app_id"] == APP_ID
    assert body["fields"]["name"] == "a fine team" and body["group_type"] == "public"


def test_signature_with_another_secret_does_not_verify(setup):
    group_id = uid("g")
    setup.create("checked", group_id=group_id)
    received = before_requests(setup.before, "/app-one/before", "Group.CallbackBeforeCreateGroup",
                               lambda r: r.json["group_id"] == group_id)
    with pytest.raises(AssertionError):
        verify_signature(received, SECRET_TWO)


def test_create_group_rejected_by_the_webhook_with_an_error_key(setup):
    group_id = uid("g")
    with pytest.raises(grpc.RpcError) as caught:
        setup.create("please reject-me", group_id=group_id)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    info = error_info(caught.value)
    assert info.reason == "POLICY_REJECTED" and info.metadata["error_keys"] == "name"
    assert info.metadata["plugin"] == "webhook"
    details = next(v for k, v in caught.value.trailing_metadata() if k == "grpc-status-details-bin")
    violations = []
    for detail in status_pb2.Status.FromString(details).details:
        if detail.type_url.endswith("google.rpc.BadRequest"):
            request = error_details_pb2.BadRequest()
            detail.Unpack(request)
            violations = [(v.field, v.description) for v in request.field_violations]
    assert violations == [("name", "says reject-me")]
    # Nothing was created: the same id is still free.
    assert setup.create("now fine", group_id=group_id).group_id == group_id


def test_the_webhook_rewrites_a_field(setup):
    group = setup.create("please rewrite-me")
    assert group.profile.name == "please rewritten"


def test_the_webhook_refuses_one_invitee(setup):
    group = setup.create("inviting", owner="alice", group_type=common_pb2.GROUP_TYPE_WORK)  # no approval
    response = setup.members.InviteMembers(member_pb2.InviteMembersRequest(
        group_id=group.group_id, user_ids=["friend-1", "blocked-2"]), metadata=admin_md(operator="alice"), timeout=10)
    results = {r.user_id: r for r in response.results}
    assert results["blocked-2"].result == common_pb2.MEMBER_RESULT_CODE_FAILED
    assert results["blocked-2"].reason == "POLICY_REJECTED"
    assert results["friend-1"].result == common_pb2.MEMBER_RESULT_CODE_SUCCESS


def test_a_hanging_webhook_costs_at_most_its_budget_fail_closed(setup):
    app_two = admin_md(app=OTHER_APP_ID, secret=OTHER_APP_SECRET)
    group_id = uid("g")
    HANG_APP_TWO.set()
    try:
        started = time.monotonic()
        expect_error(lambda: setup.create("held", group_id=group_id, app_md=app_two),
                     grpc.StatusCode.UNAVAILABLE, "POLICY_UNAVAILABLE")
        elapsed = time.monotonic() - started
    finally:
        HANG_APP_TWO.clear()
    # The webhook was called (and held), and the call came back within the budget.
    before_requests(setup.before, "/app-two/before", "Group.CallbackBeforeCreateGroup",
                    lambda r: r.json["group_id"] == group_id)
    assert elapsed < APP_TWO_BUDGET_MS / 1000 + MARGIN_S, elapsed
    # Fail closed: nothing was created.
    assert setup.create("answered", group_id=group_id, app_md=app_two).group_id == group_id


def test_a_hanging_webhook_costs_at_most_its_budget_fail_open(setup):
    app_two = admin_md(app=OTHER_APP_ID, secret=OTHER_APP_SECRET)
    group = setup.create("open", app_md=app_two)
    HANG_APP_TWO.set()
    try:
        started = time.monotonic()
        setup.rename(group.group_id, "renamed while it hangs", app_md=app_two)
        elapsed = time.monotonic() - started
    finally:
        HANG_APP_TWO.clear()
    before_requests(setup.before, "/app-two/before", "Group.CallbackBeforeModifyGroupInfo",
                    lambda r: r.json["group_id"] == group.group_id)
    assert elapsed < APP_TWO_BUDGET_MS / 1000 + MARGIN_S, elapsed
    got = setup.groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[group.group_id]),
                                     metadata=app_two, timeout=10).groups[0]
    assert got.profile.name == "renamed while it hangs"


@pytest.mark.parametrize("status, answer, why", [
    (500, {"ErrorCode": 0}, "HTTP status 500"),
    (200, b"<html>not json</html>", "not a JSON object"),
    (200, {"ErrorCode": 7}, "\"ErrorCode\" must be"),
    (200, {"ErrorCode": 0, "rewrite": {"name": 5}}, "\"rewrite\" must be"),
])
def test_a_bad_answer_is_a_plugin_error_and_the_failure_mode_applies(setup, status, answer, why):
    app_two = admin_md(app=OTHER_APP_ID, secret=OTHER_APP_SECRET)
    group_id = uid("g")
    APP_TWO_ANSWER[0] = (status, answer)
    try:
        info = expect_error(lambda: setup.create("answered badly", group_id=group_id, app_md=app_two),
                            grpc.StatusCode.UNAVAILABLE, "POLICY_UNAVAILABLE")
    finally:
        APP_TWO_ANSWER[0] = None
    assert info.metadata["kind"] == "plugin_error" and info.metadata["plugin"] == "webhook"
    # The host logs the plugin's message (a text log line escapes the quotes inside a value).
    assert why.replace('"', '\\"') in setup.groupd.log.read_text()
    # A good answer again: the same id is free (nothing was created) and the breaker is reset.
    assert setup.create("answered", group_id=group_id, app_md=app_two).group_id == group_id


# ---- after-events ----

def test_after_events_arrive_in_order_per_group_and_signed(setup):
    groups = [uid("ev") for _ in range(3)]
    finals = make_events(setup, groups, renames=4)
    by_group, order = collect_events(setup.events, SECRET_ONE, named(finals))
    assert_in_order(by_group, groups)
    assert order == sorted(order)  # one app's events go out in commit order
    created = by_group[groups[0]][0]
    assert created["callback"] == "Group.CallbackAfterCreateGroup" and created["event_type"] == "GROUP_CREATED"
    assert created["app_id"] == APP_ID and created["group_sequence"] == 1 and created["event_time"] > 0


def test_after_events_carry_the_details_the_stream_does(setup):
    group = uid("ev")
    setup.create("first", group_id=group)
    setup.groups.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
        group_id=group, update_mask=field_mask_pb2.FieldMask(paths=["join_option"]),
        settings=common_pb2.GroupSettings(join_option=common_pb2.JOIN_OPTION_FORBIDDEN)), metadata=admin_md(), timeout=10)
    setup.groups.SetGroupMute(group_pb2.SetGroupMuteRequest(
        group_id=group, muted=True, mode=common_pb2.GROUP_MUTE_MODE_ALL), metadata=admin_md(operator="alice"),
        timeout=10)

    def done(by_group):
        return any(e["event_type"] == "GROUP_MUTED" for e in by_group.get(group, ()))

    by_group, _ = collect_events(setup.events, SECRET_ONE, done)
    created, settings, muted = by_group[group]
    assert created["fields"]["member_count"] == "1" and created["fields"]["owner_id"] == "alice"
    assert settings["event_type"] == "GROUP_SETTINGS_CHANGED"
    assert settings["callback"] == "Group.CallbackAfterGroupSettingsChanged"
    assert settings["fields"] == {"join_option": "forbidden"}
    assert muted["fields"]["mode"] == "all" and muted["operator_id"] == "alice"


def test_a_receiver_answering_errors_gets_the_events_again(setup):
    failures = {"left": 3}

    def flaky(received):
        if failures["left"] > 0:
            failures["left"] -= 1
            return 503, {"error": "try later"}
        return 200, {}

    setup.events.respond = flaky
    try:
        groups = [uid("retry")]
        finals = make_events(setup, groups, renames=2)
        by_group, _ = collect_events(setup.events, SECRET_ONE, named(finals))
    finally:
        setup.events.respond = lambda received: (200, {})
    assert failures["left"] == 0
    assert_in_order(by_group, groups)


def test_receiver_down_and_back_loses_nothing(setup):
    setup.events.stop()
    groups = [uid("down") for _ in range(2)]
    try:
        finals = make_events(setup, groups, renames=3)
        # Journaled (fsynced) while nobody listens.
        wait_for(lambda: all(name in setup.journal.read_text() for name in finals.values()), "events journaled")
    finally:
        setup.events = Receiver(setup.events.port).start()
    by_group, _ = collect_events(setup.events, SECRET_ONE, named(finals))
    assert_in_order(by_group, groups)


def test_undelivered_events_survive_a_sigkill_of_groupd(tmp_path):
    setup = Setup(tmp_path)
    try:
        setup.events.stop()
        groups = [uid("kill") for _ in range(2)]
        finals = make_events(setup, groups, renames=2)
        wait_for(lambda: all(name in setup.journal.read_text() for name in finals.values()), "events journaled")
        setup.groupd.signal(signal.SIGKILL)
        setup.groupd.wait()
        setup.events = Receiver(setup.events.port).start()
        setup.groupd.start()
        setup.channel.close()
        setup.connect()
        by_group, _ = collect_events(setup.events, SECRET_ONE, named(finals))
        assert_in_order(by_group, groups)
    finally:
        setup.close()


def test_events_a_crash_kept_out_of_the_journal_are_replayed_from_the_store(tmp_path):
    """A crash between the store's commit and the journal's append: the journal lacks the last
    events (cut here after a SIGKILL); at start-up groupd reads them from its event log and hands
    them to the plugin again (after_event_position), in order, before any new event."""
    setup = Setup(tmp_path)
    try:
        setup.events.stop()
        groups = [uid("gap") for _ in range(2)]
        finals = make_events(setup, groups, renames=3)
        wait_for(lambda: all(name in setup.journal.read_text() for name in finals.values()), "events journaled")
        setup.groupd.signal(signal.SIGKILL)
        setup.groupd.wait()
        lines = setup.journal.read_text().splitlines(keepends=True)
        cut = [json.loads(line) for line in lines[-3:]]
        assert {event["fields"].get("name") for event in cut} >= set(finals.values())
        setup.journal.write_text("".join(lines[:-3]))
        setup.events = Receiver(setup.events.port).start()
        setup.groupd.start()
        setup.channel.close()
        setup.connect()
        after_restart = uid("new")
        setup.create("after the restart", group_id=after_restart)
        finals[after_restart] = "after the restart"
        done = named({group: finals[group] for group in groups})
        by_group, order = collect_events(
            setup.events, SECRET_ONE,
            lambda got: done(got) and any(e["group_id"] == after_restart for e in got.get(after_restart, ())))
        assert_in_order(by_group, groups + [after_restart])
        assert {event["event_id"] for event in cut} <= set(order)
        assert order == sorted(order)  # the replayed events came before the new one
    finally:
        setup.close()


def test_a_reload_hands_delivery_over_without_two_deliverers(tmp_path):
    """SIGHUP makes a new instance on the same queue_dir before the old one is destroyed: the old
    one's delivery in progress is aborted by instance_destroy and the new one takes over (the lock
    file), so at no time do two deliveries run at once, and nothing is lost."""
    setup = Setup(tmp_path)
    try:
        setup.events.respond = lambda received: (200, None)  # every delivery hangs
        groups = [uid("reload")]
        finals = make_events(setup, groups, renames=2)
        first = setup.events.next()
        setup.groupd.signal(signal.SIGHUP)
        wait_for(lambda: "configuration reloaded" in setup.groupd.log.read_text(), "the reload")
        # The new instance sends the same entry again once the old one let go of it.
        again = setup.events.next()
        assert again.json["event_id"] == first.json["event_id"]
        setup.events.respond = lambda received: (200, {})
        setup.events.release.set()
        by_group, _ = collect_events(setup.events, SECRET_ONE, named(finals), already=[first, again])
        assert_in_order(by_group, groups)
        assert setup.events.max_in_flight == 1
    finally:
        setup.close()


# `groupd check-config` on webhook entries: queue_dir is required with after_event, and checking
# creates nothing on disk.

def check_config(tmp_path, plugin_config, hooks):
    import subprocess

    from support import GROUPD_BIN
    config = tmp_path / "groupd.yaml"
    config.write_text(f"""apps:
  - id: {APP_ID}
    secrets: [{{kid: k1, secret: "0123456789abcdef0123456789abcdef"}}]
    policy:
      plugins:
        - path: libWebhookPolicy.so
          config: {plugin_config}
          hooks: {hooks}
""")
    return config, subprocess.run([str(GROUPD_BIN), "check-config", str(config)], capture_output=True, text=True,
                                  timeout=30)


@pytest.mark.parametrize("plugin_config", ['{url: "http://127.0.0.1:1/h", secret: s}',
                                           '\'{"url": "http://127.0.0.1:1/h", "secret": "s"}\''])
def test_check_config_refuses_after_event_without_queue_dir(tmp_path, plugin_config):
    config, result = check_config(tmp_path, plugin_config, "[before_create_group, after_event]")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.splitlines() == [
        f'groupd: {config}: apps[0].policy.plugins[0].config: the webhook plugin needs "queue_dir" '
        "(the after-event journal's directory) when its hooks include after_event"], result.stderr


def test_check_config_takes_a_webhook_without_after_event_and_no_queue_dir(tmp_path):
    _, result = check_config(tmp_path, '{url: "http://127.0.0.1:1/h", secret: s}', "[before_create_group]")
    assert result.returncode == 0, result.stderr


def test_check_config_creates_no_queue_dir(tmp_path):
    queue_dir = tmp_path / "spool" / "webhooks"
    _, result = check_config(tmp_path, f'{{url: "http://127.0.0.1:1/h", secret: s, queue_dir: "{queue_dir}"}}',
                             "[after_event]")
    assert result.returncode == 0, result.stderr
    assert "1 plugin loaded" in result.stdout
    assert not (tmp_path / "spool").exists(), "checking created the queue directory"


def test_check_config_refuses_a_queue_dir_that_cannot_be_created(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    _, result = check_config(tmp_path, f'{{url: "http://127.0.0.1:1/h", secret: s, queue_dir: "{blocker}/queue"}}',
                             "[after_event]")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert f"cannot create queue_dir {blocker}/queue: Not a directory" in result.stderr, result.stderr
