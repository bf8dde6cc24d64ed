package dev.agentscopememory.client;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/**
 * Reads every page of a listing as one snapshot. The server binds each page token to the state
 * the first page read and answers {@code ABORTED} when the memory changed in between; the read
 * then starts again from the first page, at most {@link #CONSISTENT_READ_ATTEMPTS} times, after
 * which the {@link RemoteMemoryException.Aborted} is thrown. A list mixing two states is never
 * returned.
 *
 * <pre>{@code
 * List<Msg> all = PagedRead.readAll(token -> {
 *     GetOriginalMessagesResponse page = connection.call(...);
 *     return new PagedRead.Page<>(page.getMessagesList(), page.getNextPageToken());
 * });
 * }</pre>
 */
public final class PagedRead {

    /** How often a read the server aborted is started again before the error is thrown. */
    public static final int CONSISTENT_READ_ATTEMPTS = 5;

    private PagedRead() {}

    /**
     * One page: its items and the token of the next page ({@code ""} at the end).
     *
     * @param items the page's items
     * @param nextPageToken the next page's token, empty after the last page
     * @param <T> the item type
     */
    public record Page<T>(List<T> items, String nextPageToken) {}

    /**
     * Every item of the listing, in order, from one state of the memory.
     *
     * @param fetch reads the page with the given token ({@code ""} for the first)
     * @param <T> the item type
     * @return a new list of all items
     */
    public static <T> List<T> readAll(Function<String, Page<T>> fetch) {
        for (int attempt = 1; ; attempt++) {
            try {
                List<T> out = new ArrayList<>();
                String token = "";
                do {
                    Page<T> page = fetch.apply(token);
                    out.addAll(page.items());
                    token = page.nextPageToken();
                } while (!token.isEmpty());
                return out;
            } catch (RemoteMemoryException.Aborted e) {
                if (attempt >= CONSISTENT_READ_ATTEMPTS) {
                    throw e;
                }
                // The memory changed between pages: read it again from the first page.
            }
        }
    }
}
