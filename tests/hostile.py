"""Helpers for the hostile-client tests (test_hostile*.py): an attacking connection, the answer
it must get, and the checks that the server stayed whole: a good client served on another
connection during and after the attack, and resident memory within a bound.

Every wait here is for an event (a frame, a close, a served call), with a deadline only as the
failure bound.
"""
import re
import socket
import threading
import time
import urllib.request

import grpc

import h2raw
import support  # noqa: F401  (generates the stubs and puts them on sys.path)
from grpc.health.v1 import health_pb2, health_pb2_grpc
from groupd.v1 import group_pb2, group_pb2_grpc

# RFC 9113 §7 error codes.
NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR = 0x0, 0x1, 0x2, 0x3
SETTINGS_TIMEOUT, STREAM_CLOSED, FRAME_SIZE_ERROR, REFUSED_STREAM = 0x4, 0x5, 0x6, 0x7
CANCEL, COMPRESSION_ERROR, CONNECT_ERROR, ENHANCE_YOUR_CALM = 0x8, 0x9, 0xA, 0xB

# What an attack may add to the server's resident memory, once answered (KiB).
RSS_BOUND_KB = 64 * 1024


def metrics(groupd) -> dict:
    """The unlabelled series of one scrape of the metrics endpoint (`groupd.metrics_port`), by name."""
    with urllib.request.urlopen(f"http://127.0.0.1:{groupd.metrics_port}/metrics", timeout=10) as response:
        text = response.read().decode()
    values = {}
    for line in text.splitlines():
        match = re.match(r"^([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$", line)
        if match and match.group(2) in (None, "{}"):
            values[match.group(1)] = float(match.group(3))
    return values


def metric(groupd, name) -> float:
    """One unlabelled series from a scrape of the metrics endpoint; fails if the scrape lacks it."""
    values = metrics(groupd)
    assert name in values, f"no {name} in the scrape"
    return values[name]


def node(groupd):
    """The one server process a test attacks and measures: `groupd` itself, or under PostgreSQL
    (a support.GroupdNodes, whose `port` alternates between nodes) its first node."""
    return groupd.nodes[0] if hasattr(groupd, "nodes") else groupd


def open_raw(port, timeout=10.0):
    """A connection written frame by frame (h2raw.FrameClient): preface and SETTINGS sent."""
    return h2raw.FrameClient(port, timeout=timeout)


def expect_goaway(client, code, last_stream_id, timeout=10.0):
    """Reads until the server has closed `client`'s connection; its first GOAWAY must carry
    `code` and `last_stream_id`, and no later one may raise the last stream id (RFC 9113 §6.8).
    Returns the GOAWAYs received, as (last_stream_id, code)."""
    client.read_until(lambda: client.closed, timeout=timeout)
    assert client.goaways, f"no GOAWAY before the connection ended (closed: {client.closed})"
    assert client.goaways[0] == (last_stream_id, code), client.goaways
    assert all(last <= last_stream_id for last, _ in client.goaways), client.goaways
    assert client.closed, f"the connection stayed open after GOAWAY {client.goaways}"
    return client.goaways


def health_check(address, timeout=10):
    with grpc.insecure_channel(address) as channel:
        return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=timeout).status


def assert_alive(groupd):
    """A good grpcio client on a new connection is served (Health/Check answers SERVING)."""
    server = node(groupd)
    assert server.process.poll() is None, f"groupd exited with {server.process.returncode}"
    assert health_check(server.address) == health_pb2.HealthCheckResponse.SERVING


def rss_bounded(groupd, before_kb, bound_kb=RSS_BOUND_KB):
    """The server's resident memory grew by less than `bound_kb` KiB since `before_kb`."""
    after = node(groupd).rss_kb()
    assert after - before_kb < bound_kb, f"RSS grew from {before_kb} to {after} KiB (bound +{bound_kb} KiB)"
    return after


class GoodClient:
    """A well-behaved backend: a grpcio client calling GetGroupsInfo with a valid token in a loop
    on a connection of its own, from a thread, for the length of a `with` block; on leaving it,
    every call must have been served. `served_more(n)` waits until n more calls were served (from
    when it is called). (With a token, so that an attacker holding every unauthenticated call
    of `transport.max_unauthenticated_calls` does not refuse it: health checks share that budget.)"""

    def __init__(self, groupd, call_timeout=10):
        self.address = node(groupd).address
        self.call_timeout = call_timeout
        self.served = 0
        self.failures = []
        self.condition = threading.Condition()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        with grpc.insecure_channel(self.address) as channel:
            stub = group_pb2_grpc.GroupServiceStub(channel)
            metadata = support.admin_md()
            while not self.stop.is_set():
                try:
                    status = stub.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=["any"]), metadata=metadata,
                                                timeout=self.call_timeout)
                    ok = len(status.failures) == 1
                except grpc.RpcError as error:
                    ok, status = False, error
                with self.condition:
                    if ok:
                        self.served += 1
                    else:
                        self.failures.append(status)
                    self.condition.notify_all()

    def served_more(self, count=3, timeout=30):
        """Waits until `count` more calls were served; fails after `timeout` seconds."""
        with self.condition:
            target = self.served + count
            if not self.condition.wait_for(lambda: self.served >= target or self.failures, timeout):
                raise AssertionError(f"the good client got {count} calls served within {timeout} s: "
                                     f"{self.served} of {target}")
            assert not self.failures, f"the good client's calls failed: {self.failures}"

    def __enter__(self):
        self.thread.start()
        self.served_more(1)
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=self.call_timeout + 5)
        if exc[0] is None:
            assert not self.failures, f"the good client's calls failed: {self.failures}"


class Flood:
    """Sends `unit` (bytes) on `client`'s socket over and over from a thread, never reading,
    until the server closes the connection, `stop()` is called, or `max_bytes` are sent. The
    `with` block runs while it floods; `sent` counts the bytes written."""

    def __init__(self, client, unit, max_bytes=256 * 1024 * 1024, batch=64):
        self.client = client
        self.chunk = unit * batch
        self.max_bytes = max_bytes
        self.sent = 0
        self.ended = threading.Event()  # the server closed (a send failed) or max_bytes were sent
        self.halt = threading.Event()
        self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            while not self.halt.is_set() and self.sent < self.max_bytes:
                self.client.sock.sendall(self.chunk)
                self.sent += len(self.chunk)
        except OSError as error:  # the server closed or reset the connection
            self.error = error
        finally:
            self.ended.set()

    def stop(self):
        self.halt.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "the flooding thread did not stop"

    def wait_ended(self, timeout=60):
        """Waits until the flood ended by itself (the server closed, or max_bytes were sent)."""
        assert self.ended.wait(timeout), f"the flood was still running after {timeout} s ({self.sent} bytes)"
        self.thread.join(timeout=5)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()


def read_until_closed(sock, timeout=10.0):
    """Everything a raw socket receives until the peer closes it; fails after `timeout`."""
    received = b""
    deadline = time.monotonic() + timeout
    while True:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return received
        except socket.timeout:
            raise AssertionError(f"the server did not close the connection within {timeout} s") from None
        if not chunk:
            return received
        received += chunk
