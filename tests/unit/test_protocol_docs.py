"""docs/protocol.md and the RPC → request-code table stay true to proto/."""

from __future__ import annotations

import re

from aiorocketmq.protocol.codes import RPC_REQUEST_CODES
from aiorocketmq.protocol.generate import PROTO_DIR, ROOT
from aiorocketmq.protocol.v1 import broker_pb2

DOC = (ROOT / "docs" / "protocol.md").read_text()


def _proto_rpcs() -> set[str]:
    rpcs = set()
    for path in PROTO_DIR.glob("*.proto"):
        service = None
        for line in path.read_text().splitlines():
            if m := re.match(r"\s*service (\w+)", line):
                service = m.group(1)
            elif m := re.match(r"\s*rpc (\w+)\(", line):
                rpcs.add(f"{service}.{m.group(1)}")
    return rpcs


def test_every_rpc_has_a_request_code_entry() -> None:
    table_rpcs = {k for k in RPC_REQUEST_CODES if not k.startswith("ChannelEvent.")}
    assert table_rpcs == _proto_rpcs()


def test_every_channel_event_has_an_entry() -> None:
    events = {f"ChannelEvent.{f.name}" for f in broker_pb2.ChannelEvent.DESCRIPTOR.fields}
    events.discard("ChannelEvent.opened")  # the stream's own first event
    assert events == {k for k in RPC_REQUEST_CODES if k.startswith("ChannelEvent.")}


def test_docs_table_lists_every_rpc_with_its_code() -> None:
    for name, code in RPC_REQUEST_CODES.items():
        row = next((line for line in DOC.splitlines() if f"`{name}`" in line), None)
        assert row is not None, f"docs/protocol.md has no row for {name}"
        if code is not None:
            assert code.name in row and f"| {int(code)} |" in row, row


def test_docs_has_the_join_sequence_diagram() -> None:
    assert "```mermaid" in DOC and "sequenceDiagram" in DOC


def test_docs_list_every_remoting_request_code_served() -> None:
    """Each code the remoting handlers serve has a row in docs/protocol.md's remoting table."""
    section = DOC.split("### Request codes served", 1)[1].split("###", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    documented = set()
    for row in rows:
        first = row.split("|")[1]
        documented.update(int(c) for c in re.findall(r"\d+", first))
    routes = {int(code) for code in _broker_route_codes()}
    assert routes <= documented, f"undocumented remoting codes: {routes - documented}"
    assert {105, 106, 206} <= documented


def _broker_route_codes() -> list[int]:
    from aiorocketmq.broker.remoting import BrokerRemoting

    class _Broker:  # just enough of a BrokerController to build the routing table
        pass

    return list(BrokerRemoting(_Broker()).routes)  # type: ignore[arg-type]


def test_the_grafana_dashboard_queries_only_metrics_we_export() -> None:
    """docs/grafana-dashboard.json: valid JSON whose queries name metrics the servers expose."""
    import json

    from aiorocketmq.broker import metrics as broker_metrics
    from aiorocketmq.consumer import metrics as consumer_metrics
    from aiorocketmq.nameserver import service as namesrv_service

    sources = "".join(
        (m.__doc__ or "") + open(m.__file__).read()
        for m in (broker_metrics, consumer_metrics, namesrv_service)
    )
    dashboard = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert exprs
    for expr in exprs:
        for name in re.findall(r"\b((?:rocketmq|aiorocketmq)_[a-z_]+)", expr):
            base = re.sub(r"_(total|bucket|count|sum)$", "", name)
            assert base in sources or name in sources, f"{name} is not exported"
