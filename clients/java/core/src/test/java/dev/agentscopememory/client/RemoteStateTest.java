package dev.agentscopememory.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.internal.WireEnums;
import dev.agentscopememory.grpc.v1.CreateMemoryRequest;
import dev.agentscopememory.grpc.v1.GetMessagesRequest;
import dev.agentscopememory.grpc.v1.GetMessagesResponse;
import dev.agentscopememory.grpc.v1.JsonList;
import dev.agentscopememory.grpc.v1.StateEntry;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/** State entries cut into pieces under a byte budget (as StreamLoadState sends them) and joined back. */
class RemoteStateTest {

    static List<StateEntry> entries() {
        String text = "中文😀é".repeat(3000) + "end"; // 3-, 4- and 2-byte characters
        JsonList.Builder working = JsonList.newBuilder();
        for (int i = 0; i < 50; i++) {
            working.addItems("\"" + i + " 消息\"");
        }
        working.addItems("\"" + text + "\"").addItems("\"after\"");
        return List.of(
                StateEntry.newBuilder().setKey("autoContextMemory_workingMessages").setList(working).build(),
                StateEntry.newBuilder().setKey("autoContextMemory_originalMessages").setList(JsonList.newBuilder()).build(),
                StateEntry.newBuilder().setKey("autoContextMemory_offloadContext").setJson("{\"u\":\"" + text + text + "\"}").build());
    }

    @Test
    void piecesFitTheBudgetAndJoinToTheSameEntries() {
        List<List<StateEntry>> chunks = RemoteState.split(entries(), 4096);
        assertTrue(chunks.size() > 10, "cut into " + chunks.size());
        List<StateEntry> all = new ArrayList<>();
        for (List<StateEntry> chunk : chunks) {
            int size = chunk.stream().mapToInt(StateEntry::getSerializedSize).sum();
            assertTrue(size <= 4096 + 256, "a piece of " + size + " bytes");
            all.addAll(chunk);
        }
        assertEquals(entries(), RemoteState.join(all));
    }

    /** Half a surrogate pair would reach the server as '?': the load is refused before anything is sent. */
    @Test
    void anEntryHoldingALoneSurrogateIsRefusedNamingIt() {
        List<StateEntry> entries = List.of(
                StateEntry.newBuilder().setKey("memory_messages").setList(JsonList.newBuilder()
                        .addItems("{\"text\":\"好\"}").addItems("{\"text\":\"好\ud83d\"}")).build());
        // Never dialled: the check comes first.
        try (RemoteConnection nowhere = RemoteConnection.builder().target("127.0.0.1:1").maxAttempts(1).build()) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> RemoteState.load(nowhere, "m", entries, null));
            assertEquals("memory_messages[1]: contains a lone surrogate at character 10 of its JSON; "
                    + "it is not Unicode text and cannot be stored", e.getMessage());
            List<StateEntry> single = List.of(StateEntry.newBuilder().setKey("k").setJson("\"\udc00\"").build());
            e = assertThrows(IllegalArgumentException.class, () -> RemoteState.load(nowhere, "m", single, null));
            assertTrue(e.getMessage().startsWith("k: contains a lone surrogate at character 1 "), e.getMessage());
        }
    }

    /**
     * A load answers the etags of the memory's messages just before and after it, as GetMessages
     * names them, so a caller keeps what it loaded as its copy: a read naming the load's etag is
     * answered "not modified".
     */
    @Test
    void aLoadAnswersTheEtagsOfTheMessagesBeforeAndAfterIt() throws Exception {
        String memoryId = "状态-" + UUID.randomUUID();
        try (RemoteConnection connection = RemoteConnection.builder().target(TestServer.shared().target()).build()) {
            CreateMemoryRequest create = CreateMemoryRequest.newBuilder()
                    .setMemoryId(memoryId).setKind(WireEnums.toProto(MemoryKind.IN_MEMORY)).build();
            connection.call("MemoryService/CreateMemory", false, () -> connection.memoryService().createMemory(create));
            String empty = read(connection, memoryId, "").getEtag();
            List<StateEntry> entries = List.of(StateEntry.newBuilder().setKey("memory_messages").setList(JsonList.newBuilder()
                    .addItems("{\"id\":\"m-1\",\"role\":\"USER\",\"content\":[{\"type\":\"text\",\"text\":\"你好\"}]}"))
                    .build());

            RemoteState.Loaded loaded = RemoteState.loadWithEtags(connection, memoryId, entries, null);
            assertEquals(empty, loaded.previousEtag());
            assertNotEquals(empty, loaded.etag());
            GetMessagesResponse after = read(connection, memoryId, loaded.etag());
            assertTrue(after.getNotModified(), "the load's etag names the messages it left");
            // Its version is the memory's: a load expecting it goes through.
            assertTrue(RemoteState.load(connection, memoryId, entries, loaded.version()) > loaded.version());
        }
    }

    private static GetMessagesResponse read(RemoteConnection connection, String memoryId, String ifNoneMatch) {
        GetMessagesRequest request = GetMessagesRequest.newBuilder().setMemoryId(memoryId).setIfNoneMatch(ifNoneMatch).build();
        return connection.call("MemoryService/GetMessages", true, () -> connection.memoryService().getMessages(request));
    }

    @Test
    void aStreamEndingInsideAnEntryIsRefused() {
        StateEntry cut = StateEntry.newBuilder().setKey("a").setJson("{").setPartial(true).build();
        assertThrows(IllegalStateException.class, () -> RemoteState.join(List.of(cut)));
    }
}
