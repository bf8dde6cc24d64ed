package dev.agentscopememory.agentscope2;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.TestServer;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.message.ToolUseBlock;
import io.agentscope.core.state.AgentState;
import io.agentscope.core.state.JsonFileAgentStateStore;
import io.agentscope.core.util.JsonUtils;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code agentscope-memory agent-state export|import} against 2.0.0's own JsonFileAgentStateStore:
 * files the real store wrote import into the server unchanged, and an export is byte for byte the
 * files the real store writes for the same state (the {@code .hash} of a non-empty list aside: it
 * is Java's identity hash, see json_files.py).
 */
class JsonFileLayoutTest {

    private static TestServer server;

    @TempDir
    Path dir;

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.start();
    }

    @AfterAll
    static void stop() {
        server.close();
    }

    static AgentState state(String userId, String sessionId) {
        AgentState state = AgentState.fromJsonString(JsonUtils.getJsonCodec().toJson(AgentState.builder().build()));
        state.contextMutable().add(Msg.builder().id("m1").name("user").role(MsgRole.USER)
                .content(TextBlock.builder().text("北京天气如何? \"quotes\"\n\ttabs ✓").build())
                .metadata(Map.of("turn", 1, "ratio", 0.25, "tags", List.of("a", "b"), "empty", Map.of()))
                .timestamp("2026-11-23 10:00:00.000").build());
        state.contextMutable().add(Msg.builder().id("resp-0").name("Assistant").role(MsgRole.ASSISTANT)
                .content(List.of(TextBlock.builder().text("Let me check.").build(),
                        new ToolUseBlock("call_1", "get_weather", Map.of("city", "北京"), "{\"city\":\"北京\"}", Map.of())))
                .timestamp("2026-11-23 10:00:01.000").build());
        state.setSummary("之前: a summary");
        return state;
    }

    static List<Msg> messages() {
        List<Msg> out = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            out.add(Msg.builder().id("m" + i).name("user").role(MsgRole.USER)
                    .content(TextBlock.builder().text("消息 " + i).build()).timestamp("2026-11-23 10:00:0" + i + ".000").build());
        }
        return out;
    }

    static void cli(String action, Path root, String userId, String sessionId) throws Exception {
        Path exe = TestServer.repo().resolve(".venv/bin/agentscope-memory");
        List<String> cmd = new ArrayList<>(List.of(exe.toString(), "agent-state", action, "--target", server.target(),
                "--dir", root.toString(), "--session-id", sessionId));
        if (userId != null) {
            cmd.addAll(List.of("--user-id", userId));
        }
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), out);
    }

    static String json(Object value) {
        return JsonUtils.getJsonCodec().toJson(value);
    }

    @Test
    void filesWrittenByJsonFileAgentStateStoreImportUnchanged() throws Exception {
        Path root = dir.resolve("java");
        JsonFileAgentStateStore files = new JsonFileAgentStateStore(root);
        String[][] slots = {{"爱丽丝", "s 2/x"}, {null, "plain-1.a"}};
        for (String[] slot : slots) {
            files.save(slot[0], slot[1], "agent_state", state(slot[0], slot[1]));
            files.save(slot[0], slot[1], "memory_messages", messages());
            files.save(slot[0], slot[1], "nothing", List.<Msg>of());
            // Keys are file names as they are: Chinese, spaces, a leading dot.
            files.save(slot[0], slot[1], ".偏好 设置", state(slot[0], slot[1]));
            // The empty key is files named `.json`, `.jsonl`, `.hash`.
            files.save(slot[0], slot[1], "", state(slot[0], slot[1]));
            files.save(slot[0], slot[1], "", messages());
            cli("import", root, slot[0], slot[1]);
        }
        try (RemoteAgentStateStore remote = RemoteAgentStateStore.builder().target(server.target()).build()) {
            for (String[] slot : slots) {
                assertEquals(json(files.get(slot[0], slot[1], "agent_state", AgentState.class).orElseThrow()),
                        json(remote.get(slot[0], slot[1], "agent_state", AgentState.class).orElseThrow()));
                assertEquals(json(files.getList(slot[0], slot[1], "memory_messages", Msg.class)),
                        json(remote.getList(slot[0], slot[1], "memory_messages", Msg.class)));
                assertEquals(List.of(), remote.getList(slot[0], slot[1], "nothing", Msg.class));
                assertEquals(json(files.get(slot[0], slot[1], ".偏好 设置", AgentState.class).orElseThrow()),
                        json(remote.get(slot[0], slot[1], ".偏好 设置", AgentState.class).orElseThrow()));
                assertEquals(json(files.get(slot[0], slot[1], "", AgentState.class).orElseThrow()),
                        json(remote.get(slot[0], slot[1], "", AgentState.class).orElseThrow()));
                assertEquals(json(files.getList(slot[0], slot[1], "", Msg.class)),
                        json(remote.getList(slot[0], slot[1], "", Msg.class)));
                assertTrue(remote.exists(slot[0], slot[1]));
            }
            assertEquals(java.util.Set.of("s 2/x"), remote.listSessionIds("爱丽丝"));
        }
    }

    @Test
    void anExportIsByteForByteWhatJsonFileAgentStateStoreWrites() throws Exception {
        String user = "bob/ü";
        String session = "会话 1";
        Path exported = dir.resolve("exported");
        Path reference = dir.resolve("reference");
        AgentState state = state(user, session);
        try (RemoteAgentStateStore remote = RemoteAgentStateStore.builder().target(server.target()).build()) {
            remote.save(user, session, "agent_state", state);
            remote.save(user, session, "memory_messages", messages());
            remote.save(user, session, "nothing", List.<Msg>of());
            remote.save(user, session, "偏好 设置", state);
            remote.save(user, session, "消息", messages().subList(0, 1));
            remote.save(user, session, "", state);
        }
        cli("export", exported, user, session);
        JsonFileAgentStateStore files = new JsonFileAgentStateStore(reference);
        files.save(user, session, "agent_state", state);
        files.save(user, session, "memory_messages", messages());
        files.save(user, session, "nothing", List.<Msg>of());
        files.save(user, session, "偏好 设置", state);
        files.save(user, session, "消息", messages().subList(0, 1));
        files.save(user, session, "", state);

        List<Path> want = listing(reference);
        assertEquals(want, listing(exported), "the same files in the same directories");
        for (Path file : want) {
            String name = file.getFileName().toString();
            if (name.endsWith(".hash") && !name.equals("nothing.hash")) {
                continue; // Java's identity hash of a non-empty list's objects
            }
            assertArrayEquals(Files.readAllBytes(reference.resolve(file)), Files.readAllBytes(exported.resolve(file)), file.toString());
        }
        assertFalse(Files.exists(exported.resolve(want.get(0).getParent()).resolve("nothing.jsonl")));
        // With the same permissions (the export's files were 0600, Java's 0644 under umask 022).
        assertEquals(permissions(reference), permissions(exported));
        // The real store reads the export, and saving over it works (it rewrites the list).
        JsonFileAgentStateStore reopened = new JsonFileAgentStateStore(exported);
        assertEquals(json(state), json(reopened.get(user, session, "agent_state", AgentState.class).orElseThrow()));
        List<Msg> more = new ArrayList<>(messages());
        more.add(Msg.builder().id("m9").name("user").role(MsgRole.USER).textContent("再来").timestamp("2026-11-23 10:00:09.000").build());
        reopened.save(user, session, "memory_messages", more);
        assertEquals(json(more), json(reopened.getList(user, session, "memory_messages", Msg.class)));
    }

    /** Every file's and directory's POSIX permissions under {@code root}, by relative path. */
    static Map<String, String> permissions(Path root) throws Exception {
        Map<String, String> out = new java.util.TreeMap<>();
        try (Stream<Path> paths = Files.walk(root)) {
            for (Path p : (Iterable<Path>) paths.filter(p -> !p.equals(root))::iterator) {
                out.put(root.relativize(p).toString(),
                        java.nio.file.attribute.PosixFilePermissions.toString(Files.getPosixFilePermissions(p)));
            }
        }
        return out;
    }

    static List<Path> listing(Path root) throws Exception {
        try (Stream<Path> paths = Files.walk(root)) {
            return paths.filter(Files::isRegularFile).map(root::relativize).sorted().toList();
        }
    }
}
