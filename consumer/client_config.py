"""``ClientConfig``: a client instance's timings, with RocketMQ's defaults (spec 1.1, 11).

Tests and users shrink them through these same fields (e.g. ``heartbeat_broker_interval_ms``).
"""

from __future__ import annotations

from dataclasses import dataclass

from aiorocketmq.protocol.data_path import check_data_transport

__all__ = ["ClientConfig"]


@dataclass(slots=True)
class ClientConfig:
    """Timings of one ``MQClientInstance`` (shared by its consumers and producers)."""

    poll_name_server_interval_ms: int = 30_000
    heartbeat_broker_interval_ms: int = 30_000
    persist_consumer_offset_interval_ms: int = 5_000
    mq_client_api_timeout_ms: int = 3_000
    rebalance_wait_interval_ms: int = 20_000
    rebalance_min_interval_ms: int = 1_000
    # Ours (RocketMQ's remoting reconnects on demand, at the next request): a broker's channel
    # stream that ended or failed to open is reopened after a delay that starts here and doubles
    # with each failure in a row, up to the max, each drawn at random from its upper half
    # (jitter, so the clients of a restarted broker do not all come back at once). Reopening
    # never gives up; only the client's shutdown ends it.
    channel_reconnect_delay_ms: int = 200
    channel_reconnect_max_delay_ms: int = 5_000
    # Ours: the client instances of one process (and event loop) that set this share one gRPC
    # channel per broker and name server (``aiorocketmq.protocol.channels``), and one remoting
    # connection per broker when pulls go over remoting, where each would otherwise open
    # its own: for a process hosting many consumers of one group, each with its own client id.
    # Each instance keeps its own channel stream, so brokers see it as before.
    share_connections: bool = False
    # Ours, with share_connections: the fenced acquires of the process's client instances to
    # one broker asked for within this long of one another go in one AcquireQueuesBatch call
    # (``aiorocketmq.consumer.acquire_batch``). False: each goes alone, as AcquireQueues.
    batch_acquires: bool = True
    acquire_batch_ms: float = 2.0
    # ... only in a burst: while this many acquires are in calls still open to the broker
    # (fewer: each goes at once, alone; 0: every acquire waits acquire_batch_ms for others).
    acquire_batch_threshold: int = 8
    # Ours: a notification's member list (our brokers send one) is used by the rebalance it
    # wakes only if read within this long of its sending (the broker's clock against ours);
    # an older one, or one from a broker whose clock is behind ours by more, leaves the pass
    # to ask a broker for the members, as RocketMQ always does.
    notified_ids_max_age_ms: int = 5_000
    # Ours: heartbeats ask one broker (chosen by the client id, the next open one when its
    # channel is lost) for NOTIFY_CONSUMER_IDS_CHANGED and tell the others not to send it
    # (``HeartbeatRequest.notified_elsewhere``): every broker sees every change, so with four
    # brokers each change was told four times, a quarter of a broker's messages in a change
    # of a 1,000-consumer group. False: every broker notifies, as in RocketMQ.
    notified_by_one_broker: bool = True
    # Ours: how pulls travel: "auto" (remoting where the broker serves it, else gRPC, falling
    # back to gRPC when its remoting port cannot be reached), "grpc", or "remoting" (RocketMQ's
    # own protocol, to brokers that serve it; the others over gRPC all the same):
    # ``aiorocketmq.protocol.data_path``. The rest (heartbeats, offsets, the channel stream) is
    # gRPC either way.
    data_transport: str = "auto"

    def __post_init__(self) -> None:
        check_data_transport(self.data_transport)
        if self.acquire_batch_ms < 0:
            raise ValueError(f"acquire_batch_ms must be >= 0, got {self.acquire_batch_ms}")
        if self.acquire_batch_threshold < 0:
            raise ValueError(
                f"acquire_batch_threshold must be >= 0, got {self.acquire_batch_threshold}"
            )
        if self.channel_reconnect_delay_ms < 1:
            raise ValueError(
                f"channel_reconnect_delay_ms must be >= 1, got {self.channel_reconnect_delay_ms}"
            )
        if self.channel_reconnect_max_delay_ms < self.channel_reconnect_delay_ms:
            raise ValueError(
                "channel_reconnect_max_delay_ms must be >= channel_reconnect_delay_ms, got "
                f"{self.channel_reconnect_max_delay_ms} < {self.channel_reconnect_delay_ms}"
            )
