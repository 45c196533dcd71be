"""The groupd binary's own commands, without a server to call: `groupd token` refuses a token it
cannot mint meaningfully (no subject, no lifetime) as a usage error, and `groupd serve` on an
address it cannot bind says so in one line naming the address."""
import base64
import json
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from support import GROUPD_BIN

SECRET = "0123456789abcdef0123456789abcdef"
CONFIG = f"""apps:
  - id: demo
    secrets:
      - kid: k1
        secret: "{SECRET}"
"""


@pytest.fixture
def workdir():
    path = Path(tempfile.mkdtemp(prefix="groupd-cli-"))
    (path / "groupd.yaml").write_text(CONFIG)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run(*args, timeout=30):
    return subprocess.run([str(GROUPD_BIN), *args], capture_output=True, text=True, timeout=timeout)


def claims(token):
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def token(workdir, *args):
    return run("token", "--config", str(workdir / "groupd.yaml"), "--app", "demo", *args)


@pytest.mark.parametrize("args,sub,role", [
    (["--user", "alice"], "alice", "user"),
    (["--admin"], "admin", "admin"),
    (["--admin", "--user", "ops"], "ops", "admin"),
])
def test_token_names_its_subject_and_role(workdir, args, sub, role):
    result = token(workdir, *args, "--ttl", "60")
    assert result.returncode == 0, result.stderr
    minted = claims(result.stdout.strip())
    assert (minted["sub"], minted["role"], minted["app"]) == (sub, role, "demo")
    assert minted["exp"] - minted["iat"] == 60


@pytest.mark.parametrize("args,message", [
    ([], "name the token's user with --user ID, or ask for a backend token with --admin"),
    (["--user", ""], "--user must not be empty"),
    (["--user", "alice", "--ttl", "0"], "--ttl must be at least 1 second, found 0"),
    (["--user", "alice", "--ttl=-5"], "--ttl must be at least 1 second, found -5"),
    (["--admin", "--ttl", "0"], "--ttl must be at least 1 second, found 0"),
])
def test_token_refuses_a_token_without_subject_or_lifetime(workdir, args, message):
    result = token(workdir, *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr, result.stderr
    assert result.stdout == "", "no token is printed"


def test_serve_on_a_port_in_use_says_so_in_one_line(workdir):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = workdir / "groupd.yaml"
        config.write_text(f"listen: {{host: 127.0.0.1, port: {port}}}\ndata_dir: {workdir / 'data'}\n" + CONFIG)
        result = run("serve", "--config", str(config))
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    failures = [line for line in lines if "error" in line.lower() or "fail" in line.lower() or "groupd:" in line]
    assert failures == [f"groupd: cannot listen on 127.0.0.1:{port}: Address already in use"], lines


def test_serve_with_the_metrics_port_in_use_says_so_in_one_line(workdir):
    with socket.socket() as taken, socket.socket() as spare:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        spare.bind(("127.0.0.1", 0))
        port, listen_port = taken.getsockname()[1], spare.getsockname()[1]
        spare.close()
        config = workdir / "groupd.yaml"
        config.write_text(f"listen: {{host: 127.0.0.1, port: {listen_port}}}\nmetrics: {{host: 127.0.0.1, port: {port}}}\n"
                          f"data_dir: {workdir / 'data'}\n" + CONFIG)
        result = run("serve", "--config", str(config))
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    failures = [line for line in lines if "error" in line.lower() or "fail" in line.lower()]
    assert len(failures) == 1 and failures[0].endswith(
        f"cannot listen for metrics on 127.0.0.1:{port}: Address already in use"), lines


def header(token):
    head = token.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))


def test_token_signs_with_the_kid_asked_for(workdir):
    (workdir / "groupd.yaml").write_text(CONFIG + f"      - kid: k2\n        secret: \"{SECRET[::-1]}\"\n")
    assert header(token(workdir, "--user", "alice").stdout.strip())["kid"] == "k1"
    chosen = token(workdir, "--user", "alice", "--kid", "k2")
    assert chosen.returncode == 0, chosen.stderr
    assert header(chosen.stdout.strip())["kid"] == "k2"


@pytest.mark.parametrize("kid", ["k9", ""])
def test_token_refuses_a_kid_the_app_does_not_have(workdir, kid):
    (workdir / "groupd.yaml").write_text(CONFIG + f"      - kid: k2\n        secret: \"{SECRET[::-1]}\"\n")
    result = token(workdir, "--user", "alice", "--kid", kid)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == "", "no token is printed"
    assert result.stderr.splitlines() == [
        f"groupd: app demo in {workdir / 'groupd.yaml'} has no secret with kid {kid}; its kids: k1, k2"], result.stderr


@pytest.mark.parametrize("command", [["serve"], ["token", "--app", "demo", "--admin"], ["quickstart"]])
def test_a_missing_configuration_file_is_named_with_the_way_to_make_one(workdir, command):
    empty = workdir / "empty"
    empty.mkdir()
    result = subprocess.run([str(Path(GROUPD_BIN).resolve()), *command], capture_output=True, text=True, timeout=30, cwd=empty)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.splitlines() == [
        "groupd: groupd.yaml: cannot read the file: No such file or directory; "
        "write one with: groupd demo-config > groupd.yaml"], result.stderr


def test_a_configuration_that_is_a_directory_says_so(workdir):
    result = run("check-config", str(workdir))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"groupd: {workdir}: cannot read the file: Is a directory"], result.stderr


def test_admin_group_get_usage_names_its_argument(workdir):
    result = run("admin", "group", "get", "--help")
    assert result.returncode == 0, result.stderr
    assert "<group-id> ..." in result.stdout and "group-i-ds" not in result.stdout, result.stdout
