"""The web inspector in a real headless Chromium (Debian's, driven by Selenium through its
chromedriver): what an operator sees, per tenant, read-only unless an admin key is used."""

from __future__ import annotations

import base64
import shutil
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentscope_memory.client import LongTermClient, MemoryClient
from agentscope_memory.long_term.engine import Scope
from agentscope_memory.message import (
    Base64Source,
    ImageBlock,
    Msg,
    MsgRole,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from conftest import ServerThread, make_settings

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.needs(CHROMIUM is not None and CHROMEDRIVER is not None,
                               "Debian's chromium and chromium-driver are not installed")

ADMIN, READER, OTHER = "admin-key-0123456789", "reader-key-012345678", "other-key-0123456789"


def png(width: int = 8, height: int = 8) -> bytes:
    """A small red PNG, built by hand (no imaging library needed)."""
    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


@pytest.fixture
def browser() -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as DriverService

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM or ""
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1280,900"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=DriverService(executable_path=CHROMEDRIVER or ""), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _fill(server: ServerThread, key: str | None) -> None:
    with MemoryClient(server.address, api_key=key) as client:
        client.create_memory("会话-1")
        client.add_messages("会话-1", [
            Msg.create(MsgRole.USER, "巴黎的天气怎么样? <script>window.pwned = 1</script>"),
            Msg.create(MsgRole.ASSISTANT, content=[ToolUseBlock(id="call_1", name="get_weather", input={"city": "Paris"})],
                       name="Assistant"),
            Msg.create(MsgRole.TOOL, content=[ToolResultBlock(id="call_1", name="get_weather",
                                                              output=[TextBlock(text="sunny, 21°C")])], name="Assistant"),
            Msg.create(MsgRole.USER, content=[ImageBlock(source=Base64Source(
                media_type="image/png", data=base64.b64encode(png()).decode()))]),
        ])
    with LongTermClient(server.address, api_key=key) as ltm:
        scope = Scope(agent_name="Assistant", user_id="alice")
        ltm.record(scope, [Msg.create(MsgRole.USER, "我每天早上喝绿茶")])
        ltm.record(scope, [Msg.create(MsgRole.USER, "My sister Anna lives in Berlin")])


def test_memories_messages_long_term_scores_and_health(tmp_path: Path, browser) -> None:
    from selenium.webdriver.common.by import By

    server = ServerThread(make_settings(tmp_path / "data", inspector_port=0, metrics_port=0))
    try:
        _fill(server, None)
        base = f"http://127.0.0.1:{server.running.inspector_port}"
        browser.get(base + "/")
        rows = browser.find_elements(By.CSS_SELECTOR, "#memories tbody tr")
        assert [r.find_element(By.TAG_NAME, "a").text for r in rows] == ["会话-1"]
        assert "read-only" in browser.find_element(By.TAG_NAME, "header").text

        # Follow the link (get() waits for the page to load; a click would not).
        browser.get(rows[0].find_element(By.TAG_NAME, "a").get_attribute("href"))
        assert browser.find_element(By.ID, "memory-id").text == "会话-1"
        messages = browser.find_elements(By.CSS_SELECTOR, "#messages > li")
        assert len(messages) == 4
        # Text is text: the script in a message is shown, never run.
        assert "<script>window.pwned = 1</script>" in messages[0].text
        assert browser.execute_script("return window.pwned === undefined")
        assert "→ get_weather" in messages[1].text and '"city": "Paris"' in messages[1].text
        assert "← get_weather" in messages[2].text and "sunny, 21°C" in messages[2].text
        thumb = messages[3].find_element(By.CSS_SELECTOR, "img.thumb")
        assert browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth", thumb) == 8
        assert browser.find_elements(By.ID, "delete") == []
        shot = tmp_path / "memory.png"
        browser.save_screenshot(str(shot))
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000

        browser.get(base + "/long-term?agent_name=Assistant&user_id=alice&query=她喝什么茶")
        first = browser.find_element(By.CSS_SELECTOR, "#results tbody tr")
        cells = [c.text for c in first.find_elements(By.TAG_NAME, "td")]
        assert cells[0] == "我每天早上喝绿茶"
        final, semantic, dense, lexical, decay, importance = (float(c) for c in cells[2:8])
        assert 0 < final <= 1 and 0 <= semantic <= 1 and 0 < decay <= 1
        browser.get(first.find_element(By.LINK_TEXT, "history").get_attribute("href"))
        assert "ADD" in browser.find_element(By.ID, "history").text

        browser.get(base + "/health")
        assert browser.find_element(By.ID, "status").text == "SERVING"
        assert "AddMessages" in browser.find_element(By.ID, "metrics").text

        browser.get(base + "/memories/missing")
        assert "missing" in browser.find_element(By.ID, "error").text
    finally:
        server.stop()


def test_keys_decide_the_tenant_and_only_an_admin_key_deletes(tmp_path: Path, browser) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    keys = {ADMIN: "tenant-a", READER: "tenant-a", OTHER: "tenant-b"}
    server = ServerThread(make_settings(tmp_path / "data", api_keys=keys, inspector_port=0,
                                        inspector_admin_keys=[ADMIN]))
    try:
        _fill(server, READER)
        base = f"http://127.0.0.1:{server.running.inspector_port}"

        def login(key: str) -> None:
            browser.delete_all_cookies()
            browser.get(base + "/")
            assert browser.current_url.endswith("/login")
            browser.find_element(By.ID, "key").send_keys(key)
            browser.find_element(By.ID, "login").click()
            # The click returns before the login's answer (and its cookie) arrives: wait for the
            # next page, the memories after a good key or the error after a bad one.
            WebDriverWait(browser, 30).until(
                lambda b: b.find_elements(By.ID, "tenant") or b.find_elements(By.ID, "error"))

        login("wrong-key-0123456789")
        assert browser.find_element(By.ID, "error").text == "unknown API key"

        login(OTHER)
        assert browser.find_element(By.ID, "tenant").text == "tenant-b"
        assert browser.find_elements(By.CSS_SELECTOR, "#memories tbody tr") == []
        browser.get(base + "/memories/会话-1")
        assert "会话-1" in browser.find_element(By.ID, "error").text  # another tenant's: not found

        login(READER)
        browser.get(base + "/memories/会话-1")
        assert browser.find_elements(By.ID, "delete") == []
        # A forged form (no admin key, no token) is refused and deletes nothing. (Posted as a
        # form: the pages' policy forbids them fetch().)
        def forge(refusal: str) -> None:
            browser.execute_script("""
                const form = document.createElement('form');
                form.method = 'post';
                form.action = '/memories/' + encodeURIComponent('会话-1') + '/delete';
                const token = document.createElement('input');
                token.name = 'csrf';
                token.value = 'x';
                form.appendChild(token);
                document.body.appendChild(form);
                form.submit();""")
            WebDriverWait(browser, 30, ignored_exceptions=[StaleElementReferenceException]).until(
                lambda b: refusal in b.find_element(By.TAG_NAME, "body").text)

        forge("deleting needs an admin key")

        login(ADMIN)
        browser.get(base + "/memories/会话-1")
        # Even an admin's cookie does not delete without the page's token (a cross-site form).
        forge("reload the page")
        browser.get(base + "/memories/会话-1")
        browser.find_element(By.ID, "delete").click()
        # The page may change between finding its heading and reading it (the delete's redirect
        # lands): a stale heading is looked for again.
        WebDriverWait(browser, 30, ignored_exceptions=[StaleElementReferenceException]).until(
            lambda b: b.find_elements(By.TAG_NAME, "h1") and b.find_element(By.TAG_NAME, "h1").text == "Memories")
        assert browser.find_elements(By.CSS_SELECTOR, "#memories tbody tr") == []
        with MemoryClient(server.address, api_key=READER) as client:
            assert [m.memory_id for m in client.list_memories()] == []
    finally:
        server.stop()


def test_tiers_and_shared_pools(tmp_path: Path, browser) -> None:
    from selenium.webdriver.common.by import By

    from agentscope_memory.client import PoolClient
    from agentscope_memory.client.tiered import TieredClient
    from agentscope_memory.short_term.tiered import TieredConfig

    server = ServerThread(make_settings(tmp_path / "data", inspector_port=0))
    try:
        with TieredClient(server.address) as tiered, PoolClient(server.address) as pools:
            tiered.create_memory("分层代理", TieredConfig(l1_compact_trigger=65, l2_budget=100, score_importance=False))
            for i in range(12):
                tiered.add("分层代理", [Msg.create(MsgRole.USER, f"第{i}条笔记 " + "x" * 30)],
                           importances=[0.9 if i % 2 else 0.3])
            status = tiered.status("分层代理")
            pools.write("团队", "发布", {"冻结": "周五"}, writer="planner")
            pools.write("团队", "发布", {"冻结": "下周一"}, writer="coder", metadata={"来源": "站会"})
            pools.write("团队", "负责人", "张三", writer="planner")
            pools.set_memory_pools("分层代理", ["团队"], 500)
        base = f"http://127.0.0.1:{server.running.inspector_port}"

        browser.get(base + "/memories/分层代理")
        rows = browser.find_elements(By.CSS_SELECTOR, "#tiers tbody tr")
        assert [r.find_elements(By.TAG_NAME, "td")[0].text for r in rows] == ["L1", "L2", "L3", "L4"]
        # The page shows the same numbers as the status RPC.
        for row, usage in zip(rows, status.tiers, strict=True):
            cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
            assert cells[1] == str(usage.items) and cells[2] == f"{usage.tokens} / {usage.budget}"
        assert f"{status.summaries} summaries" in browser.find_element(By.ID, "tier-facts").text
        l2 = browser.find_elements(By.CSS_SELECTOR, "#tier-l2 tbody tr")
        assert len(l2) == status.tiers[1].items > 0 and all("0.90" in r.text for r in l2)
        assert "promote" in browser.find_element(By.ID, "tier-events").text
        link = browser.find_element(By.CSS_SELECTOR, "#memory-pools a")
        assert link.text == "团队"

        browser.get(link.get_attribute("href"))
        assert browser.find_element(By.ID, "pool-title").text == "团队"
        entries = [[c.text for c in r.find_elements(By.TAG_NAME, "td")]
                   for r in browser.find_elements(By.CSS_SELECTOR, "#entries tbody tr")]
        assert [(e[0], e[2], e[3], e[4]) for e in entries] == [("发布", "2", "planner", "coder"), ("负责人", "1", "planner", "planner")]
        assert '"来源": "站会"' in entries[0][6]
        events = browser.find_elements(By.CSS_SELECTOR, "#pool-events tbody tr")
        assert [e.find_elements(By.TAG_NAME, "td")[1].text for e in events] == ["shared_pool.write"] * 3
        assert browser.find_element(By.ID, "rendered").text.splitlines() == [
            "[SHARED:负责人] 张三", '[SHARED:发布] {"冻结":"下周一"}']
        shot = tmp_path / "pools.png"
        browser.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000

        browser.get(base + "/pools?pool_id=没有这个池")
        assert browser.find_element(By.ID, "no-entries").text == "No entries."
    finally:
        server.stop()


def test_offloaded_contexts_page_through_links(tmp_path: Path, browser) -> None:
    # Only the first 50 of a memory's offloaded contexts were ever shown (the rest a count).
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from agentscope_memory.message import msg_to_dict
    from agentscope_memory.session import StateEntry

    server = ServerThread(make_settings(tmp_path / "data", inspector_port=0))
    try:
        offloaded = {f"卸载-{i:03d}": [msg_to_dict(Msg.create(MsgRole.TOOL, f"结果{j}")) for j in range(i % 3)]
                     for i in range(120)}
        with MemoryClient(server.address) as client:
            client.create_memory("压缩记忆", "AUTO_CONTEXT")
            client.load_state("压缩记忆", [StateEntry("autoContextMemory_offloadContext",
                                                      value={"offloadContext": offloaded})])
        browser.get(f"http://127.0.0.1:{server.running.inspector_port}/memories/压缩记忆")

        def shown() -> list[str]:
            return [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#offloads li")]

        def follow(link: str, first: str) -> None:
            browser.find_element(By.ID, link).click()
            WebDriverWait(browser, 30, ignored_exceptions=[StaleElementReferenceException]).until(
                lambda b: shown()[:1] == [first])

        assert browser.find_element(By.ID, "offloads-total").text == "120 offloaded contexts in all."
        def rows(start: int, end: int) -> list[str]:
            return [f"卸载-{i:03d}: {i % 3} message{'' if i % 3 == 1 else 's'}" for i in range(start, end)]

        assert shown() == rows(0, 50)
        assert browser.find_elements(By.ID, "offloads-first") == []
        follow("offloads-next", "卸载-050: 2 messages")
        assert shown() == rows(50, 100)
        assert "from after 卸载-049" in browser.find_element(By.ID, "offloads-total").text
        follow("offloads-next", "卸载-100: 1 message")
        assert shown() == rows(100, 120)
        assert browser.find_elements(By.ID, "offloads-next") == []
        follow("offloads-first", "卸载-000: 0 messages")
        # The messages and the rest of the page are still there while paging.
        assert browser.find_element(By.ID, "memory-id").text == "压缩记忆"
    finally:
        server.stop()


def test_right_to_left_overrides_in_stored_text_stay_inside_their_field(tmp_path: Path, browser) -> None:
    # A tool name ending in U+202E (RIGHT-TO-LEFT OVERRIDE) reversed what followed it on the
    # line: the call's id was drawn to the left of the name, backwards, as if the name said it.
    from selenium.webdriver.common.by import By

    server = ServerThread(make_settings(tmp_path / "data", inspector_port=0))
    try:
        with MemoryClient(server.address) as client:
            client.create_memory("双向")
            client.add_messages("双向", [Msg.create(MsgRole.ASSISTANT, name="助手\u202e", content=[
                ToolUseBlock(id="call-1", name="查询\u202eطقس", input={})])])
        browser.get(f"http://127.0.0.1:{server.running.inspector_port}/memories/双向")
        tool = browser.find_element(By.CSS_SELECTOR, ".tool-use .tool")
        call_id = browser.find_element(By.CSS_SELECTOR, ".tool-use code")
        assert call_id.text == "call-1"
        assert call_id.rect["x"] >= tool.rect["x"] + tool.rect["width"] - 1, (tool.rect, call_id.rect)
    finally:
        server.stop()
