"""A first call to groupd from Python grpcio: create a Public group and read it back.

usage: GROUPD_TOKEN=<admin token> python3 scripts/first_call.py [HOST:PORT]
(`make run` prints the token and this command.) Stubs are generated from Protos/ into a
temporary directory with grpcio-tools, as any client of groupd would do.
"""
import os
import sys
import tempfile
from pathlib import Path

import grpc
import grpc_tools
from grpc_tools import protoc

protos = Path(__file__).resolve().parent.parent / "Protos"
stubs = tempfile.mkdtemp(prefix="groupd-stubs-")
files = [str(p.relative_to(protos)) for p in protos.rglob("*.proto")]
protoc.main(["protoc", f"-I{protos}", f"-I{Path(grpc_tools.__file__).parent / '_proto'}",
             f"--python_out={stubs}", f"--grpc_python_out={stubs}", *files])
sys.path.insert(0, stubs)

from groupd.v1 import common_pb2, group_pb2, group_pb2_grpc  # noqa: E402

address = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051"
metadata = [("authorization", "Bearer " + os.environ["GROUPD_TOKEN"])]
with grpc.insecure_channel(address) as channel:
    groups = group_pb2_grpc.GroupServiceStub(channel)
    created = groups.CreateGroup(group_pb2.CreateGroupRequest(
        type=common_pb2.GROUP_TYPE_PUBLIC,
        owner_user_id="alice",
        profile=common_pb2.GroupProfile(name="Book club", introduction="We read."),
        members=[group_pb2.InitialMember(user_id="bob"), group_pb2.InitialMember(user_id="carol")],
    ), metadata=metadata)
    print("created", created.group.group_id)
    info = groups.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=[created.group.group_id]), metadata=metadata)
    print(info.groups[0])
