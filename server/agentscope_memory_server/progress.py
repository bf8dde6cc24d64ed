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


@contextmanager
def count_progress(description: str, total: int | None = None, unit: str = "row",
                   force: bool = False) -> Iterator[Callable[[int], None]]:
    """A bar counting things (rows, points); shown as `byte_progress` is."""
    with tqdm(total=total, desc=description, unit=unit, file=sys.stderr,
              disable=False if force else None, leave=force) as bar:
        yield bar.update


@contextmanager
def total_progress(description: str, unit: str, force: bool = False) -> Iterator[Callable[[int, int], None]]:
    """A bar told `(done, total)` so far, for work whose total is known only once it starts."""
    with tqdm(desc=description, unit=unit, file=sys.stderr, disable=False if force else None, leave=force) as bar:
        def advance(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        yield advance
