"""`agentscope-memory serve` that cannot start says why in one line and exits non-zero: no
traceback, no hang, and nothing stored is touched."""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentscope_memory.store import open_store
from conftest import REPO, ServerProcess, free_port, immutable

DB_NAME = "agentscope-memory.sqlite3"


def _serve(data_dir: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSCOPE_MEMORY_")}
    environ["AGENTSCOPE_MEMORY_LONG_TERM_ENABLED"] = "false"
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "agentscope_memory_server", "serve", "--port", "0", "--data-dir", str(data_dir),
         "--log-level", "WARNING", *extra],
        capture_output=True, text=True, env=environ, cwd=REPO, timeout=60)


def _one_line_reason(done: subprocess.CompletedProcess[str], *words: str) -> str:
    """The error line, checked: non-zero exit, one line on stderr (gRPC's own log lines aside),
    no traceback, every word in it."""
    assert done.returncode != 0, done
    lines = [line for line in done.stderr.splitlines() if line.startswith("agentscope-memory")]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def test_a_corrupted_sqlite_file_is_named_and_left_alone(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    garbage = b"this is not SQLite" * 2000
    (data / DB_NAME).write_bytes(garbage)
    _one_line_reason(_serve(data), str(data / DB_NAME), "SQLite database")
    assert (data / DB_NAME).read_bytes() == garbage


@pytest.mark.slow
def test_a_database_locked_by_another_program_is_not_called_damaged(tmp_path: Path) -> None:
    # Held past the busy timeout (10 s) while the server starts: the line said the file "cannot
    # be opened as an SQLite database ... restore it from a backup", about a healthy database.
    data = tmp_path / "data"
    asyncio.run(open_store("sqlite", data).close())
    with sqlite3.connect(data / DB_NAME) as conn:
        conn.execute("CREATE TABLE 另一个程序 (note TEXT)")
        conn.execute("INSERT INTO 另一个程序 VALUES ('数据完好')")
    other = sqlite3.connect(data / DB_NAME, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        line = _one_line_reason(_serve(data), str(data / DB_NAME), "locked by another program",
                                "nothing is wrong with the database", "stop the other program")
        assert "backup" not in line.replace("backup tool", "") and "cannot be opened" not in line
    finally:
        other.execute("ROLLBACK")
        other.close()
    with sqlite3.connect(data / DB_NAME) as conn:
        assert conn.execute("SELECT note FROM 另一个程序").fetchall() == [("数据完好",)]
    # Once the other program lets go, the same store opens.
    asyncio.run(open_store("sqlite", data).close())


def test_a_database_from_a_newer_version_is_refused_before_any_change(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = ServerProcess(data, None, "--config", _no_long_term(tmp_path))
    assert server.terminate() == 0
    server.close()
    with sqlite3.connect(data / DB_NAME) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
        conn.execute("DROP TABLE jobs")  # as if the newer version had retired it
    _one_line_reason(_serve(data), "schema version 99", "newer")
    with sqlite3.connect(data / DB_NAME) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "jobs" not in tables


def test_a_second_server_on_the_same_data_dir_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = ServerProcess(data, None, "--config", _no_long_term(tmp_path))
    try:
        line = _one_line_reason(_serve(data), str(data), "in use by another agentscope-memory server")
        assert f"pid {first.proc.pid}" in line
    finally:
        assert first.terminate() == 0
        first.close()
    # Released with the first server: the data dir serves again.
    again = ServerProcess(data, None, "--config", _no_long_term(tmp_path))
    assert again.terminate() == 0
    again.close()


def test_a_data_dir_below_a_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")
    _one_line_reason(_serve(tmp_path / "a-file" / "data"), "data_dir", str(tmp_path / "a-file" / "data"))


def test_a_metrics_port_in_use_is_named_and_nothing_is_left_running(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        grpc_port = free_port()
        done = _serve(tmp_path / "data", "--port", str(grpc_port), env={"AGENTSCOPE_MEMORY_METRICS_PORT": str(port)})
        _one_line_reason(done, f"127.0.0.1:{port}", "metrics_port")
    # The gRPC port it had bound is free again, and the data dir too.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", grpc_port))
    again = ServerProcess(tmp_path / "data", None, "--config", _no_long_term(tmp_path))
    assert again.terminate() == 0
    again.close()


@pytest.mark.parametrize("setting", ["mem0_rest_port", "mcp_port", "inspector_port"])
def test_an_http_port_in_use_names_its_setting(tmp_path: Path, setting: str) -> None:
    # The message named the address only: with four ports configured, which one to change?
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _serve(tmp_path / "data", env={f"AGENTSCOPE_MEMORY_{setting.upper()}": str(port),
                                              "AGENTSCOPE_MEMORY_LONG_TERM_ENABLED": "true",
                                              "AGENTSCOPE_MEMORY_LONG_TERM_PRELOAD": "false"})
        _one_line_reason(done, f"127.0.0.1:{port} ({setting})", "Address already in use")


def _listening(tmp_path: Path, env: dict[str, str], poll_s: float) -> tuple[subprocess.Popen[bytes], Path]:
    """`serve` started in the background (long-term memory off, `env` added), once its log
    says it listens (checked every `poll_s`); its log file."""
    import time

    environ = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSCOPE_MEMORY_")}
    environ.update({"AGENTSCOPE_MEMORY_LONG_TERM_ENABLED": "false", **env})
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentscope_memory_server", "serve", "--port", "0", "--data-dir",
             str(tmp_path / "data")], stdout=out, stderr=subprocess.STDOUT, env=environ, cwd=REPO)
    deadline = time.monotonic() + 60
    while '"msg": "listening"' not in log.read_text() and time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(log.read_text())
        time.sleep(poll_s)
    return proc, log


def _no_long_term(tmp_path: Path) -> str:
    config = tmp_path / "server.toml"
    config.write_text("long_term_enabled = false\n")
    return str(config)


def test_a_misspelt_variable_is_named_and_metrics_port_0_says_where_it_listens(tmp_path: Path) -> None:
    import json
    import urllib.request

    proc, log = _listening(tmp_path, {"AGENTSCOPE_MEMORY_METRICS_PORT": "0",
                                      "AGENTSCOPE_MEMORY_API_KEY": "a client's key, not a setting",
                                      "AGENTSCOPE_MEMORY_MAX_MESAGE_BYTES": "1000"}, 0.1)
    try:
        records = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
        warnings = [r["msg"] for r in records if r["level"] == "WARNING"]
        assert warnings == ["environment variable AGENTSCOPE_MEMORY_MAX_MESAGE_BYTES is not a setting and is"
                            " ignored (did you mean AGENTSCOPE_MEMORY_MAX_MESSAGE_BYTES?)"], warnings
        listening = next(r for r in records if r["msg"] == "listening")
        with urllib.request.urlopen(f"http://127.0.0.1:{listening['metrics_port']}/metrics", timeout=10) as page:
            assert b"rpc_server_call_duration_seconds" in page.read()
    finally:
        proc.terminate()
        proc.wait(30)


def test_sigterm_right_after_the_listening_line_drains(tmp_path: Path) -> None:
    # The handlers came after a full garbage collection and the port file: a SIGTERM sent as
    # soon as the server said it was listening killed it (exit -15), with nothing drained.
    proc, log = _listening(tmp_path, {}, 0.005)
    try:
        proc.terminate()
        assert proc.wait(30) == 0, log.read_text()[-2000:]
        assert '"msg": "stopped"' in log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_mcp_over_stdio_on_a_corrupted_store_says_why_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / DB_NAME).write_bytes(b"this is not SQLite" * 2000)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSCOPE_MEMORY_")}
    environ["AGENTSCOPE_MEMORY_LONG_TERM_ENABLED"] = "false"
    done = subprocess.run([sys.executable, "-m", "agentscope_memory_server", "mcp", "--data-dir", str(data)],
                          input="", capture_output=True, text=True, env=environ, cwd=REPO, timeout=60)
    _one_line_reason(done, "agentscope-memory mcp:", str(data / DB_NAME), "SQLite database")


def test_a_grpc_port_in_use_says_so(tmp_path: Path) -> None:
    # gRPC's own text was "Failed to bind to address ...; set GRPC_VERBOSITY=debug ...".
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _serve(tmp_path / "data", "--port", str(port))
    _one_line_reason(done, f"cannot listen on 127.0.0.1:{port}: Address already in use")


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="this machine has no IPv6 loopback")
async def test_an_ipv6_host_is_served(server_factory) -> None:
    # "--host ::1" failed: gRPC read "::1:0" as the address ::0.1.0.0, port 443.
    server = await server_factory(host="::1", metrics_port=0)
    assert server.address == f"[::1]:{server.port}"
    async with grpc.aio.insecure_channel(server.address) as channel:
        status = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert status.status == health_pb2.HealthCheckResponse.SERVING


def test_a_store_file_that_cannot_be_written_is_refused_at_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = ServerProcess(data, None, "--config", _no_long_term(tmp_path))
    assert server.terminate() == 0
    server.close()
    stored = (data / DB_NAME).read_bytes()
    with immutable(data / DB_NAME):
        try:
            done = _serve(data, env={"AGENTSCOPE_MEMORY_LONG_TERM_ENABLED": "false"})
        except subprocess.TimeoutExpired:
            pytest.fail("the server started on a store it cannot write")
        _one_line_reason(done, str(data / DB_NAME), "cannot be written", "must be writable")
    assert (data / DB_NAME).read_bytes() == stored
