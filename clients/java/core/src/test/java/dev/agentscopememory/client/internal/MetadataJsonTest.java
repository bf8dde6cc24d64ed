package dev.agentscopememory.client.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/**
 * The metadata writing both adapters share, with no AgentScope on the classpath: a codec like
 * AgentScope's Jackson codec, which wraps Jackson's exception in its own. The adapters' tests cover
 * a value inside a list and a map holding itself; these cover what they do not.
 */
class MetadataJsonTest {

    /** What AgentScope's codec throws: its own exception, Jackson's as the cause. */
    static final class CodecException extends RuntimeException {
        CodecException(Throwable cause) {
            super("Failed to serialize object to JSON", cause);
        }
    }

    private static final ObjectMapper MAPPER = new ObjectMapper();

    private static final Function<Object, String> CODEC = value -> {
        try {
            return MAPPER.writeValueAsString(value);
        } catch (JsonProcessingException e) {
            throw new CodecException(e);
        }
    };

    /** A value of the application's own type, one of whose properties Jackson cannot write. */
    public static final class Note {
        public String getTitle() {
            return "标题";
        }

        public Object getBody() {
            return new Object();
        }
    }

    private static String refused(Map<String, Object> values) {
        return assertThrows(IllegalArgumentException.class,
                () -> MetadataJson.write(values, CODEC, CodecException.class)).getMessage();
    }

    @Test
    void writesWhatTheCodecCanAndNothingForNone() {
        Map<String, Object> values = new LinkedHashMap<>();
        values.put("团队", "研发");
        values.put("级别", List.of(1, true));
        assertEquals("{\"团队\":\"研发\",\"级别\":[1,true]}", MetadataJson.write(values, CODEC, CodecException.class));
        assertEquals("", MetadataJson.write(Map.of(), value -> {
            throw new AssertionError("no metadata is not written");
        }, CodecException.class));
    }

    @Test
    void aBeanPropertyIsNamedAndADeepPathIsCut() {
        assertTrue(refused(Map.of("笔记", new Note())).startsWith("metadata[\"笔记\"].body: this value cannot be"
                + " written as JSON by AgentScope's codec (No serializer found for class java.lang.Object"));
        Object deep = new Object();
        for (int level = 10; level > 0; level--) {
            deep = Map.of("层" + level, deep);
        }
        String message = refused(Map.of("深", deep));
        String shown = "metadata[\"深\"][\"层1\"][\"层2\"][\"层3\"][\"层4\"][\"层5\"][\"层6\"][\"层7\"]...: ";
        assertTrue(message.startsWith(shown), message);
    }

    @Test
    void otherFailuresAreNotReworded() {
        // The codec's exception without Jackson's: its own message, where unknown.
        assertEquals("metadata: cannot be written as JSON: Failed to serialize object to JSON",
                assertThrows(IllegalArgumentException.class, () -> MetadataJson.write(Map.of("键", "值"), value -> {
                    throw new CodecException(new IllegalStateException("编码器坏了"));
                }, CodecException.class)).getMessage());
        // Anything but the codec's exception passes through as it is.
        IllegalStateException other = new IllegalStateException("别的错误");
        assertSame(other, assertThrows(IllegalStateException.class, () -> MetadataJson.write(Map.of("键", "值"),
                value -> {
                    throw other;
                }, CodecException.class)));
    }
}
