"""Memory lifecycle: reflection, forgetting and consolidation jobs over long-term scopes."""
