"""The web inspector against what an outside tester tries over plain HTTP: framing a page,
posting a form from another site, and pages made huge by what is stored."""

from __future__ import annotations

import base64
import re
import socket

import httpx
import pytest

from agentscope_memory.client import AsyncMemoryClient, AsyncPoolClient
from agentscope_memory.errors import NotFoundError
from agentscope_memory.message import Base64Source, ImageBlock, Msg, MsgRole, URLSource
from agentscope_memory.session import StateEntry
from agentscope_memory.short_term.auto_context.engine import CompressionEvent

READER = "inspector-reader-key-0001"
ADMIN = "inspector-admin-key-00001"


@pytest.fixture
async def inspector(server_factory):
    server = await server_factory(inspector_port=0, api_keys={READER: "tenant-a", ADMIN: "tenant-a"},
                                  inspector_admin_keys=[ADMIN])
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.inspector_port}", timeout=60) as http:
        yield server, http


async def test_every_answer_forbids_framing_and_scripts(inspector) -> None:
    # A page another site may frame can have its delete button clicked through a decoy; a page
    # without a script ban runs whatever stored text slips past escaping.
    server, http = inspector
    async with AsyncMemoryClient(server.address, api_key=READER) as memories:
        await memories.create_memory("会话")
    answers = {
        "page": await http.get("/memories/%E4%BC%9A%E8%AF%9D", headers={"x-api-key": READER}),
        "login form": await http.get("/login"),
        "redirect to login": await http.get("/"),
        "error page": await http.get("/memories/%E6%B2%A1%E6%9C%89", headers={"x-api-key": READER}),
        "refused delete": await http.post("/memories/%E4%BC%9A%E8%AF%9D/delete", headers={"x-api-key": READER}),
        "unknown route": await http.get("/nowhere"),
        "stylesheet": await http.get("/static/inspector.css"),
    }
    for what, answer in answers.items():
        policy = answer.headers.get("content-security-policy", "")
        directives = dict((d.strip().split(" ", 1) + [""])[:2] for d in policy.split(";") if d.strip())
        assert directives.get("frame-ancestors") == "'none'", (what, policy)
        assert directives.get("default-src") == "'none'" and "script-src" not in directives, (what, policy)
        assert directives.get("form-action") == "'self'", (what, policy)
        assert answer.headers.get("x-frame-options") == "DENY", what
        assert answer.headers.get("x-content-type-options") == "nosniff", what
        # Plain HTTP: no HSTS (it is only for a server with TLS; see tests/test_tls.py).
        assert "strict-transport-security" not in answer.headers, what


async def test_a_logged_out_session_is_refused_even_from_a_copy_of_its_cookie(inspector) -> None:
    # The cookie was stateless: a copy taken before the logout kept working for 12 hours.
    server, http = inspector
    own = {"origin": f"http://127.0.0.1:{server.inspector_port}"}
    sessions = []
    for _ in range(2):
        login = await http.post("/login", data={"key": READER}, headers=own)
        assert login.status_code == 303
        sessions.append({"cookie": login.headers["set-cookie"].split(";", 1)[0]})
        http.cookies.clear()
    first, second = sessions
    assert (await http.get("/", headers=first)).status_code == 200
    logout = await http.post("/logout", headers={**first, **own})
    assert logout.status_code == 303 and logout.headers["location"] == "/login"
    copied = await http.get("/", headers=first)
    assert copied.status_code == 303 and copied.headers["location"] == "/login"
    assert (await http.get("/memories/%E4%BC%9A%E8%AF%9D", headers=first)).status_code == 303
    # Another login of the same key (in the same second too) is its own session: it ends only
    # when it logs out itself.
    assert second != first and (await http.get("/", headers=second)).status_code == 200
    assert (await http.post("/logout", headers={**second, **own})).status_code == 303
    assert (await http.get("/", headers=second)).status_code == 303
    # Logging in again at once works, and the key in a header is untouched by any of it.
    again = await http.post("/login", data={"key": READER}, headers=own)
    http.cookies.clear()
    assert (await http.get("/", headers={"cookie": again.headers["set-cookie"].split(";", 1)[0]})).status_code == 200
    assert (await http.get("/", headers={"x-api-key": READER})).status_code == 200


async def test_a_wrong_key_in_a_header_is_a_401_with_the_reason_not_a_redirect(inspector) -> None:
    # A script sending a wrong key got a 303 to the login form: it followed it and read a 200.
    server, http = inspector
    # (Seven wrong keys: fewer than the ten a minute after which the address is refused, 429.)
    wrong = {"x-api-key": "错误的钥匙-0123456789".encode()}
    tries = [(h, "/") for h in ({"authorization": "Bearer wrong-key-0123456789"},
                                {"authorization": "Token wrong-key-0123456789"})]
    tries += [(wrong, p) for p in ("/", "/memories/%E4%BC%9A%E8%AF%9D", "/long-term?query=%E8%8C%B6", "/health")]
    for headers, path in tries:
        answer = await http.get(path, headers=headers)
        assert answer.status_code == 401, (headers, path, answer.status_code)
        assert answer.text == "unknown API key\n", answer.text
        assert answer.headers["www-authenticate"].startswith("Bearer")
    refused = await http.post("/memories/%E4%BC%9A%E8%AF%9D/delete", headers=wrong)
    assert refused.status_code == 401
    # A browser with no key and no cookie is still sent to the login form.
    browser = await http.get("/")
    assert browser.status_code == 303 and browser.headers["location"] == "/login"


async def test_a_form_posted_from_another_site_changes_nothing(inspector) -> None:
    # SameSite keeps the victim's cookie off a cross-site post, but not the attacker's: a
    # cross-site login form would log the victim in to the attacker's tenant (whatever they
    # then tell the "inspector" lands there), a logout form would log them out.
    server, http = inspector
    own = f"http://127.0.0.1:{server.inspector_port}"
    evil = {"origin": "https://evil.example"}
    login = await http.post("/login", data={"key": READER}, headers=evil)
    assert login.status_code == 403 and "set-cookie" not in login.headers and "another site" in login.text
    for headers in ({"origin": "null"}, {"sec-fetch-site": "cross-site"}, {"sec-fetch-site": "same-site"}):
        refused = await http.post("/login", data={"key": READER}, headers=headers)
        assert refused.status_code == 403 and "set-cookie" not in refused.headers, headers
    assert (await http.post("/logout", headers=evil)).status_code == 403

    # The admin's own session and page token, replayed by another site's form: refused too.
    logged_in = await http.post("/login", data={"key": ADMIN}, headers={"origin": own, "sec-fetch-site": "same-origin"})
    assert logged_in.status_code == 303 and "agentscope_memory_key=" in logged_in.headers["set-cookie"]
    session = {"cookie": logged_in.headers["set-cookie"].split(";", 1)[0]}
    async with AsyncMemoryClient(server.address, api_key=ADMIN) as memories:
        await memories.create_memory("主管")
        page = await http.get("/memories/%E4%B8%BB%E7%AE%A1", headers=session)
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
        assert csrf is not None
        forged = await http.post("/memories/%E4%B8%BB%E7%AE%A1/delete", data={"csrf": csrf.group(1)},
                                 headers={**session, **evil})
        assert forged.status_code == 403
        assert (await memories.get_memory("主管")).memory_id == "主管"
        deleted = await http.post("/memories/%E4%B8%BB%E7%AE%A1/delete", data={"csrf": csrf.group(1)},
                                  headers={**session, "origin": own})
        assert deleted.status_code == 303
        with pytest.raises(NotFoundError):
            await memories.get_memory("主管")


async def test_no_page_grows_past_a_few_megabytes_whatever_is_stored(inspector) -> None:
    # A page of messages holds up to 4 MiB of them; escaped ('"' is 6 bytes of HTML) that made a
    # 20 MB page, and an inline image drawn as both link and thumbnail twice its size.
    server, http = inspector
    quotes = '"' * 78_000
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(2_800_000)).decode()
    async with AsyncMemoryClient(server.address, api_key=READER) as memories, \
            AsyncPoolClient(server.address, api_key=READER) as pools:
        await memories.create_memory("引号")
        await memories.add_messages("引号", [Msg.create(MsgRole.USER, f"第{i}条 {quotes}") for i in range(50)])
        await memories.create_memory("图片")
        await memories.add_messages("图片", [
            Msg.create(MsgRole.USER, "小图", content=[ImageBlock(source=Base64Source(media_type="image/png", data="iVBORw0KGgo="))]),
            Msg.create(MsgRole.USER, "大图", content=[ImageBlock(source=Base64Source(media_type="image/png", data=png))])])
        for i in range(4):
            await pools.write("大池", f"k{i}", {"v": "<" * 1_000_000}, writer="w")
    headers = {"x-api-key": READER}

    page = await http.get("/memories/%E5%BC%95%E5%8F%B7", headers=headers)
    assert page.status_code == 200 and len(page.content) < 3_000_000, len(page.content)
    assert "第0条 " + "&#34;" * 78_000 in page.text  # the first messages whole
    cut = re.search(r'… ([\d,]+) more characters not shown', page.text)
    assert cut is not None and "… 1 more block not shown" in page.text
    assert page.text.count('<li class="msg role-user">') == 50  # every message listed, the last ones' text cut

    page = await http.get("/memories/%E5%9B%BE%E7%89%87", headers=headers)
    assert page.status_code == 200 and len(page.content) < 3_000_000, len(page.content)
    assert page.text.count('src="data:image/png;base64,iVBORw0KGgo="') == 1 and 'href="data:' not in page.text
    assert "image/png, 2,800,008 bytes inline, too large to show on this page" in page.text

    page = await http.get("/pools/%E5%A4%A7%E6%B1%A0", headers=headers)
    assert page.status_code == 200 and len(page.content) < 3_000_000, len(page.content)
    assert "more characters not shown" in page.text


async def test_a_memory_compressed_thousands_of_times_shows_its_first_events(inspector) -> None:
    # Every compression event (and every offloaded context) was drawn at once: a memory
    # compressed for months made a page without end.
    server, http = inspector
    event = CompressionEvent("TOOL_INVOCATION_COMPRESS", 0, 3, "前", "后", "摘要", {"inputToken": 10}).to_dict()
    async with AsyncMemoryClient(server.address, api_key=READER) as memories:
        await memories.create_memory("压缩", "AUTO_CONTEXT")
        offloaded = {f"卸载-{i:03d}": [] for i in range(120)}
        await memories.load_state("压缩", [StateEntry("autoContextMemory_compressionEvents", items=[event] * 3000),
                                           StateEntry("autoContextMemory_offloadContext",
                                                      value={"offloadContext": offloaded})])
    page = await http.get("/memories/%E5%8E%8B%E7%BC%A9", headers={"x-api-key": READER})
    assert page.status_code == 200
    events = re.search(r'<table id="events">.*?</table>', page.text, re.S)
    assert events is not None and events.group(0).count("<tr><td") == 50
    assert "Only the first 50 events are shown" in page.text
    offloads = re.search(r'<ul id="offloads">.*?</ul>', page.text, re.S)
    assert offloads is not None and offloads.group(0).count("<li>") == 50 and "卸载-049" in offloads.group(0)
    assert "120 offloaded contexts in all" in page.text and "offloads_after=%E5%8D%B8%E8%BD%BD-049" in page.text


async def test_compression_events_with_huge_fields_keep_the_page_small(inspector) -> None:
    # An event's type, target id and token counts are whatever a loaded state said.
    server, http = inspector
    event = CompressionEvent('"' * 60_000, 0, 3, "前", "后", "摘" * 20_000,
                             {"tokenBefore": "<" * 20_000, "tokenAfter": 1}).to_dict()
    async with AsyncMemoryClient(server.address, api_key=READER) as memories:
        await memories.create_memory("大事件", "AUTO_CONTEXT")
        await memories.load_state("大事件", [StateEntry("autoContextMemory_compressionEvents", items=[event] * 40)])
    page = await http.get("/memories/%E5%A4%A7%E4%BA%8B%E4%BB%B6", headers={"x-api-key": READER})
    assert page.status_code == 200 and len(page.content) < 3_000_000, len(page.content)
    events = re.search(r'<table id="events">.*?</table>', page.text, re.S)
    assert events is not None and 0 < events.group(0).count("<tr><td") < 40  # a page of them: 4 MiB stored
    assert "Only the first" in page.text
    assert "&#34;" * 60_000 in events.group(0) and "more characters not shown" in events.group(0)


async def test_an_inspector_without_keys_answers_no_other_sites_name(server_factory) -> None:
    # DNS rebinding: a site the operator visits points a name of its own at 127.0.0.1, and its
    # script reads the keyless inspector as its own origin.
    server = await server_factory(inspector_port=0)
    async with AsyncMemoryClient(server.address) as memories:
        await memories.create_memory("私密会话")
    port = server.inspector_port
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
        for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.evil.example:{port}"):
            refused = await http.get("/", headers={"host": host})
            assert refused.status_code == 403 and "私密会话" not in refused.text, host
            assert "api_keys" in refused.text
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}", f"{socket.gethostname()}:{port}"):
            page = await http.get("/", headers={"host": host})
            assert page.status_code == 200 and "私密会话" in page.text, host


async def test_an_admins_page_still_deletes_after_a_restart(server_factory, tmp_path) -> None:
    # The login outlives a restart; the delete form's token did not, and the admin was told
    # they needed an admin key.
    data = tmp_path / "data"
    settings = {"data_dir": data, "inspector_port": 0, "api_keys": {ADMIN: "tenant-a"},
                "inspector_admin_keys": [ADMIN], "long_term_enabled": False}
    first = await server_factory(**settings)
    async with httpx.AsyncClient(timeout=60) as http:
        login = await http.post(f"http://127.0.0.1:{first.inspector_port}/login", data={"key": ADMIN})
        session = {"cookie": login.headers["set-cookie"].split(";", 1)[0]}
        async with AsyncMemoryClient(first.address, api_key=ADMIN) as memories:
            await memories.create_memory("旧页面")
        page = await http.get(f"http://127.0.0.1:{first.inspector_port}/memories/%E6%97%A7%E9%A1%B5%E9%9D%A2",
                              headers=session)
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
        assert csrf is not None
        await first.stop(0)
        second = await server_factory(**settings)
        base = f"http://127.0.0.1:{second.inspector_port}"
        stale = await http.post(base + "/memories/%E6%97%A7%E9%A1%B5%E9%9D%A2/delete", data={"csrf": "0" * 64},
                                headers=session)
        assert stale.status_code == 403 and "reload the page" in stale.text and "admin key" not in stale.text
        deleted = await http.post(base + "/memories/%E6%97%A7%E9%A1%B5%E9%9D%A2/delete",
                                  data={"csrf": csrf.group(1)}, headers=session)
        assert deleted.status_code == 303, deleted.text
        async with AsyncMemoryClient(second.address, api_key=ADMIN) as memories:
            with pytest.raises(NotFoundError):
                await memories.get_memory("旧页面")


async def test_an_image_blocks_url_is_a_link_the_page_never_fetches(inspector) -> None:
    # Drawn as a thumbnail, a stored URL had the operator's browser call any address it can
    # reach (a router's admin page, a tracker learning who looked at the memory, and when).
    server, http = inspector
    router = "http://192.168.1.1/cgi-bin/reboot?now=1"
    async with AsyncMemoryClient(server.address, api_key=READER) as memories:
        await memories.create_memory("链接")
        await memories.add_messages("链接", [Msg.create(MsgRole.USER, "看图", content=[
            ImageBlock(source=URLSource(url=router)), ImageBlock(source=URLSource(url="javascript:alert(1)"))])])
    page = await http.get("/memories/%E9%93%BE%E6%8E%A5", headers={"x-api-key": READER})
    assert page.status_code == 200
    assert re.findall(r'<img [^>]*src="([^"]*)"', page.text) == []
    link = re.search(r'<a href="([^"]*)" rel="noreferrer noopener"', page.text)
    assert link is not None and link.group(1).replace("&amp;", "&") == router
    assert "[image: javascript:alert(1)]" in page.text and 'href="javascript:' not in page.text
    policy = page.headers["content-security-policy"]
    assert "img-src 'self' data:;" in policy


async def test_hostile_ids_tokens_and_bodies_get_client_errors(inspector) -> None:
    # What an outside tester sends in a URL or a form body: a 4xx page, never a 500 or a trace.
    server, http = inspector
    async with AsyncMemoryClient(server.address, api_key=READER) as memories:
        await memories.create_memory("甲")
        await memories.add_messages("甲", [Msg.create(MsgRole.USER, f"第{i}条") for i in range(60)])
        await memories.create_memory("乙")
    headers = {"x-api-key": READER}
    first = await http.get("/memories/%E7%94%B2", headers=headers)
    token = re.search(r'href="\?page=([^"&]*)', first.text)
    assert token is not None
    paths = ["/memories/a%00b", "/memories/" + "长" * 300, "/memories/%2E%2E", "/memories/%2F",
             "/?page=%00%FF", "/?page=-1", "/?page=" + "A" * 4000, "/memories/%E7%94%B2?page=%E4%B8%AD",
             f"/memories/%E4%B9%99?page={token.group(1)}",  # another memory's token
             f"/?page={token.group(1)}", f"/pools/p?page={token.group(1)}", "/pools/%00", "/pools?pool_id=" + "池" * 300,
             "/long-term/%00/history", "/long-term/x/history?page=zz", "/static/../app.py", "/static/%2e%2e/app.py"]
    for path in paths:
        answer = await http.get(path, headers=headers)
        assert 400 <= answer.status_code < 500, (path, answer.status_code)
        assert "Traceback" not in answer.text and "Internal Server Error" not in answer.text, path
    admin = {"x-api-key": ADMIN}
    for content_type, body in [("multipart/form-data", b"x"), ("application/x-www-form-urlencoded",
                                                               b"&".join(b"f%d=1" % i for i in range(5000)))]:
        for path in ("/memories/%E7%94%B2/delete", "/login"):
            answer = await http.post(path, content=body, headers={**admin, "content-type": content_type})
            assert 400 <= answer.status_code < 500, (path, content_type, answer.status_code)
    async with AsyncMemoryClient(server.address, api_key=READER) as memories:
        assert len(await memories.get_messages("甲")) == 60
