package io.etcdlock;

import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * A held distributed lock. Close it (try-with-resources) to release. While held it
 * offers the {@linkplain #fencingToken() fencing token}, loss notification, and
 * guarded etcd operations that etcd itself rejects once the hold is gone:
 *
 * <pre>{@code
 * try (LockGuard guard = client.newLock("stock").acquire(Duration.ofSeconds(5))) {
 *     guard.onLost(reason -> log.warn("lost the stock lock: {}", reason));
 *     String stock = guard.get("inventory/stock");
 *     guard.put("inventory/stock", Integer.toString(Integer.parseInt(stock) - 1));
 * }
 * }</pre>
 *
 * Thread-safe. A guard that is never closed is released when it is garbage collected
 * (a safety net, not a substitute for closing).
 */
public final class LockGuard implements AutoCloseable {
    private final String name;
    @SuppressWarnings("unused") // keeps the client (and its lease) reachable while the guard is
    private final EtcdLockClient client;
    private final NativeHandle handle;
    private final java.lang.ref.Cleaner.Cleanable cleanable;
    private final String key;
    private final long leaseId;
    private final long fencingToken;
    private final LossListeners<LossReason> lossListeners;
    private volatile boolean unlocked;
    /** The LockLost the first close() reported; every later close() reports it again. */
    private volatile LockLostException lostAtClose;
    private final Object closing = new Object();
    /** The hold's span (see {@link Telemetry}), or null. */
    private volatile Telemetry.Hold holdSpan;

    LockGuard(EtcdLockClient client, String name, long ptr) {
        this.client = client;
        this.name = name;
        this.handle = new NativeHandle(ptr, NativeBridge::freeGuard,
                () -> new NotHeldException("lock \"" + name + "\" was released by this guard"));
        this.cleanable = EtcdLockClient.CLEANER.register(this, handle::close);
        this.key = NativeBridge.guardKey(ptr);
        this.leaseId = NativeBridge.guardInfo(ptr, 0);
        this.fencingToken = NativeBridge.guardInfo(ptr, 1);
        this.lossListeners = new LossListeners<>(handle, NativeBridge::watchLoss,
                (h, reason, err) -> LossReason.of((int) reason), "lock " + name);
    }

    /**
     * Trace this hold with {@code span}: ended by {@link #close()}, or by the loss as core
     * reports it (a loss listener), whichever comes first.
     */
    void traceHold(Telemetry.Hold span) {
        holdSpan = span;
        onLost(this::endHoldSpan);
    }

    /** End the hold's span, if any: released ({@code lost} null) or lost. */
    void endHoldSpan(LossReason lost) {
        Telemetry.Hold s = holdSpan;
        if (s != null) {
            s.end(lost);
        }
    }

    /** The lock name. */
    public String name() {
        return name;
    }

    /** Our key in etcd (with the namespace), e.g. {@code orders/694d7a3e4b2c8f05}. */
    public String key() {
        return key;
    }

    /** The lease that keeps our key alive (shared by all locks of the client). */
    public long leaseId() {
        return leaseId;
    }

    /**
     * The fencing token: our key's create revision. It strictly increases from one holder
     * of a lock to the next; pass it to resources that can reject writes from a stale holder.
     */
    public long fencingToken() {
        return fencingToken;
    }

    /**
     * True while the lock is held: not released, not reported lost, and inside the local
     * validity window (last acknowledged keep-alive + TTL - margin).
     */
    public boolean isHeld() {
        if (unlocked) {
            return false;
        }
        long p;
        try {
            p = handle.pin();
        } catch (EtcdLockException e) {
            return false;
        }
        try {
            return NativeBridge.guardInfo(p, 2) != 0;
        } finally {
            handle.unpin();
        }
    }

    /** Why the hold was lost, if it was. */
    public Optional<LossReason> lossReason() {
        long p;
        try {
            p = handle.pin();
        } catch (EtcdLockException e) {
            LockLostException l = lostAtClose; // closed after the loss: still lost
            return l == null ? Optional.empty() : Optional.ofNullable(l.reason());
        }
        try {
            return Optional.ofNullable(LossReason.of((int) NativeBridge.guardInfo(p, 3)));
        } finally {
            handle.unpin();
        }
    }

    /**
     * Call {@code listener} once if the hold is lost (not when it is released by
     * {@link #close()}). It runs on an etcdlock runtime thread; keep it short and do not
     * make blocking etcdlock calls in it. If the hold is already lost it runs at once on
     * the calling thread.
     */
    public LockGuard onLost(Consumer<LossReason> listener) {
        if (listener == null) {
            throw new InvalidArgumentException("listener must not be null");
        }
        lossListeners.add(listener, lossReason().orElse(null));
        return this;
    }

    /** Whether the keep-alive renewal is failing now: see {@link Renewal}. */
    public Renewal renewal() {
        long p;
        try {
            p = handle.pin();
        } catch (EtcdLockException e) {
            return Renewal.OK;
        }
        try {
            return Renewal.ofMillis(NativeBridge.guardInfo(p, 4));
        } finally {
            handle.unpin();
        }
    }

    /**
     * Call {@code listener} at each change of {@link #renewal()} (failing, then renewed)
     * until the hold ends. It runs on an etcdlock runtime thread, one call at a time, in
     * order; keep it short and make no blocking etcdlock calls in it.
     */
    public LockGuard onRenewal(Consumer<Renewal> listener) {
        if (listener == null) {
            throw new InvalidArgumentException("listener must not be null");
        }
        watchRenewal(listener, false);
        return this;
    }

    private void watchRenewal(Consumer<Renewal> listener, boolean failing) {
        RenewalWatch.watch(handle, NativeBridge::watchRenewal, "lock " + name, listener, failing);
    }

    /**
     * Guarded put: applied by etcd only while we hold the lock (key namespaced like the lock).
     * Keep data keys outside the lock's own prefix {@code <name>/}: a key there would queue
     * as a contender and block the next acquisition.
     */
    public void put(byte[] key, byte[] value) {
        Args.checkNotOnRuntimeThread("guarded put on lock \"" + name + "\"");
        long p = handle.pin();
        try {
            NativeBridge.put(p, key, value);
        } finally {
            handle.unpin();
        }
    }

    /** Replace our own key's value while held (an election's proclamation). */
    void setValue(byte[] value) {
        if (value == null) {
            throw new InvalidArgumentException("value must not be null");
        }
        Args.checkNotOnRuntimeThread("proclaim on \"" + name + "\"");
        long p = handle.pin();
        try {
            NativeBridge.proclaim(p, value);
        } finally {
            handle.unpin();
        }
    }

    /** Guarded put of UTF-8 strings. */
    public void put(String key, String value) {
        put(utf8(key, "key"), utf8(value, "value"));
    }

    /** Guarded get: the value, or null if the key does not exist. */
    public byte[] get(byte[] key) {
        Args.checkNotOnRuntimeThread("guarded get on lock \"" + name + "\"");
        long p = handle.pin();
        try {
            return NativeBridge.get(p, key);
        } finally {
            handle.unpin();
        }
    }

    /** Guarded get of a UTF-8 string value, or null. */
    public String get(String key) {
        byte[] v = get(utf8(key, "key"));
        return v == null ? null : new String(v, StandardCharsets.UTF_8);
    }

    /** Guarded delete; true if the key existed. */
    public boolean delete(byte[] key) {
        Args.checkNotOnRuntimeThread("guarded delete on lock \"" + name + "\"");
        long p = handle.pin();
        try {
            return NativeBridge.delete(p, key);
        } finally {
            handle.unpin();
        }
    }

    /** Guarded delete of a UTF-8 key. */
    public boolean delete(String key) {
        return delete(utf8(key, "key"));
    }

    /**
     * Release the lock (delete our key). Idempotent: closing a released guard again does
     * nothing.
     *
     * @throws LockLostException if the hold had been lost before, so the caller learns its
     *     critical section may not have been protected to the end; every later close of a
     *     lost hold throws it again (a lost hold never turns into a clean release)
     */
    @Override
    public void close() {
        synchronized (closing) {
            if (unlocked) {
                LockLostException l = lostAtClose;
                if (l != null) {
                    throw new LockLostException(l.reason(), l.getMessage());
                }
                return;
            }
            long p;
            try {
                p = handle.pin();
            } catch (EtcdLockException e) {
                return;
            }
            try {
                unlocked = true;
                NativeBridge.unlock(p);
                endHoldSpan(null);
            } catch (LockLostException e) {
                lostAtClose = e;
                endHoldSpan(e.reason() == null ? LossReason.CONNECTION_LOST : e.reason());
                throw e;
            } finally {
                handle.unpin();
                handle.close();
                cleanable.clean();
            }
        }
    }

    /** Same as {@link #close()}. */
    public void unlock() {
        close();
    }

    @Override
    public String toString() {
        return "LockGuard{name=" + name + ", key=" + key + ", fencingToken=" + fencingToken + "}";
    }

    static byte[] utf8(String s, String what) {
        if (s == null) {
            throw new InvalidArgumentException(what + " must not be null");
        }
        // A lone surrogate has no UTF-8 form: getBytes would silently write '?'.
        return Args.checkText(s, what).getBytes(StandardCharsets.UTF_8);
    }

    /**
     * Free the native hold without waiting (its drop releases it in the background): for a
     * hold nobody received. Idempotent; the cleaner does not free it again.
     */
    void discard() {
        cleanable.clean();
    }
}
