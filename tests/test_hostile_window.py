"""Clients that do not read their responses: a zero flow-control window (SETTINGS_INITIAL_WINDOW_SIZE
0 and never a WINDOW_UPDATE) keeps every response queued on the server. The `transport` caps
bound what such a connection (and all of them together) may hold: past the cap its blocked
streams get RST_STREAM(ENHANCE_YOUR_CALM) and new streams REFUSED_STREAM; a connection that reads
nothing for `stalled_write_timeout_seconds` gets GOAWAY(ENHANCE_YOUR_CALM) and is closed. A good
client keeps being served, and a slow client that does read is left alone.

Small caps make the arithmetic exact: each stream waiting to send counts 2048 bytes plus its
response message and the 5-byte gRPC prefix (docs/TRANSPORT.md)."""
import shutil
import struct
import tempfile
from pathlib import Path

import grpc
import pytest

import support  # noqa: F401  (generates the stubs and puts them on sys.path)
from grpc.health.v1 import health_pb2, health_pb2_grpc
from h2raw import FrameClient, frame, grpc_frame, grpc_headers, parse_frames, SETTINGS, WINDOW_UPDATE, DATA
from hostile import metrics
from support import Groupd, admin_md, free_port, wait_for

CHECK = "/grpc.health.v1.Health/Check"
GET_GROUPS_INFO = "/groupd.v1.GroupService/GetGroupsInfo"
ENHANCE_YOUR_CALM = 0xB
REFUSED_STREAM = 0x7
SERVING_RESPONSE = health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING).SerializeToString()
# What one Health/Check stream waiting to send counts against the caps.
WAITING_STREAM_BYTES = 2048
CHECK_STREAM_COST = WAITING_STREAM_BYTES + 5 + len(SERVING_RESPONSE)
PER_CONNECTION, TOTAL = 131072, 262144


def start(tmp, per_connection, total, stall_seconds):
    server = Groupd(tmp)
    server.metrics_port = free_port()
    server.set_top_level(
        f"metrics:\n  host: 127.0.0.1\n  port: {server.metrics_port}\n"
        f"transport:\n  max_queued_bytes_per_connection: {per_connection}\n  max_queued_bytes: {total}\n"
        f"  stalled_write_timeout_seconds: {stall_seconds}\n")
    return server.start()


@pytest.fixture
def server(request):
    """A server with a 128 KiB per-connection cap, 256 KiB in all, and no stall timeout to speak of."""
    tmp = Path(tempfile.mkdtemp(prefix="groupd-window-"))
    server = start(tmp, PER_CONNECTION, TOTAL, 3600)
    yield server
    server.stop()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def stalling_server():
    """Small caps and a 1-second stalled-write timeout."""
    tmp = Path(tempfile.mkdtemp(prefix="groupd-stall-"))
    server = start(tmp, PER_CONNECTION, TOTAL, 1)
    yield server
    server.stop()
    shutil.rmtree(tmp, ignore_errors=True)


class ManualWindowClient(FrameClient):
    """A FrameClient that never gives flow-control window back by itself: the test sends every
    WINDOW_UPDATE."""

    def _reply(self, data):
        frames, _ = parse_frames(data)
        kept = b"".join(frame(*f) for f in frames if f[0] != WINDOW_UPDATE)
        if kept:
            super()._reply(kept)


def sync(client, marker):
    """A PING round trip: everything the server sent before its ACK has been read."""
    client.ping(marker)
    assert client.read_until(lambda: marker in client.ping_acks), f"no PING ACK for {marker}"


def zero_window_client(port) -> FrameClient:
    """A client whose streams get no flow-control window at all: SETTINGS_INITIAL_WINDOW_SIZE 0,
    acknowledged by the server before any stream opens (the PING round trip)."""
    client = ManualWindowClient(port)
    client.send(frame(SETTINGS, 0, 0, struct.pack(">HI", 0x4, 0)))
    sync(client, b"window0!")
    return client


def open_checks(client, stream_ids):
    """Health/Check (no token needed) on each stream, then a PING so that the caller can wait
    until the server has taken them all."""
    for stream_id in stream_ids:
        client.headers(stream_id, grpc_headers(CHECK))
        client.data(stream_id, grpc_frame(b""), end_stream=True)
    sync(client, b"opened%02d" % (stream_ids[-1] % 100))


def good_client_is_served(server):
    with grpc.insecure_channel(server.address) as channel:
        response = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert response.status == health_pb2.HealthCheckResponse.SERVING


def test_streams_past_the_connection_cap_are_reset_and_new_ones_refused(server):
    """Calls start at the end of the read their request completes in: the streams past the cap
    that started in the read which crossed it are shed (ENHANCE_YOUR_CALM, newest first), those
    opened in later reads are refused (REFUSED_STREAM) while the connection is over half its cap."""
    fits = PER_CONNECTION // CHECK_STREAM_COST
    stream_ids = [1 + 2 * i for i in range(fits + 9)]
    with zero_window_client(server.port) as client:
        open_checks(client, stream_ids)
        rest = stream_ids[fits:]
        assert client.read_until(lambda: all(client.results.get(s) and client.results[s].reset_code is not None
                                             for s in rest))
        for stream_id in stream_ids[:fits]:
            result = client.results[stream_id]
            # The response headers went out (HEADERS are not flow-controlled); the message waits.
            assert result.headers.get(":status") == "200" and result.reset_code is None and not result.data, result
        codes = {s: client.results[s].reset_code for s in rest}
        assert set(codes.values()) <= {ENHANCE_YOUR_CALM, REFUSED_STREAM}, codes
        assert codes[rest[0]] == ENHANCE_YOUR_CALM, codes  # the stream that crossed the cap
        shed = [s for s in rest if codes[s] == ENHANCE_YOUR_CALM]
        # New streams in a later read: refused before any work, the kept streams untouched.
        later = [stream_ids[-1] + 2 * i for i in range(1, 4)]
        open_checks(client, later)
        assert client.read_until(lambda: all(client.results.get(s) and client.results[s].reset_code is not None
                                             for s in later))
        assert all(client.results[s].reset_code == REFUSED_STREAM for s in later), \
            {s: client.results[s].reset_code for s in later}
        assert client.goaways == [] and not client.closed
        good_client_is_served(server)
        values = metrics(server)
        assert values["groupd_transport_queued_bytes"] == fits * CHECK_STREAM_COST
        assert values["groupd_transport_stalled_streams_reset_total"] == len(shed)
        assert values["groupd_transport_queued_bytes_streams_refused_total"] == len(rest) - len(shed) + len(later)
        assert values["groupd_transport_stalled_connections_closed_total"] == 0
        # Opening the window lets the streams that were kept finish normally.
        client.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 20)) +
                    b"".join(frame(WINDOW_UPDATE, 0, s, struct.pack(">I", 1024)) for s in stream_ids[:fits]))
        assert client.read_until(lambda: all(client.results[s].ended for s in stream_ids[:fits]))
        for stream_id in stream_ids[:fits]:
            result = client.results[stream_id]
            assert result.grpc_status == 0 and result.messages == [SERVING_RESPONSE], result
    wait_for(lambda: metrics(server)["groupd_transport_queued_bytes"] == 0, "the queued bytes to drop to 0")
    wait_for(lambda: "reset streams of a client that does not read its responses" in server.log.read_text(), "reset streams of a client that does not read its responses")
def test_the_server_wide_cap_sheds_the_connection_that_adds_to_it(server):
    """Three zero-window connections under their own cap; the third passes the 256 KiB total and
    has its newest streams reset, the first two keep theirs, and a good client is served."""
    per_connection = 50  # 50 × CHECK_STREAM_COST is under 128 KiB
    stream_ids = [1 + 2 * i for i in range(per_connection)]
    clients = [zero_window_client(server.port) for _ in range(3)]
    try:
        for client in clients[:2]:
            open_checks(client, stream_ids)
        third = clients[2]
        open_checks(third, stream_ids)
        room = (TOTAL - 2 * per_connection * CHECK_STREAM_COST) // CHECK_STREAM_COST
        assert third.read_until(lambda: all(third.results.get(s) and third.results[s].reset_code is not None
                                            for s in stream_ids[room:]))
        assert [third.results[s].reset_code for s in stream_ids[room:]] == [ENHANCE_YOUR_CALM] * (per_connection - room)
        assert all(third.results[s].reset_code is None for s in stream_ids[:room])
        for client in clients[:2]:
            sync(client, b"after3rd")
            assert all(client.results[s].reset_code is None for s in stream_ids), client.results
        good_client_is_served(server)
        assert metrics(server)["groupd_transport_queued_bytes"] <= TOTAL
    finally:
        for client in clients:
            client.close()


def test_a_connection_that_reads_nothing_is_closed_after_the_stall_timeout(stalling_server):
    server = stalling_server
    with zero_window_client(server.port) as client:
        stream_ids = [1 + 2 * i for i in range(10)]
        open_checks(client, stream_ids)
        good_client_is_served(server)
        # The close is the event: GOAWAY(ENHANCE_YOUR_CALM), then the server closes the socket.
        assert client.read_until(lambda: client.closed, timeout=15), "the stalled connection was not closed"
        assert [code for _, code in client.goaways] == [ENHANCE_YOUR_CALM], client.goaways
        assert client.goaways[0][0] == stream_ids[-1]
    wait_for(lambda: "the client read nothing of its queued responses" in server.log.read_text(), "the notice")
    line = next(l for l in server.log.read_text().splitlines() if "the client read nothing" in l)
    assert "peer=127.0.0.1:" in line or "127.0.0.1:" in line, line
    values = metrics(server)
    assert values["groupd_transport_stalled_connections_closed_total"] == 1
    assert values["groupd_transport_queued_bytes"] == 0
    good_client_is_served(server)


def test_a_slow_client_that_reads_is_not_punished(stalling_server):
    """A client that grants its window a few bytes at a time, for longer than the stall timeout
    in all, stays under the cap and gets every response whole: no reset, no GOAWAY."""
    server = stalling_server
    with zero_window_client(server.port) as client:
        stream_ids = [1 + 2 * i for i in range(5)]
        open_checks(client, stream_ids)
        expected = len(grpc_frame(SERVING_RESPONSE))
        # One byte per stream per round, a round every 0.4 s: 7 rounds, about three stall timeouts.
        rounds = 0
        while not all(client.results[s].ended for s in stream_ids):
            rounds += 1
            assert rounds <= expected + 2, {s: client.results[s] for s in stream_ids}
            pending = [s for s in stream_ids if not client.results[s].ended]
            before = {s: len(client.results[s].data) for s in pending}
            client.send(b"".join(frame(WINDOW_UPDATE, 0, s, struct.pack(">I", 1)) for s in pending))
            assert client.read_until(lambda: all(len(client.results[s].data) > before[s] for s in pending)), \
                {s: client.results[s] for s in pending}
            # The slow client's pause (its behaviour, not a synchronisation): the trailers of the
            # streams whose last byte just came arrive meanwhile.
            client.read_until(lambda: False, timeout=0.4)
        for stream_id in stream_ids:
            result = client.results[stream_id]
            assert result.reset_code is None and result.grpc_status == 0, result
            assert result.messages == [SERVING_RESPONSE], result
        assert client.goaways == [] and not client.closed
    values = metrics(server)
    assert values["groupd_transport_stalled_connections_closed_total"] == 0
    assert values["groupd_transport_stalled_streams_reset_total"] == 0


@pytest.fixture
def capped_server():
    """The default per-connection cap, 4 MiB in all, no stall timeout to speak of."""
    tmp = Path(tempfile.mkdtemp(prefix="groupd-rss-"))
    server = start(tmp, 4 << 20, 4 << 20, 3600)
    yield server
    server.stop()
    shutil.rmtree(tmp, ignore_errors=True)


def test_memory_stays_bounded_and_returns_after_the_connections_close(capped_server):
    """60 zero-window connections of 256 authenticated GetGroupsInfo calls each, one connection
    after the other (15,360 calls; uncapped, resident memory grew by some 30 MB and stayed there
    after they closed): the 4 MiB cap keeps about 2,000 of them, the rest are reset or refused,
    resident memory stays bounded, and it falls back once the connections are gone."""
    from groupd.v1 import group_pb2

    server = capped_server
    md = admin_md()
    body = grpc_frame(group_pb2.GetGroupsInfoRequest(group_ids=["nothing"]).SerializeToString())
    good_client_is_served(server)
    base = server.rss_kb()
    clients = []
    try:
        for _ in range(60):
            client = zero_window_client(server.port)
            clients.append(client)
            for stream_id in range(1, 512, 2):
                client.headers(stream_id, grpc_headers(GET_GROUPS_INFO, extra=md))
                client.data(stream_id, body, end_stream=True)
            # Every call answered (its headers in, its message queued) or reset.
            assert client.read_until(lambda: len(client.results) == 256 and all(
                r.headers or r.reset_code is not None for r in client.results.values()), timeout=30)
        good_client_is_served(server)
        peak = server.rss_kb()
        kept = sum(1 for c in clients for r in c.results.values() if r.reset_code is None)
        shed = sum(1 for c in clients for r in c.results.values() if r.reset_code in (ENHANCE_YOUR_CALM, REFUSED_STREAM))
        assert kept + shed == 60 * 256
        assert kept <= (4 << 20) // WAITING_STREAM_BYTES, kept
        assert metrics(server)["groupd_transport_queued_bytes"] <= 4 << 20
        assert peak - base < 64 * 1024, f"resident memory grew from {base} KiB to {peak} KiB"
    finally:
        for client in clients:
            client.close()
    wait_for(lambda: metrics(server).get("groupd_connections_open", 1) == 0 and
             metrics(server)["groupd_transport_queued_bytes"] == 0, "every connection to be gone")
    # malloc_trim runs a second after the last of them went.
    # Without the trim it stayed at its peak.
    wait_for(lambda: server.rss_kb() - base < 16 * 1024, f"resident memory to fall back near {base} KiB", timeout=30)
    good_client_is_served(server)
