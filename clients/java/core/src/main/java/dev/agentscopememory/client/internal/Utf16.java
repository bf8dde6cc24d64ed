package dev.agentscopememory.client.internal;

/**
 * Java strings that are not Unicode text. Not public API: it is public only so the adapter modules
 * can use it, and may change in any release.
 *
 * <p>A Java string may hold half of a UTF-16 surrogate pair (a model's stream cut inside an emoji,
 * say). UTF-8 has no encoding for it, and protobuf-java silently sends {@code '?'} in its place, so
 * what the server stores would differ from what was given: ids, messages, states, labels and pool
 * entries refuse it.
 */
public final class Utf16 {

    private Utf16() {}

    /**
     * The index of the first unpaired surrogate in {@code s}, or -1 when there is none.
     *
     * @param s the string
     * @return the char index of the first lone surrogate, or -1
     */
    public static int loneSurrogateAt(String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
                i++;
            } else if (Character.isSurrogate(c)) {
                return i;
            }
        }
        return -1;
    }

    /**
     * Returns {@code value} when it is Unicode text.
     *
     * @param value the text (not null)
     * @param field the server's name of the field, which starts the message
     * @return {@code value}
     * @throws IllegalArgumentException naming the field and the character when it holds a lone surrogate
     */
    public static String checkText(String value, String field) {
        int at = loneSurrogateAt(value);
        if (at >= 0) {
            throw new IllegalArgumentException(field + ": contains a lone surrogate at character "
                    + value.codePointCount(0, at) + "; it is not Unicode text");
        }
        return value;
    }
}
