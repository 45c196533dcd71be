"""Hostile clients against a real groupd: protocol abuse, each with the exact answer (GOAWAY with
its RFC 9113 error code and last stream id, RST_STREAM with its code, or a gRPC status and
reason), a good client on another connection served during and after the attack, and the
server's resident memory within a generous bound once the attack is answered.

Cases already asserted elsewhere are not repeated here:
- tests/test_transport.py: bad prefaces (HTTP/1.1, zeros, bad magic), DATA on stream 0,
  HEADERS on an even stream id, 40-frame header blocks, 257 streams before the SETTINGS ACK
  (REFUSED_STREAM), malformed grpc-timeout, GET, wrong content-type, compressed flag without
  grpc-encoding, a length prefix of max_message_bytes + 1;
- tests/test_tls.py: a TLS ClientHello on the plaintext port (GOAWAY PROTOCOL_ERROR);
- tests/test_keepalive.py: four PINGs in a row (GOAWAY ENHANCE_YOUR_CALM, too_many_pings);
- tests/test_compression.py: a 1 GiB gzip bomb (RESOURCE_EXHAUSTED, the connection serves on);
- tests/test_auth.py: token faults one by one (alg none, spellings, kid, sub).
"""
import hashlib
import hmac
import json
import socket
import struct
import time

import pytest

import support  # noqa: F401  (generates the stubs and puts them on sys.path)
from grpc.health.v1 import health_pb2
from h2raw import (CLIENT_PREFACE, CONTINUATION, DATA, FLAG_ACK, FLAG_END_HEADERS, FLAG_END_STREAM, FLAG_PRIORITY,
                   GOAWAY, HEADERS, PING, PRIORITY, RST_STREAM, SETTINGS, WINDOW_UPDATE, frame, grpc_frame,
                   grpc_headers, parse_frames)
from hostile import (COMPRESSION_ERROR, ENHANCE_YOUR_CALM, FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR, NO_ERROR,
                     PROTOCOL_ERROR, STREAM_CLOSED, Flood, GoodClient, assert_alive, expect_goaway, node,
                     open_raw, read_until_closed, rss_bounded)
from support import APP_ID, APP_SECRET, b64url, mint_token
from test_auth import bearer, call_get_groups_info, expect_unauthenticated
from test_compression import gzip_bomb

CHECK = "/grpc.health.v1.Health/Check"
WATCH = "/grpc.health.v1.Health/Watch"
OK, INTERNAL, RESOURCE_EXHAUSTED = 0, 13, 8
MAX_FRAME_SIZE = 16384  # the server's SETTINGS_MAX_FRAME_SIZE (nghttp2's default, not raised)
MAX_MESSAGE = 4 * 1024 * 1024
SETTINGS_HEADER_TABLE_SIZE, SETTINGS_ENABLE_PUSH, SETTINGS_INITIAL_WINDOW_SIZE, SETTINGS_MAX_FRAME_SIZE = 1, 2, 4, 5


@pytest.fixture
def server(groupd):
    """The one groupd process attacked (the first node under PostgreSQL); alive afterwards."""
    target = node(groupd)
    yield target
    assert_alive(target)


def check_request(service=""):
    return health_pb2.HealthCheckRequest(service=service).SerializeToString()


def send_check(client, stream_id):
    """A good Health/Check call on a raw connection."""
    client.headers(stream_id, grpc_headers(CHECK))
    client.data(stream_id, grpc_frame(check_request()), end_stream=True)


# How long an attacked connection may take to answer: what the attack put in the socket before the
# PING or the call is read first, which a loaded 2-core machine may take seconds to get through.
ATTACKED_ANSWER_SECONDS = 60


def assert_check_served(client, stream_id):
    assert client.read_until(lambda: client._result(stream_id).ended, timeout=ATTACKED_ANSWER_SECONDS), \
        client._result(stream_id)
    result = client.results[stream_id]
    assert result.http_status == 200 and result.grpc_status == OK, result
    assert health_pb2.HealthCheckResponse.FromString(result.messages[0]).status == health_pb2.HealthCheckResponse.SERVING


def serves_on(client, stream_id):
    """The attacked connection answers a PING and serves a call on `stream_id`."""
    client.ping(b"still-up")
    assert client.read_until(lambda: b"still-up" in client.ping_acks, timeout=ATTACKED_ANSWER_SECONDS), \
        (client.goaways, client.closed)
    send_check(client, stream_id)
    assert_check_served(client, stream_id)
    assert not client.goaways and not client.closed, client.goaways


def hpack_integer(value, prefix_bits, first_byte):
    """An HPACK integer (RFC 7541 §5.1) with `first_byte`'s high bits."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first_byte | value])
    out = [first_byte | limit]
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    return bytes(out + [value])


# --- Floods ------------------------------------------------------------------------------------

@pytest.mark.parametrize("fragment", [b"", b"\x40\x01a\x01b"], ids=["empty", "literal-headers"])
def test_continuation_flood_is_goaway_protocol_error(server, fragment):
    """HEADERS without END_HEADERS, then CONTINUATION frames without end until the server closes:
    groupd lets nghttp2 take 256 frames per header block (its `max_continuations`, 8 by default
    since CVE-2024-28182, is set to 255), then nghttp2 fails the session; groupd answers GOAWAY
    PROTOCOL_ERROR naming the stream begun."""
    before = server.rss_kb()
    with GoodClient(server) as good, open_raw(server.port) as client:
        client.send(frame(HEADERS, 0, 1, client.encoder.encode(grpc_headers(CHECK))))
        with Flood(client, frame(CONTINUATION, 0, 1, fragment)) as flood:
            expect_goaway(client, PROTOCOL_ERROR, 1)
            flood.wait_ended()
        assert not client._result(1).headers, "a response to a header block that never ended"
        good.served_more()
    rss_bounded(server, before)


def hpack_bomb_block(client, references):
    """A request header block with one 4000-byte header stored in the dynamic table, then
    referenced `references` times (1 byte each): about 4 KB per byte sent once decoded."""
    bomb = ("x-bomb", "b" * 4000)
    return client.encoder.encode(grpc_headers(CHECK) + [bomb] * references)


@pytest.mark.parametrize("pieces", [1, 8], ids=["one-frame", "headers-and-7-continuations"])
def test_hpack_bomb_is_resource_exhausted_on_its_stream(server, pieces):
    """A header list that decodes to ~48 MB (one frame) or ~520 MB (a block of 8 frames) from under 16 KB per frame: the stream is refused with RESOURCE_EXHAUSTED
    (max_header_list_bytes), the connection and its HPACK state serve on."""
    before = server.rss_kb()
    with GoodClient(server) as good, open_raw(server.port) as client:
        references = pieces * MAX_FRAME_SIZE - 4400  # the literal and the pseudo-headers take ~4.2 KB
        block = hpack_bomb_block(client, references)
        size = -(-len(block) // pieces)
        chunks = [block[i:i + size] for i in range(0, len(block), size)]
        assert len(chunks) == pieces and all(len(c) <= MAX_FRAME_SIZE for c in chunks)
        client.send(frame(HEADERS, FLAG_END_HEADERS if pieces == 1 else 0, 1, chunks[0]))
        for index, chunk in enumerate(chunks[1:], start=1):
            client.send(frame(CONTINUATION, FLAG_END_HEADERS if index == pieces - 1 else 0, 1, chunk))
        client.data(1, grpc_frame(check_request()), end_stream=True)
        result = client._result(1)
        assert client.read_until(lambda: result.ended or result.reset_code is not None), result
        assert result.http_status == 200 and result.trailers_only, result
        assert result.grpc_status == RESOURCE_EXHAUSTED, result
        assert result.grpc_message == "request headers exceed 16384 bytes", result
        serves_on(client, 3)
        good.served_more()
    rss_bounded(server, before)


def test_header_table_size_setting_of_4_gib_is_capped(server):
    """SETTINGS_HEADER_TABLE_SIZE 2^32-1 from the client: the server's HPACK encoder keeps its own
    bound (4096), its responses decode, and its memory does not follow the client's number."""
    before = server.rss_kb()
    with open_raw(server.port) as client:
        client.send(frame(SETTINGS, 0, 0, struct.pack(">HI", SETTINGS_HEADER_TABLE_SIZE, 0xFFFFFFFF)))
        for stream_id in range(1, 41, 2):
            send_check(client, stream_id)
            assert_check_served(client, stream_id)
        assert not client.goaways
    rss_bounded(server, before)


def test_dynamic_table_size_update_past_the_setting_is_compression_error(server):
    """A header block opening with a dynamic table size update to 1 GiB, past the server's
    SETTINGS_HEADER_TABLE_SIZE (4096): GOAWAY COMPRESSION_ERROR (RFC 7541 §4.2)."""
    with GoodClient(server) as good, open_raw(server.port) as client:
        block = hpack_integer(1 << 30, 5, 0x20) + client.encoder.encode(grpc_headers(CHECK))
        client.send(frame(HEADERS, FLAG_END_HEADERS | FLAG_END_STREAM, 1, block))
        expect_goaway(client, COMPRESSION_ERROR, 1)
        good.served_more()


def test_settings_flood_without_reading_the_acks_is_goaway(server):
    """SETTINGS frames sent without end and no ACK read: nghttp2 queues at most 1000 ACKs
    (NGHTTP2_ERR_FLOODED); groupd answers GOAWAY PROTOCOL_ERROR and closes."""
    before = server.rss_kb()
    with GoodClient(server) as good, open_raw(server.port) as client:
        with Flood(client, frame(SETTINGS, 0, 0, struct.pack(">HI", SETTINGS_INITIAL_WINDOW_SIZE, 65535))) as flood:
            expect_goaway(client, PROTOCOL_ERROR, 0)
            flood.wait_ended()
        good.served_more()
    rss_bounded(server, before)


def test_ping_flood_without_reading_is_enhance_your_calm(server):
    """PINGs sent without end and no ACK read: the keepalive policy's third strike answers
    GOAWAY ENHANCE_YOUR_CALM (too_many_pings) first; the connection closes."""
    before = server.rss_kb()
    with GoodClient(server) as good, open_raw(server.port) as client:
        debug = []
        handle = client._handle

        def record_debug(ftype, flags, stream_id, payload):
            if ftype == GOAWAY:
                debug.append(payload[8:])
            handle(ftype, flags, stream_id, payload)

        client._handle = record_debug
        with Flood(client, frame(PING, 0, 0, b"pingpong")) as flood:
            expect_goaway(client, ENHANCE_YOUR_CALM, 0)
            flood.wait_ended()
        assert debug[0] == b"too_many_pings", debug
        good.served_more()
    rss_bounded(server, before)


def test_empty_data_frame_flood_is_harmless(server):
    """Empty DATA frames without end on an open request (CVE-2019-9518): each costs a frame
    header to parse and nothing to keep. Served until the good client has been served five times
    meanwhile; then the request still completes and the connection serves on."""
    before = server.rss_kb()
    with GoodClient(server) as good, open_raw(server.port) as client:
        client.headers(1, grpc_headers(CHECK))
        with Flood(client, frame(DATA, 0, 1, b""), max_bytes=64 * 1024 * 1024) as flood:
            good.served_more(5)
            assert flood.error is None, f"the server ended the flooding connection: {flood.error}"
        client.data(1, grpc_frame(check_request()), end_stream=True)
        assert_check_served(client, 1)
        serves_on(client, 3)
    rss_bounded(server, before)


@pytest.mark.parametrize("stream_id", [0, 1], ids=["connection", "stream"])
def test_window_update_flood_is_harmless(server, stream_id):
    """WINDOW_UPDATE +1 frames without end, on the connection or an open stream: windows grow
    slowly and nothing is kept; the good client is served meanwhile and the connection after."""
    before = server.rss_kb()
    with GoodClient(server) as good, open_raw(server.port) as client:
        if stream_id:
            client.headers(stream_id, grpc_headers(WATCH))
            client.data(stream_id, grpc_frame(check_request()), end_stream=True)
            assert client.read_until(lambda: client._result(stream_id).data)
        with Flood(client, frame(WINDOW_UPDATE, 0, stream_id, struct.pack(">I", 1)), max_bytes=32 * 1024 * 1024) as flood:
            good.served_more(5)
            assert flood.error is None, f"the server ended the flooding connection: {flood.error}"
        serves_on(client, 3)
    rss_bounded(server, before)


# --- Flow control ------------------------------------------------------------------------------

def test_connection_window_past_2_31_is_goaway_flow_control_error(server):
    with GoodClient(server) as good, open_raw(server.port) as client:
        client.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0x7FFFFFFF)))
        expect_goaway(client, FLOW_CONTROL_ERROR, 0)
        good.served_more()


def test_stream_window_past_2_31_is_rst_stream_flow_control_error(server):
    """RFC 9113 §6.9.1: a stream's window overflowing resets that stream; the connection serves on."""
    with open_raw(server.port) as client:
        client.headers(1, grpc_headers(WATCH))
        client.data(1, grpc_frame(check_request()), end_stream=True)
        assert client.read_until(lambda: client._result(1).data)
        client.send(frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 0x7FFFFFFF)))
        assert client.read_until(lambda: client._result(1).reset_code is not None)
        assert client.results[1].reset_code == FLOW_CONTROL_ERROR
        serves_on(client, 3)


def test_initial_window_size_overflowing_an_open_stream_resets_it(server):
    """SETTINGS_INITIAL_WINDOW_SIZE raised so an open stream's window passes 2^31-1: nghttp2 resets
    that stream with FLOW_CONTROL_ERROR (RFC 9113 §6.9.2 allows a connection error; nghttp2 keeps
    the connection) and the connection serves on."""
    with open_raw(server.port) as client:
        client.headers(1, grpc_headers(WATCH))
        client.data(1, grpc_frame(check_request()), end_stream=True)
        assert client.read_until(lambda: client._result(1).data)
        client.send(frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 0x7FFFFFFF - 70000)))
        client.send(frame(SETTINGS, 0, 0, struct.pack(">HI", SETTINGS_INITIAL_WINDOW_SIZE, 0x7FFFFFFF)))
        assert client.read_until(lambda: client._result(1).reset_code is not None)
        assert client.results[1].reset_code == FLOW_CONTROL_ERROR
        serves_on(client, 3)


def test_zero_window_increment_on_the_connection_is_goaway_protocol_error(server):
    with open_raw(server.port) as client:
        client.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0)))
        expect_goaway(client, PROTOCOL_ERROR, 0)


# --- Prefaces and SETTINGS ---------------------------------------------------------------------

@pytest.mark.parametrize("sent", [CLIENT_PREFACE[:10], CLIENT_PREFACE], ids=["truncated", "whole"])
def test_preface_then_close_closes_at_once(server, sent):
    """A client that closes its side after part of or the whole preface: the server's own
    preface (SETTINGS, connection WINDOW_UPDATE) and no GOAWAY, then the server closes."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(sent)
        sock.shutdown(socket.SHUT_WR)
        frames, leftover = parse_frames(read_until_closed(sock))
    assert [f[0] for f in frames] == [SETTINGS, WINDOW_UPDATE] and not leftover, frames


def test_nothing_then_close_closes_at_once_without_a_byte(server):
    """The server speaks only after the client's first bytes (they tell HTTP/2 from HTTP/1.1, on
    which the server's SETTINGS would read as a broken response): a client that closes its side
    without sending anything gets no byte, and the server closes."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.shutdown(socket.SHUT_WR)
        assert read_until_closed(sock) == b""


def test_first_frame_other_than_settings_is_goaway_protocol_error(server):
    """RFC 9113 §3.4: the client preface is the magic and a SETTINGS frame; a PING first is not."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(CLIENT_PREFACE + frame(PING, 0, 0, b"12345678"))
        frames, _ = parse_frames(read_until_closed(sock))
    goaways = [struct.unpack(">II", f[3][:8]) for f in frames if f[0] == GOAWAY]
    assert goaways == [(0, PROTOCOL_ERROR)], frames
    assert not [f for f in frames if f[0] == PING], "PING acknowledged before the client's SETTINGS"


@pytest.mark.parametrize("payload,code", [
    pytest.param(struct.pack(">HI", SETTINGS_INITIAL_WINDOW_SIZE, 0x80000000), FLOW_CONTROL_ERROR, id="initial-window-2^31"),
    pytest.param(struct.pack(">HI", SETTINGS_MAX_FRAME_SIZE, 16383), PROTOCOL_ERROR, id="max-frame-below-16384"),
    pytest.param(struct.pack(">HI", SETTINGS_MAX_FRAME_SIZE, 1 << 24), PROTOCOL_ERROR, id="max-frame-2^24"),
    pytest.param(struct.pack(">HI", SETTINGS_ENABLE_PUSH, 2), PROTOCOL_ERROR, id="enable-push-2"),
    pytest.param(b"\x00\x01\x00", FRAME_SIZE_ERROR, id="length-not-a-multiple-of-6"),
])
def test_bad_settings_are_goaway(server, payload, code):
    with open_raw(server.port) as client:
        client.send(frame(SETTINGS, 0, 0, payload))
        expect_goaway(client, code, 0)


def test_settings_ack_with_a_payload_or_on_a_stream_is_goaway(server):
    with open_raw(server.port) as client:
        client.send(frame(SETTINGS, FLAG_ACK, 0, struct.pack(">HI", SETTINGS_ENABLE_PUSH, 0)))
        expect_goaway(client, FRAME_SIZE_ERROR, 0)
    with open_raw(server.port) as client:
        client.send(frame(SETTINGS, 0, 1, b""))
        expect_goaway(client, PROTOCOL_ERROR, 0)


def test_unknown_setting_and_unknown_frame_type_are_ignored(server):
    """RFC 9113 §6.5.2 and §4.1: unknown settings and frame types are ignored."""
    with open_raw(server.port) as client:
        client.send(frame(SETTINGS, 0, 0, struct.pack(">HI", 0x99, 7)))
        client.send(frame(0xEE, 0xFF, 1, b"whatever this is"))
        serves_on(client, 1)


# --- Frames out of place -----------------------------------------------------------------------

@pytest.mark.parametrize("ftype,stream_id,payload", [
    pytest.param(DATA, 1, b"x" * (MAX_FRAME_SIZE + 1), id="data-past-max-frame-size"),
    pytest.param(HEADERS, 1, b"\x82" * (MAX_FRAME_SIZE + 1), id="headers-past-max-frame-size"),
    pytest.param(PING, 0, b"x" * (MAX_FRAME_SIZE + 1), id="ping-past-max-frame-size"),
    pytest.param(PING, 0, b"1234567", id="ping-of-7-bytes"),
    pytest.param(RST_STREAM, 1, b"\x00\x00\x08", id="rst-stream-of-3-bytes"),
    pytest.param(WINDOW_UPDATE, 0, b"\x00\x00\x01", id="window-update-of-3-bytes"),
    pytest.param(PRIORITY, 1, b"\x00\x00\x00\x00", id="priority-of-4-bytes"),
])
def test_frame_of_the_wrong_size_is_goaway_frame_size_error(server, ftype, stream_id, payload):
    """RFC 9113 §4.2 and each frame's section. Stream 1 is open (HEADERS without END_STREAM) when
    the bad frame is about it, so the GOAWAY names it as the last stream."""
    with GoodClient(server) as good, open_raw(server.port) as client:
        if stream_id:
            client.headers(stream_id, grpc_headers(CHECK))
        client.send(len(payload).to_bytes(3, "big") + bytes([ftype, 0]) + stream_id.to_bytes(4, "big") + payload)
        expect_goaway(client, FRAME_SIZE_ERROR, stream_id)
        good.served_more()


def test_headers_on_stream_zero_is_goaway_protocol_error(server):
    with open_raw(server.port) as client:
        client.send(frame(HEADERS, FLAG_END_HEADERS, 0, client.encoder.encode(grpc_headers(CHECK))))
        expect_goaway(client, PROTOCOL_ERROR, 0)


def test_headers_reusing_a_closed_stream_id_is_goaway_stream_closed(server):
    with open_raw(server.port) as client:
        send_check(client, 5)
        assert_check_served(client, 5)
        client.headers(5, grpc_headers(CHECK), end_stream=True)
        expect_goaway(client, STREAM_CLOSED, 5)


def test_headers_on_a_skipped_lower_stream_id_are_ignored(server):
    """Stream 3 after stream 5: RFC 9113 §5.1.1 makes it a PROTOCOL_ERROR, but nghttp2 cannot tell
    it from trailers racing a reset and ignores the header block; no stream 3 exists, and the
    connection serves on."""
    with open_raw(server.port) as client:
        send_check(client, 5)
        assert_check_served(client, 5)
        client.headers(3, grpc_headers(CHECK), end_stream=True)
        serves_on(client, 7)
        assert not client._result(3).headers and client._result(3).reset_code is None, client._result(3)


def test_data_on_a_closed_stream_is_goaway_stream_closed(server):
    """DATA after the stream ended both ways (RFC 9113 §5.1, closed): connection error STREAM_CLOSED."""
    with open_raw(server.port) as client:
        send_check(client, 1)
        assert_check_served(client, 1)
        client.data(1, b"late")
        expect_goaway(client, STREAM_CLOSED, 1)


def test_data_on_a_half_closed_stream_is_goaway_stream_closed(server):
    """DATA after the client's END_STREAM on a Watch the server still streams (half-closed remote)."""
    with open_raw(server.port) as client:
        client.headers(1, grpc_headers(WATCH))
        client.data(1, grpc_frame(check_request()), end_stream=True)
        assert client.read_until(lambda: client._result(1).data)
        client.data(1, b"late")
        expect_goaway(client, STREAM_CLOSED, 1)


def test_data_on_an_idle_stream_is_goaway_protocol_error(server):
    with open_raw(server.port) as client:
        client.data(7, b"never opened")
        expect_goaway(client, PROTOCOL_ERROR, 0)


def test_headers_depending_on_themselves_is_goaway_protocol_error(server):
    """RFC 9113 §5.3.1: a stream cannot depend on itself; nghttp2 makes it a connection error."""
    with open_raw(server.port) as client:
        block = client.encoder.encode(grpc_headers(CHECK))
        client.send(frame(HEADERS, FLAG_END_HEADERS | FLAG_PRIORITY, 1, struct.pack(">IB", 1, 15) + block))
        expect_goaway(client, PROTOCOL_ERROR, 0)


@pytest.mark.parametrize("open_first", [False, True], ids=["idle-stream", "open-stream"])
def test_priority_depending_on_itself_is_goaway_protocol_error(server, open_first):
    with open_raw(server.port) as client:
        if open_first:
            client.headers(1, grpc_headers(WATCH))
            client.data(1, grpc_frame(check_request()), end_stream=True)
            assert client.read_until(lambda: client._result(1).data)
        client.send(frame(PRIORITY, 0, 1, struct.pack(">IB", 1, 15)))
        expect_goaway(client, PROTOCOL_ERROR, 1 if open_first else 0)


def test_streams_past_the_acknowledged_limit_are_goaway_protocol_error(server):
    """Once the client has acknowledged SETTINGS_MAX_CONCURRENT_STREAMS (256), a 257th open
    stream is a connection error PROTOCOL_ERROR in nghttp2 (RFC 9113 §5.1.2 allows it as a
    stream error); the GOAWAY names the 256th stream. Before the ACK the stream is refused
    alone with REFUSED_STREAM (tests/test_transport.py)."""
    before = server.rss_kb()
    with GoodClient(server) as good, open_raw(server.port) as client:
        # The PING's ACK comes after the server read our SETTINGS ACK, sent when its SETTINGS came.
        client.ping(b"synced!!")
        assert client.read_until(lambda: b"synced!!" in client.ping_acks)
        stream_ids = list(range(1, 2 * 257, 2))
        client.send(b"".join(frame(HEADERS, FLAG_END_HEADERS, s, client.encoder.encode(grpc_headers(CHECK)))
                             for s in stream_ids))
        expect_goaway(client, PROTOCOL_ERROR, stream_ids[-2])
        good.served_more()
    rss_bounded(server, before)


# --- gRPC --------------------------------------------------------------------------------------

def test_length_prefix_of_4_gib_is_resource_exhausted(server):
    """The largest length a prefix can announce, 2^32-1: refused from the prefix alone, then
    RST_STREAM NO_ERROR tells the client to stop sending (RFC 9113 §8.1)."""
    with open_raw(server.port) as client:
        client.headers(1, grpc_headers(CHECK))
        client.data(1, b"\x00\xff\xff\xff\xff")
        result = client._result(1)
        assert client.read_until(lambda: result.ended), result
        assert result.trailers_only and result.grpc_status == RESOURCE_EXHAUSTED, result
        assert result.grpc_message == f"request message of 4294967295 bytes exceeds the limit of {MAX_MESSAGE} bytes", result
        assert client.read_until(lambda: result.reset_code is not None), result
        assert result.reset_code == NO_ERROR
        serves_on(client, 3)


def test_gzip_bomb_stays_within_the_memory_bound(server):
    """1 GiB of zeros in 1 MB of gzip: RESOURCE_EXHAUSTED at max_message_bytes, and the server's
    memory grows by no more than the bound (inflating stops at the limit)."""
    before = server.rss_kb()
    body = grpc_frame(gzip_bomb(), compressed=True)
    with GoodClient(server) as good, open_raw(server.port, timeout=30) as client:
        client.headers(1, grpc_headers(CHECK, extra=[("grpc-encoding", "gzip")]))
        frames = [frame(DATA, FLAG_END_STREAM if offset + MAX_FRAME_SIZE >= len(body) else 0, 1,
                        body[offset:offset + MAX_FRAME_SIZE])
                  for offset in range(0, len(body), MAX_FRAME_SIZE)]
        client.send_data_frames(1, frames, timeout=30)
        result = client._result(1)
        assert client.read_until(lambda: result.ended, timeout=30), result
        assert result.grpc_status == RESOURCE_EXHAUSTED, result
        assert result.grpc_message == f"request message inflates to more than the limit of {MAX_MESSAGE} bytes (gzip)", result
        good.served_more()
    rss_bounded(server, before)


@pytest.mark.parametrize("method", ["PUT", "HEAD", "CONNECT"])
def test_methods_other_than_post_are_405(server, method):
    """Besides GET (tests/test_transport.py): CONNECT has no :path or :scheme (RFC 9113 §8.5)."""
    headers = [(":method", "CONNECT"), (":authority", "127.0.0.1:1")] if method == "CONNECT" \
        else grpc_headers(CHECK, method=method)
    with open_raw(server.port) as client:
        client.headers(1, headers, end_stream=True)
        result = client._result(1)
        assert client.read_until(lambda: result.ended or result.reset_code is not None), result
        assert result.http_status == 405 and result.grpc_status == INTERNAL, result
        assert result.grpc_message == "gRPC requests use POST", result
        serves_on(client, 3)


# --- Tokens ------------------------------------------------------------------------------------

def signed_text(header_text, payload_text, secret=APP_SECRET):
    """An HS256 token over the JSON texts given as they are (duplicates and escapes kept)."""
    signing_input = b64url(header_text.encode()) + "." + b64url(payload_text.encode())
    return signing_input + "." + b64url(hmac.new(secret.encode(), signing_input.encode(), hashlib.sha256).digest())


def claims_text(*members):
    """The JSON of good claims for alice (a user), followed by `members` (raw `"name":value` texts)."""
    good = f'"app":"{APP_ID}","sub":"alice","role":"user","exp":{int(time.time()) + 3600}'
    return "{" + ",".join((good,) + members) + "}"


@pytest.mark.parametrize("token", [
    pytest.param("." * 10_000, id="10000-dots"),
    pytest.param("a." * 5_000 + "a", id="5001-segments"),
    pytest.param("a" * 15_000, id="15-KB-one-segment"),
])
def test_token_shapes_are_malformed(channel, token):
    info = expect_unauthenticated(channel, bearer(token), "TOKEN_MALFORMED")
    assert info.domain == "groupd"


@pytest.mark.parametrize("general", [False, True], ids=["flattened", "general"])
def test_jws_json_serialization_is_malformed(channel, general):
    """RFC 7515 §7.2: a JWS in JSON, here signed correctly; tokens are compact only."""
    protected, payload, signature = mint_token(sub="alice", role="user").split(".")
    if general:
        document = {"payload": payload, "signatures": [{"protected": protected, "signature": signature}]}
    else:
        document = {"payload": payload, "protected": protected, "signature": signature}
    expect_unauthenticated(channel, bearer(json.dumps(document, separators=(",", ":"))), "TOKEN_MALFORMED")


@pytest.mark.parametrize("alg", ["hs256", "None", "NONE", "HS256 "])
def test_alg_is_matched_exactly(channel, alg):
    """Besides "none" and other algorithms (tests/test_auth.py): no case folding, no trimming."""
    token = signed_text(json.dumps({"alg": alg}), claims_text())
    info = expect_unauthenticated(channel, bearer(token), "TOKEN_MALFORMED")
    assert info.domain == "groupd"


@pytest.mark.parametrize("header", [
    '{"alg":"HS256","crit":["exp"]}',
    '{"alg":"HS256","crit":["x-groupd"],"x-groupd":1}',
    '{"alg":"HS256","b64":false,"crit":["b64"]}',
], ids=["crit-exp", "crit-unknown", "unencoded-payload"])
def test_crit_is_malformed(channel, header):
    """RFC 7515 §4.1.11: extensions in crit must be understood or the token refused; none are."""
    expect_unauthenticated(channel, bearer(signed_text(header, claims_text())), "TOKEN_MALFORMED")
    call_get_groups_info(channel, bearer(signed_text('{"alg":"HS256"}', claims_text())))


@pytest.mark.parametrize("header,extra", [
    pytest.param('{"alg":"HS256"}', ('"role":"admin"',), id="role-twice"),
    pytest.param('{"alg":"HS256"}', ('"sub":"bob"',), id="sub-twice"),
    pytest.param('{"alg":"HS256","alg":"HS256"}', (), id="alg-twice"),
    pytest.param('{"alg":"HS256"}', ('"x":{"a":1,"a":2}',), id="nested-member-twice"),
    pytest.param('{"alg":"HS256"}', ('"r\\u006fle":"admin"',), id="escaped-member-name"),
])
def test_a_member_named_twice_or_escaped_is_malformed(channel, header, extra):
    """RFC 7519 §4, RFC 7515 §4: names are unique, or else two parsers read two meanings (one the
    first role, the other the last); a name spelt with escapes is another spelling of it."""
    info = expect_unauthenticated(channel, bearer(signed_text(header, claims_text(*extra))), "TOKEN_MALFORMED")
    assert info.domain == "groupd"
    # The same names in different objects are not duplicates.
    call_get_groups_info(channel, bearer(signed_text('{"alg":"HS256"}', claims_text('"x":{"role":"a","sub":"b"}'))))


def test_two_authorization_headers_are_malformed(channel):
    """Which of two credentials counts would depend on the reader: the call is refused, either order."""
    good = "Bearer " + mint_token(sub="alice", role="user")
    for metadata in ([("authorization", good), ("authorization", "Bearer garbage")],
                     [("authorization", "Bearer garbage"), ("authorization", good)],
                     [("authorization", good), ("authorization", good)]):
        expect_unauthenticated(channel, metadata, "TOKEN_MALFORMED")
    call_get_groups_info(channel, [("authorization", good)])


def test_deeply_nested_claims_are_malformed_without_harm(channel, server):
    """3000 nested arrays in a claim (an 8 KB token, within the header limit), correctly signed:
    the JSON parser's depth limit refuses it; the server neither crashes nor grows."""
    before = server.rss_kb()
    token = signed_text('{"alg":"HS256"}', claims_text('"x":' + "[" * 3000 + "]" * 3000))
    assert len(token) < 12_000
    expect_unauthenticated(channel, bearer(token), "TOKEN_MALFORMED")
    rss_bounded(server, before)


def test_large_tokens_within_the_header_limit(channel):
    """A 15 KB token (a padding claim; the header list limit is 16 KiB): correctly signed it is
    served, one byte of its signature changed it is TOKEN_BAD_SIGNATURE."""
    token = signed_text('{"alg":"HS256"}', claims_text(f'"pad":"{"p" * 11_000}"'))
    assert 14_000 < len(token) < 15_500
    call_get_groups_info(channel, bearer(token))
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    first = token.rindex(".") + 1
    forged = token[:first] + alphabet[(alphabet.index(token[first]) + 1) % 64] + token[first + 1:]
    expect_unauthenticated(channel, bearer(forged), "TOKEN_BAD_SIGNATURE")
