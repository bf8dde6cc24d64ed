package dev.agentscopememory.agentscope1;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.TestServer;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** API keys (tenants) and TLS, against a server configured for them. */
class SecurityTest {

    private static final String KEY_A = "key-for-tenant-a-0001";
    private static final String KEY_B = "key-for-tenant-b-0002";

    @TempDir
    Path dir;

    static Msg user(String text) {
        return Msg.builder().role(MsgRole.USER).textContent(text).build();
    }

    static List<String> texts(RemoteMemory m) {
        return m.getMessages().stream().map(Msg::getTextContent).toList();
    }

    @Test
    void apiKeysAuthenticateAndSeparateTenants() throws Exception {
        try (TestServer server = TestServer.start(Map.of("AGENTSCOPE_MEMORY_API_KEYS",
                "{\"" + KEY_A + "\":\"tenant-a\",\"" + KEY_B + "\":\"tenant-b\"}"))) {
            try (RemoteMemory none = RemoteMemory.builder().target(server.target()).memoryId("shared-id").build()) {
                RemoteMemoryException e = assertThrows(RemoteMemoryException.class, () -> none.addMessage(user("x")));
                assertInstanceOf(RemoteMemoryException.Unauthenticated.class, e);
            }
            try (RemoteMemory wrong = RemoteMemory.builder().target(server.target()).memoryId("shared-id")
                    .apiKey("not-a-known-key-at-all").build()) {
                assertInstanceOf(RemoteMemoryException.Unauthenticated.class,
                        assertThrows(RemoteMemoryException.class, wrong::getMessages));
            }
            try (RemoteMemory a = RemoteMemory.builder().target(server.target()).memoryId("shared-id").apiKey(KEY_A).build();
                    RemoteMemory b = RemoteMemory.builder().target(server.target()).memoryId("shared-id").apiKey(KEY_B).build()) {
                a.addMessage(user("for a"));
                b.addMessage(user("for b"));
                assertEquals(List.of("for a"), texts(a));
                assertEquals(List.of("for b"), texts(b));
            }
        }
    }

    @Test
    void tlsWithTheServersCertificate() throws Exception {
        Assumptions.assumeTrue(Files.isExecutable(Path.of("/usr/bin/openssl")), "openssl is not installed");
        Path cert = dir.resolve("cert.pem");
        Path key = dir.resolve("key.pem");
        Process p = new ProcessBuilder("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                "-keyout", key.toString(), "-out", cert.toString())
                .redirectErrorStream(true).redirectOutput(dir.resolve("openssl.log").toFile()).start();
        assertEquals(true, p.waitFor(60, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), Files.readString(dir.resolve("openssl.log")));
        try (TestServer server = TestServer.start(Map.of(
                "AGENTSCOPE_MEMORY_TLS_CERT_FILE", cert.toString(),
                "AGENTSCOPE_MEMORY_TLS_KEY_FILE", key.toString()))) {
            try (RemoteMemory tls = RemoteMemory.builder().target(server.target()).memoryId("over-tls")
                    .trustedCertificates(cert).build()) {
                tls.addMessage(user("secret"));
                assertEquals(List.of("secret"), texts(tls));
            }
            try (RemoteMemory plain = RemoteMemory.builder().target(server.target()).memoryId("over-tls")
                    .maxAttempts(1).deadline(Duration.ofSeconds(5)).build()) {
                RemoteMemoryException e = assertThrows(RemoteMemoryException.class, plain::getMessages);
                assertInstanceOf(RemoteMemoryException.Unavailable.class, e);
            }
        }
    }
}
