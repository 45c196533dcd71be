#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into Tests/Fuzz/Corpus/<target>/ (committed; inputs
that are not printable text as base64 `<name>.b64`, see corpus.py).

Real, valid inputs for each target, in the input format its source file documents:
framed gRPC streams, every method's request and response encoded from Protos/, HTTP/2
client conversations written with python-h2, signed tokens, configurations, plugin scripts.
Run again after a change of Protos/ or of an input format: `python3 Tests/Fuzz/make_seeds.py`.
Needs protoc, python's protobuf and h2 (scripts/install-deps.sh installs them).
"""
import base64
import hashlib
import hmac
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "Tests" / "Fuzz" / "Corpus"


def write(target, name, data):
    # Printable text as it is, anything else as <name>.b64 (corpus.py: the repository holds text only).
    corpus.store(CORPUS / target, name, data)


def frame(message, compressed=False):
    return bytes([1 if compressed else 0]) + struct.pack(">I", len(message)) + message


# MARK: FuzzDeframer: [chunking seed][limit index][stream]; limits [0, 1, 16, 255, 1024, 4 MiB]

def deframer_seeds():
    two = frame(b"hello") + frame(b"\x08\x96\x01" * 20)
    write("FuzzDeframer", "two-messages", bytes([0, 5]) + two)
    write("FuzzDeframer", "two-messages-chunked", bytes([3, 5]) + two)
    write("FuzzDeframer", "compressed-and-empty", bytes([7, 4]) + frame(b"\x1f\x8b" + b"x" * 30, True) + frame(b""))
    write("FuzzDeframer", "partial-tail", bytes([2, 4]) + frame(b"abc") + frame(b"defghij")[:6])
    write("FuzzDeframer", "over-limit", bytes([1, 2]) + frame(b"x" * 17))
    write("FuzzDeframer", "bad-flags", bytes([0, 5]) + b"\x02" + struct.pack(">I", 1) + b"x")


# MARK: FuzzProtoDecode: [2 × method index (+1 for the response)][message]; FuzzJSON: [the same][JSON]

def descriptor_pool():
    from google.protobuf import descriptor_pb2, descriptor_pool as pool_module
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory) / "set.pb"
        protos = sorted(str(p.relative_to(ROOT / "Protos")) for p in (ROOT / "Protos").rglob("*.proto"))
        subprocess.run(["protoc", f"-I{ROOT / 'Protos'}", "-I/usr/include", "--include_imports",
                        f"--descriptor_set_out={out}", *protos], check=True, cwd=ROOT / "Protos")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = pool_module.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    return pool


def fill(message, depth=0):
    """Sets every field of `message` to a plausible value (nested messages two levels deep)."""
    from google.protobuf.descriptor import FieldDescriptor as F
    for field in message.DESCRIPTOR.fields:
        if field.message_type and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.message_type:
                if depth < 2:
                    fill(getattr(message, field.name)["key"], depth + 1)
            else:
                getattr(message, field.name)["key"] = sample(value_field)
            continue
        repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == F.LABEL_REPEATED
        if field.type == F.TYPE_MESSAGE:
            if depth >= 2:
                continue
            if repeated:
                for _ in range(2):
                    fill(getattr(message, field.name).add(), depth + 1)
            else:
                fill(getattr(message, field.name), depth + 1)
        elif repeated:
            getattr(message, field.name).extend([sample(field), sample(field)])
        elif field.containing_oneof is None or field.containing_oneof.fields[0] is field:
            setattr(message, field.name, sample(field))
    return message


def sample(field):
    from google.protobuf.descriptor import FieldDescriptor as F
    if field.type == F.TYPE_STRING:
        return "fuzz-" + field.name
    if field.type == F.TYPE_BYTES:
        return b"\x00\x01\xfe\xff"
    if field.type == F.TYPE_BOOL:
        return True
    if field.type == F.TYPE_ENUM:
        values = field.enum_type.values
        return values[1].number if len(values) > 1 else values[0].number
    if field.type in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
        return 1.5
    if field.type in (F.TYPE_SINT32, F.TYPE_SINT64, F.TYPE_SFIXED32, F.TYPE_SFIXED64, F.TYPE_INT32, F.TYPE_INT64):
        return -7 if field.type in (F.TYPE_SINT32, F.TYPE_SINT64) else 1234
    return 42


def proto_seeds():
    from google.protobuf import json_format, message_factory
    pool = descriptor_pool()
    # The order of GroupAPI.allMethods (Sources/GroupAPI/Generated/AllServices.swift).
    services = ["groupd.v1.ApplicationService", "groupd.v1.EventService", "groupd.v1.GroupService",
                "groupd.v1.MemberService", "groupd.v1.MessageService", "grpc.health.v1.Health",
                "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"]
    swift = (ROOT / "Sources/GroupAPI/Generated/AllServices.swift").read_text()
    listed = re.findall(r"^\s+\+?\s*(\w+)\.allMethods$", swift.split("allServiceNames")[0], re.M)
    assert len(listed) == len(services), f"AllServices.swift lists {len(listed)} services, expected {len(services)}"
    index = 0
    for service_name in services:
        service = pool.FindServiceByName(service_name)
        for method in service.methods:
            for offset, descriptor in ((0, method.input_type), (1, method.output_type)):
                cls = message_factory.GetMessageClass(descriptor)
                base = f"{service.name}-{method.name}-{'request' if offset == 0 else 'response'}"
                write("FuzzProtoDecode", base + "-full", bytes([2 * index + offset]) + fill(cls()).SerializeToString())
                write("FuzzProtoDecode", base + "-empty", bytes([2 * index + offset]))
                # FuzzJSON: the same types as proto3 JSON (what a Connect call's body holds).
                full = json_format.MessageToJson(fill(cls()), indent=None)
                write("FuzzJSON", base + "-full", bytes([2 * index + offset]) + full.encode())
                write("FuzzJSON", base + "-empty", bytes([2 * index + offset]) + b"{}")
            index += 1
    assert index < 128, "a method index must fit in the input's first byte"


# MARK: FuzzHTTP2: [chunking seed | 0x80 to advance the clock][client bytes]

def h2_conversation(calls, extra=None):
    import h2.config
    import h2.connection
    connection = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
    connection.initiate_connection()
    for path, messages, headers in calls:
        stream = connection.get_next_available_stream_id()
        connection.send_headers(stream, [(":method", "POST"), (":scheme", "http"), (":path", path),
                                         (":authority", "localhost"), ("content-type", "application/grpc"),
                                         ("te", "trailers"), *headers])
        body = b"".join(frame(m) for m in messages)
        connection.send_data(stream, body, end_stream=True)
    if extra:
        extra(connection)
    return connection.data_to_send()


def http2_seeds():
    unary = h2_conversation([("/fuzz.Echo/Inline", [b"ping"], [])])
    write("FuzzHTTP2", "inline-unary", b"\x00" + unary)
    write("FuzzHTTP2", "inline-unary-chunked", b"\x05" + unary)
    write("FuzzHTTP2", "async-unary-timeout", b"\x80" + h2_conversation([("/fuzz.Echo/Unary", [b"x" * 40], [("grpc-timeout", "2S")])]))
    write("FuzzHTTP2", "server-stream", b"\x00" + h2_conversation([("/fuzz.Echo/Stream", [b"abc"], [])]))
    write("FuzzHTTP2", "bidi-two-messages", b"\x0b" + h2_conversation([("/fuzz.Echo/Bidi", [b"one", b"two"], [("x-user", "alice")])]))
    write("FuzzHTTP2", "several-calls", b"\x00" + h2_conversation([
        ("/fuzz.Echo/Inline", [b"a"], []), ("/fuzz.Echo/Fail", [b"b"], []), ("/fuzz.Echo/Missing", [b"c"], []),
        ("/fuzz.Echo/Unary", [b"d"], [("grpc-encoding", "gzip")])]))

    def reset_and_ping(connection):
        connection.ping(b"12345678")
        connection.increment_flow_control_window(65535)
        stream = connection.get_next_available_stream_id()
        connection.send_headers(stream, [(":method", "POST"), (":scheme", "http"), (":path", "/fuzz.Echo/Bidi"),
                                         (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers")])
        connection.send_data(stream, frame(b"half"))
        connection.reset_stream(stream)
        connection.close_connection()
    write("FuzzHTTP2", "reset-ping-goaway", b"\x03" + h2_conversation([], reset_and_ping))
    write("FuzzHTTP2", "over-limit-message", b"\x00" + h2_conversation([("/fuzz.Echo/Inline", [b"z" * 2000], [])]))
    write("FuzzHTTP2", "preface-only", b"\x00" + b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")


# MARK: FuzzHTTP1: [chunking seed | 0x80 to advance the clock][client bytes]

def http1_request(path, body, content_type="application/proto", fields=(), chunked=False, version="HTTP/1.1"):
    lines = [f"POST {path} {version}", "Host: localhost", f"Content-Type: {content_type}", *fields]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
        payload = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:3], body[3:]) if part) + b"0\r\n\r\n"
    else:
        lines.append(f"Content-Length: {len(body)}")
        payload = body
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


def http1_seeds():
    unary = http1_request("/fuzz.Echo/Inline", b"ping")
    write("FuzzHTTP1", "inline-unary", b"\x00" + unary)
    write("FuzzHTTP1", "pipelined-chunked", b"\x07" + unary + http1_request("/fuzz.Echo/Unary", b"pong!", chunked=True)
          + b"GET /fuzz.Echo/Inline HTTP/1.1\r\nHost: localhost\r\n\r\n")
    write("FuzzHTTP1", "server-stream", b"\x00" + http1_request("/fuzz.Echo/Stream", frame(b"abc"), "application/connect+proto"))
    write("FuzzHTTP1", "stream-http10", b"\x00" + http1_request("/fuzz.Echo/Stream", frame(b"abc"), "application/connect+proto",
                                                                 fields=["Connection: keep-alive"], version="HTTP/1.0"))
    write("FuzzHTTP1", "expect-continue-timeout", b"\x80" + http1_request(
        "/fuzz.Echo/Unary", b"late", fields=["Expect: 100-continue", "Connect-Timeout-Ms: 1500"])[:-4])
    write("FuzzHTTP1", "failing-close", b"\x00" + http1_request("/fuzz.Echo/Fail", b"x", fields=["Connection: close"]))
    write("FuzzHTTP1", "smuggling", b"\x00" + b"POST /fuzz.Echo/Inline HTTP/1.1\r\nContent-Length: 3\r\n"
          b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    write("FuzzHTTP1", "trailers-and-extensions", b"\x02" + b"POST /fuzz.Echo/Inline HTTP/1.1\r\nContent-Type: application/proto\r\n"
          b"Transfer-Encoding: chunked\r\n\r\n2;a=b\r\nhi\r\n0\r\nX-Sum: 1\r\n\r\n")


# MARK: FuzzToken: [mode][authorization][\0 x-operator-id], or [mode | 1][header JSON]\n[payload JSON][\0 x-operator-id]

SECRETS = {"k1": "fuzz-secret-one-0123456789abcdef-0123456789", "k2": "fuzz-secret-two-0123456789abcdef-0123456789"}
FAR_FUTURE = 4102444800  # 2100-01-01


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token(header, payload, secret):
    signing_input = b64url(json.dumps(header, separators=(",", ":")).encode()) + "." + b64url(
        json.dumps(payload, separators=(",", ":")).encode())
    signature = hmac.new(secret.encode(), signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + b64url(signature)


def token_seeds():
    user = {"app": "fuzz", "sub": "alice", "role": "user", "exp": FAR_FUTURE}
    admin = {"app": "fuzz", "sub": "backend", "role": "admin", "exp": FAR_FUTURE, "nbf": 1}
    k1 = {"alg": "HS256", "typ": "JWT", "kid": "k1"}
    good = token(k1, user, SECRETS["k1"])
    write("FuzzToken", "user-k1", b"\x00Bearer " + good.encode())
    write("FuzzToken", "user-no-kid-k2", b"\x00Bearer " + token({"alg": "HS256", "typ": "JWT"}, user, SECRETS["k2"]).encode())
    write("FuzzToken", "admin-operator", b"\x00bearer  " + token(k1, admin, SECRETS["k1"]).encode() + b"\x00alice")
    write("FuzzToken", "user-operator-self", b"\x00Bearer " + good.encode() + b"\x00alice")
    write("FuzzToken", "expired", b"\x00Bearer " + token(k1, dict(user, exp=1), SECRETS["k1"]).encode())
    write("FuzzToken", "bad-signature", b"\x00Bearer " + good[:-2].encode() + b"AA")
    padded = good.split(".")
    padded[2] = base64.b64encode(base64.urlsafe_b64decode(padded[2] + "==")).decode()
    write("FuzzToken", "padded-standard-signature", b"\x00Bearer " + ".".join(padded).encode())
    write("FuzzToken", "numeric-kid", b"\x00Bearer " + token({"alg": "HS256", "kid": 1}, user, SECRETS["k1"]).encode())
    write("FuzzToken", "long-sub", b"\x00Bearer " + token(k1, dict(user, sub="u" * 200), SECRETS["k1"]).encode())
    write("FuzzToken", "no-scheme", b"\x00" + good.encode())
    write("FuzzToken", "signed-user", b"\x01" + json.dumps(k1).encode() + b"\n" + json.dumps(user).encode())
    write("FuzzToken", "signed-admin-operator", b"\x01" + json.dumps(k1).encode() + b"\n" + json.dumps(admin).encode() + b"\x00carol")
    write("FuzzToken", "signed-bad-role", b"\x01" + json.dumps(k1).encode() + b"\n" + json.dumps(dict(user, role="root")).encode())
    write("FuzzToken", "signed-unknown-kid", b"\x01" + json.dumps(dict(k1, kid="k9")).encode() + b"\n" + json.dumps(user).encode())
    write("FuzzToken", "signed-no-claims", b"\x01" + json.dumps(k1).encode() + b"\n{}")
    write("FuzzToken", "signed-float-exp", b"\x01" + json.dumps(k1).encode() + b"\n" + json.dumps(dict(user, exp=1e300, nbf=-1e300)).encode())


# MARK: FuzzConfig: YAML text

def config_seeds():
    write("FuzzConfig", "deploy-example.yaml", (ROOT / "deploy" / "groupd.yaml.example").read_bytes())
    # The demo configuration as `groupd demo-config` prints it, when a groupd binary is at hand.
    binary = os.environ.get("GROUPD_BIN", str(ROOT / ".build" / "debug" / "groupd"))
    if Path(binary).exists():
        demo = subprocess.run([binary, "demo-config"], check=True, capture_output=True).stdout
        write("FuzzConfig", "demo.yaml", demo)
    else:
        print(f"no groupd at {binary}: FuzzConfig gets no demo.yaml (set GROUPD_BIN)", file=sys.stderr)
    # Every YAML example of the docs.
    for doc in sorted((ROOT / "docs").glob("*.md")):
        for number, block in enumerate(re.findall(r"```yaml\n(.*?)```", doc.read_text(), re.S)):
            write("FuzzConfig", f"{doc.stem}-{number}.yaml", block.encode())
    write("FuzzConfig", "empty.yaml", b"")
    write("FuzzConfig", "anchors.yaml", b"a: &x [1, 2, 3]\nb: *x\napps: []\n")


# MARK: FuzzPolicyHost: [hook][links + fail-closed bits][len, instance_new script]…[len, on_hook script]…[rest]

def seg(data):
    return bytes([len(data)]) + data


def s(text):
    return bytes([len(text)]) + text


def policy_seeds():
    allow, reject, rewrite, discard, error = (struct.pack(">i", v) for v in range(5))
    write("FuzzPolicyHost", "allow", bytes([8, 0]) + seg(b"") + seg(b"\x06" + allow))
    write("FuzzPolicyHost", "reject-field", bytes([3, 0]) + seg(b"") + seg(b"\x00" + s(b"name") + s(b"bad word") + b"\x06" + reject))
    write("FuzzPolicyHost", "reject-members", bytes([6, 0]) + seg(b"") + seg(b"\x01" + s(b"bob") + s(b"blocked") + b"\x06" + reject))
    write("FuzzPolicyHost", "rewrite-chain", bytes([8, 1]) + seg(b"") + seg(b"") + seg(b"\x02" + s(b"name") + s(b"clean") + b"\x06" + rewrite)
          + seg(b"\x03" + s(b"name") + b"\x06" + rewrite) + b"message text")
    write("FuzzPolicyHost", "discard", bytes([8, 0]) + seg(b"") + seg(b"\x05\x01" + s(b"dropping") + b"\x06" + discard))
    write("FuzzPolicyHost", "error-fail-closed", bytes([0, 4]) + seg(b"") + seg(b"\x04" + struct.pack(">i", 7) + s(b"broken") + b"\x06" + error))
    write("FuzzPolicyHost", "unknown-decision", bytes([4, 0]) + seg(b"") + seg(b"\x06" + struct.pack(">i", 77)))
    write("FuzzPolicyHost", "null-strings", bytes([2, 0]) + seg(b"") + seg(b"\x07\x05\x06" + rewrite))
    write("FuzzPolicyHost", "instance-fails", bytes([0, 0]) + seg(b"\x04" + struct.pack(">i", 3) + s(b"bad config") + b"\x06" + error) + seg(b""))


def main():
    if CORPUS.exists():
        shutil.rmtree(CORPUS)
    deframer_seeds()
    proto_seeds()
    http2_seeds()
    http1_seeds()
    token_seeds()
    config_seeds()
    policy_seeds()
    for target in sorted(CORPUS.iterdir()):
        print(f"{target.name}: {len(list(target.iterdir()))} seeds")


if __name__ == "__main__":
    sys.exit(main())
