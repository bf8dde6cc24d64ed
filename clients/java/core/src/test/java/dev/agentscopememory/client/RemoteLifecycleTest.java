package dev.agentscopememory.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.grpc.v1.ContentBlock;
import dev.agentscopememory.grpc.v1.GetLongTermMemoryRequest;
import dev.agentscopememory.grpc.v1.GetLongTermMemoryHistoryRequest;
import dev.agentscopememory.grpc.v1.GetLongTermMemoryHistoryResponse;
import dev.agentscopememory.grpc.v1.ListLongTermMemoriesRequest;
import dev.agentscopememory.grpc.v1.Msg;
import dev.agentscopememory.grpc.v1.RecordRequest;
import dev.agentscopememory.grpc.v1.Role;
import dev.agentscopememory.grpc.v1.Scope;
import dev.agentscopememory.grpc.v1.TextBlock;
import dev.agentscopememory.grpc.v1.UpdateLongTermMemoryRequest;
import io.grpc.Status;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@link RemoteLifecycle} against the real server: reflection on demand with overrides, a
 * consolidation dry run, bad input, forgetting, and a history larger than 4 MiB read page by page.
 */
class RemoteLifecycleTest {

    private static Msg user(String text) {
        return Msg.newBuilder().setRole(Role.ROLE_USER)
                .addContent(ContentBlock.newBuilder().setText(TextBlock.newBuilder().setText(text))).build();
    }

    private static long facts(RemoteConnection connection, Scope scope) {
        return connection.longTermMemoryService()
                .listLongTermMemories(ListLongTermMemoriesRequest.newBuilder().setScope(scope).setPageSize(100).build())
                .getMemoriesList().stream().filter(m -> m.getMemoryType().equals("fact")).count();
    }

    @Test
    void triggerReflectionWithOverridesThenConsolidateDryRun() throws Exception {
        try (TestServer server = TestServer.start(java.util.Map.of("AGENTSCOPE_MEMORY_LIFECYCLE_REFLECTION_ENABLED", "false"));
             RemoteConnection connection = RemoteConnection.builder().target(server.target())
                     .deadline(java.time.Duration.ofSeconds(120)).build()) {
            Scope scope = RemoteLifecycle.scope("助手", "java-user", "");
            for (String text : List.of("Remember that I am allergic to peanuts. Thanks!",
                    "请记住，我的生日是五月三日。谢谢！")) {
                connection.longTermMemoryService().record(RecordRequest.newBuilder().setScope(scope).addMessages(user(text)).build());
            }
            long deadline = System.nanoTime() + 120_000_000_000L;
            while (facts(connection, scope) < 2) {
                assertTrue(System.nanoTime() < deadline, "the facts were not scored");
                Thread.sleep(100);
            }
            RemoteLifecycle lifecycle = new RemoteLifecycle(connection);
            RemoteLifecycle.Reflection notYet = lifecycle.triggerReflection(scope, null);
            assertFalse(notYet.reflected());
            assertEquals("importance below threshold", notYet.reason());
            RemoteLifecycle.Reflection done = lifecycle.triggerReflection(scope,
                    new RemoteLifecycle.ReflectionOptions().importanceThreshold(1.0).cooldownSeconds(0));
            assertTrue(done.reflected());
            assertEquals("extractive", done.method());
            assertEquals(2, done.factIds().size());
            assertTrue(done.reflectionText().contains("花生") || done.reflectionText().contains("peanuts"));
            assertEquals(0, facts(connection, scope));

            RemoteLifecycle.Consolidation dry = lifecycle.consolidate(scope, true, 0);
            assertTrue(dry.dryRun());
            assertEquals(0, dry.factsBefore());

            RemoteMemoryException bad = assertThrows(RemoteMemoryException.class, () -> lifecycle.triggerReflection(scope,
                    new RemoteLifecycle.ReflectionOptions().minFacts(0)));
            assertEquals(Status.Code.INVALID_ARGUMENT, bad.getCode());
            assertTrue(bad.getMessage().contains("min_facts"), bad.getMessage());
        }
    }

    @Test
    void forgetDryRunThenForgetRestoreAndPurge() throws Exception {
        try (TestServer server = TestServer.start();
             RemoteConnection connection = RemoteConnection.builder().target(server.target())
                     .deadline(java.time.Duration.ofSeconds(60)).build()) {
            Scope scope = RemoteLifecycle.scope("助手", "java-forget", "");
            for (String text : List.of("The user parks on level 3.", "用户把车停在三层。")) {
                connection.longTermMemoryService().record(RecordRequest.newBuilder().setScope(scope).addMessages(user(text)).build());
            }
            RemoteLifecycle lifecycle = new RemoteLifecycle(connection);
            // Fresh memories keep at least half their retention: only a high threshold takes them.
            assertEquals(0, lifecycle.forget(scope, false, null).forgottenCount());
            RemoteLifecycle.Forgetting dry = lifecycle.forget(scope, true, 0.99);
            assertTrue(dry.dryRun());
            assertEquals(2, dry.forgottenCount());
            assertTrue(dry.forgotten().stream().allMatch(f -> f.retention() >= 0.5 && f.retention() < 0.99));
            assertEquals(2, connection.longTermMemoryService().listLongTermMemories(ListLongTermMemoriesRequest
                    .newBuilder().setScope(scope).build()).getMemoriesCount());

            RemoteLifecycle.Forgetting done = lifecycle.forget(scope, false, 0.99);
            assertEquals(2, done.forgottenCount());
            String chinese = done.forgotten().stream().filter(f -> f.text().contains("三层")).findFirst().orElseThrow().id();
            assertEquals("用户把车停在三层。", lifecycle.restore(chinese));
            String english = done.forgotten().stream().filter(f -> f.text().contains("level 3")).findFirst().orElseThrow().id();
            assertEquals(List.of(english), lifecycle.purge(List.of(english, chinese)));
            RemoteMemoryException gone = assertThrows(RemoteMemoryException.class, () -> lifecycle.restore(english));
            assertEquals(Status.Code.NOT_FOUND, gone.getCode());
            List<String> events = lifecycle.history(english).stream().map(RemoteLifecycle.HistoryEntry::event).toList();
            // (the background scorer may have added an ASSESS in between)
            assertEquals("ADD", events.get(0));
            assertEquals(List.of("FORGET", "PURGE"), events.subList(events.size() - 2, events.size()));
            assertTrue(lifecycle.history(english).get(events.size() - 2).detailJson().contains("retention"));
        }
    }

    @Test
    void aPinnedMemoryIsNeverForgottenUntilUnpinned() throws Exception {
        try (TestServer server = TestServer.start(java.util.Map.of("AGENTSCOPE_MEMORY_LONG_TERM_SCORING", "false"));
             RemoteConnection connection = RemoteConnection.builder().target(server.target())
                     .deadline(java.time.Duration.ofSeconds(60)).build()) {
            Scope scope = RemoteLifecycle.scope("助手", "java-pin", "");
            String pinned = connection.longTermMemoryService().record(RecordRequest.newBuilder().setScope(scope)
                    .setPinned(true).addMessages(user("我对花生过敏，请永远记住。")).build()).getMemories(0).getId();
            String plain = connection.longTermMemoryService().record(RecordRequest.newBuilder().setScope(scope)
                    .addMessages(user("今天天气不错。")).build()).getMemories(0).getId();
            assertTrue(connection.longTermMemoryService().getLongTermMemory(GetLongTermMemoryRequest.newBuilder()
                    .setId(pinned).build()).getMemory().getPinned());
            RemoteLifecycle lifecycle = new RemoteLifecycle(connection);
            // A threshold of 1 forgets every memory that has faded at all: all but the pinned one.
            RemoteLifecycle.Forgetting wouldGo = lifecycle.forget(scope, true, 1.0);
            assertEquals(List.of(plain), wouldGo.forgotten().stream().map(RemoteLifecycle.ForgottenMemory::id).toList());
            assertFalse(lifecycle.setPinned(pinned, false));
            assertTrue(lifecycle.forget(scope, true, 1.0).forgotten().stream().anyMatch(f -> f.id().equals(pinned)));
            assertTrue(lifecycle.setPinned(pinned, true));
            List<RemoteLifecycle.HistoryEntry> history = lifecycle.history(pinned);
            assertEquals(List.of("ADD", "UPDATE", "UPDATE"), history.stream().map(RemoteLifecycle.HistoryEntry::event).toList());
            assertTrue(history.get(1).detailJson().contains("\"pinned\":{\"old\":true,\"new\":false}"),
                    history.get(1).detailJson());
        }
    }

    @Test
    void historyLargerThanFourMibIsReadPageByPage() throws Exception {
        // No background scoring: its ASSESS entries would make the history grow while it is read.
        try (TestServer server = TestServer.start(java.util.Map.of("AGENTSCOPE_MEMORY_LONG_TERM_SCORING", "false"));
             RemoteConnection connection = RemoteConnection.builder().target(server.target())
                     .deadline(java.time.Duration.ofSeconds(60)).build()) {
            Scope scope = RemoteLifecycle.scope("助手", "java-history", "");
            String id = connection.longTermMemoryService().record(RecordRequest.newBuilder().setScope(scope)
                    .addMessages(user("用户喜欢喝绿茶")).build()).getMemories(0).getId();
            int updates = 45;
            for (int i = 0; i < updates; i++) {
                // Each UPDATE entry holds the old and the new metadata: about 120 KB, 5.4 MB in all.
                String blob = String.format("%03d", i) + "m".repeat(60_000);
                connection.longTermMemoryService().updateLongTermMemory(UpdateLongTermMemoryRequest.newBuilder()
                        .setId(id).setMetadataJson("{\"blob\": \"" + blob + "\"}").build());
            }
            // One page does not hold it (and fits the channel's stock 4 MiB limit) ...
            GetLongTermMemoryHistoryResponse first = connection.longTermMemoryService()
                    .getLongTermMemoryHistory(GetLongTermMemoryHistoryRequest.newBuilder().setId(id).build());
            assertFalse(first.getNextPageToken().isEmpty());
            assertTrue(first.getEntriesCount() < updates + 1);
            // ... the client follows the pages.
            List<RemoteLifecycle.HistoryEntry> history = new RemoteLifecycle(connection).history(id);
            assertEquals(updates + 1, history.size());
            assertEquals("ADD", history.get(0).event());
            assertEquals("用户喜欢喝绿茶", history.get(0).newText());
            for (int i = 0; i < updates; i++) {
                assertEquals("UPDATE", history.get(i + 1).event());
                assertTrue(history.get(i + 1).detailJson().contains(String.format("\"%03dmmm", i)), "entry " + (i + 1));
            }
            // A page size over the maximum is served as the maximum (AIP-158); a negative one is named.
            assertFalse(connection.longTermMemoryService().getLongTermMemoryHistory(GetLongTermMemoryHistoryRequest
                    .newBuilder().setId(id).setPageSize(1001).build()).getEntriesList().isEmpty());
            RemoteMemoryException bad = assertThrows(RemoteMemoryException.class, () -> connection.call(
                    "LongTermMemoryService/GetLongTermMemoryHistory", true, () -> connection.longTermMemoryService()
                            .getLongTermMemoryHistory(GetLongTermMemoryHistoryRequest.newBuilder().setId(id)
                                    .setPageSize(-1).build())));
            assertEquals(Status.Code.INVALID_ARGUMENT, bad.getCode());
            assertTrue(bad.getMessage().contains("page_size"), bad.getMessage());
        }
    }
}
