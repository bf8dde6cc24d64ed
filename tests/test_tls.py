"""TLS: with a certificate configured the server speaks only TLS."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.errors import UnavailableError
from agentscope_memory.message import Msg, MsgRole

pytestmark = pytest.mark.needs(shutil.which("openssl") is not None, "openssl not installed")


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    return cert, key


async def test_tls_round_trip_and_plaintext_refused(server_factory, certificate) -> None:
    cert, key = certificate
    server = await server_factory(tls_cert_file=cert, tls_key_file=key)
    async with AsyncMemoryClient(server.address, root_certificates=cert.read_bytes()) as client:
        await client.create_memory("m")
        await client.add_message("m", Msg.create(MsgRole.USER, "over TLS"))
        assert [m.text_content for m in await client.get_messages("m")] == ["over TLS"]
    async with AsyncMemoryClient(server.address, timeout=2, retries=0) as plain:
        with pytest.raises(UnavailableError):
            await plain.get_memory("m")


def test_half_a_tls_configuration_is_rejected(certificate) -> None:
    from pydantic import ValidationError

    from agentscope_memory_server.config import Settings

    with pytest.raises(ValidationError, match="together"):
        Settings(tls_cert_file=certificate[0])
