"""An OTLP/gRPC trace collector for benchmarks: accepts every TraceService/Export and counts the
requests and bytes without decoding them (grpcio's C core does the HTTP/2; the handler sees raw
bytes), so that receiving a traced groupd's spans costs little next to the load generator it
shares a core with. Prints `listening <port>` once serving, then, on SIGTERM, `requests <n> bytes
<n>` and exits.

usage: otlp_sink.py [PORT]      (0 or absent: a free port)
"""
import signal
import sys
import threading
from concurrent import futures

import grpc


def main():
    counts = {"requests": 0, "bytes": 0}
    lock = threading.Lock()

    def export(request: bytes, context) -> bytes:
        with lock:
            counts["requests"] += 1
            counts["bytes"] += len(request)
        return b""  # an empty ExportTraceServiceResponse

    handler = grpc.method_handlers_generic_handler("opentelemetry.proto.collector.trace.v1.TraceService", {
        "Export": grpc.unary_unary_rpc_method_handler(export),
    })
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port(f"127.0.0.1:{int(sys.argv[1]) if len(sys.argv) > 1 else 0}")
    server.start()
    print(f"listening {port}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    server.stop(None)
    print(f"requests {counts['requests']} bytes {counts['bytes']}", flush=True)


if __name__ == "__main__":
    main()
