package dev.agentscopememory.client;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;

/**
 * A call to the agentscope-memory server failed. The message names the operation, the gRPC
 * status and the server's own explanation; {@link #getServerMessage()} holds the latter alone.
 *
 * <p>AgentScope's {@code Memory} methods cannot throw checked exceptions, so this is unchecked.
 * The subclasses single out the failures callers usually handle differently.
 */
public class RemoteMemoryException extends RuntimeException {

    private final Status.Code code;
    private final String serverMessage;
    private final String operation;

    public RemoteMemoryException(String operation, Status.Code code, String serverMessage, Throwable cause) {
        super(operation + " failed: " + code + (serverMessage == null || serverMessage.isEmpty()
                ? "" : ": " + serverMessage), cause);
        this.operation = operation;
        this.code = code;
        this.serverMessage = serverMessage == null ? "" : serverMessage;
    }

    /** The gRPC status code the call ended with. */
    public Status.Code getCode() {
        return code;
    }

    /** The server's (or the channel's) description of the failure, without decoration. */
    public String getServerMessage() {
        return serverMessage;
    }

    /** The RPC that failed, e.g. {@code MemoryService/AddMessages}. */
    public String getOperation() {
        return operation;
    }

    /** Turns a failed call into the matching exception type. */
    public static RemoteMemoryException of(String operation, StatusRuntimeException e) {
        Status status = e.getStatus();
        String message = status.getDescription();
        if (status.getCode() != Status.Code.UNAVAILABLE && RemoteConnection.connectionLost(status)) {
            // A server killed mid-call: grpc-java says UNKNOWN ("channel closed"), but the server
            // never answered, exactly as when it cannot be reached.
            return new Unavailable(operation, "connection to the server lost: " + message, e);
        }
        return switch (status.getCode()) {
            case UNAVAILABLE -> new Unavailable(operation, message, e);
            case DEADLINE_EXCEEDED -> new DeadlineExceeded(operation, message, e);
            case INVALID_ARGUMENT -> new InvalidArgument(operation, message, e);
            case NOT_FOUND -> new NotFound(operation, message, e);
            case ALREADY_EXISTS -> new AlreadyExists(operation, message, e);
            case FAILED_PRECONDITION -> new FailedPrecondition(operation, message, e);
            case UNAUTHENTICATED -> new Unauthenticated(operation, message, e);
            case PERMISSION_DENIED -> new PermissionDenied(operation, message, e);
            case RESOURCE_EXHAUSTED -> new ResourceExhausted(operation, message, e);
            case UNIMPLEMENTED -> new Unimplemented(operation, message, e);
            case ABORTED -> new Aborted(operation, message, e);
            default -> new RemoteMemoryException(operation, status.getCode(), message, e);
        };
    }

    /** The server cannot be reached (down, restarting, network) even after retries. */
    public static final class Unavailable extends RemoteMemoryException {
        Unavailable(String operation, String message, Throwable cause) {
            super(operation, Status.Code.UNAVAILABLE, message, cause);
        }
    }

    /** The call did not finish within the configured deadline. */
    public static final class DeadlineExceeded extends RemoteMemoryException {
        DeadlineExceeded(String operation, String message, Throwable cause) {
            super(operation, Status.Code.DEADLINE_EXCEEDED, message, cause);
        }
    }

    /** The server rejected the request; the message names the field and the reason. */
    public static final class InvalidArgument extends RemoteMemoryException {
        InvalidArgument(String operation, String message, Throwable cause) {
            super(operation, Status.Code.INVALID_ARGUMENT, message, cause);
        }
    }

    /** The memory (or another addressed object) does not exist. */
    public static final class NotFound extends RemoteMemoryException {
        NotFound(String operation, String message, Throwable cause) {
            super(operation, Status.Code.NOT_FOUND, message, cause);
        }
    }

    /** A memory with that id already exists (of another kind, or creation was exclusive). */
    public static final class AlreadyExists extends RemoteMemoryException {
        AlreadyExists(String operation, String message, Throwable cause) {
            super(operation, Status.Code.ALREADY_EXISTS, message, cause);
        }
    }

    /** The memory is not in a state that allows the call (e.g. wrong kind). */
    public static final class FailedPrecondition extends RemoteMemoryException {
        FailedPrecondition(String operation, String message, Throwable cause) {
            super(operation, Status.Code.FAILED_PRECONDITION, message, cause);
        }
    }

    /** A server limit was hit (message or batch size, ...); the message names the limit. */
    public static final class ResourceExhausted extends RemoteMemoryException {
        ResourceExhausted(String operation, String message, Throwable cause) {
            super(operation, Status.Code.RESOURCE_EXHAUSTED, message, cause);
        }
    }

    /** No API key, or one the server does not know. */
    public static final class Unauthenticated extends RemoteMemoryException {
        Unauthenticated(String operation, String message, Throwable cause) {
            super(operation, Status.Code.UNAUTHENTICATED, message, cause);
        }
    }

    /** The API key is known but may not do this. */
    public static final class PermissionDenied extends RemoteMemoryException {
        PermissionDenied(String operation, String message, Throwable cause) {
            super(operation, Status.Code.PERMISSION_DENIED, message, cause);
        }
    }

    /** The server does not provide this RPC (yet). */
    public static final class Unimplemented extends RemoteMemoryException {
        Unimplemented(String operation, String message, Throwable cause) {
            super(operation, Status.Code.UNIMPLEMENTED, message, cause);
        }
    }

    /**
     * A concurrent change won: e.g. the memory changed between the pages of a read (the message
     * names the change), or a load's expected version no longer holds.
     */
    public static final class Aborted extends RemoteMemoryException {
        public Aborted(String operation, String message, Throwable cause) {
            super(operation, Status.Code.ABORTED, message, cause);
        }
    }
}
