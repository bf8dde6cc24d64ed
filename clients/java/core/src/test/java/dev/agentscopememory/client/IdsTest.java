package dev.agentscopememory.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.internal.WireEnums;
import dev.agentscopememory.grpc.v1.CreateMemoryRequest;
import dev.agentscopememory.grpc.v1.DeleteMemoryRequest;
import dev.agentscopememory.grpc.v1.GetMemoryRequest;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/** {@link Ids} follows the server's rules and words its refusals exactly as the server does. */
class IdsTest {

    private static final List<String> VALID = List.of(
            "会话-42", "助手", "セッション・テスト", "🤖 bot 🎉", "with spaces", ".", "..", "../etc",
            "café", "cafe\u0301", "x".repeat(256), "会".repeat(85));
    private static final List<String> INVALID = List.of(
            "", "   ", "a\u0000b", "tab\tid", "del\u007f", "c1\u0085", "x".repeat(257), "会".repeat(86),
            "😀".repeat(65), "lone\ud800", "\udc00x");

    @Test
    void unicodeIdsAreValidAndRoundTripThroughTheServer() throws Exception {
        try (RemoteConnection connection = RemoteConnection.builder().target(TestServer.shared().target()).build()) {
            for (String id : VALID) {
                assertEquals(id, Ids.checkId(id, "memory_id"));
                String memoryId = id.getBytes(StandardCharsets.UTF_8).length > 240 ? id : id + " core-ids";
                connection.memoryService().createMemory(CreateMemoryRequest.newBuilder().setMemoryId(memoryId)
                        .setKind(WireEnums.toProto(MemoryKind.IN_MEMORY)).build());
                assertEquals(memoryId, connection.memoryService()
                        .getMemory(GetMemoryRequest.newBuilder().setMemoryId(memoryId).build()).getMemory().getMemoryId());
                connection.memoryService().deleteMemory(DeleteMemoryRequest.newBuilder().setMemoryId(memoryId).build());
            }
        }
    }

    @Test
    void refusalsMatchTheServersMessage() throws Exception {
        try (RemoteConnection connection = RemoteConnection.builder().target(TestServer.shared().target()).build()) {
            for (String id : INVALID) {
                IllegalArgumentException local = assertThrows(IllegalArgumentException.class,
                        () -> Ids.checkId(id, "memory_id"), id);
                if (!new String(id.getBytes(StandardCharsets.UTF_8), StandardCharsets.UTF_8).equals(id)) {
                    // protobuf cannot carry a lone surrogate to the server; the rule is checked here only.
                    assertTrue(local.getMessage().contains("lone surrogate"), local.getMessage());
                    continue;
                }
                StatusRuntimeException remote = assertThrows(StatusRuntimeException.class, () -> connection
                        .memoryService().getMemory(GetMemoryRequest.newBuilder().setMemoryId(id).build()));
                assertEquals(Status.Code.INVALID_ARGUMENT, remote.getStatus().getCode());
                assertEquals(remote.getStatus().getDescription(), local.getMessage());
            }
        }
    }
}
