"""Fixtures every test shares: an in-process cluster with fast timings, fast client timings.

``cluster`` is a ``LocalCluster`` (a name server and brokers in this process, ports chosen at
run time, stores under the test's ``tmp_path``), with the brokers' timings shrunk through the
settings a user would set. A module (or a test) shapes it with the ``cluster`` marker::

    pytestmark = pytest.mark.cluster(brokers=3, topic="JoinLeave", queues=8, overrides={...})

``topic`` is created on every broker (``LocalCluster.create_topic``) before the test runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.consumer.client_config import ClientConfig
from aiorocketmq.local_cluster import LocalCluster
from tests.helpers import fast_client_config

# Registration every 200 ms (not 30 s), offsets flushed every 100 ms (not 5 s).
FAST_BROKER: dict[str, Any] = {
    "register_name_server_period_ms": 200,
    "flush_consumer_offset_interval_ms": 100,
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "cluster(brokers=2, topic=None, queues=8, overrides={}, remoting=False, metrics=False): the cluster "
        "fixture's shape",
    )


@pytest.fixture
async def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[LocalCluster]:
    marker = request.node.get_closest_marker("cluster")
    shape: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    overrides = {**FAST_BROKER, **shape.get("overrides", {})}
    async with LocalCluster(
        tmp_path / "cluster",
        brokers=shape.get("brokers", 2),
        broker_overrides=overrides,
        remoting=shape.get("remoting", False),
        metrics=shape.get("metrics", False),
    ) as c:
        if shape.get("topic"):
            await c.create_topic(shape["topic"], shape.get("queues", 8))
        yield c


@pytest.fixture(name="fast_client_config")
def fast_client_config_fixture() -> ClientConfig:
    return fast_client_config()
