package io.etcdlock;

import java.util.Collections;
import java.util.List;
import java.util.Optional;

/**
 * Several locks held together ({@link EtcdLockClient#acquireAll(List, java.time.Duration)}).
 * Every waiter key was created in one etcd transaction, so all clients queue in the same order
 * on every name: no deadlock and no release-and-retry loop. Losing any one lock is losing the
 * hold. Close it to release every lock. Thread-safe; released when garbage collected if never
 * closed (a safety net).
 */
public final class MultiLockGuard implements AutoCloseable {
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
}
