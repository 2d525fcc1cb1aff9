"""``MessageSender``: rows to messages, sent in batches from a Spark write task.

Rules: a row is ``(body, topic, tags, keys)``; a string body is sent as UTF-8; a null topic,
tags or keys take the write's options; a null body is an error naming the row. Messages are
buffered per topic and sent as one batch (one SEND_MESSAGE to one queue) when a buffer holds
``batchSize`` messages or ``batchBytes`` of bodies, and at the end of the task. The client
takes queues round robin and tries another broker when a send fails (``SyncClient.send_batch``).

The marker of re-run batches (see ``aiorocketmq.pipeline.source``) lives as a consumer offset: the group
``marker_group`` on ``marker_queue``, the first queue (queue 0 of the first broker by name) of
the write's topic.
"""

from __future__ import annotations

from typing import Any

from aiorocketmq.pipeline.client import SyncClient
from aiorocketmq.pipeline.offsets import QueueKey
from aiorocketmq.pipeline.options import WriteOptions
from aiorocketmq.protocol.client_id import local_ip
from aiorocketmq.protocol.route import route_to_subscribe_queues
from aiorocketmq.protocol.v1 import common_pb2

__all__ = ["MessageSender", "marker_group", "marker_queue"]


def marker_group(opts: WriteOptions, query_id: str) -> str:
    """The consumer group whose offset marks a streaming query's committed batches."""
    return f"{opts.producer_group}-{query_id}"[:120]


def marker_queue(client: SyncClient, topic: str) -> QueueKey:
    """The queue holding the mark: the lowest queue of the topic's route."""
    queues = sorted(route_to_subscribe_queues(topic, client.route(topic)))
    if not queues:
        raise ValueError(f"topic {topic} has no readable queue to keep the sink's mark on")
    mq = queues[0]
    return (mq.topic, mq.broker_name, mq.queue_id)


class MessageSender:
    """Buffers messages per topic and sends them in batches; ``close`` sends the rest."""

    def __init__(self, client: SyncClient, opts: WriteOptions) -> None:
        self.client = client
        self.opts = opts
        self.born_host = local_ip()
        self.sent = 0
        self._rows = 0
        self._buffers: dict[str, list[common_pb2.Message]] = {}
        self._bytes: dict[str, int] = {}

    def add(self, body: Any, topic: str | None, tags: str | None, keys: str | None) -> None:
        self._rows += 1
        if body is None:
            raise ValueError(f"row {self._rows} of this task has a null body")
        if isinstance(body, str):
            body = body.encode("utf-8")
        elif not isinstance(body, bytes):
            body = bytes(body)
        topic = topic or self.opts.topic
        if not topic:
            raise ValueError(f"row {self._rows} of this task has no topic (column or option)")
        message = common_pb2.Message(
            topic=topic,
            body=body,
            tags=tags or self.opts.tags or "",
            keys=keys or self.opts.keys or "",
        )
        buffer = self._buffers.setdefault(topic, [])
        buffer.append(message)
        size = self._bytes.get(topic, 0) + len(body)
        self._bytes[topic] = size
        if len(buffer) >= self.opts.batch_size or size >= self.opts.batch_bytes:
            self._flush(topic)

    def _flush(self, topic: str) -> None:
        messages = self._buffers.pop(topic, [])
        self._bytes.pop(topic, None)
        if messages:
            self.client.send_batch(
                topic, messages, group=self.opts.producer_group, born_host=self.born_host
            )
            self.sent += len(messages)

    def close(self) -> int:
        """Send what is buffered; how many messages this sender sent in all."""
        for topic in list(self._buffers):
            self._flush(topic)
        return self.sent
