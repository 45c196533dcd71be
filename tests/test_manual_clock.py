"""The manual clock (`testing.clock: manual`), which the expiry, mute, retention and rate-limit tests
use instead of sleeping: it cannot be turned on without GROUPD_TEST_CLOCK=1, stands still from the
server's start, and its control endpoint (127.0.0.1 only) refuses what it does not understand.
"""
import http.client
import os
import subprocess

import grpc
import support
from support import Groupd, expect_error, mint_token, uid, wait_for
from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc


def test_manual_clock_is_refused_without_the_variable(tmp_path):
    server = Groupd(tmp_path, manual_clock=True)
    environment = {key: value for key, value in os.environ.items() if key != "GROUPD_TEST_CLOCK"}
    for value in (None, "0", "true"):
        if value is not None:
            environment["GROUPD_TEST_CLOCK"] = value
        checked = subprocess.run([str(support.GROUPD_BIN), "check-config", str(server.config)],
                                 capture_output=True, text=True, timeout=30, env=environment)
        assert checked.returncode != 0
        assert "testing.clock" in checked.stderr and "GROUPD_TEST_CLOCK=1" in checked.stderr, checked.stderr
        served = subprocess.run([str(support.GROUPD_BIN), "serve", "--config", str(server.config)],
                                capture_output=True, text=True, timeout=30, env=environment)
        assert served.returncode != 0
        assert "testing.clock" in served.stderr and "GROUPD_TEST_CLOCK=1" in served.stderr, served.stderr
    # The same file with the variable is a valid configuration.
    environment["GROUPD_TEST_CLOCK"] = "1"
    checked = subprocess.run([str(support.GROUPD_BIN), "check-config", str(server.config)],
                             capture_output=True, text=True, timeout=30, env=environment)
    assert checked.returncode == 0, checked.stderr


def test_clock_stands_still_until_advanced(fresh_groupd):
    server = fresh_groupd(manual_clock=True).start()
    wait_for(lambda: "testing.clock is manual" in server.log.read_text(), "testing.clock is manual")
    start = server.clock_ms()
    # Expiry on the server's clock (which stands at `start`), not the test's wall clock.
    hour = [("authorization", "Bearer " + mint_token(claims={"exp": start // 1000 + 3600}))]
    day = [("authorization", "Bearer " + mint_token(claims={"exp": start // 1000 + 86400}))]
    with grpc.insecure_channel(server.address) as channel:
        stub = group_pb2_grpc.GroupServiceStub(channel)

        def created(metadata):
            return stub.CreateGroup(group_pb2.CreateGroupRequest(
                group_id=uid("g"), type=common_pb2.GROUP_TYPE_WORK, owner_user_id=uid("owner"),
                profile=common_pb2.GroupProfile(name="g")), metadata=metadata, timeout=10).group.create_time

        assert created(hour).ToMilliseconds() == start
        assert created(day).ToMilliseconds() == start
        assert server.advance_clock(seconds=3600, ms=5) == start + 3_600_005
        assert created(day).ToMilliseconds() == start + 3_600_005
        # Token expiry follows the same clock: the one-hour token is past its exp now.
        expect_error(lambda: created(hour), grpc.StatusCode.UNAUTHENTICATED, "TOKEN_EXPIRED")
        assert server.advance_clock(ms=0) == start + 3_600_005
    assert server.clock_ms() == start + 3_600_005


BAD_REQUESTS = [
    ("POST", "/clock/advance", 400),
    ("POST", "/clock/advance?ms=-1", 400),
    ("POST", "/clock/advance?ms=abc", 400),
    ("POST", "/clock/advance?ms=1&ms=2", 400),
    ("POST", f"/clock/advance?ms={10 * 366 * 86_400_000 + 1}", 400),
    ("GET", "/clock/advance?ms=1", 405),
    ("POST", "/clock", 405),
    ("GET", "/metrics", 404),
]


def test_control_endpoint_refuses_what_it_does_not_understand(fresh_groupd):
    server = fresh_groupd(manual_clock=True).start()
    start = server.clock_ms()
    for method, path, status in BAD_REQUESTS:
        connection = http.client.HTTPConnection("127.0.0.1", server.clock_port, timeout=10)
        try:
            connection.request(method, path)
            response = connection.getresponse()
            assert response.status == status, (method, path, response.read())
        finally:
            connection.close()
    assert server.clock_ms() == start  # nothing moved
