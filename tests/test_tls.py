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


def test_a_pair_that_is_not_a_certificate_and_its_key_is_named_at_start(
        certificate, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # gRPC itself only said "cannot listen on ...: Failed to bind to address".
    from agentscope_memory_server.cli import main

    cert, key = certificate
    other = tmp_path / "other"
    other.mkdir()
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=x",
                    "-keyout", str(other / "key.pem"), "-out", str(other / "cert.pem")], check=True, capture_output=True)
    encrypted = tmp_path / "encrypted.pem"
    subprocess.run(["openssl", "rsa", "-in", str(key), "-aes256", "-passout", "pass:secret", "-out", str(encrypted)],
                   check=True, capture_output=True)
    for bad_cert, bad_key, why in ((key, cert, "PEM"), (cert, other / "key.pem", "mismatch"), (cert, encrypted, "PEM")):
        argv = ["serve", "--port", "0", "--data-dir", str(tmp_path / "data")]
        with pytest.MonkeyPatch.context() as env:
            env.setenv("AGENTSCOPE_MEMORY_TLS_CERT_FILE", str(bad_cert))
            env.setenv("AGENTSCOPE_MEMORY_TLS_KEY_FILE", str(bad_key))
            assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"tls_cert_file {bad_cert} and tls_key_file {bad_key}" in err, err
        assert why in err, err


async def test_the_http_surfaces_speak_only_tls_too(server_factory, certificate) -> None:
    import ssl

    import httpx

    cert, key = certificate
    api_key = "tls-key-of-tenant-a-0001"
    server = await server_factory(tls_cert_file=cert, tls_key_file=key, api_keys={api_key: "a"}, metrics_port=0,
                                  mem0_rest_port=0, mcp_port=0, inspector_port=0, long_term_enabled=False)
    headers = {"Authorization": f"Bearer {api_key}"}
    surfaces = {"metrics": (server.metrics_port, "/metrics"), "mem0 REST": (server.mem0_rest_port, "/v1/memories/"),
                "MCP": (server.mcp_port, "/mcp"), "inspector": (server.inspector_port, "/")}
    trusted = ssl.create_default_context(cafile=str(cert))
    async with httpx.AsyncClient(verify=trusted, timeout=10) as https, httpx.AsyncClient(timeout=10) as plain:
        for name, (port, path) in surfaces.items():
            # The key (and the inspector's login cookie) would cross the network in clear.
            with pytest.raises(httpx.HTTPError):
                await plain.get(f"http://127.0.0.1:{port}{path}", headers=headers)
            answer = await https.get(f"https://127.0.0.1:{port}{path}", headers=headers)
            assert answer.status_code < 500, (name, answer.status_code)
        assert "agentscope_memory_rpc" in (await https.get(f"https://127.0.0.1:{server.metrics_port}/metrics",
                                                          headers=headers)).text
        login = await https.post(f"https://127.0.0.1:{server.inspector_port}/login", data={"key": api_key})
        assert login.status_code == 303 and "secure" in login.headers["set-cookie"].lower().split("; ")
        # Over TLS the browser is told to keep to HTTPS for this host (a later visit typed as
        # http:// cannot be downgraded); a sensible time, nothing that binds other sites.
        for answer in (login, await https.get(f"https://127.0.0.1:{server.inspector_port}/login"),
                       await https.get(f"https://127.0.0.1:{server.inspector_port}/", headers=headers)):
            assert answer.headers.get("strict-transport-security") == "max-age=15552000", answer.headers
