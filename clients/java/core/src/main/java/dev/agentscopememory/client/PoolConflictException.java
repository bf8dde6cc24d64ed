package dev.agentscopememory.client;

import io.grpc.Status;

/**
 * A compare-and-set on a shared memory pool lost: the entry was at another version than the
 * caller expected (another agent wrote or deleted it in between). Nothing was written or deleted;
 * read the entry again and decide. The server answers {@code ABORTED} and sends the version that
 * won in the trailing metadata {@code agentscope-memory-current-version}, which {@link
 * #getActualVersion()} holds.
 */
public final class PoolConflictException extends RemoteMemoryException {

    private final String poolId;
    private final String key;
    private final long expectedVersion;
    private final long actualVersion;

    /**
     * @param operation the RPC, e.g. {@code SharedPoolService/WritePoolEntry}
     * @param poolId the pool
     * @param key the entry's key
     * @param expectedVersion the version the caller expected (0: the key must not exist)
     * @param actualVersion the version the entry is at (0: it does not exist)
     * @param serverMessage the server's explanation
     * @param cause the failed call
     */
    public PoolConflictException(String operation, String poolId, String key, long expectedVersion,
                                 long actualVersion, String serverMessage, Throwable cause) {
        super(operation, Status.Code.ABORTED, serverMessage, cause);
        this.poolId = poolId;
        this.key = key;
        this.expectedVersion = expectedVersion;
        this.actualVersion = actualVersion;
    }

    /** The pool. */
    public String getPoolId() {
        return poolId;
    }

    /** The entry's key. */
    public String getKey() {
        return key;
    }

    /** The version the write or delete expected (0: that the key did not exist). */
    public long getExpectedVersion() {
        return expectedVersion;
    }

    /** The version the entry was at when the call was refused (0: it did not exist). */
    public long getActualVersion() {
        return actualVersion;
    }
}
