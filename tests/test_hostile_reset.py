"""Rapid reset (CVE-2023-44487) against a real groupd: a connection that opens and resets streams
faster than `transport.reset_burst` / `transport.max_resets_per_second` allow gets GOAWAY
ENHANCE_YOUR_CALM and is closed, while every other client is served; a client cancelling calls at
an ordinary rate is left alone; a request reset in the same read as its END_STREAM never reaches
its handler; and attackers reconnecting in a loop do not grow the server's memory."""
import shutil
import struct
import sys
import tempfile
import threading
from pathlib import Path

import grpc
import pytest

from grpc.health.v1 import health_pb2, health_pb2_grpc
from h2raw import (DATA, FLAG_END_HEADERS, FLAG_END_STREAM, HEADERS, RST_STREAM, FrameClient, frame, grpc_frame,
                   grpc_headers)
from hostile import metric
from support import ROOT, Groupd, admin_md, free_port, new_database, uid, wait_for

sys.path.insert(0, str(ROOT / "scripts"))
import rapid_reset  # noqa: E402  (scripts/rapid_reset.py)

ENHANCE_YOUR_CALM = 0xB
CANCEL = 8
RESET_BURST = 150
CHECK = "/grpc.health.v1.Health/Check"
WATCH = "/grpc.health.v1.Health/Watch"
CREATE_GROUP = "/groupd.v1.GroupService/CreateGroup"
FLOOD_GOAWAYS = "groupd_transport_reset_flood_goaways_total"


@pytest.fixture(scope="module")
def server():
    workdir = Path(tempfile.mkdtemp(prefix="groupd-reset-"))
    groupd = Groupd(workdir, database=new_database())
    groupd.metrics_port = free_port()
    groupd.set_top_level(f"metrics:\n  host: 127.0.0.1\n  port: {groupd.metrics_port}\n"
                         f"transport:\n  reset_burst: {RESET_BURST}\n  max_resets_per_second: 100\n")
    groupd.start()
    yield groupd
    groupd.stop()
    shutil.rmtree(workdir, ignore_errors=True)


def check(channel):
    return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10).status


def watch_request():
    return grpc_frame(health_pb2.HealthCheckRequest().SerializeToString())


def test_reset_flood_gets_enhance_your_calm_before_its_end(server):
    """3000 streams opened and reset in one burst: GOAWAY ENHANCE_YOUR_CALM once the burst of
    RESET_BURST resets is spent, naming the last stream processed; no stream above it was
    answered; the connection is closed; the counter and the log say so."""
    before = metric(server, FLOOD_GOAWAYS)
    count = 3000
    with FrameClient(server.port) as client:
        blob = b"".join(
            frame(HEADERS, FLAG_END_HEADERS, 2 * i + 1, client.encoder.encode(grpc_headers(WATCH)))
            + frame(DATA, FLAG_END_STREAM, 2 * i + 1, watch_request())
            + frame(RST_STREAM, 0, 2 * i + 1, struct.pack(">I", CANCEL))
            for i in range(count))
        try:
            client.send(blob)
        except OSError:
            pass  # closed by the server before it read everything: what the test wants
        assert client.read_until(lambda: client.goaways and client.closed, timeout=20), (client.goaways, client.closed)
        (last_stream_id, code), = client.goaways
        assert code == ENHANCE_YOUR_CALM
        # At least the burst went through (stream 2·burst+1 carried the reset over it); the flood
        # was cut long before its end.
        assert last_stream_id % 2 == 1
        assert 2 * RESET_BURST + 1 <= last_stream_id < 2 * count - 1, last_stream_id
        answered = [sid for sid, result in client.results.items() if result.headers]
        assert all(sid <= last_stream_id for sid in answered), (last_stream_id, answered)
    wait_for(lambda: metric(server, FLOOD_GOAWAYS) == before + 1, "the reset-flood counter")
    wait_for(lambda: any("client resets streams too fast" in line and "peer=127.0.0.1:" in line
                         for line in server.log.read_text().splitlines()), "the notice log line with the peer")
    with grpc.insecure_channel(server.address) as channel:
        assert check(channel) == health_pb2.HealthCheckResponse.SERVING


def test_good_client_is_served_while_attackers_reconnect(server):
    """Four attackers flood resets and reconnect in a loop; a grpcio client on its own connection
    gets every answer meanwhile."""
    stop = threading.Event()
    threads, stats = rapid_reset.run_attackers(server.port, 4, stop)
    try:
        # The attackers are threads of this process: on a loaded machine they take their time (a
        # wait ends as soon as it is met).
        wait_for(lambda: sum(s.connections for s in stats) >= 20, "20 attacking connections", timeout=60)
        with grpc.insecure_channel(server.address) as channel:
            for _ in range(200):
                assert check(channel) == health_pb2.HealthCheckResponse.SERVING
        wait_for(lambda: sum(s.goaways[ENHANCE_YOUR_CALM] for s in stats) >= 8, "GOAWAYs to the attackers", timeout=60)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert all(set(s.goaways) <= {ENHANCE_YOUR_CALM} for s in stats), [s.as_dict() for s in stats]
    # The server may still be reading an attacker's last bytes after the attacker closed: the
    # next tests count from when every attacking connection is gone.
    wait_for(lambda: metric(server, "groupd_connections_open") == 0, "the attackers' connections to close on the server")


def test_resets_within_the_burst_leave_the_connection_serving(server):
    """RESET_BURST - 1 streams opened and reset at once are within the budget: no GOAWAY, and the
    connection answers PING and serves a call afterwards."""
    before = metric(server, FLOOD_GOAWAYS)
    with FrameClient(server.port) as client:
        blob = b"".join(
            frame(HEADERS, FLAG_END_HEADERS, 2 * i + 1, client.encoder.encode(grpc_headers(WATCH)))
            + frame(RST_STREAM, 0, 2 * i + 1, struct.pack(">I", CANCEL))
            for i in range(RESET_BURST - 1))
        client.send(blob)
        client.ping(b"inbudget")
        assert client.read_until(lambda: b"inbudget" in client.ping_acks)
        sid = 2 * RESET_BURST + 1
        client.headers(sid, grpc_headers(CHECK))
        client.data(sid, watch_request(), end_stream=True)
        assert client.read_until(lambda: client.results[sid].ended)
        assert client.results[sid].trailers.get("grpc-status") == "0", client.results[sid]
        assert not client.goaways and not client.closed
    assert metric(server, FLOOD_GOAWAYS) == before


def test_grpcio_cancellations_are_not_a_flood(server):
    """A stock client cancelling 100 streaming calls one after another (RST_STREAM CANCEL each)
    keeps its connection: no reset-flood GOAWAY, and the channel serves on."""
    before = metric(server, FLOOD_GOAWAYS)
    with grpc.insecure_channel(server.address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for _ in range(100):
            call = stub.Watch(health_pb2.HealthCheckRequest(), timeout=10)
            assert next(call).status == health_pb2.HealthCheckResponse.SERVING
            call.cancel()
        assert check(channel) == health_pb2.HealthCheckResponse.SERVING
    assert metric(server, FLOOD_GOAWAYS) == before


def test_request_reset_in_the_same_write_is_never_handled(server):
    """CreateGroup's HEADERS, its message with END_STREAM and RST_STREAM in one write (one read on
    the server): the call never reaches its handler, so the group is not created. The same
    request without the reset, on the same connection, creates its group."""
    from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc

    reset_id, served_id = uid("reset"), uid("served")

    def create(group_id, name):
        return grpc_frame(group_pb2.CreateGroupRequest(
            group_id=group_id, type=common_pb2.GROUP_TYPE_PUBLIC, profile=common_pb2.GroupProfile(name=name),
            owner_user_id="owner-1").SerializeToString())

    md = admin_md()
    with FrameClient(server.port) as client:
        client.ping(b"settled!")
        assert client.read_until(lambda: b"settled!" in client.ping_acks)
        block = client.encoder.encode(grpc_headers(CREATE_GROUP, extra=md))
        client.send(frame(HEADERS, FLAG_END_HEADERS, 1, block)
                    + frame(DATA, FLAG_END_STREAM, 1, create(reset_id, "from-reset"))
                    + frame(RST_STREAM, 0, 1, struct.pack(">I", CANCEL)))
        block = client.encoder.encode(grpc_headers(CREATE_GROUP, extra=md))
        client.send(frame(HEADERS, FLAG_END_HEADERS, 3, block) + frame(DATA, FLAG_END_STREAM, 3, create(served_id, "served")))
        assert client.read_until(lambda: client._result(3).ended)
        assert client.results[3].grpc_status == 0, client.results[3]
        assert not client._result(1).headers, "a reset stream got a response"
        assert not client.goaways and not client.closed
    with grpc.insecure_channel(server.address) as channel:
        stub = group_pb2_grpc.GroupServiceStub(channel)
        # Were the reset request applied (before or after this), this create would fail, or the
        # name read back would be the other one.
        stub.CreateGroup(group_pb2.CreateGroupRequest(
            group_id=reset_id, type=common_pb2.GROUP_TYPE_PUBLIC, profile=common_pb2.GroupProfile(name="from-grpcio"),
            owner_user_id="owner-1"), metadata=md, timeout=10)
        info = stub.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[reset_id, served_id]), metadata=md, timeout=10)
        names = {g.group_id: g.profile.name for g in info.groups}
        assert names == {reset_id: "from-grpcio", served_id: "served"}, names


def test_memory_stays_bounded_while_attackers_reconnect(server):
    """Attackers reconnecting in a loop, each connection ended by the reset budget: the server's
    resident memory stays within a generous bound of where it started."""
    with grpc.insecure_channel(server.address) as channel:
        check(channel)  # warm: the first calls allocate what every later call reuses
    rss_before = server.rss_kb()
    stop = threading.Event()
    threads, stats = rapid_reset.run_attackers(server.port, 4, stop)
    try:
        wait_for(lambda: sum(s.connections for s in stats) >= 150, "150 attacking connections", timeout=60)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    rss_after = server.rss_kb()
    assert rss_after - rss_before < 64 * 1024, (rss_before, rss_after, [s.as_dict() for s in stats])
    with grpc.insecure_channel(server.address) as channel:
        assert check(channel) == health_pb2.HealthCheckResponse.SERVING
