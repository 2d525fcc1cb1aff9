"""``mqbroker`` / ``python -m aiorocketmq.broker``: run one broker until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aiorocketmq.broker.broker_controller import BrokerController
from aiorocketmq.broker.config import load_settings
from aiorocketmq.logs import configure_logging, get_logger
from aiorocketmq.runtime import run, stop_on_signals
from aiorocketmq.trace import tracer

__all__ = ["main"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="mqbroker", description="Run an aiorocketmq broker.")
    p.add_argument("-n", "--namesrv-addr", help="name servers, host:port[;host:port]")
    p.add_argument("--listen", help="host:port to serve on (default 127.0.0.1:10911; port 0 = any)")
    p.add_argument(
        "--remoting-listen",
        metavar="HOST:PORT",
        help="also serve RocketMQ's remoting protocol (Apache's clients) here; port 0 = any",
    )
    p.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics",
    )
    p.add_argument("--store-dir", help="store root directory (default ~/store)")
    p.add_argument("--broker-name", help="broker name (default broker-a)")
    p.add_argument("--cluster", help="cluster name (default DefaultCluster)")
    p.add_argument(
        "-c", "--config", type=Path, help="TOML settings file (RocketMQ names in snake_case)"
    )
    p.add_argument("--log-level", default="INFO")
    p.add_argument(
        "--trace", type=Path, help="append the protocol trace (JSONL) to this file (tests, views)"
    )
    return p.parse_args(argv)


async def serve(args: argparse.Namespace) -> int:
    broker_config, store_config = load_settings(
        args.config,
        namesrv_addr=args.namesrv_addr,
        listen=args.listen,
        remoting_listen=args.remoting_listen,
        metrics_listen=args.metrics_listen,
        store_path_root_dir=args.store_dir,
        broker_name=args.broker_name,
        broker_cluster_name=args.cluster,
    )
    stop = stop_on_signals()
    broker = BrokerController(broker_config, store_config)
    await broker.start()
    remoting = f" remoting={broker.remoting_address}" if broker.remoting_address else ""
    print(
        f"The broker[{broker_config.broker_name}, {broker.address}] boot success.{remoting}",
        flush=True,
    )
    try:
        await stop.wait()
    finally:
        await broker.shutdown()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.log_level)
    if args.trace is not None:
        tracer.to_file(args.trace)
    try:
        return run(serve(args))
    except (ValueError, OSError) as e:
        get_logger("aiorocketmq.broker").error("the broker failed to start", error=str(e))
        print(f"mqbroker: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
