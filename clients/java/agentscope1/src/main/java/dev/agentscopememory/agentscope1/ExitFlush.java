package dev.agentscopememory.agentscope1;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.WeakHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Flushes, when the JVM exits, the adds that remote memories sent without waiting for their
 * confirmation ({@link AddConfirmation}): a program that adds a message and returns from
 * {@code main} (gRPC's threads do not keep the JVM alive) must not lose it. A memory is listed
 * from its first such add until {@link AbstractRemoteMemory#close()}; weakly, so a memory dropped
 * without closing is not kept alive by this list. Each flush is bounded by its connection's
 * deadline. Not public API.
 */
final class ExitFlush {

    private static final Logger log = LoggerFactory.getLogger(ExitFlush.class);

    private static final Set<AbstractRemoteMemory> MEMORIES =
            Collections.synchronizedSet(Collections.newSetFromMap(new WeakHashMap<>()));

    static {
        try {
            Runtime.getRuntime().addShutdownHook(new Thread(ExitFlush::flushAll, "agentscope-memory-exit-flush"));
        } catch (IllegalStateException exiting) {
            // First used while the JVM is already exiting: there is no later exit to flush at.
        }
    }

    private ExitFlush() {}

    static void register(AbstractRemoteMemory memory) {
        MEMORIES.add(memory);
    }

    static void unregister(AbstractRemoteMemory memory) {
        MEMORIES.remove(memory);
    }

    private static void flushAll() {
        List<AbstractRemoteMemory> memories;
        synchronized (MEMORIES) {
            memories = new ArrayList<>(MEMORIES);
        }
        for (AbstractRemoteMemory memory : memories) {
            try {
                memory.flush();
            } catch (RuntimeException e) {
                // Nobody is left to throw to: say which messages may be missing.
                log.error("memory {}: adds pending at exit could not be stored", memory.getMemoryId(), e);
            }
        }
    }
}
