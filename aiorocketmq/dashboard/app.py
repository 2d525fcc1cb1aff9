"""The dashboard's web app (aiohttp): pages, JSON under ``/api``, a server-sent event stream per
consumer group, and trace replay. Everything here reads; nothing changes the cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiohttp import web

from aiorocketmq.dashboard import pages
from aiorocketmq.dashboard.source import ClusterSource
from aiorocketmq.dashboard.timeline import Timeline, TraceError, parse_trace
from aiorocketmq.protocol.errors import MQError
from aiorocketmq.protocol.validators import check_group

__all__ = ["MAX_TRACE_BYTES", "create_app"]

STATIC = Path(__file__).parent / "static"
MAX_TRACE_BYTES = 64 * 1024 * 1024
SOURCE: web.AppKey[ClusterSource] = web.AppKey("source", ClusterSource)
REPLAY: web.AppKey[dict[str, Any]] = web.AppKey("replay", dict)


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, content_type="text/html", status=status)


def _group(request: web.Request) -> str:
    group = request.match_info["group"]
    try:
        check_group(group)
    except MQError as e:
        raise web.HTTPBadRequest(text=e.message) from None
    return group


async def cluster(request: web.Request) -> web.Response:
    return _html(pages.cluster_page(await request.app[SOURCE].cluster()))


async def topics(request: web.Request) -> web.Response:
    try:
        found = await request.app[SOURCE].topics(system="system" in request.query)
    except MQError as e:
        return _html(pages.cluster_page({"namesrvs": [], "brokers": [], "error": e.message}), 503)
    return _html(pages.topics_page(found))


async def groups(request: web.Request) -> web.Response:
    return _html(
        pages.groups_page(await request.app[SOURCE].groups(system="system" in request.query))
    )


async def group(request: web.Request) -> web.Response:
    return _html(pages.group_page(_group(request)))


async def group_events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: the group's view and timeline now, then after every look."""
    name = _group(request)
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    try:
        async for payload in request.app[SOURCE].subscribe(name):
            await response.write(f"data: {json.dumps(payload)}\n\n".encode())
    except ConnectionResetError:
        pass
    return response


async def api_cluster(request: web.Request) -> web.Response:
    return web.json_response(await request.app[SOURCE].cluster())


async def api_topics(request: web.Request) -> web.Response:
    return web.json_response(await request.app[SOURCE].topics(system="system" in request.query))


async def api_groups(request: web.Request) -> web.Response:
    return web.json_response(await request.app[SOURCE].groups(system="system" in request.query))


async def api_group(request: web.Request) -> web.Response:
    view = await request.app[SOURCE].group(_group(request))
    return web.json_response(view.to_json())


async def replay(request: web.Request) -> web.Response:
    loaded = request.app[REPLAY]
    return _html(pages.replay_page(loaded.get("timeline"), name=loaded.get("name", "")))


async def replay_upload(request: web.Request) -> web.Response:
    """A trace file sent from the page: parsed strictly, a bad line named."""
    post = await request.post()
    upload = post.get("trace")
    if not isinstance(upload, web.FileField):
        return _html(pages.replay_page(None, error="choose a trace file first"), 400)
    try:
        text = upload.file.read().decode("utf-8")
        timeline = Timeline.from_trace(parse_trace(text))
    except UnicodeDecodeError:
        return _html(pages.replay_page(None, error="not a trace: the file is not UTF-8 text"), 400)
    except TraceError as e:
        return _html(pages.replay_page(None, error=f"{upload.filename}: {e}"), 400)
    return _html(pages.replay_page(timeline.to_json(), name=upload.filename))


def create_app(source: ClusterSource, *, trace: Path | None = None) -> web.Application:
    """The app over ``source``; ``trace`` (a file) is shown on the replay page."""
    app = web.Application(client_max_size=MAX_TRACE_BYTES)
    app[SOURCE] = source
    app[REPLAY] = {}
    if trace is not None:
        timeline = Timeline.from_trace(parse_trace(trace.read_text(encoding="utf-8")))
        app[REPLAY].update(timeline=timeline.to_json(), name=trace.name)

    async def close_source(_: web.Application) -> None:
        await source.close()

    app.on_cleanup.append(close_source)
    app.router.add_get("/", cluster)
    app.router.add_get("/topics", topics)
    app.router.add_get("/groups", groups)
    app.router.add_get("/groups/{group}", group)
    app.router.add_get("/groups/{group}/events", group_events)
    app.router.add_get("/api/cluster", api_cluster)
    app.router.add_get("/api/topics", api_topics)
    app.router.add_get("/api/groups", api_groups)
    app.router.add_get("/api/groups/{group}", api_group)
    app.router.add_get("/replay", replay)
    app.router.add_post("/replay", replay_upload)
    app.router.add_static("/static", STATIC)
    return app
