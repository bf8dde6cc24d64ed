package dev.agentscopememory.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** A paged read restarts from the first page when the server aborts it, a bounded number of times. */
class PagedReadTest {

    static RemoteMemoryException.Aborted changed() {
        return new RemoteMemoryException.Aborted("MemoryService/GetOriginalMessages",
                "memory 'm' changed (version 3 -> 4) between pages; read it again from the first page", null);
    }

    @Test
    void anAbortedReadStartsAgainAndReturnsOneState() {
        AtomicInteger firstPages = new AtomicInteger();
        List<String> all = PagedRead.readAll(token -> {
            if (token.isEmpty()) {
                int attempt = firstPages.incrementAndGet();
                return new PagedRead.Page<>(List.of("state" + attempt + "-a"), "next");
            }
            if (firstPages.get() < 3) {
                throw changed(); // the memory changed after the first page, twice
            }
            return new PagedRead.Page<>(List.of("state3-b"), "");
        });
        assertEquals(List.of("state3-a", "state3-b"), all);
        assertEquals(3, firstPages.get());
    }

    @Test
    void aReadThatIsAlwaysTornThrowsInsteadOfMixingStates() {
        AtomicInteger firstPages = new AtomicInteger();
        RemoteMemoryException.Aborted e = assertThrows(RemoteMemoryException.Aborted.class, () -> PagedRead.readAll(token -> {
            if (token.isEmpty()) {
                firstPages.incrementAndGet();
                return new PagedRead.Page<>(List.of("a"), "next");
            }
            throw changed();
        }));
        assertEquals(PagedRead.CONSISTENT_READ_ATTEMPTS, firstPages.get());
        assertEquals(io.grpc.Status.Code.ABORTED, e.getCode());
    }
}
