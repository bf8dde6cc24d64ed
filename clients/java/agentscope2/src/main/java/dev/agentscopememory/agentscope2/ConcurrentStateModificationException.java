package dev.agentscopememory.agentscope2;

/**
 * A save lost a race: another writer (another replica, another agent) stored a newer version of
 * the slot's value since this process read it, and the {@link ConflictPolicy} did not allow
 * overwriting or merging. Nothing was written.
 */
public class ConcurrentStateModificationException extends RuntimeException {

    private final String userId;
    private final String sessionId;
    private final String key;
    private final long currentVersion;

    public ConcurrentStateModificationException(
            String userId, String sessionId, String key, long currentVersion, String reason) {
        super("state " + key + " of session " + sessionId
                + (userId == null ? "" : " (user " + userId + ")") + ": " + reason
                + "; current version " + currentVersion);
        this.userId = userId;
        this.sessionId = sessionId;
        this.key = key;
        this.currentVersion = currentVersion;
    }

    /** The slot's user id ({@code null}: anonymous). */
    public String getUserId() {
        return userId;
    }

    public String getSessionId() {
        return sessionId;
    }

    public String getKey() {
        return key;
    }

    /** The version stored on the server when the save was refused (0: absent). */
    public long getCurrentVersion() {
        return currentVersion;
    }
}
