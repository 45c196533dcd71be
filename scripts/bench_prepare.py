"""Prepares a benchmark run against a started groupd: creates groups through grpcio and writes
the gRPC-framed request bodies and the token h2load sends.

usage: bench_prepare.py PORT OUTDIR [GROUPS]
"""
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import grpc  # noqa: E402
from support import admin_md, mint_token  # noqa: E402
from groupd.v1 import group_pb2, group_pb2_grpc, common_pb2  # noqa: E402


def frame(message) -> bytes:
    payload = message.SerializeToString()
    return struct.pack(">BI", 0, len(payload)) + payload


def main():
    port, out = int(sys.argv[1]), Path(sys.argv[2])
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    out.mkdir(parents=True, exist_ok=True)
    md = admin_md()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = group_pb2_grpc.GroupServiceStub(channel)
        futures = []
        for index in range(count):
            request = group_pb2.CreateGroupRequest(
                group_id=f"bench-{index}", type=common_pb2.GROUP_TYPE_PUBLIC,
                owner_user_id=f"owner-{index % 50}",
                profile=common_pb2.GroupProfile(name=f"bench group {index}"))
            futures.append(stub.CreateGroup.future(request, metadata=md))
        for future in futures:
            try:
                future.result()
            except grpc.RpcError as error:
                if error.code() != grpc.StatusCode.ALREADY_EXISTS:
                    raise
    (out / "health.bin").write_bytes(b"\0\0\0\0\0")
    (out / "getgroupsinfo.bin").write_bytes(frame(group_pb2.GetGroupsInfoRequest(group_ids=["bench-7"])))
    (out / "creategroup.bin").write_bytes(frame(group_pb2.CreateGroupRequest(
        type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id="owner-1", profile=common_pb2.GroupProfile(name="bench group"))))
    (out / "token").write_text(mint_token(exp_in=24 * 3600))


if __name__ == "__main__":
    main()
