"""A private PostgreSQL server for tests, started from Debian's binaries (no Docker here)."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresServer:
    def __init__(self) -> None:
        binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not binaries:
            raise FileNotFoundError("PostgreSQL is not installed (apt-get install postgresql)")
        self.bin = Path(binaries[-1]).parent
        self.dir = Path(tempfile.mkdtemp(prefix="asm-pg-"))
        self.port = _free_port()
        # PostgreSQL refuses to run as root; run it as the `postgres` user the package creates.
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self._as:
            shutil.chown(self.dir, "postgres")
        data = self.dir / "data"
        self._run(str(self.bin / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync")
        self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-l", str(self.dir / "log"), "-w", "start",
                  "-o", f"-h 127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off")
        self.data = data

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
