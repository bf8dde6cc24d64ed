"""Parent/child scopes: memories and long-term scopes that name a parent, and items whose
visibility (LOCAL, SHARED, GLOBAL) decides which other memories and scopes read them.

`hierarchy.py` holds the rules (ancestors, cycles, depth), `visibility.py` the three levels,
`long_term.py` the long-term engine's hook (which scope keys a search reads, which results are
inherited) and `engine.py` the operations the service offers (`ScopeEngine`). The package itself
imports only the visibilities: the long-term engine imports `long_term.py` while the engine
imports the short-term manager, and a package-level import of both would be circular.
"""

from agentscope_memory.scopes.visibility import GLOBAL, LOCAL, SHARED, VISIBILITIES, check_visibility

__all__ = ["GLOBAL", "LOCAL", "SHARED", "VISIBILITIES", "check_visibility"]
