package dev.agentscopememory.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The connection options every client builder shares. */
class ConnectionOptionsTest {

    /** The smallest builder: what a client's builder adds on top of the options. */
    static final class Options extends ConnectionOptions<Options> {}

    @Test
    void aSharedConnectionIsUsedAsIsAndNotOwned() throws Exception {
        try (RemoteConnection shared = RemoteConnection.builder().target(TestServer.shared().target()).build()) {
            Options options = new Options().connection(shared);
            assertTrue(options.sharesConnection());
            assertSame(shared, options.connectionOrOpen());
        }
    }

    @Test
    void optionsOpenAConnectionWithThem() throws Exception {
        Options options = new Options().target(TestServer.shared().target()).deadline(Duration.ofSeconds(7))
                .maxAttempts(3).retryBackoff(Duration.ofMillis(10));
        assertFalse(options.sharesConnection());
        try (RemoteConnection opened = options.connectionOrOpen()) {
            assertEquals(Duration.ofSeconds(7), opened.deadline());
        }
    }

    @Test
    void bothASharedConnectionAndOptionsIsRefused() throws Exception {
        try (RemoteConnection shared = RemoteConnection.builder().target(TestServer.shared().target()).build()) {
            Options options = new Options().connection(shared).apiKey("k-0123456789abcdef");
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, options::connectionOrOpen);
            assertTrue(e.getMessage().contains("not both"), e.getMessage());
        }
    }
}
