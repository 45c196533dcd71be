"""The process around the server: graceful shutdown on SIGTERM / SIGINT with calls in flight,
configuration errors, and durability across SIGKILL."""
import signal
import socket
import subprocess
import time

import grpc
import pytest

import support
from grpc.health.v1 import health_pb2, health_pb2_grpc
from h2raw import FrameClient, grpc_frame, grpc_headers, grpc_messages

CHECK = "/grpc.health.v1.Health/Check"
DRAIN_TIMEOUT = 10  # drain_timeout_seconds in support.CONFIG_TEMPLATE


def check_request(service="") -> bytes:
    return health_pb2.HealthCheckRequest(service=service).SerializeToString()


def refuses_connections(port) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return False
    except OSError:
        return True


def watch_until_end(call):
    """Reads a Watch stream to its end; returns (statuses seen, final RpcError)."""
    statuses = []
    try:
        for response in call:
            statuses.append(response.status)
    except grpc.RpcError as error:
        return statuses, error
    raise AssertionError(f"Watch ended with OK after {statuses}; expected UNAVAILABLE")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_drains_calls_in_flight_and_exits_0(fresh_groupd, sig):
    server = fresh_groupd().start()
    watch_channel = grpc.insecure_channel(server.address)
    unary_channel = grpc.insecure_channel(server.address)
    client = FrameClient(server.port)
    try:
        # A Watch stream, open and serving.
        watch = health_pb2_grpc.HealthStub(watch_channel).Watch(health_pb2.HealthCheckRequest(), timeout=30)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING

        # Twenty calls the server has certainly accepted: HEADERS and half a message each, then a
        # PING round trip (frames are processed in order, so the ACK means the streams are open).
        body = grpc_frame(check_request())
        half_open = list(range(1, 41, 2))
        for stream_id in half_open:
            client.headers(stream_id, grpc_headers(CHECK))
            client.data(stream_id, body[:4])
        client.ping(b"accepted")
        assert client.read_until(lambda: b"accepted" in client.ping_acks), "no PING ACK"
        assert not any(client.results[s].headers for s in half_open), "answered before the request was complete"

        # ~200 unary calls fired through grpcio right before the signal.
        grpc.channel_ready_future(unary_channel).result(timeout=10)
        stub = health_pb2_grpc.HealthStub(unary_channel)
        futures = [stub.Check.future(health_pb2.HealthCheckRequest(), timeout=20) for _ in range(200)]

        started = time.monotonic()
        server.signal(sig)

        # GOAWAY arrives; the accepted streams are still served once their requests are complete.
        assert client.read_until(lambda: client.goaways, timeout=5), "no GOAWAY after the signal"
        assert all(last >= half_open[-1] for last, _ in client.goaways), client.goaways
        assert all(code == 0 for _, code in client.goaways), client.goaways
        for stream_id in half_open:
            client.data(stream_id, body[4:], end_stream=True)
        client.read_until(lambda: all(client.results[s].ended for s in half_open), timeout=DRAIN_TIMEOUT)
        for stream_id in half_open:
            result = client.results[stream_id]
            assert result.ended and result.http_status == 200 and result.grpc_status == 0, (stream_id, result)
            assert not result.trailers_only, result
            assert len(grpc_messages(result.data)) == 1, result
        # Its calls done, the server closes the connection.
        assert client.read_until(lambda: client.closed, timeout=DRAIN_TIMEOUT), "connection left open after draining"

        # The grpcio calls: each finished OK, or was refused by the GOAWAY before the server took it.
        codes = {}
        for future in futures:
            try:
                future.result()
                code = grpc.StatusCode.OK
            except grpc.RpcError as error:
                code = error.code()
            codes[code] = codes.get(code, 0) + 1
        assert set(codes) <= {grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE}, codes
        assert codes.get(grpc.StatusCode.OK, 0) > 0, codes

        # The Watch stream ends with UNAVAILABLE (after a NOT_SERVING message, if any).
        statuses, error = watch_until_end(watch)
        assert error.code() == grpc.StatusCode.UNAVAILABLE, (error.code(), error.details())
        assert health_pb2.HealthCheckResponse.SERVING not in statuses, statuses

        # The process exits 0 within the drain timeout, and nothing listens any more.
        assert server.wait(timeout=DRAIN_TIMEOUT + 5) == 0, server.log.read_text()[-3000:]
        elapsed = time.monotonic() - started
        assert elapsed < DRAIN_TIMEOUT, f"exit took {elapsed:.1f}s: calls were cut by the drain timeout"
        log = server.log.read_text()
        assert "drain timeout" not in log, log[-3000:]
        # The store, the plugins and the event loops are closed once, after every other service
        # (the server's drain included) has ended, and before the process says it stopped.
        closed = "closed the store, the policy plugins and the event loops"
        assert log.count(closed) == 1, log[-3000:]
        assert log.index(closed) < log.index("] stopped"), log[-3000:]
        assert refuses_connections(server.port)
    finally:
        client.close()
        watch_channel.close()
        unary_channel.close()


def test_requests_in_flight_at_shutdown_are_served_or_refused_explicitly(fresh_groupd):
    """RFC 9113 §6.8 graceful shutdown: the first GOAWAY (last stream id 2^31-1) promises that streams
    already on their way may still be processed, so each must then be either answered or excluded by
    a later GOAWAY with a lower last stream id before the connection closes. Thirty idle connections
    each send a request right after SIGTERM, before they can have read the GOAWAY."""
    server = fresh_groupd().start()
    clients = [FrameClient(server.port) for _ in range(30)]
    try:
        for client in clients:
            client.ping(b"ready!!!")
            assert client.read_until(lambda: b"ready!!!" in client.ping_acks)
        server.signal(signal.SIGTERM)
        for client in clients:
            try:
                client.headers(1, grpc_headers(CHECK))
                client.data(1, grpc_frame(check_request()), end_stream=True)
            except OSError:
                pass  # already closed: judged below like any other unanswered request
        outcomes = {"answered": 0, "refused": 0, "dropped": 0}
        dropped = []
        for client in clients:
            client.read_until(lambda: client.closed, timeout=DRAIN_TIMEOUT)
            result = client._result(1)
            if result.ended and result.grpc_status == 0:
                outcomes["answered"] += 1
            elif any(last < 1 for last, _ in client.goaways):
                outcomes["refused"] += 1
            else:
                outcomes["dropped"] += 1
                dropped.append(client.goaways)
        assert server.wait(timeout=DRAIN_TIMEOUT + 5) == 0
        assert outcomes["dropped"] == 0, (
            f"{outcomes}: connections closed with the request neither answered nor refused; "
            f"GOAWAYs they saw: {dropped[:3]}")
    finally:
        for client in clients:
            client.close()


def test_new_connection_during_drain_is_not_served(fresh_groupd):
    """While one call keeps the server draining, a new connection is refused (listener closed)."""
    server = fresh_groupd().start()
    client = FrameClient(server.port)
    try:
        client.headers(1, grpc_headers(CHECK))
        client.data(1, b"\x00")
        client.ping(b"accepted")
        assert client.read_until(lambda: b"accepted" in client.ping_acks)
        server.signal(signal.SIGTERM)
        assert client.read_until(lambda: client.goaways, timeout=5)
        # The server still answers on this connection after its GOAWAY: it is draining, not gone.
        client.ping(b"draining")
        assert client.read_until(lambda: b"draining" in client.ping_acks, timeout=5)
        assert server.process.poll() is None, "exited with a call in flight"
        assert refuses_connections(server.port), "a new connection was accepted while draining"
        client.data(1, grpc_frame(check_request())[1:], end_stream=True)
        assert client.read_until(lambda: client.results[1].ended, timeout=5)
        assert client.results[1].grpc_status == 0, client.results[1]
        assert server.wait(timeout=DRAIN_TIMEOUT + 5) == 0
    finally:
        client.close()


def test_idle_server_exits_0_on_sigterm_quickly(fresh_groupd):
    server = fresh_groupd().start()
    with grpc.insecure_channel(server.address) as ch:
        assert health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5).status == \
            health_pb2.HealthCheckResponse.SERVING
        started = time.monotonic()
        server.signal(signal.SIGTERM)
        assert server.wait(timeout=DRAIN_TIMEOUT + 5) == 0
    assert time.monotonic() - started < DRAIN_TIMEOUT
    assert refuses_connections(server.port)


def test_watch_of_an_unknown_service_also_ends_on_shutdown(fresh_groupd):
    """Health/Watch for a service the server does not know stays open with SERVICE_UNKNOWN (as the
    health protocol asks); on shutdown it must end with UNAVAILABLE like every other Watch, not hold
    the drain until its timeout."""
    drain = 3
    server = fresh_groupd(drain_timeout_seconds=drain).start()
    with grpc.insecure_channel(server.address) as ch:
        watch = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(service="not.yet.Known"), timeout=30)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
        started = time.monotonic()
        server.signal(signal.SIGTERM)
        _, error = watch_until_end(watch)
        ended_after = time.monotonic() - started
        assert server.wait(timeout=drain + 5) == 0
    assert error.code() == grpc.StatusCode.UNAVAILABLE, (error.code(), error.details())
    assert "drain timeout" not in server.log.read_text(), (
        f"the Watch stream held the drain for {ended_after:.1f}s until the {drain}s drain timeout cut it")


def test_drain_timeout_cuts_calls_that_never_finish(fresh_groupd):
    """A call whose request never completes: the server waits drain_timeout_seconds, then closes
    the connection and still exits 0."""
    drain = 1
    server = fresh_groupd(drain_timeout_seconds=drain).start()
    client = FrameClient(server.port)
    try:
        client.headers(1, grpc_headers(CHECK))
        client.data(1, b"\x00\x00")
        client.ping(b"accepted")
        assert client.read_until(lambda: b"accepted" in client.ping_acks)
        started = time.monotonic()
        server.signal(signal.SIGTERM)
        assert server.wait(timeout=drain + 10) == 0, server.log.read_text()[-3000:]
        elapsed = time.monotonic() - started
        assert drain * 0.9 <= elapsed, f"exited after {elapsed:.2f}s with a call in flight, before the drain timeout"
        assert client.read_until(lambda: client.closed, timeout=2), "connection left open by an exited server?"
        assert not client.results[1].ended
        assert "drain timeout" in server.log.read_text()
    finally:
        client.close()



def test_sigterm_as_soon_as_the_port_accepts_is_a_graceful_stop(fresh_groupd):
    """SIGTERM is trapped before the listener is bound: one sent the moment the port accepts a
    connection (the services may not run yet) still stops groupd gracefully, exit 0, rather than
    killing it. The port is polled without pause so the signal lands as early as it can."""
    for _ in range(10):
        server = fresh_groupd()
        with open(server.log, "ab") as log:
            server.process = subprocess.Popen([str(support.GROUPD_BIN), "serve", "--config", str(server.config)],
                                              stdout=log, stderr=subprocess.STDOUT, env=server.environment)
        while server.process.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
                break
            except OSError:
                continue
        server.signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0, server.log.read_text()[-3000:]
        assert "stopped" in server.log.read_text()

# --- Configuration ---------------------------------------------------------------------------

def valid_config(port=None, data_dir="/tmp/groupd-never-used") -> str:
    return support.CONFIG_TEMPLATE.format(
        port=port or support.free_port(), data_dir=data_dir, max_message_bytes=4194304,
        app=support.APP_ID, secret=support.APP_SECRET,
        other_app=support.OTHER_APP_ID, other_secret=support.OTHER_APP_SECRET)


BROKEN = [
    # (id, how to break a valid config, the key path the error must name)
    ("unknown-key", lambda c: c.replace("        secret: " + support.APP_SECRET,
                                        "        sekret: " + support.APP_SECRET), "apps[0].secrets[0].sekret"),
    ("short-secret", lambda c: c.replace(support.OTHER_APP_SECRET, "short"), "apps[1].secrets[0].secret"),
    ("port-type", lambda c: c.replace("  port: ", "  port: high #"), "listen.port"),
    ("port-range", lambda c: c.replace("  port: ", "  port: 70000 #"), "listen.port"),
    ("max-message", lambda c: c.replace("max_message_bytes: 4194304", "max_message_bytes: 0"), "max_message_bytes"),
    ("durability", lambda c: c.replace("durability: full", "durability: sometimes"), "durability"),
    ("missing-id", lambda c: c.replace("  - id: " + support.APP_ID + "\n", "  - secrets_first: true\n"), "apps[0]"),
]


@pytest.mark.parametrize("break_it,key_path", [(b, k) for _, b, k in BROKEN], ids=[i for i, _, _ in BROKEN])
def test_check_config_names_the_broken_key(tmp_path, break_it, key_path):
    path = tmp_path / "groupd.yaml"
    original = valid_config()
    path.write_text(break_it(original))
    assert path.read_text() != original, "the breaking edit did not apply"
    result = subprocess.run([str(support.GROUPD_BIN), "check-config", str(path)],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode != 0, result.stdout
    assert key_path in result.stderr, result.stderr
    assert str(path) in result.stderr, result.stderr


def test_check_config_accepts_a_valid_file(tmp_path):
    path = tmp_path / "groupd.yaml"
    path.write_text(valid_config())
    result = subprocess.run([str(support.GROUPD_BIN), "check-config", str(path)],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr


def test_check_config_rejects_invalid_yaml(tmp_path):
    path = tmp_path / "groupd.yaml"
    path.write_text("listen: [unclosed\n  port: 1\n")
    result = subprocess.run([str(support.GROUPD_BIN), "check-config", str(path)],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert str(path) in result.stderr, result.stderr


def test_serve_with_a_broken_config_exits_non_zero_and_never_listens(tmp_path):
    port = support.free_port()
    path = tmp_path / "groupd.yaml"
    path.write_text(valid_config(port=port, data_dir=tmp_path / "data").replace(support.APP_SECRET, "too-short"))
    process = subprocess.Popen([str(support.GROUPD_BIN), "serve", "--config", str(path)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    listened = False

    def exited():
        # Probes the port at each poll until the process is gone (its exit is the event waited for).
        nonlocal listened
        listened = listened or not refuses_connections(port)
        return process.poll() is not None

    try:
        support.wait_for(exited, "groupd serve to exit on a broken config", timeout=15)
    except AssertionError:
        process.kill()
        process.wait()
        pytest.fail("groupd serve kept running with a broken config")
    _, stderr = process.communicate()
    assert process.returncode != 0
    assert not listened, "groupd listened before rejecting its config"
    assert "apps[0].secrets[0].secret" in stderr, stderr
    assert not (tmp_path / "data").exists(), "groupd created its data directory with a broken config"


# --- Durability ------------------------------------------------------------------------------

def test_group_acknowledged_before_sigkill_is_there_after_restart(fresh_groupd):
    from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc

    server = fresh_groupd().start()
    md = support.admin_md()
    request = group_pb2.CreateGroupRequest(
        group_id="durable-1", type=common_pb2.GROUP_TYPE_PUBLIC,
        profile=common_pb2.GroupProfile(name="Durable", introduction="survives SIGKILL"), owner_user_id="owner-1")
    with grpc.insecure_channel(server.address) as ch:
        created = group_pb2_grpc.GroupServiceStub(ch).CreateGroup(request, metadata=md, timeout=10)
    assert created.group.group_id == "durable-1"

    server.process.kill()  # SIGKILL right after the acknowledgement: no drain, no store close
    server.process.wait(timeout=10)

    # The same store: the same work directory's data_dir (SQLite), the same database (PostgreSQL).
    restarted = fresh_groupd(database=server.database).start()
    assert restarted.store_location == server.store_location
    with grpc.insecure_channel(restarted.address) as ch:
        response = group_pb2_grpc.GroupServiceStub(ch).GetGroupsInfo(
            group_pb2.GetGroupsInfoRequest(group_ids=["durable-1"]), metadata=md, timeout=10)
    assert [g.group_id for g in response.groups] == ["durable-1"], response
    group = response.groups[0]
    assert group.profile.name == "Durable" and group.profile.introduction == "survives SIGKILL"
    assert group.owner_user_id == "owner-1"
    assert group.type == common_pb2.GROUP_TYPE_PUBLIC
