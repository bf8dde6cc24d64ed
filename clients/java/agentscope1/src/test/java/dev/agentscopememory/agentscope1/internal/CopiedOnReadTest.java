package dev.agentscopememory.agentscope1.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import java.util.AbstractList;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReferenceArray;
import org.junit.jupiter.api.Test;

/** Lists of copies made on first read, shared over one cached history. */
class CopiedOnReadTest {

    /** A cached history that counts the messages taken from it (each taken to be copied). */
    private static final class Counted extends AbstractList<Msg> {
        final List<Msg> messages;
        int taken;

        Counted(int n) {
            List<Msg> out = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                out.add(Msg.builder().id("m" + i).role(MsgRole.USER).name("user").textContent("text " + i)
                        .metadata(Map.of("i", i)).build());
            }
            messages = List.copyOf(out);
        }

        @Override
        public Msg get(int index) {
            taken++;
            return messages.get(index);
        }

        @Override
        public int size() {
            return messages.size();
        }
    }

    private static List<String> texts(List<Msg> messages) {
        return messages.stream().map(Msg::getTextContent).toList();
    }

    @Test
    void copiesOnlyWhatIsReadAndSharesItWithLaterReads() {
        Counted source = new Counted(1000);
        AtomicReferenceArray<Msg> shared = new AtomicReferenceArray<>(1000);
        List<Msg> first = new CopiedOnRead(source, shared);
        assertEquals(1000, first.size());
        Msg last = first.get(999);
        assertEquals(1, source.taken, "only the message read was copied");
        assertNotSame(source.messages.get(999), last);
        assertEquals("text 999", last.getTextContent());
        assertSame(last, first.get(999));

        List<Msg> second = new CopiedOnRead(source, shared);
        assertSame(last, second.get(999), "a later read hands out the same copy");
        assertEquals(1, source.taken);
        last.getMetadata().put("changed", "by the caller");
        assertEquals(Map.of("i", 999), source.messages.get(999).getMetadata(), "the cached message is untouched");
    }

    @Test
    void messagesPastTheSharedOnesAreThisListsOwn() {
        Counted source = new Counted(5);
        AtomicReferenceArray<Msg> shared = new AtomicReferenceArray<>(3);
        List<Msg> a = new CopiedOnRead(source, shared);
        List<Msg> b = new CopiedOnRead(source, shared);
        assertSame(a.get(1), b.get(1));
        assertNotSame(a.get(4), b.get(4));
        assertSame(a.get(4), a.get(4));
    }

    @Test
    void changesMakeItAPlainListOfTheSameCopies() {
        Counted source = new Counted(4);
        AtomicReferenceArray<Msg> shared = new AtomicReferenceArray<>(4);
        List<Msg> list = new CopiedOnRead(source, shared);
        Msg second = list.get(1);
        Msg extra = Msg.builder().role(MsgRole.ASSISTANT).name("a").textContent("extra").build();
        list.add(extra);
        list.remove(0);
        list.set(0, list.get(0));
        assertSame(second, list.get(0));
        assertEquals(List.of("text 1", "text 2", "text 3", "extra"), texts(list));
        list.subList(1, 3).clear();
        assertEquals(List.of("text 1", "extra"), texts(list));
        assertEquals(List.of("text 0", "text 1", "text 2", "text 3"), texts(new CopiedOnRead(source, shared)),
                "other lists are unaffected");
        assertTrue(list.iterator().hasNext());
    }
}
