"""Configuration errors through the real binary: `groupd check-config FILE` and `groupd serve`
refuse each kind of mistake with the file, the key path and what was expected, exit non-zero,
and serve nothing; a good file passes."""
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from support import GROUPD_BIN, free_port

SECRET = "0123456789abcdef0123456789abcdef"
APP = f"""apps:
  - id: demo
    secrets:
      - kid: k1
        secret: "{SECRET}"
"""

# (kind of mistake, file text, the key path, what the message says was expected)
MISTAKES = [
    ("wrong type", "listen: {port: fifty}\n" + APP, "listen.port", "expected an integer"),
    ("wrong type in a list", APP + "    limits: {max_members: {work: many}}\n", "apps[0].limits.max_members.work",
     "expected an integer"),
    ("wrong type: mapping expected", "auth: 5\n" + APP, "auth", "expected a mapping"),
    ("unknown key", "max_mesage_bytes: 5\n" + APP, "max_mesage_bytes", "unknown key; expected one of"),
    ("unknown nested key", APP + "    limits: {group_name_byte: 5}\n", "apps[0].limits.group_name_byte", "unknown key"),
    ("out of range", "listen: {port: 70000}\n" + APP, "listen.port", "expected a value from 0 to 65535, found 70000"),
    ("out of range in an app", APP + "    limits: {max_page_size: 0}\n", "apps[0].limits.max_page_size",
     "expected a value from 1 to"),
    ("out of range: connections", "max_connections: 0\n" + APP, "max_connections", "expected a value from 1 to 1000000"),
    ("out of range: rate", APP + "    rate_limits: {operator: {per_second: -1}}\n", "apps[0].rate_limits.operator.per_second",
     "above 0"),
    ("duplicate app id", APP + APP.replace("apps:\n", ""), "apps[1].id", "duplicate app id 'demo' (already used by apps[0].id)"),
    ("duplicate kid", APP + f"      - kid: k1\n        secret: \"{SECRET}x\"\n", "apps[0].secrets[1].kid", "duplicate kid 'k1'"),
    ("missing required key", "apps:\n  - id: demo\n", "apps[0].secrets", "required key is missing"),
    ("missing required nested key", "apps:\n  - id: demo\n    secrets: [{kid: k1}]\n", "apps[0].secrets[0].secret",
     "required key is missing"),
    ("missing apps", "listen: {port: 1}\n", "apps", "expected at least one app"),
    ("short secret", APP.replace(SECRET, "short"), "apps[0].secrets[0].secret", "at least 32 bytes, found 5"),
    ("bad YAML syntax", "apps: [unclosed\n", None, "not valid YAML"),
    ("out of range: queued bytes", "transport: {max_queued_bytes_per_connection: 1024}\n" + APP,
     "transport.max_queued_bytes_per_connection", "expected bytes from 65536 to 1073741824, found 1024"),
    ("out of range: stall timeout", "transport: {stalled_write_timeout_seconds: 0}\n" + APP,
     "transport.stalled_write_timeout_seconds", "expected seconds above 0 and at most 3600, found 0"),
    ("bad custom field", APP + "    custom_fields: {group: [{key: level, max_bytes: 0}]}\n",
     "apps[0].custom_fields.group[0].max_bytes", "expected 1 to 65536 bytes"),
]


@pytest.fixture
def workdir():
    path = Path(tempfile.mkdtemp(prefix="groupd-config-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run(*args, timeout=30):
    return subprocess.run([str(GROUPD_BIN), *args], capture_output=True, text=True, timeout=timeout)


def test_a_good_file_passes(workdir):
    path = workdir / "groupd.yaml"
    path.write_text(APP)
    result = run("check-config", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{path}: ok (1 app)"


@pytest.mark.parametrize("kind,text,key_path,expected", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_check_config_names_the_file_key_path_and_expectation(workdir, kind, text, key_path, expected):
    path = workdir / "groupd.yaml"
    path.write_text(text)
    result = run("check-config", str(path))
    assert result.returncode == 2, (result.stdout, result.stderr)
    prefix = f"groupd: {path}: " + (f"{key_path}: " if key_path else "")
    assert result.stderr.startswith(prefix), result.stderr
    assert expected in result.stderr, result.stderr
    assert "ok" not in result.stdout


def test_a_missing_file(workdir):
    result = run("check-config", str(workdir / "absent.yaml"))
    assert result.returncode == 2
    assert "cannot read the file" in result.stderr and "absent.yaml" in result.stderr


@pytest.mark.parametrize("kind", ["duplicate app id", "bad YAML syntax", "out of range"])
def test_serve_refuses_an_invalid_file_and_serves_nothing(workdir, kind):
    _, text, key_path, expected = next(m for m in MISTAKES if m[0] == kind)
    port = free_port()
    path = workdir / "groupd.yaml"
    listen = "" if text.startswith("listen:") else f"listen: {{port: {port}}}\n"
    path.write_text(listen + f"data_dir: {workdir / 'data'}\n" + text)
    result = run("serve", "--config", str(path))
    assert result.returncode != 0
    assert expected in result.stderr, result.stderr
    assert not (workdir / "data").exists(), "nothing may start before the file is valid"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()


EVERY_PROBLEM = ("listen: {port: 70000}\nmax_connections: 0\ntransport: {max_queued_bytes_per_connection: 1024}\n"
                 + APP.replace(SECRET, "short") + APP.replace("apps:\n", ""))
EVERY_PROBLEM_PATHS = ["listen.port", "max_connections", "transport.max_queued_bytes_per_connection",
                       "apps[0].secrets[0].secret", "apps[1].id"]


@pytest.mark.parametrize("command", ["check-config", "serve"])
def test_every_problem_of_a_file_is_reported_with_its_key_path(workdir, command):
    path = workdir / "groupd.yaml"
    path.write_text(f"data_dir: {workdir / 'data'}\n" + EVERY_PROBLEM)
    result = run(*([command, str(path)] if command == "check-config" else [command, "--config", str(path)]))
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert [line.split(": ")[2] for line in lines] == EVERY_PROBLEM_PATHS, result.stderr
    assert all(line.startswith(f"groupd: {path}: ") for line in lines)
    assert "ok" not in result.stdout and not (workdir / "data").exists()
