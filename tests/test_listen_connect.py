"""`listen.connect: false`: the port serves gRPC alone. The server's HTTP/2 SETTINGS go out before
the client speaks (no first bytes to wait for), an HTTP/1.1 request is a broken HTTP/2 preface, and
a JSON content type gets gRPC's refusal. With the default (`true`) the same requests are Connect
calls (tests/test_connect.py has those)."""
import socket
import tempfile
from pathlib import Path

import grpc
import pytest

import h2raw
from support import Groupd
from grpc.health.v1 import health_pb2, health_pb2_grpc

CHECK_OVER_HTTP1 = (b"POST /grpc.health.v1.Health/Check HTTP/1.1\r\nHost: x\r\ncontent-type: application/proto\r\n"
                    b"content-length: 0\r\nconnection: close\r\n\r\n")


def read_until_closed(sock, timeout=10):
    sock.settimeout(timeout)
    received = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, socket.timeout):
            return received
        if not chunk:
            return received
        received += chunk


@pytest.fixture(params=[True, False], ids=["connect", "grpc-only"])
def server(request):
    workdir = Path(tempfile.mkdtemp(prefix="groupd-listen-connect-"))
    node = Groupd(workdir)
    text = node.config.read_text()
    node.config.write_text(text.replace("listen:\n", f"listen:\n  connect: {'true' if request.param else 'false'}\n", 1))
    node.start()
    yield request.param, node
    node.process.terminate()
    node.process.wait(timeout=30)


def test_http1_is_connect_or_a_broken_preface(server):
    connect, node = server
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as sock:
        sock.sendall(CHECK_OVER_HTTP1)
        received = read_until_closed(sock)
    if connect:
        assert received.startswith(b"HTTP/1.1 200 OK\r\n") and received.endswith(b"\r\n\r\n\x08\x01"), received
    else:
        frames, _ = h2raw.parse_frames(received)
        goaways = [f for f in frames if f[0] == h2raw.GOAWAY]
        assert goaways and int.from_bytes(goaways[0][3][4:8], "big") == h2raw.PROTOCOL_ERROR, frames


def test_settings_wait_for_the_first_bytes_only_with_connect(server):
    connect, node = server
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as sock:
        sock.settimeout(1.0 if connect else 10)
        try:
            first = sock.recv(65536)
        except socket.timeout:
            first = None
    if connect:
        assert first is None, f"the server spoke before the client: {first!r}"
    else:
        frames, _ = h2raw.parse_frames(first)
        assert frames and frames[0][0] == h2raw.SETTINGS, first


def test_json_over_http2_is_connect_or_415(server):
    connect, node = server
    with h2raw.RawConnection(node.port) as client:
        result = client.request("/grpc.health.v1.Health/Check", [b"{}"], content_type="application/json")
    if connect:
        assert result.http_status == 200 and result.data == b'{"status":"SERVING"}', result
    else:
        assert result.http_status == 415, result
    # gRPC is served either way.
    with grpc.insecure_channel(node.address) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
