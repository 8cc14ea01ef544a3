package io.etcdlock;

import java.time.Duration;

/**
 * A count-down latch shared by every process that opens the same name with the same count
 * ({@link EtcdLockClient#latch(String, long)}): {@link java.util.concurrent.CountDownLatch}
 * across processes and languages. {@link #countDown()} lowers the count; {@link #await()} waits
 * until it is zero, and every waiter wakes at once when it gets there (a watch, no polling).
 * A latch at zero stays at zero while any client has it open.
 *
 * <pre>{@code
 * try (EtcdLatch shards = client.latch("nightly-shards", 3)) {
 *     shards.countDown();                       // in each of 3 workers, when its shard is done
 *     shards.await(Duration.ofMinutes(5));      // in the reducer
 * }
 * }</pre>
 *
 * Thread-safe. The latch lives on a lease its open handles renew: close it when done (the
 * client's close ends it too); once every handle is closed, its keys expire within the TTL.
 * After {@link #close()} every call throws {@link ClosedException}; when every client that had
 * it open is gone, calls throw {@link LockLostException} with {@link LossReason#LEASE_EXPIRED}.
 */
public final class EtcdLatch implements AutoCloseable {
    /** Keeps the client reachable while this handle is (its cleaner would close it). */
    @SuppressWarnings("unused")
    private final EtcdLockClient client;
    private final String name;
    private final long initial;
    private final NativeHandle handle;
    private final java.lang.ref.Cleaner.Cleanable cleanable;

    EtcdLatch(EtcdLockClient client, String name, long initial, long ptr) {
        this.client = client;
        this.name = name;
        this.initial = initial;
        this.handle = new NativeHandle(ptr, NativeBridge::freeLatch,
                () -> new ClosedException("latch \"" + name + "\" was closed"));
        this.cleanable = EtcdLockClient.CLEANER.register(this, handle::close);
    }

    /** The latch's name. */
    public String name() {
        return name;
    }

    /** The count it was opened with (every handle of the name has the same). */
    public long initialCount() {
        return initial;
    }

    /**
     * Lower the count by one; at zero every waiter is released. At zero already it does nothing
     * (as {@link java.util.concurrent.CountDownLatch#countDown()}).
     *
     * @return the count after
     */
    public long countDown() {
        Args.checkNotOnRuntimeThread("latch \"" + name + "\"");
        long h = handle.pin();
        try {
            return NativeBridge.latchCountDown(h);
        } finally {
            handle.unpin();
        }
    }

    /** The count now (one read of etcd). */
    public long getCount() {
        Args.checkNotOnRuntimeThread("latch \"" + name + "\"");
        long h = handle.pin();
        try {
            return NativeBridge.latchCount(h);
        } finally {
            handle.unpin();
        }
    }

    /**
     * Wait as long as it takes for the count to reach zero (at once if it is zero).
     *
     * @throws InterruptedException if the thread is interrupted (the wait is cancelled)
     */
    public void await() throws InterruptedException {
        await(-1);
    }

    /**
     * Wait at most {@code timeout} for the count to reach zero; zero looks once.
     *
     * @throws LockTimeoutException if the count was not zero in time
     * @throws InterruptedException if the thread is interrupted (the wait is cancelled)
     */
    public void await(Duration timeout) throws InterruptedException {
        await(Args.toMillis(timeout));
    }

    private void await(long ms) throws InterruptedException {
        String what = "latch \"" + name + "\"";
        NativeWait.await(what, id -> {
            long h = handle.pin();
            try {
                NativeBridge.latchWaitAsync(h, ms, id);
            } finally {
                handle.unpin();
            }
        }, true);
    }

    /** Whether {@link #close()} was called. */
    public boolean isClosed() {
        return handle.isClosed();
    }

    /**
     * Stop renewing the latch from this handle. Idempotent. The count stays for the other
     * handles; a wait in progress on this handle goes on until it ends.
     */
    @Override
    public void close() {
        if (handle.isClosed()) {
            return;
        }
        long h;
        try {
            h = handle.pin();
        } catch (ClosedException e) {
            return;
        }
        try {
            NativeBridge.latchClose(h);
        } finally {
            handle.unpin();
            cleanable.clean();
        }
    }

    @Override
    public String toString() {
        return "EtcdLatch{name=" + name + ", initial=" + initial + (isClosed() ? ", closed" : "") + "}";
    }
}
