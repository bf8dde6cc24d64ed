"""The embedders the engine can use: what it needs of one, and an OpenAI-compatible client.

The embedded default is MiniLM run with numpy (`long_term/embedder.py`); any object with
`dimensions`, `model_id` and a blocking `embed(texts)` works (the engine calls it on a thread).
"""

from __future__ import annotations

from typing import Protocol, Sequence

import httpx
import numpy as np

from agentscope_memory.errors import UnavailableError


class Embedder(Protocol):
    dimensions: int
    # Stored with every memory, so a change of model is visible in the data.
    model_id: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        ...


class OpenAiEmbedder:
    """Any OpenAI-compatible `/embeddings` endpoint."""

    def __init__(self, base_url: str, model: str, api_key: str | None, dimensions: int, timeout_s: float = 60.0,
                 batch_size: int = 64) -> None:
        self._url = base_url.rstrip("/") + "/embeddings"
        self._model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout_s
        self._batch = batch_size
        self.dimensions = dimensions
        self.model_id = f"openai:{model}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for start in range(0, len(texts), self._batch):
            chunk = list(texts[start : start + self._batch])
            try:
                reply = httpx.post(self._url, json={"model": self._model, "input": chunk},
                                   headers=self._headers, timeout=self._timeout)
                reply.raise_for_status()
                data = sorted(reply.json()["data"], key=lambda d: d["index"])
                vectors = np.asarray([d["embedding"] for d in data], dtype=np.float32)
            except (httpx.HTTPError, KeyError, ValueError, TypeError) as exc:
                raise UnavailableError(f"the embeddings endpoint failed: {type(exc).__name__}: {exc}") from exc
            if vectors.shape != (len(chunk), self.dimensions):
                raise UnavailableError(
                    f"the embeddings endpoint returned shape {vectors.shape}, expected ({len(chunk)}, {self.dimensions})"
                )
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            out[start : start + len(chunk)] = vectors / np.maximum(norms, 1e-12)
        return out
