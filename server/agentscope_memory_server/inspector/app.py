"""The inspector's routes. Each page reads through the library's service, as a gRPC call would."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope as AsgiScope, Send

from agentscope_memory.errors import InvalidArgumentError, MemoryServiceError, NotFoundError, UnauthenticatedError
from agentscope_memory.long_term.engine import Scope
from agentscope_memory.long_term.paging import history_page
from agentscope_memory.message import (
    AudioBlock,
    Base64Source,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    URLSource,
    VideoBlock,
)
from agentscope_memory.service import Service
from agentscope_memory.store.codec import decode_msg
from agentscope_memory.short_term.manager import DEFAULT_TENANT
from agentscope_memory_server.auth_failures import TooManyFailedAuthentications
from agentscope_memory_server.inspector.sessions import Sessions
from agentscope_memory_server.tenancy import ApiKeys, key_digest, presented_key

HERE = Path(__file__).parent
COOKIE = "agentscope_memory_key"
PAGE_SIZE = 50


# How much of what is stored one page shows, in bytes of escaped HTML. A page of messages may
# hold `max_page_bytes` (4 MiB) of them, five times that once every `"` is escaped, and an
# inline image drawn as both link and thumbnail twice that: what is beyond the budget is cut,
# with a note saying how much, so no page grows past a few MB whatever was stored.
PAGE_SHOWN_BYTES = 2 * 1024 * 1024
# What drawing one block or one row costs besides its text (tags, classes).
_MARKUP_BYTES = 96
# Escaping makes at most 5 bytes of one character (`"` is `&#34;`; a CJK character is 3).
_MOST_BYTES_PER_CHAR = 5


class Shown:
    """The part of a page's budget (`PAGE_SHOWN_BYTES`) not yet spent on stored content."""

    def __init__(self, budget: int = PAGE_SHOWN_BYTES) -> None:
        self.left = budget

    @property
    def spent(self) -> bool:
        return self.left <= 0

    def take(self, size: int) -> bool:
        """Spend `size` bytes if they fit, else spend nothing and say no."""
        if size > self.left:
            return False
        self.left -= size
        return True

    def text(self, value: str) -> tuple[str, int]:
        """As much of `value` as fits, and how many characters were left out."""
        size = len(escape(value).encode("utf-8", "surrogatepass")) + _MARKUP_BYTES
        if self.take(size):
            return value, 0
        keep = max(self.left - _MARKUP_BYTES, 0) // _MOST_BYTES_PER_CHAR
        self.left = 0
        return value[:keep], len(value) - keep


def _cut(view: dict[str, Any], field: str, value: str, shown: Shown) -> dict[str, Any]:
    """`view` with as much of `value` as fits as `field`, and `field`_cut: how much did not."""
    view[field], view[field + "_cut"] = shown.text(value)
    return view


def _cut_note(count: int, what: str = "characters") -> Markup:
    """The note a template draws where something was cut (nothing where nothing was)."""
    if not count:
        return Markup("")
    return Markup('<span class="cut">… {:,} more {} not shown (a page shows at most {} MiB of what is stored)</span>'
                  ).format(count, what if count > 1 else what.removesuffix("s"), PAGE_SHOWN_BYTES // (1024 * 1024))


def _block_view(block: Any, shown: Shown | None = None) -> dict[str, Any]:
    """What a template needs to draw one content block readably, within the page's budget."""
    shown = shown if shown is not None else Shown()
    if isinstance(block, TextBlock):
        return _cut({"kind": "text"}, "text", block.text, shown)
    if isinstance(block, ThinkingBlock):
        return _cut({"kind": "thinking"}, "text", block.thinking, shown)
    if isinstance(block, ToolUseBlock):
        view = _cut(_cut({"kind": "tool_use"}, "name", block.name or "", shown), "id", block.id or "", shown)
        return _cut(view, "input", json.dumps(block.input, ensure_ascii=False, indent=2), shown)
    if isinstance(block, ToolResultBlock):
        view = _cut(_cut({"kind": "tool_result"}, "name", block.name or "", shown), "id", block.id or "", shown)
        view["output"], view["hidden"] = _blocks_view(block.output, shown)
        return view
    if isinstance(block, (ImageBlock, AudioBlock, VideoBlock)):
        kind = type(block).__name__.removesuffix("Block").lower()
        source = block.source
        # Inline images (image/*) are drawn, http(s) URLs linked (not fetched: see
        # SECURITY_HEADERS); anything else (file:, javascript:, data:text/html) is shown as text.
        if isinstance(source, Base64Source):
            media_type = source.media_type
            size = f"{media_type}, {len(source.data) * 3 // 4:,} bytes inline"
            if kind == "image" and media_type.lower().startswith("image/") and ";" not in media_type:
                # A thumbnail only (browsers refuse to open a data: URL from a link), and only
                # if it fits what is left of the page.
                url = f"data:{media_type};base64,{source.data}"
                if shown.take(len(url) + _MARKUP_BYTES):
                    return {"kind": kind, "url": url, "inline": True}
                size += ", too large to show on this page"
            return _cut({"kind": kind, "url": None}, "label", size, shown)
        url = source.url if isinstance(source, URLSource) else ""
        if url.split(":", 1)[0].lower() in ("http", "https") and shown.take(2 * len(escape(url).encode()) + _MARKUP_BYTES):
            return {"kind": kind, "url": url, "inline": False}
        return _cut({"kind": kind, "url": None}, "label", url, shown)
    return {"kind": "other", "text": type(block).__name__, "text_cut": 0}


def _blocks_view(blocks: list[Any], shown: Shown) -> tuple[list[dict[str, Any]], int]:
    """The blocks drawn within the budget, and how many more were left out once it was spent."""
    views: list[dict[str, Any]] = []
    for i, block in enumerate(blocks):
        if shown.spent:
            return views, len(blocks) - i
        views.append(_block_view(block, shown))
    return views, 0


def _position(request: Request, name: str) -> int:
    """A non-negative position from the query string (`start`, `after`); absent or empty is 0.
    Anything else is the client's mistake, answered with an error page, never a 500."""
    raw = request.query_params.get(name, "")
    if not raw:
        return 0
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise InvalidArgumentError(name, f"must be a whole number from 0 up, not {raw[:40]!r}")
    return int(raw)


def _msg_view(msg: Msg, index: int, shown: Shown) -> dict[str, Any]:
    view: dict[str, Any] = {"index": index, "role": msg.role.value if msg.role else ""}
    _cut(_cut(view, "name", msg.name or "", shown), "timestamp", msg.timestamp or "", shown)
    view["blocks"], view["hidden"] = _blocks_view(msg.content, shown)
    return _cut(view, "metadata", json.dumps(msg.metadata, ensure_ascii=False) if msg.metadata else "", shown)


@dataclass(frozen=True)
class _Caller:
    """Who a request acts for: its tenant, whether it may change things, and the credential it
    presented (what its forms' CSRF tokens are bound to)."""

    tenant: str
    admin: bool
    credential: str


SESSION_EXPIRED = "your session has expired or is not valid; log in again"


class Inspector:
    def __init__(self, service: Service, keys: ApiKeys, admin_keys: frozenset[str],
                 metrics: Callable[[], str] | None, session_secret: bytes | None = None) -> None:
        self.service = service
        self.keys = keys
        self.admin_digests = frozenset(key_digest(k) for k in admin_keys)
        self.metrics = metrics
        # Without the server's (a test's app), sessions last as long as this process.
        secret = session_secret or os.urandom(32)
        self.sessions = Sessions(secret)
        self._digest_by_id = {self.sessions.key_id(d): d for d in keys.digests()}
        # Forms that change something carry a token only pages served to this key can hold;
        # from the sessions' key, so a page drawn before a restart still works after it, as
        # its login does.
        self._csrf_secret = hmac.new(secret, b"csrf", hashlib.sha256).digest()
        self.templates = Environment(loader=FileSystemLoader(HERE / "templates"),
                                     autoescape=select_autoescape(["html"]))
        # An id as one URL path segment: "/" is escaped too, or an id holding "/../" would be
        # resolved away by the browser before the route (`{memory_id:path}`) ever saw it.
        self.templates.filters["segment"] = lambda value: quote(str(value), safe="")
        self.templates.globals["cut"] = _cut_note
        self.templates.filters["datetime"] = lambda t: (
            time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t)) if t else "-")

    # -- who is asking ------------------------------------------------------------------------

    def _caller(self, request: Request) -> _Caller:
        """Who is asking: a key in the headers (scripts), else the login cookie's session.
        Raises `UnauthenticatedError`, or `TooManyFailedAuthentications` for an address that
        presented too many wrong keys or forged sessions."""
        if not self.keys.enabled:
            return _Caller(DEFAULT_TENANT, False, "")
        client = request.client.host if request.client else None
        key = presented_key((k.lower(), v) for k, v in request.headers.items())
        cookie = request.cookies.get(COOKIE)
        if key is not None or not cookie:
            tenant = self.keys.check_key(key, client)
            return _Caller(tenant, key_digest(key or "") in self.admin_digests, key or "")
        self.keys.limiter.check(client)
        key_id, forged = self.sessions.read(cookie)
        digest = self._digest_by_id.get(key_id) if key_id is not None else None
        found = self.keys.tenant_for_digest(digest) if digest is not None else None
        if digest is None or found is None:
            if forged:
                self.keys.limiter.failed(client)
            raise UnauthenticatedError(SESSION_EXPIRED)
        return _Caller(found, digest in self.admin_digests, cookie)

    def tenant(self, request: Request) -> str:
        caller = self._caller(request)
        request.state.caller = caller
        return caller.tenant

    def is_admin(self, request: Request) -> bool:
        # Only a page that authenticated its caller (`tenant`) shows admin controls.
        caller = getattr(request.state, "caller", None)
        return caller is not None and caller.admin

    def csrf(self, request: Request) -> str:
        caller = getattr(request.state, "caller", None)
        credential = caller.credential if caller is not None else ""
        return hmac.new(self._csrf_secret, credential.encode(), hashlib.sha256).hexdigest()

    def render(self, request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        page = self.templates.get_template(template).render(
            tenant=values.pop("tenant", ""), admin=self.is_admin(request), auth=self.keys.enabled, **values)
        return HTMLResponse(page, status_code=status)

    # -- pages ---------------------------------------------------------------------------------

    async def memories(self, request: Request) -> Response:
        tenant = self.tenant(request)
        page = await self.service.memories.list_memories(tenant, PAGE_SIZE, request.query_params.get("page", ""))
        rows = [{"id": m.record.memory_id, "kind": m.record.kind, "messages": m.message_count,
                 "version": m.record.version, "updated": m.record.update_time} for m in page.memories]
        return self.render(request, "memories.html", tenant=tenant, memories=rows, next_page=page.next_page_token)

    async def memory(self, request: Request) -> Response:
        tenant = self.tenant(request)
        memory_id = request.path_params["memory_id"]
        info = await self.service.memories.get_memory(tenant, memory_id)
        token = request.query_params.get("page", "")
        start = _position(request, "start")
        page = await self.service.memories.get_messages_page(tenant, memory_id, PAGE_SIZE, token)
        shown = Shown()
        messages = [_msg_view(decode_msg(s), start + i, shown) for i, s in enumerate(page.stored)]
        events: list[dict[str, Any]] = []
        more_events = False
        offloads: dict[str, Any] | None = None
        if info.record.kind == "AUTO_CONTEXT":
            # The first page of them: a memory compressed for months has thousands.
            found = await self.service.auto_context.events(tenant, memory_id, 0, PAGE_SIZE)
            for seq, event in found.items:
                view: dict[str, Any] = {"seq": seq, "count": event.compressed_message_count}
                for field, value in (("type", event.event_type), ("into", event.compressed_message_id or ""),
                                     ("before", str(event.metadata.get("tokenBefore", ""))),
                                     ("after", str(event.metadata.get("tokenAfter", "")))):
                    _cut(view, field, value, shown)
                events.append(view)
            more_events = bool(found.next_page_token)
            offloads = await self._offloads(tenant, memory_id, request.query_params.get("offloads_after", ""), shown)
        tiers = await self._tiers(tenant, memory_id, shown) if info.record.kind == "TIERED" else None
        pools = None
        if self.service.pool_attachments is not None:
            pools = await self.service.pool_attachments.get(tenant, memory_id)
        return self.render(request, "memory.html", tenant=tenant, memory=info.record, count=info.message_count,
                           messages=messages, next_page=page.next_page_token, next_start=start + len(messages),
                           events=events, more_events=more_events, offloads=offloads, tiers=tiers, pools=pools, csrf=self.csrf(request))

    async def _tiers(self, tenant: str, memory_id: str, shown: Shown) -> dict[str, Any] | None:
        """A TIERED memory's status (Loom's visualiser), its L2 and L3 items and its moves."""
        tiered = self.service.tiered
        if tiered is None:
            return None
        status = await tiered.status(tenant, memory_id)
        items = {}
        for tier in (2, 3):
            page, _ = await tiered.items_page(tenant, memory_id, tier, PAGE_SIZE)
            items[tier] = [_cut({"seq": i.seq, "kind": i.kind, "importance": i.importance, "tokens": i.tokens,
                                 "method": i.method}, "text", i.content, shown) for i in page]
        moves, _ = await tiered.events_page(tenant, memory_id, 0, PAGE_SIZE)
        return {"status": status, "items": items, "events": [
            {"seq": seq, "kind": e.kind, "from": e.from_tier, "to": e.to_tier, "items": len(e.item_seqs),
             "tokens": e.tokens, "at": e.time} for seq, e in moves]}

    async def _offloads(self, tenant: str, memory_id: str, after: str, shown: Shown) -> dict[str, Any]:
        """A page of PAGE_SIZE offloaded contexts after the uuid `after` (their uuids and
        message counts, never the messages: a memory may hold thousands of large ones), how
        many there are in all, and the uuid the next page starts after ("" on the last)."""
        found, total = await self.service.auto_context.offloads(tenant, memory_id, after, PAGE_SIZE + 1)
        rows = [_cut({"messages": count}, "uuid", uuid, shown) for uuid, count in found[:PAGE_SIZE]]
        next_after = found[PAGE_SIZE - 1][0] if len(found) > PAGE_SIZE else ""
        return {"rows": rows, "total": total, "after": after, "next": next_after}

    async def delete_memory(self, request: Request) -> Response:
        tenant = self.tenant(request)
        memory_id = request.path_params["memory_id"]
        form = await request.form()
        if not self.is_admin(request):
            return PlainTextResponse("deleting needs an admin key (inspector_admin_keys)", status_code=403)
        if not hmac.compare_digest(str(form.get("csrf", "")), self.csrf(request)):
            return PlainTextResponse("this form's token is not this login's (logged in again since the page was "
                                     "drawn?): reload the page and try again", status_code=403)
        # DeleteMemory's rule: a memory with children is refused unless `force` detaches them.
        if self.service.scopes is not None:
            await self.service.scopes.delete_memory(tenant, memory_id, form.get("force") == "on")
        else:
            await self.service.memories.delete_memory(tenant, memory_id)
        return RedirectResponse("/", status_code=303)

    async def long_term(self, request: Request) -> Response:
        tenant = self.tenant(request)
        q = request.query_params
        scope = Scope(agent_name=q.get("agent_name", ""), user_id=q.get("user_id", ""), run_name=q.get("run_name", ""))
        query = q.get("query", "")
        results: list[dict[str, Any]] = []
        error = ""
        if self.service.long_term is None:
            error = "long-term memory is switched off on this server"
        elif query:
            try:
                # An operator looking is not a recall: decay and forgetting must not see it.
                items, _ = await self.service.long_term.search_ranked(tenant, scope, query, touch=False)
            except MemoryServiceError as exc:
                error = str(exc)
            else:
                shown = Shown()
                for item in items:
                    s = item.scores
                    results.append(_cut({
                        "id": item.id, "type": item.memory_type, "domain": item.domain, "importance": item.importance,
                        "access_count": item.access_count, "pinned": item.pinned,
                        "scores": None if s is None else {
                            "final": s.final, "semantic": s.semantic, "dense": s.dense,
                            "lexical": s.lexical, "decay": s.decay, "importance": s.importance}}, "text", item.text, shown))
        return self.render(request, "long_term.html", tenant=tenant, scope=scope, query=query, results=results,
                           error=error)

    async def pool(self, request: Request) -> Response:
        """A shared pool's entries (by key) and its events (oldest first), a page of each."""
        tenant = self.tenant(request)
        if self.service.pools is None:
            raise NotFoundError("shared pools are not served here")
        q = request.query_params
        pool_id = request.path_params.get("pool_id") or q.get("pool_id", "")
        if not pool_id:
            return self.render(request, "pool.html", tenant=tenant, pool_id="", entries=[], events=[],
                               next_page="", next_events="", rendered=None)
        entries = await self.service.pools.list(tenant, pool_id, q.get("prefix", ""), PAGE_SIZE, q.get("page", ""))
        after = _position(request, "after")
        events = await self.service.pools.events(tenant, pool_id, after, PAGE_SIZE)
        rendered = await self.service.pools.render(tenant, [pool_id], 0)
        shown = Shown()
        rendered_text, rendered_cut = shown.text(rendered.text)
        rows = [_cut(_cut({"key": e.key, "version": e.version, "created_by": e.created_by, "updated_by": e.updated_by,
                           "updated": e.updated_at}, "content", e.content_json, shown),
                     "metadata", json.dumps(e.metadata, ensure_ascii=False) if e.metadata else "", shown)
                for e in entries.entries]
        return self.render(request, "pool.html", tenant=tenant, pool_id=pool_id, prefix=q.get("prefix", ""),
                           entries=rows, rendered=rendered, rendered_text=rendered_text, rendered_cut=rendered_cut,
                           next_page=entries.next_page_token,
                           events=[{"seq": e.sequence, "type": e.event_type, "key": e.key, "version": e.version,
                                    "writer": e.writer, "at": e.time} for e in events.events],
                           next_events=str(events.events[-1].sequence) if events.next_page_token else "",
                           )

    async def history(self, request: Request) -> Response:
        tenant = self.tenant(request)
        if self.service.long_term is None:
            raise NotFoundError("long-term memory is switched off on this server")
        memory_id = request.path_params["memory_id"]
        # A page at a time (PAGE_SIZE entries within the page byte budget), as
        # GetLongTermMemoryHistory pages: a long history never makes one huge page.
        memories = self.service.memories
        entries, next_page = await history_page(self.service.long_term, memories.tokens, tenant, memory_id, PAGE_SIZE,
                                                request.query_params.get("page", ""), memories.limits.max_page_bytes)
        shown = Shown()
        rows = [_cut(_cut(_cut({"event": e.event, "at": e.created_at}, "old", e.old_text or "", shown),
                          "new", e.new_text or "", shown),
                     "detail", json.dumps(e.detail, ensure_ascii=False) if e.detail else "", shown) for e in entries]
        return self.render(request, "history.html", tenant=tenant, memory_id=memory_id, next_page=next_page, entries=rows)

    async def health(self, request: Request) -> Response:
        tenant = self.tenant(request)
        text = self.metrics() if self.metrics is not None else ""
        lines = [line for line in text.splitlines() if line and not line.startswith("#")
                 and line.startswith(("agentscope_memory_rpc_calls_total", "rpc_server_call_duration_seconds_count"))]
        return self.render(request, "health.html", tenant=tenant, store=type(self.service.store).__name__,
                           long_term=self.service.long_term is not None, metrics=lines,
                           metrics_on=self.metrics is not None)

    async def login(self, request: Request) -> Response:
        if request.method == "GET":
            return self.render(request, "login.html", error="")
        form = await request.form()
        key = str(form.get("key", ""))
        try:
            self.keys.check_key(key or None, request.client.host if request.client else None)
        except TooManyFailedAuthentications as exc:
            return _too_many(self.render(request, "login.html", status=429, error=str(exc)), exc)
        except UnauthenticatedError:
            return self.render(request, "login.html", status=401, error="unknown API key")
        response = RedirectResponse("/", status_code=303)
        # The cookie holds a signed session that expires, never the key; Secure over HTTPS (a
        # server with TLS), so it is never sent in clear either.
        response.set_cookie(COOKIE, self.sessions.issue(key_digest(key)), max_age=self.sessions.ttl_s,
                            httponly=True, samesite="strict", secure=request.url.scheme == "https")
        return response

    async def logout(self, request: Request) -> Response:
        # Ended here, not only forgotten by this browser: a copy of the cookie is refused too.
        cookie = request.cookies.get(COOKIE)
        if cookie:
            self.sessions.end(cookie)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE)
        return response


def _guarded(inspector: Inspector, page: Callable[[Request], Any]) -> Callable[[Request], Any]:
    """A page whose library errors become an error page with their status, and whose missing
    key sends a browser to the login form."""

    async def handle(request: Request) -> Response:
        try:
            return await page(request)
        except UnauthenticatedError as exc:
            # A browser without a key goes to the login form; a script that sent a key in a
            # header is told why it was refused, as the other HTTP surfaces tell it.
            if presented_key((k.lower(), v) for k, v in request.headers.items()) is not None:
                return PlainTextResponse(f"{exc}\n", status_code=401,
                                         headers={"www-authenticate": 'Bearer realm="agentscope-memory"'})
            return RedirectResponse("/login", status_code=303)
        except TooManyFailedAuthentications as exc:
            return _too_many(inspector.render(request, "error.html", status=429, message=str(exc)), exc)
        except MemoryServiceError as exc:
            status = {"NotFoundError": 404, "InvalidArgumentError": 400, "PermissionDeniedError": 403}.get(
                type(exc).__name__, 409)
            return inspector.render(request, "error.html", status=status, message=str(exc))

    return handle


def _too_many(response: Response, exc: TooManyFailedAuthentications) -> Response:
    response.headers["retry-after"] = str(exc.retry_after)
    return response


# Every answer, pages, redirects, errors and the stylesheet alike: no script at all (the pages
# need none, so stored text that slipped past escaping could not run either), forms post only
# here, and no other site may frame a page (the delete button cannot be clicked through a
# decoy). Images only from here or inline: an image block's URL is a link, never fetched by
# itself, or stored text could have the operator's browser call any address it reaches (a
# router's admin page, a tracker learning who looked, and when).
SECURITY_HEADERS = [
    (b"content-security-policy", b"default-src 'none'; img-src 'self' data:; style-src 'self'; "
                                 b"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    # Nothing to other sites (an image's host learns no memory id); this site's own forms keep
    # their Origin, which "no-referrer" would turn into "null".
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]


# Over TLS only (a browser ignores it over plain HTTP, and it must not pin a plain server):
# from then on the browser reaches this host name over HTTPS only, so a network attacker cannot
# downgrade a later visit and read the login form or the cookie. It covers the host name on
# every port; no includeSubDomains or preload, which would bind other sites.
HSTS = (b"strict-transport-security", b"max-age=15552000")


class _Guard:
    """Security headers on every answer, and no POST from another site's page: a browser sends
    `Origin` (or at least `Sec-Fetch-Site`) with every form post, so a cross-site form can
    neither log the victim in with the attacker's key, nor log them out, nor delete. Scripts
    send neither header and are unaffected.

    `host_names`: without API keys, the only names the inspector answers to besides IP
    addresses and localhost. Any site an operator visits could otherwise point a name of its
    own at 127.0.0.1 (DNS rebinding) and read, as its own origin, every page of an inspector
    that asks no key; with keys that site has no login."""

    def __init__(self, app: ASGIApp, host_names: frozenset[str] | None) -> None:
        self.app = app
        self.host_names = host_names

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []),
                                      *((n, v) for n, v in SECURITY_HEADERS if n not in names)]
                if scope.get("scheme") == "https":
                    message["headers"].append(HSTS)
            await send(message)

        if self.host_names is not None and not _local_host(Request(scope), self.host_names):
            await PlainTextResponse("refused: without api_keys the inspector answers only requests addressed to "
                                    "an IP address, localhost or this machine's name; set api_keys to reach it "
                                    "by another name", status_code=403)(scope, receive, send_secured)
            return
        if scope["method"] not in ("GET", "HEAD") and not _same_origin(Request(scope)):
            await PlainTextResponse("refused: this form was posted from another site's page (Origin / "
                                    "Sec-Fetch-Site); post it from the inspector itself", status_code=403)(
                scope, receive, send_secured)
            return
        await self.app(scope, receive, send_secured)


def _same_origin(request: Request) -> bool:
    # Sec-Fetch-Site is the browser's own verdict; without it (an older browser) the Origin,
    # where "null" (a sandboxed frame, a data: page) is never this site.
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = request.headers.get("origin")
    return origin is None or origin.lower() == f"{request.url.scheme}://{request.headers.get('host', '')}".lower()


def _local_host(request: Request, names: frozenset[str]) -> bool:
    host = request.headers.get("host", "").lower()
    # "[::1]:8080", "127.0.0.1:8080", "name:8080", "name"
    name = host[1:host.find("]")] if host.startswith("[") else host.rsplit(":", 1)[0]
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return not name or name == "localhost" or name.endswith(".localhost") or name in names
    return True


def create_app(service: Service, keys: ApiKeys, admin_keys: frozenset[str] = frozenset(),
               metrics: Callable[[], str] | None = None, session_secret: bytes | None = None) -> ASGIApp:
    """The inspector's app. `session_secret`: the key login sessions are signed with (the
    server passes one derived from its page-token key, so logins outlive a restart)."""
    inspector = Inspector(service, keys, admin_keys, metrics, session_secret)

    def page(fn: Callable[[Request], Any]) -> Callable[[Request], Any]:
        return _guarded(inspector, fn)

    # (Not getfqdn(): a reverse DNS lookup could hold the start for seconds.)
    names = None if keys.enabled else frozenset({socket.gethostname().lower()})
    return _Guard(Starlette(routes=[
        Route("/", page(inspector.memories)),
        Route("/memories/{memory_id:path}/delete", page(inspector.delete_memory), methods=["POST"]),
        Route("/memories/{memory_id:path}", page(inspector.memory)),
        Route("/long-term", page(inspector.long_term)),
        Route("/long-term/{memory_id}/history", page(inspector.history)),
        Route("/pools", page(inspector.pool)),
        Route("/pools/{pool_id:path}", page(inspector.pool)),
        Route("/health", page(inspector.health)),
        Route("/login", inspector.login, methods=["GET", "POST"]),
        Route("/logout", inspector.logout, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]), names)


__all__ = ["create_app"]
