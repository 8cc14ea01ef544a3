package io.etcdlock;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;

/**
 * A distributed lock on one etcd lock name, obtained from {@link EtcdLockClient#newLock(String)}.
 * It has two shapes, which may be mixed:
 *
 * <ul>
 *   <li>As a {@link Lock}, reentrant per thread (a hold count, like
 *       {@link java.util.concurrent.locks.ReentrantLock}): {@link #lock()}, {@link #tryLock()},
 *       {@link #unlock()} and friends, where the thread is the owner and {@link #guard()} gives
 *       the current hold.</li>
 *   <li>As guards: {@link #acquire(Duration)}, {@link #acquireInterruptibly(Duration)},
 *       {@link #tryAcquire()} and {@link #acquireAsync(Duration)} each take an independent hold
 *       and return it as a {@link LockGuard}, owned by no thread (close it from any thread to
 *       release). Such a hold is not counted by the {@code Lock} side: it excludes every other
 *       hold of the name, this object's included, so a thread holding the lock that calls
 *       {@code acquire} waits for its own hold (until the timeout).</li>
 * </ul>
 *
 * <pre>{@code
 * Lock lock = client.newLock("stock");
 * lock.lock();
 * try {
 *     // critical section, exclusive across every process using "stock"
 * } finally {
 *     lock.unlock();
 * }
 *
 * try (LockGuard guard = client.newLock("stock").acquire(Duration.ofSeconds(5))) {
 *     guard.put("inventory/stock", "41"); // etcd refuses the write once the hold is lost
 * }
 * }</pre>
 *
 * <pre>{@code
 * Lock lock = client.newLock("stock");
 * lock.lock();
 * try {
 *     // critical section, exclusive across every process using "stock"
 * } finally {
 *     lock.unlock();
 * }
 * }</pre>
 *
 * <ul>
 *   <li>{@link #lockInterruptibly()} and {@link #tryLock(long, TimeUnit)}: {@link Thread#interrupt()}
 *       cancels the wait and removes the waiter key from etcd.</li>
 *   <li>{@link #unlock()} by a thread that does not hold it throws {@link IllegalMonitorStateException};
 *       if the hold was lost meanwhile the final unlock throws {@link LockLostException}.</li>
 *   <li>A hold that was lost (lease expired, key deleted, connection lost) is never re-entered:
 *       the owner's reentrant {@link #tryLock()} / {@link #tryLock(long, TimeUnit)} returns
 *       {@code false} and {@link #lock()} / {@link #lockInterruptibly()} throw
 *       {@link LockLostException}; the stale hold ends there (hold count 0), so the next call
 *       acquires afresh. Spring Integration's {@code LockRegistryLeaderInitiator} heartbeats
 *       with exactly that reentrant {@code tryLock}, so a leader that lost its lock steps down.</li>
 *   <li>A virtual thread waits in Java, never in native code: it unmounts while it waits. A
 *       platform thread's {@link #lock()} waits in native code, woken directly by the runtime
 *       thread that reads etcd's answer, unless it is a {@code ForkJoinPool} worker (parked in
 *       Java, the pool may start a spare worker); interruptible waits always park in Java.</li>
 *   <li>{@link #newCondition()} is not supported.</li>
 * </ul>
 *
 * etcd errors surface as unchecked {@link EtcdLockException}s.
 */
public final class EtcdLock implements Lock {
    private final EtcdLockClient client;
    private final String name;
    private Thread owner; // guarded by this
    private int holds; // guarded by this
    private LockGuard guard; // guarded by this
    private final AcquireOptions options;

    EtcdLock(EtcdLockClient client, String name) {
        this(client, name, AcquireOptions.NONE);
    }

    EtcdLock(EtcdLockClient client, String name, AcquireOptions options) {
        this.client = client;
        this.name = name;
        this.options = options == null ? AcquireOptions.NONE : options;
    }

    /** The acquisition options every acquisition of this lock uses ({@link AcquireOptions#NONE} unless given). */
    public AcquireOptions options() {
        return options;
    }

    /** The lock name. */
    public String name() {
        return name;
    }

    private enum Reentry { NOT_OWNER, REENTERED, LOST }

    /** The owner's re-entry: counts up only while the hold is alive. */
    private Reentry reenter() {
        LockGuard stale;
        synchronized (this) {
            if (owner != Thread.currentThread()) {
                return Reentry.NOT_OWNER;
            }
            if (guard.isHeld()) {
                if (holds == Integer.MAX_VALUE) {
                    throw new Error("maximum lock count exceeded");
                }
                holds++;
                return Reentry.REENTERED;
            }
            // Lost: end the stale hold, so the next call acquires afresh.
            stale = guard;
            guard = null;
            owner = null;
            holds = 0;
        }
        lostReason = stale.lossReason().orElse(LossReason.CONNECTION_LOST);
        try {
            stale.close();
        } catch (EtcdLockException ignored) {
            // Known lost: close answers at once with LockLost; nothing else to release.
        }
        return Reentry.LOST;
    }

    private volatile LossReason lostReason = LossReason.CONNECTION_LOST;

    private LockLostException lost() {
        return new LockLostException(lostReason, "lock \"" + name + "\": this thread's hold was lost; it ended now");
    }

    private synchronized void took(LockGuard g) {
        owner = Thread.currentThread();
        holds = 1;
        guard = g;
    }

    /** Wait (uninterruptibly, as {@link Lock#lock()} requires) until the lock is held. */
    @Override
    public void lock() {
        switch (reenter()) {
            case REENTERED:
                return;
            case LOST:
                throw lost();
            default:
                break;
        }
        took(acquire());
    }

    @Override
    public void lockInterruptibly() throws InterruptedException {
        if (Thread.interrupted()) {
            throw new InterruptedException("interrupted before locking " + name);
        }
        switch (reenter()) {
            case REENTERED:
                return;
            case LOST:
                throw lost();
            default:
                break;
        }
        took(acquireInterruptibly(null));
    }

    /** Take the lock if it is free right now (one etcd round trip). */
    @Override
    public boolean tryLock() {
        switch (reenter()) {
            case REENTERED:
                return true;
            case LOST:
                return false;
            default:
                break;
        }
        LockGuard g = tryAcquire().orElse(null);
        if (g == null) {
            return false;
        }
        took(g);
        return true;
    }

    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
        if (unit == null) {
            throw new InvalidArgumentException("unit must not be null");
        }
        if (Thread.interrupted()) {
            throw new InterruptedException("interrupted before locking " + name);
        }
        switch (reenter()) {
            case REENTERED:
                return true;
            case LOST:
                return false;
            default:
                break;
        }
        long ms = Math.max(0, unit.toMillis(time));
        if (ms == 0) {
            return tryLock(); // "does not wait at all", but still takes a free lock
        }
        try {
            took(acquireInterruptibly(Duration.ofMillis(ms)));
            return true;
        } catch (LockTimeoutException e) {
            return false;
        }
    }

    @Override
    public void unlock() {
        LockGuard g;
        synchronized (this) {
            if (owner != Thread.currentThread()) {
                throw new IllegalMonitorStateException("lock \"" + name + "\" is not held by "
                        + Thread.currentThread().getName());
            }
            if (--holds > 0) {
                return;
            }
            g = guard;
            guard = null;
            owner = null;
        }
        g.close();
    }

    // ---- guards: each call an independent hold, not counted by the Lock side ----

    /**
     * Wait as long as it takes for an independent hold of the lock (an interrupt does not end
     * the wait; the thread's interrupt status is left set).
     */
    public LockGuard acquire() {
        return client.acq.lockNative(name, -1, options, false);
    }

    /**
     * Wait at most {@code timeout} for an independent hold of the lock.
     *
     * @param timeout null waits as long as it takes; zero is one try ({@link LockTimeoutException}
     *     if the lock is held, waited for or in its lock-delay)
     * @throws LockTimeoutException if it was not acquired in time (no waiter key is left behind)
     * @throws InvalidArgumentException for a negative timeout, or an option out of range (nothing
     *     is written)
     */
    public LockGuard acquire(Duration timeout) {
        return client.acq.lockNative(name, Acquirer.msOrForever(timeout), options, false);
    }

    /**
     * {@link #acquire(Duration)} whose {@code timeout} is required, and whose zero timeout is
     * {@link #tryAcquire()}: the checks of {@code EtcdLockClient.acquire(String, Duration)}.
     */
    LockGuard acquireBounded(Duration timeout) {
        if (Args.toMillis(timeout) == 0) {
            return tryAcquire().orElseThrow(() -> EtcdLockException.of(ErrorCode.TIMEOUT, null,
                    "lock \"" + name + "\" is held (zero timeout)", true));
        }
        return acquire(timeout);
    }

    /**
     * Like {@link #acquire(Duration)}, but {@link Thread#interrupt()} cancels the wait, removes
     * the waiter key and throws {@link InterruptedException} (interrupt status cleared).
     *
     * @param timeout null waits as long as it takes; zero is one try
     */
    public LockGuard acquireInterruptibly(Duration timeout) throws InterruptedException {
        if (Thread.interrupted()) {
            throw new InterruptedException("interrupted before acquiring lock " + name);
        }
        try {
            return client.acq.lockNative(name, Acquirer.msOrForever(timeout), options, true);
        } catch (CancelledException e) {
            throw Args.interrupted("interrupted while waiting for lock " + name, e);
        }
    }

    /**
     * An independent hold if the lock is free right now; empty if someone holds or waits for
     * it, or it is in a vanished holder's lock-delay (one etcd round trip that writes nothing
     * then).
     */
    public Optional<LockGuard> tryAcquire() {
        try {
            return Optional.of(client.acq.lockNative(name, 0, options, false));
        } catch (LockTimeoutException e) {
            return Optional.empty();
        }
    }

    /** {@link #acquireAsync(Duration)} without a timeout. */
    public CompletableFuture<LockGuard> acquireAsync() {
        return acquireAsync(null);
    }

    /**
     * An independent hold without blocking the caller. The future completes on an etcdlock
     * runtime thread: keep continuations short and non-blocking, or use the {@code *Async}
     * continuation methods with your own executor (a blocking etcdlock call made on a runtime
     * thread is refused with {@link InvalidArgumentException}). Cancelling the future cancels
     * the wait and removes the waiter key; a guard that arrives after cancellation is released.
     *
     * @param timeout null for no bound; else the future fails with {@link LockTimeoutException}
     * @throws InvalidArgumentException (here, not in the future) for a negative timeout
     */
    public CompletableFuture<LockGuard> acquireAsync(Duration timeout) {
        return client.acq.startLock(name, Acquirer.msOrForever(timeout), options);
    }

    /** Not supported: etcd has no condition variables. */
    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("etcdlock locks do not support conditions");
    }

    /** Whether some thread of this process holds the lock through this object (and the hold is alive). */
    public synchronized boolean isLocked() {
        return owner != null && guard.isHeld();
    }

    /** Whether the calling thread holds this lock (false once the hold was lost). */
    public synchronized boolean isHeldByCurrentThread() {
        return owner == Thread.currentThread() && guard.isHeld();
    }

    /** The calling thread's hold count (0 if it does not hold the lock, or the hold was lost). */
    public synchronized int getHoldCount() {
        return owner == Thread.currentThread() && guard.isHeld() ? holds : 0;
    }

    /**
     * The guard of the current hold (fencing token, guarded operations, loss listener).
     *
     * @throws IllegalMonitorStateException if the calling thread does not hold the lock
     */
    public synchronized LockGuard guard() {
        if (owner != Thread.currentThread()) {
            throw new IllegalMonitorStateException("lock \"" + name + "\" is not held by this thread");
        }
        return guard;
    }

    @Override
    public String toString() {
        Thread o;
        synchronized (this) {
            o = owner;
        }
        return "EtcdLock{name=" + name + (o == null ? ", unlocked}" : ", owner=" + o.getName() + "}");
    }
}
