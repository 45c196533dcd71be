"""A raw HTTP/2 client (python-h2) for what stock gRPC clients never send: split frames,
bad prefixes, oversized headers, broken HTTP/2."""
import socket
import struct

import h2.config
import h2.connection
import h2.events


def grpc_frame(payload: bytes, compressed: bool = False) -> bytes:
    return struct.pack(">BI", 1 if compressed else 0, len(payload)) + payload


class RawResult:
    def __init__(self):
        self.headers = {}
        self.data = b""
        self.trailers = {}
        self.reset_code = None
        self.connection_closed = False
        self.goaway = None

    @property
    def grpc_status(self):
        source = self.trailers or self.headers
        value = source.get("grpc-status")
        return int(value) if value is not None else None

    @property
    def grpc_message(self):
        return (self.trailers or self.headers).get("grpc-message")


class RawConnection:
    def __init__(self, port: int, timeout: float = 5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.flush()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def close(self):
        self.sock.close()

    def request(self, path, chunks=(), headers=None, end_stream=True, method="POST",
                content_type="application/grpc", wait=True):
        """Sends a request whose body goes out as one DATA frame per chunk; returns the response."""
        stream_id = self.conn.get_next_available_stream_id()
        request_headers = [(":method", method), (":scheme", "http"), (":path", path),
                           (":authority", "127.0.0.1"), ("te", "trailers")]
        if content_type is not None:
            request_headers.append(("content-type", content_type))
        request_headers += list(headers or [])
        chunks = list(chunks)
        self.conn.send_headers(stream_id, request_headers, end_stream=end_stream and not chunks)
        for index, chunk in enumerate(chunks):
            self.conn.send_data(stream_id, chunk, end_stream=end_stream and index == len(chunks) - 1)
            self.flush()
        self.flush()
        if not wait:
            return stream_id
        return self.read_response(stream_id)

    def read_response(self, stream_id):
        result = RawResult()
        while True:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                raise AssertionError("no complete response before the socket timeout")
            if not data:
                result.connection_closed = True
                return result
            for event in self.conn.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived) and event.stream_id == stream_id:
                    result.headers = dict(event.headers)
                    if event.stream_ended:
                        pass
                elif isinstance(event, h2.events.DataReceived) and event.stream_id == stream_id:
                    result.data += event.data
                    self.conn.acknowledge_received_data(event.flow_controlled_length, stream_id)
                elif isinstance(event, h2.events.TrailersReceived) and event.stream_id == stream_id:
                    result.trailers = dict(event.headers)
                elif isinstance(event, h2.events.StreamReset) and event.stream_id == stream_id:
                    result.reset_code = event.error_code
                    if result.headers:
                        return result
                elif isinstance(event, h2.events.StreamEnded) and event.stream_id == stream_id:
                    self.flush()
                    return result
                elif isinstance(event, h2.events.ConnectionTerminated):
                    result.goaway = event.error_code
            self.flush()


def send_raw_bytes(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    """Sends bytes on a fresh TCP connection and returns everything read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        received = b""
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += chunk
        except (socket.timeout, ConnectionResetError):
            pass
        return received
