"""grpcurl against the live server through reflection: the README's debugging session works."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

GRPCURL = Path(sys.executable).parent / "grpcurl"

pytestmark = pytest.mark.needs(GRPCURL.exists() or shutil.which("grpcurl") is not None, "grpcurl not installed")


def grpcurl(address: str, *args: str, data: dict | None = None) -> str:
    command = [str(GRPCURL if GRPCURL.exists() else "grpcurl"), "-plaintext"]
    if data is not None:
        command += ["-d", json.dumps(data)]
    command += [address, *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_list_shows_the_three_services_and_health(threaded_server) -> None:
    services = grpcurl(threaded_server.address, "list").split()
    for name in ("agentscope.memory.v1.MemoryService", "agentscope.memory.v1.LongTermMemoryService",
                 "agentscope.memory.v1.StateService", "grpc.health.v1.Health"):
        assert name in services


def test_describe_documents_the_contract(threaded_server) -> None:
    described = grpcurl(threaded_server.address, "describe", "agentscope.memory.v1.AddMessagesRequest")
    assert "request_id" in described and "retries" in described
    service = grpcurl(threaded_server.address, "describe", "agentscope.memory.v1.MemoryService")
    assert "rpc AddMessages" in service and "rpc GetMessages" in service


def test_create_add_get_round_trip(threaded_server) -> None:
    address = threaded_server.address
    created = json.loads(grpcurl(address, "agentscope.memory.v1.MemoryService/CreateMemory",
                                 data={"memory_id": "demo", "kind": "MEMORY_KIND_IN_MEMORY"}))
    assert created["memory"]["memoryId"] == "demo" and created["created"] is True
    message = {"id": "m1", "role": "ROLE_USER", "content": [{"text": {"text": "hello from grpcurl"}}],
               "metadata_json": '{"source":"cli","n":1}', "timestamp": "2026-01-01 10:00:00.000"}
    added = json.loads(grpcurl(address, "agentscope.memory.v1.MemoryService/AddMessages",
                               data={"memory_id": "demo", "messages": [message]}))
    assert added["messageCount"] == "1"
    got = json.loads(grpcurl(address, "agentscope.memory.v1.MemoryService/GetMessages", data={"memory_id": "demo"}))
    assert got["messages"] == [{"id": "m1", "role": "ROLE_USER", "content": [{"text": {"text": "hello from grpcurl"}}],
                                "metadataJson": '{"source":"cli","n":1}', "timestamp": "2026-01-01 10:00:00.000"}]
    health = json.loads(grpcurl(address, "grpc.health.v1.Health/Check"))
    assert health["status"] == "SERVING"


def test_describe_a_method_and_an_unknown_one(threaded_server) -> None:
    # `describe Service.Method` is how an operator reads one call's contract.
    for method, says in (("agentscope.memory.v1.MemoryService.GetMemory", "rpc GetMemory"),
                         ("grpc.health.v1.Health.Check", "rpc Check")):
        described = grpcurl(threaded_server.address, "describe", method)
        assert f"{method} is a method:" in described and says in described
    command = [str(GRPCURL if GRPCURL.exists() else "grpcurl"), "-plaintext", threaded_server.address,
               "describe", "agentscope.memory.v1.MemoryService.NoSuchMethod"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "NoSuchMethod" in done.stderr
