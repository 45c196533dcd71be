"""Fixtures for the interop tests (see support.py for the server harness and token minting)."""
import shutil
import tempfile
from pathlib import Path

import pytest

from support import Groupd


@pytest.fixture(scope="session")
def groupd():
    """One groupd shared by the tests that leave it serving."""
    workdir = Path(tempfile.mkdtemp(prefix="groupd-interop-"))
    server = Groupd(workdir).start()
    yield server
    server.stop()
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def fresh_groupd():
    """A groupd of the test's own, for tests that stop or kill it."""
    workdir = Path(tempfile.mkdtemp(prefix="groupd-own-"))
    servers = []

    def make(**kwargs):
        server = Groupd(workdir, **kwargs)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def channel(groupd):
    import grpc

    with grpc.insecure_channel(groupd.address) as ch:
        yield ch
