"""docker-compose.yml: valid per the Compose specification, and wired the way it says.

There is no Docker engine where these tests run, so the file is checked in two ways:

- against the Compose specification's JSON schema (``tests/data/compose-spec.json``, draft
  2020-12, vendored from the compose-spec project, Apache-2.0);
- by running it without Docker: each service's command becomes a local process of this
  package's console scripts. The services share one network namespace (``network_mode:
  service:net``), as local processes share the host's: each published container port becomes
  a free local port, ``${VAR:-default}`` takes its default (Compose's interpolation), named
  volumes and configs become files under a temporary directory,
  health checks run as the same commands (translated the same way), and ``depends_on``
  conditions are waited for as Compose waits for them. The consumer service runs twice, as
  ``--scale consumer=2`` would run it. The producer's messages must reach both consumers'
  ``--print`` output, ``clusterList`` must show both brokers at the published addresses, an
  application on the host (this process, Apache's client too) must reach them, and every
  process must exit 0 on SIGTERM.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from ruamel.yaml import YAML

from tests.helpers import free_port, wait_until_sync

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
SCHEMA_FILE = REPO / "tests" / "data" / "compose-spec.json"
BIN = Path(sys.executable).parent
LOCAL = "127.0.0.1"
# host:port, the host a name (service, 0.0.0.0, localhost, an IPv4 address) not inside a word.
HOST_PORT = re.compile(r"(?<![\w.-])([A-Za-z0-9][\w.-]*):(\d{1,5})\b")
SELF_HOSTS = frozenset({"0.0.0.0", "127.0.0.1", "localhost"})
# How many processes of a service to run (``docker compose up --scale consumer=2``).
REPLICAS = {"consumer": 2}
TOPIC = "TopicTest"


INTERPOLATION = re.compile(r"\$\{(\w+):-([^}]*)\}")


def interpolate(text: str) -> str:
    """Compose's ``${VAR:-default}``, with no variable set: the default."""
    return INTERPOLATION.sub(lambda m: m[2], text)


def load_compose(*, raw: bool = False) -> dict[str, Any]:
    """The compose file as Compose reads it (YAML 1.2, merge keys resolved, interpolated)."""
    text = COMPOSE_FILE.read_text()
    document: dict[str, Any] = YAML(typ="safe", pure=True).load(text if raw else interpolate(text))
    return document


def published(spec: dict[str, Any]) -> list[tuple[str, int, int]]:
    """A service's ``ports`` as (host ip, host port, container port)."""
    out = []
    for entry in spec.get("ports", []):
        ip, host, container = str(entry).rsplit(":", 2)
        out.append((ip, int(host), int(container)))
    return out


def schema_errors(document: dict[str, Any]) -> list[str]:
    schema = json.loads(SCHEMA_FILE.read_text())
    Draft202012Validator.check_schema(schema)
    errors = Draft202012Validator(schema).iter_errors(document)
    return sorted(f"/{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)


# -- the file itself ----------------------------------------------------------------------------


def test_the_compose_file_is_valid_per_the_compose_specification() -> None:
    assert schema_errors(load_compose(raw=True)) == []
    assert schema_errors(load_compose()) == []


def test_the_schema_check_rejects_a_misspelt_key() -> None:
    document = load_compose()
    document["services"]["consumer"]["comand"] = document["services"]["consumer"].pop("command")
    assert any("comand" in error for error in schema_errors(document))


def test_the_services_and_their_shape() -> None:
    services = load_compose()["services"]
    assert set(services) >= {"net", "namesrv", "broker-a", "broker-b", "producer", "consumer"}
    for name, spec in services.items():
        assert isinstance(spec["command"], list), f"{name}: exec form, so no shell is needed"
        assert spec["image"] == "aiorocketmq:local", name
        assert spec["build"]["context"] == ".", name
        if name != "net":
            assert spec["network_mode"] == "service:net", f"{name}: the cluster's namespace"
            assert "ports" not in spec, f"{name}: ports are published by net"
        expected = "no" if name == "create-topic" else "unless-stopped"
        assert spec["restart"] == expected, f"{name}: restart policy"
    # Published on loopback by default, one host port per container port.
    ports = published(services["net"])
    assert {ip for ip, _, _ in ports} == {"127.0.0.1"}
    assert all(host == container for _, host, container in ports)
    assert {p for _, _, p in ports} == {9876, 9877, 10911, 10912, 10921, 10922}
    # Scalable: no fixed container name, no port of its own.
    assert "container_name" not in services["consumer"]
    for name in ("namesrv", "broker-a", "broker-b"):
        check = services[name]["healthcheck"]
        # Cheap: every second while starting, every 30 s after.
        assert duration_s(check["interval"]) >= 30 and duration_s(check["start_interval"]) <= 1
    for broker in ("broker-a", "broker-b"):
        assert services[broker]["depends_on"]["namesrv"]["condition"] == "service_healthy"


def test_the_image_gets_every_package_pyproject_installs() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    includes = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    assert includes == ["aiorocketmq", "aiorocketmq.*"], "one import package"
    # The package folder and every role folder its links point at.
    linked = {p.resolve().name for p in (REPO / "aiorocketmq").iterdir() if p.is_symlink()}
    packages = {"aiorocketmq", "setup.py"} | linked
    dockerfile = (REPO / "Dockerfile").read_text()
    # Two stages: one compiles the C speedups into a wheel, the image installs that wheel.
    assert re.findall(r"^FROM (.+)$", dockerfile, re.M) == [
        "python:3.11-slim AS build", "python:3.11-slim"
    ]
    build, image = dockerfile.split("\nFROM python:3.11-slim\n")
    assert "gcc" in build and "pip wheel" in build and "_speedups" in build
    assert "COPY --from=build /wheels /wheels" in image
    assert "import aiorocketmq.protocol._speedups" in image, "the image fails without them"
    copied = set(re.findall(r"^COPY (\S+) \./\1$", dockerfile, re.M))
    assert packages <= copied, f"not copied into the image: {sorted(packages - copied)}"
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    allowed = {line[1:] for line in ignore if line.startswith("!")}
    needed = packages | {"pyproject.toml", "README.md"}
    assert needed <= allowed, f"kept out of the build context: {sorted(needed - allowed)}"


# -- the services as local processes ------------------------------------------------------------


def duration_s(value: str) -> float:
    """A Compose duration ("1m30s", "2s", "500ms") in seconds."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", value)
    assert parts and "".join(n + u for n, u in parts) == value, f"bad duration {value!r}"
    return sum(float(n) * units[u] for n, u in parts)


def toml_dump(settings: dict[str, Any]) -> str:
    """Flat TOML (what a broker settings file holds): strings, numbers, booleans."""
    lines = []
    for key, value in settings.items():
        if isinstance(value, bool):
            lines.append(f"{key} = {str(value).lower()}")
        elif isinstance(value, int | float):
            lines.append(f"{key} = {value}")
        else:
            lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


class LocalCompose:
    """The compose file's services as local processes, wired as Compose would wire them."""

    def __init__(self, compose: dict[str, Any], root: Path) -> None:
        self.compose = compose
        self.services: dict[str, dict[str, Any]] = compose["services"]
        self.root = root
        (root / "logs").mkdir()
        # One namespace: container port -> local port, for the ports net publishes.
        self.ports = {container: free_port() for _, _, container in published(self.services["net"])}
        self.paths = {name: self._mounts(name) for name in self.services}
        self.env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._files: list[IO[bytes]] = []

    def _mounts(self, service: str) -> dict[str, Path]:
        """Container path -> local path, for the service's named volumes and configs."""
        spec = self.services[service]
        mounts: dict[str, Path] = {}
        for volume in spec.get("volumes", []):
            source, target = volume.split(":")[:2]
            assert source in self.compose.get("volumes", {}), f"{service}: {source} not declared"
            local = self.root / "volumes" / source
            local.mkdir(parents=True, exist_ok=True)
            mounts[target] = local
        for config in spec.get("configs", []):
            source, target = config["source"], config["target"]
            local = self.root / "configs" / source / Path(target).name
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_text(self._config_content(source))
            mounts[target] = local
        return mounts

    def _config_content(self, source: str) -> str:
        """A settings file with service hostnames as 127.0.0.1 (``broker_ip1``)."""
        settings = tomllib.loads(self.compose["configs"][source]["content"])
        for key, value in settings.items():
            if isinstance(value, str):
                settings[key] = LOCAL if value in self.services else self._addresses(None, value)
        return toml_dump(settings)

    def _addresses(self, service: str | None, text: str) -> str:
        def local(m: re.Match[str]) -> str:
            host, port = m[1], int(m[2])
            if host in self.services or host in SELF_HOSTS:
                assert port in self.ports, f"port {port} is not published by net"
                return f"{LOCAL}:{self.ports[port]}"
            return m[0]

        return HOST_PORT.sub(local, text)

    def translate(self, service: str, text: str) -> str:
        text = self._addresses(service, text)
        for target in sorted(self.paths[service], key=len, reverse=True):
            text = text.replace(target, str(self.paths[service][target]))
        return text

    def argv(self, service: str, command: list[str]) -> list[str]:
        program, *args = command
        if program == "python":
            executable = sys.executable
        else:
            assert (BIN / program).exists(), f"{service}: {program} is not a console script here"
            executable = str(BIN / program)
        return [executable, *(self.translate(service, str(a)) for a in args)]

    def start_order(self) -> list[str]:
        """The services, each after what it depends on."""
        order: list[str] = []

        def visit(name: str, path: tuple[str, ...]) -> None:
            assert name not in path, f"depends_on cycle: {path}"
            if name in order:
                return
            for dependency in self.services[name].get("depends_on", {}):
                visit(dependency, (*path, name))
            order.append(name)

        for name in self.services:
            visit(name, ())
        return order

    def replicas(self, service: str) -> list[str]:
        return [f"{service}-{i}" for i in range(REPLICAS.get(service, 1))]

    def start(self, service: str) -> None:
        for name in self.replicas(service):
            out = (self.root / "logs" / f"{name}.out").open("wb")
            err = (self.root / "logs" / f"{name}.err").open("wb")
            self._files += [out, err]
            self.procs[name] = subprocess.Popen(
                self.argv(service, self.services[service]["command"]),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=self.root,
                env=self.env,
            )

    def output(self, name: str, stream: str = "out") -> str:
        return (self.root / "logs" / f"{name}.{stream}").read_text(errors="replace")

    def check_running(self) -> None:
        """Fail at once when a long-running service died (instead of waiting out a deadline)."""
        for name, proc in self.procs.items():
            service = name.rpartition("-")[0]
            if proc.poll() is not None and not self._is_job(service):
                raise AssertionError(
                    f"{name} exited with {proc.returncode}:\n{self.output(name, 'err')[-3000:]}"
                )

    def _is_job(self, service: str) -> bool:
        """A service others wait to complete (``service_completed_successfully``)."""
        return any(
            condition.get("condition") == "service_completed_successfully"
            for spec in self.services.values()
            for dependency, condition in spec.get("depends_on", {}).items()
            if dependency == service
        )

    def healthy(self, service: str) -> bool:
        check = self.services[service]["healthcheck"]
        kind, *command = check["test"]
        assert kind == "CMD", f"{service}: health check runs without a shell"
        try:
            result = subprocess.run(
                self.argv(service, command),
                capture_output=True,
                env=self.env,
                timeout=duration_s(check.get("timeout", "30s")),
            )
        except subprocess.TimeoutExpired:
            return False
        return result.returncode == 0

    def wait_dependencies(self, service: str) -> None:
        for dependency, spec in self.services[service].get("depends_on", {}).items():
            condition = spec.get("condition", "service_started")
            names = self.replicas(dependency)
            if condition == "service_started":
                assert all(n in self.procs for n in names)
            elif condition == "service_healthy":

                def healthy(dependency: str = dependency) -> bool:
                    self.check_running()
                    return self.healthy(dependency)

                wait_until_sync(healthy, timeout=15, interval=0.1, message=f"{dependency} healthy")
            elif condition == "service_completed_successfully":
                for name in names:
                    code = self.procs[name].wait(timeout=15)
                    assert code == 0, f"{name} exited with {code}: {self.output(name, 'err')}"
            else:
                raise AssertionError(f"{service}: unknown depends_on condition {condition}")

    def stop_all(self) -> dict[str, int | None]:
        """SIGTERM every process still running, last started first; their exit codes."""
        codes: dict[str, int | None] = {}
        for name, proc in reversed(list(self.procs.items())):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                codes[name] = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                codes[name] = None
        for f in self._files:
            f.close()
        return codes


def printed_messages(text: str) -> Iterator[dict[str, Any]]:
    """The messages a consumer printed (``--print``: one JSON object a line)."""
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "msg_id" in record:
            yield record


def test_every_service_runs_as_a_local_process_wired_the_same_way(tmp_path: Path) -> None:
    compose = LocalCompose(load_compose(), tmp_path)
    consumers = compose.replicas("consumer")
    try:
        for service in compose.start_order():
            compose.wait_dependencies(service)
            compose.start(service)

        def each_consumer_printed_messages() -> bool:
            compose.check_running()
            return all(sum(1 for _ in printed_messages(compose.output(c))) >= 3 for c in consumers)

        wait_until_sync(
            each_consumer_printed_messages,
            timeout=15,
            interval=0.1,
            message="both consumers printing the producer's messages",
        )
        for consumer in consumers:
            for message in printed_messages(compose.output(consumer)):
                assert message["topic"] == TOPIC
                assert message["broker"] in ("broker-a", "broker-b")
                body = json.loads(message["body"])
                assert body["prefix"] == "msg" and isinstance(body["seq"], int)

        namesrv_addr = f"{LOCAL}:{compose.ports[9876]}"
        listed = subprocess.run(
            [str(BIN / "mqadmin"), "clusterList", "-n", namesrv_addr, "--json"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert listed.returncode == 0, listed.stderr
        info = json.loads(listed.stdout)
        assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-a", "broker-b"]}
        # advertised at the published addresses: what an application on the host dials
        assert {b["brokerName"]: b["brokerAddr"] for b in info["liveBrokers"]} == {
            "broker-a": f"{LOCAL}:{compose.ports[10911]}",
            "broker-b": f"{LOCAL}:{compose.ports[10921]}",
        }
        route = subprocess.run(
            [str(BIN / "mqadmin"), "topicRoute", "-n", namesrv_addr, "-t", TOPIC, "--json"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert route.returncode == 0, route.stderr
        queues = {
            qd["brokerName"]: (qd["readQueueNums"], qd["writeQueueNums"])
            for qd in json.loads(route.stdout)["queueDatas"]
        }
        assert queues == {"broker-a": (8, 8), "broker-b": (8, 8)}

        # An application on the host: our producer over gRPC, Apache's over remoting.
        sent = subprocess.run(
            [str(BIN / "mqadmin"), "sendMessage", "-n", namesrv_addr, "-t", TOPIC, "-p", "host",
             "--json"],
            capture_output=True, text=True, timeout=30,
        )
        assert sent.returncode == 0, sent.stderr
        if importlib.util.find_spec("rocketmq") is not None:
            apache = subprocess.run(
                [sys.executable, "-m", "tests.integration.apache_client", "produce", "-n",
                 f"{LOCAL}:{compose.ports[9877]}", "-t", TOPIC, "--count", "2"],
                capture_output=True, text=True, timeout=60, cwd=REPO,
                env={**os.environ, "HOME": str(tmp_path)},
            )
            assert apache.returncode == 0, apache.stderr
    finally:
        codes = compose.stop_all()
    failed = {name: code for name, code in codes.items() if code != 0}
    assert not failed, "\n".join(
        f"{name} exited with {code}:\n{compose.output(name, 'err')[-2000:]}"
        for name, code in failed.items()
    )
