package dev.agentscopememory.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.grpc.v1.JsonList;
import dev.agentscopememory.grpc.v1.StateEntry;
import java.util.ArrayList;
import java.util.List;
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

    @Test
    void aStreamEndingInsideAnEntryIsRefused() {
        StateEntry cut = StateEntry.newBuilder().setKey("a").setJson("{").setPartial(true).build();
        assertThrows(IllegalStateException.class, () -> RemoteState.join(List.of(cut)));
    }
}
