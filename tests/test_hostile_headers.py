"""One request header field longer than nghttp2's HPACK limit (a string literal over 65536 bytes
on the wire) is refused for its own stream: Trailers-Only RESOURCE_EXHAUSTED, while every other
call on the connection (a running Health/Watch included) and on other connections goes on, and
the connection's HPACK state stays in step with the client's (docs/TRANSPORT.md, "Request
headers"). So up to the header block limit (256 frames: HEADERS and 255 CONTINUATION, 4 MiB in
full frames); a block in more frames ends the connection with GOAWAY PROTOCOL_ERROR."""
import threading

import grpc
import pytest

import support  # noqa: F401  (generates the stubs and puts them on sys.path)
from grpc.health.v1 import health_pb2, health_pb2_grpc
from hpack.huffman import HuffmanEncoder
from hpack.huffman_constants import REQUEST_CODES, REQUEST_CODES_LENGTH
from h2raw import (FrameClient, RawConnection, frame, grpc_frame, grpc_headers, grpc_messages,
                   CONTINUATION, DATA, FLAG_END_HEADERS, FLAG_END_STREAM, HEADERS, PROTOCOL_ERROR)
from hostile import node, rss_bounded

CHECK = "/grpc.health.v1.Health/Check"
WATCH = "/grpc.health.v1.Health/Watch"
RESOURCE_EXHAUSTED = 8
FIELD_MESSAGE = "a request header field exceeds 65536 bytes"
LIST_MESSAGE = "request headers exceed 16384 bytes"
HUFFMAN = HuffmanEncoder(REQUEST_CODES, REQUEST_CODES_LENGTH)
MAX_FRAME = 16384
MAX_BLOCK_FRAMES = 256  # HEADERS and 255 CONTINUATION (HeaderFieldGuard.maxHeaderBlockFrames)
KIB, MIB = 1 << 10, 1 << 20
SERVING = health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING).SerializeToString()


# --- HPACK written by hand (RFC 7541 §5, §6.2), for the representation each test needs ---------

def hpack_integer(value, prefix_bits, flags=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([flags | value])
    out = [flags | limit]
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def huffman_encode(data: bytes) -> bytes:
    """HPACK's Huffman code of `data` (RFC 7541 §5.2). A run of one byte is coded 8 bytes at a
    time, 8 codes filling whole bytes (hpack's encoder takes minutes over a megabyte)."""
    if len(data) >= 64 and data == data[:1] * len(data):
        whole, rest = divmod(len(data), 8)
        return HUFFMAN.encode(data[:8]) * whole + (HUFFMAN.encode(data[:rest]) if rest else b"")
    return HUFFMAN.encode(data)


def string_literal(data: bytes, huffman=False):
    if huffman:
        data = huffman_encode(data)
    return hpack_integer(len(data), 7, 0x80 if huffman else 0) + data


def literal_field(name, value, indexing="none", huffman=False):
    """A literal header field with a new name: with incremental indexing, without indexing, or
    never indexed."""
    bits, flags = {"incremental": (6, 0x40), "none": (4, 0x00), "never": (4, 0x10)}[indexing]
    as_bytes = lambda s: s if isinstance(s, bytes) else s.encode()
    return hpack_integer(0, bits, flags) + string_literal(as_bytes(name), huffman) + string_literal(as_bytes(value), huffman)


def request_block(path, extra_field=b""):
    """A request's header block, every field a literal without indexing (the dynamic table is
    left alone), then `extra_field`."""
    return b"".join(literal_field(n, v) for n, v in grpc_headers(path)) + extra_field


def send_block(client, stream_id, block, end_stream=True):
    """The block in a HEADERS frame and as many CONTINUATION frames as 16 KiB frames need."""
    chunks = [block[i:i + 16384] for i in range(0, len(block), 16384)] or [b""]
    frames = []
    for index, chunk in enumerate(chunks):
        ftype = HEADERS if index == 0 else CONTINUATION
        flags = (FLAG_END_STREAM if index == 0 and end_stream else 0) | (FLAG_END_HEADERS if index == len(chunks) - 1 else 0)
        frames.append(frame(ftype, flags, stream_id, chunk))
    client.send(b"".join(frames))
    client._result(stream_id)


def check_served(client, stream_id):
    """A Health/Check on `stream_id` of `client` answers SERVING."""
    client.headers(stream_id, grpc_headers(CHECK))
    client.data(stream_id, grpc_frame(b""), end_stream=True)
    assert client.read_until(lambda: client.results[stream_id].ended), client.results[stream_id]
    result = client.results[stream_id]
    assert result.grpc_status == 0 and grpc_messages(result.data) == [SERVING], result


def open_watch(client, stream_id):
    """A Health/Watch stream, its first message in: it stays open."""
    client.headers(stream_id, grpc_headers(WATCH))
    client.data(stream_id, grpc_frame(b""), end_stream=True)
    assert client.read_until(lambda: grpc_messages(client.results[stream_id].data) == [SERVING])


def assert_refused_alone(client, stream_id, watch_id, message=FIELD_MESSAGE):
    """`stream_id` got Trailers-Only RESOURCE_EXHAUSTED; the watch on `watch_id` and the
    connection are untouched."""
    assert client.read_until(lambda: client.results[stream_id].ended), client.results[stream_id]
    result = client.results[stream_id]
    assert result.http_status == 200 and result.trailers_only, result
    assert result.grpc_status == RESOURCE_EXHAUSTED and message in result.grpc_message, result
    assert client.goaways == [] and not client.closed
    watch = client.results[watch_id]
    assert watch.reset_code is None and not watch.ended, watch


CASES = {
    # name: (indexing, huffman, big field)
    "value-without-indexing": ("none", False, ("x-big", "v" * 70000)),
    "value-never-indexed": ("never", False, ("x-big", "v" * 70000)),
    "value-incremental-indexing": ("incremental", False, ("x-big", "v" * 70000)),
    "value-huffman-incremental": ("incremental", True, ("x-big", "z" * 110000)),  # 96250 bytes on the wire
    "value-huffman-without-indexing": ("none", True, ("x-big", "z" * 110000)),
    "name-without-indexing": ("none", False, ("n" * 70000, "v")),
    "name-incremental-indexing": ("incremental", False, ("n" * 70000, "v")),
    # Past nghttp2's default of 8 CONTINUATION frames per block (a 256 KiB value takes 17 frames,
    # 1 MiB 65): refused alone all the same.
    "256KiB-value-without-indexing": ("none", False, ("x-big", "v" * (256 * KIB))),
    "256KiB-value-huffman-incremental": ("incremental", True, ("x-big", "z" * (256 * KIB))),
    "1MiB-value-without-indexing": ("none", False, ("x-big", "v" * MIB)),
    "1MiB-value-incremental-indexing": ("incremental", False, ("x-big", "v" * MIB)),
    "1MiB-value-huffman-never-indexed": ("never", True, ("x-big", "z" * MIB)),
    "1MiB-name-without-indexing": ("none", False, ("n" * MIB, "v")),
}


@pytest.mark.parametrize("case", CASES)
def test_a_header_field_over_64k_refuses_only_its_stream(groupd, case):
    indexing, huffman, (name, value) = CASES[case]
    with FrameClient(groupd.port) as client, FrameClient(groupd.port) as bystander:
        open_watch(client, 1)
        open_watch(bystander, 1)
        send_block(client, 3, request_block(CHECK, literal_field(name, value, indexing, huffman)))
        if indexing == "incremental":
            # What the client's encoder does with an entry larger than its table (RFC 7541 §4.4):
            # the table empties. Its next requests refer only to what it indexes afterwards.
            client.encoder.header_table.add(name.encode(), value.encode())
            assert len(client.encoder.header_table.dynamic_entries) == 0
        assert_refused_alone(client, 3, 1)
        # The connection decodes the next requests (its HPACK table in step with the client's),
        # and the other connection never noticed.
        check_served(client, 5)
        check_served(bystander, 3)
        assert bystander.goaways == [] and not bystander.results[1].ended


def test_hpack_state_stays_in_step_with_an_indexing_encoder(groupd):
    """python-h2's encoder (hpack) indexes fields and refers to them by index in later requests;
    an oversized field it indexed empties both tables (it is larger than the table), and the
    requests after it decode with the fields they refer to."""
    with RawConnection(groupd.port) as connection:
        tagged = [("x-tag", "one"), ("x-other", "two")]
        first = connection.request(CHECK, [grpc_frame(b"")], headers=tagged)
        assert first.grpc_status == 0, first
        big = connection.request(CHECK, [grpc_frame(b"")], headers=tagged + [("x-big", "z" * 110000)])
        assert big.trailers_only and big.grpc_status == RESOURCE_EXHAUSTED, big
        assert FIELD_MESSAGE in big.grpc_message, big
        for _ in range(3):  # indexed anew, then referred to by index
            again = connection.request(CHECK, [grpc_frame(b"")], headers=tagged)
            assert again.grpc_status == 0 and grpc_messages(again.data) == [SERVING], again
        assert connection.goaway is None


def test_a_header_list_between_16k_and_64k_is_refused_per_stream(groupd):
    with FrameClient(groupd.port) as client:
        open_watch(client, 1)
        send_block(client, 3, request_block(CHECK, literal_field("x-big", "m" * 40000)))
        assert_refused_alone(client, 3, 1, message=LIST_MESSAGE)
        check_served(client, 5)


@pytest.mark.parametrize("size", [70 * KIB, 256 * KIB, MIB], ids=["70KiB", "256KiB", "1MiB"])
def test_grpcio_with_a_large_metadata_value(groupd, size):
    """grpcio sends a large metadata value despite the server's SETTINGS_MAX_HEADER_LIST_SIZE; the
    server refuses that call alone (the message is the server's), and the channel's other calls, a
    running Watch included, go on. (256 KiB and 1 MiB take more header frames than nghttp2's
    default of 9; they ended the connection, GOAWAY PROTOCOL_ERROR, before the limit was raised.)"""
    with grpc.insecure_channel(groupd.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == health_pb2.HealthCheckResponse.SERVING
        watch = health.Watch(health_pb2.HealthCheckRequest(), timeout=30)
        first = next(watch)
        assert first.status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as error:
            health.Check(health_pb2.HealthCheckRequest(), metadata=[("x-big", "v" * size)], timeout=5)
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.value
        assert FIELD_MESSAGE in error.value.details(), error.value.details()
        assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == health_pb2.HealthCheckResponse.SERVING
        assert watch.running() and not watch.done()
        watch.cancel()


def test_a_client_sending_oversized_fields_in_a_loop_is_ended_like_a_reset_flood(groupd):
    """Each such stream is refused for the client's fault and takes a token of the connection's
    reset budget (transport.reset_burst, 200 by default): a client that keeps sending them gets
    GOAWAY ENHANCE_YOUR_CALM (too_many_resets) once the budget is spent, and the connection
    closes; the streams before that were refused one by one."""
    block = request_block(CHECK, literal_field("x-big", "z" * 70000))
    streams = [1 + 2 * i for i in range(400)]
    with FrameClient(groupd.port) as client, FrameClient(groupd.port) as bystander:
        for stream_id in streams:
            if client.closed or client.goaways:
                break
            try:
                send_block(client, stream_id, block)
            except OSError:
                break  # the server closed the connection while we were still sending
        client.read_until(lambda: client.closed, timeout=30)
        assert client.goaways, "no GOAWAY for a client sending 400 oversized fields"
        last, code = client.goaways[0]
        assert code == 0xB, client.goaways  # ENHANCE_YOUR_CALM
        assert 200 <= last // 2 + 1 < 400, client.goaways  # the burst spent, before the 400th
        refused = [s for s in streams if s in client.results and client.results[s].ended]
        assert refused and all(client.results[s].grpc_status == RESOURCE_EXHAUSTED for s in refused)
        check_served(bystander, 1)


def block_in_frames(frames, tail=10):
    """A request header block whose one big value makes it `frames` full 16 KiB frames, the last
    of them `tail` bytes long."""
    base = len(request_block(CHECK, literal_field("x-big", "")))
    length = (frames - 1) * MAX_FRAME + tail
    value_length = length - base - 4  # its length prefix takes 5 bytes instead of 1
    block = request_block(CHECK, literal_field("x-big", b"v" * value_length))
    assert len(block) == length, (len(block), length)
    return block


def test_a_header_block_of_256_frames_refuses_only_its_stream(groupd):
    """The largest block the server reads: HEADERS and 255 CONTINUATION frames (4 MiB), its one
    value over 64 KiB. That stream alone is refused; the Watch on the connection goes on, the
    connection serves on, and the server keeps none of it (resident memory)."""
    server = node(groupd)
    block = block_in_frames(MAX_BLOCK_FRAMES)
    with FrameClient(server.port) as client:
        open_watch(client, 1)
        before = server.rss_kb()
        send_block(client, 3, block)
        assert_refused_alone(client, 3, 1)
        check_served(client, 5)
        rss_bounded(server, before)


def test_a_header_block_past_256_frames_ends_the_connection(groupd):
    """The point where the server stops reading a connection: a header block in 257 frames
    (HEADERS and 256 CONTINUATION) is GOAWAY PROTOCOL_ERROR, naming its stream, with debug data
    `header_block_too_large`; the connection closes with its Watch, other connections go on."""
    server = node(groupd)
    block = block_in_frames(MAX_BLOCK_FRAMES + 1)
    with FrameClient(server.port, timeout=10) as client, FrameClient(server.port) as bystander:
        open_watch(client, 1)
        open_watch(bystander, 1)
        before = server.rss_kb()
        try:
            send_block(client, 3, block)
        except OSError:
            pass  # the server closed while the last bytes were going out
        client.read_until(lambda: client.closed, timeout=10)
        assert client.closed, "the connection stayed open after a header block of 257 frames"
        assert client.goaways[:1] == [(3, PROTOCOL_ERROR)], client.goaways
        assert client.goaway_debug[0] == b"header_block_too_large", client.goaway_debug
        assert not client.results[3].headers, client.results[3]
        check_served(bystander, 3)
        assert bystander.goaways == [] and not bystander.results[1].ended
        rss_bounded(server, before)


@pytest.mark.parametrize("indexing", ["none", "incremental"])
@pytest.mark.parametrize("cut", [1, 2, 3])
def test_a_length_prefix_cut_by_the_frame_boundary_refuses_only_its_stream(groupd, cut, indexing):
    """A stock encoder cuts its header block every 16 KiB wherever that falls: here after `cut`
    of the 4 bytes of a 1 MiB value's length prefix (16 KiB of other metadata before it). The
    guard completes the prefix in the next frame: the call is refused alone, the Watch on the
    connection goes on, and the HPACK state stays in step (before, the connection ended with GOAWAY
    COMPRESSION_ERROR)."""
    big = literal_field("x-big", "v" * MIB, indexing)
    for pad in range(15000, 16384):
        before = request_block(CHECK, literal_field("x-pad", "p" * pad))
        if len(before) + 1 + 1 + 5 + cut == MAX_FRAME:  # opcode, name length, "x-big": then the value's length
            break
    else:
        raise AssertionError("no padding puts the frame boundary there")
    block = before + big
    assert block[MAX_FRAME - cut:MAX_FRAME + 4 - cut] == hpack_integer(MIB, 7)
    with FrameClient(groupd.port) as client:
        open_watch(client, 1)
        send_block(client, 3, block)
        if indexing == "incremental":
            client.encoder.header_table.add(b"x-big", b"v" * MIB)  # empties the client's table, as it did
        assert_refused_alone(client, 3, 1)
        check_served(client, 5)
