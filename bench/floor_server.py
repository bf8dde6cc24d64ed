"""A second baseline for AddMessages: a bare grpc.aio server whose AddMessages runs the SQL
transaction the service's SQLite store runs for one add, on the store's own schema, and nothing
else.

The transaction is the one the store issues (BEGIN IMMEDIATE; read the memory, the request id and
the list head; write the message, the list head, the version and the request record; COMMIT),
with the same pragmas. Left out is everything the service does around it: validation,
conversion, the request fingerprint, etags, replays, group commit. So the echo server measures
gRPC and protobuf, this one adds the durable write every acknowledged add needs, and the service
adds its own logic on top. `make bench` reports all three in the same run.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.store.base import MemoryRecord
from agentscope_memory.store.sqlite import SqliteStore

TENANT, MEMORY, LIST = "default", "bench-add", "messages"
# The result record the store keeps for a request id: two integers.
RESULT = '{{"message_count": {0}, "version": {1}}}'


class FloorMemoryService(pb_grpc.MemoryServiceServicer):
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    async def AddMessages(self, request, context):
        conn = self._conn
        now = time.time()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("SELECT memory_id, kind, config_json, labels_json, create_time, update_time, version"
                         " FROM memories WHERE tenant = ? AND memory_id = ?", (TENANT, MEMORY)).fetchone()
            conn.execute("SELECT fingerprint, result_json FROM requests"
                         " WHERE tenant = ? AND memory_id = ? AND request_id = ? AND created > ?",
                         (TENANT, MEMORY, request.request_id, now - 86400)).fetchone()
            next_seq, length = conn.execute(
                "SELECT next_seq, length FROM list_heads WHERE tenant = ? AND memory_id = ? AND list_name = ?",
                (TENANT, MEMORY, LIST)).fetchone() or (1, 0)
            conn.execute("INSERT INTO items (tenant, memory_id, list_name, seq, data) VALUES (?, ?, ?, ?, ?)",
                         (TENANT, MEMORY, LIST, next_seq, request.messages[0].SerializeToString()))
            conn.execute("INSERT INTO list_heads (tenant, memory_id, list_name, next_seq, length)"
                         " VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant, memory_id, list_name)"
                         " DO UPDATE SET next_seq = excluded.next_seq, length = excluded.length",
                         (TENANT, MEMORY, LIST, next_seq + 1, length + 1))
            (version,) = conn.execute("UPDATE memories SET version = version + 1, update_time = ?"
                                      " WHERE tenant = ? AND memory_id = ? RETURNING version",
                                      (now, TENANT, MEMORY)).fetchone()
            conn.execute("INSERT INTO requests (tenant, memory_id, request_id, fingerprint, result_json, created)"
                         " VALUES (?, ?, ?, ?, ?, ?)",
                         (TENANT, MEMORY, request.request_id, "0" * 64, RESULT.format(length + 1, version), now))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return pb.AddMessagesResponse(message_count=length + 1, version=version)


async def _schema(path: Path) -> None:
    # The store's own schema and its memory row, made by the store itself.
    store = SqliteStore(path)
    now = time.time()
    await store.run(TENANT, lambda tx: tx.insert_memory(MemoryRecord(MEMORY, "IN_MEMORY", create_time=now, update_time=now)))
    await store.close()


async def main(port: int, data_dir: str) -> None:
    path = Path(data_dir) / "floor.sqlite3"
    await _schema(path)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    server = grpc.aio.server()
    pb_grpc.add_MemoryServiceServicer_to_server(FloorMemoryService(conn), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as data:
        asyncio.run(main(int(sys.argv[1]), data))
