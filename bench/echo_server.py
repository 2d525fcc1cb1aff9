"""A plain gRPC echo server: the baseline the broker's data path is measured against.

``/aiorocketmq.bench.Echo/Echo``, registered with a generic handler and no (de)serializers,
answers the request's bytes unchanged: what grpc.aio itself costs per call, with no protobuf
parsing and no application work. ``/aiorocketmq.bench.Echo/EchoSend`` parses the request as a
``SendMessageRequest`` and serializes it back: the same plus what protobuf costs. Both run on
the broker's event loop (``aiorocketmq.runtime.run``) with the broker's server options, so the
difference between echo and broker is the broker's own work.

``python -m bench.echo_server --listen 127.0.0.1:PORT`` serves until SIGINT or SIGTERM. This
module is a helper of ``bench.throughput``, not a benchmark of its own.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import grpc

from aiorocketmq.protocol.rpc import new_server
from aiorocketmq.protocol.v1 import broker_pb2
from aiorocketmq.runtime import run, stop_on_signals

__all__ = ["ECHO_METHOD", "ECHO_SEND_METHOD", "ECHO_SERVICE", "main", "serve"]

ECHO_SERVICE = "aiorocketmq.bench.Echo"
ECHO_METHOD = f"/{ECHO_SERVICE}/Echo"
ECHO_SEND_METHOD = f"/{ECHO_SERVICE}/EchoSend"


async def _echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return request


async def _echo_send(
    request: broker_pb2.SendMessageRequest, context: grpc.aio.ServicerContext
) -> broker_pb2.SendMessageRequest:
    return request


def _handler() -> grpc.GenericRpcHandler:
    return grpc.method_handlers_generic_handler(
        ECHO_SERVICE,
        {
            "Echo": grpc.unary_unary_rpc_method_handler(_echo),
            "EchoSend": grpc.unary_unary_rpc_method_handler(
                _echo_send,
                request_deserializer=broker_pb2.SendMessageRequest.FromString,
                response_serializer=broker_pb2.SendMessageRequest.SerializeToString,
            ),
        },
    )


async def serve(listen: str) -> None:
    """Serve the echo method on ``listen`` until SIGINT or SIGTERM."""
    stop = stop_on_signals()
    server = new_server()
    server.add_generic_rpc_handlers((_handler(),))
    if server.add_insecure_port(listen) == 0:
        raise OSError(f"cannot listen on {listen}")
    await server.start()
    print(f"echo server listening on {listen}", flush=True)
    try:
        await stop.wait()
    finally:
        await server.stop(grace=1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.echo_server", description="A plain gRPC echo server (a baseline)."
    )
    parser.add_argument("--listen", required=True, help="host:port to serve on")
    args = parser.parse_args(argv)
    try:
        run(serve(args.listen))
    except (OSError, RuntimeError) as e:
        print(f"echo server: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
