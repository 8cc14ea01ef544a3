package io.etcdlock;

import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * A running {@link EtcdLockClient#observe(String, Consumer)}: the listener gets the current
 * leader first, then each change, and {@link Optional#empty()} whenever nobody leads (which
 * Go's {@code Observe} never reports). Close it to stop.
 */
public final class LeaderObservation implements AutoCloseable {
    private final String name;
    private final long id;
    private final CompletableFuture<Void> ended = new CompletableFuture<>();

    LeaderObservation(String name, long id) {
        this.name = name;
        this.id = id;
    }

    /** Start observing {@code name} on the native client behind {@code handle}. */
    static LeaderObservation start(NativeHandle handle, String name, Consumer<Optional<Leader>> listener) {
        long id = NativeBridge.nextId();
        LeaderObservation o = new LeaderObservation(name, id);
        NativeBridge.registerObserver(id, new NativeBridge.Observer(listener, o));
        long c;
        try {
            c = handle.pin();
        } catch (RuntimeException e) {
            NativeBridge.forgetObserver(id);
            throw e;
        }
        try {
            NativeBridge.observe(c, name, id);
        } catch (RuntimeException e) {
            NativeBridge.forgetObserver(id);
            throw e;
        } finally {
            handle.unpin();
        }
        return o;
    }

    long id() {
        return id;
    }

    void end(EtcdLockException error) {
        if (error == null || error instanceof CancelledException) {
            ended.complete(null);
        } else {
            ended.completeExceptionally(error);
        }
    }

    /**
     * Completes when the observation ends: normally after {@link #close()}, exceptionally with
     * the error that ended it (for example {@link ClosedException} when the client closed).
     */
    public CompletableFuture<Void> ended() {
        return ended;
    }

    /** Stop observing; the listener is not called after {@link #ended()} completes. Idempotent. */
    @Override
    public void close() {
        NativeBridge.cancelAsync(id);
    }

    @Override
    public String toString() {
        return "LeaderObservation{name=" + name + (ended.isDone() ? ", ended}" : "}");
    }
}
