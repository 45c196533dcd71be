"""Access log, log level and log format of a real groupd, read from its stderr: one line per call
with method, status, reason, duration, app, operator, peer, request id and the caller's W3C trace
context; failed calls (a bad token, a rate limit, a policy rejection) are always logged, successful
ones sampled; SIGHUP changes the level, the format and the sampling without a restart."""
import json
import re
import shutil
import signal
import socket
import tempfile
from pathlib import Path

import grpc
import pytest

from support import (APP_ID, KEYWORD_POLICY_YAML, OTHER_APP_ID, OTHER_APP_SECRET, Groupd, admin_md, mint_token, new_database,
                     uid, user_md, wait_for)
from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
FIELD = re.compile(r'([a-z_]+)=("(?:[^"\\]|\\.)*"|\S*)')
INFO = "/groupd.v1.GroupService/GetGroupsInfo"
CREATE = "/groupd.v1.GroupService/CreateGroup"


def config_text(server, access_log, log=""):
    """A config for `server`: app-one with a keyword plugin refusing "forbidden" names, app-two with
    an operator bucket of 2 calls that does not refill during the test."""
    return f"""\
listen:
  host: 127.0.0.1
  port: {server.port}
data_dir: {server.data_dir}
{server.store_yaml}access_log: {access_log}
{log}apps:
  - id: {APP_ID}
    secrets:
      - kid: k1
        secret: {server_secret()}
{KEYWORD_POLICY_YAML}  - id: {OTHER_APP_ID}
    secrets:
      - kid: k1
        secret: {OTHER_APP_SECRET}
    rate_limits:
      operator: {{per_second: 0.001, burst: 2}}
"""


def server_secret():
    from support import APP_SECRET
    return APP_SECRET


def access_lines(server):
    """The access-log lines written so far, each as a dict of its fields (text or JSON lines)."""
    lines = []
    for line in server.log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            if entry["label"] == "groupd.access":
                lines.append(entry)
        elif " groupd.access :" in line:
            fields = line.split(" groupd.access :", 1)[1].rsplit(" [access] ", 1)[0]
            entry = {"format": "text", "level": line.split(" ")[1]}
            for key, value in FIELD.findall(fields):
                entry[key] = json.loads(value) if value.startswith('"') else value
            lines.append(entry)
    return lines


def line_of(server, request_id):
    """The one line of `request_id`: access-log lines are written in batches by groupd's log
    writer, just after the call, so the line is waited for."""
    wait_for(lambda: any(line.get("request_id") == request_id for line in access_lines(server)),
             f"the access-log line of {request_id}")
    found = [line for line in access_lines(server) if line.get("request_id") == request_id]
    assert len(found) == 1, (request_id, found, server.log.read_text()[-3000:])
    return found[0]


def info(stub, md, request_id=None, extra=()):
    md = list(md) + ([("x-request-id", request_id)] if request_id else []) + list(extra)
    return stub.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=["nothing"]), metadata=md, timeout=10)


def create(stub, name, md, request_id):
    return stub.CreateGroup(group_pb2.CreateGroupRequest(
        group_id=uid("g"), type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id="owner",
        profile=common_pb2.GroupProfile(name=name)), metadata=list(md) + [("x-request-id", request_id)], timeout=10)


def fails(call, code):
    with pytest.raises(grpc.RpcError) as caught:
        call()
    assert caught.value.code() == code, caught.value


def bad_token_md():
    return [("authorization", "Bearer " + mint_token(secret="not-the-secret-of-app-one-0123456789"))]


@pytest.fixture
def server():
    workdir = Path(tempfile.mkdtemp(prefix="groupd-access-"))
    groupd = Groupd(workdir, database=new_database())
    yield groupd
    groupd.stop()
    shutil.rmtree(workdir, ignore_errors=True)


def test_every_call_gets_a_line_with_its_outcome(server):
    server.config.write_text(config_text(server, "{enabled: true}"))
    server.start()
    with grpc.insecure_channel(server.address) as channel:
        stub = group_pb2_grpc.GroupServiceStub(channel)
        traceparent = f"00-{TRACE_ID}-{PARENT_ID}-01"
        info(stub, admin_md(operator="alice"), "req-ok", [("traceparent", traceparent)])
        fails(lambda: info(stub, bad_token_md(), "req-bad-token"), grpc.StatusCode.UNAUTHENTICATED)
        limited = user_md("bob", app=OTHER_APP_ID, secret=OTHER_APP_SECRET)
        info(stub, limited, "req-limit-1")
        info(stub, limited, "req-limit-2")
        fails(lambda: info(stub, limited, "req-limited"), grpc.StatusCode.RESOURCE_EXHAUSTED)
        fails(lambda: create(stub, "a forbidden name", admin_md(), "req-policy"), grpc.StatusCode.FAILED_PRECONDITION)
        info(stub, admin_md(), "req-bad-trace", [("traceparent", f"00-{'0' * 32}-{PARENT_ID}-01")])
        info(stub, admin_md(), None)
        fails(lambda: channel.unary_unary("/no.such.Service/Method")(b"", timeout=10), grpc.StatusCode.UNIMPLEMENTED)

    # The lines are written in batches, just after the calls: all nine, then what they say.
    wait_for(lambda: len(access_lines(server)) >= 9, "the access-log lines of the nine calls")
    ok = line_of(server, "req-ok")
    assert ok["format"] == "text" and ok["level"] == "info"
    assert (ok["method"], ok["code"], ok["app"], ok["operator"]) == (INFO, "OK", APP_ID, "alice")
    assert "reason" not in ok and "error" not in ok
    assert (ok["trace_id"], ok["parent_id"], ok["trace_flags"]) == (TRACE_ID, PARENT_ID, "01")
    assert re.fullmatch(r"127\.0\.0\.1:\d+", ok["peer"]), ok
    assert re.fullmatch(r"\d+\.\d{3}", ok["duration_ms"]), ok

    bad = line_of(server, "req-bad-token")
    assert (bad["code"], bad["reason"]) == ("UNAUTHENTICATED", "TOKEN_BAD_SIGNATURE")
    assert "app" not in bad and bad["level"] == "notice" and "signature" in bad["error"]

    limited = line_of(server, "req-limited")
    assert (limited["code"], limited["reason"], limited["app"], limited["operator"]) == (
        "RESOURCE_EXHAUSTED", "RATE_LIMITED", OTHER_APP_ID, "bob")

    policy = line_of(server, "req-policy")
    assert (policy["method"], policy["code"], policy["reason"], policy["app"]) == (
        CREATE, "FAILED_PRECONDITION", "POLICY_REJECTED", APP_ID)
    assert "operator" not in policy  # the backend, acting for nobody

    bad_trace = line_of(server, "req-bad-trace")
    assert bad_trace["traceparent_invalid"] == "true" and "trace_id" not in bad_trace

    lines = access_lines(server)
    generated = [line for line in lines if line["method"] == INFO and not line["request_id"].startswith("req-")]
    assert len(generated) == 1 and re.fullmatch(r"[0-9a-f]+-[0-9a-f]+", generated[0]["request_id"]), generated
    unknown = [line for line in lines if line["method"] == "unknown"]
    assert len(unknown) == 1 and unknown[0]["code"] == "UNIMPLEMENTED"
    assert unknown[0]["path"] == "/no.such.Service/Method"
    assert len(lines) == 9, lines


def test_a_bidirectional_call_gets_its_line(server):
    server.config.write_text(config_text(server, "{enabled: true}"))
    server.start()
    path = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
    list_services = b"\x3a\x00"  # ServerReflectionRequest{list_services: ""}
    with grpc.insecure_channel(server.address) as channel:
        call = channel.stream_stream(path)
        responses = list(call(iter([list_services]), metadata=[("x-request-id", "req-reflect")], timeout=10))
    assert len(responses) == 1
    line = line_of(server, "req-reflect")
    assert (line["method"], line["code"]) == (path, "OK"), line


def test_sampling_zero_logs_failures_only(server):
    server.config.write_text(config_text(server, "{enabled: true, sample_rate: 0}"))
    server.start()
    with grpc.insecure_channel(server.address) as channel:
        stub = group_pb2_grpc.GroupServiceStub(channel)
        for i in range(5):
            info(stub, admin_md(), f"req-ok-{i}")
        create(stub, "team", admin_md(), "req-created")
        fails(lambda: info(stub, bad_token_md(), "req-bad-token"), grpc.StatusCode.UNAUTHENTICATED)
        limited = user_md("carol", app=OTHER_APP_ID, secret=OTHER_APP_SECRET)
        info(stub, limited, "req-limit-1")
        info(stub, limited, "req-limit-2")
        fails(lambda: info(stub, limited, "req-limited"), grpc.StatusCode.RESOURCE_EXHAUSTED)
        fails(lambda: create(stub, "a forbidden name", admin_md(), "req-policy"), grpc.StatusCode.FAILED_PRECONDITION)
    # Lines are written in call order: once the last call's line is in, every earlier one is.
    line_of(server, "req-policy")
    lines = access_lines(server)
    assert sorted(line["request_id"] for line in lines) == ["req-bad-token", "req-limited", "req-policy"], lines


def test_access_log_off_by_default(server):
    server.start()
    with grpc.insecure_channel(server.address) as channel:
        stub = group_pb2_grpc.GroupServiceStub(channel)
        info(stub, admin_md(), "req-ok")
        fails(lambda: info(stub, bad_token_md(), "req-bad-token"), grpc.StatusCode.UNAUTHENTICATED)
    assert access_lines(server) == []


def junk_connection(server):
    """A connection that starts like the HTTP/2 preface and breaks it: groupd closes it and logs that
    at debug level."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"PRI * this is not HTTP/2 at all, only close to a preface\r\n\r\n")
        try:
            while sock.recv(4096):
                pass
        except OSError:
            pass


def test_sighup_changes_level_format_and_sampling(server):
    server.config.write_text(config_text(server, "{enabled: true}"))
    server.start()
    with grpc.insecure_channel(server.address) as channel:
        stub = group_pb2_grpc.GroupServiceStub(channel)
        info(stub, admin_md(), "req-before")
        junk_connection(server)
        assert line_of(server, "req-before")["format"] == "text"
        assert "closing connection after nghttp2 error" not in server.log.read_text()

        server.config.write_text(config_text(
            server, "{enabled: true, sample_rate: 0}", log="log:\n  level: debug\n  format: json\n"))
        server.signal(signal.SIGHUP)
        wait_for(lambda: '"msg":"configuration reloaded"' in server.log.read_text(), "the reload, logged as JSON")

        info(stub, admin_md(), "req-after-ok")  # sampled out now
        fails(lambda: info(stub, bad_token_md(), "req-after-bad"), grpc.StatusCode.UNAUTHENTICATED)
        after = line_of(server, "req-after-bad")
        assert "format" not in after and after["level"] == "notice"
        assert after["label"] == "groupd.access" and after["msg"] == "rpc" and "ts" in after
        assert (after["code"], after["reason"]) == ("UNAUTHENTICATED", "TOKEN_BAD_SIGNATURE")
        assert not [line for line in access_lines(server) if line.get("request_id") == "req-after-ok"]

        junk_connection(server)
        wait_for(lambda: "closing connection after nghttp2 error" in server.log.read_text(), "the debug line")
        debug = [json.loads(line) for line in server.log.read_text().splitlines()
                 if line.startswith("{") and "closing connection after nghttp2 error" in line]
        assert debug and debug[0]["level"] == "debug" and debug[0]["label"] == "groupd"

        # And back: info level, text format; the access log off.
        server.config.write_text(config_text(server, "{enabled: false}"))
        server.signal(signal.SIGHUP)
        wait_for(lambda: server.log.read_text().count("configuration reloaded") == 2, "the second reload")
        fails(lambda: info(stub, bad_token_md(), "req-off"), grpc.StatusCode.UNAUTHENTICATED)
        junk_connection(server)
        info(stub, admin_md(), "req-sync")  # served after the junk connection was handled
        assert not [line for line in access_lines(server) if line.get("request_id") == "req-off"]
        assert server.log.read_text().count("closing connection after nghttp2 error") == 1
    assert server.process.poll() is None
