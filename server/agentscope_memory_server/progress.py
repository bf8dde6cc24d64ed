"""Progress bars of the command line's long operations, on stderr (stdout stays the result)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tqdm import tqdm


@contextmanager
def byte_progress(description: str, total: int | None = None, force: bool = False) -> Iterator[Callable[[int], None]]:
    """A bar counting bytes; shown when stderr is a terminal, or always with `force`."""
    with tqdm(total=total, desc=description, unit="B", unit_scale=True, file=sys.stderr,
              disable=False if force else None, leave=force) as bar:
        yield bar.update
