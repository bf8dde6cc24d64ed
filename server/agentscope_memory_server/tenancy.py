"""Which tenant a call acts for, and API-key authentication.

Without API keys every caller is the `default` tenant. With keys configured, every call but
health and reflection must present one (`x-api-key: KEY`, `authorization: Bearer KEY` or, as
mem0's clients send it, `authorization: Token KEY`); the key decides the tenant, and every
stored record is keyed by tenant, so tenants never see each other's memories. gRPC and the
HTTP surfaces (mem0 REST, MCP, the inspector, /metrics) share one `ApiKeys`, so one key means
one tenant everywhere, and one count of failed authentications per client address
(`auth_failures`).
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
from typing import Any, Awaitable, Callable, Mapping

import grpc

from agentscope_memory.errors import UnauthenticatedError
from agentscope_memory.short_term.manager import DEFAULT_TENANT
from agentscope_memory_server.auth_failures import FailedAuthLimiter, TooManyFailedAuthentications, grpc_peer_address
from agentscope_memory_server.handlers import Behaviour, wrap_behaviour

_tenant: contextvars.ContextVar[str] = contextvars.ContextVar("tenant", default=DEFAULT_TENANT)

# Health checks and reflection stay open so load balancers and grpcurl `list` work.
OPEN_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def tenant_of(context: grpc.aio.ServicerContext) -> str:
    """The tenant of the call being served (set by `AuthInterceptor`)."""
    return _tenant.get()


def key_digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


# `Authorization` schemes that carry an API key: OAuth-style Bearer, and Token as mem0's
# MemoryClient and AgentScope's Mem0Client send it.
_KEY_SCHEMES = ("bearer ", "token ")

MISSING_KEY = "missing API key (send x-api-key, or authorization: Bearer or Token)"
UNKNOWN_KEY = "unknown API key"


def presented_key(metadata: Any) -> str | None:
    """The API key in gRPC metadata or HTTP headers: (name, value) pairs, names lower-case."""
    for name, value in metadata or ():
        if name == "x-api-key":
            return str(value).strip()
        if name == "authorization":
            text = str(value)
            for scheme in _KEY_SCHEMES:
                if text.lower().startswith(scheme):
                    return text[len(scheme):].strip()
    return None


class ApiKeys:
    """The API key -> tenant table. Empty means authentication is off: every caller is the
    `default` tenant."""

    def __init__(self, keys_to_tenants: Mapping[str, str], limiter: FailedAuthLimiter | None = None) -> None:
        # Keep digests, not keys, and compare in constant time.
        self._tenants = [(key_digest(k), t) for k, t in keys_to_tenants.items()]
        self.limiter = limiter or FailedAuthLimiter(0)

    def digests(self) -> list[bytes]:
        """The `key_digest` of every key."""
        return [digest for digest, _ in self._tenants]

    @property
    def enabled(self) -> bool:
        return bool(self._tenants)

    def tenant_for(self, key: str | None) -> str | None:
        return self.tenant_for_digest(key_digest(key)) if key else None

    def tenant_for_digest(self, presented: bytes) -> str | None:
        """The tenant of the key whose `key_digest` is `presented`."""
        found = None
        for digest, tenant in self._tenants:
            if hmac.compare_digest(digest, presented):
                found = tenant
        return found

    def authenticate(self, headers: Mapping[str, str], client: str | None = None) -> str:
        """The tenant of an HTTP request from its headers (names in any case); raises
        `UnauthenticatedError` with the reason when keys are on and none known was sent, and
        `TooManyFailedAuthentications` while the client's address (`client`) is refused."""
        if not self.enabled:
            return DEFAULT_TENANT
        return self.check_key(presented_key((k.lower(), v) for k, v in headers.items()), client)

    def check_key(self, key: str | None, client: str | None) -> str:
        """The tenant of `key` presented from the address `client`; raises as `authenticate`.
        A wrong key counts against the address; a missing one guesses nothing and does not."""
        self.limiter.check(client)
        tenant = self.tenant_for(key)
        if tenant is None:
            if key:
                self.limiter.failed(client)
            raise UnauthenticatedError(UNKNOWN_KEY if key else MISSING_KEY)
        return tenant


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Rejects calls without a known API key and runs the others as the key's tenant."""

    def __init__(self, keys: ApiKeys) -> None:
        self._keys = keys

    def _tenant_for(self, key: str | None) -> str | None:
        return self._keys.tenant_for(key)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None or details.method.startswith(OPEN_SERVICES):
            return handler
        key = presented_key(details.invocation_metadata)
        tenant = self._tenant_for(key)
        if tenant is None:
            return _rejecting(handler, self._keys.limiter, key)
        return _as_tenant(handler, tenant, self._keys.limiter)


async def _refuse_if_blocked(limiter: FailedAuthLimiter, context: grpc.aio.ServicerContext) -> None:
    # The caller's address is looked up only while some address is refused.
    if limiter.blocking:
        try:
            limiter.check(grpc_peer_address(context.peer()))
        except TooManyFailedAuthentications as exc:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))


def _as_tenant(handler: grpc.RpcMethodHandler, tenant: str, limiter: FailedAuthLimiter) -> grpc.RpcMethodHandler:
    def answered_once(behaviour: Behaviour) -> Behaviour:
        async def run(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await _refuse_if_blocked(limiter, context)
            _tenant.set(tenant)
            return await behaviour(request, context)

        return run

    def streamed(behaviour: Behaviour) -> Behaviour:
        async def run(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await _refuse_if_blocked(limiter, context)
            _tenant.set(tenant)
            async for item in behaviour(request, context):
                yield item

        return run

    return wrap_behaviour(handler, answered_once, streamed)


def _rejecting(handler: grpc.RpcMethodHandler, limiter: FailedAuthLimiter, key: str | None) -> grpc.RpcMethodHandler:
    async def reject(request: Any, context: grpc.aio.ServicerContext) -> Any:
        address = grpc_peer_address(context.peer())
        try:
            limiter.check(address)
            if key:
                limiter.failed(address)
        except TooManyFailedAuthentications as exc:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, UNKNOWN_KEY if key else MISSING_KEY)

    return wrap_behaviour(handler, lambda _: reject, lambda _: reject)
