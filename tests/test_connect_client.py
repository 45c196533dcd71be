"""groupd's Connect protocol through a client no one here wrote: the PyPI `connectrpc` package
(0.13), its client code generated from Protos/ at test time by its protoc plugin
(`protoc-gen-connectrpc`, option `protobuf=google` for the google.protobuf messages support.py
generates, `io=sync`), over its own HTTP stack (pyqwest, reqwest underneath) in HTTP/1.1 and in
HTTP/2 with prior knowledge, in binary protobuf and in JSON. The client sends its requests
gzip-compressed and accepts gzip responses, as it does by default.

Covered: CreateGroup, GetGroupsInfo, errors with their code and ErrorInfo detail, and Subscribe as a
stream (an item the test causes, then a resume from its cursor).
"""
import os
import shlex
import stat
import sys

import pytest
from grpc_tools import protoc
import grpc_tools
from google.rpc import error_details_pb2

from support import PROTOS, STUBS, admin_md, uid, user_md

SYNC_PLUGIN_OPTIONS = "protobuf=google,io=sync"


def _generate_connect_clients():
    """groupd/v1/*_connect.py beside the grpc stubs (the generated code imports its messages from
    the *_pb2 modules next to it)."""
    wrapper = STUBS / "protoc-gen-connectrpc"
    # The plugin of the Python running the tests, whatever is on PATH.
    wrapper.write_text("#!/bin/sh\nexec " + shlex.quote(sys.executable) +
                       " -c 'from protoc_gen_connectrpc import main; main()'\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    protos = sorted(str(p.relative_to(PROTOS)) for p in (PROTOS / "groupd" / "v1").glob("*.proto"))
    args = ["protoc", f"-I{PROTOS}", f"-I{well_known}", f"--plugin=protoc-gen-connectrpc={wrapper}",
            f"--connectrpc_out={STUBS}", f"--connectrpc_opt={SYNC_PLUGIN_OPTIONS}", *protos]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc-gen-connectrpc failed on Protos/")


_generate_connect_clients()

import pyqwest  # noqa: E402
from connectrpc.code import Code  # noqa: E402
from connectrpc.compat import google_protobuf_json_codec  # noqa: E402
from connectrpc.errors import ConnectError  # noqa: E402
from groupd.v1 import common_pb2, event_pb2, group_pb2, message_pb2, message_pb2_grpc  # noqa: E402
from groupd.v1 import event_connect, group_connect  # noqa: E402

CODECS = ["proto", "json"]
HTTP_VERSIONS = ["http1", "http2"]


@pytest.fixture(scope="module", params=HTTP_VERSIONS)
def http_client(request):
    version = pyqwest.HTTPVersion.HTTP2 if request.param == "http2" else pyqwest.HTTPVersion.HTTP1
    client = pyqwest.SyncClient(pyqwest.SyncHTTPTransport(http_version=version))
    yield client


def connect_kwargs(codec, http_client):
    kwargs = {"http_client": http_client}
    if codec == "json":
        # Strict: a field groupd writes that the proto does not have fails the decoding.
        kwargs["codec"] = google_protobuf_json_codec(ignore_unknown_fields=False)
    return kwargs


@pytest.fixture(params=CODECS)
def codec(request):
    return request.param


@pytest.fixture
def groups(groupd, http_client, codec):
    with group_connect.GroupServiceClientSync(f"http://{groupd.address}",
                                              **connect_kwargs(codec, http_client)) as client:
        yield client


@pytest.fixture
def events(groupd, http_client, codec):
    with event_connect.EventServiceClientSync(f"http://{groupd.address}",
                                              **connect_kwargs(codec, http_client)) as client:
        yield client


@pytest.fixture(scope="module")
def messages(groupd):
    import grpc

    with grpc.insecure_channel(groupd.address) as channel:
        yield message_pb2_grpc.MessageServiceStub(channel)


def headers(metadata):
    return dict(metadata)


def create(groups, group_id, owner="owner", name="connectrpc"):
    return groups.create_group(group_pb2.CreateGroupRequest(
        group_id=group_id, type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id=owner,
        profile=common_pb2.GroupProfile(name=name, introduction="from a client no one here wrote")),
        headers=headers(admin_md()), timeout_ms=10000)


def error_info(error):
    for detail in error.details:
        if detail.type_name == "google.rpc.ErrorInfo":
            return error_details_pb2.ErrorInfo.FromString(detail.message_bytes)
    return None


def test_create_group_and_get_groups_info(groups):
    gid, owner = uid("g"), uid("owner")
    created = create(groups, gid, owner, "créé ✓")
    assert (created.group.group_id, created.group.owner_user_id, created.group.profile.name) == (gid, owner, "créé ✓")
    info = groups.get_groups_info(group_pb2.GetGroupsInfoRequest(group_ids=[gid, gid + "-none"]),
                                  headers=headers(admin_md()), timeout_ms=10000)
    assert [g.group_id for g in info.groups] == [gid]
    assert info.groups[0].member_count == 1 and info.groups[0].create_time.seconds > 0
    assert [(f.group_id, f.reason) for f in info.failures] == [(gid + "-none", "GROUP_NOT_FOUND")]


def test_large_response_comes_back_whole(groups):
    """Enough groups for a response over compression.min_bytes: gzip-compressed by groupd, inflated
    by the client's HTTP stack."""
    gids = [uid("big") for _ in range(8)]
    for gid in gids:
        create(groups, gid)
    info = groups.get_groups_info(group_pb2.GetGroupsInfoRequest(group_ids=gids), headers=headers(admin_md()),
                                  timeout_ms=10000)
    assert [g.group_id for g in info.groups] == gids


def test_errors_carry_code_and_error_info(groups):
    gid = uid("g")
    create(groups, gid)
    with pytest.raises(ConnectError) as caught:
        create(groups, gid)
    assert caught.value.code == Code.ALREADY_EXISTS, caught.value
    info = error_info(caught.value)
    assert (info.reason, info.domain, info.metadata["group_id"]) == ("GROUP_ID_TAKEN", "groupd", gid)
    with pytest.raises(ConnectError) as caught:
        groups.get_groups_info(group_pb2.GetGroupsInfoRequest(group_ids=[gid]), timeout_ms=10000)
    assert caught.value.code == Code.UNAUTHENTICATED and error_info(caught.value).reason == "TOKEN_MISSING"
    with pytest.raises(ConnectError) as caught:
        groups.create_group(group_pb2.CreateGroupRequest(
            group_id=uid("g"), type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id="o",
            profile=common_pb2.GroupProfile(name="n" * 31)), headers=headers(admin_md()), timeout_ms=10000)
    assert caught.value.code == Code.INVALID_ARGUMENT
    info = error_info(caught.value)
    assert (info.reason, info.metadata["field"], info.metadata["limit"]) == ("INVALID_ARGUMENT", "profile.name", "30")


def test_subscribe_stream_and_resume(groups, events, messages):
    gid, owner = uid("g"), uid("owner")
    create(groups, gid, owner)
    request = lambda cursor="": event_pb2.SubscribeRequest(group_ids=[gid], cursor=cursor)
    stream = events.subscribe(request(), headers=headers(user_md(owner)), timeout_ms=30000)
    # Nothing before the subscription: caught_up at once, then what the test sends.
    assert next(stream).WhichOneof("item") == "caught_up"
    for text in ("one", "two", "three"):
        messages.SendGroupMessage(message_pb2.SendGroupMessageRequest(
            group_id=gid, client_message_id=uid("m"), type="text", text=text), metadata=user_md(owner), timeout=10)
    first, second, third = next(stream), next(stream), next(stream)
    stream.close()
    assert [item.message.text for item in (first, second, third)] == ["one", "two", "three"]
    resumed = events.subscribe(request(first.cursor), headers=headers(user_md(owner)), timeout_ms=30000)
    backlog = []
    for item in resumed:
        backlog.append(item)
        if item.WhichOneof("item") == "caught_up":
            break
    resumed.close()
    assert [item.message.text for item in backlog if item.WhichOneof("item") == "message"] == ["two", "three"]


def test_subscribe_error_ends_the_stream(events):
    with pytest.raises(ConnectError) as caught:
        list(events.subscribe(event_pb2.SubscribeRequest(cursor="not a cursor"), headers=headers(admin_md()),
                              timeout_ms=10000))
    assert caught.value.code == Code.INVALID_ARGUMENT, caught.value
    assert error_info(caught.value).reason == "INVALID_ARGUMENT"
