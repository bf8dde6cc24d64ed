"""Guessing keys: an address that presents too many wrong API keys (or forged inspector
sessions) is refused for a while on every surface, gRPC and HTTP alike, whatever it presents
meanwhile; other addresses are served as before. And the inspector's login cookie holds a
signed, expiring session, never the key itself."""

from __future__ import annotations

import httpx
import pytest

from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.errors import ResourceExhaustedError, UnauthenticatedError
from agentscope_memory_server.auth_failures import FailedAuthLimiter, TooManyFailedAuthentications, grpc_peer_address
from agentscope_memory_server.inspector.sessions import Sessions

KEY = "the-right-key-0123456789"
ADMIN = "the-admin-key-0123456789"
WRONG = "a-wrong-key-0123456789"


async def test_wrong_keys_from_one_address_are_refused_on_every_surface(server_factory) -> None:
    server = await server_factory(api_keys={KEY: "tenant-a"}, auth_failure_limit=3, long_term_enabled=False,
                                  mem0_rest_port=0, mcp_port=0, metrics_port=0, inspector_port=0)
    async with AsyncMemoryClient(server.address, api_key=KEY, retries=0) as good:
        await good.create_memory("会话")
    # Two wrong keys over gRPC, one over mem0 REST: the third failure is one too many.
    async with AsyncMemoryClient(server.address, api_key=WRONG, retries=0) as guesser:
        for _ in range(2):
            with pytest.raises(UnauthenticatedError, match="unknown API key"):
                await guesser.get_memory("会话")
    async with httpx.AsyncClient(timeout=30) as http:
        mem0 = f"http://127.0.0.1:{server.mem0_rest_port}/memories?user_id=u"
        refused = await http.get(mem0, headers={"authorization": f"Token {WRONG}"})
        assert refused.status_code == 429, refused.text
        assert "too many failed authentications" in refused.json()["detail"]
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        # From now on the address is refused whatever it presents, the right key too.
        urls = [mem0, f"http://127.0.0.1:{server.metrics_port}/metrics",
                f"http://127.0.0.1:{server.inspector_port}/"]
        for url in urls:
            answer = await http.get(url, headers={"x-api-key": KEY})
            assert answer.status_code == 429, (url, answer.text)
            assert "retry-after" in answer.headers
        mcp = await http.post(f"http://127.0.0.1:{server.mcp_port}/mcp", json={}, headers={"x-api-key": KEY})
        assert mcp.status_code == 429 and "too many failed" in mcp.json()["error"]
        login = await http.post(f"http://127.0.0.1:{server.inspector_port}/login", data={"key": KEY})
        assert login.status_code == 429 and "set-cookie" not in login.headers
    async with AsyncMemoryClient(server.address, api_key=KEY, retries=0) as good:
        with pytest.raises(ResourceExhaustedError, match="too many failed authentications"):
            await good.get_memory("会话")
    # Another address (127.0.0.2 is loopback too) is served as before.
    transport = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
    async with httpx.AsyncClient(transport=transport, timeout=30) as other:
        metrics = await other.get(f"http://127.0.0.1:{server.metrics_port}/metrics", headers={"x-api-key": KEY})
        assert metrics.status_code == 200
        wrong = await other.get(f"http://127.0.0.1:{server.metrics_port}/metrics", headers={"x-api-key": WRONG})
        assert wrong.status_code == 401


async def test_a_missing_key_guesses_nothing_and_is_not_counted(server_factory) -> None:
    server = await server_factory(api_keys={KEY: "t"}, auth_failure_limit=2, long_term_enabled=False)
    async with AsyncMemoryClient(server.address, retries=0) as anonymous:
        for _ in range(5):
            with pytest.raises(UnauthenticatedError, match="missing API key"):
                await anonymous.get_memory("x")
    async with AsyncMemoryClient(server.address, api_key=KEY, retries=0) as good:
        await good.create_memory("x")


async def test_the_inspector_cookie_is_a_signed_session_not_the_key(server_factory, tmp_path) -> None:
    data = tmp_path / "data"
    server = await server_factory(data_dir=data, api_keys={KEY: "tenant-a", ADMIN: "tenant-a"},
                                  inspector_admin_keys=[ADMIN], inspector_port=0, long_term_enabled=False)
    async with AsyncMemoryClient(server.address, api_key=KEY, retries=0) as client:
        await client.create_memory("会话")
    base = f"http://127.0.0.1:{server.inspector_port}"
    async with httpx.AsyncClient(base_url=base, timeout=30) as browser:
        login = await browser.post("/login", data={"key": ADMIN})
        assert login.status_code == 303
        cookie = browser.cookies["agentscope_memory_key"]
        assert ADMIN not in login.headers["set-cookie"] and ADMIN not in cookie
        assert "max-age=43200" in login.headers["set-cookie"].lower()
        page = await browser.get("/memories/%E4%BC%9A%E8%AF%9D")
        assert page.status_code == 200 and "会话" in page.text and 'id="delete"' in page.text
    async with httpx.AsyncClient(base_url=base, timeout=30) as forger:
        expiry, nonce, key_id, signature = cookie.split(".")
        for forged in (f"{int(expiry) + 10**6}.{nonce}.{key_id}.{signature}", f"{expiry}.{'0' * 16}.{key_id}.{signature}",
                       ADMIN, "x" * 5000):
            forger.cookies.set("agentscope_memory_key", forged)
            answer = await forger.get("/", follow_redirects=False)
            assert answer.status_code == 303 and answer.headers["location"] == "/login"
    await server.stop(0)
    # A restart keeps the session's key (it is derived from the store's page-token key)...
    again = await server_factory(data_dir=data, api_keys={KEY: "tenant-a", ADMIN: "tenant-a"},
                                 inspector_port=0, long_term_enabled=False)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{again.inspector_port}", timeout=30) as browser:
        browser.cookies.set("agentscope_memory_key", cookie)
        assert (await browser.get("/", follow_redirects=False)).status_code == 200
    await again.stop(0)
    # ...but a session ends with its key: a server without that key no longer honours it.
    revoked = await server_factory(data_dir=data, api_keys={KEY: "tenant-a"}, inspector_port=0, long_term_enabled=False)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{revoked.inspector_port}", timeout=30) as browser:
        browser.cookies.set("agentscope_memory_key", cookie)
        answer = await browser.get("/", follow_redirects=False)
        assert answer.status_code == 303 and answer.headers["location"] == "/login"


def test_a_session_expires() -> None:
    now = [1_000_000.0]
    sessions = Sessions(b"k" * 32, ttl_s=60, clock=lambda: now[0])
    token = sessions.issue(b"digest")
    assert sessions.read(token) == (sessions.key_id(b"digest"), False)
    now[0] += 61
    assert sessions.read(token) == (None, False)
    assert Sessions(b"other" * 8, clock=lambda: now[0]).read(token) == (None, True)
    # Not a session at all (an older version's cookie held the key): refused, not counted.
    assert sessions.read("the-right-key-0123456789") == (None, False)
    assert sessions.read("1.2.3") == (None, False)
    # Nor is the previous version's session (no nonce): its browser logs in again.
    assert sessions.read(token.split(".", 2)[0] + "." + token.split(".", 2)[2]) == (None, False)


def test_a_refusal_ends_after_its_time_and_old_failures_leave_the_window() -> None:
    now = [0.0]
    limiter = FailedAuthLimiter(3, window_s=60, block_s=30, clock=lambda: now[0])
    limiter.failed("10.0.0.1")
    limiter.failed("10.0.0.1")
    now[0] = 61  # the first two fall out of the window
    limiter.failed("10.0.0.1")
    limiter.failed("10.0.0.1")
    with pytest.raises(TooManyFailedAuthentications) as refused:
        limiter.failed("10.0.0.1")
    assert refused.value.retry_after == 30
    assert limiter.blocking
    limiter.check("10.0.0.2")
    now[0] = 80
    with pytest.raises(TooManyFailedAuthentications):
        limiter.check("10.0.0.1")
    now[0] = 92
    assert not limiter.blocking
    limiter.check("10.0.0.1")
    assert FailedAuthLimiter(0).failed("10.0.0.1") is None  # 0: no limit


@pytest.mark.parametrize("peer, address", [
    ("ipv4:127.0.0.1:50512", "127.0.0.1"), ("ipv6:[::1]:50512", "::1"),
    ("ipv6:%5B::1%5D:50512", "::1"), ("unix:/tmp/s", "unix:/tmp/s"),
])
def test_grpc_peers_are_counted_by_the_address_http_sees(peer, address) -> None:
    assert grpc_peer_address(peer) == address


async def test_forged_inspector_sessions_count_as_failed_authentications(server_factory) -> None:
    server = await server_factory(api_keys={KEY: "tenant-a"}, auth_failure_limit=2, inspector_port=0,
                                  long_term_enabled=False)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.inspector_port}", timeout=30) as forger:
        forger.cookies.set("agentscope_memory_key", f"9999999999.{'0' * 16}.{'0' * 32}.{'0' * 64}")
        assert (await forger.get("/", follow_redirects=False)).status_code == 303
        refused = await forger.get("/", follow_redirects=False)
        assert refused.status_code == 429 and "too many failed authentications" in refused.text


def test_ended_sessions_are_remembered_only_while_they_could_be_used_and_within_a_bound() -> None:
    # A logout ends its session; what is remembered of it must not grow with every logout.
    now = [1_000_000.0]
    sessions = Sessions(b"k" * 32, ttl_s=60, clock=lambda: now[0], ended_per_key=3)
    kept = sessions.issue(b"other")
    tokens = []
    for _ in range(5):
        tokens.append(sessions.issue(b"digest"))
        now[0] += 1
    assert sessions.end(tokens[0]) and sessions.read(tokens[0]) == (None, False)
    assert not sessions.end(tokens[0])  # ended already: nothing more to remember
    assert not sessions.end("9999999999." + "0" * 16 + "." + "0" * 32 + "." + "0" * 64)  # forged: nothing remembered
    assert sessions.read(tokens[1])[0] is not None and sessions.ended_count == 1
    for token in tokens[1:]:
        sessions.end(token)
    # Past the bound a key's ended sessions fold into one cut-off: still all refused.
    assert sessions.ended_count <= 3 + 1
    assert all(sessions.read(t) == (None, False) for t in tokens)
    assert sessions.read(kept)[0] == sessions.key_id(b"other")  # another key's session is untouched
    # Once they would have expired anyway, the next logout forgets them.
    now[0] += 61
    late = sessions.issue(b"digest")
    assert sessions.read(late)[0] is not None  # issued after the cut-off
    assert sessions.end(late) and sessions.ended_count == 1
