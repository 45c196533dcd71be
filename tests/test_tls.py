"""TLS and mutual TLS through a real groupd, with certificates made here by the `openssl` command
line: grpcio over a secure channel; client certificates required, accepted from the CA and refused
without one or from another CA; a certificate that cannot be used stops `groupd serve` at start
with the file named; SIGHUP rotates the certificate for new connections while the server keeps
serving; a TLS client on the plaintext port and a plaintext client on the TLS port are closed at
once, never left hanging. Nothing waits by sleeping: each wait is for an event (a frame, a close,
a log line) with a deadline as the failure bound."""
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from pathlib import Path

import grpc
import pytest

import h2raw
from support import GROUPD_BIN, Groupd, admin_md, wait_for
from groupd.v1 import group_pb2, group_pb2_grpc
from grpc.health.v1 import health_pb2, health_pb2_grpc


# MARK: Certificates


def openssl(*args):
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


class Pki:
    """A directory of certificates: CAs, and certificates they sign (EC P-256 keys)."""

    def __init__(self, directory: Path):
        self.directory = directory

    def path(self, name):
        return self.directory / name

    def ca(self, name):
        """A self-signed CA: (cert path, key path)."""
        cert, key = self.path(f"{name}.pem"), self.path(f"{name}.key")
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
                "-out", cert, "-days", 30, "-subj", f"/CN={name}")
        return cert, key

    def issue(self, name, ca, serial, days=30, key=None, client=False):
        """A certificate for `name` signed by `ca` ((cert, key)), valid `days` from now (a negative
        number: already expired); a new key unless `key` is given. Server certificates name
        localhost and 127.0.0.1."""
        cert, csr = self.path(f"{name}.pem"), self.path(f"{name}.csr")
        if key is None:
            key = self.path(f"{name}.key")
            openssl("genpkey", "-algorithm", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key)
        openssl("req", "-new", "-key", key, "-out", csr, "-subj", f"/CN={name}")
        extensions = self.path(f"{name}.ext")
        extensions.write_text("extendedKeyUsage=clientAuth\n" if client else
                              "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
        openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-set_serial", serial, "-days", days,
                "-extfile", extensions, "-out", cert)
        return cert, key


@pytest.fixture(scope="module")
def pki():
    directory = Path(tempfile.mkdtemp(prefix="groupd-pki-"))
    pki = Pki(directory)
    pki.root = pki.ca("groupd-test-ca")
    pki.other_root = pki.ca("other-ca")
    pki.server = pki.issue("server", pki.root, serial=0x101)
    pki.client = pki.issue("client", pki.root, serial=0x201, client=True)
    pki.stranger = pki.issue("stranger", pki.other_root, serial=0x301, client=True)
    pki.expired = pki.issue("expired", pki.root, serial=0x102, days=-1)
    yield pki
    shutil.rmtree(directory, ignore_errors=True)


def der(pem_path):
    return ssl.PEM_cert_to_DER_cert(Path(pem_path).read_text())


@pytest.fixture
def workdir():
    directory = Path(tempfile.mkdtemp(prefix="groupd-tls-"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def servers():
    """Starts groupd servers (`servers(Groupd(...))`) and stops them afterwards."""
    started = []

    def start(server):
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()


def tls_keys(pki, cert=None, key=None, client_ca=False):
    keys = {"cert_file": cert or pki.server[0], "key_file": key or pki.server[1]}
    if client_ca:
        keys["client_ca_file"] = pki.root[0]
    return keys


def secure_channel(server, pki, client=None):
    """A grpcio channel trusting the test CA, presenting `client` ((cert, key)) when given."""
    credentials = grpc.ssl_channel_credentials(
        root_certificates=Path(pki.root[0]).read_bytes(),
        private_key=Path(client[1]).read_bytes() if client else None,
        certificate_chain=Path(client[0]).read_bytes() if client else None)
    return grpc.secure_channel(server.address, credentials)


def health_check(channel):
    return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10).status


def tls_connect(server, pki, alpn=("h2",), client=None):
    """A TLS socket to `server` (the handshake done), verifying its certificate against the test CA."""
    context = ssl.create_default_context(cafile=str(pki.root[0]))
    if alpn:
        context.set_alpn_protocols(list(alpn))
    if client:
        context.load_cert_chain(str(client[0]), str(client[1]))
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    try:
        return context.wrap_socket(raw, server_hostname="127.0.0.1")
    except BaseException:
        raw.close()
        raise


def read_until_closed(sock, timeout=10):
    """Reads until the peer closes; returns (bytes read, how it ended). Fails when the connection
    is still open after `timeout` seconds: the server must close it, not leave it hanging."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    received = b""
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            break
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError) as error:
            return received, error
        if not chunk:
            return received, "eof"
        received += chunk
    raise AssertionError(f"the server left the connection open for {timeout} s (read {received[:64]!r})")


def wait_for_log(server, text, count=1, timeout=20):
    """Waits until `text` is in the server's log `count` times (the server logs each reload)."""
    def logged():
        if server.process.poll() is not None:
            raise AssertionError(f"groupd exited while waiting for {text!r}:\n{server.log.read_text(errors='replace')}")
        return server.log.read_text(errors="replace").count(text) >= count
    wait_for(logged, f"{text!r} in the log", timeout)
    return server.log.read_text(errors="replace")


def client_hello() -> bytes:
    """The bytes of a TLS ClientHello, as a TLS client sends them first."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


# MARK: TLS


def test_secure_channel_serves_calls(pki, workdir, servers):
    server = servers(Groupd(workdir, tls=tls_keys(pki)))
    with secure_channel(server, pki) as channel:
        assert health_check(channel) == health_pb2.HealthCheckResponse.SERVING
        groups = group_pb2_grpc.GroupServiceStub(channel)
        reply = groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=["nothing-here"]),
                                     metadata=admin_md(), timeout=10)
        assert len(reply.failures) == 1 and not reply.groups
    with tls_connect(server, pki) as sock:
        assert sock.selected_alpn_protocol() == "h2"
        assert sock.version() in ("TLSv1.2", "TLSv1.3")
        assert sock.getpeercert(binary_form=True) == der(pki.server[0])
    assert "certificate_serial=0101" in server.log.read_text(), "the start-up line names the certificate"


def test_client_without_alpn_is_closed_and_http1_serves_connect(pki, workdir, servers):
    server = servers(Groupd(workdir, tls=tls_keys(pki)))
    with tls_connect(server, pki, alpn=()) as sock:
        assert sock.selected_alpn_protocol() is None
        sock.sendall(h2raw.CLIENT_PREFACE + h2raw.frame(h2raw.SETTINGS, 0, 0))
        received, _ = read_until_closed(sock)
        assert received == b"", f"a connection without ALPN got HTTP/2 bytes: {received[:64]!r}"
    # ALPN http/1.1: a Connect call over HTTP/1.1 in TLS (an empty HealthCheckRequest, binary).
    with tls_connect(server, pki, alpn=("http/1.1",)) as sock:
        assert sock.selected_alpn_protocol() == "http/1.1"
        sock.sendall(b"POST /grpc.health.v1.Health/Check HTTP/1.1\r\nHost: x\r\ncontent-type: application/proto\r\n"
                     b"content-length: 0\r\nconnection: close\r\n\r\n")
        received, _ = read_until_closed(sock)
        assert received.startswith(b"HTTP/1.1 200 OK\r\n"), received[:64]
        assert received.endswith(b"\r\n\r\n\x08\x01"), received  # status: SERVING
    # And with h2 the server speaks HTTP/2 at once: its SETTINGS.
    with tls_connect(server, pki) as sock:
        sock.sendall(h2raw.CLIENT_PREFACE + h2raw.frame(h2raw.SETTINGS, 0, 0))
        frames, _ = h2raw.parse_frames(sock.recv(65536))
        assert frames and frames[0][0] == h2raw.SETTINGS


def test_plaintext_client_on_the_tls_port_is_closed_promptly(pki, workdir, servers):
    server = servers(Groupd(workdir, tls=tls_keys(pki)))
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(h2raw.CLIENT_PREFACE + h2raw.frame(h2raw.SETTINGS, 0, 0))
        received, _ = read_until_closed(sock)
        frames, _ = h2raw.parse_frames(received)
        assert not any(f[0] == h2raw.SETTINGS for f in frames), "no HTTP/2 in clear text on the TLS port"
    # A stock client in clear text fails the call instead of hanging.
    with grpc.insecure_channel(server.address) as channel:
        with pytest.raises(grpc.RpcError) as caught:
            health_check(channel)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    # The server still serves TLS clients.
    with secure_channel(server, pki) as channel:
        assert health_check(channel) == health_pb2.HealthCheckResponse.SERVING


def test_tls_client_on_the_plaintext_port_is_closed_promptly(groupd):
    with socket.create_connection(("127.0.0.1", groupd.port), timeout=10) as sock:
        sock.sendall(client_hello())
        received, _ = read_until_closed(sock)
    # Bytes that are not the HTTP/2 preface go to HTTP/1.1, whose parser refuses a ClientHello.
    assert received.startswith(b"HTTP/1.1 400 "), received[:64]


# MARK: Mutual TLS


def test_mutual_tls_accepts_clients_of_the_ca_and_refuses_the_others(pki, workdir, servers):
    server = servers(Groupd(workdir, tls=tls_keys(pki, client_ca=True)))
    with secure_channel(server, pki, client=pki.client) as channel:
        assert health_check(channel) == health_pb2.HealthCheckResponse.SERVING
    for client in (None, pki.stranger):
        with secure_channel(server, pki, client=client) as channel:
            with pytest.raises(grpc.RpcError) as caught:
                health_check(channel)
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE, (client, caught.value)
    # Refused at the handshake: the server sends an alert and closes, never one HTTP/2 byte.
    for client in (None, pki.stranger):
        try:
            sock = tls_connect(server, pki, client=client)
        except (ssl.SSLError, ConnectionResetError):
            continue  # TLS 1.2: the handshake itself fails on the client's side
        with sock:
            sock.sendall(h2raw.CLIENT_PREFACE + h2raw.frame(h2raw.SETTINGS, 0, 0))
            received, _ = read_until_closed(sock)
            assert received == b"", (client, received[:64])
    # The client of the CA still works on a raw connection too.
    with tls_connect(server, pki, client=pki.client) as sock:
        sock.sendall(h2raw.CLIENT_PREFACE + h2raw.frame(h2raw.SETTINGS, 0, 0))
        frames, _ = h2raw.parse_frames(sock.recv(65536))
        assert frames and frames[0][0] == h2raw.SETTINGS


# MARK: Start-up refusals


@pytest.mark.parametrize("problem", ["expired", "key of another certificate", "missing file"])
def test_unusable_certificate_stops_serve_at_start(pki, workdir, problem):
    if problem == "expired":
        keys, named, why = tls_keys(pki, cert=pki.expired[0], key=pki.server[1]), pki.expired[0], "expired"
    elif problem == "key of another certificate":
        keys, named, why = tls_keys(pki, key=pki.client[1]), pki.client[1], "does not belong to the certificate"
    else:
        missing = workdir / "nowhere.pem"
        keys, named, why = tls_keys(pki, cert=missing), missing, "No such file or directory"
    server = Groupd(workdir, tls=keys)
    try:
        with pytest.raises(RuntimeError, match="groupd exited with"):
            server.start()
        assert server.process.returncode != 0
        log = server.log.read_text()
        assert f"{named}: " in log and why in log, log
        assert "listening" not in log
    finally:
        server.stop()
    # `groupd check-config` finds the same problem.
    checked = subprocess.run([str(GROUPD_BIN), "check-config", str(server.config)], capture_output=True, text=True,
                             timeout=60)
    assert checked.returncode == 2, checked
    assert f"{server.config}: tls: {named}: " in checked.stderr and why in checked.stderr, checked.stderr


def test_check_config_accepts_usable_tls_files(pki, workdir):
    server = Groupd(workdir, tls=tls_keys(pki, client_ca=True))
    checked = subprocess.run([str(GROUPD_BIN), "check-config", str(server.config)], capture_output=True, text=True,
                             timeout=60)
    assert checked.returncode == 0, checked.stderr
    assert ": ok (" in checked.stdout


def test_relative_paths_are_relative_to_the_configuration_file(pki, workdir, servers):
    certs = workdir / "certs"
    certs.mkdir()
    shutil.copy(pki.server[0], certs / "server.pem")
    shutil.copy(pki.server[1], certs / "server.key")
    server = servers(Groupd(workdir, tls={"cert_file": "certs/server.pem", "key_file": "certs/server.key"}))
    with secure_channel(server, pki) as channel:
        assert health_check(channel) == health_pb2.HealthCheckResponse.SERVING


# MARK: Rotation


def test_sighup_rotates_the_certificate_for_new_connections(pki, workdir, servers):
    cert, key = workdir / "live.pem", workdir / "live.key"
    shutil.copy(pki.server[0], cert)
    shutil.copy(pki.server[1], key)
    server = servers(Groupd(workdir, tls={"cert_file": cert, "key_file": key}))
    old_channel = secure_channel(server, pki)
    try:
        assert health_check(old_channel) == health_pb2.HealthCheckResponse.SERVING
        with tls_connect(server, pki) as sock:
            assert sock.getpeercert(binary_form=True) == der(pki.server[0])

        # A new certificate with a new key, written over the old files.
        rotated = pki.issue("rotated", pki.root, serial=0x103)
        shutil.copy(rotated[0], cert)
        shutil.copy(rotated[1], key)
        server.signal(signal.SIGHUP)
        log = wait_for_log(server, "TLS certificate reloaded")
        assert "0103" in log
        with tls_connect(server, pki) as sock:
            assert sock.getpeercert(binary_form=True) == der(rotated[0]), "a new connection gets the new certificate"
        with secure_channel(server, pki) as channel:
            assert health_check(channel) == health_pb2.HealthCheckResponse.SERVING
        # The connection made before the rotation keeps serving.
        assert health_check(old_channel) == health_pb2.HealthCheckResponse.SERVING

        # A broken rotation (an expired certificate) is refused: the one in force stays.
        shutil.copy(pki.expired[0], cert)
        shutil.copy(pki.server[1], key)
        server.signal(signal.SIGHUP)
        log = wait_for_log(server, "TLS reload refused, the certificate in force stays")
        assert f"{cert}: the certificate expired at" in log
        with tls_connect(server, pki) as sock:
            assert sock.getpeercert(binary_form=True) == der(rotated[0])
        # So is a missing key file.
        shutil.copy(rotated[0], cert)
        key.unlink()
        server.signal(signal.SIGHUP)
        log = wait_for_log(server, "TLS reload refused, the certificate in force stays", count=2)
        assert f"{key}: cannot read the file" in log
        with secure_channel(server, pki) as channel:
            assert health_check(channel) == health_pb2.HealthCheckResponse.SERVING
        assert server.process.poll() is None
    finally:
        old_channel.close()


# MARK: Shutdown


def test_sigterm_drains_tls_connections_and_exits_0(pki, workdir):
    server = Groupd(workdir, tls=tls_keys(pki)).start()
    try:
        channel = secure_channel(server, pki)
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(), timeout=30)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        server.signal(signal.SIGTERM)
        statuses = []
        with pytest.raises(grpc.RpcError) as caught:
            for response in watch:
                statuses.append(response.status)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE, (statuses, caught.value)
        assert server.wait(timeout=30) == 0, server.log.read_text()
        channel.close()
    finally:
        server.stop()


def test_admin_without_tls_on_the_tls_port_says_the_server_may_speak_tls(pki, workdir, servers):
    server = servers(Groupd(workdir, tls=tls_keys(pki)))
    result = subprocess.run([str(GROUPD_BIN), "admin", "health", "--config", str(server.config), "--timeout", "5"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1, result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "the server may expect TLS" in lines[0] or "answered in TLS" in lines[0], lines[0]
    assert lines[0].endswith("; connect with --tls (and --ca-file PEM when a private CA signed its certificate)"), lines[0]
    with_tls = subprocess.run([str(GROUPD_BIN), "admin", "health", "--config", str(server.config), "--timeout", "5",
                               "--ca-file", str(pki.root[0])], capture_output=True, text=True, timeout=30)
    assert with_tls.returncode == 0, with_tls.stderr
