package io.etcdlock;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.TimeUnit;

/**
 * A distributed counting semaphore shaped like {@link java.util.concurrent.Semaphore}: at most
 * {@link #permits()} holders of {@link #name()} at once across every process, served in arrival
 * order (FIFO, like a fair {@code Semaphore}). Obtain it from
 * {@link EtcdLockClient#newSemaphore(String, int)}:
 *
 * <pre>{@code
 * EtcdSemaphore transcoders = client.newSemaphore("transcoders", 3);
 * transcoders.acquire();
 * try {
 *     transcode(file); // at most 3 at once, cluster-wide
 * } finally {
 *     transcoders.release();
 * }
 * }</pre>
 *
 * Where it differs from {@code Semaphore}: each acquisition is one permit held in etcd, so
 * {@link #release()} gives back a permit this object holds (the oldest) and throws
 * {@link NotHeldException} when it holds none, instead of creating a permit; permits are
 * acquired one at a time. Waits happen in Java: virtual threads unmount while they wait.
 *
 * <p>For a permit's fencing token and guarded operations, {@link #acquirePermit(Duration)},
 * {@link #tryAcquirePermit()} and {@link #acquirePermitAsync(Duration)} return the permit as a
 * {@link LockGuard}: closing the guard gives it back. Such a permit is not counted by this
 * object ({@link #heldPermits()}, {@link #release()}): its guard alone releases it.
 */
public final class EtcdSemaphore {
    private final EtcdLockClient client;
    private final String name;
    private final int permits;
    private final AcquireOptions options;
    private final ConcurrentLinkedDeque<LockGuard> held = new ConcurrentLinkedDeque<>();

    /** Unchecked: the core checks {@code name} and {@code permits} at each acquisition. */
    EtcdSemaphore(EtcdLockClient client, String name, int permits, AcquireOptions options) {
        this.client = client;
        this.name = name;
        this.permits = permits;
        this.options = options == null ? AcquireOptions.NONE : options;
    }

    static void checkPermits(int permits) {
        if (permits < 1) {
            throw new InvalidArgumentException("permits must be at least 1, got " + permits);
        }
    }

    /** The acquisition options every acquisition of this semaphore uses ({@link AcquireOptions#NONE} unless given). */
    public AcquireOptions options() {
        return options;
    }

    /** The semaphore name. */
    public String name() {
        return name;
    }

    /** The number of permits (holders at once). */
    public int permits() {
        return permits;
    }

    /** Wait for a permit; {@link Thread#interrupt()} cancels the wait (our key is removed). */
    public void acquire() throws InterruptedException {
        if (Thread.interrupted()) {
            throw new InterruptedException("interrupted before acquiring a permit of " + name);
        }
        try {
            held.add(client.acq.permitNative(name, permits, options, -1, true));
        } catch (CancelledException e) {
            throw Args.interrupted("interrupted while waiting for a permit of " + name, e);
        }
    }

    /** Wait for a permit, ignoring interrupts (re-asserted afterwards). */
    public void acquireUninterruptibly() {
        held.add(client.acq.permitNative(name, permits, options, -1, false));
    }

    /** Take a permit if one is free right now. */
    public boolean tryAcquire() {
        try {
            held.add(client.acq.permitNative(name, permits, options, 0, false));
            return true;
        } catch (LockTimeoutException e) {
            return false;
        }
    }

    /** Wait at most {@code timeout} for a permit; false if none came. */
    public boolean tryAcquire(long timeout, TimeUnit unit) throws InterruptedException {
        if (unit == null) {
            throw new InvalidArgumentException("unit must not be null");
        }
        if (Thread.interrupted()) {
            throw new InterruptedException("interrupted before acquiring a permit of " + name);
        }
        long ms = Math.max(0, unit.toMillis(timeout));
        if (ms == 0) {
            return tryAcquire();
        }
        try {
            held.add(client.acq.permitNative(name, permits, options, ms, true));
            return true;
        } catch (LockTimeoutException e) {
            return false;
        } catch (CancelledException e) {
            throw Args.interrupted("interrupted while waiting for a permit of " + name, e);
        }
    }

    /**
     * Give back the oldest permit held through this object (any thread may release).
     *
     * @throws NotHeldException if this object holds no permit
     * @throws LockLostException if that permit had been lost meanwhile (it is given back anyway)
     */
    public void release() {
        LockGuard g = held.pollFirst();
        if (g == null) {
            throw new NotHeldException("semaphore \"" + name + "\": no permit is held through this object");
        }
        g.close();
    }

    /**
     * Wait (in arrival order) at most {@code timeout} for a permit, returned as a guard. Every
     * contender must use the same number of permits; one that finds an older key with another
     * count gets {@link InvalidArgumentException}.
     *
     * @param timeout null waits as long as it takes; zero is one try
     * @throws LockTimeoutException if no permit came in time (no key is left behind)
     */
    public LockGuard acquirePermit(Duration timeout) {
        long ms = Acquirer.msOrForever(timeout);
        return Acquirer.awaitRecipe("semaphore \"" + name + "\"", () -> client.acq.startPermit(name, permits, ms, options));
    }

    /** A permit as a guard if one is free right now (one etcd round trip that writes nothing otherwise). */
    public Optional<LockGuard> tryAcquirePermit() {
        try {
            return Optional.of(acquirePermit(Duration.ZERO));
        } catch (LockTimeoutException e) {
            return Optional.empty();
        }
    }

    /**
     * {@link #acquirePermit(Duration)} without blocking: as {@link EtcdLock#acquireAsync(Duration)}
     * (completes on a runtime thread; cancelling removes the waiter key).
     */
    public CompletableFuture<LockGuard> acquirePermitAsync(Duration timeout) {
        return client.acq.startPermit(name, permits, Acquirer.msOrForever(timeout), options);
    }

    /** Permits held through this object now. */
    public int heldPermits() {
        return held.size();
    }

    /** Permits free now, cluster-wide (one etcd read): {@link #permits()} minus the holders. */
    public int availablePermits() {
        return Math.max(0, permits - client.status(name).holders().size());
    }

    @Override
    public String toString() {
        return "EtcdSemaphore{name=" + name + ", permits=" + permits + ", held here=" + held.size() + "}";
    }
}
