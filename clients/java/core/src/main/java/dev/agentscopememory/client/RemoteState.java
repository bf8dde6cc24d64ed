package dev.agentscopememory.client;

import dev.agentscopememory.client.internal.Utf16;
import dev.agentscopememory.grpc.v1.JsonList;
import dev.agentscopememory.grpc.v1.StateEntry;
import dev.agentscopememory.grpc.v1.StreamLoadStateRequest;
import dev.agentscopememory.grpc.v1.StreamLoadStateResponse;
import dev.agentscopememory.grpc.v1.StreamSaveStateRequest;
import dev.agentscopememory.grpc.v1.StreamSaveStateResponse;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;

/**
 * A memory's state (AgentScope session entries) saved and loaded through the streaming RPCs
 * {@code StreamSaveState} and {@code StreamLoadState}, so a state of any size moves through a
 * channel with gRPC's default 4 MiB message limit. Entries travel in pieces (see {@code
 * StateEntry.partial} in the proto); this class cuts and joins them.
 */
public final class RemoteState {

    /** What one piece of a load carries at most: under a stock server's 4 MiB receive limit. */
    public static final int PIECE_BYTES = 4 * 1024 * 1024 - 64 * 1024;

    private static final int ENTRY_OVERHEAD = 32;
    private static final int ITEM_OVERHEAD = 8;
    private static final int MIN_CUT = 1024;

    private RemoteState() {}

    /**
     * A saved state: its entries, whole again, and the memory's version it was read at.
     *
     * @param entries the state entries, as {@code SaveState} would return them
     * @param version the memory's version the state was read at
     */
    public record Saved(List<StateEntry> entries, long version) {}

    /**
     * What a load answered: the memory's version after it, and the etags of its messages (as
     * {@code MemoryService.GetMessages} names them) just after and just before it. A caller that
     * knows the messages it loaded may keep them as its copy, named by {@code etag}, instead of
     * reading them back.
     *
     * @param version the memory's version after the load
     * @param etag the etag of the messages the load left; empty from a server older than etags on loads
     * @param previousEtag the etag of the messages the load replaced; empty from such a server
     */
    public record Loaded(long version, String etag, String previousEtag) {}

    /**
     * Reads the memory's state in one snapshot, streamed in pieces and joined here.
     *
     * @param connection the server
     * @param memoryId the memory
     * @return the state and its version
     */
    public static Saved save(RemoteConnection connection, String memoryId) {
        StreamSaveStateRequest request = StreamSaveStateRequest.newBuilder().setMemoryId(memoryId).build();
        return connection.call("StateService/StreamSaveState", true, () -> {
            List<StateEntry> pieces = new ArrayList<>();
            long version = 0;
            Iterator<StreamSaveStateResponse> stream = connection.stateService().streamSaveState(request);
            while (stream.hasNext()) {
                StreamSaveStateResponse piece = stream.next();
                version = piece.getVersion();
                pieces.addAll(piece.getEntriesList());
            }
            return new Saved(join(pieces), version);
        });
    }

    /**
     * Replaces the memory's contents with {@code entries}, atomically, streamed in pieces.
     *
     * @param connection the server
     * @param memoryId the memory
     * @param entries the state entries
     * @param expectedVersion when not null, the load fails ({@code Aborted}) unless the memory is at this version
     * @return the memory's version after the load
     */
    public static long load(RemoteConnection connection, String memoryId, List<StateEntry> entries, Long expectedVersion) {
        return loadWithEtags(connection, memoryId, entries, expectedVersion).version();
    }

    /**
     * {@link #load}, answering also the etags of the memory's messages just before and after the
     * load, so a caller that knows what it loaded keeps it as its copy without reading it back.
     *
     * @param connection the server
     * @param memoryId the memory
     * @param entries the state entries
     * @param expectedVersion when not null, the load fails ({@code Aborted}) unless the memory is at this version
     * @return the memory's version and the messages' etags after (and before) the load
     */
    public static Loaded loadWithEtags(RemoteConnection connection, String memoryId, List<StateEntry> entries,
            Long expectedVersion) {
        for (StateEntry entry : entries) {
            checkUnicode(entry);
        }
        List<List<StateEntry>> chunks = split(entries, PIECE_BYTES);
        return connection.call("StateService/StreamLoadState", expectedVersion != null, () -> {
            CompletableFuture<StreamLoadStateResponse> done = new CompletableFuture<>();
            StreamObserver<StreamLoadStateRequest> out = connection.stateServiceAsync().streamLoadState(
                    new StreamObserver<>() {
                        @Override
                        public void onNext(StreamLoadStateResponse value) {
                            done.complete(value);
                        }

                        @Override
                        public void onError(Throwable t) {
                            done.completeExceptionally(t);
                        }

                        @Override
                        public void onCompleted() {
                            done.complete(null);
                        }
                    });
            for (int i = 0; i < chunks.size(); i++) {
                StreamLoadStateRequest.Builder piece = StreamLoadStateRequest.newBuilder().addAllEntries(chunks.get(i));
                if (i == 0) {
                    piece.setMemoryId(memoryId);
                    if (expectedVersion != null) {
                        piece.setExpectedVersion(expectedVersion);
                    }
                }
                out.onNext(piece.build());
            }
            out.onCompleted();
            try {
                StreamLoadStateResponse response = done.get();
                if (response == null) {
                    throw Status.INTERNAL.withDescription("the server sent no response").asRuntimeException();
                }
                return new Loaded(response.getVersion(), response.getEtag(), response.getPreviousEtag());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw Status.CANCELLED.withDescription("interrupted").withCause(e).asRuntimeException();
            } catch (ExecutionException e) {
                Throwable cause = e.getCause();
                throw cause instanceof StatusRuntimeException sre ? sre : Status.fromThrowable(cause).asRuntimeException();
            }
        });
    }

    /**
     * Refuses an entry holding half a surrogate pair: protobuf would send {@code '?'} in its place,
     * and the server would store other text than the one given (see {@link Utf16}).
     */
    private static void checkUnicode(StateEntry entry) {
        String key = entry.getKey();
        if (Utf16.loneSurrogateAt(key) >= 0) {
            throw new IllegalArgumentException(
                    "entries: a key contains a lone surrogate; it is not Unicode text and cannot be stored");
        }
        List<String> values = entry.hasList() ? entry.getList().getItemsList() : List.of(entry.getJson());
        for (int i = 0; i < values.size(); i++) {
            String value = values.get(i);
            int at = Utf16.loneSurrogateAt(value);
            if (at >= 0) {
                throw new IllegalArgumentException((entry.hasList() ? key + "[" + i + "]" : key)
                        + ": contains a lone surrogate at character " + value.codePointCount(0, at)
                        + " of its JSON; it is not Unicode text and cannot be stored");
            }
        }
    }

    // ---------------------------------------------------------------- pieces

    /** The entries cut into pieces of at most about {@code budget} bytes per list. */
    static List<List<StateEntry>> split(List<StateEntry> entries, int budget) {
        Cutter out = new Cutter(budget);
        for (StateEntry entry : entries) {
            if (entry.hasList()) {
                out.open(entry.getKey(), true);
                for (String item : entry.getList().getItemsList()) {
                    int size = utf8Length(item, 0, item.length());
                    if (size + ITEM_OVERHEAD > out.room() && out.piece.getList().getItemsCount() > 0) {
                        out.flush();
                        out.open(entry.getKey(), true);
                    }
                    int from = 0;
                    while (true) {
                        int end = cut(item, from, Math.max(out.room() - ITEM_OVERHEAD, MIN_CUT));
                        out.piece.getListBuilder().addItems(item.substring(from, end));
                        out.used += utf8Length(item, from, end) + ITEM_OVERHEAD;
                        from = end;
                        if (from >= item.length()) {
                            break;
                        }
                        out.piece.setPartial(true);
                        out.flush();
                        out.open(entry.getKey(), true);
                    }
                }
            } else {
                String json = entry.getJson();
                int from = 0;
                while (true) {
                    out.open(entry.getKey(), false);
                    int end = cut(json, from, Math.max(out.room(), MIN_CUT));
                    out.piece.setJson(json.substring(from, end));
                    out.used += utf8Length(json, from, end);
                    from = end;
                    if (from >= json.length()) {
                        break;
                    }
                    out.piece.setPartial(true);
                    out.flush();
                }
            }
        }
        out.flush();
        if (out.chunks.isEmpty()) {
            out.chunks.add(List.of());
        }
        return out.chunks;
    }

    /** The entries from their pieces, as the server joins them. */
    static List<StateEntry> join(List<StateEntry> pieces) {
        List<StateEntry.Builder> joined = new ArrayList<>();
        List<StringBuilder> lastText = new ArrayList<>();
        boolean cutOpen = false;
        for (StateEntry piece : pieces) {
            StateEntry.Builder last = joined.isEmpty() ? null : joined.get(joined.size() - 1);
            boolean isList = piece.hasList();
            boolean continues = last != null && last.getKey().equals(piece.getKey()) && last.hasList() == isList;
            List<String> values = isList ? piece.getList().getItemsList() : List.of(piece.getJson());
            if (cutOpen) {
                if (!continues || values.isEmpty()) {
                    throw new IllegalStateException("a partial state entry is not continued: " + piece.getKey());
                }
                StringBuilder text = lastText.get(lastText.size() - 1);
                text.append(values.get(0));
                if (isList) {
                    JsonList.Builder list = last.getListBuilder();
                    list.setItems(list.getItemsCount() - 1, text.toString());
                    for (String v : values.subList(1, values.size())) {
                        list.addItems(v);
                    }
                    if (values.size() > 1) {
                        lastText.set(lastText.size() - 1, new StringBuilder(values.get(values.size() - 1)));
                    }
                } else {
                    last.setJson(text.toString());
                }
            } else if (continues && isList) {
                last.getListBuilder().addAllItems(values);
                lastText.set(lastText.size() - 1, new StringBuilder(values.isEmpty() ? "" : values.get(values.size() - 1)));
            } else {
                StateEntry.Builder copy = piece.toBuilder().setPartial(false);
                joined.add(copy);
                lastText.add(new StringBuilder(values.isEmpty() ? "" : values.get(values.size() - 1)));
            }
            cutOpen = piece.getPartial();
        }
        if (cutOpen) {
            throw new IllegalStateException("the state stream ended inside an entry");
        }
        List<StateEntry> out = new ArrayList<>(joined.size());
        for (StateEntry.Builder b : joined) {
            out.add(b.build());
        }
        return out;
    }

    private static final class Cutter {
        final int budget;
        final List<List<StateEntry>> chunks = new ArrayList<>();
        List<StateEntry.Builder> current = new ArrayList<>();
        StateEntry.Builder piece;
        int used;

        Cutter(int budget) {
            this.budget = budget;
        }

        int room() {
            return budget - used;
        }

        void open(String key, boolean isList) {
            int cost = ENTRY_OVERHEAD + key.getBytes(StandardCharsets.UTF_8).length;
            if (!current.isEmpty() && room() < cost + MIN_CUT) {
                flush();
            }
            piece = StateEntry.newBuilder().setKey(key);
            if (isList) {
                piece.setList(JsonList.newBuilder());
            }
            current.add(piece);
            used += cost;
        }

        void flush() {
            if (!current.isEmpty()) {
                List<StateEntry> built = new ArrayList<>(current.size());
                for (StateEntry.Builder b : current) {
                    built.add(b.build());
                }
                chunks.add(built);
            }
            current = new ArrayList<>();
            used = 0;
        }
    }

    /** The end index of the longest run from {@code from} of at most {@code maxBytes} UTF-8 bytes. */
    private static int cut(String s, int from, int maxBytes) {
        int bytes = 0;
        int i = from;
        while (i < s.length()) {
            char c = s.charAt(i);
            int width;
            int step = 1;
            if (c < 0x80) {
                width = 1;
            } else if (c < 0x800) {
                width = 2;
            } else if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
                width = 4;
                step = 2;
            } else {
                width = 3;
            }
            if (bytes + width > maxBytes) {
                break;
            }
            bytes += width;
            i += step;
        }
        return i == from && from < s.length() ? from + (Character.isHighSurrogate(s.charAt(from)) && from + 1 < s.length() ? 2 : 1) : i;
    }

    private static int utf8Length(String s, int from, int to) {
        int bytes = 0;
        for (int i = from; i < to; i++) {
            char c = s.charAt(i);
            if (c < 0x80) {
                bytes += 1;
            } else if (c < 0x800) {
                bytes += 2;
            } else if (Character.isHighSurrogate(c) && i + 1 < to && Character.isLowSurrogate(s.charAt(i + 1))) {
                bytes += 4;
                i++;
            } else {
                bytes += 3;
            }
        }
        return bytes;
    }
}
