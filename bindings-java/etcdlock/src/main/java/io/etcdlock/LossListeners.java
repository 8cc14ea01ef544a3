package io.etcdlock;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The loss listeners of a hold (a {@link LockGuard}, a {@link MultiLockGuard}): each listener
 * is called once with the hold's loss, on an etcdlock runtime thread when the native loss watch
 * reports it, or at once on the calling thread when the hold is already lost. The first listener
 * starts the hold's one native loss watch; a release without a loss calls none.
 *
 * @param <T> what a loss is for the hold (its reason; a multi-lock's first lost name and reason)
 */
final class LossListeners<T> {
    private static final Logger LOG = LoggerFactory.getLogger(LossListeners.class);

    /** Starts the native loss watch of a pinned hold for completion {@code id}. */
    interface Start {
        void start(long hold, long id);
    }

    /** The loss a watch's completion reports, or null when the hold ended without one. */
    interface Decode<T> {
        T loss(long handle, long value, EtcdLockException error);
    }

    private final NativeHandle handle;
    private final Start start;
    private final Decode<T> decode;
    private final String what;
    private final List<Consumer<T>> listeners = new ArrayList<>();
    private boolean watching; // guarded by listeners
    private T fired; // guarded by listeners

    /** {@code what} names the hold in the log line of a listener that throws. */
    LossListeners(NativeHandle handle, Start start, Decode<T> decode, String what) {
        this.handle = handle;
        this.start = start;
        this.decode = decode;
        this.what = what;
    }

    /** Add {@code listener}; {@code already} is the hold's loss as read now (null: not lost). */
    void add(Consumer<T> listener, T already) {
        boolean first = false;
        synchronized (listeners) {
            if (already == null) {
                already = fired;
            }
            if (already == null) {
                listeners.add(listener);
                first = !watching;
                watching = true;
            }
        }
        if (already != null) {
            listener.accept(already);
            return;
        }
        if (first) {
            long id = NativeBridge.register((h, v, err) -> fire(decode.loss(h, v, err)));
            long p = handle.pin();
            try {
                start.start(p, id);
            } catch (RuntimeException e) {
                NativeBridge.forget(id);
                throw e;
            } finally {
                handle.unpin();
            }
        }
    }

    private void fire(T loss) {
        if (loss == null) {
            return; // released normally
        }
        List<Consumer<T>> copy;
        synchronized (listeners) {
            if (fired != null) {
                return;
            }
            fired = loss;
            copy = new ArrayList<>(listeners);
            listeners.clear();
        }
        for (Consumer<T> l : copy) {
            try {
                l.accept(loss);
            } catch (Throwable t) {
                LOG.warn("etcdlock: a loss listener of {} threw", what, t);
            }
        }
    }
}
