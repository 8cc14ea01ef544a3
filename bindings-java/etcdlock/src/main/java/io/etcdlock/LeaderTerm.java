package io.etcdlock;

import java.util.concurrent.CompletableFuture;

/**
 * One term of leadership of an {@link EtcdLeaderLoop}, handed to its {@link LeaderTask}: the
 * leadership (fencing token, guarded put/get/delete, proclaim) and whether the term is over.
 * The term is over (cancelled) when leadership is lost, the loop is closed, or the task returned.
 */
public final class LeaderTerm {
    private final NativeHandle handle;
    private final long id;
    private final Leadership leadership;
    private final CompletableFuture<Void> cancelled = new CompletableFuture<>();
    private final java.lang.ref.Cleaner.Cleanable cleanable;

    LeaderTerm(EtcdLockClient client, String name, long term, long guard) {
        this.id = term;
        this.handle = new NativeHandle(term, NativeBridge::freeTerm,
                () -> new NotHeldException("the leader term of \"" + name + "\" has ended"));
        this.cleanable = EtcdLockClient.CLEANER.register(this, handle::close);
        this.leadership = new Leadership(new LockGuard(client, name, guard));
    }

    /**
     * The leadership of this term: fencing token, guarded operations, {@link Leadership#proclaim}.
     * The loop resigns when the task returns; closing it resigns earlier.
     */
    public Leadership leadership() {
        return leadership;
    }

    /** Our key's create revision: strictly increases from one term (of any candidate) to the next. */
    public long fencingToken() {
        return leadership.fencingToken();
    }

    /** Our candidate key in etcd. */
    public String key() {
        return leadership.key();
    }

    /** Guarded put: written only while this term's leadership holds (see {@link LockGuard#put}). */
    public void put(String key, String value) {
        leadership.guard().put(key, value);
    }

    /** Guarded put of bytes (see {@link LockGuard#put(byte[], byte[])}). */
    public void put(byte[] key, byte[] value) {
        leadership.guard().put(key, value);
    }

    /** Guarded get: the value, or null if absent (see {@link LockGuard#get(String)}). */
    public String get(String key) {
        return leadership.guard().get(key);
    }

    /** True once the term is over: leadership lost, the loop closed, or the task returned. */
    public boolean isCancelled() {
        if (cancelled.isDone()) {
            return true;
        }
        long p;
        try {
            p = handle.pin();
        } catch (EtcdLockException e) {
            return true;
        }
        try {
            return NativeBridge.termEnd(p, false);
        } finally {
            handle.unpin();
        }
    }

    /** Completes when the term is over (see {@link #isCancelled()}). */
    public CompletableFuture<Void> cancelled() {
        return cancelled;
    }

    /** The native term's number (never reused): matches the loop's cancellation reports. */
    long id() {
        return id;
    }

    void markCancelled() {
        cancelled.complete(null);
    }

    /** The task has ended: the loop resigns (if still leader) and goes on. Idempotent. */
    void end() {
        markCancelled();
        long p;
        try {
            p = handle.pin();
        } catch (EtcdLockException e) {
            return;
        }
        try {
            NativeBridge.termEnd(p, true);
        } finally {
            handle.unpin();
            handle.close();
            cleanable.clean();
        }
    }

    @Override
    public String toString() {
        return "LeaderTerm{key=" + key() + ", fencingToken=" + fencingToken() + "}";
    }
}
