"""``mqnamesrv`` / ``python -m aiorocketmq.nameserver``: run one name server until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence

from aiorocketmq.logs import configure_logging, get_logger
from aiorocketmq.nameserver.config import NamesrvConfig
from aiorocketmq.nameserver.service import NameServer
from aiorocketmq.runtime import run

__all__ = ["main", "parse_args"]

log = get_logger("aiorocketmq.nameserver")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line; defaults are ``NamesrvConfig``'s (RocketMQ's)."""
    defaults = NamesrvConfig()
    parser = argparse.ArgumentParser(
        prog="mqnamesrv", description="Run an aiorocketmq name server."
    )
    parser.add_argument(
        "--listen", default=defaults.listen, help="host:port to serve on (default %(default)s)"
    )
    parser.add_argument(
        "--remoting-listen",
        default=defaults.remoting_listen,
        metavar="HOST:PORT",
        help="also serve RocketMQ's remoting protocol (Apache's clients) here; port 0 = any",
    )
    parser.add_argument(
        "--metrics-listen",
        default=defaults.metrics_listen,
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
        help="(default %(default)s)",
    )
    parser.add_argument(
        "--scan-interval-ms",
        type=int,
        default=defaults.scan_not_active_broker_interval_ms,
        help="how often silent brokers are looked for (default %(default)s)",
    )
    parser.add_argument(
        "--broker-expire-ms",
        type=int,
        default=defaults.broker_channel_expired_time_ms,
        help="silence after which a broker is dropped (default %(default)s)",
    )
    args = parser.parse_args(argv)
    if args.scan_interval_ms <= 0:
        parser.error("--scan-interval-ms must be > 0")
    if args.broker_expire_ms <= 0:
        parser.error("--broker-expire-ms must be > 0")
    return args


async def serve(config: NamesrvConfig) -> None:
    """Serve until SIGINT or SIGTERM, then shut down cleanly."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with NameServer(config) as namesrv:
            remoting = (
                f" remoting={namesrv.remoting_address}" if namesrv.remoting_address else ""
            )
            print(
                f"The Name Server boot success. address={namesrv.address}{remoting}", flush=True
            )
            await stop.wait()
            log.info("name server stopping")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``mqnamesrv``."""
    args = parse_args(argv)
    configure_logging(args.log_level)
    config = NamesrvConfig(
        listen=args.listen,
        scan_not_active_broker_interval_ms=args.scan_interval_ms,
        broker_channel_expired_time_ms=args.broker_expire_ms,
        remoting_listen=args.remoting_listen,
        metrics_listen=args.metrics_listen,
    )
    try:
        run(serve(config))
    except OSError as e:
        print(f"mqnamesrv: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
