package dev.agentscopememory.agentscope2;

import io.agentscope.core.state.State;
import java.util.Optional;

/**
 * A state read together with its version on the server; an absent key has version 0. The shape of
 * upstream AgentScope-Java's post-2.0.0 {@code VersionedState} ({@code value()}, {@code
 * version()}, {@code isPresent()}), which 2.0.0 lacks.
 *
 * @param value the state, or {@code null} when absent
 * @param version the stored version (0 when absent)
 * @param <T> the state type
 */
public record VersionedState<T extends State>(T value, long version) {

    /** Whether a value is stored. */
    public boolean isPresent() {
        return value != null;
    }

    /** The value as an {@link Optional}. */
    public Optional<T> asOptional() {
        return Optional.ofNullable(value);
    }
}
