package dev.agentscopememory.agentscope1;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.AutoContextProfile;
import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.TokenCounter;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.memory.InMemoryMemory;
import io.agentscope.core.memory.autocontext.AutoContextConfig;
import io.agentscope.core.memory.autocontext.PromptConfig;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.tool.Toolkit;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** Adapter behaviour that needs no server. */
class AdapterUnitTest {

    @Test
    void autoContextConfigIsSentFieldByField() {
        AutoContextConfig config = AutoContextConfig.builder().msgThreshold(7).maxToken(5000).tokenRatio(0.5)
                .lastKeep(3).largePayloadThreshold(99).offloadSinglePreview(12).minConsecutiveToolMessages(4)
                .currentRoundCompressionRatio(0.2).minCompressionTokenThreshold(11)
                .customPrompt(PromptConfig.builder().previousRoundSummaryPrompt("summarise!").build())
                .build();
        dev.agentscopememory.grpc.v1.AutoContextConfig wire =
                RemoteAutoContextMemory.toProto(config, AutoContextProfile.IMPROVED, TokenCounter.CL100K);
        assertEquals(7, wire.getMsgThreshold());
        assertEquals(5000, wire.getMaxToken());
        assertEquals(0.5, wire.getTokenRatio());
        assertEquals(3, wire.getLastKeep());
        assertEquals(99, wire.getLargePayloadThreshold());
        assertEquals(12, wire.getOffloadSinglePreview());
        assertEquals(4, wire.getMinConsecutiveToolMessages());
        assertEquals(0.2, wire.getCurrentRoundCompressionRatio());
        assertEquals(11, wire.getMinCompressionTokenThreshold());
        assertEquals("summarise!", wire.getCustomPrompt().getPreviousRoundSummaryPrompt());
        assertEquals("", wire.getCustomPrompt().getCurrentRoundCompressPrompt());
        assertEquals(dev.agentscopememory.grpc.v1.AutoContextProfile.AUTO_CONTEXT_PROFILE_IMPROVED, wire.getProfile());
        assertEquals(dev.agentscopememory.grpc.v1.TokenCounter.TOKEN_COUNTER_CL100K, wire.getTokenCounter());

        // The Java defaults are sent explicitly, so the server cannot drift from them.
        dev.agentscopememory.grpc.v1.AutoContextConfig defaults = RemoteAutoContextMemory.toProto(
                AutoContextConfig.builder().build(), AutoContextProfile.PARITY, TokenCounter.JAVA_ESTIMATE);
        assertEquals(100, defaults.getMsgThreshold());
        assertEquals(131072, defaults.getMaxToken());
        assertEquals(50, defaults.getLastKeep());
        assertFalse(defaults.hasCustomPrompt());
        assertEquals(dev.agentscopememory.grpc.v1.AutoContextProfile.AUTO_CONTEXT_PROFILE_PARITY, defaults.getProfile());
        assertEquals(dev.agentscopememory.grpc.v1.TokenCounter.TOKEN_COUNTER_JAVA_ESTIMATE, defaults.getTokenCounter());
    }

    /** The hook leaves agents whose memory is not a remote AutoContext memory alone. */
    @Test
    void autoContextHookIgnoresOtherMemories() throws Exception {
        ScriptedModel plain = new ScriptedModel(AgentScripts.weatherTurns());
        ScriptedModel hooked = new ScriptedModel(AgentScripts.weatherTurns());
        for (ScriptedModel model : java.util.List.of(plain, hooked)) {
            Toolkit toolkit = new Toolkit();
            toolkit.registerTool(new WeatherTools());
            ReActAgent.Builder b = ReActAgent.builder().name("Assistant").sysPrompt("sys").model(model)
                    .toolkit(toolkit).memory(new InMemoryMemory()).maxIters(6);
            if (model == hooked) {
                b.hook(new RemoteAutoContextHook());
            }
            b.build().call(Msg.builder().role(MsgRole.USER).name("user").textContent("Paris?").build())
                    .block(Duration.ofSeconds(60));
        }
        assertEquals(plain.calls().size(), hooked.calls().size());
        for (int i = 0; i < plain.calls().size(); i++) {
            assertEquals(AgentScripts.comparable(plain.calls().get(i)), AgentScripts.comparable(hooked.calls().get(i)));
        }
        assertFalse(hooked.toolNames().get(0).contains(RemoteContextReloadTool.TOOL_NAME));
        assertTrue(hooked.toolNames().get(0).contains("get_weather"));
    }

    /**
     * A newer server may project in a mode this client has no constant for: the projection is
     * still returned, its mode {@code UNKNOWN}, rather than failing on the label.
     */
    @Test
    void aProjectionInAModeThisClientDoesNotKnowIsStillReturned() {
        for (int wire : new int[] {6, 99, 0, -1}) {
            RemoteTieredMemory.Projection projection = RemoteTieredMemory.Projection.of(
                    dev.agentscopememory.grpc.v1.ProjectContextResponse.newBuilder()
                            .setModeValue(wire).setModeDetected(true).setTokens(3).putSectionTokens("recent", 3)
                            .addMessages(dev.agentscopememory.agentscope1.internal.MsgConverter.toProto(
                                    Msg.builder().role(MsgRole.USER).textContent("最近的消息").build()))
                            .build());
            assertEquals(RemoteTieredMemory.ProjectionMode.UNKNOWN, projection.mode(), "wire value " + wire);
            assertEquals("最近的消息", projection.messages().get(0).getTextContent());
            assertEquals(3, projection.tokens());
        }
        // Every known mode goes out and comes back as the wire value of its name.
        for (RemoteTieredMemory.ProjectionMode mode : RemoteTieredMemory.ProjectionMode.values()) {
            if (mode == RemoteTieredMemory.ProjectionMode.UNKNOWN) {
                continue;
            }
            dev.agentscopememory.grpc.v1.ProjectionMode wire = mode.toProto();
            assertEquals("PROJECTION_MODE_" + mode.name(), wire.name());
            assertEquals(mode, RemoteTieredMemory.Projection.of(dev.agentscopememory.grpc.v1.ProjectContextResponse
                    .newBuilder().setMode(wire).build()).mode());
        }
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> RemoteTieredMemory.ProjectionOptions.builder("继续", 100)
                        .mode(RemoteTieredMemory.ProjectionMode.UNKNOWN));
        assertTrue(e.getMessage().startsWith("mode: "), e.getMessage());
    }

    /** Sent as '?', half a surrogate pair would label the memory, or every recorded memory, otherwise. */
    @Test
    void aLoneSurrogateInALabelOrLongTermMetadataIsRefusedBeforeAnythingIsSent() {
        IllegalArgumentException value = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> RemoteMemory.builder().target("127.0.0.1:1").memoryId("m").label("团队", "规划\uD800"));
        assertEquals("labels['团队']: contains a lone surrogate at character 2; it is not Unicode text", value.getMessage());
        assertTrue(org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> RemoteMemory.builder().target("127.0.0.1:1").memoryId("m").label("键\uDC00", "v"))
                .getMessage().startsWith("labels: "));
        IllegalArgumentException metadata = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> RemoteLongTermMemory.builder().target("127.0.0.1:1").userId("u")
                        .metadata(java.util.Map.of("来源", "半\uD83D")).build());
        assertTrue(metadata.getMessage().startsWith("metadata_json: contains a lone surrogate"), metadata.getMessage());
        RemoteLongTermMemory.builder().target("127.0.0.1:1").userId("u")
                .metadata(java.util.Map.of("来源", "整 \uD83D\uDE00")).build().close();
    }

    /** Was accepted, then failed at build() as AgentScope's "Failed to serialize object to JSON". */
    @Test
    void aNullLongTermMetadataKeyIsRefusedAtTheCall() {
        java.util.Map<String, Object> nullKey = new java.util.HashMap<>();
        nullKey.put(null, "无键");
        RemoteLongTermMemory.Builder builder = RemoteLongTermMemory.builder().target("127.0.0.1:1").userId("张三");
        NullPointerException e = org.junit.jupiter.api.Assertions.assertThrows(NullPointerException.class,
                () -> builder.metadata(nullKey));
        assertEquals("metadata keys must not be null", e.getMessage());
        builder.build().close();
    }

    @Test
    void connectionOptionsAreValidated() {
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> RemoteConnection.builder().build());
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> RemoteConnection.builder().maxAttempts(0));
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> RemoteConnection.builder().retryBackoff(Duration.ofMillis(-1)));
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> RemoteConnection.builder().target("127.0.0.1:1")
                        .trustedCertificates(java.nio.file.Path.of("/nonexistent/cert.pem")).build());
    }
}
