"""A real OTLP/HTTP trace receiver on 127.0.0.1: what a collector would get, decoded."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any]
    status_code: int
    service_name: str
    status_message: str = ""
    # (name, attributes) of each event, such as a recorded exception
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def _value(any_value: Any) -> Any:
    return getattr(any_value, any_value.WhichOneof("value")) if any_value.WhichOneof("value") else None


@dataclass
class OtlpReceiver:
    spans: list[ReceivedSpan] = field(default_factory=list)
    # Where to export to (`otlp_endpoint`), once started.
    endpoint: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> str:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver._take(ExportTraceServiceRequest.FromString(body))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self._http.server_port}"
        return self.endpoint

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def _take(self, request: ExportTraceServiceRequest) -> None:
        with self._lock:
            for resource_spans in request.resource_spans:
                resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for s in scope_spans.spans:
                        self.spans.append(ReceivedSpan(
                            name=s.name, trace_id=s.trace_id.hex(), span_id=s.span_id.hex(),
                            parent_span_id=s.parent_span_id.hex(), kind=s.kind,
                            attributes={a.key: _value(a.value) for a in s.attributes},
                            status_code=s.status.code, service_name=str(resource.get("service.name")),
                            status_message=s.status.message,
                            events=[(e.name, {a.key: _value(a.value) for a in e.attributes}) for e in s.events],
                        ))

    def named(self, name: str) -> list[ReceivedSpan]:
        with self._lock:
            return [s for s in self.spans if s.name == name]

    def children(self, parent: ReceivedSpan) -> list[ReceivedSpan]:
        with self._lock:
            return [s for s in self.spans if s.parent_span_id == parent.span_id and s.trace_id == parent.trace_id]
