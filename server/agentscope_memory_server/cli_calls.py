"""How the command line's clients call a server."""

from __future__ import annotations

# A command pointed at a server that is not there says so at once, rather than after the
# client's default of retrying for its whole 30 s deadline (which is for applications riding
# out a restart). A few quick retries, well under a second in all, still ride out a blip.
RETRIES = 3
