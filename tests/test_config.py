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


# Values outside their set do not stop the check: each is a line, with every other problem.
EVERY_KIND = ("durability: sometimes\nlog: {level: verbose, format: xml}\nstore: {tls: maybe, pool_size: 0}\n"
              "max_conections: 5\nmax_connections: 0\ntransport: {reads_per_turn: 0, reset_burst: 0}\n"
              "keepalive: {timeout_seconds: 0, time_seconds: -1}\n"
              + APP + "    policy:\n      budget_ms: 0\n      failure_modes: {before_invite: sometimes}\n"
              "      plugins: [{path: a.so, hooks: [before_lunch, after_event]}]\n")
EVERY_KIND_LINES = [
    "durability: expected full or normal, found 'sometimes'",
    "store.tls: expected disable, prefer or require, found 'maybe'",
    "max_conections: unknown key; expected one of:",
    "apps[0].policy.budget_ms: expected milliseconds from 1 to 60000, found 0",
    "apps[0].policy.failure_modes.before_invite: expected fail_closed or fail_open, found 'sometimes'",
    "apps[0].policy.plugins[0].hooks[0]: unknown hook 'before_lunch'; expected one of:",
    "log.level: expected one of trace, debug, info, notice, warning, error, critical, found 'verbose'",
    "log.format: expected text or json, found 'xml'",
    "store.pool_size: expected a value from 1 to 1000, found 0",
    "max_connections: expected a value from 1 to 1000000, found 0",
    "keepalive.time_seconds: expected seconds from 0 to 31536000, found -1.0",
    "keepalive.timeout_seconds: expected seconds above 0, found 0",
    "transport.reset_burst: expected 1 to 1000000, found 0",
    "transport.reads_per_turn: expected 1 to 64, found 0",
]


def test_values_outside_their_set_are_reported_with_every_other_problem(workdir):
    path = workdir / "groupd.yaml"
    path.write_text(EVERY_KIND)
    result = run("check-config", str(path))
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert all(line.startswith(f"groupd: {path}: ") for line in lines), result.stderr
    found = [line[len(f"groupd: {path}: "):] for line in lines]
    for expected in EVERY_KIND_LINES:
        assert sum(line.startswith(expected) for line in found) == 1, (expected, result.stderr)
    assert len(found) == len(EVERY_KIND_LINES), result.stderr


def test_a_wrong_type_still_stops_but_prints_what_was_found_before_it(workdir):
    path = workdir / "groupd.yaml"
    path.write_text("durability: sometimes\nauth: {clock_skew_seconds: soon}\n" + APP)
    result = run("check-config", str(path))
    assert result.returncode == 2
    assert [line.split(": ")[2] for line in result.stderr.splitlines()] == ["durability", "auth.clock_skew_seconds"], \
        result.stderr


def test_listen_port_0_is_a_free_port(workdir):
    path = workdir / "groupd.yaml"
    path.write_text("listen: {port: 0}\n" + APP)
    result = run("check-config", str(path))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("listen,metrics,clash", [
    ("0.0.0.0", "127.0.0.1", True),
    ("127.0.0.1", "0.0.0.0", True),
    ("::", "127.0.0.1", True),
    ("::ffff:127.0.0.1", "127.0.0.1", True),
    ("localhost", "127.0.0.1", True),
    ("127.0.0.1", "127.0.0.2", False),
    ("0.0.0.0", "::1", False),
])
def test_the_metrics_port_clashes_with_listen_on_overlapping_addresses(workdir, listen, metrics, clash):
    path = workdir / "groupd.yaml"
    path.write_text(f"listen: {{host: '{listen}', port: 7000}}\nmetrics: {{host: '{metrics}', port: 7000}}\n" + APP)
    result = run("check-config", str(path))
    if clash:
        assert result.returncode == 2, result.stdout
        assert result.stderr.splitlines() == [
            f"groupd: {path}: metrics.port: expected a port other than listen.port (7000): {metrics} and {listen} share it"]
    else:
        assert result.returncode == 0, result.stderr
