"""``ProducerManager``: the broker's producer groups (group_channel_table).

Rules (RocketMQ's ``ProducerManager``): a heartbeat's producer groups register the channel
(new) or refresh its ``last_update_timestamp`` (known); UNREGISTER_CLIENT removes it; the
channel-close path removes it from every group; the housekeeping scan removes, and closes,
channels not refreshed for ``channel_expired_timeout_ms`` (120 s). A group with no channel
left is removed. Nobody is notified: producers do not rebalance. Pure: ``now`` is an argument.

``client_channel_table`` (client id -> channel) is kept for lookups by client id, as
RocketMQ keeps it for transaction checks.
"""

from __future__ import annotations

from aiorocketmq.broker.client.channel import Channel
from aiorocketmq.broker.client.consumer_manager import CHANNEL_EXPIRED_TIMEOUT_MS, ClientChannelInfo
from aiorocketmq.logs import get_logger

__all__ = ["ProducerManager"]

log = get_logger("aiorocketmq.broker.client.producer_manager")


class ProducerManager:
    """``group_channel_table``: producer group -> (Channel -> ClientChannelInfo)."""

    def __init__(self, *, channel_expired_timeout_ms: int = CHANNEL_EXPIRED_TIMEOUT_MS) -> None:
        self.group_channel_table: dict[str, dict[Channel, ClientChannelInfo]] = {}
        self.client_channel_table: dict[str, Channel] = {}
        self.channel_expired_timeout_ms = channel_expired_timeout_ms

    def register_producer(
        self, group: str, client_channel_info: ClientChannelInfo, now: int
    ) -> bool:
        """Register or refresh; True when the channel is new to the group."""
        channels = self.group_channel_table.setdefault(group, {})
        found = channels.get(client_channel_info.channel)
        if found is None:
            client_channel_info.last_update_timestamp = now
            channels[client_channel_info.channel] = client_channel_info
            self.client_channel_table[client_channel_info.client_id] = client_channel_info.channel
            log.info(
                "new producer connected",
                group=group,
                client_id=client_channel_info.client_id,
                remote_addr=client_channel_info.channel.remote_addr,
            )
            return True
        found.last_update_timestamp = now
        return False

    def unregister_producer(self, group: str, client_channel_info: ClientChannelInfo) -> bool:
        """UNREGISTER_CLIENT; True when the channel was in the group."""
        channels = self.group_channel_table.get(group)
        if channels is None:
            return False
        removed = channels.pop(client_channel_info.channel, None)
        if removed is not None:
            self._forget_client(removed)
            log.info(
                "unregister a producer from groupChannelTable",
                group=group,
                client_id=removed.client_id,
            )
        if not channels:
            del self.group_channel_table[group]
            log.info("unregister a producer group from groupChannelTable", group=group)
        return removed is not None

    def do_channel_close_event(self, remote_addr: str, channel: Channel) -> list[str]:
        """Drop a closed channel from every group; the groups it left."""
        left: list[str] = []
        for group, channels in list(self.group_channel_table.items()):
            removed = channels.pop(channel, None)
            if removed is None:
                continue
            left.append(group)
            self._forget_client(removed)
            log.info(
                "NETTY EVENT: remove channel from ProducerManager groupChannelTable",
                group=group,
                client_id=removed.client_id,
                remote_addr=remote_addr,
            )
            if not channels:
                del self.group_channel_table[group]
        return left

    def scan_not_active_channel(self, now: int) -> list[tuple[str, ClientChannelInfo]]:
        """Remove and close channels idle for longer than the expiry; what was removed."""
        expired: list[tuple[str, ClientChannelInfo]] = []
        for group, channels in list(self.group_channel_table.items()):
            for channel, info in list(channels.items()):
                if now - info.last_update_timestamp <= self.channel_expired_timeout_ms:
                    continue
                log.warning(
                    "SCAN: remove expired channel from ProducerManager groupChannelTable",
                    group=group,
                    client_id=info.client_id,
                    remote_addr=channel.remote_addr,
                    idle_ms=now - info.last_update_timestamp,
                )
                del channels[channel]
                self._forget_client(info)
                channel.close()
                expired.append((group, info))
            if not channels:
                del self.group_channel_table[group]
        return expired

    def find_channel(self, client_id: str) -> Channel | None:
        return self.client_channel_table.get(client_id)

    def get_group_channels(self, group: str) -> list[ClientChannelInfo]:
        return list(self.group_channel_table.get(group, {}).values())

    def _forget_client(self, info: ClientChannelInfo) -> None:
        # Forget the client id only once its channel is in no producer group any more.
        if self.client_channel_table.get(info.client_id) is not info.channel:
            return
        if any(info.channel in channels for channels in self.group_channel_table.values()):
            return
        del self.client_channel_table[info.client_id]
