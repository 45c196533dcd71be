#!/usr/bin/env python3
"""A throw-away PostgreSQL cluster for the tests: initdb in a temporary directory, one postgres
listening on 127.0.0.1 at a free port (its unix socket in that directory), a superuser and a
database both named `groupd`, trust authentication. fsync stays on: the tests check that an
acknowledged write survives a crash.

As a command (what `make test-postgres` does):
    python3 scripts/pg_cluster.py start --state FILE   # prints the URL, writes FILE (JSON: url, pid, dir, port)
    python3 scripts/pg_cluster.py stop --state FILE    # fast shutdown (SIGKILL after a timeout), removes dir and FILE

As a module (tests/support.py imports it):
    cluster = PostgresCluster().start()
    url = cluster.create_database()      # a fresh database of the same cluster
    cluster.stop_server()                # the database unreachable (same port, same data)...
    cluster.start_server()               # ...and back
    cluster.stop()                       # gone, directory included
    PostgresCluster.attach(url)          # a cluster started elsewhere: create_database/drop_database only

The server binaries are taken from $PG_BINDIR, else the newest /usr/lib/postgresql/*/bin (Debian's
layout), else the PATH. initdb and postgres refuse to run as root: when root, they run as the
system user `postgres` (the Debian package creates it), which then owns the directory.
"""
import argparse
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

USER = "groupd"
DATABASE = "groupd"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
POLL_INTERVAL = 0.1

# Server settings for tests (fsync deliberately left on).
SETTINGS = {
    "max_connections": "1000",
    "shared_buffers": "128MB",
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
}

# postgres' shutdown modes, by the signal that asks for each; "kill" is a crash.
SHUTDOWN_SIGNALS = {"smart": signal.SIGTERM, "fast": signal.SIGINT, "immediate": signal.SIGQUIT, "kill": signal.SIGKILL}

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class ClusterError(RuntimeError):
    pass


def find_bindir() -> Path:
    """The directory of initdb, postgres, pg_isready and psql."""
    if os.environ.get("PG_BINDIR"):
        return Path(os.environ["PG_BINDIR"])

    def version(path: Path):
        return [int(part) if part.isdigit() else 0 for part in path.parent.name.split(".")]

    candidates = sorted((p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "postgres").exists()),
                        key=version)
    if candidates:
        return candidates[-1]
    found = shutil.which("postgres") or shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    raise ClusterError("PostgreSQL server binaries not found (no /usr/lib/postgresql/*/bin, no postgres on the PATH; "
                       "set PG_BINDIR, or install the `postgresql` package: scripts/install-deps.sh)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server_user():
    """The `postgres` system user's (uid, gid) when this process is root (the server refuses to
    run as root), else None."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam("postgres")
    except KeyError:
        raise ClusterError("running as root, and there is no `postgres` system user to run initdb/postgres as "
                           "(install the `postgresql` package: scripts/install-deps.sh)") from None
    return entry.pw_uid, entry.pw_gid


def _as_server_user(command):
    """`command`, run as `postgres` when this process is root: through `setpriv` (util-linux), which
    execs it, so the pid Popen returns is the server's own. Not through Popen's `user=`: with it
    Python forks instead of using vfork, and a forked copy of a test process whose grpcio threads
    are busy can crash in grpcio's fork handlers before it reaches exec (`ev_epoll1_linux.cc Check
    failed: next_worker->state == KICKED`, then signal 11: what looked like postgres dying at start)."""
    run_as = _server_user()
    if run_as is None:
        return command
    uid, gid = run_as
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--", *command]


def _server_env():
    env = dict(os.environ, LC_ALL="C", LANG="C")
    env.pop("PGDATA", None)
    return env


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, which only waits to be reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _is_postmaster_of(pid: int, data_dir: Path) -> bool:
    """Whether `pid` is the postgres serving `data_dir` (not another process that got the pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return _alive(pid)  # no /proc: trust the state file
    return str(data_dir).encode() in cmdline


def _children(pid: int) -> list:
    """The pids whose parent is `pid` (postgres' children each lead a process group of their own,
    so they are not in the postmaster's)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _is_postgres(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() in ("postgres", "postmaster")
    except OSError:
        return False


def _tail(path: Path, lines=40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no server log)"


class PostgresCluster:
    """One PostgreSQL server of a temporary directory (`dir`: `data/` and `postgres.log` in it, and
    the unix socket), on 127.0.0.1:`port`, superuser `groupd` without password."""

    def __init__(self, base_dir=None, settings=None, bindir=None):
        self.base_dir = base_dir
        self.settings = dict(SETTINGS, **(settings or {}))
        self.bindir = Path(bindir) if bindir else None
        self.dir = None
        self.port = None
        self.pid = None
        self.host = "127.0.0.1"
        self.user = USER
        self._process = None  # the Popen of the server when this process started it
        self._owned = True  # False for attach(): a server someone else runs

    # --- where -------------------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    @property
    def log(self) -> Path:
        return self.dir / "postgres.log"

    @property
    def url(self) -> str:
        """The URL of the database `groupd`."""
        return self.url_for(DATABASE)

    def url_for(self, database: str) -> str:
        return f"postgres://{self.user}@{self.host}:{self.port}/{database}"

    def _bin(self, name: str) -> str:
        if self.bindir is None:
            self.bindir = find_bindir()
        path = self.bindir / name
        if path.exists():
            return str(path)
        found = shutil.which(name)
        if found:
            return found
        raise ClusterError(f"{name} not found in {self.bindir} nor on the PATH")

    # --- life --------------------------------------------------------------------------------

    def start(self):
        """initdb, the server, the database `groupd`. Returns self."""
        if self.dir is not None:
            raise ClusterError("this cluster was started already")
        run_as = _server_user()
        self.dir = Path(tempfile.mkdtemp(prefix="groupd-pg-", dir=self.base_dir))
        try:
            if run_as:
                os.chown(self.dir, *run_as)
            result = subprocess.run(
                _as_server_user([self._bin("initdb"), "-D", str(self.data_dir), "-A", "trust", "-U", self.user,
                                 "--no-sync", "-E", "UTF8", "--locale=C"]),
                cwd=self.dir, env=_server_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                timeout=120)
            if result.returncode != 0:
                raise ClusterError(f"initdb failed ({result.returncode}):\n{result.stdout}{result.stderr}")
            # A port found free can be taken before postgres binds it: a few tries.
            for attempt in range(3):
                self.port = free_port()
                try:
                    self.start_server()
                    break
                except ClusterError:
                    if attempt == 2 or "could not bind" not in _tail(self.log, 10):
                        raise
            self.psql(f"CREATE DATABASE {DATABASE}")
            return self
        except BaseException:
            self.stop()
            raise

    def start_server(self):
        """Starts postgres on the existing data directory and port (again, after stop_server) and
        waits until it accepts connections."""
        if not self._owned:
            raise ClusterError("this cluster was attached by URL: it is not this process's to start")
        if self.pid is not None and _alive(self.pid):
            raise ClusterError(f"the server is running already (pid {self.pid})")
        command = [self._bin("postgres"), "-D", str(self.data_dir), "-p", str(self.port),
                   "-c", f"listen_addresses={self.host}", "-c", f"unix_socket_directories={self.dir}"]
        for key, value in self.settings.items():
            command += ["-c", f"{key}={value}"]
        with open(self.log, "ab") as log:
            log.write(f"--- {time.strftime('%H:%M:%S')} pg_cluster: starting postgres on port {self.port}\n".encode())
            log.flush()
            # A session of its own: not signalled by the terminal (or make) on ^C; stop_server does.
            self._process = subprocess.Popen(_as_server_user(command), cwd=self.dir, env=_server_env(),
                                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                             start_new_session=True)
        self.pid = self._process.pid
        self.wait_ready()
        return self

    def wait_ready(self, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        while True:
            if self._process is not None and self._process.poll() is not None:
                code = self._process.returncode
                self.pid = self._process = None
                raise ClusterError(f"postgres exited with {code} while starting; server log:\n{_tail(self.log)}")
            check = subprocess.run([self._bin("pg_isready"), "-q", "-h", self.host, "-p", str(self.port),
                                    "-U", self.user, "-d", "postgres", "-t", "2"],
                                   stdin=subprocess.DEVNULL, capture_output=True)
            if check.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"postgres did not accept connections on {self.host}:{self.port} within "
                                   f"{timeout:.0f} s; server log:\n{_tail(self.log)}")
            time.sleep(POLL_INTERVAL)

    def stop_server(self, mode="fast", timeout=STOP_TIMEOUT):
        """Stops the server and keeps its data: `fast` (disconnects clients, clean shutdown),
        `smart` (waits for clients), `immediate` (no checkpoint: recovery at the next start) or
        `kill` (SIGKILL, a crash). Escalates to SIGKILL after `timeout`."""
        if not self._owned:
            raise ClusterError("this cluster was attached by URL: it is not this process's to stop")
        pid = self.pid
        if pid is None:
            return
        if self._process is None and not _is_postmaster_of(pid, self.data_dir):
            self.pid = None  # already gone (the pid may belong to someone else by now)
            return
        children = _children(pid)
        try:
            os.kill(pid, SHUTDOWN_SIGNALS[mode])
        except ProcessLookupError:
            pass
        if not self._wait_gone(pid, timeout):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if not self._wait_gone(pid, 10):
                raise ClusterError(f"postgres (pid {pid}) survived SIGKILL")
        # After a clean shutdown the children are gone before the postmaster; after a kill they
        # notice its death and exit soon. Either way none may outlive this call (a next start
        # would find the old shared memory in use).
        for last in (False, True):
            deadline = time.monotonic() + 10
            remaining = [child for child in children if _alive(child) and _is_postgres(child)]
            while remaining and time.monotonic() < deadline:
                time.sleep(POLL_INTERVAL)
                remaining = [child for child in remaining if _alive(child) and _is_postgres(child)]
            if not remaining:
                break
            if last:
                raise ClusterError(f"postgres processes {remaining} survived SIGKILL")
            for child in remaining:
                try:
                    os.kill(child, signal.SIGKILL)
                except OSError:
                    pass
        self.pid = self._process = None

    def _wait_gone(self, pid, timeout) -> bool:
        if self._process is not None:
            try:
                self._process.wait(timeout=timeout)
                return True
            except subprocess.TimeoutExpired:
                return False
        deadline = time.monotonic() + timeout
        while _alive(pid):
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL_INTERVAL)
        return True

    def stop(self):
        """Stops the server (if it runs) and removes the directory."""
        if not self._owned:
            return
        try:
            self.stop_server()
        finally:
            if self.dir is not None:
                shutil.rmtree(self.dir, ignore_errors=True)
                self.dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # --- databases ---------------------------------------------------------------------------

    def psql(self, sql: str, database="postgres") -> str:
        """Runs `sql` with psql as the superuser; returns its unaligned output."""
        result = subprocess.run(
            [self._bin("psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", self.host, "-p", str(self.port),
             "-U", self.user, "-d", database, "-c", sql],
            env=dict(os.environ, PGCONNECT_TIMEOUT="10"), stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=120)
        if result.returncode != 0:
            raise ClusterError(f"psql failed ({result.returncode}) on {self.host}:{self.port}/{database}: {sql}\n"
                               f"{result.stderr.strip()}")
        return result.stdout

    def create_database(self, name=None) -> str:
        """A new empty database (a fresh unique name by default); returns its URL."""
        name = name or f"groupd_{uuid.uuid4().hex[:12]}"
        if not _NAME.match(name):
            raise ClusterError(f"database name {name!r}: lower-case letters, digits and _ only")
        self.psql(f"CREATE DATABASE {name}")
        return self.url_for(name)

    def drop_database(self, name_or_url: str):
        """Drops a database (by name or URL), disconnecting whoever is still connected to it."""
        name = urlsplit(name_or_url).path.lstrip("/") if "://" in name_or_url else name_or_url
        if not _NAME.match(name):
            raise ClusterError(f"database name {name!r}: lower-case letters, digits and _ only")
        self.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    # --- elsewhere ---------------------------------------------------------------------------

    @classmethod
    def attach(cls, url: str):
        """The cluster serving `url`, started by someone else (e.g. `make test-postgres`): for
        create_database/drop_database/psql; stop_server/start_server refuse, stop does nothing."""
        parts = urlsplit(url)
        if parts.scheme not in ("postgres", "postgresql") or not parts.hostname or not parts.username:
            raise ClusterError(f"not a postgres://user@host:port/database URL: {url!r}")
        cluster = cls()
        cluster.host = parts.hostname
        cluster.port = parts.port or 5432
        cluster.user = parts.username
        cluster._owned = False
        return cluster

    def state(self) -> dict:
        return {"url": self.url, "pid": self.pid, "dir": str(self.dir), "port": self.port}

    def write_state(self, path):
        path = Path(path)
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(json.dumps(self.state(), indent=2) + "\n")
        temporary.replace(path)

    @classmethod
    def from_state(cls, path):
        """The cluster a `start --state FILE` left running (it can be stopped and restarted)."""
        state = json.loads(Path(path).read_text())
        cluster = cls()
        cluster.dir = Path(state["dir"])
        cluster.port = int(state["port"])
        cluster.pid = int(state["pid"]) if state.get("pid") else None
        return cluster


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="A throw-away PostgreSQL cluster for groupd's tests.")
    parser.add_argument("command", choices=["start", "stop"])
    parser.add_argument("--state", required=True, help="JSON file: written by start, read and removed by stop")
    args = parser.parse_args(argv)
    state = Path(args.state)
    try:
        if args.command == "start":
            if state.exists():
                raise ClusterError(f"{state} exists: a cluster of it may still run (stop it first)")
            cluster = PostgresCluster().start()
            try:
                cluster.write_state(state)
            except BaseException:
                cluster.stop()
                raise
            print(cluster.url)
        else:
            if not state.exists():
                raise ClusterError(f"{state}: no such state file (nothing to stop)")
            PostgresCluster.from_state(state).stop()
            state.unlink()
    except ClusterError as error:
        print(f"pg_cluster: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
