"""gzip and deflate message compression: grpcio channels that compress every call, and raw HTTP/2
for what grpcio never sends (a compression bomb, a corrupt body, an encoding nobody knows).

grpc core sends a message uncompressed when compression would not shrink it, so the requests here
that must arrive compressed are long and repetitive.
"""
import gzip
import struct
import zlib

import grpc
import pytest

import support
from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc
from grpc.health.v1 import health_pb2, health_pb2_grpc
from h2raw import FLAG_END_STREAM, FrameClient, RawConnection, frame, grpc_frame, grpc_headers, DATA

CHECK = "/grpc.health.v1.Health/Check"
LIST = "/grpc.health.v1.Health/List"
OK, NOT_FOUND, RESOURCE_EXHAUSTED, UNIMPLEMENTED, INTERNAL = 0, 5, 8, 12, 13
ALGORITHMS = [pytest.param(grpc.Compression.Gzip, id="gzip"), pytest.param(grpc.Compression.Deflate, id="deflate")]


def messages_with_flags(data: bytes):
    """A response body's gRPC messages as (compressed flag, payload)."""
    out = []
    while data:
        flags, length = struct.unpack(">BI", data[:5])
        out.append((flags, data[5:5 + length]))
        data = data[5 + length:]
    return out


def check_request(service="") -> bytes:
    return health_pb2.HealthCheckRequest(service=service).SerializeToString()


def gzip_bomb(gib=1):
    """`gib` GiB of zeros as one gzip member of about 1 MB per GiB, built from one full-flushed
    deflate block of 1 MiB of zeros repeated (compressing the whole GiB would take half a minute)."""
    chunk = bytes(1 << 20)
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
    chunks = gib * 1024
    crc = 0
    for _ in range(chunks):
        crc = zlib.crc32(chunk, crc)
    # A final empty fixed-Huffman block, then the gzip trailer: CRC-32 and size mod 2^32.
    return head + block * (chunks - 1) + b"\x03\x00" + struct.pack("<II", crc, (chunks << 20) & 0xFFFFFFFF)


def test_gzip_bomb_builder_is_a_valid_stream():
    """The bomb's construction, checked small: 4 MiB of zeros."""
    chunk = bytes(1 << 20)
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(4):
        crc = zlib.crc32(chunk, crc)
    small = head + block * 3 + b"\x03\x00" + struct.pack("<II", crc, 4 << 20)
    assert gzip.decompress(small) == bytes(4 << 20)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_grpcio_compressed_channel_serves_every_kind_of_call(groupd, algorithm):
    with grpc.insecure_channel(groupd.address, compression=algorithm) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        # Long enough to go compressed; the server inflates it and finds no such service.
        with pytest.raises(grpc.RpcError) as error:
            health.Check(health_pb2.HealthCheckRequest(service="svc-" * 1000), timeout=10)
        assert error.value.code() == grpc.StatusCode.NOT_FOUND, error.value
        assert "svc-svc-" in error.value.details()
        assert health.Check(health_pb2.HealthCheckRequest(), timeout=10).status == health_pb2.HealthCheckResponse.SERVING

        # Authenticated calls whose responses pass compression.min_bytes (1024): 20 groups read back at once.
        groups = group_pb2_grpc.GroupServiceStub(channel)
        md = support.admin_md()
        ids = []
        for index in range(20):
            response = groups.CreateGroup(group_pb2.CreateGroupRequest(
                type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id="owner",
                profile=common_pb2.GroupProfile(name=f"compressed {index}", introduction="gzip " * 20)),
                metadata=md, timeout=10)
            ids.append(response.group.group_id)
        info = groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=ids), metadata=md, timeout=10)
        assert info.ByteSize() > 1024
        assert [g.group_id for g in info.groups] == ids
        assert all(g.profile.introduction == "gzip " * 20 for g in info.groups)

        # A server stream: Health/Watch's first status.
        watch = health.Watch(health_pb2.HealthCheckRequest(), timeout=10)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        watch.cancel()


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_inflated_size_is_bounded_by_max_message_bytes(fresh_groupd, algorithm):
    server = fresh_groupd(max_message_bytes=2048)
    server.start()
    request = health_pb2.HealthCheckRequest(service="x" * 5000)
    with grpc.insecure_channel(server.address, compression=grpc.Compression.NoCompression) as plain:
        with pytest.raises(grpc.RpcError) as error:
            health_pb2_grpc.HealthStub(plain).Check(request, timeout=10)
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "exceeds the limit of 2048 bytes" in error.value.details()
    with grpc.insecure_channel(server.address, compression=algorithm) as compressed:
        stub = health_pb2_grpc.HealthStub(compressed)
        # Compressed, the message is far under 2048 bytes; inflated, it is not.
        with pytest.raises(grpc.RpcError) as error:
            stub.Check(request, timeout=10)
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "inflates to more than the limit of 2048 bytes" in error.value.details()
        assert stub.Check(health_pb2.HealthCheckRequest(), timeout=10).status == health_pb2.HealthCheckResponse.SERVING


def test_gzip_bomb_is_resource_exhausted_and_the_connection_serves_on(groupd):
    bomb = gzip_bomb()
    assert len(bomb) < 4 * 1024 * 1024  # within max_message_bytes compressed
    body = grpc_frame(bomb, compressed=True)
    with FrameClient(groupd.port, timeout=30) as client:
        client.headers(1, grpc_headers(CHECK, extra=[("grpc-encoding", "gzip")]))
        frames = [frame(DATA, FLAG_END_STREAM if offset + 16384 >= len(body) else 0, 1, body[offset:offset + 16384])
                  for offset in range(0, len(body), 16384)]
        client.send_data_frames(1, frames, timeout=30)
        assert client.read_until(lambda: 1 in client.results and client.results[1].ended, timeout=30), client.results
        result = client.results[1]
        assert result.grpc_status == RESOURCE_EXHAUSTED, result
        assert "inflates to more than the limit of 4194304 bytes" in result.grpc_message, result
        # The same connection serves the next call.
        client.headers(3, grpc_headers(CHECK))
        client.data(3, grpc_frame(check_request()), end_stream=True)
        assert client.read_until(lambda: 3 in client.results and client.results[3].ended, timeout=10), client.results
        assert client.results[3].grpc_status == OK, client.results[3]
        assert not client.closed and not client.goaways


@pytest.mark.parametrize("encoding,compress", [
    pytest.param("gzip", gzip.compress, id="gzip"),
    pytest.param("deflate", zlib.compress, id="deflate"),
])
def test_corrupt_body_is_internal_and_the_connection_serves_on(groupd, encoding, compress):
    body = bytearray(compress(check_request("y" * 3000)))
    middle = len(body) // 2
    body[middle:middle + 4] = bytes(b ^ 0xFF for b in body[middle:middle + 4])
    with RawConnection(groupd.port) as raw:
        result = raw.request(CHECK, [grpc_frame(bytes(body), compressed=True)], headers=[("grpc-encoding", encoding)])
        assert result.grpc_status == INTERNAL, result
        assert "could not be decompressed" in result.grpc_message, result
        assert result.headers.get("grpc-accept-encoding") == "identity,deflate,gzip", result
        # A valid compressed call on the same connection.
        again = raw.request(CHECK, [grpc_frame(compress(check_request()), compressed=True)],
                            headers=[("grpc-encoding", encoding)])
        assert again.grpc_status == OK, again
        assert not raw.closed


def test_unknown_encoding_is_unimplemented_and_lists_the_supported_ones(groupd):
    with RawConnection(groupd.port) as raw:
        result = raw.request(CHECK, [grpc_frame(b"\x0a\x01x", compressed=True)], headers=[("grpc-encoding", "snappy")])
        assert result.grpc_status == UNIMPLEMENTED, result
        assert "snappy" in result.grpc_message, result
        assert result.headers.get("grpc-accept-encoding") == "identity,deflate,gzip", result
        assert raw.request(CHECK, [grpc_frame(check_request())]).grpc_status == OK


def _list_response(raw, headers):
    result = raw.request(LIST, [grpc_frame(b"")], headers=headers)
    assert result.grpc_status == OK, result
    return result


@pytest.mark.parametrize("encoding,decompress", [
    pytest.param("gzip", gzip.decompress, id="gzip"),
    pytest.param("deflate", zlib.decompress, id="deflate"),
])
def test_responses_are_compressed_in_the_request_encoding_when_accepted(fresh_groupd, encoding, decompress):
    server = fresh_groupd()
    # Health/List answers a few hundred bytes: compressed from 64 bytes on.
    server.config.write_text(server.config.read_text() + "compression:\n  min_bytes: 64\n")
    server.start()
    with RawConnection(server.port) as raw:
        accepted = _list_response(raw, [("grpc-encoding", encoding), ("grpc-accept-encoding", "identity, deflate, gzip")])
        assert accepted.headers.get("grpc-encoding") == encoding, accepted
        assert accepted.headers.get("grpc-accept-encoding") == "identity,deflate,gzip", accepted
        [(flags, payload)] = messages_with_flags(accepted.data)
        assert flags == 1
        listing = health_pb2.HealthListResponse.FromString(decompress(payload))
        assert "groupd.v1.GroupService" in listing.statuses

        # The client does not read that encoding, or sends identity: identity back.
        for headers in ([("grpc-encoding", encoding), ("grpc-accept-encoding", "identity")], []):
            plain = _list_response(raw, headers)
            assert "grpc-encoding" not in plain.headers, plain
            [(flags, payload)] = messages_with_flags(plain.data)
            assert flags == 0
            assert health_pb2.HealthListResponse.FromString(payload) == listing


def test_response_compression_can_be_turned_off(fresh_groupd):
    server = fresh_groupd()
    server.config.write_text(server.config.read_text() + "compression:\n  responses: false\n  min_bytes: 0\n")
    server.start()
    with RawConnection(server.port) as raw:
        result = _list_response(raw, [("grpc-encoding", "gzip"), ("grpc-accept-encoding", "gzip")])
        assert "grpc-encoding" not in result.headers, result
        assert all(flags == 0 for flags, _ in messages_with_flags(result.data))


def test_grpc_accept_encoding_on_several_lines_is_one_list(fresh_groupd):
    """Header lines of one name form one list (RFC 9110 §5.3): grpc-swift-2 sends `deflate` and
    `gzip` as two `grpc-accept-encoding` lines. A call in either encoding gets its response in that
    encoding whichever way the client spells the list (before, only the last line was read: a
    deflate call from such a client got an uncompressed response)."""
    server = fresh_groupd()
    # Health/List answers a few hundred bytes: compressed from 64 bytes on.
    server.config.write_text(server.config.read_text() + "compression:\n  min_bytes: 64\n")
    server.start()
    spellings = {
        "two lines, deflate first": [("grpc-accept-encoding", "deflate"), ("grpc-accept-encoding", "gzip")],
        "two lines, gzip first": [("grpc-accept-encoding", "gzip"), ("grpc-accept-encoding", "deflate")],
        "three lines, identity last": [("grpc-accept-encoding", "deflate"), ("grpc-accept-encoding", "gzip"),
                                       ("grpc-accept-encoding", "identity")],
        "one line": [("grpc-accept-encoding", "deflate,gzip")],
    }
    with RawConnection(server.port) as raw:
        for spelling, accept in spellings.items():
            for encoding, decompress in (("deflate", zlib.decompress), ("gzip", gzip.decompress)):
                result = _list_response(raw, [("grpc-encoding", encoding)] + accept)
                assert result.headers.get("grpc-encoding") == encoding, (spelling, result)
                [(flags, payload)] = messages_with_flags(result.data)
                assert flags == 1, (spelling, encoding)
                listing = health_pb2.HealthListResponse.FromString(decompress(payload))
                assert "groupd.v1.GroupService" in listing.statuses, (spelling, encoding)
