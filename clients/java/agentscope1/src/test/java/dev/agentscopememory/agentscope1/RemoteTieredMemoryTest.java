package dev.agentscopememory.agentscope1;

import static dev.agentscopememory.agentscope1.SampleMessages.texts;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.TestServer;
import io.agentscope.core.memory.InMemoryMemory;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.session.JsonSession;
import io.agentscope.core.state.SimpleSessionKey;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** RemoteTieredMemory: a real ReActAgent on it, importance, compaction, projection, status, sessions. */
class RemoteTieredMemoryTest {

    private static TestServer server;

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.shared();
    }

    static Msg user(String text) {
        return Msg.builder().role(MsgRole.USER).name("user").textContent(text).build();
    }

    static RemoteTieredMemory.Builder fresh() {
        return RemoteTieredMemory.builder().target(server.target()).memoryId("tiered-" + UUID.randomUUID());
    }

    @Test
    void reActAgentRunsOnTieredMemoryLikeOnInMemoryMemory() throws Exception {
        ReActAgentRemoteMemoryTest.Run local = ReActAgentRemoteMemoryTest.run(new InMemoryMemory());
        try (RemoteTieredMemory memory = fresh().build()) {
            ReActAgentRemoteMemoryTest.Run remote = ReActAgentRemoteMemoryTest.run(memory);
            assertEquals(AgentScripts.comparable(local.memory()), AgentScripts.comparable(remote.memory()));
            RemoteTieredMemory.TierStatus status = memory.status().block(Duration.ofSeconds(20));
            assertEquals(11, status.tiers().get(0).items());
            assertEquals(8000, status.tiers().get(0).budget());
        }
    }

    @Test
    void importanceCompactionProjectionAndStatus() throws Exception {
        try (RemoteTieredMemory memory = fresh().l1CompactTrigger(65).l2Budget(100).scoreImportance(false).build()) {
            RemoteTieredMemory.TierStatus afterImportant =
                    memory.addMessage(user("note 0000 xxxxxxxxxxxxxxxxxxxxxxxxxx"), 0.9).block(Duration.ofSeconds(20));
            assertEquals(1, afterImportant.tiers().get(1).items());
            for (int i = 1; i < 5; i++) {
                memory.addMessage(user(String.format("note %04d xxxxxxxxxxxxxxxxxxxxxxxxxx", i)));
            }
            List<Msg> l1 = memory.getMessages();
            assertTrue(l1.get(0).getTextContent().startsWith("📦 History compacted"), l1.get(0).getTextContent());
            assertEquals(List.of("note 0003 xxxxxxxxxxxxxxxxxxxxxxxxxx", "note 0004 xxxxxxxxxxxxxxxxxxxxxxxxxx"),
                    texts(l1.subList(1, l1.size())));
            RemoteTieredMemory.TierStatus status = memory.status().block(Duration.ofSeconds(20));
            assertTrue(status.compacted());
            assertEquals(1, status.summaries());
            assertEquals(status, memory.compact().block(Duration.ofSeconds(20)));

            RemoteTieredMemory.Projection projection = memory.project(RemoteTieredMemory.ProjectionOptions
                    .builder("修复登录错误", 300).plan("1. 复现 2. 修复")
                    .sharedContext(List.of(user("共享池: 发布冻结"))).build()).block(Duration.ofSeconds(20));
            assertEquals(RemoteTieredMemory.ProjectionMode.DEBUG, projection.mode());
            assertTrue(projection.modeDetected());
            assertTrue(projection.tokens() <= 300);
            assertEquals("note 0004 xxxxxxxxxxxxxxxxxxxxxxxxxx",
                    projection.messages().get(projection.messages().size() - 1).getTextContent());
            assertTrue(texts(projection.messages()).contains("共享池: 发布冻结"));
            RemoteTieredMemory.Projection minimal = memory.project(RemoteTieredMemory.ProjectionOptions
                    .builder("next", 300).mode(RemoteTieredMemory.ProjectionMode.MINIMAL).build())
                    .block(Duration.ofSeconds(20));
            assertEquals(RemoteTieredMemory.ProjectionMode.MINIMAL, minimal.mode());
            assertFalse(minimal.modeDetected());
            assertThrows(IllegalArgumentException.class,
                    () -> memory.addMessage(user("x"), 1.5).block(Duration.ofSeconds(20)));
        }
    }

    @Test
    void sessionsCarryEveryTier() throws Exception {
        Path dir = Files.createTempDirectory("tiered-session");
        try (RemoteTieredMemory memory = fresh().l1CompactTrigger(65).l2Budget(100).scoreImportance(false).build();
                RemoteTieredMemory copy = fresh().l1CompactTrigger(65).l2Budget(100).scoreImportance(false).build()) {
            for (int i = 0; i < 9; i++) {
                memory.addMessage(user(String.format("记录 %04d xxxxxxxxxxxxxxxxxxxxxxxxxx", i)), i % 2 == 0 ? 0.9 : 0.2)
                        .block(Duration.ofSeconds(20));
            }
            JsonSession session = new JsonSession(dir);
            memory.saveTo(session, SimpleSessionKey.of("s"));
            assertTrue(Files.exists(dir.resolve("s").resolve(RemoteTieredMemory.L1_KEY + ".jsonl")));
            assertTrue(Files.exists(dir.resolve("s").resolve(RemoteTieredMemory.STATS_KEY + ".json")));
            copy.loadFrom(new JsonSession(dir), SimpleSessionKey.of("s"));
            assertEquals(AgentScripts.comparable(memory.getMessages()), AgentScripts.comparable(copy.getMessages()));
            RemoteTieredMemory.TierStatus a = memory.status().block(Duration.ofSeconds(20));
            RemoteTieredMemory.TierStatus b = copy.status().block(Duration.ofSeconds(20));
            assertEquals(a.tiers(), b.tiers());
            assertEquals(a.compactionRatio(), b.compactionRatio());
        }
    }
}
