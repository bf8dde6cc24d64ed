package dev.agentscopememory.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.agentscopememory.client.internal.AutoContextWire;
import dev.agentscopememory.grpc.v1.CreateMemoryRequest;
import dev.agentscopememory.grpc.v1.MemoryKind;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.util.List;
import java.util.UUID;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

/**
 * Core's {@link AutoContextConfig} has the server's defaults and refuses what the server refuses,
 * with the server's words, when the value is set.
 */
class AutoContextConfigTest {

    @Test
    void defaultsAreTheServersAndAConfigIsSentWhole() throws Exception {
        try (RemoteConnection connection = RemoteConnection.builder().target(TestServer.shared().target()).build()) {
            CreateMemoryRequest unset = CreateMemoryRequest.newBuilder().setMemoryId("默认-" + UUID.randomUUID())
                    .setKind(MemoryKind.MEMORY_KIND_AUTO_CONTEXT).build();
            dev.agentscopememory.grpc.v1.AutoContextConfig server =
                    connection.memoryService().createMemory(unset).getMemory().getAutoContextConfig();
            // (The server lists an empty custom_prompt; no prompt given sends none.)
            assertEquals(server.toBuilder().clearCustomPrompt().build(), AutoContextWire.toProto(AutoContextConfig.builder().build(),
                    AutoContextProfile.PARITY, TokenCounter.JAVA_ESTIMATE));

            AutoContextConfig mine = AutoContextConfig.builder().msgThreshold(60).maxToken(4096).tokenRatio(0.5)
                    .lastKeep(20).largePayloadThreshold(1000).offloadSinglePreview(80).minConsecutiveToolMessages(3)
                    .currentRoundCompressionRatio(0.2).minCompressionTokenThreshold(100)
                    .previousRoundSummaryPrompt("请用中文总结。").build();
            dev.agentscopememory.grpc.v1.AutoContextConfig sent =
                    AutoContextWire.toProto(mine, AutoContextProfile.IMPROVED, TokenCounter.CL100K);
            CreateMemoryRequest given = CreateMemoryRequest.newBuilder().setMemoryId("配置-" + UUID.randomUUID())
                    .setKind(MemoryKind.MEMORY_KIND_AUTO_CONTEXT).setAutoContextConfig(sent).build();
            assertEquals(sent, connection.memoryService().createMemory(given).getMemory().getAutoContextConfig());
        }
    }

    @Test
    void refusalsMatchTheServersMessage() throws Exception {
        List<Consumer<AutoContextConfig.Builder>> bad = List.of(
                b -> b.msgThreshold(0), b -> b.maxToken(-1), b -> b.tokenRatio(0), b -> b.tokenRatio(1.5),
                b -> b.tokenRatio(Double.NaN), b -> b.lastKeep(-1), b -> b.largePayloadThreshold(0),
                b -> b.offloadSinglePreview(-1), b -> b.minConsecutiveToolMessages(-1),
                b -> b.currentRoundCompressionRatio(0), b -> b.minCompressionTokenThreshold(-1));
        List<Consumer<dev.agentscopememory.grpc.v1.AutoContextConfig.Builder>> wire = List.of(
                w -> w.setMsgThreshold(0), w -> w.setMaxToken(-1), w -> w.setTokenRatio(0), w -> w.setTokenRatio(1.5),
                w -> w.setTokenRatio(Double.NaN), w -> w.setLastKeep(-1), w -> w.setLargePayloadThreshold(0),
                w -> w.setOffloadSinglePreview(-1), w -> w.setMinConsecutiveToolMessages(-1),
                w -> w.setCurrentRoundCompressionRatio(0), w -> w.setMinCompressionTokenThreshold(-1));
        try (RemoteConnection connection = RemoteConnection.builder().target(TestServer.shared().target()).build()) {
            for (int i = 0; i < bad.size(); i++) {
                AutoContextConfig.Builder builder = AutoContextConfig.builder();
                Consumer<AutoContextConfig.Builder> setter = bad.get(i);
                IllegalArgumentException local = assertThrows(IllegalArgumentException.class,
                        () -> setter.accept(builder), "case " + i);
                dev.agentscopememory.grpc.v1.AutoContextConfig.Builder config =
                        dev.agentscopememory.grpc.v1.AutoContextConfig.newBuilder();
                wire.get(i).accept(config);
                CreateMemoryRequest request = CreateMemoryRequest.newBuilder().setMemoryId("坏-" + UUID.randomUUID())
                        .setKind(MemoryKind.MEMORY_KIND_AUTO_CONTEXT).setAutoContextConfig(config).build();
                StatusRuntimeException remote = assertThrows(StatusRuntimeException.class,
                        () -> connection.memoryService().createMemory(request), "case " + i);
                assertEquals(Status.Code.INVALID_ARGUMENT, remote.getStatus().getCode());
                assertEquals(remote.getStatus().getDescription(), local.getMessage(), "case " + i);
            }
        }
    }
}
