"""A scripted OpenAI-compatible server on 127.0.0.1, the tests' only double (a remote paid API).

It answers POST /v1/chat/completions from a queue of scripted replies (text, an HTTP error
status, or a delay), POST /v1/embeddings with vectors derived from the words of each input (so
texts sharing words are similar), and records every request body for assertions.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: str = ""
    status: int = 200
    delay_s: float = 0.0


@dataclass
class OpenAIStub:
    replies: list[Reply] = field(default_factory=list)
    default: Reply | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                stub.requests.append({"path": self.path, "body": body, "auth": self.headers.get("authorization")})
                if self.path.endswith("/embeddings"):
                    self._send(200, json.dumps(stub.embeddings(body)).encode())
                    return
                reply = stub.replies.pop(0) if stub.replies else (stub.default or Reply("ok"))
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.status != 200:
                    payload = json.dumps({"error": {"message": "scripted failure", "type": "server_error"}}).encode()
                else:
                    payload = json.dumps({
                        "id": "chatcmpl-stub", "object": "chat.completion", "created": int(time.time()),
                        "model": body.get("model", "stub"),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": reply.content}}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                    }).encode()
                self._send(reply.status, payload)

            def _send(self, status: int, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    dims: int = 64

    def embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = []
        for i, text in enumerate(texts):
            vector = [0.0] * self.dims
            for word in str(text).lower().split():
                vector[int(hashlib.md5(word.strip(".,?!").encode()).hexdigest(), 16) % self.dims] += 1.0
            norm = math.sqrt(sum(v * v for v in vector)) or 1.0
            data.append({"object": "embedding", "index": i, "embedding": [v / norm for v in vector]})
        return {"object": "list", "data": data, "model": body.get("model"), "usage": {"prompt_tokens": 1, "total_tokens": 1}}

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
