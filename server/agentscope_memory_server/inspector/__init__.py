"""A small web inspector: what the server remembers and why, for operators and agent developers.

Server-rendered pages (Jinja2 templates, a little CSS, no JavaScript needed, nothing fetched from
a CDN) on their own port, over the same service, API keys and tenants as gRPC. Read-only, except
that an admin key (`inspector_admin_keys`) may delete a memory.
"""

from agentscope_memory_server.inspector.app import create_app

__all__ = ["create_app"]
