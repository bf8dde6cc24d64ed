package dev.agentscopememory.client.internal;

import dev.agentscopememory.client.AutoContextProfile;
import dev.agentscopememory.client.MemoryKind;
import dev.agentscopememory.client.TokenCounter;

/**
 * The public enums as their generated wire counterparts. Not public API: it is public only so the
 * adapter modules can use it, and may change in any release.
 *
 * <p>The public enums are written by hand so that a user's builder calls do not name generated
 * types, which change with the proto; the switches have no default, so a constant added to a public
 * enum without its wire value fails the build rather than a call.
 */
public final class WireEnums {

    private WireEnums() {}

    public static dev.agentscopememory.grpc.v1.MemoryKind toProto(MemoryKind kind) {
        return switch (kind) {
            case IN_MEMORY -> dev.agentscopememory.grpc.v1.MemoryKind.MEMORY_KIND_IN_MEMORY;
            case AUTO_CONTEXT -> dev.agentscopememory.grpc.v1.MemoryKind.MEMORY_KIND_AUTO_CONTEXT;
            case TIERED -> dev.agentscopememory.grpc.v1.MemoryKind.MEMORY_KIND_TIERED;
        };
    }

    public static dev.agentscopememory.grpc.v1.AutoContextProfile toProto(AutoContextProfile profile) {
        return switch (profile) {
            case PARITY -> dev.agentscopememory.grpc.v1.AutoContextProfile.AUTO_CONTEXT_PROFILE_PARITY;
            case IMPROVED -> dev.agentscopememory.grpc.v1.AutoContextProfile.AUTO_CONTEXT_PROFILE_IMPROVED;
        };
    }

    public static dev.agentscopememory.grpc.v1.TokenCounter toProto(TokenCounter counter) {
        return switch (counter) {
            case JAVA_ESTIMATE -> dev.agentscopememory.grpc.v1.TokenCounter.TOKEN_COUNTER_JAVA_ESTIMATE;
            case CL100K -> dev.agentscopememory.grpc.v1.TokenCounter.TOKEN_COUNTER_CL100K;
        };
    }

    /**
     * An AgentScope role, by its name ({@code USER}, {@code ASSISTANT}, {@code SYSTEM}, {@code
     * TOOL}; the same in 1.x and 2.x), as the wire role; null is {@code ROLE_UNSPECIFIED}.
     *
     * @throws IllegalArgumentException for any other name
     */
    public static dev.agentscopememory.grpc.v1.Role roleToProto(String role) {
        if (role == null) {
            return dev.agentscopememory.grpc.v1.Role.ROLE_UNSPECIFIED;
        }
        return switch (role) {
            case "USER" -> dev.agentscopememory.grpc.v1.Role.ROLE_USER;
            case "ASSISTANT" -> dev.agentscopememory.grpc.v1.Role.ROLE_ASSISTANT;
            case "SYSTEM" -> dev.agentscopememory.grpc.v1.Role.ROLE_SYSTEM;
            case "TOOL" -> dev.agentscopememory.grpc.v1.Role.ROLE_TOOL;
            default -> throw new IllegalArgumentException("role: unknown role '" + role + "'");
        };
    }
}
