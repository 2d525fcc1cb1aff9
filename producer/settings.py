"""``ProducerSettings``: the producer's options, typed and documented, RocketMQ's names beside.

``Producer("pg", ns, send_msg_timeout_ms=5_000)`` or ``Producer("pg", ns, settings)``. Times
are in milliseconds (``_ms``); the keywords of earlier releases in seconds
(``send_msg_timeout``, ``poll_name_server_interval``) are still accepted and converted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiorocketmq.protocol.data_path import check_data_transport
from aiorocketmq.protocol.options import Legacy, build_options, seconds_to_ms

__all__ = ["DEFAULT_MAX_MESSAGE_SIZE", "ProducerSettings", "build_producer_settings"]

DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024  # RocketMQ's maxMessageSize


@dataclass(slots=True, kw_only=True)
class ProducerSettings:
    """What a ``Producer`` can be told (RocketMQ's ``DefaultMQProducer``)."""

    #: Part of the client id (``ip@instance``). RocketMQ: ``instanceName``. Default: the pid.
    instance_name: str | None = None
    #: Deadline of one send, retries included (ms). RocketMQ: ``sendMsgTimeout``. Default 3000.
    send_msg_timeout_ms: int = 3_000
    #: Further tries on another broker after a failed send (>= 0).
    #: RocketMQ: ``retryTimesWhenSendFailed``. Default 2.
    retry_times_when_send_failed: int = 2
    #: Avoid a broker for a while after a slow or failed send (latency fault tolerance).
    #: RocketMQ: ``sendLatencyFaultEnable``. Default False.
    send_latency_fault_enable: bool = False
    #: How often the routes of the topics sent to are refreshed (ms).
    #: RocketMQ: ``pollNameServerInterval``. Default 30000.
    poll_name_server_interval_ms: int = 30_000
    #: Largest message body, in bytes, checked before sending. RocketMQ: ``maxMessageSize``.
    #: Default 4 MiB.
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    #: Queues of a topic auto-created by a first send. RocketMQ: ``defaultTopicQueueNums``.
    #: Default 4.
    default_topic_queue_nums: int = 4
    #: Send requests unanswered at most per broker; batches sent while that many are out wait
    #: and go together in the next request (``producer.coalescer``; Kafka's
    #: ``max.in.flight.requests.per.connection``). Ours. Default 1: the fewest, fullest
    #: requests, which cost the broker and the producer least per message (a request's cost
    #: hardly depends on its size); raise it when a broker is far away.
    max_in_flight_sends: int = 1
    #: How sends travel: ``"auto"`` (remoting where the broker serves it, else gRPC, falling
    #: back to gRPC when its remoting port cannot be reached), ``"grpc"``, or ``"remoting"``
    #: (RocketMQ's own protocol, to brokers that serve it; the others over gRPC all the same):
    #: ``aiorocketmq.protocol.data_path``. Ours. Default "auto".
    data_transport: str = "auto"

    def check(self) -> None:
        """Every option in range (``ValueError`` naming the first that is not)."""
        check_data_transport(self.data_transport)
        if self.retry_times_when_send_failed < 0:
            raise ValueError("retry_times_when_send_failed must be >= 0")
        for name in (
            "send_msg_timeout_ms",
            "poll_name_server_interval_ms",
            "max_message_size",
            "max_in_flight_sends",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not 1 <= self.default_topic_queue_nums <= 1024:
            raise ValueError(
                f"default_topic_queue_nums out of range [1, 1024]: {self.default_topic_queue_nums}"
            )


#: Keywords of earlier releases, in seconds -> the field in milliseconds.
LEGACY: Legacy = {
    "send_msg_timeout": ("send_msg_timeout_ms", seconds_to_ms),
    "poll_name_server_interval": ("poll_name_server_interval_ms", seconds_to_ms),
}


def build_producer_settings(
    base: ProducerSettings | None, options: dict[str, Any]
) -> ProducerSettings:
    """``base`` (or the defaults) with ``options`` applied, old names converted, checked."""
    return build_options(ProducerSettings, base, options, LEGACY)
