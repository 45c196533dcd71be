"""Fixtures for the interop tests (see support.py for the server harness and token minting).

Without GROUPD_TEST_POSTGRES_URL every groupd runs on SQLite under its data_dir. With it (`make
test-postgres`), every groupd of the fixtures runs on a PostgreSQL database of that cluster: the
session `groupd` is two nodes on one database with clients spread over both, each `fresh_groupd()`
a node on a new database of its own unless `database=` names one.

Markers: `sqlite_only("why")` skips a test under PostgreSQL, `postgres_only` skips it without.
"""
import itertools
import os
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

import support
from support import Groupd, GroupdNodes


def _ports_of_this_run():
    """`support.free_port` from GROUPD_TEST_PORTS ("LOW-HIGH") when set: `make test` runs its pytest
    passes at once, each with a range of its own below the kernel's ephemeral ports, so one pass can
    never be handed a port another pass's groupd is about to bind (free_port closes its socket before
    groupd binds) nor one a client connection holds. Under pytest-xdist each worker takes an equal
    slice. The ports are taken in turn, each checked free by a bind."""
    spec = os.environ.get("GROUPD_TEST_PORTS")
    if not spec:
        return None
    low, high = (int(part) for part in spec.split("-"))
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:])
    size = (high - low + 1) // workers
    low += worker * size
    ports = itertools.cycle(range(low, low + size))

    def free_port() -> int:
        for _ in range(size):
            port = next(ports)
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
        raise RuntimeError(f"no free port in {low}-{low + size - 1} (GROUPD_TEST_PORTS={spec})")

    return free_port


# Before the test modules are imported, so that their `from support import free_port` gets it too.
_free_port = _ports_of_this_run()
if _free_port is not None:
    support.free_port = _free_port


def pytest_configure(config):
    config.addinivalue_line("markers", "sqlite_only(reason): meaningful on the SQLite store only (skipped under "
                                       "GROUPD_TEST_POSTGRES_URL)")
    config.addinivalue_line("markers", "postgres_only: needs the PostgreSQL store (skipped without "
                                       "GROUPD_TEST_POSTGRES_URL, i.e. outside make test-postgres)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        sqlite_only = item.get_closest_marker("sqlite_only")
        if support.POSTGRES_URL and sqlite_only:
            why = sqlite_only.args[0] if sqlite_only.args else sqlite_only.kwargs.get("reason", "")
            item.add_marker(pytest.mark.skip(reason="SQLite store only" + (f": {why}" if why else "")))
        if not support.POSTGRES_URL and item.get_closest_marker("postgres_only"):
            item.add_marker(pytest.mark.skip(reason="needs PostgreSQL: GROUPD_TEST_POSTGRES_URL (make test-postgres)"))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keeps each phase's report on the item (`item.rep_call`), for fixtures that add what they know
    when the test failed."""
    report = yield
    setattr(item, "rep_" + report.when, report)
    return report


def _report_servers(request, servers):
    """When the test failed: each server's exit status and the end of its log, printed in teardown
    (pytest shows it with the failure) before the work directory is removed."""
    report = getattr(request.node, "rep_call", None)
    if report is None or not report.failed:
        return
    for server in servers:
        process = server.process
        status = "never started" if process is None else (
            "running" if process.poll() is None else f"exited with {process.returncode}")
        try:
            lines = server.log.read_text(errors="replace").splitlines()[-80:]
        except OSError as error:
            lines = [f"(no log: {error})"]
        print(f"--- groupd on {server.address}: {status}; last {len(lines)} log lines ---")
        print("\n".join(lines))


@pytest.fixture(scope="session")
def postgres():
    """The PostgreSQL cluster of GROUPD_TEST_POSTGRES_URL (create_database(), drop_database(), psql());
    it serves every test, so it is not to be stopped: see own_postgres. Skips without the variable."""
    cluster = support.postgres_cluster()
    if cluster is None:
        pytest.skip("needs PostgreSQL: GROUPD_TEST_POSTGRES_URL (make test-postgres)")
    return cluster


@pytest.fixture
def own_postgres(postgres):
    """A PostgreSQL cluster of the test's own (scripts/pg_cluster.PostgresCluster, started), which it
    may stop and restart: stop_server() (mode "fast", "immediate" or "kill") makes it unreachable,
    start_server() brings it back on the same port with the same data. Removed afterwards."""
    from pg_cluster import PostgresCluster  # on sys.path through support.postgres_cluster()

    cluster = PostgresCluster().start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def groupd():
    """One groupd shared by the tests that leave it serving; under PostgreSQL two nodes on one
    database (a GroupdNodes: `address` and `port` alternate between them, `nodes` are the two)."""
    workdir = Path(tempfile.mkdtemp(prefix="groupd-interop-"))
    if support.POSTGRES_URL:
        database = support.new_database()
        nodes = []
        for index in range(2):
            (workdir / f"node{index}").mkdir()
            nodes.append(Groupd(workdir / f"node{index}", database=database))
        server = GroupdNodes(nodes)
    else:
        server = Groupd(workdir)
    server.start()
    yield server
    server.stop()
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def fresh_groupd(request):
    """A groupd of the test's own, for tests that stop or kill it: `fresh_groupd(**Groupd keywords)`.

    On SQLite every server of a test shares the work directory, so a second one (started after the
    first stopped) has the same data. Under PostgreSQL each gets a work directory of its own and a
    new empty database, unless `database=` gives one: `fresh_groupd(database=first.database)` is a
    node on the same database as `first` (both may run at once), and
    `fresh_groupd(database=own_postgres.create_database())` one on a cluster the test can stop.
    """
    workdir = Path(tempfile.mkdtemp(prefix="groupd-own-"))
    servers, created = [], []

    def make(database=None, **kwargs):
        if support.POSTGRES_URL:
            if database is None:
                database = support.new_database()
                created.append(database)
            node_dir = workdir / f"node{len(servers)}"
            node_dir.mkdir()
            server = Groupd(node_dir, database=database, **kwargs)
        else:
            server = Groupd(workdir, database=database, **kwargs)
        servers.append(server)
        return server

    yield make
    _report_servers(request, servers)
    for server in servers:
        server.stop()
    for database in created:
        try:
            support.postgres_cluster().drop_database(database)
        except Exception as error:  # the cluster is thrown away at the end anyway
            print(f"could not drop {database}: {error}")
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def channel(groupd):
    import grpc

    with grpc.insecure_channel(groupd.address) as ch:
        yield ch
