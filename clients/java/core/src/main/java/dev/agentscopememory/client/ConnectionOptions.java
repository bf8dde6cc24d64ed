package dev.agentscopememory.client;

import io.grpc.Channel;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Objects;

/**
 * The connection options every client builder offers: share an existing {@link RemoteConnection},
 * or give the options of one the client opens itself (and closes when it is closed). The builders
 * of the remote memories, the long-term memory, the agent-state store and the shared memory pool
 * extend it, so each option is written, documented and checked once.
 *
 * <pre>{@code
 * RemoteMemory memory = RemoteMemory.builder().target("127.0.0.1:50051").apiKey(key)
 *         .deadline(Duration.ofSeconds(10)).memoryId("会话-42").build();
 * }</pre>
 *
 * @param <B> the concrete builder, returned by every option for chaining
 */
@SuppressWarnings("unchecked")
public abstract class ConnectionOptions<B extends ConnectionOptions<B>> {
    private RemoteConnection shared;
    private final RemoteConnection.Builder options = RemoteConnection.builder();
    private boolean optionsUsed;

    protected ConnectionOptions() {}

    /** Share an existing connection (its deadline, API key and retries apply; the caller keeps ownership). */
    public B connection(RemoteConnection connection) {
        this.shared = Objects.requireNonNull(connection, "connection must not be null");
        return (B) this;
    }

    /** Talk over this channel (the caller keeps ownership of the channel). */
    public B channel(Channel channel) {
        options.channel(channel);
        optionsUsed = true;
        return (B) this;
    }

    /** Connect to this gRPC target, e.g. {@code 127.0.0.1:50051}; closed with the client. */
    public B target(String target) {
        options.target(target);
        optionsUsed = true;
        return (B) this;
    }

    /** Plaintext (default) or TLS for a channel created from a target. */
    public B plaintext(boolean plaintext) {
        options.plaintext(plaintext);
        optionsUsed = true;
        return (B) this;
    }

    /** Use TLS, trusting the certificates in this PEM file (e.g. the server's own). */
    public B trustedCertificates(Path pemFile) {
        options.trustedCertificates(pemFile);
        optionsUsed = true;
        return (B) this;
    }

    /** The deadline of each call (default 30 s); a safe call is retried within it. */
    public B deadline(Duration deadline) {
        options.deadline(deadline);
        optionsUsed = true;
        return (B) this;
    }

    /** The API key sent with every call. */
    public B apiKey(String apiKey) {
        options.apiKey(apiKey);
        optionsUsed = true;
        return (B) this;
    }

    /** At most this many attempts for a safe call refused with UNAVAILABLE (default: until the deadline). */
    public B maxAttempts(int maxAttempts) {
        options.maxAttempts(maxAttempts);
        optionsUsed = true;
        return (B) this;
    }

    /** The first retry's wait, doubling afterwards up to 500 ms (default 50 ms). */
    public B retryBackoff(Duration backoff) {
        options.retryBackoff(backoff);
        optionsUsed = true;
        return (B) this;
    }

    /** Whether {@link #connection} was given (the client then must not close it). */
    public boolean sharesConnection() {
        return shared != null;
    }

    /**
     * The shared connection, or a new one from the options, owned by the caller (what a client
     * built from these options talks through).
     *
     * @throws IllegalArgumentException when both a connection and connection options are given,
     *     or the options name neither a channel nor a target
     */
    public RemoteConnection connectionOrOpen() {
        if (shared != null) {
            if (optionsUsed) {
                throw new IllegalArgumentException("give either connection(...) or channel/target options, not both");
            }
            return shared;
        }
        return options.build();
    }
}
