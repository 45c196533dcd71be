"""OpenTelemetry traces (`tracing: {otlp_endpoint, sample_ratio, ...}`) against a real OTLP/gRPC
collector: a grpcio server built from the PyPI `opentelemetry-proto` stubs, started here on a free
port. A known mix of calls arrives as spans: the caller's `traceparent` continued, the RPC semantic
conventions' attributes with groupd's app and reason, the store's commit span and a policy hook's
span under the call's span, Connect calls as `connect_rpc`. The sample ratio is applied to new
traces while a caller's decision is followed. With the collector down, calls still succeed and
`groupd_trace_spans_dropped_total` counts the spans lost, as it does when the queue is full."""
import json
import shutil
import tempfile
import threading
import urllib.request
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from support import KEYWORD_POLICY_YAML, Groupd, admin_md, free_port, new_database, uid, wait_for
from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
SPAN_KIND_SERVER, SPAN_KIND_INTERNAL = 2, 1
STATUS_CODE_ERROR = 2


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP/gRPC trace receiver keeping every span it is sent, with its resource's attributes."""

    def __init__(self):
        self.spans = []
        self.requests = 0
        # Cleared: every Export waits until it is set again (an unresponsive collector).
        self.open = threading.Event()
        self.open.set()
        self.changed = threading.Condition()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def Export(self, request, context):
        self.open.wait(30)
        with self.changed:
            self.requests += 1
            for resource_spans in request.resource_spans:
                resource = attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append((resource, span))
            self.changed.notify_all()
        return trace_service_pb2.ExportTraceServiceResponse()

    def wait_for_span(self, predicate, what, timeout=30):
        """The first span received (now or later) for which `predicate(span)` holds."""
        with self.changed:
            found = self.changed.wait_for(lambda: next((s for _, s in self.spans if predicate(s)), None), timeout)
        assert found is not None, f"no span {what} within {timeout} s; got {[s.name for _, s in self.spans]}"
        return found

    def stop(self):
        self.open.set()
        self.server.stop(None)


def attributes(pairs):
    """OTLP KeyValues as a dict of Python values."""
    out = {}
    for pair in pairs:
        kind = pair.value.WhichOneof("value")
        out[pair.key] = getattr(pair.value, kind) if kind else None
    return out


def configure(server, endpoint, sample_ratio=1.0, extra=""):
    """Puts `tracing` (exporting every 50 ms), the metrics endpoint and a keyword policy on
    CreateGroup's names into the config."""
    server.metrics_port = free_port()
    server.set_top_level(
        f"tracing:\n  otlp_endpoint: {endpoint}\n  sample_ratio: {sample_ratio}\n  service_name: groupd-test\n"
        f"  export_interval_ms: 50\n{extra}"
        f"metrics:\n  port: {server.metrics_port}\n")
    text = server.config.read_text()
    server.config.write_text(text.replace("    secrets:\n", KEYWORD_POLICY_YAML + "    secrets:\n", 1))


def scrape(server):
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10) as response:
        return response.read().decode().splitlines()


def dropped(server):
    for line in scrape(server):
        if line.startswith("groupd_trace_spans_dropped_total"):
            return float(line.split()[-1])
    raise AssertionError("no groupd_trace_spans_dropped_total in the scrape")


def create(stub, name="team", metadata=()):
    return stub.CreateGroup(group_pb2.CreateGroupRequest(
        group_id=uid("g"), type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id="owner",
        profile=common_pb2.GroupProfile(name=name)), metadata=list(admin_md()) + list(metadata), timeout=10)


def traceparent(trace_id=TRACE_ID, parent=PARENT_ID, flags="01"):
    return ("traceparent", f"00-{trace_id}-{parent}-{flags}")


@pytest.fixture
def collector():
    collector = Collector()
    yield collector
    collector.stop()


@pytest.fixture
def workdir():
    path = Path(tempfile.mkdtemp(prefix="groupd-tracing-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def start(workdir, endpoint, **options):
    server = Groupd(workdir, database=new_database())
    configure(server, endpoint, **options)
    return server.start()


def test_calls_continue_the_callers_trace_with_their_commit_and_policy_spans(collector, workdir):
    server = start(workdir, f"http://127.0.0.1:{collector.port}")
    try:
        with grpc.insecure_channel(server.address) as channel:
            stub = group_pb2_grpc.GroupServiceStub(channel)
            created = create(stub, metadata=[traceparent()])
            with pytest.raises(grpc.RpcError) as refused:
                create(stub, name="a forbidden name", metadata=[traceparent(trace_id="1" * 32)])
            assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            with pytest.raises(grpc.RpcError) as missing:
                stub.DismissGroup(group_pb2.DismissGroupRequest(group_id="no-such-group"),
                                  metadata=admin_md() + [traceparent(trace_id="2" * 32)], timeout=10)
            assert missing.value.code() == grpc.StatusCode.NOT_FOUND
        # The same method as a Connect call over HTTP/1.1.
        request = urllib.request.Request(
            f"http://{server.address}/groupd.v1.GroupService/GetGroupsInfo",
            data=json.dumps({"groupIds": [created.group.group_id]}).encode(),
            headers={"Content-Type": "application/json", "Authorization": admin_md()[0][1],
                     "traceparent": f"00-{'3' * 32}-{PARENT_ID}-01"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200

        call = collector.wait_for_span(
            lambda s: s.trace_id.hex() == TRACE_ID and s.kind == SPAN_KIND_SERVER, "for CreateGroup")
        assert call.name == "groupd.v1.GroupService/CreateGroup"
        assert call.parent_span_id.hex() == PARENT_ID
        attrs = attributes(call.attributes)
        assert attrs["rpc.system"] == "grpc"
        assert attrs["rpc.service"] == "groupd.v1.GroupService"
        assert attrs["rpc.method"] == "CreateGroup"
        assert attrs["rpc.grpc.status_code"] == 0
        assert attrs["groupd.app"] == "app-one"
        assert call.status.code != STATUS_CODE_ERROR
        assert call.end_time_unix_nano >= call.start_time_unix_nano > 0

        commit = collector.wait_for_span(
            lambda s: s.trace_id.hex() == TRACE_ID and s.name == "store.commit", "store.commit under CreateGroup")
        assert commit.parent_span_id == call.span_id
        assert commit.kind == SPAN_KIND_INTERNAL
        commit_attrs = attributes(commit.attributes)
        assert commit_attrs["groupd.store.batch_size"] >= 1
        assert commit_attrs["groupd.store.mutation"] == "createGroup"
        assert commit_attrs["groupd.store.outcome"] == "committed"
        assert call.start_time_unix_nano <= commit.start_time_unix_nano <= commit.end_time_unix_nano <= call.end_time_unix_nano

        hook = collector.wait_for_span(
            lambda s: s.trace_id.hex() == "1" * 32 and s.name == "policy before_create_group", "for the policy hook")
        refused_call = collector.wait_for_span(
            lambda s: s.trace_id.hex() == "1" * 32 and s.kind == SPAN_KIND_SERVER, "for the refused CreateGroup")
        assert hook.parent_span_id == refused_call.span_id
        hook_attrs = attributes(hook.attributes)
        assert hook_attrs["groupd.policy.plugin"] == "keyword-moderation"
        assert hook_attrs["groupd.policy.decision"] == "reject"
        refused_attrs = attributes(refused_call.attributes)
        assert refused_attrs["rpc.grpc.status_code"] == grpc.StatusCode.FAILED_PRECONDITION.value[0]
        assert refused_attrs["groupd.reason"] == "POLICY_REJECTED"
        assert refused_call.status.code != STATUS_CODE_ERROR  # the client's refusal, not a server fault
        assert not [s for _, s in collector.spans if s.trace_id.hex() == "1" * 32 and s.name == "store.commit"]

        not_found = collector.wait_for_span(
            lambda s: s.trace_id.hex() == "2" * 32 and s.kind == SPAN_KIND_SERVER, "for DismissGroup")
        assert attributes(not_found.attributes)["groupd.reason"] == "GROUP_NOT_FOUND"
        assert attributes(not_found.attributes)["rpc.grpc.status_code"] == 5
        # Its write failed in the transaction (no such group): the commit span says so.
        failed_write = collector.wait_for_span(
            lambda s: s.trace_id.hex() == "2" * 32 and s.name == "store.commit", "store.commit under DismissGroup")
        assert failed_write.parent_span_id == not_found.span_id
        assert failed_write.status.code == STATUS_CODE_ERROR

        connect = collector.wait_for_span(
            lambda s: s.trace_id.hex() == "3" * 32 and s.kind == SPAN_KIND_SERVER, "for the Connect call")
        assert connect.name == "groupd.v1.GroupService/GetGroupsInfo"
        assert attributes(connect.attributes)["rpc.system"] == "connect_rpc"
        assert attributes(connect.attributes)["rpc.grpc.status_code"] == 0

        resources = [resource for resource, s in collector.spans if s.span_id == call.span_id]
        assert resources[0]["service.name"] == "groupd-test"
        assert dropped(server) == 0
        # The metrics still hear the refusal's reason from the traced handler.
        refusals = [line for line in scrape(server) if line.startswith("groupd_rpc_calls_total")
                    and 'method="/groupd.v1.GroupService/CreateGroup"' in line and 'reason="POLICY_REJECTED"' in line]
        assert len(refusals) == 1 and refusals[0].endswith(" 1"), refusals
    finally:
        server.stop()


def test_the_ratio_samples_new_traces_and_the_callers_decision_is_followed(collector, workdir):
    server = start(workdir, f"http://127.0.0.1:{collector.port}", sample_ratio=0)
    try:
        with grpc.insecure_channel(server.address) as channel:
            stub = group_pb2_grpc.GroupServiceStub(channel)
            for _ in range(5):
                create(stub)                                                   # a new trace: ratio 0
            create(stub, metadata=[traceparent(trace_id="5" * 32, flags="00")])  # the caller did not sample
            create(stub, metadata=[traceparent(trace_id="6" * 32, flags="01")])  # the caller sampled
        # Spans are exported in the order they ended: once the sampled call's commit span is in,
        # anything the unsampled calls had made would be too.
        collector.wait_for_span(lambda s: s.trace_id.hex() == "6" * 32 and s.name == "store.commit", "of the sampled call")
        collector.wait_for_span(lambda s: s.trace_id.hex() == "6" * 32 and s.kind == SPAN_KIND_SERVER, "of the sampled call")
        with collector.changed:
            traces = {s.trace_id.hex() for _, s in collector.spans}
        assert traces == {"6" * 32}, traces
    finally:
        server.stop()


def test_with_the_collector_down_calls_succeed_and_lost_spans_are_counted(workdir):
    down = free_port()  # nothing listens there
    server = start(workdir, f"http://127.0.0.1:{down}")
    try:
        with grpc.insecure_channel(server.address) as channel:
            stub = group_pb2_grpc.GroupServiceStub(channel)
            for _ in range(20):
                assert create(stub).group.group_id
        # 20 server spans and 20 commit spans, each lost in an export that failed.
        wait_for(lambda: dropped(server) >= 40, "40 dropped spans", timeout=60)
        wait_for(lambda: "tracing: Failed to export batch" in server.log.read_text(), "the export warning in the log")
    finally:
        server.stop()


def test_a_full_queue_drops_and_counts_spans(collector, workdir):
    # One span fits in the queue, and the collector holds the first export: while it waits the
    # queue fills and every further span is dropped.
    server = start(workdir, f"http://127.0.0.1:{collector.port}", extra="  max_queue_size: 1\n  max_batch_size: 1\n")
    try:
        collector.open.clear()
        with grpc.insecure_channel(server.address) as channel:
            stub = group_pb2_grpc.GroupServiceStub(channel)
            for _ in range(10):
                assert create(stub).group.group_id
        collector.open.set()
        # 20 spans ended (each call's and its commit's): one in the held export, one in the queue,
        # the other 18 dropped and counted once the export returns.
        wait_for(lambda: dropped(server) >= 18, "18 dropped spans", timeout=60)
    finally:
        server.stop()
