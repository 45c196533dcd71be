"""Slowloris and unauthenticated work against a real groupd: silent TCP connections, a preface
without SETTINGS, connections that never open a stream, and calls without a verified token held
open. Each test asserts the wire answer (close, GOAWAY with its code and debug data, RESOURCE_EXHAUSTED
with its reason), that a good client is still served, the counters and the log line, and that the
server stays alive with bounded memory. Every wait is for an event (bytes, a close, a PING ACK, a
log line or a scrape), with a deadline as the failure bound."""
import select
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import grpc
import pytest

import h2raw
from support import GROUPD_BIN, Groupd, admin_md, error_info, free_port, new_database, wait_for
from grpc.health.v1 import health_pb2, health_pb2_grpc
from groupd.v1 import group_pb2, group_pb2_grpc

CHECK = "/grpc.health.v1.Health/Check"
GET_GROUPS_INFO = "/groupd.v1.GroupService/GetGroupsInfo"
# Each grpcio channel its own connection (grpc shares subchannels between channels otherwise).
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


@pytest.fixture
def start():
    """Starts a groupd with the given top-level YAML and a metrics endpoint; stops it afterwards."""
    workdir = Path(tempfile.mkdtemp(prefix="groupd-slowloris-"))
    servers = []

    def run(yaml):
        directory = workdir / str(len(servers))
        directory.mkdir()
        server = Groupd(directory, database=new_database())
        server.metrics_port = free_port()
        server.set_top_level(yaml + f"metrics:\n  host: 127.0.0.1\n  port: {server.metrics_port}\n")
        servers.append(server)
        server.start()
        # The start-up probe (a TCP connect without a preface) is gone before a test opens its own
        # connections: at max_connections it could otherwise be told apart from a test's client
        # whose preface the server has not read yet only by timing.
        settle(server, 0)
        return server

    yield run
    for server in servers:
        server.stop()
    shutil.rmtree(workdir, ignore_errors=True)


def counters(server, *names):
    """The values of the counters `names`, in order, from one scrape of the server's metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10) as response:
        values = dict(line.split()[:2] for line in response.read().decode().splitlines()
                      if line and not line.startswith("#") and " " in line)
    missing = [name for name in names if name not in values]
    assert not missing, f"no {missing} in the scrape"
    return [float(values[name]) for name in names]


def counter(server, name):
    """The value of the counter `name` in a scrape of the server's metrics."""
    return counters(server, name)[0]


def settle(server, connections):
    """Waits until the server has exactly `connections` open (the start-up probe's is gone); returns
    the evictions counted so far."""
    wait_for(lambda: counter(server, "groupd_connections_open") == connections, f"{connections} connections open")
    return counter(server, "groupd_transport_idle_evictions_total")


def good_call(server, channel=None):
    """An authenticated unary call, on `channel` or on a connection of its own."""
    if channel is not None:
        stub = group_pb2_grpc.GroupServiceStub(channel)
        return stub.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=["none"]), metadata=admin_md(), timeout=10)
    with grpc.insecure_channel(server.address, options=OWN_CONNECTION) as channel:
        return good_call(server, channel)


def health_check(server):
    with grpc.insecure_channel(server.address, options=OWN_CONNECTION) as channel:
        return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)


def accepted(server):
    """Connections the server accepted in these tests: those open, and those it closed for sending
    no preface (timed out or evicted), the only way these tests' connections are closed before the
    test closes them, read from one scrape. The open gauge alone is not enough: under load, an earlier connection's
    preface timeout can close one as the next is accepted, leaving the gauge where it was."""
    return sum(counters(server, "groupd_connections_open", "groupd_transport_preface_timeouts_total",
                        "groupd_transport_idle_evictions_total"))


def silent_connection(server):
    """A TCP connection that sends nothing; returns once the server has accepted it. The server
    says nothing first: its SETTINGS wait for the client's first bytes, which tell HTTP/2 from
    HTTP/1.1."""
    before = accepted(server)
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    wait_for(lambda: accepted(server) > before, "the connection accepted")
    return sock


def closed_by_server(sock, timeout=15):
    """Reads until the server closes (True) or `timeout` passes (False); returns (closed, bytes)."""
    sock.settimeout(timeout)
    received = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return True, received
            received += chunk
    except ConnectionResetError:
        return True, received
    except socket.timeout:
        return False, received


def wait_closed(socks, count, timeout=15):
    """Waits until `count` of `socks` were closed by the server (each already read up to its
    SETTINGS); returns the closed ones."""
    closed = set()
    deadline = time.monotonic() + timeout
    while len(closed) < count:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"only {len(closed)} of the connections were closed, expected {count}"
        readable, _, _ = select.select([s for s in socks if s not in closed], [], [], remaining)
        for sock in readable:
            try:
                if sock.recv(65536) == b"":
                    closed.add(sock)
            except ConnectionResetError:
                closed.add(sock)
    return closed


def goaways(data):
    """(last stream id, error code, debug data) of every GOAWAY frame in `data`."""
    frames, _ = h2raw.parse_frames(data)
    out = []
    for ftype, _, _, payload in frames:
        if ftype == h2raw.GOAWAY:
            last, code = struct.unpack(">II", payload[:8])
            out.append((last & 0x7FFFFFFF, code, payload[8:]))
    return out


# MARK: (a) silent connections at max_connections


def test_silent_connections_at_max_connections_are_evicted_for_a_good_client(start):
    # A long preface timeout: what makes room here is eviction, not the timeout.
    server = start("max_connections: 50\ntransport:\n  preface_timeout_seconds: 300\n")
    rss_before = server.rss_kb()
    silent = [silent_connection(server) for _ in range(50)]
    evicted_before = settle(server, 50)
    # Good clients that stay connected: each takes the slot of a silent connection.
    good = [grpc.insecure_channel(server.address, options=OWN_CONNECTION) for _ in range(3)]
    try:
        for channel in good:
            assert len(good_call(server, channel).failures) == 1
        # Three silent connections were closed without a word (the oldest ones).
        wait_closed(silent, 3)
        assert counter(server, "groupd_transport_idle_evictions_total") == evicted_before + 3
        wait_for(lambda: "evicting a connection that sent no HTTP/2 preface" in server.log.read_text(), "the eviction's log line")
        log = server.log.read_text()
        assert "peer=127.0.0.1:" in log, log[-2000:]
        assert counter(server, "groupd_transport_connections_refused_total") == 0
        for channel in good:
            assert len(good_call(server, channel).failures) == 1, "a good client was evicted"
        assert health_check(server).status == health_pb2.HealthCheckResponse.SERVING
        assert server.process.poll() is None
        assert server.rss_kb() < rss_before + 64 * 1024, "50 silent connections cost more than 64 MiB"
    finally:
        for channel in good:
            channel.close()
        for sock in silent:
            sock.close()


def test_silent_connections_are_closed_at_the_preface_timeout(start):
    server = start("max_connections: 50\ntransport:\n  preface_timeout_seconds: 1\n")
    rss_before = server.rss_kb()
    silent = [silent_connection(server) for _ in range(40)]
    # A slowloris sending part of the magic is no better than a silent one.
    dripping = [silent_connection(server) for _ in range(10)]
    for sock in dripping:
        sock.sendall(h2raw.CLIENT_PREFACE[:10])
    try:
        for sock in silent + dripping:
            closed, data = closed_by_server(sock)
            assert closed, "a connection without a preface was not closed"
            assert goaways(data) == [], "nothing valid arrived: closed without a GOAWAY"
        wait_for(lambda: counter(server, "groupd_transport_preface_timeouts_total") == 50, "50 preface timeouts counted")
        wait_for(lambda: "no HTTP/2 connection preface within preface_timeout_seconds" in server.log.read_text(), "no HTTP/2 connection preface within preface_timeout_seconds")
        response = good_call(server)
        assert len(response.failures) == 1
        assert server.process.poll() is None
        assert server.rss_kb() < rss_before + 64 * 1024
    finally:
        for sock in silent + dripping:
            sock.close()


# MARK: (b) preface without SETTINGS


def test_preface_without_settings_gets_goaway_protocol_error_then_close(start):
    server = start("transport:\n  preface_timeout_seconds: 1\n")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(h2raw.CLIENT_PREFACE)
        closed, data = closed_by_server(sock)
    assert closed
    assert goaways(data) == [(0, h2raw.PROTOCOL_ERROR, b"preface_timeout")]
    wait_for(lambda: counter(server, "groupd_transport_preface_timeouts_total") == 1, "the preface timeout counted")
    wait_for(lambda: "preface without SETTINGS within preface_timeout_seconds" in server.log.read_text(), "preface without SETTINGS within preface_timeout_seconds")
    assert health_check(server).status == health_pb2.HealthCheckResponse.SERVING


def test_a_complete_preface_is_not_closed_by_the_preface_timeout(start):
    server = start("transport:\n  preface_timeout_seconds: 1\n  idle_timeout_seconds: 0\n")
    with h2raw.FrameClient(server.port, timeout=10) as client:
        client.ping(b"ready...")
        assert client.read_until(lambda: b"ready..." in client.ping_acks)
        # A silent connection accepted after it is closed by its preface timeout: the complete
        # one's would have fired first.
        with silent_connection(server) as sock:
            closed, _ = closed_by_server(sock)
            assert closed
        client.ping(b"still...")
        assert client.read_until(lambda: b"still..." in client.ping_acks), "the connection was closed"
        assert client.goaways == []
    assert counter(server, "groupd_transport_preface_timeouts_total") == 1


def test_on_tls_the_preface_timeout_counts_from_the_handshake(tmp_path):
    from test_tls import Pki, read_until_closed, tls_connect
    pki = Pki(tmp_path)
    pki.root = pki.ca("slowloris-ca")
    pki.server = pki.issue("server", pki.root, serial=0x501)
    directory = tmp_path / "server"
    directory.mkdir()
    server = Groupd(directory, database=new_database(), tls={"cert_file": pki.server[0], "key_file": pki.server[1]})
    server.metrics_port = free_port()
    server.set_top_level(f"transport:\n  preface_timeout_seconds: 1\nmetrics:\n  host: 127.0.0.1\n  port: {server.metrics_port}\n")
    server.start()
    try:
        with tls_connect(server, pki) as sock:  # the handshake completes with ALPN h2, then silence
            data, ended = read_until_closed(sock, timeout=15)
        assert goaways(data) == [], "nothing valid arrived after the handshake: closed without a GOAWAY"
        wait_for(lambda: counter(server, "groupd_transport_preface_timeouts_total") == 1, "the preface timeout counted")
    finally:
        server.stop()


# MARK: (c) connections that never open a stream


def test_a_connection_that_never_opens_a_stream_gets_goaway_no_error(start):
    server = start("transport:\n  idle_timeout_seconds: 1\n")
    with h2raw.FrameClient(server.port, timeout=10) as client:
        debug = []
        original = client._handle

        def handle(ftype, flags, stream_id, payload):
            if ftype == h2raw.GOAWAY:
                debug.append(payload[8:])
            original(ftype, flags, stream_id, payload)

        client._handle = handle
        assert client.read_until(lambda: client.closed, timeout=15), "the unused connection stayed open"
        assert client.goaways == [(0, h2raw.NO_ERROR)]
        assert debug == [b"idle_timeout"]
    wait_for(lambda: counter(server, "groupd_transport_idle_timeouts_total") == 1, "the idle timeout counted")
    wait_for(lambda: "no stream opened within transport.idle_timeout_seconds" in server.log.read_text(), "no stream opened within transport.idle_timeout_seconds")
def test_unused_connections_at_max_connections_are_evicted_and_busy_ones_are_not(start):
    server = start("max_connections: 4\ntransport:\n  idle_timeout_seconds: 300\n")
    busy = h2raw.FrameClient(server.port, timeout=10)
    unused = [h2raw.FrameClient(server.port, timeout=10) for _ in range(3)]
    good = []
    try:
        # The busy connection holds a call open (its request never ends); the PING's ACK says the
        # server has read it.
        busy.headers(1, h2raw.grpc_headers(CHECK))
        busy.ping(b"busy....")
        assert busy.read_until(lambda: b"busy...." in busy.ping_acks)
        for client in unused:
            client.ping(b"ready...")
            assert client.read_until(lambda: b"ready..." in client.ping_acks)
        evicted_before = settle(server, 4)
        for _ in range(3):
            good.append(grpc.insecure_channel(server.address, options=OWN_CONNECTION))
            good_call(server, good[-1])
        for client in unused:
            assert client.read_until(lambda: client.closed, timeout=15), "an unused connection was not evicted"
            assert client.goaways == [(0, h2raw.NO_ERROR)]
        assert not busy.closed and busy.goaways == []
        busy.ping(b"still...")
        assert busy.read_until(lambda: b"still..." in busy.ping_acks), "the busy connection was touched"
        assert counter(server, "groupd_transport_idle_evictions_total") == evicted_before + 3
        wait_for(lambda: "evicting a connection without open streams: GOAWAY NO_ERROR" in server.log.read_text(), "evicting a connection without open streams: GOAWAY NO_ERROR")
    finally:
        for channel in good:
            channel.close()
        busy.close()
        for client in unused:
            client.close()


def test_when_every_connection_has_a_call_in_flight_a_new_one_is_refused(start):
    server = start("max_connections: 2\n")
    busy = [h2raw.FrameClient(server.port, timeout=10) for _ in range(2)]
    try:
        for client in busy:
            client.headers(1, h2raw.grpc_headers(CHECK))
            client.ping(b"busy....")
            assert client.read_until(lambda: b"busy...." in client.ping_acks)
        with pytest.raises(grpc.RpcError) as caught:
            good_call(server)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        wait_for(lambda: counter(server, "groupd_transport_connections_refused_total") >= 1, "the refusal counted")
        # One call ends (RST_STREAM CANCEL): its connection is idle, and makes room by eviction.
        busy[0].send(h2raw.frame(h2raw.RST_STREAM, 0, 1, struct.pack(">I", 8)))
        busy[0].ping(b"reset...")
        assert busy[0].read_until(lambda: b"reset..." in busy[0].ping_acks)
        good_call(server)
        assert busy[0].read_until(lambda: busy[0].closed, timeout=15)
        assert not busy[1].closed
    finally:
        for client in busy:
            client.close()


# MARK: (d) the budget of calls without a verified token


def test_unauthenticated_calls_over_the_budget_are_refused_and_authenticated_ones_go_on(start):
    server = start("transport:\n  max_unauthenticated_calls: 4\n")
    holder = h2raw.FrameClient(server.port, timeout=10)
    try:
        # Four Health checks whose request never ends hold the four places.
        for stream_id in (1, 3, 5, 7):
            holder.headers(stream_id, h2raw.grpc_headers(CHECK))
        holder.ping(b"held....")
        assert holder.read_until(lambda: b"held...." in holder.ping_acks)

        with pytest.raises(grpc.RpcError) as caught:
            health_check(server)
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        info = error_info(caught.value)
        assert info.reason == "TOO_MANY_UNAUTHENTICATED_CALLS" and info.metadata["limit"] == "4", info
        assert "max_unauthenticated_calls" in caught.value.details()

        # A call that needs a token, without one (or with a bad one): refused the same way.
        for metadata in ([], [("authorization", "Bearer not.a.token")]):
            with grpc.insecure_channel(server.address, options=OWN_CONNECTION) as channel:
                with pytest.raises(grpc.RpcError) as caught:
                    group_pb2_grpc.GroupServiceStub(channel).GetGroupsInfo(
                        group_pb2.GetGroupsInfoRequest(group_ids=["none"]), metadata=metadata, timeout=10)
            assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, caught.value
            assert error_info(caught.value).reason == "TOO_MANY_UNAUTHENTICATED_CALLS"

        # A call with a token that verifies goes through.
        assert len(good_call(server).failures) == 1
        # A fifth Health check on the holder's own connection: refused, the connection serves on.
        holder.headers(9, h2raw.grpc_headers(CHECK), end_stream=True)
        assert holder.read_until(lambda: holder.results[9].ended)
        assert holder.results[9].headers.get("grpc-status") == "8", holder.results[9]
        assert not holder.closed

        wait_for(lambda: counter(server, "groupd_transport_unauthenticated_refused_total") == 4, "four refusals counted")
        wait_for(lambda: "refusing calls without a verified token" in server.log.read_text(), "refusing calls without a verified token")
        # The held calls end: new unauthenticated calls are served again.
        for stream_id in (1, 3, 5, 7):
            holder.send(h2raw.frame(h2raw.RST_STREAM, 0, stream_id, struct.pack(">I", 8)))
        holder.ping(b"freed...")
        assert holder.read_until(lambda: b"freed..." in holder.ping_acks)
        assert health_check(server).status == health_pb2.HealthCheckResponse.SERVING
    finally:
        holder.close()
    assert server.process.poll() is None


def test_a_lost_connection_gives_its_places_back(start):
    server = start("transport:\n  max_unauthenticated_calls: 2\n")
    holder = h2raw.FrameClient(server.port, timeout=10)
    holder.headers(1, h2raw.grpc_headers(CHECK))
    holder.headers(3, h2raw.grpc_headers(GET_GROUPS_INFO))  # needs a token; its request never ends
    holder.ping(b"held....")
    assert holder.read_until(lambda: b"held...." in holder.ping_acks)
    with pytest.raises(grpc.RpcError) as caught:
        health_check(server)
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    holder.close()
    # The server sees the close on its own time: wait for the refusals to stop.
    def served():
        try:
            return health_check(server).status == health_pb2.HealthCheckResponse.SERVING
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
            return False
    wait_for(served, "a Health check served once the holder's connection closed")


# MARK: configuration

APP = """apps:
  - id: demo
    secrets:
      - kid: k1
        secret: "0123456789abcdef0123456789abcdef"
"""


@pytest.mark.parametrize("text,key,expected", [
    ("transport: {preface_timeout_seconds: 0}\n", "transport.preface_timeout_seconds", "above 0 and at most 3600, found 0"),
    ("transport: {preface_timeout_seconds: 7200}\n", "transport.preface_timeout_seconds", "found 7200"),
    ("transport: {idle_timeout_seconds: -1}\n", "transport.idle_timeout_seconds", "from 0 (never) to 86400, found -1"),
    ("transport: {max_unauthenticated_calls: 0}\n", "transport.max_unauthenticated_calls", "from 1 to 1000000, found 0"),
    ("transport: {max_unauthenticated_calls: 2000000}\n", "transport.max_unauthenticated_calls", "found 2000000"),
    ("transport: {max_unauthenticated: 5}\n", "transport.max_unauthenticated", "unknown key"),
], ids=["preface 0", "preface over an hour", "negative idle", "no unauthenticated call", "too many", "unknown key"])
def test_out_of_range_transport_keys_are_refused_naming_the_key(tmp_path, text, key, expected):
    path = tmp_path / "groupd.yaml"
    path.write_text(text + APP)
    result = subprocess.run([str(GROUPD_BIN), "check-config", str(path)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith(f"groupd: {path}: {key}: "), result.stderr
    assert expected in result.stderr, result.stderr


def test_good_transport_keys_pass(tmp_path):
    path = tmp_path / "groupd.yaml"
    path.write_text("transport:\n  preface_timeout_seconds: 0.5\n  idle_timeout_seconds: 0\n  max_unauthenticated_calls: 1\n" + APP)
    result = subprocess.run([str(GROUPD_BIN), "check-config", str(path)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
