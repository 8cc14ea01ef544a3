package io.etcdlock;

import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The renewal watch of a hold (a {@link LockGuard}, a {@link MultiLockGuard}): the listener is
 * called once per change of the hold's renewal, in order, on an etcdlock runtime thread, until
 * the hold ends. Each native watch reports one change and is re-armed with the state the
 * listener saw, so no change is missed between two watches.
 */
final class RenewalWatch {
    private static final Logger LOG = LoggerFactory.getLogger(RenewalWatch.class);

    /** Starts the native watch of a pinned hold for completion {@code id}. */
    interface Start {
        void start(long hold, long id, boolean failing);
    }

    private RenewalWatch() {}

    /**
     * Watch {@code handle}'s renewal from the state {@code failing} on; {@code what} names the
     * hold in the log line of a listener that throws. A closed hold is not watched.
     */
    static void watch(NativeHandle handle, Start start, String what, Consumer<Renewal> listener, boolean failing) {
        long id = NativeBridge.register((h, ms, err) -> {
            if (err != null || ms == -2) {
                return; // the hold ended
            }
            Renewal r = Renewal.ofMillis(ms);
            try {
                listener.accept(r);
            } catch (Throwable t) {
                LOG.warn("etcdlock: a renewal listener of {} threw", what, t);
            }
            try {
                watch(handle, start, what, listener, r.isFailing());
            } catch (EtcdLockException ended) {
                // the hold was closed meanwhile
            }
        });
        long p;
        try {
            p = handle.pin();
        } catch (EtcdLockException e) {
            NativeBridge.forget(id);
            return;
        }
        try {
            start.start(p, id, failing);
        } catch (RuntimeException e) {
            NativeBridge.forget(id);
            throw e;
        } finally {
            handle.unpin();
        }
    }
}
