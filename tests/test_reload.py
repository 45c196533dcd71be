"""SIGHUP reload through a real groupd: under load (clients keep calling while the file changes:
a limit, a secret rotation, an app added and one removed, rate limits), with no failed call and
the new configuration in force afterwards; an invalid file is refused with a log line and the old
configuration stays; keys that need a restart are reported and keep their values."""
import shutil
import signal
import tempfile
import threading
import uuid
from pathlib import Path

import grpc
import pytest

from support import (APP_ID, APP_SECRET, OTHER_APP_ID, OTHER_APP_SECRET, Groupd, error_info, mint_token,
                     new_database, wait_for)
from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc
from grpc.health.v1 import health_pb2, health_pb2_grpc

SECRET_2 = "rotated-secret-for-app-one-0123456789abcdef"
THIRD_APP_ID = "app-three"
THIRD_SECRET = "secret-of-the-third-app-0123456789abcdefgh"


def config_text(server, apps, extra=""):
    """A configuration for `server` serving `apps`: (id, [(kid, secret)], extra app YAML)."""
    lines = ["listen:", "  host: 127.0.0.1", f"  port: {server.port}", f"data_dir: {server.data_dir}",
             server.store_yaml.rstrip("\n"), extra, "apps:"]
    for app_id, secrets, app_extra in apps:
        lines.append(f"  - id: {app_id}")
        lines.append("    secrets:")
        for kid, secret in secrets:
            lines += [f"      - kid: {kid}", f"        secret: {secret}"]
        if app_extra:
            lines += ["    " + line for line in app_extra.strip("\n").splitlines()]
    return "\n".join(lines) + "\n"


def code_of(call):
    try:
        call()
        return grpc.StatusCode.OK, None
    except grpc.RpcError as error:
        info = error_info(error)
        return error.code(), info.reason if info else None


def info_call(stub, token):
    return lambda: stub.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=["nothing"]),
                                      metadata=[("authorization", "Bearer " + token)], timeout=10)


def create_call(stub, token, name):
    return lambda: stub.CreateGroup(group_pb2.CreateGroupRequest(
        type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id="owner-" + uuid.uuid4().hex[:8],
        profile=common_pb2.GroupProfile(name=name)), metadata=[("authorization", "Bearer " + token)], timeout=10)


def log_text(server):
    return server.log.read_text(errors="replace")


@pytest.fixture
def server():
    workdir = Path(tempfile.mkdtemp(prefix="groupd-reload-"))
    groupd = Groupd(workdir, database=new_database())
    yield groupd
    groupd.stop()
    shutil.rmtree(workdir, ignore_errors=True)


class Load:
    """Client threads calling all along, each on its own channel: reads and writes as app-one's
    backend with the token in `tokens["app-one"]` (switched at rotation, as a client would), and
    reads as app-two's backend until `stop_two` is set. Every failed call is recorded."""

    def __init__(self, address):
        self.address = address
        self.tokens = {APP_ID: mint_token(kid="k1"), OTHER_APP_ID: mint_token(app=OTHER_APP_ID, secret=OTHER_APP_SECRET)}
        self.stop = threading.Event()
        self.stop_two = threading.Event()
        self.failures = []
        self.calls = {APP_ID: 0, OTHER_APP_ID: 0}
        self.finished_with = {}  # thread index → the token its last finished call used
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(APP_ID, i)) for i in range(3)]
        self.apps = [APP_ID, APP_ID, APP_ID, OTHER_APP_ID]
        self.threads.append(threading.Thread(target=self.run, args=(OTHER_APP_ID, 3)))

    def run(self, app, index):
        with grpc.insecure_channel(self.address) as channel:
            stub = group_pb2_grpc.GroupServiceStub(channel)
            n = 0
            while not self.stop.is_set() and not (app == OTHER_APP_ID and self.stop_two.is_set()):
                n += 1
                token = self.tokens[app]
                call = create_call(stub, token, f"load{n % 100}") if app == APP_ID and n % 3 == 0 else info_call(stub, token)
                code, reason = code_of(call)
                with self.lock:
                    self.calls[app] += 1
                    self.finished_with[index] = token
                    if code != grpc.StatusCode.OK:
                        self.failures.append((app, index, code, reason))

    def switch(self, app, token):
        """Move the clients of `app` to `token`, returning once none has a call with the old one
        in flight (as a client finishing its calls before the old secret is removed)."""
        self.tokens[app] = token
        indices = [i for i, owner in enumerate(self.apps) if owner == app]
        wait_for(lambda: all(self.finished_with.get(i) == token for i in indices), f"{app}'s clients to move")

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)


def test_reload_under_load(server):
    one_k1 = (APP_ID, [("k1", APP_SECRET)], "")
    two = (OTHER_APP_ID, [("k1", OTHER_APP_SECRET)], "")
    server.config.write_text(config_text(server, [one_k1, two]))
    server.start()

    def reload(apps):
        server.config.write_text(config_text(server, apps))
        server.signal(signal.SIGHUP)

    with grpc.insecure_channel(server.address) as channel:
        stub = group_pb2_grpc.GroupServiceStub(channel)
        # A long-lived stream on this connection: it must live through every reload.
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""), timeout=300)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING

        with Load(server.address) as load:
            wait_for(lambda: load.calls[APP_ID] > 10 and load.calls[OTHER_APP_ID] > 3, "the load to start")

            # A limit: group names of at most 10 bytes.
            limited = (APP_ID, [("k1", APP_SECRET)], "limits: {group_name_bytes: 10}")
            reload([limited, two])
            wait_for(lambda: code_of(create_call(stub, mint_token(kid="k1"), "x" * 20))[0]
                     == grpc.StatusCode.INVALID_ARGUMENT, "the 10-byte name limit")

            # Rotation: add k2, move the clients to it, remove k1.
            both = (APP_ID, [("k1", APP_SECRET), ("k2", SECRET_2)], "limits: {group_name_bytes: 10}")
            reload([both, two])
            wait_for(lambda: code_of(info_call(stub, mint_token(kid="k2", secret=SECRET_2)))[0] == grpc.StatusCode.OK,
                     "the new secret k2")
            load.switch(APP_ID, mint_token(kid="k2", secret=SECRET_2))
            only_k2 = (APP_ID, [("k2", SECRET_2)], "limits: {group_name_bytes: 10}")
            reload([only_k2, two])
            wait_for(lambda: code_of(info_call(stub, mint_token(kid="k1")))
                     == (grpc.StatusCode.UNAUTHENTICATED, "UNKNOWN_KID"), "the removed secret k1 to be refused")

            # An app added.
            third = (THIRD_APP_ID, [("t1", THIRD_SECRET)], "")
            reload([only_k2, two, third])
            third_token = mint_token(app=THIRD_APP_ID, secret=THIRD_SECRET, kid="t1")
            wait_for(lambda: code_of(info_call(stub, third_token))[0] == grpc.StatusCode.OK, "app-three")

            # An app removed (its client stopped first).
            load.stop_two.set()
            load.threads[-1].join(timeout=30)
            reload([only_k2, third])
            wait_for(lambda: code_of(info_call(stub, mint_token(app=OTHER_APP_ID, secret=OTHER_APP_SECRET)))
                     == (grpc.StatusCode.UNAUTHENTICATED, "UNKNOWN_APP"), "app-two to be gone")

            # Rate limits for app-three's operators.
            third_limited = (THIRD_APP_ID, [("t1", THIRD_SECRET)], "rate_limits: {operator: {per_second: 0.01, burst: 2}}")
            reload([only_k2, third_limited])
            user = mint_token(app=THIRD_APP_ID, secret=THIRD_SECRET, kid="t1", sub="alice", role="user")
            wait_for(lambda: code_of(info_call(stub, user))[0] == grpc.StatusCode.RESOURCE_EXHAUSTED,
                     "app-three's operator limit")
            calls_before = dict(load.calls)
            wait_for(lambda: load.calls[APP_ID] > calls_before[APP_ID] + 5, "more load after the last reload")

        assert load.failures == [], load.failures[:10]
        assert load.calls[APP_ID] > 0 and load.calls[OTHER_APP_ID] > 0

        # The limits in force afterwards: the name limit, k2 only, app-three limited, app-two gone.
        token = mint_token(kid="k2", secret=SECRET_2)
        assert code_of(create_call(stub, token, "x" * 20)) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
        assert code_of(create_call(stub, token, "x" * 10))[0] == grpc.StatusCode.OK
        assert code_of(info_call(stub, user)) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED")
        other_user = mint_token(app=THIRD_APP_ID, secret=THIRD_SECRET, kid="t1", sub="bob", role="user")
        assert code_of(info_call(stub, other_user))[0] == grpc.StatusCode.OK

        # The stream opened before the first reload is still up; the process never restarted.
        assert server.process.poll() is None
        watch.cancel()
    assert log_text(server).count("configuration reloaded") >= 6


def test_invalid_file_is_refused_and_the_old_configuration_stays(server):
    good = config_text(server, [(APP_ID, [("k1", APP_SECRET)], "")])
    server.config.write_text(good)
    server.start()
    token = mint_token(kid="k1")
    mistakes = [
        ("duplicate app id", config_text(server, [(APP_ID, [("k1", APP_SECRET)], ""), (APP_ID, [("k1", APP_SECRET)], "")]),
         "apps[1].id: duplicate app id"),
        ("bad YAML", "apps: [unclosed\n", "not valid YAML"),
        ("short secret", config_text(server, [(APP_ID, [("k1", "short")], "")]), "apps[0].secrets[0].secret"),
        ("unknown key", good + "colour: blue\n", "colour: unknown key"),
        ("wrong type", good.replace("apps:", "max_connections: many\napps:"), "max_connections: expected an integer"),
        ("bad rate limit", config_text(server, [(APP_ID, [("k1", APP_SECRET)], "rate_limits: {app: {per_second: 0}}")]),
         "apps[0].rate_limits.app.per_second"),
    ]
    with grpc.insecure_channel(server.address) as channel:
        stub = group_pb2_grpc.GroupServiceStub(channel)
        for name, text, expected in mistakes:
            server.config.write_text(text)
            server.signal(signal.SIGHUP)
            wait_for(lambda: expected in log_text(server), f"the log line for {name}")
            assert "reload refused" in log_text(server)
            assert code_of(info_call(stub, token))[0] == grpc.StatusCode.OK, name
            assert server.process.poll() is None
        # The file removed: refused as well.
        server.config.unlink()
        server.signal(signal.SIGHUP)
        wait_for(lambda: "cannot read the file" in log_text(server), "the missing file")
        assert code_of(info_call(stub, token))[0] == grpc.StatusCode.OK
        assert "configuration reloaded" not in log_text(server)


def test_keys_that_need_a_restart_are_logged_and_kept(server):
    apps = [(APP_ID, [("k1", APP_SECRET)], "")]
    server.config.write_text(config_text(server, apps))
    server.start()
    text = config_text(server, apps, extra="max_connections: 5\nevent_loop_threads: 3\n")
    text = text.replace(f"port: {server.port}", "port: 1")
    server.config.write_text(text)
    server.signal(signal.SIGHUP)
    wait_for(lambda: "configuration reloaded" in log_text(server), "the reload")
    log = log_text(server)
    for key in ("listen.port", "max_connections", "event_loop_threads"):
        assert f"reload: {key} needs a restart" in log, log
    # Still serving on the old port, with more than five connections allowed.
    own = [("grpc.use_local_subchannel_pool", 1)]  # one connection per channel
    channels = [grpc.insecure_channel(server.address, options=own) for _ in range(7)]
    try:
        for channel in channels:
            stub = group_pb2_grpc.GroupServiceStub(channel)
            assert code_of(info_call(stub, mint_token(kid="k1")))[0] == grpc.StatusCode.OK
    finally:
        for channel in channels:
            channel.close()
