package dev.agentscopememory.agentscope1;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.TestServer;
import dev.agentscopememory.grpc.v1.ExportSessionRequest;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.memory.InMemoryMemory;
import io.agentscope.core.memory.LongTermMemoryMode;
import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.session.JsonSession;
import io.agentscope.core.tool.Toolkit;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Ids in any language (issue 20): a memory called {@code 会话-42}, a long-term user {@code 用户-1}
 * and a ReActAgent named {@code 助手} work end to end; a bad id fails at {@code build()} with the
 * server's message, before any connection is made.
 */
class UnicodeIdsTest {

    private static Msg user(String text) {
        return Msg.builder().role(MsgRole.USER).name("用户").textContent(text).build();
    }

    @Test
    void chineseJapaneseAndEmojiMemoryIds() throws Exception {
        String target = TestServer.shared().target();
        String suffix = UUID.randomUUID().toString().substring(0, 8);
        for (String memoryId : List.of("会话-42 " + suffix, "セッション " + suffix, "🤖.. " + suffix)) {
            try (RemoteMemory memory = RemoteMemory.builder().target(target).memoryId(memoryId).build()) {
                memory.addMessage(user("你好，" + memoryId));
                assertEquals(memoryId, memory.getMemoryId());
                assertEquals("你好，" + memoryId, memory.getMessages().get(0).getTextContent());
            }
        }
    }

    @Test
    void jsonSessionWithAChineseSessionIdRoundTripsAndMatchesTheServersExport(@TempDir Path dir) throws Exception {
        String target = TestServer.shared().target();
        String sessionId = "会话-42 🤖 " + UUID.randomUUID().toString().substring(0, 8);
        JsonSession session = new JsonSession(dir);
        try (RemoteMemory remote = RemoteMemory.builder().target(target).memoryId("记忆 " + sessionId).build()) {
            remote.addMessage(user("こんにちは、" + sessionId));
            remote.saveTo(session, sessionId);
            InMemoryMemory local = new InMemoryMemory();
            local.loadFrom(session, sessionId);
            assertEquals("こんにちは、" + sessionId, local.getMessages().get(0).getTextContent());

            // AgentScope's JsonSession and the server's export name the directory alike.
            List<Path> written;
            try (var listing = Files.list(dir)) {
                written = listing.toList();
            }
            assertEquals(1, written.size(), written.toString());
            String exported = remote.connection.stateService().exportSession(ExportSessionRequest.newBuilder()
                    .setSessionId(sessionId).addMemoryIds("记忆 " + sessionId).build()).getDirectory();
            assertEquals(written.get(0).getFileName().toString(), Path.of(exported).getFileName().toString());
        }
    }

    @Test
    void badIdsFailAtBuildWithTheServersMessage() {
        // Port 1: nothing listens there, so the refusal cannot come from a call.
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> RemoteMemory.builder().target("127.0.0.1:1").memoryId("a\u0000b").build());
        assertEquals("memory_id: contains a NUL character at character 1; control characters are not allowed",
                e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> RemoteLongTermMemory.builder().target("127.0.0.1:1").userId("会".repeat(86)).build());
        assertEquals("scope.user_id: is 258 bytes of UTF-8; at most 256", e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> RemoteLongTermMemory.builder().target("127.0.0.1:1").agentName("   ").build());
        assertEquals("scope.agent_name: must not be blank", e.getMessage());
    }

    @Test
    void anAgentNamed助手RemembersInStaticControl() throws Exception {
        String target = TestServer.shared().target();
        String userId = "用户-" + UUID.randomUUID();
        try (RemoteLongTermMemory ltm = RemoteLongTermMemory.builder().target(target).agentName("助手").userId(userId)
                        .deadline(Duration.ofSeconds(120)).build();
                RemoteMemory memory = RemoteMemory.builder().target(target).memoryId("对话 " + userId).build()) {
            ltm.record(List.of(user("我最喜欢的城市是京都。"))).block(Duration.ofSeconds(120));
            ScriptedModel model = new ScriptedModel(List.of(
                    List.<ContentBlock>of(TextBlock.builder().text("你最喜欢京都。").build())));
            ReActAgent agent = ReActAgent.builder().name("助手").sysPrompt("你记得用户的事情。")
                    .model(model).toolkit(new Toolkit()).memory(memory).maxIters(3)
                    .longTermMemory(ltm).longTermMemoryMode(LongTermMemoryMode.STATIC_CONTROL).build();
            agent.call(user("我最喜欢哪个城市？")).block(Duration.ofSeconds(180));
            List<Msg> stored = memory.getMessages();
            assertTrue(stored.stream().anyMatch(m -> m.getTextContent().contains("京都")
                    && m.getTextContent().contains("<long_term_memory>")), stored.toString());
            String found = ltm.retrieve(user("我最喜欢哪个城市？")).block(Duration.ofSeconds(120));
            assertTrue(found.contains("城市"), found);
        }
    }
}
