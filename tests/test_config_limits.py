"""Rate limits and the connection limit through a real groupd: RESOURCE_EXHAUSTED with reason
RATE_LIMITED, the bucket's scope and a google.rpc.RetryInfo; per app, per operator and per
operator's writes; `max_connections` makes room by evicting a connection without a call in flight
and closes new connections only when every one has a call in flight."""
import shutil
import tempfile
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from support import (APP_ID, APP_SECRET, OTHER_APP_ID, OTHER_APP_SECRET, Groupd, error_info, mint_token, new_database,
                     wait_for)
from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc
from grpc.health.v1 import health_pb2, health_pb2_grpc


@pytest.fixture
def workdir():
    path = Path(tempfile.mkdtemp(prefix="groupd-limits-"))
    servers = []
    yield path, servers
    for server in servers:
        server.stop()
    shutil.rmtree(path, ignore_errors=True)


def retry_info(error):
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                if detail.type_url.endswith("google.rpc.RetryInfo"):
                    info = error_details_pb2.RetryInfo()
                    detail.Unpack(info)
                    return info
    return None


def md(sub="alice", role="user", app=APP_ID, secret=APP_SECRET):
    return [("authorization", "Bearer " + mint_token(app=app, secret=secret, sub=sub, role=role))]


def read(stub, metadata):
    return stub.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=["none"]), metadata=metadata, timeout=10)


def write(stub, metadata):
    return stub.CreateGroup(group_pb2.CreateGroupRequest(type=common_pb2.GROUP_TYPE_PUBLIC,
                                                         profile=common_pb2.GroupProfile(name="g")),
                            metadata=metadata, timeout=10)


def refused(call, scope):
    with pytest.raises(grpc.RpcError) as caught:
        call()
    error = caught.value
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
    info = error_info(error)
    assert info.reason == "RATE_LIMITED" and info.domain == "groupd", info
    assert info.metadata["scope"] == scope
    retry = retry_info(error)
    assert retry is not None, "no RetryInfo in the details"
    delay = retry.retry_delay.seconds + retry.retry_delay.nanos / 1e9
    assert delay > 0
    return delay


RATES = """    rate_limits:
      operator: {per_second: 0.01, burst: 3}
      operator_writes: {per_second: 0.01, burst: 1}
"""


def test_operator_and_write_limits(workdir):
    path, servers = workdir
    # The limits go on app-one, inserted before app-two's entry.
    server = Groupd(path, database=new_database())
    text = server.config.read_text().replace(f"  - id: {OTHER_APP_ID}\n", RATES + f"  - id: {OTHER_APP_ID}\n", 1)
    server.config.write_text(text)
    servers.append(server.start())
    with grpc.insecure_channel(server.address) as channel:
        stub = group_pb2_grpc.GroupServiceStub(channel)
        alice = md("alice")
        write(stub, alice)
        # One write per 100 s: the second is refused by the write bucket, with its delay.
        delay = refused(lambda: write(stub, alice), "operator_writes")
        assert 90 < delay <= 100
        # Reads still pass until the operator bucket (3, one spent by the write) is empty.
        read(stub, alice)
        read(stub, alice)
        refused(lambda: read(stub, alice), "operator")
        # Other operators, the backend and app-two have their own buckets.
        read(stub, md("bob"))
        read(stub, md("backend", role="admin"))
        read(stub, md("alice", app=OTHER_APP_ID, secret=OTHER_APP_SECRET))
        # Refused calls changed nothing and are not faults of the token.
        with pytest.raises(grpc.RpcError) as caught:
            read(stub, [("authorization", "Bearer bad")])
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_buckets_refill_with_the_server_clock(workdir):
    """On the manual clock the buckets refill only as the clock moves: nothing refills in real time."""
    path, servers = workdir
    server = Groupd(path, database=new_database(), manual_clock=True)
    text = server.config.read_text().replace(f"  - id: {OTHER_APP_ID}\n", RATES + f"  - id: {OTHER_APP_ID}\n", 1)
    server.config.write_text(text)
    servers.append(server.start())
    with grpc.insecure_channel(server.address) as channel:
        stub = group_pb2_grpc.GroupServiceStub(channel)
        alice = md("alice")
        write(stub, alice)
        assert refused(lambda: write(stub, alice), "operator_writes") == pytest.approx(100, abs=0.01)
        server.advance_clock(seconds=99)
        assert refused(lambda: write(stub, alice), "operator_writes") == pytest.approx(1, abs=0.01)
        server.advance_clock(seconds=1)
        write(stub, alice)
        refused(lambda: write(stub, alice), "operator_writes")


def test_app_limit_is_shared_by_every_operator(workdir):
    path, servers = workdir
    server = Groupd(path, database=new_database())
    text = server.config.read_text().replace(
        f"  - id: {OTHER_APP_ID}\n", "    rate_limits: {app: {per_second: 0.01, burst: 2}}\n" + f"  - id: {OTHER_APP_ID}\n", 1)
    server.config.write_text(text)
    servers.append(server.start())
    with grpc.insecure_channel(server.address) as channel:
        stub = group_pb2_grpc.GroupServiceStub(channel)
        read(stub, md("alice"))
        read(stub, md("bob"))
        refused(lambda: read(stub, md("carol")), "app")
        read(stub, md("carol", app=OTHER_APP_ID, secret=OTHER_APP_SECRET))


def test_max_connections(workdir):
    path, servers = workdir
    server = Groupd(path, database=new_database())
    server.config.write_text("max_connections: 2\n" + server.config.read_text())
    servers.append(server.start())
    # Each channel its own connection (grpc shares subchannels between channels otherwise).
    own = [("grpc.use_local_subchannel_pool", 1)]
    channels = [grpc.insecure_channel(server.address, options=own) for _ in range(3)]
    watches = []
    try:
        # Both connections have a call in flight (a Health watch, whose first answer says so).
        for channel in channels[:2]:
            watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(), timeout=60)
            assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
            watches.append(watch)
        with pytest.raises(grpc.RpcError) as caught:
            read(group_pb2_grpc.GroupServiceStub(channels[2]), md())
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        wait_for(lambda: "max_connections reached, each with a call in flight" in server.log.read_text(),
                 "the refusal's log line")
        # The open connections keep working; once one has no call in flight, a new connection
        # takes its place (it is evicted with GOAWAY NO_ERROR).
        read(group_pb2_grpc.GroupServiceStub(channels[0]), md())
        watches[1].cancel()

        def third_served():
            try:
                read(group_pb2_grpc.GroupServiceStub(channels[2]), md())
                return True
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.UNAVAILABLE, error
                return False
        wait_for(third_served, "a new connection served once one had no call in flight")
        assert "evicting a connection without open streams" in server.log.read_text()
    finally:
        for watch in watches:
            watch.cancel()
        for channel in channels:
            channel.close()
