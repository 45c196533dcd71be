"""The Prometheus endpoint of a real groupd (`metrics: {host, port}`): a known mix of calls (OK, a
bad token, a missing group, a rate limit, a policy rejection, an unknown method) is counted
exactly, by method, status code and reason; latency histograms agree with the counters; the
gauges (calls in flight, connections, streams, event subscribers, breakers, configuration
generation) say what is open; a scrape while calls are in flight returns; anything but
GET /metrics is refused."""
import re
import shutil
import socket
import tempfile
import threading
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest

from support import (APP_ID, KEYWORD_POLICY_YAML, OTHER_APP_ID, OTHER_APP_SECRET, Groupd, StreamReader, admin_md,
                     free_port, mint_token, new_database, uid, user_md, wait_for)
from groupd.v1 import common_pb2, event_pb2, event_pb2_grpc, group_pb2, group_pb2_grpc


# app-one: names with "forbidden" are refused by a plugin; app-two: each operator has a bucket of 2
# calls that refills once in 1000 s (so the third call of one user is refused, and nothing refills
# during the test).
APP_ONE_EXTRA = KEYWORD_POLICY_YAML
APP_TWO_EXTRA = """\
    rate_limits:
      operator: {per_second: 0.001, burst: 2}
"""

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def configure(server, metrics_port, extra=""):
    """Puts the metrics endpoint, app-one's policy and app-two's rate limit into the config."""
    text = server.config.read_text()
    lines, out, app = text.splitlines(keepends=True), [], None
    for line in lines:
        if line.startswith("  - id: "):
            if app is not None:
                out.append(APP_ONE_EXTRA if app == APP_ID else APP_TWO_EXTRA)
            app = line.split(":", 1)[1].strip()
        out.append(line)
    out.append(APP_ONE_EXTRA if app == APP_ID else APP_TWO_EXTRA)
    text = "".join(out).replace("apps:\n", f"metrics:\n  host: 127.0.0.1\n  port: {metrics_port}\n{extra}apps:\n", 1)
    server.config.write_text(text)


class Scrape:
    """One parsed exposition: samples by name, each a (labels dict, value) pair."""

    def __init__(self, text):
        self.text = text
        self.samples = {}
        self.types = {}
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split(" ", 3)
                self.types[name] = kind
                continue
            if not line or line.startswith("#"):
                continue
            match = LINE.match(line)
            assert match, f"not a sample line: {line!r}"
            name, labels, value = match.groups()
            self.samples.setdefault(name, []).append((dict(LABEL.findall(labels or "")), float(value)))

    def value(self, name, **labels):
        """The value of the one sample of `name` with exactly `labels`; 0 when absent."""
        found = [v for l, v in self.samples.get(name, []) if l == labels]
        assert len(found) <= 1, (name, labels, found)
        return found[0] if found else 0.0

    def matching(self, name, **labels):
        """Every sample of `name` whose labels include `labels`."""
        return [(l, v) for l, v in self.samples.get(name, []) if all(l.get(k) == x for k, x in labels.items())]

    def calls(self, method):
        """{(code, reason): count} of a method."""
        return {(l["code"], l["reason"]): v for l, v in self.matching("groupd_rpc_calls_total", method=method) if v}


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return Scrape(response.read().decode())


@pytest.fixture(scope="module")
def server():
    workdir = Path(tempfile.mkdtemp(prefix="groupd-metrics-"))
    groupd = Groupd(workdir, database=new_database())
    groupd.metrics_port = free_port()
    configure(groupd, groupd.metrics_port)
    groupd.start()
    yield groupd
    groupd.stop()
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def channel(server):
    with grpc.insecure_channel(server.address) as channel:
        yield channel


GROUPS = "/groupd.v1.GroupService/"


def test_a_known_mix_of_calls_is_counted_exactly(server, channel):
    stub = group_pb2_grpc.GroupServiceStub(channel)
    before = scrape(server.metrics_port)
    assert before.calls(GROUPS + "CreateGroup") == {}, "the server must be fresh"

    def create(name, md):
        return stub.CreateGroup(group_pb2.CreateGroupRequest(
            group_id=uid("g"), type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id="owner",
            profile=common_pb2.GroupProfile(name=name)), metadata=md, timeout=10)

    def fails(call, code):
        with pytest.raises(grpc.RpcError) as caught:
            call()
        assert caught.value.code() == code, caught.value

    for _ in range(3):
        create("team", admin_md())                                            # OK x3
    fails(lambda: create("a forbidden name", admin_md()), grpc.StatusCode.FAILED_PRECONDITION)  # policy
    bad = [("authorization", "Bearer " + mint_token(secret="not-the-secret-of-app-one-0123456789"))]
    for _ in range(2):
        fails(lambda: create("team", bad), grpc.StatusCode.UNAUTHENTICATED)   # bad signature x2
    revoke = group_pb2.RevokeGroupRequest(group_id=uid("missing"), reason="test")
    fails(lambda: stub.RevokeGroup(revoke, metadata=admin_md(), timeout=10), grpc.StatusCode.NOT_FOUND)
    info = group_pb2.GetGroupsInfoRequest(group_ids=["nothing"])
    limited = user_md("limited-user", app=OTHER_APP_ID, secret=OTHER_APP_SECRET)
    for _ in range(2):
        stub.GetGroupsInfo(info, metadata=limited, timeout=10)                # OK x2 (the burst)
    fails(lambda: stub.GetGroupsInfo(info, metadata=limited, timeout=10), grpc.StatusCode.RESOURCE_EXHAUSTED)
    unknown = channel.unary_unary("/no.such.Service/Method")
    fails(lambda: unknown(b"", timeout=10), grpc.StatusCode.UNIMPLEMENTED)

    after = scrape(server.metrics_port)
    assert after.calls(GROUPS + "CreateGroup") == {
        ("OK", ""): 3, ("FAILED_PRECONDITION", "POLICY_REJECTED"): 1, ("UNAUTHENTICATED", "TOKEN_BAD_SIGNATURE"): 2}
    assert after.calls(GROUPS + "RevokeGroup") == {("NOT_FOUND", "GROUP_NOT_FOUND"): 1}
    assert after.calls(GROUPS + "GetGroupsInfo") == {("OK", ""): 2, ("RESOURCE_EXHAUSTED", "RATE_LIMITED"): 1}
    assert after.calls("unknown") == {("UNIMPLEMENTED", ""): 1}
    assert not after.matching("groupd_rpc_calls_total", method="/no.such.Service/Method")
    assert after.value("groupd_rate_limit_refusals_total", limit="operator") == 1
    assert after.value("groupd_rate_limit_refusals_total", limit="app") == 0
    assert after.types["groupd_rpc_calls_total"] == "counter"
    assert after.types["groupd_rpc_duration_seconds"] == "histogram"

    # The latency histograms count every call of their method, and their buckets add up.
    for method, total in ((GROUPS + "CreateGroup", 6), (GROUPS + "RevokeGroup", 1), (GROUPS + "GetGroupsInfo", 3),
                          ("unknown", 1)):
        assert after.value("groupd_rpc_duration_seconds_count", method=method) == total, method
        assert after.value("groupd_rpc_duration_seconds_bucket", method=method, le="+Inf") == total
        buckets = sorted((float(l["le"]), v) for l, v in after.matching("groupd_rpc_duration_seconds_bucket", method=method))
        assert all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), buckets
        assert after.value("groupd_rpc_duration_seconds_sum", method=method) > 0

    # Three groups created and one revocation tried: four writes in at least one transaction (a
    # periodic pass of the server may add its own); both histograms count every transaction.
    commits = after.value("groupd_store_commit_duration_seconds_count")
    assert commits >= before.value("groupd_store_commit_duration_seconds_count") + 1
    assert after.value("groupd_store_commit_batch_size_count") == commits
    assert after.value("groupd_store_commit_batch_size_sum") >= before.value("groupd_store_commit_batch_size_sum") + 4
    # The keyword plugin ran once per CreateGroup of app-one that passed authentication.
    hook = dict(plugin="keyword-moderation", hook="before_create_group")
    assert after.value("groupd_policy_hook_duration_seconds_count", **hook) == 4
    assert after.value("groupd_policy_circuit_breaker_state", app=APP_ID, plugin="keyword-moderation") == 0
    assert after.value("groupd_config_generation") == 1
    assert after.value("groupd_rpc_calls_in_flight") == 0
    assert after.value("groupd_connections_open") >= 1


def test_a_scrape_while_calls_are_in_flight_returns_and_counts_them(server, channel):
    events = event_pb2_grpc.EventServiceStub(channel)
    stream = StreamReader(events.Subscribe(event_pb2.SubscribeRequest(), metadata=user_md("watcher"), timeout=60))
    try:
        stream.until_caught_up()
        during = scrape(server.metrics_port)
        assert during.value("groupd_rpc_calls_in_flight") >= 1
        assert during.value("groupd_streams_open") >= 1
        assert during.value("groupd_event_subscribers") == 1
        assert during.value("groupd_event_subscriber_queue_depth_max") >= 0

        # Calls keep flowing on other threads while the endpoint is scraped again and again.
        stop = threading.Event()
        done = []

        def load():
            stub = group_pb2_grpc.GroupServiceStub(channel)
            request = group_pb2.GetGroupsInfoRequest(group_ids=["nothing"])
            while not stop.is_set() and len(done) < 2000:
                stub.GetGroupsInfo(request, metadata=admin_md(), timeout=10)
                done.append(1)

        workers = [threading.Thread(target=load) for _ in range(4)]
        for worker in workers:
            worker.start()
        try:
            for _ in range(20):
                assert scrape(server.metrics_port).value("groupd_event_subscribers") == 1
        finally:
            stop.set()
            for worker in workers:
                worker.join(30)
        after = scrape(server.metrics_port)
        assert after.calls(GROUPS + "GetGroupsInfo")[("OK", "")] >= len(done)
    finally:
        stream.cancel()
    # The client's reset ends the stream's call as CANCELLED; nothing is in flight any more.
    subscribe = "/groupd.v1.EventService/Subscribe"
    wait_for(lambda: (lambda now: now.calls(subscribe) and not now.value("groupd_event_subscribers"))(scrape(server.metrics_port)),
             "the cancelled Subscribe counted and its subscriber gone", timeout=15)
    final = scrape(server.metrics_port)
    assert final.calls(subscribe) == {("CANCELLED", ""): 1}
    assert final.value("groupd_rpc_calls_in_flight") == 0
    assert final.value("groupd_event_subscribers") == 0


def test_anything_but_get_metrics_is_refused(server):
    for path in ("/", "/metric", "/metrics/x"):
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}{path}", timeout=10)
        assert caught.value.code == 404, path
    request = urllib.request.Request(f"http://127.0.0.1:{server.metrics_port}/metrics", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    assert caught.value.code == 405
    # With a query string, still the metrics.
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics?x=1", timeout=10) as response:
        assert response.status == 200


def test_without_metrics_nothing_listens():
    workdir = Path(tempfile.mkdtemp(prefix="groupd-nometrics-"))
    groupd = Groupd(workdir)
    try:
        groupd.start()
        with grpc.insecure_channel(groupd.address) as channel:
            group_pb2_grpc.GroupServiceStub(channel).GetGroupsInfo(
                group_pb2.GetGroupsInfoRequest(group_ids=["nothing"]), metadata=admin_md(), timeout=10)
        assert "metrics endpoint listening" not in groupd.log.read_text()
    finally:
        groupd.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def test_a_metrics_port_in_use_stops_the_server_with_a_clear_line():
    workdir = Path(tempfile.mkdtemp(prefix="groupd-metrics-busy-"))
    groupd = Groupd(workdir)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        configure(groupd, port)
        try:
            try:
                groupd.start()
            except RuntimeError:
                pass  # it exited before its gRPC port answered
            assert groupd.process.wait(timeout=30) != 0
            assert f"cannot listen for metrics on 127.0.0.1:{port}" in groupd.log.read_text()
        finally:
            groupd.stop()
            shutil.rmtree(workdir, ignore_errors=True)
