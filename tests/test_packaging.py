"""Packaging: `groupd --version`, `make install` into a temporary DESTDIR, the systemd unit (verified
by systemd-analyze, and groupd serving with plugins under the unit's MemoryDenyWriteExecute), the
Dockerfile's packages and products, the LICENSE and the CHANGELOG."""

import ctypes
import os
import re
import shutil
import signal
import subprocess

import pytest

import support
from support import GROUPD_BIN, ROOT

PLUGINS = ["ExampleCPolicy", "KeywordPolicy", "CustomFieldSchemaPolicy", "WebhookPolicy"]


def released_version():
    """The newest release heading of CHANGELOG.md (`## 1.0.0 - date`)."""
    match = re.search(r"^## (\d+\.\d+\.\d+) - \d{4}-\d{2}-\d{2}$", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert match, "CHANGELOG.md has no release heading"
    return match.group(1)


def test_version_names_the_release_and_the_commit():
    out = subprocess.run([str(GROUPD_BIN), "--version"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    match = re.fullmatch(r"groupd (\S+) \(commit (\S+)\)\n", out.stdout)
    assert match, out.stdout
    assert match.group(1) == released_version()
    commit = match.group(2)
    if commit == "unknown":
        # A bare `swift build` has no build-info header; make build and make release write it.
        assert not (ROOT / "Sources/GroupdBuildInfo/groupd_build_info.h").exists()
        pytest.skip("built without make build: the commit is unknown")
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert commit == head, f"the binary was built from {commit}, HEAD is {head}: rebuild with make build"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """`make install DESTDIR=… PREFIX=/usr BIN=<the tested binary>`: no build, the tree it leaves."""
    destdir = tmp_path_factory.mktemp("destdir")
    result = subprocess.run(["make", "--no-print-directory", "install", f"DESTDIR={destdir}", "PREFIX=/usr",
                             f"BIN={GROUPD_BIN.resolve()}"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return destdir


def test_make_install_tree(installed):
    files = sorted(str(path.relative_to(installed)) for path in installed.rglob("*") if path.is_file())
    assert files == sorted([
        "usr/bin/groupd",
        *[f"usr/lib/groupd/plugins/lib{plugin}.so" for plugin in PLUGINS],
        "usr/lib/systemd/system/groupd.service",
        "usr/share/groupd/groupd.yaml.example",
    ])
    binary = installed / "usr/bin/groupd"
    assert os.access(binary, os.X_OK)
    assert subprocess.run([str(binary), "--version"], capture_output=True, text=True).stdout.startswith("groupd ")
    unit = (installed / "usr/lib/systemd/system/groupd.service").read_text()
    assert "ExecStart=/usr/bin/groupd serve --config /etc/groupd/groupd.yaml" in unit
    assert "/usr/local/bin" not in unit


def test_installed_example_config_needs_only_a_secret(installed, tmp_path):
    example = (installed / "usr/share/groupd/groupd.yaml.example").read_text()
    refused = tmp_path / "as-installed.yaml"
    refused.write_text(example)
    result = subprocess.run([str(GROUPD_BIN), "check-config", str(refused)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "secret" in result.stderr, result.stderr
    filled = tmp_path / "groupd.yaml"
    filled.write_text(example.replace('secret: ""', 'secret: "' + "s" * 40 + '"'))
    result = subprocess.run([str(GROUPD_BIN), "check-config", str(filled)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr


def test_systemd_unit_verifies(installed, tmp_path):
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze missing: scripts/install-deps.sh installs systemd"
    unit = (installed / "usr/lib/systemd/system/groupd.service").read_text()
    # verify checks that the executables exist: point them at the installed tree.
    unit = unit.replace("/usr/bin/groupd", str(installed / "usr/bin/groupd"))
    path = tmp_path / "groupd.service"
    path.write_text(unit)
    result = subprocess.run([analyze, "verify", "--man=no", str(path)], capture_output=True, text=True, timeout=60)
    problems = [line for line in (result.stdout + result.stderr).splitlines() if "groupd.service" in line]
    assert result.returncode == 0 and not problems, result.stdout + result.stderr
    for option in ["ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "NoNewPrivileges=yes",
                   "StateDirectory=groupd", "CapabilityBoundingSet=\n", "MemoryDenyWriteExecute=yes",
                   "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX", "SystemCallFilter=@system-service",
                   "ExecReload=/bin/kill -HUP $MAINPID", "Restart=on-failure", "LimitNOFILE=", "ReadWritePaths="]:
        assert option in unit, option


PR_SET_MDWE = 65
PR_MDWE_REFUSE_EXEC_GAIN = 1


def _deny_write_execute():
    """In the child before exec: the kernel's MemoryDenyWriteExecute (prctl PR_SET_MDWE, which
    systemd's option matches), inherited by groupd."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0:
        os._exit(97)


def test_plugins_load_under_memory_deny_write_execute(tmp_path):
    """The unit's MemoryDenyWriteExecute=yes must not stop dlopen of the plugins: groupd serves with
    two plugins loaded while writable-and-executable memory is refused."""
    plugin_dir = GROUPD_BIN.resolve().parent
    port = support.free_port()
    config = tmp_path / "groupd.yaml"
    config.write_text(f"""\
listen: {{host: 127.0.0.1, port: {port}}}
data_dir: {tmp_path / 'data'}
apps:
  - id: {support.APP_ID}
    secrets: [{{kid: k1, secret: {support.APP_SECRET}}}]
    policy:
      plugins:
        - path: {plugin_dir / 'libKeywordPolicy.so'}
          config: '{{"words": ["spam"], "mode": "mask"}}'
          hooks: [before_send_group_message]
        - path: {plugin_dir / 'libExampleCPolicy.so'}
          config: '{{"words": ["scam"], "mode": "reject", "max_length": 64}}'
          hooks: [before_send_group_message]
""")
    server = subprocess.Popen([str(GROUPD_BIN), "serve", "--config", str(config)], preexec_fn=_deny_write_execute,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        health = None
        for _ in range(300):  # each attempt waits on the server (connect or the call), not on a timer
            if server.poll() is not None:
                break
            health = subprocess.run([str(GROUPD_BIN), "admin", "health", "--config", str(config), "--timeout", "2"],
                                    capture_output=True, text=True, timeout=30)
            if health.returncode == 0:
                break
        if server.poll() == 97:
            pytest.skip("this kernel has no PR_SET_MDWE (Linux 6.3+)")
        if server.poll() is not None:
            pytest.fail(f"groupd exited with {server.returncode}:\n{server.communicate()[0]}")
        assert health is not None and health.returncode == 0, health and health.stderr
        assert server.poll() is None
    finally:
        server.send_signal(signal.SIGTERM)
        output = server.communicate(timeout=30)[0]
    assert server.returncode == 0, output
    # The restriction was in force: the same setting refuses a writable and executable mapping.
    probe = subprocess.run(["python3", "-c", "import mmap; mmap.mmap(-1, 4096, prot=7)"],
                           preexec_fn=_deny_write_execute, capture_output=True, text=True)
    assert probe.returncode != 0 and "PermissionError" in probe.stderr, probe.stderr


def test_make_run_builds_the_shipped_plugins_next_to_groupd():
    """docs/PLUGINS.md tells a newcomer after `make run` to name a plugin by its file name: `make
    run` builds every shipped plugin (release-plugins) beside `.build/release/groupd`."""
    dry_run = subprocess.run(["make", "--no-print-directory", "-n", "run"], cwd=ROOT, capture_output=True, text=True,
                             timeout=60)
    assert dry_run.returncode == 0, dry_run.stderr
    lines = dry_run.stdout.splitlines()
    builds = [i for i, line in enumerate(lines) if "build -c release --product $plugin" in line]
    assert len(builds) == 1, dry_run.stdout
    assert set(lines[builds[0]].split(";")[0].split()[3:]) == set(PLUGINS), lines[builds[0]]
    serve = next(i for i, line in enumerate(lines) if " serve --config " in line)
    assert builds[0] < serve, "the plugins are built before groupd serves"


def test_the_plugin_example_of_the_docs_passes_check_config(tmp_path):
    """The `policy` block docs/PLUGINS.md gives for `make run`'s demo config, added to the demo
    config as told, passes `groupd check-config` with the plugin found next to the binary."""
    docs = (ROOT / "docs/PLUGINS.md").read_text()
    after = docs.split("`make run` builds the four shipped plugins", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", after, re.S).group(1)
    demo = subprocess.run([str(GROUPD_BIN), "demo-config"], capture_output=True, text=True, check=True).stdout
    config = tmp_path / "groupd.yaml"
    config.write_text(demo + block)
    result = subprocess.run([str(GROUPD_BIN), "check-config", str(config)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{config}: ok (1 app, 1 plugin loaded)"


def dockerfile():
    return (ROOT / "deploy/Dockerfile").read_text()


def test_dockerfile_runtime_packages_are_debian_12_packages():
    text = dockerfile()
    stages = re.split(r"^FROM ", text, flags=re.M)
    runtime = stages[-1]
    assert runtime.startswith("debian:bookworm-slim")
    install = re.search(r"apt-get install -y --no-install-recommends ([^\n&\\]+)", runtime)
    packages = install.group(1).split()
    for needed in ["libnghttp2-14", "libprotobuf-c1", "libsqlite3-0", "zlib1g", "libcurl4", "libssl3", "libjansson4", "ca-certificates"]:
        assert needed in packages
    for package in packages:
        shown = subprocess.run(["apt-cache", "show", "--no-all-versions", package], capture_output=True, text=True)
        assert shown.returncode == 0 and f"Package: {package}" in shown.stdout, f"{package} is not a Debian package here"


def test_dockerfile_builds_the_shipped_products_and_runs_unprivileged():
    text = dockerfile()
    package = (ROOT / "Package.swift").read_text()
    products = set(re.findall(r'\.(?:executable|library)\(name: "(\w+)"', package))
    assert "swift build -c release --product groupd" in text
    shipped = re.search(r"^SHIPPED_PLUGINS := (.+)$", (ROOT / "Makefile").read_text(), re.M).group(1).split()
    assert shipped == PLUGINS
    for plugin in shipped:
        assert plugin in products
        assert f"lib{plugin}.so" in text and plugin in re.search(r"for plugin in ([\w ]+);", text).group(1)
    user = re.findall(r"^USER (\S+)$", text, re.M)
    assert user and user[-1] not in ("root", "0")
    assert re.search(r"^EXPOSE 50051$", text, re.M)
    assert re.search(r'^HEALTHCHECK .*\n\s+CMD \["groupd", "admin", "health"', text, re.M)
    assert "Sources/GroupdBuildInfo/groupd_build_info.h" in text


def test_license_is_the_apache_2_text():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    for section in ["TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION", "9. Accepting Warranty or Additional Liability",
                    "END OF TERMS AND CONDITIONS", "APPENDIX: How to apply the Apache License to your work."]:
        assert section in text


def test_changelog_has_unreleased_and_the_release():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert text.index("## Unreleased") < text.index(f"## {released_version()} - ")
