package dev.agentscopememory.client;

import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import dev.agentscopememory.client.internal.WireEnums;
import dev.agentscopememory.grpc.v1.CreateMemoryRequest;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.TraceFlags;
import io.opentelemetry.api.trace.TraceState;
import io.opentelemetry.context.Scope;
import java.io.ByteArrayOutputStream;
import java.net.InetSocketAddress;
import java.util.HexFormat;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The Java client sends the application's W3C trace context, so the server's span of the call
 * (exported over OTLP/HTTP to a receiver this test runs) belongs to the application's trace.
 */
class TraceContextTest {

    @Test
    void theServersSpanJoinsTheCallersTrace() throws Exception {
        ByteArrayOutputStream exported = new ByteArrayOutputStream();
        HttpServer receiver = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        receiver.createContext("/v1/traces", exchange -> {
            byte[] body = exchange.getRequestBody().readAllBytes();
            synchronized (exported) {
                exported.write(body);
            }
            exchange.sendResponseHeaders(200, -1);
            exchange.close();
        });
        receiver.start();
        String traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
        String parentId = "00f067aa0ba902b7";
        try (TestServer server = TestServer.start(Map.of("AGENTSCOPE_MEMORY_OTLP_ENDPOINT",
                "http://127.0.0.1:" + receiver.getAddress().getPort()))) {
            try (RemoteConnection connection = RemoteConnection.builder().target(server.target()).build()) {
                SpanContext caller = SpanContext.create(traceId, parentId, TraceFlags.getSampled(),
                        TraceState.getDefault());
                try (Scope ignored = Span.wrap(caller).makeCurrent()) {
                    CreateMemoryRequest create = CreateMemoryRequest.newBuilder().setMemoryId("追踪-1")
                            .setKind(WireEnums.toProto(MemoryKind.IN_MEMORY)).build();
                    connection.call("MemoryService/CreateMemory", false,
                            () -> connection.memoryService().createMemory(create));
                }
            }
            server.stop(); // SIGTERM: the server exports what it holds before it exits
        } finally {
            receiver.stop(0);
        }
        byte[] all;
        synchronized (exported) {
            all = exported.toByteArray();
        }
        assertTrue(contains(all, HexFormat.of().parseHex(traceId)), "no exported span carries the caller's trace id");
        assertTrue(contains(all, HexFormat.of().parseHex(parentId)), "no exported span has the caller's span as parent");
        assertTrue(contains(all, "agentscope.memory.v1.MemoryService/CreateMemory".getBytes()), "no span of the call");
    }

    private static boolean contains(byte[] haystack, byte[] needle) {
        outer:
        for (int i = 0; i + needle.length <= haystack.length; i++) {
            for (int j = 0; j < needle.length; j++) {
                if (haystack[i + j] != needle[j]) {
                    continue outer;
                }
            }
            return true;
        }
        return false;
    }
}
