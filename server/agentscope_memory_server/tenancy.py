"""Which tenant a call acts for, and API-key authentication.

Without API keys every caller is the `default` tenant. With keys configured, every call but
health and reflection must present one (`x-api-key: KEY` or `authorization: Bearer KEY`);
the key decides the tenant, and every stored record is keyed by tenant, so tenants never see
each other's memories.
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
from typing import Any, Awaitable, Callable, Mapping

import grpc

from agentscope_memory.short_term.manager import DEFAULT_TENANT

_tenant: contextvars.ContextVar[str] = contextvars.ContextVar("tenant", default=DEFAULT_TENANT)

# Health checks and reflection stay open so load balancers and grpcurl `list` work.
OPEN_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def tenant_of(context: grpc.aio.ServicerContext) -> str:
    """The tenant of the call being served (set by `AuthInterceptor`)."""
    return _tenant.get()


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


def presented_key(metadata: Any) -> str | None:
    for name, value in metadata or ():
        if name == "x-api-key":
            return value
        if name == "authorization" and value.lower().startswith("bearer "):
            return value[7:].strip()
    return None


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Rejects calls without a known API key and runs the others as the key's tenant."""

    def __init__(self, keys_to_tenants: Mapping[str, str]) -> None:
        # Keep digests, not keys, and compare in constant time.
        self._tenants = [(_digest(k), t) for k, t in keys_to_tenants.items()]

    def _tenant_for(self, key: str | None) -> str | None:
        if not key:
            return None
        presented = _digest(key)
        found = None
        for digest, tenant in self._tenants:
            if hmac.compare_digest(digest, presented):
                found = tenant
        return found

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
            message = "missing API key (send x-api-key)" if not key else "unknown API key"
            return _rejecting(handler, message)
        return _as_tenant(handler, tenant)


def _as_tenant(handler: grpc.RpcMethodHandler, tenant: str) -> grpc.RpcMethodHandler:
    if handler.unary_unary is not None:
        inner = handler.unary_unary

        async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            _tenant.set(tenant)
            return await inner(request, context)

        return handler._replace(unary_unary=unary)
    if handler.unary_stream is not None:
        inner_stream = handler.unary_stream

        async def stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
            _tenant.set(tenant)
            async for item in inner_stream(request, context):
                yield item

        return handler._replace(unary_stream=stream)
    raise NotImplementedError("client-streaming RPCs are not part of the contract")


def _rejecting(handler: grpc.RpcMethodHandler, message: str) -> grpc.RpcMethodHandler:
    async def reject(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    if handler.unary_unary is not None:
        return handler._replace(unary_unary=reject)
    return handler._replace(unary_stream=reject)
