"""The gRPC transport against stock clients: grpcio for what real clients send, python-h2 and
hand-written frames (h2raw.py) for what they never send.

Every bad-input test ends by checking the server still answers Health/Check on a new
connection, and on the offending connection when that one is still open.
"""
import gzip
import socket
import struct
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

import support  # noqa: F401  (generates the stubs and puts them on sys.path)
from grpc.health.v1 import health_pb2, health_pb2_grpc
from h2raw import (FrameClient, RawConnection, frame, grpc_frame, grpc_headers, send_raw_bytes,
                   CONTINUATION, DATA, FLAG_END_HEADERS, FLAG_END_STREAM, FLAG_PADDED, HEADERS, NO_ERROR,
                   PROTOCOL_ERROR, REFUSED_STREAM, RST_STREAM)

CHECK = "/grpc.health.v1.Health/Check"
WATCH = "/grpc.health.v1.Health/Watch"
SERVING = health_pb2.HealthCheckResponse.SERVING
MAX_MESSAGE = 4 * 1024 * 1024

OK, INTERNAL, UNIMPLEMENTED, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED = 0, 13, 12, 8, 4


def check_request(service="") -> bytes:
    return health_pb2.HealthCheckRequest(service=service).SerializeToString()


def assert_check_served(result, status=SERVING):
    """A raw Health/Check response: HTTP 200, gRPC content type, one message, grpc-status 0 trailer."""
    assert result.http_status == 200, result
    assert result.headers.get("content-type", "").startswith("application/grpc"), result
    assert result.grpc_status == OK, result
    assert not result.trailers_only, result
    messages = result.messages
    assert len(messages) == 1, result
    assert health_pb2.HealthCheckResponse.FromString(messages[0]).status == status


def assert_trailers_only(result, code, message_part=None):
    """An immediate error: one HEADERS frame with :status 200 and grpc-status, no DATA."""
    assert result.http_status == 200, result
    assert result.trailers_only, result
    assert result.grpc_status == code, result
    if message_part is not None:
        assert message_part in (result.grpc_message or ""), result


def assert_still_serving(groupd, raw=None):
    """Health/Check answers on a new connection, and on `raw` if that connection is still open."""
    with grpc.insecure_channel(groupd.address) as ch:
        response = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert response.status == SERVING
    with RawConnection(groupd.port) as fresh:
        assert_check_served(fresh.request(CHECK, [grpc_frame(check_request())]))
    if raw is not None and not raw.closed:
        assert_check_served(raw.request(CHECK, [grpc_frame(check_request())]))


@pytest.fixture
def raw(groupd):
    with RawConnection(groupd.port) as connection:
        yield connection


@pytest.fixture
def health(channel):
    return health_pb2_grpc.HealthStub(channel)


@pytest.fixture
def bystander(groupd):
    """Another connection with a Health/Watch stream open, which a broken connection must not disturb."""
    with RawConnection(groupd.port) as connection:
        stream_id = connection.request(WATCH, [grpc_frame(check_request())], wait=False)
        deadline = time.monotonic() + 5
        while not connection.results[stream_id].data and time.monotonic() < deadline:
            connection.pump()
        assert connection.results[stream_id].messages, "Watch sent no first message"

        def still_fine():
            assert connection.ping(b"bystand!"), "the bystander connection stopped answering PING"
            watch = connection.results[stream_id]
            assert not watch.ended and watch.reset_code is None and not connection.closed, watch
            assert_check_served(connection.request(CHECK, [grpc_frame(check_request())]))

        yield still_fine


# --- Health via grpcio -------------------------------------------------------------------------

@pytest.mark.parametrize("service", ["", "grpc.health.v1.Health", "groupd.v1.GroupService",
                                     "groupd.v1.MemberService", "groupd.v1.EventService"])
def test_health_check_serving(health, service):
    assert health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status == SERVING


def test_health_check_unknown_service_is_not_found(health):
    with pytest.raises(grpc.RpcError) as error:
        health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=5)
    assert error.value.code() == grpc.StatusCode.NOT_FOUND
    assert "no.such.Service" in error.value.details()


def test_health_list_reports_every_service(health):
    response = health.List(health_pb2.HealthListRequest(), timeout=5)
    expected = {"", "grpc.health.v1.Health", "groupd.v1.GroupService", "groupd.v1.MemberService",
                "groupd.v1.ApplicationService", "groupd.v1.EventService", "groupd.v1.MessageService"}
    assert expected <= set(response.statuses), sorted(response.statuses)
    assert all(status.status == SERVING for status in response.statuses.values())


def test_grpc_message_is_percent_encoded(health, raw):
    """grpc-message on the wire is percent-encoded UTF-8; grpcio decodes it back exactly."""
    service = "ü 100% \"odd\"\tname"
    with pytest.raises(grpc.RpcError) as error:
        health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
    assert error.value.code() == grpc.StatusCode.NOT_FOUND
    assert error.value.details().endswith(service)
    result = raw.request(CHECK, [grpc_frame(check_request(service))])
    assert_trailers_only(result, 5)
    wire = result.grpc_message
    assert "%C3%BC" in wire.upper() and "%25" in wire and "%09" in wire.upper(), wire
    assert all(0x20 <= ord(c) <= 0x7E for c in wire), wire


def test_health_watch_first_message_serving_then_cancel(groupd, health):
    call = health.Watch(health_pb2.HealthCheckRequest(), timeout=10)
    assert next(call).status == SERVING
    call.cancel()
    with pytest.raises(grpc.RpcError) as error:
        next(call)
    assert error.value.code() == grpc.StatusCode.CANCELLED
    assert_still_serving(groupd)


def test_health_watch_raw_headers_then_messages(raw):
    """A server-streaming response: HEADERS without grpc-status, then DATA, the stream left open."""
    stream_id = raw.request(WATCH, [grpc_frame(check_request())], wait=False)
    result = raw.results[stream_id]
    deadline = time.monotonic() + 5
    while not result.data and time.monotonic() < deadline:
        raw.pump()
    assert result.http_status == 200 and result.headers["content-type"] == "application/grpc", result
    assert "grpc-status" not in result.headers, result
    assert health_pb2.HealthCheckResponse.FromString(result.messages[0]).status == SERVING
    assert not result.ended


# --- UNIMPLEMENTED ---------------------------------------------------------------------------

def test_unknown_method_is_unimplemented(groupd, channel):
    method = channel.unary_unary("/x.Y/Z")
    with pytest.raises(grpc.RpcError) as error:
        method(b"", timeout=5)
    assert error.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert error.value.details() == "Method not found: /x.Y/Z"
    assert_still_serving(groupd)


def test_unknown_method_raw_is_trailers_only(raw):
    result = raw.request("/groupd.v1.GroupService/NoSuchMethod", [grpc_frame(b"")])
    assert_trailers_only(result, UNIMPLEMENTED, "Method not found: /groupd.v1.GroupService/NoSuchMethod")


# --- Deadlines -------------------------------------------------------------------------------

def test_deadline_exceeded_is_sent_by_the_server(groupd, raw):
    """grpc-timeout: 200m on Watch (which never ends by itself): the server ends it with status 4
    in real trailers after the first message. python-h2 has no deadlines, so the status is the server's."""
    started = time.monotonic()
    stream_id = raw.request(WATCH, [grpc_frame(check_request())], headers=[("grpc-timeout", "200m")], wait=False)
    result = raw.read_response(stream_id, timeout=5)
    elapsed = time.monotonic() - started
    assert result.http_status == 200, result
    assert health_pb2.HealthCheckResponse.FromString(result.messages[0]).status == SERVING
    assert result.trailers.get("grpc-status") == str(DEADLINE_EXCEEDED), result
    assert result.ended and result.reset_code is None, result
    assert elapsed >= 0.18, f"deadline fired after {elapsed:.3f}s, before the 200 ms asked for"
    assert_still_serving(groupd, raw)


def test_deadline_exceeded_ends_the_stream_within_the_timeout_header(raw):
    """The same for a deadline that passes before the request is even complete (no message yet)."""
    stream_id = raw.request(CHECK, [], headers=[("grpc-timeout", "100m")], end_stream=False, wait=False)
    result = raw.read_response(stream_id, timeout=5)
    assert result.grpc_status == DEADLINE_EXCEEDED, result
    raw.read_for(0.2)  # the server resets the half-open stream (RST_STREAM NO_ERROR)
    assert result.reset_code in (None, NO_ERROR), result
    assert_check_served(raw.request(CHECK, [grpc_frame(check_request())]))


def test_deadline_exceeded_grpcio_watch(groupd, health):
    call = health.Watch(health_pb2.HealthCheckRequest(), timeout=0.3)
    assert next(call).status == SERVING
    with pytest.raises(grpc.RpcError) as error:
        for _ in call:
            pass
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert_still_serving(groupd)


@pytest.mark.parametrize("value", ["abc", "1x", "123456789S", "S", "1.5S", "-1S", "10 m"])
def test_malformed_grpc_timeout_is_internal(groupd, raw, value):
    result = raw.request(CHECK, [grpc_frame(check_request())], headers=[("grpc-timeout", value)])
    assert_trailers_only(result, INTERNAL, "grpc-timeout")
    assert_still_serving(groupd, raw)


@pytest.mark.parametrize("value", ["1H", "99999999H", "99999999n", "5S", "30000m"])
def test_well_formed_grpc_timeout_is_served(raw, value):
    assert_check_served(raw.request(CHECK, [grpc_frame(check_request())], headers=[("grpc-timeout", value)]))


# --- Message size ----------------------------------------------------------------------------

def test_resource_exhausted_grpcio_5_mib(groupd, health):
    with pytest.raises(grpc.RpcError) as error:
        health.Check(health_pb2.HealthCheckRequest(service="a" * (5 * 1024 * 1024)), timeout=10)
    assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert str(MAX_MESSAGE) in error.value.details()
    assert_still_serving(groupd)


def test_resource_exhausted_from_the_prefix_alone(groupd, raw):
    """Only the 5-byte prefix announcing 4 MiB + 1 is sent, the stream left open: the answer comes
    without the body, then RST_STREAM(NO_ERROR) tells the client to stop sending."""
    stream_id = raw.request(CHECK, [struct.pack(">BI", 0, MAX_MESSAGE + 1)], end_stream=False, wait=False)
    result = raw.read_response(stream_id, timeout=5)
    assert_trailers_only(result, RESOURCE_EXHAUSTED, str(MAX_MESSAGE + 1))
    raw.read_for(0.3)
    assert result.reset_code == NO_ERROR, result
    assert_still_serving(groupd, raw)


def test_resource_exhausted_prefix_after_some_body_frames(groupd, raw):
    """A first message of 4 MiB + 1 whose prefix arrives split and after unrelated flow: refused
    as soon as the fifth prefix byte is in."""
    prefix = struct.pack(">BI", 0, MAX_MESSAGE + 1)
    stream_id = raw.request(CHECK, [prefix[:2], prefix[2:4], prefix[4:], b"x" * 1000], end_stream=False, wait=False)
    result = raw.read_response(stream_id, timeout=5)
    assert_trailers_only(result, RESOURCE_EXHAUSTED)
    assert_still_serving(groupd, raw)


def test_exactly_max_is_framed_and_max_plus_one_is_refused(fresh_groupd):
    server = fresh_groupd(max_message_bytes=1024).start()
    at_max = health_pb2.HealthCheckRequest(service="s" * 1021)
    over_max = health_pb2.HealthCheckRequest(service="s" * 1022)
    assert len(at_max.SerializeToString()) == 1024 and len(over_max.SerializeToString()) == 1025
    with grpc.insecure_channel(server.address) as ch:
        health = health_pb2_grpc.HealthStub(ch)
        # 1024 bytes pass framing and parsing: the (unknown) service is looked up.
        with pytest.raises(grpc.RpcError) as error:
            health.Check(at_max, timeout=5)
        assert error.value.code() == grpc.StatusCode.NOT_FOUND, error.value.details()
        with pytest.raises(grpc.RpcError) as error:
            health.Check(over_max, timeout=5)
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        if support.COMPRESSION:
            # The channel compresses (make test-interop-gzip): the bound applies to the inflated size.
            assert "inflates to more than the limit of 1024 bytes" in error.value.details()
        else:
            assert "1025" in error.value.details() and "1024" in error.value.details()
    with RawConnection(server.port) as connection:
        # Raw: 1024 bytes of garbage pass framing and fail parsing; a 1025 prefix alone is refused.
        result = connection.request(CHECK, [grpc_frame(b"\xff" * 1024)])
        assert_trailers_only(result, INTERNAL, "error unmarshalling request")
        result = connection.request(CHECK, [struct.pack(">BI", 0, 1025)], end_stream=False)
        assert_trailers_only(result, RESOURCE_EXHAUSTED)
    assert_still_serving(server)


# --- Framing ---------------------------------------------------------------------------------

@pytest.mark.parametrize("chunk_size", [1, 2, 3, 7])
def test_prefix_and_body_split_across_data_frames(raw, chunk_size):
    body = grpc_frame(check_request("groupd.v1.GroupService"))
    chunks = [body[i:i + chunk_size] for i in range(0, len(body), chunk_size)]
    assert len(chunks) >= 4
    assert_check_served(raw.request(CHECK, chunks))


def test_empty_data_frames_and_separate_end_stream(raw):
    """Empty DATA frames around the message and END_STREAM on a DATA frame of its own."""
    stream_id = raw.request(CHECK, [b"", grpc_frame(check_request())[:3], b"", grpc_frame(check_request())[3:], b""],
                            end_stream=False, wait=False)
    raw.end_stream(stream_id)
    assert_check_served(raw.read_response(stream_id))


def test_zero_length_message_is_served(raw):
    """An empty request message is a HealthCheckRequest with service "" (the whole server)."""
    assert_check_served(raw.request(CHECK, [grpc_frame(b"")]))


def test_compressed_flag_without_grpc_encoding_is_internal(groupd, raw):
    result = raw.request(CHECK, [grpc_frame(check_request(), compressed=True)])
    assert_trailers_only(result, INTERNAL, "grpc-encoding")
    assert_still_serving(groupd, raw)


def test_compressed_flag_with_unsupported_encoding_is_unimplemented(groupd, raw):
    payload = gzip.compress(check_request())
    result = raw.request(CHECK, [grpc_frame(payload, compressed=True)], headers=[("grpc-encoding", "br")])
    assert_trailers_only(result, UNIMPLEMENTED, "br")
    assert result.headers.get("grpc-accept-encoding") == "identity,deflate,gzip", result
    assert_still_serving(groupd, raw)


def test_grpc_encoding_header_with_uncompressed_message_is_served(raw):
    """grpc-encoding only matters for messages whose compressed flag is set."""
    assert_check_served(raw.request(CHECK, [grpc_frame(check_request())], headers=[("grpc-encoding", "gzip")]))


def test_grpcio_gzip_compression_is_served(groupd, health):
    # A long, repetitive message: grpc core sends a message uncompressed when gzip would not shrink it.
    # The server inflates it and finds no such service (test_compression.py covers the rest).
    with pytest.raises(grpc.RpcError) as error:
        health.Check(health_pb2.HealthCheckRequest(service="a" * 5000), timeout=5,
                     compression=grpc.Compression.Gzip)
    assert error.value.code() == grpc.StatusCode.NOT_FOUND
    assert_still_serving(groupd)


def test_invalid_message_flags_are_internal(groupd, raw):
    result = raw.request(CHECK, [b"\x02" + struct.pack(">I", 0)])
    assert_trailers_only(result, INTERNAL, "flags")
    assert_still_serving(groupd, raw)


@pytest.mark.parametrize("body", [
    pytest.param(struct.pack(">BI", 0, 10) + b"abc", id="inside-body"),
    pytest.param(b"\x00\x00\x00", id="inside-prefix"),
    pytest.param(grpc_frame(b"") + b"\x00\x00", id="after-a-message"),
])
def test_request_ending_inside_a_message_is_internal(groupd, raw, body):
    result = raw.request(CHECK, [body])
    assert_trailers_only(result, INTERNAL)
    assert "inside a message" in result.grpc_message or "more than one" in result.grpc_message, result
    assert_still_serving(groupd, raw)


def test_request_without_a_message_is_internal(groupd, raw):
    result = raw.request(CHECK, [])
    assert_trailers_only(result, INTERNAL, "without a message")
    assert_still_serving(groupd, raw)


@pytest.mark.parametrize("split", [True, False], ids=["two-frames", "one-frame"])
def test_two_messages_to_a_unary_method_are_internal(groupd, raw, split):
    messages = [grpc_frame(check_request()), grpc_frame(check_request())]
    result = raw.request(CHECK, messages if split else [b"".join(messages)])
    assert_trailers_only(result, INTERNAL, "more than one")
    assert_still_serving(groupd, raw)


@pytest.mark.parametrize("garbage", [b"\xff\xff\xff\xff", b"\x0a\x05ab", b"\x08"], ids=["bad-tag", "short-string", "no-varint"])
def test_garbage_protobuf_is_internal_with_a_message(groupd, channel, garbage):
    method = channel.unary_unary(CHECK)  # bytes in, bytes out: no serializer
    with pytest.raises(grpc.RpcError) as error:
        method(garbage, timeout=5)
    assert error.value.code() == grpc.StatusCode.INTERNAL
    assert error.value.details().startswith("error unmarshalling request"), error.value.details()
    assert_still_serving(groupd)


# --- Headers and HTTP ------------------------------------------------------------------------

def test_oversized_headers_raw_are_resource_exhausted(groupd, raw):
    metadata = [("x-big-one", "a" * 10240), ("x-big-two", "b" * 10240)]
    result = raw.request(CHECK, [grpc_frame(check_request())], headers=metadata)
    assert_trailers_only(result, RESOURCE_EXHAUSTED, "headers")
    assert_still_serving(groupd, raw)


def test_headers_just_under_the_limit_are_served(raw):
    assert_check_served(raw.request(CHECK, [grpc_frame(check_request())], headers=[("x-medium", "m" * 12000)]))


def test_oversized_headers_grpcio_are_resource_exhausted(groupd, health):
    # grpcio may refuse to send past the server's SETTINGS_MAX_HEADER_LIST_SIZE itself; either way
    # the call fails with RESOURCE_EXHAUSTED and the server keeps serving.
    with pytest.raises(grpc.RpcError) as error:
        health.Check(health_pb2.HealthCheckRequest(), metadata=[("x-big", "z" * 20480)], timeout=5)
    assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert_still_serving(groupd)


def test_get_is_405(groupd, raw):
    result = raw.request(CHECK, [], method="GET")
    assert result.http_status == 405, result
    assert result.grpc_status is not None and result.grpc_status != OK, result
    assert_still_serving(groupd, raw)


# application/json and application/proto are Connect's (tests/test_connect.py).
@pytest.mark.parametrize("content_type", ["text/plain", "application/grpcx", None])
def test_non_grpc_content_type_is_415(groupd, raw, content_type):
    result = raw.request(CHECK, [grpc_frame(check_request())], content_type=content_type)
    assert result.http_status == 415, result
    assert_still_serving(groupd, raw)


@pytest.mark.parametrize("content_type", ["application/grpc+proto", "application/grpc;charset=utf-8"])
def test_grpc_content_type_variants_are_served(raw, content_type):
    assert_check_served(raw.request(CHECK, [grpc_frame(check_request())], content_type=content_type))


# --- HTTP/2 ----------------------------------------------------------------------------------

# An HTTP/1.1 request line is not garbage: it is a Connect call over HTTP/1.1 (tests/test_connect.py).
@pytest.mark.parametrize("garbage", [
    b"\x00" * 64,
    b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n" + b"\x00" * 16,
], ids=["zeros", "bad-magic"])
def test_garbage_instead_of_the_preface_closes_only_that_connection(groupd, raw, bystander, garbage):
    assert_check_served(raw.request(CHECK, [grpc_frame(check_request())]))
    _, closed = send_raw_bytes(groupd.port, garbage, timeout=5)
    assert closed, "the server kept a connection open after a bad client preface"
    bystander()
    assert_still_serving(groupd, raw)


def test_data_on_stream_zero_is_a_connection_error(groupd, bystander):
    with FrameClient(groupd.port) as client:
        client.headers(1, grpc_headers(CHECK))
        client.data(1, grpc_frame(check_request()), end_stream=True)
        assert client.read_until(lambda: client.results[1].ended), client.results[1]
        assert_check_served(client.results[1])
        client.send(frame(DATA, 0, 0, b"abcd"))
        client.read_until(lambda: client.closed, timeout=5)
        assert client.goaways and client.goaways[-1] == (1, PROTOCOL_ERROR), client.goaways
        assert client.closed, "connection still open after a protocol error"
    bystander()
    assert_still_serving(groupd)


def test_headers_on_an_even_stream_id_is_a_connection_error(groupd, bystander):
    with FrameClient(groupd.port) as client:
        client.headers(2, grpc_headers(CHECK), end_stream=True)
        client.read_until(lambda: client.closed, timeout=5)
        assert client.goaways and client.goaways[-1][1] == PROTOCOL_ERROR, client.goaways
        assert client.closed
        assert 2 not in client.results or not client.results[2].headers, client.results
    bystander()
    assert_still_serving(groupd)


def test_frame_client_serves_a_call(groupd):
    """The hand-written frame client itself speaks correct HTTP/2 (the two tests above rely on it)."""
    with FrameClient(groupd.port) as client:
        client.headers(1, grpc_headers(CHECK))
        client.data(1, grpc_frame(check_request()), end_stream=True)
        assert client.read_until(lambda: client.results[1].ended)
        assert_check_served(client.results[1])
        assert not client.goaways


def test_ping_is_answered(raw):
    assert raw.ping(b"12345678")
    assert raw.ping(b"\x00" * 8)
    assert_check_served(raw.request(CHECK, [grpc_frame(check_request())]))


def test_many_streams_on_one_raw_connection_in_any_order(raw):
    """Twenty interleaved requests on one connection, their bodies sent in reverse order."""
    services = [f"nope-{i}" if i % 3 else "" for i in range(20)]
    stream_ids = [raw.request(CHECK, [], end_stream=False, wait=False) for _ in services]
    for stream_id, service in reversed(list(zip(stream_ids, services))):
        raw.send_data(stream_id, grpc_frame(check_request(service)), end_stream=True)
    for stream_id, service in zip(stream_ids, services):
        result = raw.read_response(stream_id)
        if service:
            assert_trailers_only(result, 5)
            assert result.grpc_message.endswith(service), result
        else:
            assert_check_served(result)


def varint(value: int) -> bytes:
    out = b""
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out += bytes([byte | 0x80])
        else:
            return out + bytes([byte])


def check_request_padded_to(size: int) -> bytes:
    """A HealthCheckRequest for service "" of exactly `size` bytes: one unknown bytes field (99)."""
    for payload_length in range(size, -1, -1):
        encoded = b"\x9a\x06" + varint(payload_length) + b"p" * payload_length  # field 99, wire type 2
        if len(encoded) == size:
            return encoded
    raise ValueError(size)


@pytest.mark.parametrize("size", [3 * 1024 * 1024, MAX_MESSAGE], ids=["3MiB", "exactly-4MiB"])
def test_large_message_under_the_limit_is_served(groupd, channel, size):
    """Bigger than the 1 MiB stream window: the server must reopen the window as it takes the bytes.
    Unknown fields are skipped, so the request reads as service ""."""
    method = channel.unary_unary(CHECK)
    response = method(check_request_padded_to(size), timeout=20)
    assert health_pb2.HealthCheckResponse.FromString(response).status == SERVING
    assert_still_serving(groupd)


def test_several_large_messages_in_parallel_on_one_connection(channel):
    """Five 3 MiB requests at once on one connection: 15 MiB in flight against a 16 MiB connection window."""
    method = channel.unary_unary(CHECK)
    futures = [method.future(check_request_padded_to(3 * 1024 * 1024), timeout=30) for _ in range(5)]
    for future in futures:
        assert health_pb2.HealthCheckResponse.FromString(future.result()).status == SERVING


def test_refused_oversized_messages_do_not_leak_the_connection_window(groupd):
    """Twenty 5 MiB requests on one connection, each refused from its prefix while grpcio keeps
    sending up to the stream window: the bytes that arrive after the refusal must still be credited
    back to the connection window, or the connection stalls after ~16 MiB."""
    with grpc.insecure_channel(groupd.address) as ch:
        health = health_pb2_grpc.HealthStub(ch)
        big = health_pb2.HealthCheckRequest(service="a" * (5 * 1024 * 1024))
        for _ in range(20):
            with pytest.raises(grpc.RpcError) as error:
                health.Check(big, timeout=10)
            assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == SERVING


def test_padded_data_frames_are_credited_back(groupd):
    """5000 DATA frames of 1 byte + 255 bytes of padding on one stream (1.25 MiB of flow-controlled
    bytes, more than the 1 MiB stream window): padding counts against the window and must be
    given back, or the client would have to stop."""
    body = grpc_frame(check_request_padded_to(5000 - 5))
    assert len(body) == 5000
    with FrameClient(groupd.port) as client:
        client.headers(1, grpc_headers(CHECK))
        frames = [frame(DATA, FLAG_PADDED | (FLAG_END_STREAM if i == len(body) - 1 else 0), 1,
                        bytes([255]) + body[i:i + 1] + b"\0" * 255)
                  for i in range(len(body))]
        client.send_data_frames(1, frames)
        assert client.read_until(lambda: client.results[1].ended, timeout=10), client.results[1]
        assert_check_served(client.results[1])
        assert not client.goaways, client.goaways
    assert_still_serving(groupd)


def send_split_headers(client, stream_id, headers, pieces):
    """One header block as HEADERS + (pieces - 1) CONTINUATION frames."""
    block = client.encoder.encode(headers)
    size = -(-len(block) // pieces)
    chunks = [block[i:i + size] for i in range(0, len(block), size)]
    assert len(chunks) == pieces, (len(block), pieces)
    client.send(frame(HEADERS, FLAG_END_HEADERS if pieces == 1 else 0, stream_id, chunks[0]))
    for index, chunk in enumerate(chunks[1:], start=1):
        client.send(frame(CONTINUATION, FLAG_END_HEADERS if index == pieces - 1 else 0, stream_id, chunk))
    client._result(stream_id)


def test_header_block_split_into_continuation_frames(groupd):
    """HEADERS + 7 CONTINUATION frames: a split header block is one request."""
    with FrameClient(groupd.port) as client:
        send_split_headers(client, 1, grpc_headers(CHECK, extra=[("x-meta", "v" * 300)]), 8)
        client.data(1, grpc_frame(check_request()), end_stream=True)
        assert client.read_until(lambda: client.results[1].ended), client.results[1]
        assert_check_served(client.results[1])


def send_headers_in_frames(client, stream_id, headers, frames):
    """One header block whole in a HEADERS frame, then (frames - 1) empty CONTINUATION frames, the
    last with END_HEADERS."""
    client.send(frame(HEADERS, 0, stream_id, client.encoder.encode(headers))
                + b"".join(frame(CONTINUATION, FLAG_END_HEADERS if index == frames - 1 else 0, stream_id)
                           for index in range(1, frames)))
    client._result(stream_id)


def test_header_block_in_256_frames_is_one_request(groupd):
    """HEADERS + 255 CONTINUATION frames, the most a header block may span (nghttp2's default was
    8 CONTINUATIONs; a 256 KiB metadata value takes 17 frames): served."""
    with FrameClient(groupd.port) as client:
        send_headers_in_frames(client, 1, grpc_headers(CHECK), 256)
        client.data(1, grpc_frame(check_request()), end_stream=True)
        assert client.read_until(lambda: client.results[1].ended), client.results[1]
        assert_check_served(client.results[1])
        assert not client.goaways and not client.closed, client.goaways


@pytest.mark.parametrize("split", ["empty-continuations", "one-byte-continuations"])
def test_continuation_flood_closes_only_that_connection(groupd, bystander, split):
    """A header block in 257 frames (HEADERS + 256 CONTINUATION): past the most the server reads,
    nghttp2 (max_continuations, the CVE-2024-28182 defence) fails the session; the answer is GOAWAY
    (the stream, PROTOCOL_ERROR) with debug data header_block_too_large. Only that connection."""
    with FrameClient(groupd.port) as client:
        headers = grpc_headers(CHECK, extra=[("x-meta", "v" * 300)])
        if split == "empty-continuations":
            send_headers_in_frames(client, 1, headers, 257)
        else:
            block = client.encoder.encode(headers)
            assert len(block) > 257
            pieces = [block[:len(block) - 256]] + [block[i:i + 1] for i in range(len(block) - 256, len(block))]
            client.send(frame(HEADERS, 0, 1, pieces[0]) + b"".join(
                frame(CONTINUATION, FLAG_END_HEADERS if index == 256 else 0, 1, piece)
                for index, piece in enumerate(pieces[1:], start=1)))
            client._result(1)
        client.read_until(lambda: client.closed, timeout=5)
        assert client.closed, "connection still open after a CONTINUATION flood"
        assert not client.results[1].headers, client.results[1]
        assert client.goaways[:1] == [(1, PROTOCOL_ERROR)], client.goaways
        assert client.goaway_debug[0] == b"header_block_too_large", client.goaway_debug
    bystander()
    assert_still_serving(groupd)


def test_client_trailers_end_the_request(raw):
    """END_STREAM may come on a trailing HEADERS frame instead of DATA."""
    stream_id = raw.request(CHECK, [grpc_frame(check_request())], end_stream=False, wait=False)
    raw.conn.send_headers(stream_id, [("x-client-trailer", "1")], end_stream=True)
    raw.flush()
    assert_check_served(raw.read_response(stream_id))


@pytest.mark.parametrize("headers", [
    pytest.param([(":method", "POST"), (":scheme", "http"), (":authority", "x"), ("content-type", "application/grpc")], id="no-path"),
    pytest.param(grpc_headers(CHECK) + [("X-Upper", "1")], id="uppercase-name"),
    pytest.param(grpc_headers(CHECK) + [("connection", "keep-alive")], id="connection-header"),
    pytest.param(grpc_headers(CHECK) + [(":path", "/again")], id="duplicate-path"),
])
def test_malformed_request_headers_reset_only_that_stream(groupd, headers):
    with FrameClient(groupd.port) as client:
        client.headers(1, headers, end_stream=True)
        assert client.read_until(lambda: client.results[1].reset_code is not None or client.results[1].ended)
        assert client.results[1].reset_code == PROTOCOL_ERROR, client.results[1]
        client.headers(3, grpc_headers(CHECK))
        client.data(3, grpc_frame(check_request()), end_stream=True)
        assert client.read_until(lambda: client.results[3].ended), client.results[3]
        assert_check_served(client.results[3])
        assert not client.goaways and not client.closed
    assert_still_serving(groupd)


def test_client_reset_of_a_stream_leaves_the_connection_serving(raw):
    stream_id = raw.request(WATCH, [grpc_frame(check_request())], wait=False)
    while not raw.results[stream_id].data:
        raw.pump()
    raw.conn.reset_stream(stream_id)
    raw.flush()
    half_open = raw.request(CHECK, [b"\x00\x00"], end_stream=False, wait=False)
    raw.conn.reset_stream(half_open)
    raw.flush()
    assert raw.ping()
    assert_check_served(raw.request(CHECK, [grpc_frame(check_request())]))


@pytest.mark.parametrize("window", [1, 7, 100])
def test_small_client_window_splits_responses(groupd, window):
    """The server honours the client's flow-control window: responses arrive whole, in pieces."""
    with RawConnection(groupd.port, initial_window_size=window) as connection:
        assert_check_served(connection.request(CHECK, [grpc_frame(check_request())]))
        result = connection.request(CHECK, [grpc_frame(check_request("no.such.Service"))])
        assert_trailers_only(result, 5, "no.such.Service")
        stream_id = connection.request(WATCH, [grpc_frame(check_request())], headers=[("grpc-timeout", "300m")], wait=False)
        result = connection.read_response(stream_id)
        assert health_pb2.HealthCheckResponse.FromString(result.messages[0]).status == SERVING
        assert result.grpc_status == DEADLINE_EXCEEDED, result


def test_status_details_bin_carries_a_google_rpc_status(groupd, channel, raw):
    """A domain error: grpc-status-details-bin is base64 of a google.rpc.Status with the same code and
    message and an ErrorInfo (grpcio decodes it; the raw value must be valid base64 too)."""
    import base64
    from google.rpc import status_pb2
    from groupd.v1 import common_pb2, group_pb2

    request = group_pb2.CreateGroupRequest(type=common_pb2.GROUP_TYPE_UNSPECIFIED,
                                           profile=common_pb2.GroupProfile(name="x"), owner_user_id="u1")
    stub = _groups_stub(channel)
    with pytest.raises(grpc.RpcError) as error:
        stub.CreateGroup(request, metadata=support.admin_md(), timeout=5)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    info = support.error_info(error.value)
    assert info is not None and info.reason and info.domain == "groupd", info

    result = raw.request("/groupd.v1.GroupService/CreateGroup", [grpc_frame(request.SerializeToString())],
                         headers=support.admin_md())
    assert result.grpc_status == 3, result
    encoded = (result.trailers or result.headers)["grpc-status-details-bin"]
    status = status_pb2.Status.FromString(base64.b64decode(encoded + "=" * (-len(encoded) % 4)))
    assert status.code == 3
    assert status.message == urllib_unquote(result.grpc_message)
    assert any(d.type_url.endswith("google.rpc.ErrorInfo") for d in status.details)


def urllib_unquote(value):
    from urllib.parse import unquote

    return unquote(value)


def test_large_response_over_a_small_window(groupd, channel):
    """GetGroupsInfo of 50 groups with every profile field at its limit: a response of tens of KiB,
    over several 16 KiB DATA frames, read through a 100-byte client window."""
    from groupd.v1 import common_pb2, group_pb2

    stub = _groups_stub(channel)
    md = support.admin_md()
    prefix = f"big{int(time.time() * 1000) % 10**9}"
    ids = [f"{prefix}-{i:02d}" for i in range(50)]
    profile = common_pb2.GroupProfile(name="n" * 30, introduction="i" * 120, notification="a" * 150, face_url="f" * 100)
    for gid in ids:
        stub.CreateGroup(
            group_pb2.CreateGroupRequest(group_id=gid, type=common_pb2.GROUP_TYPE_PUBLIC, profile=profile,
                                         owner_user_id="owner-1"), metadata=md, timeout=10)
    request = group_pb2.GetGroupsInfoRequest(group_ids=ids)
    via_grpcio = stub.GetGroupsInfo(request, metadata=md, timeout=10)
    assert [g.group_id for g in via_grpcio.groups] == ids
    with RawConnection(groupd.port, initial_window_size=100) as connection:
        result = connection.request("/groupd.v1.GroupService/GetGroupsInfo", [grpc_frame(request.SerializeToString())],
                                    headers=md)
        assert result.grpc_status == OK, result
        (message,) = result.messages
        assert len(message) > 20000
        response = group_pb2.GetGroupsInfoResponse.FromString(message)
        assert [g.group_id for g in response.groups] == ids
        assert all(g.profile == profile for g in response.groups)


def test_max_concurrent_streams_are_all_served_and_one_more_is_refused(groupd):
    """256 calls open at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS) are all served;
    a 257th is refused with RST_STREAM(REFUSED_STREAM) without harming the connection."""
    with FrameClient(groupd.port) as client:
        stream_ids = list(range(1, 2 * 256, 2))
        for stream_id in stream_ids:
            client.headers(stream_id, grpc_headers(CHECK))
            client.data(stream_id, b"\x00")
        client.headers(stream_ids[-1] + 2, grpc_headers(CHECK))
        client.ping(b"opened!!")
        assert client.read_until(lambda: b"opened!!" in client.ping_acks)
        assert client.read_until(lambda: client._result(stream_ids[-1] + 2).reset_code is not None, timeout=2)
        assert client.results[stream_ids[-1] + 2].reset_code == REFUSED_STREAM
        for stream_id in stream_ids:
            client.data(stream_id, grpc_frame(check_request())[1:], end_stream=True)
        assert client.read_until(lambda: all(client.results[s].ended for s in stream_ids), timeout=10)
        for stream_id in stream_ids:
            assert_check_served(client.results[stream_id])
        assert not client.goaways and not client.closed


def test_rapid_reset_flood_affects_only_that_connection(groupd, bystander):
    """3000 streams opened and reset at once (CVE-2023-44487): the server may serve them or end that
    connection (nghttp2 answers GOAWAY past its reset rate limit), and nothing else is disturbed."""
    with FrameClient(groupd.port) as client:
        blob = b"".join(
            frame(HEADERS, FLAG_END_HEADERS, 2 * i + 1, client.encoder.encode(grpc_headers(WATCH)))
            + frame(DATA, FLAG_END_STREAM, 2 * i + 1, grpc_frame(check_request()))
            + frame(RST_STREAM, 0, 2 * i + 1, struct.pack(">I", 8))
            for i in range(3000))
        try:
            client.send(blob)
        except OSError:
            pass
        client.ping(b"afterrst") if not client.closed else None
        client.read_until(lambda: b"afterrst" in client.ping_acks or client.goaways, timeout=10)
        if client.goaways:
            assert client.goaways[-1][1] != NO_ERROR, client.goaways
        else:
            assert b"afterrst" in client.ping_acks
    bystander()
    assert_still_serving(groupd)


# --- Load ------------------------------------------------------------------------------------

def _eight_channels(address):
    channels = [grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)]) for _ in range(8)]
    for ch in channels:
        grpc.channel_ready_future(ch).result(timeout=10)
    return channels


def test_500_concurrent_health_checks_over_8_channels(groupd):
    channels = _eight_channels(groupd.address)
    try:
        stubs = [health_pb2_grpc.HealthStub(ch) for ch in channels]
        services = [f"nope-{i}" if i % 2 else "" for i in range(500)]
        futures = [stubs[i % 8].Check.future(health_pb2.HealthCheckRequest(service=s), timeout=30)
                   for i, s in enumerate(services)]
        for service, future in zip(services, futures):
            if service:
                with pytest.raises(grpc.RpcError) as error:
                    future.result()
                assert error.value.code() == grpc.StatusCode.NOT_FOUND
                # The message names this call's own service: no answer went to the wrong call.
                assert error.value.details().endswith(service), (service, error.value.details())
            else:
                assert future.result().status == SERVING
    finally:
        for ch in channels:
            ch.close()


def _groups_stub(channel):
    from groupd.v1 import group_pb2_grpc

    return group_pb2_grpc.GroupServiceStub(channel)


def _create_request(group_id, name):
    from groupd.v1 import common_pb2, group_pb2

    return group_pb2.CreateGroupRequest(group_id=group_id, type=common_pb2.GROUP_TYPE_PUBLIC,
                                        profile=common_pb2.GroupProfile(name=name), owner_user_id="owner-1")


def test_500_concurrent_group_calls_over_8_channels(groupd):
    """250 CreateGroup then 250 GetGroupsInfo, spread over 8 channels, each answer matching its request."""
    from groupd.v1 import group_pb2

    prefix = f"conc{int(time.time() * 1000) % 10**9}"
    channels = _eight_channels(groupd.address)
    try:
        stubs = [_groups_stub(ch) for ch in channels]
        md = support.admin_md()
        stubs[0].CreateGroup(_create_request(f"{prefix}-probe", "probe"), metadata=md, timeout=10)
        ids = [f"{prefix}-{i}" for i in range(250)]
        creates = [stubs[i % 8].CreateGroup.future(_create_request(gid, f"n{i}"), metadata=md, timeout=30)
                   for i, gid in enumerate(ids)]
        for i, (gid, future) in enumerate(zip(ids, creates)):
            group = future.result().group
            assert group.group_id == gid and group.profile.name == f"n{i}"
        reads = [stubs[i % 8].GetGroupsInfo.future(group_pb2.GetGroupsInfoRequest(group_ids=[gid]), metadata=md, timeout=30)
                 for i, gid in enumerate(ids)]
        for i, (gid, future) in enumerate(zip(ids, reads)):
            response = future.result()
            assert [g.group_id for g in response.groups] == [gid], response
            assert response.groups[0].profile.name == f"n{i}"
            assert response.groups[0].owner_user_id == "owner-1"
    finally:
        for ch in channels:
            ch.close()
