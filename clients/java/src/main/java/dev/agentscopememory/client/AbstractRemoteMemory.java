package dev.agentscopememory.client;

import dev.agentscopememory.grpc.v1.AddMessagesRequest;
import dev.agentscopememory.grpc.v1.AutoContextConfig;
import dev.agentscopememory.grpc.v1.ClearMessagesRequest;
import dev.agentscopememory.grpc.v1.CreateMemoryRequest;
import dev.agentscopememory.grpc.v1.DeleteMessageRequest;
import dev.agentscopememory.grpc.v1.GetMemoryRequest;
import dev.agentscopememory.grpc.v1.GetMessagesRequest;
import dev.agentscopememory.grpc.v1.GetMessagesResponse;
import dev.agentscopememory.grpc.v1.MemoryKind;
import io.agentscope.core.memory.Memory;
import io.agentscope.core.message.Msg;
import io.grpc.Channel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;

/**
 * What the remote memories share: a memory on an agentscope-memory server addressed by its id,
 * created on first use, with AgentScope's {@link Memory} operations over gRPC ({@code
 * InMemoryMemory}'s contract: fresh mutable lists in insertion order, out-of-range deletes are
 * no-ops, adds carry a request id so retries store nothing twice).
 */
public abstract class AbstractRemoteMemory implements Memory, AutoCloseable {

    /** Messages per AddMessages call when adding many (below the server's default limit). */
    static final int ADD_BATCH_MESSAGES = 500;

    /** Serialised bytes per AddMessages call when adding many (well below the 32 MiB default). */
    static final long ADD_BATCH_BYTES = 8L * 1024 * 1024;

    protected final RemoteConnection connection;
    protected final String memoryId;
    private final boolean ownsConnection;
    private final boolean createIfMissing;
    private final Map<String, String> labels;
    private final int pageSize;
    private final MemoryKind kind;
    private final AutoContextConfig autoContextConfig;
    private volatile boolean ensured;

    protected AbstractRemoteMemory(AbstractBuilder<?> b, MemoryKind kind, AutoContextConfig config) {
        if (b.memoryId == null || b.memoryId.isEmpty()) {
            throw new IllegalArgumentException("memoryId: is required");
        }
        this.memoryId = b.memoryId;
        if (b.connection != null) {
            if (b.connectionOptionsUsed) {
                throw new IllegalArgumentException(
                        "give either connection(...) or channel/target options, not both");
            }
            this.connection = b.connection;
            this.ownsConnection = false;
        } else {
            this.connection = b.connectionBuilder.build();
            this.ownsConnection = true;
        }
        this.createIfMissing = b.createIfMissing;
        this.labels = Map.copyOf(b.labels);
        this.pageSize = b.pageSize;
        this.kind = kind;
        this.autoContextConfig = config;
    }

    /** The id of the memory on the server. */
    public String getMemoryId() {
        return memoryId;
    }

    /** The connection this memory talks through. */
    public RemoteConnection getConnection() {
        return connection;
    }

    // ---------------------------------------------------------------- Memory

    /** Appends a message. A {@code null} message is ignored (the wire has no null message). */
    @Override
    public void addMessage(Msg message) {
        if (message == null) {
            return;
        }
        addMessages(List.of(message));
    }

    /**
     * Appends messages in order, in as few calls as the server's batch limits allow; each batch is
     * all-or-nothing and safe to retry.
     */
    public void addMessages(List<Msg> messages) {
        List<dev.agentscopememory.grpc.v1.Msg> batch = new ArrayList<>();
        long batchBytes = 0;
        for (Msg m : messages) {
            if (m == null) {
                continue;
            }
            dev.agentscopememory.grpc.v1.Msg p = MsgConverter.toProto(m);
            int size = p.getSerializedSize();
            if (!batch.isEmpty()
                    && (batch.size() >= ADD_BATCH_MESSAGES || batchBytes + size > ADD_BATCH_BYTES)) {
                sendBatch(batch);
                batch = new ArrayList<>();
                batchBytes = 0;
            }
            batch.add(p);
            batchBytes += size;
        }
        if (!batch.isEmpty()) {
            sendBatch(batch);
        }
    }

    private void sendBatch(List<dev.agentscopememory.grpc.v1.Msg> batch) {
        ensureMemory();
        AddMessagesRequest request = AddMessagesRequest.newBuilder()
                .setMemoryId(memoryId)
                .addAllMessages(batch)
                .setRequestId(UUID.randomUUID().toString())
                .build();
        connection.call("MemoryService/AddMessages", true,
                () -> connection.memory().addMessages(request));
    }

    /** All messages in insertion order, as a new mutable list. */
    @Override
    public List<Msg> getMessages() {
        ensureMemory();
        List<Msg> out = new ArrayList<>();
        String token = "";
        do {
            GetMessagesRequest request = GetMessagesRequest.newBuilder()
                    .setMemoryId(memoryId)
                    .setPageSize(pageSize)
                    .setPageToken(token)
                    .build();
            GetMessagesResponse page = connection.call("MemoryService/GetMessages", true,
                    () -> connection.memory().getMessages(request));
            for (dev.agentscopememory.grpc.v1.Msg m : page.getMessagesList()) {
                out.add(MsgConverter.fromProto(m));
            }
            token = page.getNextPageToken();
        } while (!token.isEmpty());
        return out;
    }

    /** Deletes the message at {@code index}; an index out of range (negative too) does nothing. */
    @Override
    public void deleteMessage(int index) {
        if (index < 0) {
            return;
        }
        ensureMemory();
        DeleteMessageRequest request =
                DeleteMessageRequest.newBuilder().setMemoryId(memoryId).setIndex(index).build();
        // Not retried: deleting "the message at i" twice would delete two messages.
        connection.call("MemoryService/DeleteMessage", false,
                () -> connection.memory().deleteMessage(request));
    }

    @Override
    public void clear() {
        ensureMemory();
        ClearMessagesRequest request = ClearMessagesRequest.newBuilder().setMemoryId(memoryId).build();
        connection.call("MemoryService/ClearMessages", true,
                () -> connection.memory().clearMessages(request));
    }

    /** How many messages {@link #getMessages()} would return, without transferring them. */
    public long messageCount() {
        ensureMemory();
        GetMemoryRequest request = GetMemoryRequest.newBuilder().setMemoryId(memoryId).build();
        return connection.call("MemoryService/GetMemory", true,
                () -> connection.memory().getMemory(request)).getMemory().getMessageCount();
    }

    // ---------------------------------------------------------------- lifecycle

    /** Creates the memory on first use when {@code createIfMissing} (the default). */
    protected void ensureMemory() {
        if (ensured || !createIfMissing) {
            return;
        }
        synchronized (this) {
            if (ensured) {
                return;
            }
            CreateMemoryRequest.Builder request = CreateMemoryRequest.newBuilder()
                    .setMemoryId(memoryId)
                    .setKind(kind)
                    .putAllLabels(labels)
                    .setAllowExisting(true);
            if (autoContextConfig != null) {
                request.setAutoContextConfig(autoContextConfig);
            }
            CreateMemoryRequest built = request.build();
            connection.call("MemoryService/CreateMemory", true,
                    () -> connection.memory().createMemory(built));
            ensured = true;
        }
    }

    /** Closes the connection if this memory created it. The stored messages are kept. */
    @Override
    public void close() {
        if (ownsConnection) {
            connection.close();
        }
    }

    /** Options shared by the remote memories' builders. */
    @SuppressWarnings("unchecked")
    public abstract static class AbstractBuilder<B extends AbstractBuilder<B>> {
        private RemoteConnection connection;
        private final RemoteConnection.Builder connectionBuilder = RemoteConnection.builder();
        private boolean connectionOptionsUsed;
        private String memoryId;
        private boolean createIfMissing = true;
        private final Map<String, String> labels = new LinkedHashMap<>();
        private int pageSize;

        protected AbstractBuilder() {}

        /** Share an existing connection (its deadline, API key and retries apply). */
        public B connection(RemoteConnection connection) {
            this.connection = Objects.requireNonNull(connection, "connection");
            return (B) this;
        }

        /** Talk over this channel (the caller keeps ownership). */
        public B channel(Channel channel) {
            connectionBuilder.channel(channel);
            connectionOptionsUsed = true;
            return (B) this;
        }

        /** Connect to this gRPC target, e.g. {@code 127.0.0.1:50051}; closed by {@code close()}. */
        public B target(String target) {
            connectionBuilder.target(target);
            connectionOptionsUsed = true;
            return (B) this;
        }

        /** Plaintext (default) or TLS for a channel created from a target. */
        public B plaintext(boolean plaintext) {
            connectionBuilder.plaintext(plaintext);
            connectionOptionsUsed = true;
            return (B) this;
        }

        /** Use TLS, trusting the certificates in this PEM file (e.g. the server's own). */
        public B trustedCertificates(java.nio.file.Path pemFile) {
            connectionBuilder.trustedCertificates(pemFile);
            connectionOptionsUsed = true;
            return (B) this;
        }

        /** The deadline of each call (default 30 s). */
        public B deadline(Duration deadline) {
            connectionBuilder.deadline(deadline);
            connectionOptionsUsed = true;
            return (B) this;
        }

        /** The API key sent with every call. */
        public B apiKey(String apiKey) {
            connectionBuilder.apiKey(apiKey);
            connectionOptionsUsed = true;
            return (B) this;
        }

        /** Attempts in all for a safe call refused with UNAVAILABLE (default 3). */
        public B maxAttempts(int maxAttempts) {
            connectionBuilder.maxAttempts(maxAttempts);
            connectionOptionsUsed = true;
            return (B) this;
        }

        /** The first retry's wait, doubling afterwards (default 200 ms). */
        public B retryBackoff(Duration backoff) {
            connectionBuilder.retryBackoff(backoff);
            connectionOptionsUsed = true;
            return (B) this;
        }

        /** The memory's id on the server (required). */
        public B memoryId(String memoryId) {
            this.memoryId = memoryId;
            return (B) this;
        }

        /**
         * Create the memory on first use if it does not exist (default true). When false, a
         * missing memory makes every call fail with {@link RemoteMemoryException.NotFound}.
         */
        public B createIfMissing(boolean createIfMissing) {
            this.createIfMissing = createIfMissing;
            return (B) this;
        }

        /** Labels given to the memory when this client creates it. */
        public B label(String key, String value) {
            labels.put(Objects.requireNonNull(key, "label key"), Objects.requireNonNull(value, "label value"));
            return (B) this;
        }

        /** Messages per GetMessages page; 0 (default) lets the server choose (1000). */
        public B pageSize(int pageSize) {
            if (pageSize < 0) {
                throw new IllegalArgumentException("pageSize: must not be negative");
            }
            this.pageSize = pageSize;
            return (B) this;
        }
    }
}
