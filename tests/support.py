"""Shared by the interop tests and the benchmarks: stubs generated from Protos/ at test time with grpcio-tools,
a real groupd started on a free port with a temporary config and data directory, and tokens
minted here in Python (HS256 by hand), so every byte groupd reads comes from code it did not write.

With GROUPD_TEST_POSTGRES_URL set (`make test-postgres` sets it to a throw-away cluster of
scripts/pg_cluster.py), the fixtures give groupd a PostgreSQL store: `new_database()` is a new
empty database of that cluster, `Groupd(workdir, database=url)` a node on it, and `GroupdNodes`
several nodes on one database seen as one server.
"""
import atexit
import base64
import hashlib
import hmac
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "Protos"
GROUPD_BIN = Path(os.environ.get("GROUPD_BIN", ROOT / ".build" / "debug" / "groupd"))
# An app's `policy` (indented for an entry of `apps`): the keyword plugin, built beside groupd,
# refusing CreateGroup calls whose name holds "forbidden" (FAILED_PRECONDITION / POLICY_REJECTED).
KEYWORD_POLICY_YAML = f"""\
    policy:
      budget_ms: 5000
      plugins:
        - path: {GROUPD_BIN.resolve().parent}/libKeywordPolicy.so
          config: {{words: [forbidden], mode: reject, fields: [name]}}
          hooks: [before_create_group]
"""
# A PostgreSQL cluster (postgres://groupd@127.0.0.1:PORT/groupd) to run groupd on instead of SQLite.
POSTGRES_URL = os.environ.get("GROUPD_TEST_POSTGRES_URL") or None

APP_ID = "app-one"
APP_SECRET = "interop-secret-for-app-one-0123456789"
OTHER_APP_ID = "app-two"
OTHER_APP_SECRET = "interop-secret-for-app-two-9876543210"


def _generate_stubs() -> Path:
    from grpc_tools import protoc
    import grpc_tools

    out = Path(tempfile.mkdtemp(prefix="groupd-stubs-"))
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    # The reflection protos are left out: grpcio-reflection registers the same messages in the
    # default descriptor pool (tests/test_reflection.py uses its classes).
    protos = sorted(str(p.relative_to(PROTOS)) for p in PROTOS.rglob("*.proto")
                    if not str(p.relative_to(PROTOS)).startswith("grpc/reflection/"))
    args = ["protoc", f"-I{PROTOS}", f"-I{well_known}", f"--python_out={out}", f"--grpc_python_out={out}", *protos]
    if protoc.main(args) != 0:
        raise RuntimeError("grpc_tools.protoc failed on Protos/")
    return out


STUBS = _generate_stubs()
sys.path.insert(0, str(STUBS))
atexit.register(shutil.rmtree, STUBS, True)

# grpc.health.v1 lives inside the `grpc` package namespace, which grpcio already owns as a
# regular package: extend its search path so `from grpc.health.v1 import health_pb2` (and the
# generated health_pb2_grpc, which imports it that way) finds the stubs generated here.
import grpc as _grpc  # noqa: E402

if str(STUBS / "grpc") not in _grpc.__path__:
    _grpc.__path__.append(str(STUBS / "grpc"))

# GROUPD_TEST_COMPRESSION=gzip or deflate (make test-interop-gzip): every grpcio channel the tests
# open compresses its calls with it, channel-wide, unless the test asks for another compression.
COMPRESSION = os.environ.get("GROUPD_TEST_COMPRESSION") or None
if COMPRESSION:
    _channel_compression = {"gzip": _grpc.Compression.Gzip, "deflate": _grpc.Compression.Deflate}[COMPRESSION]
    _insecure_channel = _grpc.insecure_channel

    def _compressed_insecure_channel(target, options=None, compression=None):
        return _insecure_channel(target, options=options,
                                 compression=_channel_compression if compression is None else compression)

    _grpc.insecure_channel = _compressed_insecure_channel


# GROUPD_TEST_PROTOCOL=connect (make test-interop-connect) or connect-proto: the suites that open
# their channel with api_channel() (test_contract.py, test_isolation.py) carry every stub call over
# the Connect protocol (tests/connect_client.py), in JSON or binary protobuf, instead of gRPC.
PROTOCOL = os.environ.get("GROUPD_TEST_PROTOCOL") or "grpc"
if PROTOCOL not in ("grpc", "connect", "connect-proto"):
    raise RuntimeError(f"GROUPD_TEST_PROTOCOL={PROTOCOL}: not one of grpc, connect, connect-proto")


def api_channel(address):
    """A channel to groupd at `address` for the generated stubs: grpcio's, or with
    GROUPD_TEST_PROTOCOL=connect / connect-proto a ConnectChannel (JSON / binary)."""
    if PROTOCOL == "grpc":
        return _grpc.insecure_channel(address)
    from connect_client import ConnectChannel

    return ConnectChannel(address, codec="proto" if PROTOCOL == "connect-proto" else "json")


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def mint_token(app=APP_ID, secret=APP_SECRET, sub="admin", role="admin", exp_in=3600, kid=None,
               claims=None, drop=(), alg="HS256"):
    """An HS256 JWT, built by hand: header.payload.signature, base64url without padding."""
    header = {"alg": alg, "typ": "JWT"}
    if kid:
        header["kid"] = kid
    payload = {"app": app, "sub": sub, "role": role, "exp": int(time.time()) + exp_in}
    payload.update(claims or {})
    for key in drop:
        payload.pop(key, None)
    signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(payload).encode())
    signature = hmac.new(secret.encode(), signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + b64url(signature)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CONFIG_TEMPLATE = """\
listen:
  host: 127.0.0.1
  port: {port}
data_dir: {data_dir}
durability: full
max_message_bytes: {max_message_bytes}
drain_timeout_seconds: 10
apps:
  - id: {app}
    secrets:
      - kid: k1
        secret: {secret}
  - id: {other_app}
    secrets:
      - kid: k1
        secret: {other_secret}
"""


# The store section of a node on PostgreSQL (without it groupd uses SQLite under data_dir).
STORE_TEMPLATE = """\
store:
  backend: postgres
  url: {url}
  pool_size: 8
  statement_timeout_ms: 5000
  tls: disable
"""

_postgres_cluster = None


def postgres_cluster():
    """The cluster of GROUPD_TEST_POSTGRES_URL (a scripts/pg_cluster.PostgresCluster attached by
    URL: it creates and drops databases, it is not this process's to stop), or None."""
    global _postgres_cluster
    if POSTGRES_URL and _postgres_cluster is None:
        if str(ROOT / "scripts") not in sys.path:
            sys.path.insert(0, str(ROOT / "scripts"))
        from pg_cluster import PostgresCluster

        _postgres_cluster = PostgresCluster.attach(POSTGRES_URL)
    return _postgres_cluster


def new_database():
    """Under PostgreSQL, the URL of a new empty database of GROUPD_TEST_POSTGRES_URL's cluster; None
    otherwise (a Groupd given database=None uses SQLite)."""
    cluster = postgres_cluster()
    return cluster.create_database() if cluster else None


def wait_for(predicate, what, timeout=20):
    """Polls `predicate` until it holds, for what shows itself only in a file or an endpoint
    (groupd's log, a plugin's journal, a scrape): fails after `timeout` seconds naming `what`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


class Groupd:
    """A groupd process with its own config and data directory; on the PostgreSQL database at the
    URL `database` when one is given, else on SQLite under data_dir."""

    def __init__(self, workdir: Path, max_message_bytes=4 * 1024 * 1024, drain_timeout_seconds=10, database=None, tls=None,
                 manual_clock=False, limits=None):
        self.workdir = workdir
        self.data_dir = workdir / "data"
        self.port = free_port()
        self.config = workdir / "groupd.yaml"
        self.drain_timeout_seconds = drain_timeout_seconds
        self.database = database
        text = CONFIG_TEMPLATE.format(
            port=self.port, data_dir=self.data_dir, max_message_bytes=max_message_bytes,
            app=APP_ID, secret=APP_SECRET, other_app=OTHER_APP_ID, other_secret=OTHER_APP_SECRET)
        text = text.replace("apps:\n", self.store_yaml + "apps:\n", 1)
        if tls:  # the `tls` keys: {"cert_file": path, "key_file": path, "client_ca_file": path}
            text = text.replace("apps:\n", "tls:\n" + "".join(f"  {key}: {value}\n" for key, value in tls.items()) + "apps:\n", 1)
        self.config.write_text(text.replace("drain_timeout_seconds: 10\n",
                                            f"drain_timeout_seconds: {drain_timeout_seconds}\n"))
        self.process = None
        self.log = workdir / "groupd.log"
        # The manual clock (testing.clock: manual, allowed by GROUPD_TEST_CLOCK=1): the server's time
        # stands still from its start until advance_clock() moves it.
        self.clock_port = None
        self.environment = dict(os.environ)
        if manual_clock:
            self.clock_port = free_port()
            self.set_top_level(f"testing:\n  clock: manual\n  clock_port: {self.clock_port}\n")
            self.environment["GROUPD_TEST_CLOCK"] = "1"
        if limits:
            self.set_limits(limits)

    @property
    def store_yaml(self) -> str:
        """The config's store section ("" on SQLite), for tests that write a config of their own."""
        return STORE_TEMPLATE.format(url=self.database) if self.database else ""

    @property
    def store_location(self) -> str:
        """Where the data is: the database URL on PostgreSQL, data_dir on SQLite (two nodes with
        the same one see the same groups)."""
        return self.database or str(self.data_dir)

    def set_top_level(self, yaml_lines):
        """Puts `yaml_lines` (top-level keys, e.g. "transport:\n  preface_timeout_seconds: 1\n") into
        the config, before the apps (before start)."""
        text = self.config.read_text()
        self.config.write_text(text.replace("apps:\n", yaml_lines + "apps:\n", 1))

    def rss_kb(self) -> int:
        """The process's resident set size in KiB, from /proc (VmRSS)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS in /proc status")

    def set_limits(self, limits):
        """Puts `limits` into the first app's config (before start): a dict of `apps[].limits` keys
        and their YAML values (`{"max_pinned_messages": 2}`), or YAML lines indented 6 spaces.
        `Groupd(..., limits=...)` does it on creation."""
        if isinstance(limits, dict):
            limits = "".join(f"      {key}: {value}\n" for key, value in limits.items())
        text = self.config.read_text()
        self.config.write_text(text.replace("    secrets:\n", "    limits:\n" + limits + "    secrets:\n", 1))

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self):
        log = open(self.log, "ab")
        self.process = subprocess.Popen([str(GROUPD_BIN), "serve", "--config", str(self.config)],
                                        stdout=log, stderr=subprocess.STDOUT, env=self.environment)
        # A server on a new PostgreSQL database applies every migration before it listens; beside
        # the other test passes on 2 cores that took over 30 s once. A server that fails exits.
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"groupd exited with {self.process.returncode}:\n{self.log.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("groupd did not start listening within 120 s")

    def _clock_request(self, method, path):
        import http.client

        connection = http.client.HTTPConnection("127.0.0.1", self.clock_port, timeout=30)
        try:
            connection.request(method, path)
            response = connection.getresponse()
            return response.status, response.read().decode()
        finally:
            connection.close()

    def clock_ms(self) -> int:
        """The time the manual clock stands at, in ms since the epoch."""
        status, body = self._clock_request("GET", "/clock")
        assert status == 200, (status, body)
        return int(body)

    def advance_clock(self, seconds=0, ms=0) -> int:
        """Moves the manual clock forward and returns its new time (ms since the epoch). The server
        answers once the periodic jobs the move made due (the retention pass, every 60 s) have run:
        what the advance made due has been done when this returns."""
        status, body = self._clock_request("POST", f"/clock/advance?ms={int(seconds * 1000) + ms}")
        assert status == 200, (status, body)
        return int(body)

    def signal(self, sig):
        self.process.send_signal(sig)

    def wait(self, timeout=30) -> int:
        return self.process.wait(timeout=timeout)

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class GroupdNodes:
    """Several groupd nodes on one PostgreSQL database, used like one Groupd: each read of `address`
    or `port` gives the next node's (round robin), so the clients of the tests spread over every
    node; `nodes` are the Groupd objects. start() and stop() act on every node (in order: the first
    one creates the schema); set_limits on every node's config. Anything else (log, config,
    data_dir, process, signal, wait, ...) is the first node's."""

    def __init__(self, nodes):
        self.nodes = list(nodes)
        self._turn = itertools.count()

    def _next(self) -> Groupd:
        return self.nodes[next(self._turn) % len(self.nodes)]

    @property
    def address(self) -> str:
        return self._next().address

    @property
    def port(self) -> int:
        return self._next().port

    @property
    def addresses(self):
        return [node.address for node in self.nodes]

    def set_limits(self, limits):
        for node in self.nodes:
            node.set_limits(limits)

    def start(self):
        try:
            for node in self.nodes:
                node.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        for node in self.nodes:
            node.stop()

    def __getattr__(self, name):
        if name.startswith("__") or name in ("nodes", "_turn"):
            raise AttributeError(name)
        return getattr(self.nodes[0], name)

    def __repr__(self):
        return f"GroupdNodes({', '.join(self.addresses)} on {self.nodes[0].store_location})"


def admin_md(app=APP_ID, secret=APP_SECRET, operator=None):
    md = [("authorization", "Bearer " + mint_token(app=app, secret=secret))]
    if operator:
        md.append(("x-operator-id", operator))
    return md


def user_md(user, app=APP_ID, secret=APP_SECRET):
    return [("authorization", "Bearer " + mint_token(app=app, secret=secret, sub=user, role="user"))]


def error_info(rpc_error):
    """The google.rpc.ErrorInfo in an error's grpc-status-details-bin, or None."""
    from google.rpc import status_pb2, error_details_pb2

    for key, value in rpc_error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                if detail.type_url.endswith("google.rpc.ErrorInfo"):
                    info = error_details_pb2.ErrorInfo()
                    detail.Unpack(info)
                    return info
    return None


def uid(prefix):
    """An id no other test of the shared server uses."""
    import uuid

    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def expect_error(call, code, reason):
    """Runs `call`, which must fail with `code` and an ErrorInfo of domain groupd and `reason`;
    returns the ErrorInfo."""
    import pytest

    with pytest.raises(_grpc.RpcError) as caught:
        call()
    assert caught.value.code() == code, caught.value
    info = error_info(caught.value)
    assert info is not None and info.reason == reason and info.domain == "groupd", info
    return info


class StreamReader:
    """A server-streaming call read by a thread into a queue, so a test waits for items with a
    deadline (an event), never for time."""

    def __init__(self, call):
        import queue
        import threading

        self.call = call
        self.items = queue.Queue()
        self.error = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            for item in self.call:
                self.items.put(item)
        except _grpc.RpcError as error:
            self.error = error
        finally:
            self.done.set()

    def next(self, timeout=15):
        """The next item; fails the test when none comes within `timeout` seconds."""
        import queue

        try:
            return self.items.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no stream item within {timeout} s (stream error: {self.error})") from None

    def take(self, count, timeout=15):
        """The next `count` items."""
        return [self.next(timeout) for _ in range(count)]

    def until(self, predicate, timeout=15):
        """Every item up to and including the first one `predicate` accepts."""
        got = []
        while True:
            got.append(self.next(timeout))
            if predicate(got[-1]):
                return got

    def until_caught_up(self, timeout=15):
        """Every item up to and including caught_up."""
        return self.until(lambda item: item.WhichOneof("item") == "caught_up", timeout)

    def cancel(self):
        self.call.cancel()
        self.done.wait(10)


class EventStream(StreamReader):
    """An EventService/Subscribe call read by a thread into a queue."""

    def __init__(self, channel, request, metadata):
        from groupd.v1 import event_pb2_grpc

        super().__init__(event_pb2_grpc.EventServiceStub(channel).Subscribe(request, metadata=metadata, timeout=60))

    def events(self, count, timeout=15):
        """The next `count` event items (markers skipped)."""
        got = []
        while len(got) < count:
            item = self.next(timeout)
            if item.WhichOneof("item") == "event":
                got.append(item)
        return got


class MessageApi:
    """The calls the message tests share on one channel (tests/test_recall.py, tests/test_edits.py,
    tests/test_pins.py, tests/test_read_receipts.py, tests/test_reactions.py; each adds the calls of
    its own feature): a group created by the backend, a user's message, history as a member reads it."""

    def __init__(self, channel):
        from groupd.v1 import group_pb2_grpc, member_pb2_grpc, message_pb2_grpc

        self.channel = channel
        self.groups = group_pb2_grpc.GroupServiceStub(channel)
        self.members = member_pb2_grpc.MemberServiceStub(channel)
        self.messages = message_pb2_grpc.MessageServiceStub(channel)

    def create(self, group_type, owner, members=(), settings=None):
        """A group of `group_type` owned by `owner`, with `members` as (user, role) pairs and the
        GroupSettings `settings` (none given: the type's defaults)."""
        from groupd.v1 import common_pb2, group_pb2

        return self.groups.CreateGroup(group_pb2.CreateGroupRequest(
            group_id=uid("g"), type=group_type, owner_user_id=owner, profile=common_pb2.GroupProfile(name="team"),
            settings=settings,
            members=[group_pb2.InitialMember(user_id=user, role=role) for user, role in members]),
            metadata=admin_md(), timeout=10).group.group_id

    def community_of_five(self):
        """A Community group with its owner, an admin and three ordinary members (the permission
        group and private topic tests): (group, owner, admin, mia, max, zoe)."""
        from groupd.v1 import common_pb2

        owner, admin, mia, max_, zoe = uid("owner"), uid("admin"), uid("mia"), uid("max"), uid("zoe")
        member, admin_role = common_pb2.MEMBER_ROLE_MEMBER, common_pb2.MEMBER_ROLE_ADMIN
        group = self.create(
            common_pb2.GROUP_TYPE_COMMUNITY, owner, [(admin, admin_role), (mia, member), (max_, member), (zoe, member)])
        return group, owner, admin, mia, max_, zoe

    def send(self, group, user, text="hi", **fields):
        """`user`'s text message (payload `body`), as stored."""
        from groupd.v1 import message_pb2

        return self.messages.SendGroupMessage(message_pb2.SendGroupMessageRequest(
            group_id=group, type="text", text=text, payload=b"body", **fields),
            metadata=user_md(user), timeout=10).message

    def send_sequence(self, group, user, text="hi", **fields):
        """The sequence of `user`'s text message (send() gives the whole message)."""
        return self.send(group, user, text, **fields).sequence

    def history(self, group, user, with_read_counts=False):
        """The group's messages as history shows them to `user`. Without `with_read_counts`, the
        read counts history adds are cleared (tests/test_read_receipts.py asks for them), so the
        messages compare with a recall's or an edit's answer."""
        from groupd.v1 import message_pb2

        messages = list(self.messages.GetGroupMessages(message_pb2.GetGroupMessagesRequest(
            group_id=group, direction=message_pb2.HISTORY_DIRECTION_NEWER, page_size=100),
            metadata=user_md(user), timeout=10).messages)
        if not with_read_counts:
            for message in messages:
                for field in ("read_count", "unread_count", "read_receipts_counted"):
                    message.ClearField(field)
        return messages
