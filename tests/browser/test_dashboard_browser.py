"""The dashboard in headless Chromium (Debian's chromium and chromium-driver, through Selenium)
while consumers join and leave: the holder column and the timeline change on the page itself.

With ``AIOROCKETMQ_SCREENSHOTS=DIR`` it also saves a screenshot of each page there (how the
ones in ``docs/dashboard/`` were made).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.consumer import ConsumeConcurrentlyStatus, PushConsumer
from aiorocketmq.dashboard import Dashboard
from aiorocketmq.local_cluster import LocalCluster
from aiorocketmq.producer import Message, Producer
from aiorocketmq.trace import tracer
from tests.helpers import wait_until

TOPIC = "BrowserTopic"
GROUP = "browser_group"
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.cluster(brokers=2, topic=TOPIC, queues=2)

if CHROMEDRIVER is None or shutil.which("chromium") is None:
    pytest.skip(
        "headless Chromium is missing (Debian packages chromium and chromium-driver; "
        "`make test` installs them where apt-get can)",
        allow_module_level=True,
    )

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402


@pytest.fixture
def driver() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000"):
        options.add_argument(flag)
    options.binary_location = shutil.which("chromium") or ""
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture
async def dashboard(cluster: LocalCluster) -> AsyncIterator[Dashboard]:
    async with Dashboard(cluster.namesrv_addr, "127.0.0.1:0", refresh=0.25) as d:
        yield d


async def _ok(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def consumer(cluster: LocalCluster, name: str) -> PushConsumer:
    c = PushConsumer(GROUP, cluster.namesrv_addr, instance_name=name)
    c.subscribe(TOPIC, "*")
    c.register_message_listener(_ok)
    return c


async def until(check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Poll the browser (in a thread: the cluster and the dashboard run on this loop)."""

    async def in_thread() -> bool:
        return await asyncio.to_thread(check)

    await wait_until(in_thread, timeout=timeout, interval=0.2, message=what)


def holders(browser: webdriver.Chrome) -> set[str]:
    """The holder column of the topic's rows (read in one script: the page redraws often)."""
    cells = browser.execute_script(
        "return Array.from(document.querySelectorAll('#progress tbody tr'))"
        ".filter(r => r.cells[0].textContent === arguments[0])"
        ".map(r => r.cells[6].textContent);",
        TOPIC,
    )
    return set(cells)


def bars(browser: webdriver.Chrome, holder: str, *, open_only: bool = False) -> int:
    """How many timeline bars of ``holder`` the page draws (still open ones only)."""
    selector = "#timeline .bar" + (".open" if open_only else "")
    count: int = browser.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]))"
        ".filter(b => b.dataset.holder === arguments[1]).length;",
        selector,
        holder,
    )
    return count


def title_of_bar(browser: webdriver.Chrome, holder: str) -> str:
    title: str = browser.execute_script(
        "const b = Array.from(document.querySelectorAll('#timeline .bar'))"
        ".find(b => b.dataset.holder === arguments[0]); return b ? b.title : '';",
        holder,
    )
    return title


def shot(browser: webdriver.Chrome, name: str) -> None:
    folder = os.environ.get("AIOROCKETMQ_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(folder) / f"{name}.png"))


async def test_the_page_follows_consumers_joining_and_leaving(
    cluster: LocalCluster, dashboard: Dashboard, driver: webdriver.Chrome, tmp_path: Path
) -> None:
    trace_file = tmp_path / "trace.jsonl"
    tracer.to_file(trace_file)
    a, b = consumer(cluster, "alice"), consumer(cluster, "bob")
    try:
        async with Producer("browser_pg", cluster.namesrv_addr) as producer:
            for i in range(20):
                await producer.send(Message(TOPIC, b"m%d" % i))
        await a.start()
        await asyncio.to_thread(driver.get, f"{dashboard.url}groups/{GROUP}")
        await until(lambda: holders(driver) == {a.client_id}, "alice holds every queue")
        await until(lambda: bars(driver, a.client_id, open_only=True) >= 4, "alice's bars")

        await b.start()
        await until(lambda: holders(driver) == {a.client_id, b.client_id}, "bob takes his share")
        await until(lambda: bars(driver, b.client_id, open_only=True) >= 2, "bob's bars open")
        # One look at the group reads the members, then the holders: a member that joined
        # between the two is a holder on this look and a member on the next.
        await until(
            lambda: f"{b.client_id} joined" in driver.find_element(By.ID, "events").text,
            "bob's join in the events",
        )
        await asyncio.sleep(1.0)
        await asyncio.to_thread(shot, driver, "group")

        await b.shutdown()
        await until(lambda: holders(driver) == {a.client_id}, "alice again alone")
        await until(
            lambda: (
                bars(driver, b.client_id) >= 2 and bars(driver, b.client_id, open_only=True) == 0
            ),
            "bob's bars closed",
        )
        hover = await asyncio.to_thread(title_of_bar, driver, b.client_id)
        assert b.client_id in hover and "joined" in hover, hover

        for path, name in (("", "cluster"), ("topics", "topics")):
            await asyncio.to_thread(driver.get, dashboard.url + path)
            page = await asyncio.to_thread(lambda: driver.page_source)
            assert cluster.broker_list[0].address in page or TOPIC in page
            await asyncio.to_thread(shot, driver, name)
    finally:
        await b.shutdown()
        await a.shutdown()
        tracer.close_file()

    # the recorded trace, replayed on the page
    await asyncio.to_thread(driver.get, dashboard.url + "replay")

    def upload() -> None:
        driver.find_element(By.CSS_SELECTOR, "input[type=file]").send_keys(str(trace_file))
        driver.find_element(By.CSS_SELECTOR, "form button").click()

    await asyncio.to_thread(upload)
    await until(lambda: bars(driver, b.client_id) >= 2, "bob's holdings in the replay")
    await asyncio.to_thread(shot, driver, "replay")
