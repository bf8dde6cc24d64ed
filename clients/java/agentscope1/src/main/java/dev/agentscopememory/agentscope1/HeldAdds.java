package dev.agentscopememory.agentscope1;

import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Sends, when their hold runs out, the adds remote memories held back to send with the next one
 * ({@link AbstractRemoteMemory#HOLD_NANOS}). One timer thread for all memories; each send runs on
 * a pool thread of its own, since one that cannot go over a watch waits for its answer and must
 * not hold up the others. Daemon threads: the JVM's exit flush ({@link ExitFlush}) sends what is
 * still held. Not public API.
 */
final class HeldAdds {

    private static final ScheduledExecutorService TIMER = timer();
    private static final ExecutorService SENDS = Executors.newCachedThreadPool(daemons("agentscope-memory-held-adds"));

    private HeldAdds() {}

    /** Runs {@code send} after {@code delayNanos} (on a pool thread); cancel the result to not run it. */
    static ScheduledFuture<?> sendLater(Runnable send, long delayNanos) {
        return TIMER.schedule(() -> SENDS.execute(send), delayNanos, TimeUnit.NANOSECONDS);
    }

    private static ScheduledExecutorService timer() {
        ScheduledThreadPoolExecutor timer = new ScheduledThreadPoolExecutor(1, daemons("agentscope-memory-held-adds-timer"));
        // Most holds end early (the next add sends them): their timers are dropped at once
        // rather than waking the timer thread when they would have run.
        timer.setRemoveOnCancelPolicy(true);
        return timer;
    }

    private static ThreadFactory daemons(String name) {
        AtomicInteger count = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, name + "-" + count.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }
}
