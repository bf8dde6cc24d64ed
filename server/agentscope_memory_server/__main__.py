"""`python -m agentscope_memory_server` is the `agentscope-memory` command."""

import sys

from agentscope_memory_server.cli import main

sys.exit(main())
