package dev.agentscopememory.client;

import dev.agentscopememory.client.internal.Utf16;
import java.nio.charset.StandardCharsets;

/**
 * The server's rules for ids (memory, session, user, agent and run ids), checked where a
 * builder is built so a bad id fails at {@code build()} with the server's own message, before
 * any connection is opened.
 *
 * <p>Any Unicode text is an id ({@code 会话-42}, {@code 助手}, {@code ..}) within these limits:
 * 1 to {@value #MAX_ID_BYTES} bytes of UTF-8, not blank, no control characters (U+0000-U+001F,
 * U+007F-U+009F, NUL included) and no lone surrogates. Ids are compared exactly as given: no
 * Unicode normalisation, no trimming. The Python library ({@code agentscope_memory.validation.ids})
 * holds the same rules; a test compares both messages with the server's.
 */
public final class Ids {

    /** The longest id, in bytes of UTF-8. */
    public static final int MAX_ID_BYTES = 256;

    private Ids() {}

    /**
     * Returns {@code value} if it is a valid id.
     *
     * @param value the id
     * @param field the server's name of the field (e.g. {@code memory_id}, {@code scope.user_id}),
     *     which starts the message
     * @return {@code value}
     * @throws IllegalArgumentException naming the field and the reason, as the server words it
     */
    public static String checkId(String value, String field) {
        if (value == null || value.isEmpty()) {
            throw new IllegalArgumentException(field + ": is required");
        }
        int surrogate = Utf16.loneSurrogateAt(value);
        if (surrogate >= 0) {
            throw new IllegalArgumentException(field + ": contains a lone surrogate at character "
                    + value.codePointCount(0, surrogate) + "; it is not Unicode text");
        }
        int size = value.getBytes(StandardCharsets.UTF_8).length;
        if (size > MAX_ID_BYTES) {
            throw new IllegalArgumentException(
                    field + ": is " + size + " bytes of UTF-8; at most " + MAX_ID_BYTES);
        }
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            if (c <= 0x1f || (c >= 0x7f && c <= 0x9f)) {
                String name = c == 0 ? "a NUL character" : String.format("a control character U+%04X", (int) c);
                throw new IllegalArgumentException(field + ": contains " + name + " at character "
                        + value.codePointCount(0, i) + "; control characters are not allowed");
            }
        }
        if (value.codePoints().allMatch(Ids::isPythonSpace)) {
            throw new IllegalArgumentException(field + ": must not be blank");
        }
        return value;
    }

    // What Python's str.isspace() calls whitespace (the server strips with it).
    private static boolean isPythonSpace(int codePoint) {
        return Character.isWhitespace(codePoint) || Character.isSpaceChar(codePoint)
                || codePoint == 0x85;
    }
}
