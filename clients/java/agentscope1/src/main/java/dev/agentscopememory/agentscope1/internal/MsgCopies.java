package dev.agentscopememory.agentscope1.internal;

import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.util.JsonUtils;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Independent copies of AgentScope-Java 1.x messages, for handing a cached history to a caller
 * that may change it. Not public API.
 *
 * <p>A copy has the same id, name, role, content blocks (immutable in AgentScope, so shared) and
 * timestamp, {@code null} included, and metadata of its own: changing a copy's metadata, nested
 * maps and lists too, changes neither the original nor any other copy.
 *
 * <p>Why not {@code Msg.builder()}: a new builder draws a random UUID and formats the current time
 * before the copy overwrites both, and it cannot keep a {@code null} timestamp (that takes a JSON
 * round trip). A remote memory copies its whole history on each of the many {@code getMessages}
 * calls of an agent turn, so with a long history that work dominated the turn. Msg's own all-args
 * constructor (private; it is Jackson's creator) does only the copy. It is found once, and checked
 * once on a probe message; where it is not reachable (a module or security manager forbids it) or
 * does not behave as expected (another AgentScope release), the builder is used as before.
 */
public final class MsgCopies {

    private static final Logger log = LoggerFactory.getLogger(MsgCopies.class);

    /** {@code Msg(id, name, role, content, metadata, timestamp)}, or null: use the builder. */
    private static final MethodHandle CONSTRUCTOR = findConstructor();

    private MsgCopies() {}

    /** New messages equal to {@code messages}, in a new mutable list. */
    public static List<Msg> copies(List<Msg> messages) {
        List<Msg> out = new ArrayList<>(messages.size());
        for (Msg m : messages) {
            out.add(copy(m));
        }
        return out;
    }

    /** A new message equal to {@code m}, with metadata of its own. */
    public static Msg copy(Msg m) {
        return CONSTRUCTOR != null ? viaConstructor(CONSTRUCTOR, m) : viaBuilder(m);
    }

    /** Whether copies skip the builder (false where the constructor could not be used). */
    public static boolean usesConstructor() {
        return CONSTRUCTOR != null;
    }

    /** The fallback, kept callable so tests cover it on releases where the constructor works. */
    static Msg viaBuilder(Msg m) {
        if (m.getTimestamp() == null) {
            // The builder would stamp the current time; Jackson keeps the null.
            return JsonUtils.getJsonCodec().fromJson(JsonUtils.getJsonCodec().toJson(m), Msg.class);
        }
        return Msg.builder().id(m.getId()).name(m.getName()).role(m.getRole()).content(m.getContent())
                .metadata(deepCopy(m.getMetadata())).timestamp(m.getTimestamp()).build();
    }

    static Msg viaConstructor(MethodHandle constructor, Msg m) {
        // The constructor puts the top-level entries into a map of its own (checked by the probe),
        // so only nested maps and lists need copying here; most messages have none.
        Map<String, Object> metadata = m.getMetadata();
        if (hasNestedContainers(metadata)) {
            metadata = deepCopy(metadata);
        }
        try {
            return (Msg) constructor.invokeExact(m.getId(), m.getName(), m.getRole(), m.getContent(), metadata,
                    m.getTimestamp());
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable e) {
            // The constructor declares no checked exception; this only satisfies invokeExact.
            throw new IllegalStateException("copying message " + m.getId(), e);
        }
    }

    private static boolean hasNestedContainers(Map<String, Object> metadata) {
        if (metadata == null) {
            return false;
        }
        for (Object value : metadata.values()) {
            if (value instanceof Map<?, ?> || value instanceof List<?>) {
                return true;
            }
        }
        return false;
    }

    @SuppressWarnings("unchecked")
    private static <T> T deepCopy(T value) {
        if (value instanceof Map<?, ?> map) {
            Map<Object, Object> copy = new LinkedHashMap<>();
            map.forEach((k, v) -> copy.put(k, deepCopy(v)));
            return (T) copy;
        }
        if (value instanceof List<?> list) {
            List<Object> copy = new ArrayList<>(list.size());
            list.forEach(v -> copy.add(deepCopy(v)));
            return (T) copy;
        }
        return value;
    }

    private static MethodHandle findConstructor() {
        MethodHandle constructor;
        try {
            constructor = MethodHandles.privateLookupIn(Msg.class, MethodHandles.lookup()).findConstructor(Msg.class,
                    MethodType.methodType(void.class, String.class, String.class, MsgRole.class, List.class,
                            Map.class, String.class));
        } catch (ReflectiveOperationException | RuntimeException | LinkageError e) {
            // Not opened to us (named modules), a security manager, or another constructor.
            log.debug("copying messages with Msg.builder(): Msg's constructor is not usable here", e);
            return null;
        }
        try {
            if (copiesFaithfully(constructor)) {
                return constructor;
            }
            log.debug("copying messages with Msg.builder(): Msg's constructor does not copy as expected");
        } catch (RuntimeException | LinkageError e) {
            log.debug("copying messages with Msg.builder(): Msg's constructor failed on a probe", e);
        }
        return null;
    }

    /**
     * What the fast path relies on, checked on a probe: every field kept as given ({@code null}
     * timestamp too), and metadata put into a mutable map of the message's own.
     */
    private static boolean copiesFaithfully(MethodHandle constructor) {
        List<ContentBlock> content = List.of(TextBlock.builder().text("probe").build());
        Map<String, Object> metadata = new HashMap<>(Map.of("k", "v"));
        Msg source = Msg.builder().id("probe-id").name("probe-name").role(MsgRole.TOOL).content(content)
                .metadata(metadata).timestamp("2026-01-01 00:00:00.000").build();
        Msg probe = viaConstructor(constructor, source);
        Msg withoutTimestamp;
        try {
            withoutTimestamp = (Msg) constructor.invokeExact("probe-id", (String) null, MsgRole.USER,
                    content, metadata, (String) null);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable e) {
            throw new IllegalStateException(e);
        }
        if (!"probe-id".equals(probe.getId()) || !"probe-name".equals(probe.getName())
                || probe.getRole() != MsgRole.TOOL || !content.equals(probe.getContent())
                || !"2026-01-01 00:00:00.000".equals(probe.getTimestamp()) || !metadata.equals(probe.getMetadata())
                || withoutTimestamp.getTimestamp() != null || withoutTimestamp.getName() != null) {
            return false;
        }
        Map<String, Object> own = withoutTimestamp.getMetadata();
        if (own == metadata || !metadata.equals(own)) {
            return false;
        }
        own.put("changed", "by the caller");
        return !metadata.containsKey("changed") && Objects.equals(metadata, Map.of("k", "v"));
    }
}
