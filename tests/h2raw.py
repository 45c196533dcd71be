"""Raw HTTP/2 clients for what stock gRPC clients never send: split frames, bad prefixes,
oversized headers, broken HTTP/2.

- `RawConnection` drives python-h2 (a correct HTTP/2 client) and sends whatever gRPC framing
  the test wants inside it.
- `FrameClient` writes frames byte by byte (HPACK from the `hpack` package), for what python-h2
  refuses to send (DATA on stream 0, HEADERS on an even stream id) and for connections that must
  keep going after a GOAWAY (python-h2 closes its state machine on the first GOAWAY).
"""
import socket
import struct
import time

import h2.config
import h2.connection
import h2.events
import h2.settings
import hpack

CLIENT_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# Frame types and flags (RFC 9113 §6).
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
FLAG_END_STREAM = 0x1
FLAG_ACK = 0x1
FLAG_END_HEADERS = 0x4
FLAG_PADDED = 0x8
FLAG_PRIORITY = 0x20

# Error codes.
NO_ERROR = 0
PROTOCOL_ERROR = 1
REFUSED_STREAM = 7


def grpc_frame(payload: bytes, compressed: bool = False) -> bytes:
    """A gRPC length-prefixed message: flags byte, 4-byte big-endian length, payload."""
    return struct.pack(">BI", 1 if compressed else 0, len(payload)) + payload


def grpc_messages(data: bytes):
    """Splits a response body into its gRPC messages (payloads only)."""
    messages = []
    while data:
        assert len(data) >= 5, f"truncated gRPC prefix in response body {data!r}"
        flags, length = struct.unpack(">BI", data[:5])
        assert flags == 0, f"response message flags {flags}"
        assert len(data) >= 5 + length, "truncated gRPC message in response body"
        messages.append(data[5:5 + length])
        data = data[5 + length:]
    return messages


def grpc_headers(path, authority="127.0.0.1", method="POST", content_type="application/grpc", extra=()):
    headers = [(":method", method), (":scheme", "http"), (":path", path), (":authority", authority), ("te", "trailers")]
    if content_type is not None:
        headers.append(("content-type", content_type))
    return headers + list(extra)


class RawResult:
    """One response: headers, body, trailers and how the stream ended."""

    def __init__(self):
        self.headers = {}
        self.data = b""
        self.trailers = {}
        self.ended = False
        self.reset_code = None
        self.connection_closed = False
        self.goaway = None

    @property
    def trailers_only(self):
        """True for a Trailers-Only response: grpc-status in the one HEADERS frame, no DATA."""
        return "grpc-status" in self.headers and not self.trailers and not self.data

    @property
    def grpc_status(self):
        source = self.trailers or self.headers
        value = source.get("grpc-status")
        return int(value) if value is not None else None

    @property
    def grpc_message(self):
        return (self.trailers or self.headers).get("grpc-message")

    @property
    def http_status(self):
        value = self.headers.get(":status")
        return int(value) if value is not None else None

    @property
    def messages(self):
        return grpc_messages(self.data)

    def __repr__(self):
        return (f"RawResult(headers={self.headers}, data={self.data[:64]!r}, trailers={self.trailers}, "
                f"reset={self.reset_code}, closed={self.connection_closed}, goaway={self.goaway})")


class RawConnection:
    """A python-h2 client connection. Events are kept per stream, so responses on several
    streams can be read in any order."""

    def __init__(self, port: int, timeout: float = 5.0, initial_window_size=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.conn = h2.connection.H2Connection(
            config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.results = {}
        self.closed = False
        self.goaway = None
        self.ping_acks = []
        self.flush()
        if initial_window_size is not None:
            # A small receive window: the server must split its responses and wait for
            # WINDOW_UPDATE. The PING round trip makes sure the server has acknowledged it.
            self.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: initial_window_size})
            self.flush()
            assert self.ping(b"settings"), "no PING ACK after SETTINGS"

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _result(self, stream_id) -> RawResult:
        return self.results.setdefault(stream_id, RawResult())

    def pump(self):
        """Reads once from the socket and records every event; False when the peer closed."""
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            data = b""
        if not data:
            self.closed = True
            for result in self.results.values():
                result.connection_closed = True
            return False
        for event in self.conn.receive_data(data):
            stream_id = getattr(event, "stream_id", None)
            if isinstance(event, h2.events.ResponseReceived):
                self._result(stream_id).headers = dict(event.headers)
            elif isinstance(event, h2.events.DataReceived):
                self._result(stream_id).data += event.data
                self.conn.acknowledge_received_data(event.flow_controlled_length, stream_id)
            elif isinstance(event, h2.events.TrailersReceived):
                self._result(stream_id).trailers = dict(event.headers)
            elif isinstance(event, h2.events.StreamReset):
                self._result(stream_id).reset_code = event.error_code
            elif isinstance(event, h2.events.StreamEnded):
                self._result(stream_id).ended = True
            elif isinstance(event, h2.events.PingAckReceived):
                self.ping_acks.append(event.ping_data)
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.goaway = event.error_code
                for result in self.results.values():
                    result.goaway = event.error_code
        self.flush()
        return True

    def start_request(self, path, chunks=(), headers=None, end_stream=True, method="POST",
                      content_type="application/grpc"):
        """Sends a request whose body goes out as one DATA frame per chunk; returns its stream id."""
        stream_id = self.conn.get_next_available_stream_id()
        self.results[stream_id] = RawResult()
        chunks = list(chunks)
        self.conn.send_headers(stream_id, grpc_headers(path, method=method, content_type=content_type, extra=headers or ()),
                               end_stream=end_stream and not chunks)
        self.flush()
        for index, chunk in enumerate(chunks):
            self.send_data(stream_id, chunk, end_stream=end_stream and index == len(chunks) - 1)
        return stream_id

    def send_data(self, stream_id, chunk, end_stream=False):
        self.conn.send_data(stream_id, chunk, end_stream=end_stream)
        self.flush()

    def end_stream(self, stream_id):
        self.conn.end_stream(stream_id)
        self.flush()

    def request(self, path, chunks=(), headers=None, end_stream=True, method="POST",
                content_type="application/grpc", wait=True):
        """Sends a request and, unless `wait` is False, returns its response."""
        stream_id = self.start_request(path, chunks, headers, end_stream, method, content_type)
        if not wait:
            return stream_id
        return self.read_response(stream_id)

    def read_response(self, stream_id, timeout=None):
        """Reads until the stream ended (END_STREAM or RST_STREAM) or the connection closed."""
        result = self._result(stream_id)
        deadline = time.monotonic() + (timeout or self.sock.gettimeout() or 5.0)
        while not (result.ended or result.reset_code is not None or self.closed):
            if time.monotonic() > deadline:
                raise AssertionError(f"no complete response on stream {stream_id} in time: {result}")
            try:
                self.pump()
            except socket.timeout:
                raise AssertionError(f"no complete response on stream {stream_id} before the socket timeout: {result}")
        return result

    def read_for(self, seconds):
        """Reads whatever arrives during `seconds` (e.g. an RST_STREAM after a response)."""
        previous = self.sock.gettimeout()
        deadline = time.monotonic() + seconds
        try:
            while not self.closed and time.monotonic() < deadline:
                self.sock.settimeout(max(0.01, deadline - time.monotonic()))
                try:
                    self.pump()
                except socket.timeout:
                    pass
        finally:
            self.sock.settimeout(previous)

    def ping(self, payload=b"groupd!!", timeout=5.0):
        """Sends PING and returns True once its ACK with the same payload is in."""
        self.conn.ping(payload)
        self.flush()
        deadline = time.monotonic() + timeout
        while payload not in self.ping_acks:
            if self.closed or time.monotonic() > deadline:
                return False
            self.pump()
        return True


def send_raw_bytes(port: int, data: bytes, timeout: float = 5.0):
    """Sends bytes on a fresh TCP connection; returns (everything read, whether the server closed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        received = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                return received, True
            except socket.timeout:
                break
            if not chunk:
                return received, True
            received += chunk
        return received, False


def parse_frames(data: bytes):
    """Splits bytes into (type, flags, stream_id, payload) frames; returns (frames, leftover)."""
    frames = []
    while len(data) >= 9:
        length = int.from_bytes(data[:3], "big")
        if len(data) < 9 + length:
            break
        ftype, flags, stream_id = data[3], data[4], int.from_bytes(data[5:9], "big") & 0x7FFFFFFF
        frames.append((ftype, flags, stream_id, data[9:9 + length]))
        data = data[9 + length:]
    return frames, data


def frame(ftype: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + stream_id.to_bytes(4, "big") + payload


class FrameClient:
    """HTTP/2 written frame by frame. Answers SETTINGS with an ACK; everything else is the test's."""

    def __init__(self, port: int, timeout: float = 5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()
        self.buffer = b""
        self.closed = False
        self.goaways = []  # (last_stream_id, error_code)
        self.goaway_debug = []  # each GOAWAY's debug data, in the same order
        self.results = {}
        self.ping_acks = []
        # What the server lets us send (RFC 9113 §6.9): the connection window and each stream's.
        self.peer_initial_window = 65535
        self.send_windows = {0: 65535}
        self.send(CLIENT_PREFACE + frame(SETTINGS, 0, 0))

    def send(self, data: bytes):
        self.sock.sendall(data)

    def _reply(self, data: bytes):
        """Sends a frame the protocol asks for (ACK, WINDOW_UPDATE); the peer may have closed already."""
        try:
            self.sock.sendall(data)
        except OSError:
            pass

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def headers(self, stream_id, headers, end_stream=False):
        block = self.encoder.encode(headers)
        self.send(frame(HEADERS, FLAG_END_HEADERS | (FLAG_END_STREAM if end_stream else 0), stream_id, block))
        self.results.setdefault(stream_id, RawResult())

    def data(self, stream_id, payload, end_stream=False):
        self.send(frame(DATA, FLAG_END_STREAM if end_stream else 0, stream_id, payload))

    def send_window(self, stream_id):
        return self.send_windows.setdefault(stream_id, self.peer_initial_window)

    def send_data_frames(self, stream_id, frames, timeout=10.0):
        """Sends DATA frames (whole frames as bytes) as fast as the server's flow-control windows
        allow, waiting for WINDOW_UPDATE when they are spent. Fails if the server stops granting."""
        deadline = time.monotonic() + timeout
        index = 0
        while index < len(frames):
            batch = []
            while index < len(frames):
                size = int.from_bytes(frames[index][:3], "big")  # padding and pad length count too
                if size > min(self.send_window(0), self.send_window(stream_id)):
                    break
                self.send_windows[0] -= size
                self.send_windows[stream_id] -= size
                batch.append(frames[index])
                index += 1
            if batch:
                self.send(b"".join(batch))
                continue
            if not self.read_until(lambda: int.from_bytes(frames[index][:3], "big")
                                   <= min(self.send_window(0), self.send_window(stream_id)),
                                   timeout=max(0.0, deadline - time.monotonic())):
                raise AssertionError(
                    f"flow control stalled after {index} of {len(frames)} DATA frames: connection window "
                    f"{self.send_window(0)}, stream window {self.send_window(stream_id)}")

    def ping(self, payload=b"pingpong"):
        self.send(frame(PING, 0, 0, payload))

    def _result(self, stream_id):
        return self.results.setdefault(stream_id, RawResult())

    def _handle(self, ftype, flags, stream_id, payload):
        if ftype == SETTINGS and not flags & FLAG_ACK:
            for offset in range(0, len(payload) - 5, 6):
                setting, value = struct.unpack(">HI", payload[offset:offset + 6])
                if setting == 0x4:  # SETTINGS_INITIAL_WINDOW_SIZE: applies to every stream's window
                    delta = value - self.peer_initial_window
                    self.peer_initial_window = value
                    for sid in self.send_windows:
                        if sid:
                            self.send_windows[sid] += delta
            self._reply(frame(SETTINGS, FLAG_ACK, 0))
        elif ftype == WINDOW_UPDATE:
            increment = struct.unpack(">I", payload[:4])[0] & 0x7FFFFFFF
            self.send_windows[stream_id] = self.send_window(stream_id) + increment
        elif ftype == PING and flags & FLAG_ACK:
            self.ping_acks.append(payload)
        elif ftype == GOAWAY:
            last, code = struct.unpack(">II", payload[:8])
            self.goaways.append((last & 0x7FFFFFFF, code))
            self.goaway_debug.append(payload[8:])
        elif ftype == HEADERS:
            if flags & FLAG_PADDED:
                pad = payload[0]
                payload = payload[1:len(payload) - pad]
            if flags & FLAG_PRIORITY:
                payload = payload[5:]
            result = self._result(stream_id)
            fields = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
                      for k, v in self.decoder.decode(payload)}
            if result.headers:
                result.trailers = fields
            else:
                result.headers = fields
            if flags & FLAG_END_STREAM:
                result.ended = True
        elif ftype == DATA:
            result = self._result(stream_id)
            if flags & FLAG_PADDED:
                payload = payload[1:len(payload) - payload[0]]
            result.data += payload
            if payload:  # give the window back at once (the stream's only while it is open)
                increment = len(payload).to_bytes(4, "big")
                updates = frame(WINDOW_UPDATE, 0, 0, increment)
                if not flags & FLAG_END_STREAM:
                    updates += frame(WINDOW_UPDATE, 0, stream_id, increment)
                self._reply(updates)
            if flags & FLAG_END_STREAM:
                result.ended = True
        elif ftype == RST_STREAM:
            self._result(stream_id).reset_code = struct.unpack(">I", payload[:4])[0]

    def pump(self):
        """Reads once and handles every complete frame; False when the peer closed."""
        try:
            data = self.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        if not data:
            self.closed = True
            return False
        frames, self.buffer = parse_frames(self.buffer + data)
        for f in frames:
            self._handle(*f)
        return True

    def read_until(self, condition, timeout=30.0):
        """Reads until condition() holds or the connection closes; returns condition(). The
        timeout only bounds a failing wait (no caller waits for something not to happen), so it
        is long enough for a loaded 2-core machine."""
        deadline = time.monotonic() + timeout
        previous = self.sock.gettimeout()
        try:
            while not condition() and not self.closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self.sock.settimeout(remaining)
                try:
                    self.pump()
                except socket.timeout:
                    break
        finally:
            self.sock.settimeout(previous)
        return condition()
