"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 (ephemeral port).

The tests' only double is a remote paid LLM; this stands in for it. Each POST to
`.../chat/completions` takes the next reply from a queue (or `default` when the queue is
empty) and records the request. A reply is one of:

- `ScriptedReply.text("...")`         a normal completion with that content and usage;
- `ScriptedReply.json({...})`         a completion whose content is that value as JSON text
                                      (e.g. mem0's `{"memory": [...]}` extraction answers);
- `ScriptedReply.error(500)`          an HTTP error with an OpenAI-style error body;
- `ScriptedReply.raw(b"...", 200)`    any body at all (malformed output);
- `ScriptedReply.tool_call("name", {...})`  an assistant turn calling that tool (agents);
- any of them `.after(seconds)`       answered only after a delay (client timeouts).

Chat answers wait while `hold` is set to a cleared `threading.Event` (a call kept in flight
for as long as a test needs, e.g. across a shutdown); `hold.set()` releases them.

POST `.../embeddings` answers with vectors derived from the words of each input (texts that
share words are similar), for tests of an OpenAI-compatible embedder, after
`embedding_s_per_text` seconds per text (a slow endpoint).

Usage:
    with ScriptedLLM(default=ScriptedReply.text("ok")) as llm:
        llm.push(ScriptedReply.error(500), ScriptedReply.text("SUMMARY"))
        ...  # point the client at llm.base_url (ends in /v1)
        assert llm.requests[0].body["messages"][0]["role"] == "user"
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _message(reply: ScriptedReply, n: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{n}_{i}", "type": "function", "function": {"name": name, "arguments": args}}
            for i, (name, args) in enumerate(reply.tool_calls)
        ]
    return message


@dataclass(frozen=True)
class ScriptedReply:
    status: int = 200
    content: str | None = ""
    body: bytes | None = None  # when set, sent verbatim instead of a completion
    delay_s: float = 0.0
    prompt_tokens: int = 10
    completion_tokens: int = 20
    tool_calls: tuple[tuple[str, str], ...] = ()  # (name, arguments JSON) per call

    @classmethod
    def text(cls, content: str, prompt_tokens: int = 10, completion_tokens: int = 20) -> ScriptedReply:
        return cls(content=content, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)

    @classmethod
    def json(cls, value: Any) -> ScriptedReply:
        return cls(content=json.dumps(value))

    @classmethod
    def error(cls, status: int, message: str = "scripted failure") -> ScriptedReply:
        body = json.dumps({"error": {"message": message, "type": "server_error", "code": status}}).encode()
        return cls(status=status, body=body)

    @classmethod
    def tool_call(cls, name: str, arguments: dict[str, Any]) -> ScriptedReply:
        return cls(content=None, tool_calls=((name, json.dumps(arguments, ensure_ascii=False)),))

    @classmethod
    def raw(cls, body: bytes, status: int = 200) -> ScriptedReply:
        return cls(status=status, body=body)

    def after(self, seconds: float) -> ScriptedReply:
        return replace(self, delay_s=seconds)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or the raw text when it was not JSON


@dataclass
class ScriptedLLM:
    default: ScriptedReply | None = None
    model: str = "scripted-model"
    requests: list[RecordedRequest] = field(default_factory=list)
    dims: int = 64
    hold: threading.Event | None = None
    # Seconds an embeddings request takes per text it embeds (a slow embedding endpoint).
    embedding_s_per_text: float = 0.0

    def __post_init__(self) -> None:
        self._queue: deque[ScriptedReply] = deque()
        self._lock = threading.Lock()
        llm = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in separate writes; with keep-alive, Nagle plus delayed
            # ACKs would add ~40 ms to every answer.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    body: Any = json.loads(raw or b"{}")
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                with llm._lock:
                    llm.requests.append(RecordedRequest("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    embedded = llm.embeddings(body) if self.path.rstrip("/").endswith("/embeddings") else None
                    reply = None if embedded is not None else llm._queue.popleft() if llm._queue else llm.default
                if embedded is not None:
                    if llm.embedding_s_per_text:
                        time.sleep(llm.embedding_s_per_text * len(embedded["data"]))
                    self._send(200, json.dumps(embedded).encode())
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}).encode())
                    return
                if reply is None:
                    self._send(500, json.dumps({"error": {"message": "no scripted reply left"}}).encode())
                    return
                if llm.hold is not None:
                    llm.hold.wait(60)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.body is not None:
                    self._send(reply.status, reply.body)
                    return
                usage = {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                         "total_tokens": reply.prompt_tokens + reply.completion_tokens}
                self._send(reply.status, json.dumps({
                    "id": f"chatcmpl-{len(llm.requests)}", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", llm.model) if isinstance(body, dict) else llm.model,
                    "choices": [{"index": 0, "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                                 "message": _message(reply, len(llm.requests))}],
                    "usage": usage,
                }).encode())

            def _send(self, status: int, payload: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test); nothing to answer

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

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
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.rstrip("/").endswith("/chat/completions")]

    def push(self, *replies: ScriptedReply) -> None:
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        return len(self._queue)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> ScriptedLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
