package dev.agentscopememory.agentscope1.internal;

import io.agentscope.core.message.Msg;
import java.util.AbstractList;
import java.util.ArrayList;
import java.util.List;
import java.util.RandomAccess;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * A new mutable list, for a caller, of copies ({@link MsgCopies#copy}) of a cached history's
 * messages, each made only when first read. An agent reads its history many times a turn and most
 * of those reads look at a few messages only (the last one, the pending tool calls), so copying
 * all of a long history for each of them dominated the turn.
 *
 * <p>The copies of the first {@code handedOut.length()} messages are shared with every other list
 * over the same cached history (made by whichever list reads one first), as InMemoryMemory hands
 * out the same message objects to each read; the messages after them (this client's adds on their
 * way) are copied for this list alone. The cached messages themselves are never handed out, so
 * nothing a caller changes reaches them. Once changed (set, add, remove), the list copies the
 * messages not read yet and holds them as a plain {@link ArrayList}. Not public API.
 *
 * <p>The source must not change while this list is in use (the remote memories pass their
 * immutable cached copy). Like {@code ArrayList}, not safe for use by several threads at once.
 */
public final class CopiedOnRead extends AbstractList<Msg> implements RandomAccess {

    private final List<Msg> source;
    private final AtomicReferenceArray<Msg> handedOut;
    /** This list's own copies of the messages past {@code handedOut}; null until read. */
    private final Msg[] own;
    /** After the first change: every message, copied. */
    private ArrayList<Msg> changed;

    public CopiedOnRead(List<Msg> source, AtomicReferenceArray<Msg> handedOut) {
        if (handedOut.length() > source.size()) {
            throw new IllegalArgumentException("more shared copies than messages");
        }
        this.source = source;
        this.handedOut = handedOut;
        this.own = new Msg[source.size() - handedOut.length()];
    }

    @Override
    public Msg get(int index) {
        if (changed != null) {
            return changed.get(index);
        }
        int shared = handedOut.length();
        if (index < shared) {
            Msg copy = handedOut.get(index);
            if (copy == null) {
                // Two lists may race to copy one message: one copy wins, and both hand it out.
                handedOut.compareAndSet(index, null, MsgCopies.copy(source.get(index)));
                copy = handedOut.get(index);
            }
            return copy;
        }
        Msg copy = own[index - shared];
        if (copy == null) {
            copy = MsgCopies.copy(source.get(index));
            own[index - shared] = copy;
        }
        return copy;
    }

    /**
     * The messages this list was made of, never handed out and never changed (whatever its holder
     * does to this list): for a caller that only looks at what they are, such as their ids,
     * without paying for copies.
     */
    public List<Msg> source() {
        return source;
    }

    @Override
    public int size() {
        return changed != null ? changed.size() : source.size();
    }

    @Override
    public Msg set(int index, Msg element) {
        return changeable().set(index, element);
    }

    @Override
    public void add(int index, Msg element) {
        changeable().add(index, element);
        modCount++;
    }

    @Override
    public Msg remove(int index) {
        Msg removed = changeable().remove(index);
        modCount++;
        return removed;
    }

    @Override
    protected void removeRange(int fromIndex, int toIndex) {
        changeable().subList(fromIndex, toIndex).clear();
        modCount++;
    }

    private ArrayList<Msg> changeable() {
        if (changed == null) {
            int size = source.size();
            ArrayList<Msg> all = new ArrayList<>(size + 1);
            for (int i = 0; i < size; i++) {
                all.add(get(i));
            }
            changed = all;
        }
        return changed;
    }
}
