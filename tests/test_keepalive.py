"""Connection management through a real groupd, with small values: the age and idle limits end a
connection with a graceful GOAWAY, the server's keepalive PING closes a silent connection and
keeps an answering one, and a client that PINGs too often gets GOAWAY ENHANCE_YOUR_CALM
(too_many_pings). HTTP/2 is written frame by frame (h2raw.FrameClient); every wait is for a frame
or a close, with a deadline as the failure bound."""
import shutil
import tempfile
from pathlib import Path

import grpc
import pytest

import h2raw
from support import Groupd
from grpc.health.v1 import health_pb2, health_pb2_grpc

CHECK = "/grpc.health.v1.Health/Check"
WATCH = "/grpc.health.v1.Health/Watch"
ENHANCE_YOUR_CALM = 11
MAX_STREAM_ID = 0x7FFFFFFF


class Client(h2raw.FrameClient):
    """A FrameClient that records the server's PINGs and answers them only when told to."""

    def __init__(self, port, answer_pings=False):
        self.server_pings = []
        self.goaway_debug = []
        self.answer_pings = answer_pings
        super().__init__(port, timeout=10)

    def _handle(self, ftype, flags, stream_id, payload):
        if ftype == h2raw.PING and not flags & h2raw.FLAG_ACK:
            self.server_pings.append(payload)
            if self.answer_pings:
                self._reply(h2raw.frame(h2raw.PING, h2raw.FLAG_ACK, 0, payload))
            return
        if ftype == h2raw.GOAWAY:
            self.goaway_debug.append(payload[8:])
        super()._handle(ftype, flags, stream_id, payload)

    def open_stream(self, stream_id):
        """A Health/Watch call: the stream stays open while the server streams."""
        self.headers(stream_id, h2raw.grpc_headers(WATCH))
        self.data(stream_id, h2raw.grpc_frame(b""), end_stream=True)


def with_keepalive(server, **keys):
    """Puts a `keepalive` section into the server's configuration (before start)."""
    text = server.config.read_text()
    section = "keepalive:\n" + "".join(f"  {key}: {str(value).lower()}\n" for key, value in keys.items())
    server.config.write_text(text.replace("apps:\n", section + "apps:\n", 1))
    return server


@pytest.fixture
def start():
    """Starts a groupd with the given keepalive keys; stops it afterwards."""
    workdir = Path(tempfile.mkdtemp(prefix="groupd-keepalive-"))
    servers = []

    def make(**keys):
        directory = workdir / f"s{len(servers)}"
        directory.mkdir()
        server = with_keepalive(Groupd(directory), **keys)
        servers.append(server)
        return server.start()

    yield make
    for server in servers:
        server.stop()
    shutil.rmtree(workdir, ignore_errors=True)


def health_check(server):
    with grpc.insecure_channel(server.address) as channel:
        return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10).status


def test_max_connection_age_sends_goaway_and_closes_after_the_grace(start):
    server = start(max_connection_age_seconds=1, max_connection_age_grace_seconds=1)
    with Client(server.port) as client:
        client.open_stream(1)
        assert client.read_until(lambda: client.goaways, timeout=10), "no GOAWAY within 10 s of a 1 s max age"
        assert client.goaways[0] == (MAX_STREAM_ID, h2raw.NO_ERROR), client.goaways
        # The stream still open, the connection closes when the grace is over.
        assert client.read_until(lambda: client.closed, timeout=10), "not closed after the grace"
        assert (1, h2raw.NO_ERROR) in client.goaways, "the final GOAWAY names the stream in flight"
        assert not client._result(1).ended, "the Watch stream was in flight, not ended by the server"
    assert health_check(server) == health_pb2.HealthCheckResponse.SERVING


def test_max_connection_idle_sends_goaway_to_a_connection_without_streams(start):
    server = start(max_connection_idle_seconds=1)
    with Client(server.port) as client:
        assert client.read_until(lambda: client.goaways, timeout=10), "no GOAWAY within 10 s of a 1 s idle limit"
        assert client.goaways[0] == (MAX_STREAM_ID, h2raw.NO_ERROR)
        assert client.read_until(lambda: client.closed, timeout=10), "an idle connection closes after its GOAWAY"
        assert client.goaways[-1] == (0, h2raw.NO_ERROR)
    # (That an open stream holds the idle GOAWAY off is tested on the embedded loop's clock:
    # HTTP2ConnectionKeepaliveTests.openStreamHoldsOffIdleUntilItCloses.)


def test_keepalive_ping_closes_a_silent_connection(start):
    server = start(time_seconds=1, timeout_seconds=1)
    with Client(server.port) as client:
        assert client.read_until(lambda: client.server_pings, timeout=10), "no keepalive PING within 10 s"
        assert client.read_until(lambda: client.closed, timeout=10), "not closed without an answer to the PING"


def test_keepalive_ping_answered_keeps_the_connection(start):
    server = start(time_seconds=1, timeout_seconds=1)
    with Client(server.port, answer_pings=True) as client:
        assert client.read_until(lambda: len(client.server_pings) >= 3, timeout=20), "PINGs stopped"
        assert not client.closed
        client.headers(1, h2raw.grpc_headers(CHECK))
        client.data(1, h2raw.grpc_frame(b""), end_stream=True)
        assert client.read_until(lambda: client._result(1).ended)
        assert client._result(1).grpc_status == 0


def test_too_many_pings_get_enhance_your_calm(start):
    server = start(min_ping_interval_seconds=300)
    with Client(server.port) as client:
        client.open_stream(1)
        # The Watch's first message first: a response frame forgives the next PING.
        assert client.read_until(lambda: client._result(1).data)
        for index in range(4):
            client.ping(b"ping%04d" % index)
        assert client.read_until(lambda: client.goaways, timeout=10), "no GOAWAY after four PINGs in a row"
        assert client.goaways[0] == (1, ENHANCE_YOUR_CALM), client.goaways
        assert client.goaway_debug[0] == b"too_many_pings"
        assert client.read_until(lambda: client.closed, timeout=10)
    # Within the policy: one PING, then calls, then another: no GOAWAY.
    with Client(server.port) as client:
        for stream_id in (1, 3, 5):
            client.ping(b"ping%04d" % stream_id)
            client.headers(stream_id, h2raw.grpc_headers(CHECK))
            client.data(stream_id, h2raw.grpc_frame(b""), end_stream=True)
            assert client.read_until(lambda: client._result(stream_id).ended)
        assert not client.goaways and not client.closed


def test_keepalive_mistake_stops_start(tmp_path):
    server = with_keepalive(Groupd(tmp_path), timeout_seconds=-1)
    try:
        with pytest.raises(RuntimeError, match="groupd exited with"):
            server.start()
        assert "keepalive.timeout_seconds: expected seconds from 0 to 31536000, found -1.0" in server.log.read_text()
    finally:
        server.stop()
