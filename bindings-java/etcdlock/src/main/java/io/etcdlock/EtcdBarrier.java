package io.etcdlock;

import java.time.Duration;

/**
 * A barrier for a fixed number of parties ({@link EtcdLockClient#barrier(String, int)}): a
 * one-shot {@link java.util.concurrent.CyclicBarrier} across processes and languages.
 * {@link #await()} returns in every party at once when the last one has arrived. A party that
 * dies while waiting frees its place for another. Once released the barrier is finished: a party
 * that arrives after it is refused ({@link InvalidArgumentException}) until every handle is
 * closed and its keys have expired, so use a new name per round.
 *
 * <pre>{@code
 * try (EtcdBarrier start = client.barrier("load-test-start", 3)) {
 *     int index = start.await(Duration.ofMinutes(1)); // 0 for the first to arrive, 2 for the last
 * }
 * }</pre>
 *
 * Thread-safe. Close it when done (the client's close ends it too). After {@link #close()} every
 * call throws {@link ClosedException}.
 */
public final class EtcdBarrier implements AutoCloseable {
    /** Keeps the client reachable while this handle is (its cleaner would close it). */
    @SuppressWarnings("unused")
    private final EtcdLockClient client;
    private final String name;
    private final int parties;
    private final NativeHandle handle;
    private final java.lang.ref.Cleaner.Cleanable cleanable;

    EtcdBarrier(EtcdLockClient client, String name, int parties, long ptr) {
        this.client = client;
        this.name = name;
        this.parties = parties;
        this.handle = new NativeHandle(ptr, NativeBridge::freeBarrier,
                () -> new ClosedException("barrier \"" + name + "\" was closed"));
        this.cleanable = EtcdLockClient.CLEANER.register(this, handle::close);
    }

    /** The barrier's name. */
    public String name() {
        return name;
    }

    /** How many parties it waits for. */
    public int parties() {
        return parties;
    }

    /**
     * Arrive and wait as long as it takes for the other parties.
     *
     * @return this party's arrival index: 0 for the first, {@code parties() - 1} for the one
     *     that released everyone
     * @throws InvalidArgumentException if the barrier has already released its parties, or
     *     already has all its parties waiting
     * @see #await(Duration)
     */
    public int await() {
        return await(-1);
    }

    /**
     * Arrive and wait at most {@code timeout} for the other parties. On a timeout this party
     * leaves (its place is free for another) and {@link LockTimeoutException} is thrown.
     *
     * <p>The wait is not interruptible, as {@link EtcdLock#acquire(Duration)}: an
     * interrupt is re-asserted when it returns. A party that left mid-wait would still count as
     * arrived, so the only ways out are the release, the timeout and an error: give a timeout.
     *
     * @return this party's arrival index (see {@link #await()})
     * @throws LockTimeoutException if not every party arrived in time
     * @throws InvalidArgumentException if the barrier has already released its parties, or
     *     already has all its parties waiting
     */
    public int await(Duration timeout) {
        return await(Args.toMillis(timeout));
    }

    private int await(long ms) {
        String what = "barrier \"" + name + "\"";
        try {
            return (int) NativeWait.await(what, id -> {
                long h = handle.pin();
                try {
                    NativeBridge.barrierWaitAsync(h, ms, id);
                } finally {
                    handle.unpin();
                }
            }, false);
        } catch (InterruptedException e) {
            throw new IllegalStateException("an uninterruptible wait was interrupted", e);
        }
    }

    /** Whether {@link #close()} was called. */
    public boolean isClosed() {
        return handle.isClosed();
    }

    /** Stop renewing the barrier from this handle. Idempotent. */
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
            NativeBridge.barrierClose(h);
        } finally {
            handle.unpin();
            cleanable.clean();
        }
    }

    @Override
    public String toString() {
        return "EtcdBarrier{name=" + name + ", parties=" + parties + (isClosed() ? ", closed" : "") + "}";
    }
}
