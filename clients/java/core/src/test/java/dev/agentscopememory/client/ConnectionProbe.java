package dev.agentscopememory.client;

import io.grpc.ManagedChannel;
import java.time.Duration;
import java.util.function.BooleanSupplier;

/**
 * What the tests of every module need to see of a connection: the channel it created. Public,
 * and in core's test-jar, for the adapter modules' tests.
 */
public final class ConnectionProbe {

    private ConnectionProbe() {}

    /** The channel {@code connection} created from a target, or null when it was given one. */
    public static ManagedChannel ownedChannel(RemoteConnection connection) {
        return connection.ownedChannel();
    }

    /**
     * Asks the JVM to collect garbage until {@code done} holds or {@code timeout} passes; whether
     * it holds.
     */
    public static boolean collectUntil(BooleanSupplier done, Duration timeout) throws InterruptedException {
        long end = System.nanoTime() + timeout.toNanos();
        while (!done.getAsBoolean()) {
            if (System.nanoTime() - end > 0) {
                return false;
            }
            System.gc();
            Thread.sleep(50);
        }
        return true;
    }
}
