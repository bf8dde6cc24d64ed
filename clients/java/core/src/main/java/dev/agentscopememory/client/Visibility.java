package dev.agentscopememory.client;

/**
 * Who may read a stored message or long-term memory besides the memory (scope) that holds it:
 * parent/child scopes on the server ({@code ScopeService}).
 */
public enum Visibility {

    /** Only the memory that holds it (the default). */
    LOCAL,

    /** The memory that holds it and all its descendants (children, grandchildren, ...). */
    SHARED,

    /** Every memory of the tenant. */
    GLOBAL;

    /** The wire value of this visibility. */
    public dev.agentscopememory.grpc.v1.Visibility toProto() {
        return switch (this) {
            case LOCAL -> dev.agentscopememory.grpc.v1.Visibility.VISIBILITY_LOCAL;
            case SHARED -> dev.agentscopememory.grpc.v1.Visibility.VISIBILITY_SHARED;
            case GLOBAL -> dev.agentscopememory.grpc.v1.Visibility.VISIBILITY_GLOBAL;
        };
    }
}
