package io.etcdlock;

import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.function.BiConsumer;
import java.util.function.Consumer;

/**
 * Several locks held together ({@link EtcdMultiLock#acquire(java.time.Duration)}).
 * Every waiter key was created in one etcd transaction, so all clients queue in the same order
 * on every name: no deadlock and no release-and-retry loop. Losing any one lock is losing the
 * hold. Close it to release every lock. Thread-safe; released when garbage collected if never
 * closed (a safety net).
 */
public final class MultiLockGuard implements AutoCloseable {
    private final LossListeners<java.util.Map.Entry<String, LossReason>> lossListeners;
    private final List<String> names;
    private final List<String> keys;
    private final long fencingToken;
    private final NativeHandle handle;
    private final java.lang.ref.Cleaner.Cleanable cleanable;
    @SuppressWarnings("unused") // keeps the client (and its lease) reachable
    private final EtcdLockClient client;
    private final Object closing = new Object();
    private volatile boolean unlocked;

    MultiLockGuard(EtcdLockClient client, List<String> names, long ptr) {
        this.client = client;
        this.names = Collections.unmodifiableList(names);
        this.handle = new NativeHandle(ptr, NativeBridge::freeMulti,
                () -> new NotHeldException("locks " + names + " were released by this guard"));
        this.cleanable = EtcdLockClient.CLEANER.register(this, handle::close);
        this.keys = Collections.unmodifiableList(new RecipeCodec(NativeBridge.multiKeys(ptr)).strings());
        this.fencingToken = NativeBridge.multiInfo(ptr, 0);
        this.lossListeners = new LossListeners<>(handle, NativeBridge::watchMultiLoss, (index, reason, err) -> {
            LossReason r = LossReason.of((int) reason);
            boolean named = err == null && index >= 0 && index < names.size();
            return named && r != null ? new java.util.AbstractMap.SimpleImmutableEntry<>(names.get((int) index), r) : null;
        }, "locks " + names);
    }

    /** The lock names, in the order given. */
    public List<String> names() {
        return names;
    }

    /** Our key on each lock, in the same order. */
    public List<String> keys() {
        return keys;
    }

    /** The fencing token of the hold (the same on every name: one transaction created every key). */
    public long fencingToken() {
        return fencingToken;
    }

    /** True while every lock is held. */
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
            return NativeBridge.multiInfo(p, 1) != 0;
        } finally {
            handle.unpin();
        }
    }

    /**
     * Guarded put: applied by etcd only while every lock is held (one transaction compares
     * every key's fencing token; {@link LockLostException} otherwise, and the lock found lost
     * reports it). The key may not be under any of the locks' prefixes.
     */
    public void put(byte[] key, byte[] value) {
        Args.checkNotOnRuntimeThread("guarded put on locks " + names);
        long p = handle.pin();
        try {
            NativeBridge.multiPut(p, key, value);
        } finally {
            handle.unpin();
        }
    }

    /** Guarded put of UTF-8 strings. */
    public void put(String key, String value) {
        put(LockGuard.utf8(key, "key"), LockGuard.utf8(value, "value"));
    }

    /** Guarded get under every lock: the value, or null if the key does not exist. */
    public byte[] get(byte[] key) {
        Args.checkNotOnRuntimeThread("guarded get on locks " + names);
        long p = handle.pin();
        try {
            return NativeBridge.multiGet(p, key);
        } finally {
            handle.unpin();
        }
    }

    /** Guarded get of a UTF-8 string value, or null. */
    public String get(String key) {
        byte[] v = get(LockGuard.utf8(key, "key"));
        return v == null ? null : new String(v, java.nio.charset.StandardCharsets.UTF_8);
    }

    /** Guarded delete under every lock; true if the key existed. */
    public boolean delete(byte[] key) {
        Args.checkNotOnRuntimeThread("guarded delete on locks " + names);
        long p = handle.pin();
        try {
            return NativeBridge.multiDelete(p, key);
        } finally {
            handle.unpin();
        }
    }

    /** Guarded delete of a UTF-8 key. */
    public boolean delete(String key) {
        return delete(LockGuard.utf8(key, "key"));
    }

    /** The name of the first lock lost and why, if one was. */
    public Optional<java.util.Map.Entry<String, LossReason>> lost() {
        long p;
        try {
            p = handle.pin();
        } catch (EtcdLockException e) {
            return Optional.empty();
        }
        try {
            int i = (int) NativeBridge.multiInfo(p, 2);
            if (i < 0) {
                return Optional.empty();
            }
            LossReason r = LossReason.of((int) NativeBridge.multiInfo(p, 3));
            return Optional.of(new java.util.AbstractMap.SimpleImmutableEntry<>(names.get(i), r));
        } finally {
            handle.unpin();
        }
    }

    /**
     * Call {@code listener} once, with the name and reason of the first lock lost, if the hold
     * is lost (losing any one lock is losing the hold; not called when {@link #close()}
     * releases it). As {@link LockGuard#onLost}: it runs on an etcdlock runtime thread (keep it
     * short, no blocking etcdlock calls in it), or at once on the calling thread if the hold is
     * already lost.
     */
    public MultiLockGuard onLost(BiConsumer<String, LossReason> listener) {
        if (listener == null) {
            throw new InvalidArgumentException("listener must not be null");
        }
        lossListeners.add(e -> listener.accept(e.getKey(), e.getValue()), lost().orElse(null));
        return this;
    }

    /**
     * Whether the keep-alive renewal is failing now: see {@link Renewal}. Every lock of a
     * multi-lock is held on one session, so this is each lock's {@link LockGuard#renewal()}.
     */
    public Renewal renewal() {
        long p;
        try {
            p = handle.pin();
        } catch (EtcdLockException e) {
            return Renewal.OK;
        }
        try {
            return Renewal.ofMillis(NativeBridge.multiInfo(p, 4));
        } finally {
            handle.unpin();
        }
    }

    /**
     * Call {@code listener} at each change of {@link #renewal()} (failing, then renewed) until
     * the hold ends (any lock lost, or all released), as {@link LockGuard#onRenewal}: on an
     * etcdlock runtime thread, one call at a time, in order.
     */
    public MultiLockGuard onRenewal(Consumer<Renewal> listener) {
        if (listener == null) {
            throw new InvalidArgumentException("listener must not be null");
        }
        watchRenewal(listener, false);
        return this;
    }

    private void watchRenewal(Consumer<Renewal> listener, boolean failing) {
        RenewalWatch.watch(handle, NativeBridge::watchMultiRenewal, "locks " + names, listener, failing);
    }

    /**
     * Release every lock (each is tried). Idempotent.
     *
     * @throws LockLostException if one of them had been lost
     */
    @Override
    public void close() {
        synchronized (closing) {
            if (unlocked) {
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
                NativeBridge.multiUnlock(p);
            } finally {
                handle.unpin();
                handle.close();
                cleanable.clean();
            }
        }
    }

    @Override
    public String toString() {
        return "MultiLockGuard{names=" + names + ", fencingToken=" + fencingToken + "}";
    }

    /**
     * Free the native hold without waiting (its drop releases it in the background): for a
     * hold nobody received. Idempotent; the cleaner does not free it again.
     */
    void discard() {
        cleanable.clean();
    }
}
