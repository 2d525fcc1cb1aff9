"""The gRPC edges every role shares: server guard, channel and server options, client calls.

Rules: a servicer method never lets an exception escape as a crash: ``guard`` maps ``MQError``
to its status and response code, and anything else to INTERNAL (logged with its traceback);
every client call has a deadline. A client call ends in its answer or a typed ``MQError``;
``asyncio.CancelledError`` comes out of ``call`` only when the caller's own task was cancelled
(grpc.aio also raises it when gRPC cancels a call, e.g. because its channel was closed: that
becomes ``ServiceNotAvailable``, so no caller mistakes it for its own shutdown).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

import grpc

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.errors import (
    RESPONSE_CODE_KEY,
    MQError,
    ServiceNotAvailable,
    from_rpc_error,
)

__all__ = [
    "CHANNEL_OPTIONS",
    "DEFAULT_RPC_TIMEOUT",
    "SERVER_OPTIONS",
    "call",
    "caller_cancelled",
    "guard",
    "insecure_channel",
    "new_server",
]

log = get_logger("aiorocketmq.protocol.rpc")

# mqClientApiTimeout: most metadata RPCs get 3 s.
DEFAULT_RPC_TIMEOUT = 3.0

# Keepalive lets both sides notice a dead peer (a half-open TCP connection, a stopped process)
# in seconds rather than at the 120 s channel expiry, like Netty's idle handler in RocketMQ.
# gRPC closes a transport whose ping goes unanswered only after ``grpc.http2.ping_timeout_ms``
# (a minute by default), whatever ``keepalive_timeout_ms`` says: both are set.
CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.http2.ping_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.enable_retries", 0),
    # Each channel keeps its own connection state: gRPC otherwise shares subchannels across the
    # process, so a fresh channel to a restarted server inherits another channel's backoff.
    ("grpc.use_local_subchannel_pool", 1),
    # Reconnect within a second or two of a peer coming back (gRPC's default backoff grows to
    # 120 s: a broker would re-register, or a consumer reopen its channel, minutes late).
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2_000),
]
SERVER_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.http2.ping_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
    ("grpc.http2.max_ping_strikes", 0),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.so_reuseport", 0),
]


def insecure_channel(addr: str) -> grpc.aio.Channel:
    """A client channel to ``host:port`` with the shared keepalive options."""
    return grpc.aio.insecure_channel(addr, options=CHANNEL_OPTIONS)


def new_server() -> grpc.aio.Server:
    """A server with the shared options."""
    return grpc.aio.server(options=SERVER_OPTIONS)


S = TypeVar("S")
Req = TypeVar("Req")
Resp = TypeVar("Resp")
P = ParamSpec("P")


def guard(
    method: Callable[[S, Req, grpc.aio.ServicerContext], Awaitable[Resp]],
) -> Callable[[S, Req, grpc.aio.ServicerContext], Awaitable[Resp]]:
    """Wrap a unary servicer method: typed errors become statuses; nothing crashes the server."""

    @functools.wraps(method)
    async def wrapper(self: S, request: Req, context: grpc.aio.ServicerContext) -> Resp:
        start = time.perf_counter()
        code = ResponseCode.SUCCESS
        try:
            return await method(self, request, context)
        except MQError as e:
            code = e.response_code
            await abort_with(context, e)
        except grpc.aio.AbortError:
            raise
        except Exception as e:  # the server keeps serving; the caller learns what broke
            code = ResponseCode.SYSTEM_ERROR
            log.exception("rpc failed", rpc=method.__name__)
            await abort_with(context, MQError(f"{method.__name__} failed: {e!r}"))
        finally:
            # The servicer's metrics hook, when it has one (the latency per request code).
            observe = getattr(self, "observe_rpc", None)
            if observe is not None:
                observe(method.__name__, int(code), time.perf_counter() - start)
        raise AssertionError("unreachable")  # abort always raises

    return wrapper


async def abort_with(context: grpc.aio.ServicerContext, error: MQError) -> None:
    """End the call with the error's status, message and response code."""
    context.set_trailing_metadata(((RESPONSE_CODE_KEY, str(int(error.response_code))),))
    await context.abort(error.grpc_status, error.message)


def caller_cancelled() -> bool:
    """True when the running task was asked to cancel (its owner's shutdown, a timeout, the user).

    grpc.aio raises ``asyncio.CancelledError`` out of a call in two cases: the awaiting task was
    cancelled, or gRPC cancelled the call itself (its channel closed under it). Only the first
    is a cancellation the caller must see; the task's pending cancel requests tell them apart.
    """
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def call(
    method: Callable[..., Awaitable[Resp]],
    request: Req,
    timeout: float = DEFAULT_RPC_TIMEOUT,
) -> Resp:
    """Call a unary stub method with a deadline; failures raise the typed ``MQError``.

    A call that gRPC cancelled without the caller asking raises ``ServiceNotAvailable``.
    """
    try:
        return await method(request, timeout=timeout)
    except grpc.aio.AioRpcError as e:
        raise from_rpc_error(e) from None
    except asyncio.CancelledError:
        if caller_cancelled():
            raise
        raise ServiceNotAvailable(
            "the call was cancelled on the client side (its gRPC channel was closed)",
            grpc_status=grpc.StatusCode.CANCELLED,
        ) from None
