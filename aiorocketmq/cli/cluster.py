"""``aiorocketmq cluster up|status|down``: a local cluster of name server and broker processes.

``up`` starts ``mqnamesrv`` and ``mqbroker`` (the console scripts next to this Python) as
detached processes, each in its own session, so they outlive the command. Everything lives
under one directory (default ``./var/cluster``)::

    cluster.json          pids, addresses and command lines (what status and down read)
    namesrv-0.log         each process's stdout and stderr, appended to across restarts
    broker-a.log
    broker-a/store        broker-a's store (commit log, consume queues, topics, offsets)

``up`` waits until every broker is registered with every name server, creates the topic on
every broker (``UPDATE_AND_CREATE_TOPIC``, as ``mqadmin updateTopic -c`` does), waits for its
route, and prints the addresses. ``status`` says, for each process, whether its pid is alive
and its address answers, then what the name servers know (brokers, the topic's route) and the
topics each broker serves. ``down`` sends SIGTERM (brokers first, so they unregister from the
name servers), waits, sends SIGKILL to what is still running after the timeout, and forgets
the pids; it is idempotent. Stores and logs stay, so ``up`` again restarts on the same data.

Ports (``--base-port``): by default RocketMQ's, name servers from 9876 and brokers from 10911
in steps of 10; ``--base-port P`` gives name servers P, P+1, ... and the brokers the ports after
them; ``--base-port 0`` lets each process bind a free port, read back from its boot line.

A pid is recognised by its start time (``/proc/PID/stat``) where ``/proc`` exists, so a reused
pid is never signalled.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from aiorocketmq.cli.mqadmin import cluster_info_to_json, route_to_json
from aiorocketmq.nameserver.client import NameServerClient
from aiorocketmq.protocol.broker_connections import BrokerConnections
from aiorocketmq.protocol.errors import MQError
from aiorocketmq.protocol.rpc import DEFAULT_RPC_TIMEOUT, call
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2, nameserver_pb2
from aiorocketmq.protocol.validators import SYSTEM_TOPICS, check_topic
from aiorocketmq.runtime import run

__all__ = [
    "STATE_FILE",
    "ClusterState",
    "ProcessRecord",
    "add_cluster_parser",
    "cluster_main",
    "pid_alive",
    "plan_ports",
]

STATE_FILE = "cluster.json"
DEFAULT_DIR = Path("var/cluster")
DEFAULT_NAMESRV_PORT = 9876
DEFAULT_BROKER_PORT = 10911
# RocketMQ leaves room around a broker's port (10909 VIP channel, 10912 HA): step by 10.
DEFAULT_BROKER_PORT_STEP = 10
PROBE_TIMEOUT = 1.0

# Each server also speaks RocketMQ's remoting protocol (Apache's clients) on its own port: a
# name server's is its gRPC port + REMOTING_PORT_OFFSET, a broker's the next port up.
REMOTING_PORT_OFFSET = 100

_NAMESRV_BOOT = re.compile(
    r"^The Name Server boot success\. address=(?P<addr>\S+)(?: remoting=(?P<remoting>\S+))?", re.M
)
_DASHBOARD_BOOT = re.compile(r"^dashboard of \S+ at (?P<addr>http://\S+)(?P<remoting>)", re.M)
_BROKER_BOOT = re.compile(
    r"^The broker\[(?P<name>[^,\]]+), (?P<addr>[^\]]+)\] boot success\.(?: remoting=(?P<remoting>\S+))?",
    re.M,
)


class ClusterError(Exception):
    """A failure of ``up``, ``status`` or ``down`` worth one line (and perhaps a log tail)."""


# -- the state file -----------------------------------------------------------------------------


@dataclass
class ProcessRecord:
    """One process of the cluster, as ``cluster.json`` keeps it."""

    name: str
    role: str  # "namesrv", "broker" or "dashboard"
    argv: list[str]
    log: str
    address: str = ""
    remoting_address: str = ""
    pid: int | None = None
    # The kernel's start time of ``pid`` (clock ticks since boot), to recognise it later.
    start_time: int | None = None
    store: str | None = None


@dataclass
class ClusterState:
    """``cluster.json``: what ``up`` started, for ``status`` and ``down``."""

    dir: str
    cluster: str
    topic: str
    queues: int
    namesrv_addr: str = ""
    namesrv_remoting_addr: str = ""
    processes: list[ProcessRecord] = field(default_factory=list)

    @staticmethod
    def path(directory: Path) -> Path:
        return directory / STATE_FILE

    @classmethod
    def load(cls, directory: Path) -> ClusterState | None:
        """The state in ``directory``, or None when there is no ``cluster.json``."""
        try:
            raw = json.loads(cls.path(directory).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise ClusterError(f"cannot read {cls.path(directory)}: {e}") from None
        processes = [ProcessRecord(**p) for p in raw.pop("processes", [])]
        return cls(**raw, processes=processes)

    def save(self, directory: Path) -> None:
        """Write ``cluster.json`` atomically (a reader never sees half a file)."""
        target = self.path(directory)
        tmp = target.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        os.replace(tmp, target)

    def running(self) -> list[ProcessRecord]:
        return [p for p in self.processes if p.pid is not None and pid_alive(p.pid, p.start_time)]

    def of_role(self, role: str) -> list[ProcessRecord]:
        return [p for p in self.processes if p.role == role]


# -- processes ----------------------------------------------------------------------------------


def _linux_start_time(pid: int) -> int | None:
    """Field 22 of ``/proc/PID/stat``; None when the process is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the command name may hold spaces and parens
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def process_start_time(pid: int) -> int | None:
    """What ``ProcessRecord.start_time`` records (None where there is no ``/proc``)."""
    return _linux_start_time(pid)


def pid_alive(pid: int, start_time: int | None = None) -> bool:
    """Whether ``pid`` runs (not a zombie) and, if ``start_time`` is known, is the same process."""
    if Path("/proc/self/stat").exists():
        found = _linux_start_time(pid)
        return found is not None and (start_time is None or found == start_time)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _bin(name: str) -> str:
    """The console script ``name`` installed next to this Python."""
    path = Path(sys.executable).parent / name
    if not path.exists():
        raise ClusterError(f"{name} not found next to {sys.executable} (is the package installed?)")
    return str(path)


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join("    " + line for line in text.splitlines()[-lines:])


def remoting_port(role: str, port: int) -> int:
    """The remoting port beside a server's gRPC port (0 stays 0: any free port)."""
    if port == 0:
        return 0
    return port + (REMOTING_PORT_OFFSET if role == "namesrv" else 1)


def plan_ports(base_port: int | None, namesrvs: int, brokers: int) -> tuple[list[int], list[int]]:
    """The ports of the name servers and of the brokers (0: the process binds a free one)."""
    if base_port is None:
        return (
            [DEFAULT_NAMESRV_PORT + i for i in range(namesrvs)],
            [DEFAULT_BROKER_PORT + DEFAULT_BROKER_PORT_STEP * i for i in range(brokers)],
        )
    if base_port == 0:
        return [0] * namesrvs, [0] * brokers
    # brokers two ports apart: gRPC, then remoting
    ports = [base_port + i for i in range(namesrvs)] + [
        base_port + namesrvs + 2 * i for i in range(brokers)
    ]
    if ports[-1] > 65535:
        raise ClusterError(f"--base-port {base_port}: ports would run past 65535")
    return ports[:namesrvs], ports[namesrvs:]


def broker_name(index: int) -> str:
    """broker-a, broker-b, ... as in RocketMQ's sample configurations."""
    return f"broker-{chr(ord('a') + index)}"


def _spawn(record: ProcessRecord, directory: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``record.argv`` detached, output appended to its log; the log's size before."""
    log_path = directory / record.log
    offset = log_path.stat().st_size if log_path.exists() else 0
    with log_path.open("ab") as log_file:
        proc = subprocess.Popen(
            record.argv,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=directory,
            start_new_session=True,
        )
    record.pid = proc.pid
    record.start_time = process_start_time(proc.pid)
    return proc, offset


async def _wait_for(
    condition: Callable[[], Awaitable[bool] | bool], timeout: float, what: str
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.1)


async def _wait_booted(
    record: ProcessRecord,
    proc: subprocess.Popen[bytes],
    offset: int,
    directory: Path,
    timeout: float,
) -> None:
    """Wait for the boot line in the log; set ``record.address`` from it."""
    log_path = directory / record.log
    pattern = {"namesrv": _NAMESRV_BOOT, "dashboard": _DASHBOARD_BOOT}.get(
        record.role, _BROKER_BOOT
    )

    def booted() -> bool:
        with log_path.open("rb") as f:
            f.seek(offset)
            found = pattern.search(f.read().decode("utf-8", "replace"))
        if found:
            record.address = found["addr"]
            record.remoting_address = found["remoting"] or ""
            return True
        code = proc.poll()
        if code is not None:
            raise ClusterError(
                f"{record.name} exited with {code} while starting; the end of {log_path}:\n"
                + _log_tail(log_path)
            )
        return False

    await _wait_for(booted, timeout, f"{record.name} to boot (see {log_path})")


# -- up -----------------------------------------------------------------------------------------


async def _registered(ns_addr: str, brokers: list[ProcessRecord]) -> bool:
    """Whether every broker of ``brokers`` is a live broker of the name server ``ns_addr``."""
    async with NameServerClient(ns_addr, timeout=PROBE_TIMEOUT) as ns:
        try:
            info = await ns.get_broker_cluster_info()
        except MQError:
            return False
    live = {b.broker_addr for b in info.live_brokers}
    return all(b.address in live for b in brokers)


async def _routed(ns_addr: str, topic: str, brokers: list[ProcessRecord], queues: int) -> bool:
    """Whether the name server ``ns_addr`` routes ``topic`` to every broker with ``queues``."""
    async with NameServerClient(ns_addr, timeout=PROBE_TIMEOUT) as ns:
        try:
            route = await ns.get_route_info_by_topic(topic)
        except MQError:
            return False
    found = {qd.broker_name: (qd.read_queue_nums, qd.write_queue_nums) for qd in route.queue_datas}
    return all(found.get(b.name) == (queues, queues) for b in brokers)


async def _create_topic(state: ClusterState, timeout: float) -> None:
    """UPDATE_AND_CREATE_TOPIC on every broker, then wait until every name server routes it."""
    brokers = state.of_role("broker")
    topic_config = common_pb2.TopicConfig(
        topic_name=state.topic,
        read_queue_nums=state.queues,
        write_queue_nums=state.queues,
        perm=6,
    )
    connections = BrokerConnections()
    try:
        for b in brokers:
            await call(
                connections.stub(b.address).UpdateAndCreateTopic,
                broker_pb2.UpdateAndCreateTopicRequest(topic_config=topic_config),
                DEFAULT_RPC_TIMEOUT,
            )
    finally:
        await connections.close()
    for ns in state.of_role("namesrv"):
        await _wait_for(
            functools.partial(_routed, ns.address, state.topic, brokers, state.queues),
            timeout,
            f"the route of {state.topic} on name server {ns.address}",
        )


async def _start_all(
    state: ClusterState,
    directory: Path,
    namesrv_ports: list[int],
    broker_ports: list[int],
    args: argparse.Namespace,
) -> None:
    """Start the name servers, then the brokers; wait for registration; create the topic."""
    started: list[tuple[ProcessRecord, subprocess.Popen[bytes], int]] = []
    for i, port in enumerate(namesrv_ports):
        record = ProcessRecord(
            name=f"namesrv-{i}",
            role="namesrv",
            argv=[
                _bin("mqnamesrv"),
                "--listen",
                f"{args.host}:{port}",
                "--remoting-listen",
                f"{args.host}:{remoting_port('namesrv', port)}",
                "--log-level",
                args.server_log_level,
            ],
            log=f"namesrv-{i}.log",
        )
        state.processes.append(record)
        started.append((record, *_spawn(record, directory)))
        state.save(directory)
    for record, proc, offset in started:
        await _wait_booted(record, proc, offset, directory, args.timeout)
    state.namesrv_addr = ";".join(p.address for p in state.of_role("namesrv"))
    state.namesrv_remoting_addr = ";".join(
        p.remoting_address for p in state.of_role("namesrv") if p.remoting_address
    )
    state.save(directory)

    started = []
    for i, port in enumerate(broker_ports):
        name = broker_name(i)
        store = directory / name / "store"
        store.mkdir(parents=True, exist_ok=True)
        argv = [
            _bin("mqbroker"),
            "-n",
            state.namesrv_addr,
            "--listen",
            f"{args.host}:{port}",
            "--remoting-listen",
            f"{args.host}:{remoting_port('broker', port)}",
            "--store-dir",
            str(store),
            "--broker-name",
            name,
            "--cluster",
            state.cluster,
            "--log-level",
            args.server_log_level,
        ]
        if args.settings is not None:
            argv += ["-c", str(args.settings.resolve())]
        record = ProcessRecord(
            name=name, role="broker", argv=argv, log=f"{name}.log", store=str(store)
        )
        state.processes.append(record)
        started.append((record, *_spawn(record, directory)))
        state.save(directory)
    for record, proc, offset in started:
        await _wait_booted(record, proc, offset, directory, args.timeout)
    state.save(directory)

    brokers = state.of_role("broker")
    for ns in state.of_role("namesrv"):
        await _wait_for(
            functools.partial(_registered, ns.address, brokers),
            args.timeout,
            f"every broker to register with name server {ns.address}",
        )
    await _create_topic(state, args.timeout)
    if args.dashboard:
        record = ProcessRecord(
            name="dashboard",
            role="dashboard",
            argv=[
                _bin("aiorocketmq"), "dashboard", "-n", state.namesrv_addr,
                "--listen", args.dashboard,
            ],
            log="dashboard.log",
        )  # fmt: skip
        state.processes.append(record)
        proc, offset = _spawn(record, directory)
        state.save(directory)
        await _wait_booted(record, proc, offset, directory, args.timeout)
        state.save(directory)


def _up(args: argparse.Namespace, out: TextIO) -> int:
    directory: Path = args.dir.resolve()
    if args.namesrv < 1:
        raise ClusterError("--namesrv must be at least 1")
    if not 1 <= args.brokers <= 26:
        raise ClusterError("--brokers must be between 1 and 26")
    if args.queues < 1:
        raise ClusterError("--queues must be at least 1")
    check_topic(args.topic)
    if args.host in ("0.0.0.0", "::", ""):
        raise ClusterError(
            f"--host {args.host!r}: brokers advertise this address, give one clients can dial"
        )
    if args.settings is not None and not args.settings.is_file():
        raise ClusterError(f"--settings {args.settings}: no such file")
    directory.mkdir(parents=True, exist_ok=True)
    previous = ClusterState.load(directory)
    if previous is not None:
        alive = previous.running()
        if alive:
            pids = ", ".join(f"{p.name} pid {p.pid}" for p in alive)
            raise ClusterError(
                f"a cluster is already running in {directory} ({pids}); "
                f"run `aiorocketmq cluster down --dir {args.dir}` first"
            )
    namesrv_ports, broker_ports = plan_ports(args.base_port, args.namesrv, args.brokers)
    state = ClusterState(
        dir=str(directory), cluster=args.cluster, topic=args.topic, queues=args.queues
    )
    state.save(directory)
    try:
        run(_start_all(state, directory, namesrv_ports, broker_ports, args))
    except (ClusterError, MQError, OSError) as e:
        print(f"aiorocketmq cluster up: {e}", file=sys.stderr)
        print("stopping what was started", file=sys.stderr)
        _stop(state, directory, args.timeout, sys.stderr)
        return 1
    except BaseException:
        _stop(state, directory, args.timeout, sys.stderr)
        raise
    _print_up(state, out)
    return 0


def _print_up(state: ClusterState, out: TextIO) -> None:
    out.write(f"cluster {state.cluster} is up in {state.dir}\n")
    for p in state.processes:
        if p.role == "dashboard":
            out.write(f"  {p.name:<10} {p.address:<55} pid {p.pid:<8} log {p.log}\n")
            continue
        out.write(
            f"  {p.name:<10} {p.address:<22} remoting {p.remoting_address:<22} "
            f"pid {p.pid:<8} log {p.log}\n"
        )
    out.write(f"  topic {state.topic}: {state.queues} queues on every broker\n\n")
    out.write(f"export NAMESRV_ADDR='{state.namesrv_addr}'\n")
    if state.namesrv_remoting_addr:
        out.write(
            f"# Apache RocketMQ clients (remoting): name server {state.namesrv_remoting_addr}\n"
        )


# -- status -------------------------------------------------------------------------------------


async def _probe_namesrv(addr: str) -> nameserver_pb2.ClusterInfo | None:
    async with NameServerClient(addr, timeout=PROBE_TIMEOUT) as ns:
        try:
            return await ns.get_broker_cluster_info()
        except MQError:
            return None


async def _probe_dashboard(url: str) -> bool:
    import aiohttp

    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=PROBE_TIMEOUT)) as session,
            session.get(url + "api/groups") as response,
        ):
            return response.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False


async def _probe_broker(connections: BrokerConnections, addr: str) -> list[str] | None:
    """The topics the broker at ``addr`` serves (system topics left out), or None if silent."""
    try:
        response: broker_pb2.GetAllTopicConfigResponse = await call(
            connections.stub(addr).GetAllTopicConfig,
            broker_pb2.GetAllTopicConfigRequest(),
            PROBE_TIMEOUT,
        )
    except MQError:
        return None
    return sorted(c.topic_name for c in response.topic_configs if c.topic_name not in SYSTEM_TOPICS)


async def _status_document(state: ClusterState) -> dict[str, Any]:
    processes: list[dict[str, Any]] = []
    cluster_info: nameserver_pb2.ClusterInfo | None = None
    topics: dict[str, list[str]] = {}
    connections = BrokerConnections()
    try:
        for p in state.processes:
            alive = p.pid is not None and pid_alive(p.pid, p.start_time)
            answering = False
            if alive and p.address:
                if p.role == "namesrv":
                    info = await _probe_namesrv(p.address)
                    answering = info is not None
                    if cluster_info is None:
                        cluster_info = info
                elif p.role == "dashboard":
                    answering = await _probe_dashboard(p.address)
                else:
                    served = await _probe_broker(connections, p.address)
                    answering = served is not None
                    if served is not None:
                        topics[p.name] = served
            processes.append(
                {
                    "name": p.name,
                    "role": p.role,
                    "pid": p.pid,
                    "alive": alive,
                    "address": p.address,
                    "remotingAddress": p.remoting_address,
                    "answering": answering,
                    "log": str(Path(state.dir) / p.log),
                    "argv": p.argv,
                }
            )
    finally:
        await connections.close()
    route: dict[str, Any] | None = None
    registered: list[str] = []
    if cluster_info is not None:
        registered = sorted({b.broker_name for b in cluster_info.live_brokers})
        async with NameServerClient(state.namesrv_addr, timeout=PROBE_TIMEOUT) as ns:
            try:
                route = route_to_json(await ns.get_route_info_by_topic(state.topic))
            except MQError:
                route = None
    broker_names = [p.name for p in state.of_role("broker")]
    healthy = (
        bool(processes)
        and all(p["alive"] and p["answering"] for p in processes)
        and all(name in registered for name in broker_names)
    )
    return {
        "dir": state.dir,
        "cluster": state.cluster,
        "namesrvAddr": state.namesrv_addr,
        "namesrvRemotingAddr": state.namesrv_remoting_addr,
        "healthy": healthy,
        "processes": processes,
        "brokersRegistered": registered,
        "clusterInfo": None if cluster_info is None else cluster_info_to_json(cluster_info),
        "topics": topics,
        "topic": {"name": state.topic, "queues": state.queues, "route": route},
    }


def _print_status(document: dict[str, Any], out: TextIO) -> None:
    out.write(f"cluster {document['cluster']} in {document['dir']}\n")
    for p in document["processes"]:
        pid = "-" if p["pid"] is None else str(p["pid"])
        state = "running" if p["alive"] else "not running"
        answer = "answering" if p["answering"] else "not answering"
        out.write(f"  {p['name']:<10} {p['address']:<22} pid {pid:<8} {state}, {answer}\n")
    registered = ", ".join(document["brokersRegistered"]) or "none"
    out.write(f"brokers registered: {registered}\n")
    topic = document["topic"]
    if topic["route"] is None:
        out.write(f"topic {topic['name']}: no route\n")
    else:
        queues = ", ".join(
            f"{qd['brokerName']} {qd['readQueueNums']}r/{qd['writeQueueNums']}w"
            for qd in topic["route"]["queueDatas"]
        )
        out.write(f"topic {topic['name']}: {queues}\n")
    for name, served in document["topics"].items():
        out.write(f"topics on {name}: {', '.join(served) or 'none'}\n")
    out.write("healthy\n" if document["healthy"] else "NOT healthy\n")
    if document["healthy"]:
        out.write(f"export NAMESRV_ADDR='{document['namesrvAddr']}'\n")
        if document.get("namesrvRemotingAddr"):
            out.write(
                "# Apache RocketMQ clients (remoting): name server "
                f"{document['namesrvRemotingAddr']}\n"
            )


def _status(args: argparse.Namespace, out: TextIO) -> int:
    directory: Path = args.dir.resolve()
    state = ClusterState.load(directory)
    if state is None:
        if args.json:
            json.dump({"dir": str(directory), "healthy": False, "processes": []}, out)
            out.write("\n")
        else:
            out.write(f"no cluster in {directory} (start one with `aiorocketmq cluster up`)\n")
        return 1
    document = run(_status_document(state))
    if args.json:
        json.dump(document, out, indent=2)
        out.write("\n")
    else:
        _print_status(document, out)
    return 0 if document["healthy"] else 1


# -- down ---------------------------------------------------------------------------------------


def _stop_group(records: list[ProcessRecord], timeout: float, out: TextIO) -> None:
    """SIGTERM every record's process, wait up to ``timeout`` s, then SIGKILL the rest."""
    pending: list[ProcessRecord] = []
    for p in records:
        if p.pid is None or not pid_alive(p.pid, p.start_time):
            continue
        try:
            os.kill(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        pending.append(p)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        for p in list(pending):
            assert p.pid is not None
            if not pid_alive(p.pid, p.start_time):
                out.write(f"{p.name} (pid {p.pid}) stopped\n")
                pending.remove(p)
        if pending:
            time.sleep(0.05)
    for p in pending:
        assert p.pid is not None
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out.write(f"{p.name} (pid {p.pid}) did not stop within {timeout:.0f}s: killed\n")
    kill_deadline = time.monotonic() + 5
    while any(pid_alive(p.pid, p.start_time) for p in pending if p.pid is not None):
        if time.monotonic() > kill_deadline:
            break
        time.sleep(0.05)


def _stop(state: ClusterState, directory: Path, timeout: float, out: TextIO) -> int:
    """Stop the brokers, then the name servers; forget the pids. How many were running."""
    running = len(state.running())
    _stop_group(state.of_role("dashboard"), timeout, out)
    _stop_group(state.of_role("broker"), timeout, out)
    _stop_group(state.of_role("namesrv"), timeout, out)
    for p in state.processes:
        if p.pid is not None and not pid_alive(p.pid, p.start_time):
            p.pid = None
            p.start_time = None
    state.save(directory)
    return running


def _down(args: argparse.Namespace, out: TextIO) -> int:
    directory: Path = args.dir.resolve()
    state = ClusterState.load(directory)
    if state is None or not state.running():
        if state is not None and any(p.pid is not None for p in state.processes):
            _stop(state, directory, args.timeout, out)  # forget stale pids
        out.write(f"nothing running in {directory}\n")
        return 0
    _stop(state, directory, args.timeout, out)
    still = state.running()
    if still:
        names = ", ".join(f"{p.name} pid {p.pid}" for p in still)
        print(f"aiorocketmq cluster down: still running: {names}", file=sys.stderr)
        return 1
    out.write(f"cluster {state.cluster} in {directory} is down (stores and logs kept)\n")
    return 0


# -- the command line ---------------------------------------------------------------------------


def add_cluster_parser(sub: Any) -> None:
    """Register ``cluster up|status|down`` on the ``aiorocketmq`` subparsers ``sub``."""
    p = sub.add_parser("cluster", help="a local cluster of mqnamesrv and mqbroker processes")
    actions = p.add_subparsers(dest="cluster_command", required=True)

    def common(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--dir",
            type=Path,
            default=DEFAULT_DIR,
            help="where cluster.json, the logs and the stores live (default %(default)s)",
        )

    up = actions.add_parser("up", help="start name servers and brokers, create the topic")
    common(up)
    up.add_argument("--namesrv", type=int, default=1, help="name servers (default 1)")
    up.add_argument("--brokers", type=int, default=2, help="brokers (default 2)")
    up.add_argument(
        "--cluster", default="DefaultCluster", help="cluster name (default %(default)s)"
    )
    up.add_argument("--topic", default="TopicTest", help="topic to create (default %(default)s)")
    up.add_argument("--queues", type=int, default=8, help="its queues per broker (default 8)")
    up.add_argument(
        "--base-port",
        type=int,
        default=None,
        help="first port; 0 = free ports (default: name servers 9876.., brokers 10911, 10921..)",
    )
    up.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on and advertise to clients (default %(default)s)",
    )
    up.add_argument(
        "--settings", type=Path, help="TOML settings file passed to every broker (mqbroker -c)"
    )
    up.add_argument(
        "--server-log-level",
        default="INFO",
        type=str.upper,
        help="log level of the name servers and brokers (default %(default)s)",
    )
    up.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for each step")
    up.add_argument(
        "--dashboard",
        nargs="?",
        const="127.0.0.1:8080",
        metavar="HOST:PORT",
        help="also start the web dashboard (default address %(const)s)",
    )

    status = actions.add_parser("status", help="processes, addresses, brokers registered, topics")
    common(status)
    status.add_argument("--json", action="store_true", help="print JSON for machines")

    down = actions.add_parser("down", help="stop every process (SIGTERM, then SIGKILL)")
    common(down)
    down.add_argument(
        "--timeout", type=float, default=10.0, help="seconds before SIGKILL (default 10)"
    )


def cluster_main(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``aiorocketmq cluster <up|status|down>``; 0 on success."""
    out = out or sys.stdout
    commands = {"up": _up, "status": _status, "down": _down}
    try:
        return commands[args.cluster_command](args, out)
    except (ClusterError, MQError) as e:
        print(f"aiorocketmq cluster {args.cluster_command}: {e}", file=sys.stderr)
        return 1
