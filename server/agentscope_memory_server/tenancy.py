"""Which tenant a call acts for.

Every stored record is keyed by tenant. Until API keys are configured every caller is the
`default` tenant; the key-to-tenant mapping plugs in here without touching the servicers.
"""

from __future__ import annotations

import grpc

from agentscope_memory.memory.manager import DEFAULT_TENANT


def tenant_of(context: grpc.aio.ServicerContext) -> str:
    return DEFAULT_TENANT
