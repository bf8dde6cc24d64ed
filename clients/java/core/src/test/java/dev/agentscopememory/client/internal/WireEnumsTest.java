package dev.agentscopememory.client.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.AutoContextProfile;
import dev.agentscopememory.client.MemoryKind;
import dev.agentscopememory.client.TokenCounter;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/** The hand-written enums reach the server as the wire values of the same name. */
class WireEnumsTest {

    @Test
    void everyConstantMapsToTheWireValueOfItsName() {
        assertMapsByName(MemoryKind.values(), WireEnums::toProto, "MEMORY_KIND_");
        assertMapsByName(AutoContextProfile.values(), WireEnums::toProto, "AUTO_CONTEXT_PROFILE_");
        assertMapsByName(TokenCounter.values(), WireEnums::toProto, "TOKEN_COUNTER_");
    }

    /** Every wire value a user may choose has a public constant (UNSPECIFIED means "the default"). */
    @Test
    void everyChoiceOnTheWireHasAConstant() {
        assertEquals(dev.agentscopememory.grpc.v1.MemoryKind.values().length - 2, MemoryKind.values().length);
        assertEquals(dev.agentscopememory.grpc.v1.AutoContextProfile.values().length - 2,
                AutoContextProfile.values().length);
        assertEquals(dev.agentscopememory.grpc.v1.TokenCounter.values().length - 2, TokenCounter.values().length);
    }

    private static <E extends Enum<E>, W extends Enum<W>> void assertMapsByName(
            E[] constants, Function<E, W> toProto, String wirePrefix) {
        for (E constant : constants) {
            W wire = toProto.apply(constant);
            assertEquals(wirePrefix + constant.name(), wire.name());
            assertTrue(wire.ordinal() > 0, wire + " is the UNSPECIFIED value");
        }
    }
}
