package dev.agentscopememory.agentscope1;

import dev.agentscopememory.agentscope1.internal.MsgConverter;
import dev.agentscopememory.client.MemoryKind;
import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.grpc.v1.JsonList;
import dev.agentscopememory.grpc.v1.StateEntry;
import io.agentscope.core.memory.Memory;
import io.agentscope.core.message.Msg;
import io.agentscope.core.session.Session;
import io.agentscope.core.state.SessionKey;
import java.util.ArrayList;
import java.util.List;

/**
 * An AgentScope {@link Memory} whose messages live in an agentscope-memory server (a memory of
 * kind {@code IN_MEMORY}), with {@code InMemoryMemory}'s contract:
 *
 * <ul>
 *   <li>{@link #getMessages()} returns a new mutable list in insertion order (all pages);
 *   <li>{@link #deleteMessage(int)} with an index out of range, negative included, does nothing;
 *   <li>{@link #addMessage(Msg)} sends a request id, so a retry after a lost reply stores nothing
 *       twice;
 *   <li>{@link #saveTo}/{@link #loadFrom} write and read the session key {@code memory_messages}
 *       with the same JSON as {@code InMemoryMemory}, so sessions move freely between the two.
 * </ul>
 *
 * <p>Differences from {@code InMemoryMemory}, by necessity: messages are copies (changing a
 * returned {@code Msg}'s metadata does not change the stored one), and {@code addMessage(null)}
 * stores nothing (the wire has no null message). Failures surface as {@link
 * RemoteMemoryException} subclasses carrying the server's message.
 */
public class RemoteMemory extends AbstractRemoteMemory {

    /** The session key {@code InMemoryMemory} uses for its messages. */
    public static final String MESSAGES_KEY = "memory_messages";

    private volatile boolean loadStateUnimplemented;

    protected RemoteMemory(Builder b) {
        super(b, MemoryKind.IN_MEMORY, null);
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * Creates a child of {@code parentMemoryId} on the server in one call (AgentScope's sub-agent
     * pattern) and returns a memory for it over the same connection. The child inherits the
     * parent's SHARED and GLOBAL messages, which lead its {@code getMessages()}; its own messages
     * are added with {@code visibility}.
     *
     * @throws RemoteMemoryException.NotFound when the parent does not exist
     * @throws RemoteMemoryException.AlreadyExists when {@code childMemoryId} is taken
     */
    public static RemoteMemory createChild(RemoteConnection connection, String parentMemoryId, String childMemoryId,
            dev.agentscopememory.client.Visibility visibility) {
        dev.agentscopememory.grpc.v1.CreateChildRequest request = dev.agentscopememory.grpc.v1.CreateChildRequest
                .newBuilder()
                .setParentMemoryId(dev.agentscopememory.client.Ids.checkId(parentMemoryId, "parent_memory_id"))
                .setMemoryId(dev.agentscopememory.client.Ids.checkId(childMemoryId, "memory_id"))
                .setKind(dev.agentscopememory.grpc.v1.MemoryKind.MEMORY_KIND_IN_MEMORY)
                .build();
        // Not retried: a second attempt after a lost reply would find the child already there.
        connection.call("ScopeService/CreateChild", false, () -> connection.scopeService().createChild(request));
        return builder().connection(connection).memoryId(childMemoryId).visibility(visibility)
                .includeInherited(true).build();
    }

    // ---------------------------------------------------------------- StateModule

    /** Saves the messages under {@code memory_messages}, exactly as {@code InMemoryMemory} does. */
    @Override
    public void saveTo(Session session, SessionKey sessionKey) {
        // Its own messages only: inherited ones belong to (and are saved with) their origin; the
        // pending adds acknowledged first, so what is saved is durable.
        flush();
        session.save(sessionKey, MESSAGES_KEY, currentOwnMessages());
    }

    /** InMemoryMemory's messages change only through its caller: its indexes name the list last read. */
    @Override
    protected boolean indexesLastRead() {
        return true;
    }

    /**
     * Replaces the messages with those saved under {@code memory_messages}; a session without them
     * empties the memory, as with {@code InMemoryMemory}. A message holding half a surrogate pair
     * (an escape like {@code "\ud800"} in the file) cannot be stored: the load is refused with an
     * {@link IllegalArgumentException} naming it, and the memory keeps what it held. The loaded
     * messages become this client's copy, named by the load's etag, so the next {@link
     * #getMessages()} does not read them back.
     */
    @Override
    public void loadFrom(Session session, SessionKey sessionKey) {
        forgetLastRead();
        List<Msg> loaded = session.getList(sessionKey, MESSAGES_KEY, Msg.class);
        JsonList.Builder items = JsonList.newBuilder();
        List<Msg> messages = new ArrayList<>(loaded.size());
        for (int i = 0; i < loaded.size(); i++) {
            if (loaded.get(i) != null) {
                items.addItems(MsgConverter.stateJson(loaded.get(i), MESSAGES_KEY + "[" + i + "]"));
                messages.add(loaded.get(i)); // the server drops null items too
            }
        }
        if (!loadStateUnimplemented) {
            // One streamed load that replaces everything atomically, whatever its size, so a
            // failure leaves the old contents intact; the loaded messages become the copy.
            List<StateEntry> entries = List.of(StateEntry.newBuilder().setKey(MESSAGES_KEY).setList(items).build());
            try {
                loadState(entries, messages);
                return;
            } catch (RemoteMemoryException.Unimplemented e) {
                loadStateUnimplemented = true; // an older server: fall back to clear + add
            }
        }
        clear();
        addMessages(loaded);
    }

    /** Builder of {@link RemoteMemory}. */
    public static final class Builder extends AbstractBuilder<Builder> {
        private Builder() {}

        public RemoteMemory build() {
            return new RemoteMemory(this);
        }
    }
}
