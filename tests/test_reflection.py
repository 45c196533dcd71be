"""gRPC server reflection (v1 and v1alpha) against clients nobody here wrote: grpcio-reflection's
descriptor database, which knows nothing of Protos/, discovers the API and calls CreateGroup with
what it fetched; and raw v1 requests, several on one stream.

grpcio-reflection's own messages (package grpc.reflection.v1alpha) are wire-identical to v1's, so
the raw v1 requests are built with them; the stubs support.py generates leave Protos/grpc/reflection
out, so nothing here registers the reflection protos twice in the default descriptor pool.
"""
import queue
import threading
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from grpc_reflection.v1alpha import reflection_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

import support
from grpc.health.v1 import health_pb2, health_pb2_grpc

V1 = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
V1ALPHA = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
SERVICES = {
    "groupd.v1.ApplicationService", "groupd.v1.EventService", "groupd.v1.GroupService", "groupd.v1.MemberService",
    "groupd.v1.MessageService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
}
NOT_FOUND = grpc.StatusCode.NOT_FOUND.value[0]


def reflection_call(channel, path=V1):
    return channel.stream_stream(path, request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
                                 response_deserializer=reflection_pb2.ServerReflectionResponse.FromString)


def file_names(response):
    return [descriptor_pb2.FileDescriptorProto.FromString(data).name
            for data in response.file_descriptor_response.file_descriptor_proto]


def test_a_client_that_never_saw_the_protos_discovers_and_calls_create_group(groupd):
    with grpc.insecure_channel(groupd.address) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        # No token: discovery runs before a client picks one.
        assert set(database.get_services()) == SERVICES
        pool = descriptor_pool.DescriptorPool(database)  # a fresh pool: nothing from Protos/ in it
        service = pool.FindServiceByName("groupd.v1.GroupService")
        method = service.methods_by_name["CreateGroup"]
        request_class = message_factory.GetMessageClass(method.input_type)
        response_class = message_factory.GetMessageClass(method.output_type)
        request = request_class()
        request.type = method.input_type.fields_by_name["type"].enum_type.values_by_name["GROUP_TYPE_PUBLIC"].number
        request.owner_user_id = "reflected-owner"
        request.profile.name = "found by reflection"
        create = channel.unary_unary(f"/{service.full_name}/{method.name}",
                                     request_serializer=request_class.SerializeToString,
                                     response_deserializer=response_class.FromString)
        response = create(request, metadata=support.admin_md(), timeout=10)
        group_id = response.group.group_id
        assert group_id and response.group.profile.name == "found by reflection"

        # Read back the same way.
        get = service.methods_by_name["GetGroupsInfo"]
        get_request = message_factory.GetMessageClass(get.input_type)(group_ids=[group_id])
        get_response_class = message_factory.GetMessageClass(get.output_type)
        info = channel.unary_unary(f"/{service.full_name}/{get.name}",
                                   request_serializer=type(get_request).SerializeToString,
                                   response_deserializer=get_response_class.FromString)(
            get_request, metadata=support.admin_md(), timeout=10)
        assert [group.profile.name for group in info.groups] == ["found by reflection"]
        assert info.groups[0].owner_user_id == "reflected-owner"

        # Nested names and imports resolve through the same database.
        assert pool.FindMessageTypeByName("google.rpc.BadRequest.FieldViolation").fields_by_name["field"]
        assert pool.FindEnumTypeByName("grpc.health.v1.HealthCheckResponse.ServingStatus")
        assert pool.FindMethodByName("groupd.v1.EventService.Subscribe").server_streaming


@pytest.mark.parametrize("path", [V1, V1ALPHA])
def test_several_requests_on_one_stream_are_answered_in_order(groupd, path):
    requests = [
        reflection_pb2.ServerReflectionRequest(host="h", list_services=""),
        reflection_pb2.ServerReflectionRequest(file_by_filename="groupd/v1/group.proto"),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="groupd.v1.MemberService.KickMembers"),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="groupd.v1.NoSuchThing"),
        reflection_pb2.ServerReflectionRequest(file_containing_extension=reflection_pb2.ExtensionRequest(
            containing_type="groupd.v1.Group", extension_number=100)),
        reflection_pb2.ServerReflectionRequest(all_extension_numbers_of_type="groupd.v1.Group"),
        reflection_pb2.ServerReflectionRequest(all_extension_numbers_of_type="groupd.v1.Nothing"),
        reflection_pb2.ServerReflectionRequest(file_by_filename="groupd/v1/group.proto"),
    ]
    with grpc.insecure_channel(groupd.address) as channel:
        responses = list(reflection_call(channel, path)(iter(requests), timeout=10))
    assert [r.original_request for r in responses] == requests
    listing, group, member, unknown, extension, numbers, unknown_type, group_again = responses
    assert listing.valid_host == "h"
    assert {s.name for s in listing.list_services_response.service} == SERVICES
    # The file first, then its imports, each file once per stream.
    assert file_names(group) == ["groupd/v1/group.proto", "google/protobuf/field_mask.proto",
                                 "google/protobuf/timestamp.proto", "groupd/v1/common.proto"]
    assert file_names(member)[0] == "groupd/v1/member.proto"
    assert not {"groupd/v1/common.proto", "google/protobuf/timestamp.proto"} & set(file_names(member))
    assert unknown.error_response.error_code == NOT_FOUND
    assert "groupd.v1.NoSuchThing" in unknown.error_response.error_message
    assert extension.error_response.error_code == NOT_FOUND
    assert numbers.all_extension_numbers_response.base_type_name == "groupd.v1.Group"
    assert list(numbers.all_extension_numbers_response.extension_number) == []
    assert unknown_type.error_response.error_code == NOT_FOUND
    assert file_names(group_again) == ["groupd/v1/group.proto"]


def test_each_response_comes_before_the_next_request_is_sent(groupd):
    """A true bidirectional stream: the server answers each request as it arrives."""
    outgoing = queue.Queue()

    def requests():
        while True:
            item = outgoing.get()
            if item is None:
                return
            yield item

    with grpc.insecure_channel(groupd.address) as channel:
        call = reflection_call(channel)(requests(), timeout=15)
        for symbol in ["groupd.v1.GroupService", "groupd.v1.Group", "grpc.health.v1.Health.Watch"]:
            outgoing.put(reflection_pb2.ServerReflectionRequest(file_containing_symbol=symbol))
            response = next(call)
            assert response.original_request.file_containing_symbol == symbol
            assert response.HasField("file_descriptor_response")
        outgoing.put(None)
        assert list(call) == []
        assert call.code() == grpc.StatusCode.OK


def test_every_file_of_protos_is_served(groupd):
    protos = Path(support.PROTOS)
    names = sorted(str(p.relative_to(protos)) for p in protos.rglob("*.proto"))
    requests = [reflection_pb2.ServerReflectionRequest(file_by_filename=name) for name in names]
    with grpc.insecure_channel(groupd.address) as channel:
        responses = list(reflection_call(channel)(iter(requests), timeout=10))
    for name, response in zip(names, responses, strict=True):
        assert file_names(response)[0] == name, response


def test_a_request_that_asks_nothing_ends_the_stream_with_invalid_argument(groupd):
    with grpc.insecure_channel(groupd.address) as channel:
        call = reflection_call(channel)(iter([reflection_pb2.ServerReflectionRequest(host="only a host")]), timeout=10)
        with pytest.raises(grpc.RpcError) as error:
            list(call)
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_reflection_can_be_turned_off(fresh_groupd):
    server = fresh_groupd()
    server.config.write_text(server.config.read_text() + "reflection: false\n")
    server.start()
    with grpc.insecure_channel(server.address) as channel:
        for path in (V1, V1ALPHA):
            call = reflection_call(channel, path)(iter([reflection_pb2.ServerReflectionRequest(list_services="")]),
                                                  timeout=10)
            with pytest.raises(grpc.RpcError) as error:
                list(call)
            assert error.value.code() == grpc.StatusCode.UNIMPLEMENTED
            assert "reflection: false" in error.value.details()
        # Health no longer counts them among the services.
        with pytest.raises(grpc.RpcError) as error:
            health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="grpc.reflection.v1.ServerReflection"), timeout=10)
        assert error.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_stream_left_open_does_not_hold_the_server(groupd):
    """A reflection stream the client abandons mid-way is cancelled, and others are served."""
    done = threading.Event()

    def requests():
        yield reflection_pb2.ServerReflectionRequest(list_services="")
        done.wait(10)

    with grpc.insecure_channel(groupd.address) as channel:
        call = reflection_call(channel)(requests(), timeout=15)
        assert next(call).HasField("list_services_response")
        call.cancel()
        done.set()
        assert call.code() == grpc.StatusCode.CANCELLED
        again = list(reflection_call(channel)(iter([reflection_pb2.ServerReflectionRequest(list_services="")]),
                                              timeout=10))
        assert len(again) == 1
