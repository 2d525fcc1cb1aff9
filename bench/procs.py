"""Name servers and brokers as real processes (``mqnamesrv``, ``mqbroker``), on loopback.

``ProcessCluster`` runs one name server and ``brokers`` brokers, each on a port chosen at
start and kept across restarts, with its store under ``root``; it can kill a broker with
SIGKILL and start it again on the same port and store, and restart the name server.
``BrokerProcesses`` is the one-broker cluster the benchmarks use. ``host_steal_seconds`` and
``StealWatch`` read what the hypervisor took from the machine's cores, which the benchmarks
report beside their figures. ``filled_page_cache`` puts the machine's memory in a long-running
broker's state (full of page cache) before a benchmark that writes gigabytes.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Self

from aiorocketmq.nameserver.client import NameServerClient
from aiorocketmq.protocol.broker_connections import BrokerConnections
from aiorocketmq.protocol.v1 import broker_pb2, common_pb2

__all__ = [
    "BrokerProcesses",
    "ConsumerProcess",
    "ProcessCluster",
    "StealWatch",
    "filled_page_cache",
    "free_port",
    "host_steal_seconds",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


_FILL_CHUNK = 64 * 1024 * 1024
_GIB = 1024**3


def _meminfo_bytes(field: str) -> int:
    """A ``/proc/meminfo`` field in bytes (0 where there is none)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name == field:
                    return int(rest.split()[0]) * 1024
    except OSError:
        pass
    return 0


@contextmanager
def filled_page_cache(directory: Path, *, headroom: int = 2 * _GIB) -> Iterator[int]:
    """While open, the free memory less ``headroom`` is held by the page cache of a file in
    ``directory`` (written, flushed, kept); how many bytes (0 when the disk has no room).

    Why: a broker's commit log grows the page cache until the memory is full, and from then
    on the kernel reclaims old pages for new writes. On a virtual machine that hands memory
    back to its host, a page never touched (or freed a while ago) costs the guest a fault to
    the host at first touch: here filling 17.6 GB took 43 s of CPU, 0.4 GB/s. A benchmark that
    starts on empty memory measures that growth (the broker's CPU per message doubled after
    some 4 GB of writes) rather than the running broker it means to."""
    size = max(0, _meminfo_bytes("MemFree") - headroom)
    room = shutil.disk_usage(directory).free - 4 * _GIB
    size = max(0, min(size, room)) // _FILL_CHUNK * _FILL_CHUNK
    path = directory / "page-cache-fill"
    try:
        if size:
            chunk = bytes(_FILL_CHUNK)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                for _ in range(size // _FILL_CHUNK):
                    os.write(fd, chunk)
                os.fsync(fd)  # its writeback done now, not during the first measurement
            finally:
                os.close(fd)
        yield size
    finally:
        path.unlink(missing_ok=True)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process ``pid`` so far (Linux ``/proc``), None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def host_steal_seconds() -> float | None:
    """CPU time the hypervisor has taken from this machine's cores so far, all cores summed
    (``steal`` in Linux ``/proc/stat``); None elsewhere."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    return int(fields[8]) / os.sysconf("SC_CLK_TCK")


class StealWatch:
    """The host's steal time sampled every ``interval`` s from ``start`` on: how much of a
    span the machine lost to its neighbours, to tell a slow change the host's from the code's
    (``/proc/stat`` counts in 10 ms ticks, so a span's figure is good to about a tick)."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.times: list[float] = []  # time.time() of each sample, increasing
        self.stolen: list[float] = []  # the host's steal seconds at each

    @property
    def samples(self) -> list[tuple[float, float]]:
        """``(time.time(), steal seconds)`` of every sample, oldest first."""
        return list(zip(self.times, self.stolen, strict=True))

    def add(self, when: float, steal: float) -> None:
        """A sample taken at ``when``."""
        self.times.append(when)
        self.stolen.append(steal)

    def start(self) -> asyncio.Task[None]:
        """Take a sample now and then every ``interval`` s in a task (cancel it to stop)."""
        self._sample()
        return asyncio.create_task(self._run())

    def _sample(self) -> bool:
        steal = host_steal_seconds()
        if steal is not None:
            self.add(time.time(), steal)
        return steal is not None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            if not self._sample():
                return

    def share(self, start: float) -> float | None:
        """Steal from ``start`` to the latest sample, as a share of the machine's cores."""
        if not self.times:
            return None
        end = self.times[-1]
        stolen = self.between(start, end)
        if stolen is None or end <= start:
            return None
        return stolen / ((end - start) * (os.cpu_count() or 1))

    def between(self, start: float, end: float) -> float | None:
        """Steal seconds from ``start`` to ``end`` (``time.time()``), from the samples that
        bracket the span; None when no sample covers it. Two bisections: a run of hundreds
        of changes asks once per change of a watch that holds a sample every 20 ms."""
        times = self.times
        i = max(0, bisect.bisect_right(times, start) - 1)
        j = bisect.bisect_left(times, end)
        if not times or j >= len(times) or times[i] > start:
            return None
        return self.stolen[j] - self.stolen[i]


class ProcessCluster:
    """``mqnamesrv`` and brokers named broker-a, broker-b, ... as processes on loopback."""

    def __init__(
        self,
        root: Path,
        *,
        brokers: int = 1,
        settings: str = "",
        broker_names: list[str] | None = None,
        trace: bool = False,
        remoting: bool = False,
    ) -> None:
        self.root = root
        # Every server also serves RocketMQ's remoting protocol (Apache's clients).
        self.remoting = remoting
        self.settings = settings
        # Brokers append their protocol trace to root/trace-<name>.jsonl (channel closes, ...).
        self.trace = trace
        self.broker_names = broker_names or [f"broker-{chr(ord('a') + i)}" for i in range(brokers)]
        self.namesrv_addr = f"127.0.0.1:{free_port()}"
        self.broker_addrs = {name: f"127.0.0.1:{free_port()}" for name in self.broker_names}
        self.namesrv_remoting_addr = f"127.0.0.1:{free_port()}" if remoting else ""
        self.broker_remoting_addrs = {
            name: f"127.0.0.1:{free_port()}" if remoting else "" for name in self.broker_names
        }
        self.namesrv: subprocess.Popen[bytes] | None = None
        self.brokers: dict[str, subprocess.Popen[bytes]] = {}
        self.conns = BrokerConnections()
        # (broker name, wall-clock ms) of every kill_broker: what a checker attributes to it.
        self.kills: list[tuple[str, int]] = []
        # (broker name, wall-clock ms stopped, ms resumed) of every pause_broker.
        self.pauses: list[tuple[str, int, int]] = []

    def _spawn(self, *args: str) -> subprocess.Popen[bytes]:
        bin_dir = Path(sys.executable).parent
        log = (self.root / f"{args[0]}.log").open("ab")
        return subprocess.Popen(
            [str(bin_dir / args[0]), *args[1:]], stdout=log, stderr=log, env=os.environ.copy()
        )

    def start_namesrv(self) -> None:
        remoting = ["--remoting-listen", self.namesrv_remoting_addr] if self.remoting else []
        self.namesrv = self._spawn(
            "mqnamesrv", "--listen", self.namesrv_addr, *remoting, "--log-level", "WARNING"
        )

    def start_broker(self, name: str) -> None:
        config = self.root / f"{name}.toml"
        config.write_text("register_name_server_period_ms = 1000\n" + self.settings)
        self.brokers[name] = self._spawn(
            "mqbroker",
            "-n",
            self.namesrv_addr,
            "--listen",
            self.broker_addrs[name],
            "--store-dir",
            str(self.root / "store" / name),
            "--broker-name",
            name,
            "-c",
            str(config),
            "--log-level",
            "WARNING",
            *(["--trace", str(self.trace_file(name))] if self.trace else []),
            *(["--remoting-listen", self.broker_remoting_addrs[name]] if self.remoting else []),
        )

    def trace_file(self, name: str) -> Path:
        return self.root / f"trace-{name}.jsonl"

    async def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.start_namesrv()
        for name in self.broker_names:
            self.start_broker(name)
        await self.wait_registered(self.broker_names)

    async def wait_registered(self, names: list[str], timeout: float = 30.0) -> None:
        """Until the name server lists every broker of ``names`` (RuntimeError after ``timeout``)."""
        deadline = asyncio.get_running_loop().time() + timeout
        # A name server still starting refuses connections, which its client logs as a warning
        # each time: ask it only once it listens.
        await _listening(self.namesrv_addr, deadline)
        async with NameServerClient(self.namesrv_addr) as ns:
            while asyncio.get_running_loop().time() < deadline:
                try:
                    info = await ns.get_broker_cluster_info(timeout=0.5)
                    if set(names) <= set(info.broker_addr_table):
                        return
                except Exception:
                    pass
                for name in names:
                    proc = self.brokers.get(name)
                    if proc is not None and proc.poll() is not None:
                        raise RuntimeError(f"{name} exited with {proc.returncode} at start")
                await asyncio.sleep(0.05)
        raise RuntimeError(f"brokers {names} did not register in time")

    async def kill_broker(self, name: str) -> None:
        """SIGKILL: no flush, no unregistration (what a crash of the machine's process does)."""
        proc = self.brokers.pop(name)
        self.kills.append((name, int(time.time() * 1000)))
        proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(proc.wait, 10)

    async def pause_broker(self, name: str, seconds: float) -> None:
        """SIGSTOP for ``seconds``, then SIGCONT: a broker that stalls (a VM's pause, a long
        GC) while its clients go on; its connections go silent, and a client's keepalive ends
        its channel before the broker hears of it."""
        start = int(time.time() * 1000)
        try:
            await stop_for(self.brokers[name], seconds)
        finally:
            self.pauses.append((name, start, int(time.time() * 1000)))

    async def restart_broker(self, name: str) -> None:
        """Start ``name`` again on its port and store, and wait until it is registered."""
        self.start_broker(name)
        await self.wait_registered([name])

    async def restart_namesrv(self) -> None:
        """Stop the name server and start it again on its port (brokers re-register)."""
        if self.namesrv is not None:
            self.namesrv.send_signal(signal.SIGTERM)
            await asyncio.to_thread(self.namesrv.wait, 10)
        self.start_namesrv()
        await self.wait_registered(list(self.brokers))

    async def create_topic(self, topic: str, queues: int) -> None:
        """Create the topic on every broker and wait until the name server routes all of them."""
        for addr in self.broker_addrs.values():
            await self.conns.stub(addr).UpdateAndCreateTopic(
                broker_pb2.UpdateAndCreateTopicRequest(
                    topic_config=common_pb2.TopicConfig(
                        topic_name=topic, read_queue_nums=queues, write_queue_nums=queues, perm=6
                    )
                ),
                timeout=5,
            )
        async with NameServerClient(self.namesrv_addr) as ns:
            for _ in range(300):
                try:
                    route = await ns.get_route_info_by_topic(topic)
                    ready = [q for q in route.queue_datas if q.read_queue_nums == queues]
                    if len(ready) == len(self.broker_addrs):
                        return
                except Exception:
                    pass
                await asyncio.sleep(0.05)
        raise RuntimeError(f"topic {topic} not routed in time")

    async def stop(self) -> None:
        """The brokers first, then the name server (as ``mqshutdown`` does): a broker stopping
        unregisters from the name servers, which must still be there to answer."""
        await self.conns.close()
        for group in ([*self.brokers.values()], [self.namesrv] if self.namesrv else []):
            for p in group:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in group:
                try:
                    await asyncio.to_thread(p.wait, 10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.brokers.clear()
        self.namesrv = None

    async def __aenter__(self) -> Self:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


async def _listening(addr: str, deadline: float) -> None:
    """Return once ``addr`` (host:port) accepts a TCP connection, or at ``deadline`` (loop time)."""
    host, port = addr.rsplit(":", 1)
    loop = asyncio.get_running_loop()
    while (left := deadline - loop.time()) > 0:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), left)
        except (OSError, TimeoutError):
            await asyncio.sleep(0.05)
            continue
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass
        return


async def stop_for(proc: subprocess.Popen[bytes], seconds: float) -> None:
    """SIGSTOP ``proc`` for ``seconds``, then SIGCONT (also when cancelled meanwhile)."""
    proc.send_signal(signal.SIGSTOP)
    try:
        await asyncio.sleep(seconds)
    finally:
        proc.send_signal(signal.SIGCONT)


class ConsumerProcess:
    """``aiorocketmq consume`` in its own process, with its trace in a file (``extra``: more
    flags, e.g. ``--from first``)."""

    def __init__(
        self,
        namesrv: str,
        group: str,
        topic: str,
        name: str,
        trace: Path,
        handoff: str = "classic",
        extra: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.trace = trace
        self.client_id = ""
        self.stderr_path = trace.with_suffix(".stderr")
        cmd = [
            str(Path(sys.executable).parent / "aiorocketmq"),
            "consume",
            "-n",
            namesrv,
            "-g",
            group,
            "-t",
            topic,
            "--instance-name",
            name,
            "--trace",
            str(trace),
            "--handoff",
            handoff,
            # a name server restarting beside it (fault schedules) may take a while under load
            "--namesrv-wait",
            "60",
            *extra,
        ]
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self._stderr)

    async def started(self, timeout: float = 30.0) -> str:
        """The client id once the process says it started; RuntimeError if it did not."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.stderr_path.read_text(errors="replace")
            if "consumer started" in text:
                self.client_id = text.split("client_id=", 1)[1].split()[0]
                return self.client_id
            if self.proc.poll() is not None:
                raise RuntimeError(f"consumer {self.name} exited: {text[-2000:]}")
            await asyncio.sleep(0.05)
        raise RuntimeError(f"consumer {self.name} did not start in {timeout:.0f}s")

    async def kill(self) -> None:
        """SIGKILL: a crash (the brokers see its channels close)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(self.proc.wait, 10)
        self._stderr.close()

    async def pause(self, seconds: float) -> tuple[int, int]:
        """SIGSTOP for ``seconds``, then SIGCONT: a consumer that stalls (a VM's pause, a long
        GC) and is taken for gone; when and until when (ms), for a duplicate's cause."""
        start = int(time.time() * 1000)
        await stop_for(self.proc, seconds)
        return start, int(time.time() * 1000)

    async def stop(self) -> int:
        """SIGTERM and wait without blocking the loop (brokers in this process must answer)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return await asyncio.to_thread(self.proc.wait, 15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        code = await asyncio.to_thread(self.proc.wait, 5)
        self._stderr.close()
        return code

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


class BrokerProcesses(ProcessCluster):
    """``mqnamesrv`` and one ``mqbroker`` on loopback, stores under ``root``."""

    def __init__(self, root: Path, *, settings: str = "", broker_name: str = "broker-a") -> None:
        super().__init__(root, settings=settings, broker_names=[broker_name])
        self.broker_name = broker_name
        self.broker_addr = self.broker_addrs[broker_name]
