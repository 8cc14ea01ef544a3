package io.etcdlock;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.StringJoiner;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
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
 *       the current hold. This is core's reentrant lock, owned by this object on this thread
 *       (two lock objects of one name exclude each other, on one thread too): a re-entry is
 *       another handle of the thread's hold, taken without a request, and each
 *       {@link #unlock()} ends one handle; the last releases the lock.</li>
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
 * <ul>
 *   <li>{@link #lockInterruptibly()} and {@link #tryLock(long, TimeUnit)}: {@link Thread#interrupt()}
 *       cancels the wait and removes the waiter key from etcd.</li>
 *   <li>{@link #unlock()} by a thread that does not hold it throws {@link IllegalMonitorStateException};
 *       if the hold was lost meanwhile the final unlock throws {@link LockLostException}.</li>
 *   <li>A hold that was lost (lease expired, key deleted, connection lost) is never re-entered:
 *       the owner's reentrant {@link #tryLock()} / {@link #tryLock(long, TimeUnit)} returns
 *       {@code false} and {@link #lock()} / {@link #lockInterruptibly()} throw
 *       {@link LockLostException}; the stale hold ends there (its handles are unlocked: hold
 *       count 0), so the next call acquires afresh, with a new fencing token. Spring Integration's {@code LockRegistryLeaderInitiator} heartbeats
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
    private final AcquireOptions options;
    /** The threads that hold the lock through this object, each with its holds. */
    private final Map<Thread, Holds> threads = new HashMap<>(); // guarded by this

    /** Owners of core's reentrant holds: one per hold a thread takes through a lock object. */
    private static final AtomicLong OWNERS = new AtomicLong(Acquirer.NO_OWNER);

    /**
     * A thread's hold through this object: core's reentrant hold of {@code owner} (core's
     * {@code lock_reentrant}; a new owner per hold, never shared by two objects or threads), as
     * one core handle per {@code lock()} not yet unlocked, in the order taken. Only its thread
     * adds or removes handles.
     */
    private static final class Holds {
        final long owner = OWNERS.incrementAndGet();
        final ArrayDeque<LockGuard> handles = new ArrayDeque<>(); // guarded by the EtcdLock

        /** The handle of the acquisition itself: the hold's guard, unlocked last. */
        LockGuard first() {
            return handles.peekFirst();
        }
    }

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

    private synchronized Holds mine() {
        return threads.get(Thread.currentThread());
    }

    /**
     * The calling thread's re-entry, if it holds the lock through this object: core hands out
     * another handle of its hold (no request). Core refuses a hold that was lost (LockLost):
     * then its handles are unlocked here, which ends the stale hold, so the next call acquires
     * afresh.
     */
    private Reentry reenter() {
        Holds h = mine();
        if (h == null) {
            return Reentry.NOT_OWNER;
        }
        LockGuard g;
        try {
            g = client.acq.reenter(name, options, h.owner);
        } catch (LockLostException e) {
            lostReason = e.reason() == null ? LossReason.CONNECTION_LOST : e.reason();
            end(h);
            return Reentry.LOST;
        } catch (ClosedException e) {
            // A closed client takes no call, and its close ended its holds (lost, as the
            // hold's guard says): the stale hold ends here too.
            LossReason r = h.first().lossReason().orElse(null);
            if (r == null) {
                throw e;
            }
            lostReason = r;
            end(h);
            return Reentry.LOST;
        }
        synchronized (this) {
            h.handles.addLast(g);
        }
        return Reentry.REENTERED;
    }

    /** End the stale hold {@code h}: unlock each of its handles, the acquisition's last. */
    private void end(Holds h) {
        ArrayDeque<LockGuard> stale;
        synchronized (this) {
            threads.remove(Thread.currentThread());
            stale = new ArrayDeque<>(h.handles);
            h.handles.clear();
        }
        for (java.util.Iterator<LockGuard> it = stale.descendingIterator(); it.hasNext(); ) {
            try {
                it.next().close();
            } catch (EtcdLockException ignored) {
                // Known lost: close answers at once with LockLost; nothing else to release.
            }
        }
    }

    private volatile LossReason lostReason = LossReason.CONNECTION_LOST;

    private LockLostException lost() {
        return new LockLostException(lostReason, "lock \"" + name + "\": this thread's hold was lost; it ended now");
    }

    /** The calling thread took {@code g}, the first handle of its hold {@code h}. */
    private synchronized void took(Holds h, LockGuard g) {
        h.handles.addLast(g);
        threads.put(Thread.currentThread(), h);
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
        Holds h = new Holds();
        took(h, client.acq.lockNative(name, -1, options, false, h.owner));
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
        Holds h = new Holds();
        took(h, takeInterruptibly(-1, h.owner));
    }

    /** A new hold for {@code owner}, waiting at most {@code ms} ({@code -1}: no bound), interruptibly. */
    private LockGuard takeInterruptibly(long ms, long owner) throws InterruptedException {
        try {
            return client.acq.lockNative(name, ms, options, true, owner);
        } catch (CancelledException e) {
            throw Args.interrupted("interrupted while waiting for lock " + name, e);
        }
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
        Holds h = new Holds();
        try {
            took(h, client.acq.lockNative(name, 0, options, false, h.owner));
            return true;
        } catch (LockTimeoutException e) {
            return false;
        }
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
        Holds h = new Holds();
        try {
            took(h, takeInterruptibly(ms, h.owner));
            return true;
        } catch (LockTimeoutException e) {
            return false;
        }
    }

    /**
     * Unlock one handle of the calling thread's hold; the last one releases the lock (and throws
     * {@link LockLostException} if the hold was lost meanwhile: only the last one does).
     */
    @Override
    public void unlock() {
        LockGuard g;
        boolean last;
        synchronized (this) {
            Holds h = threads.get(Thread.currentThread());
            if (h == null) {
                throw new IllegalMonitorStateException("lock \"" + name + "\" is not held by "
                        + Thread.currentThread().getName());
            }
            g = h.handles.removeLast();
            last = h.handles.isEmpty();
            if (last) {
                threads.remove(Thread.currentThread());
            }
        }
        if (last) {
            g.close();
            return;
        }
        try {
            g.close();
        } catch (LockLostException e) {
            // A re-entry's handle of a lost hold: the last unlock reports the loss.
        }
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
        for (Holds h : threads.values()) {
            if (h.first().isHeld()) {
                return true;
            }
        }
        return false;
    }

    /** Whether the calling thread holds this lock (false once the hold was lost). */
    public synchronized boolean isHeldByCurrentThread() {
        Holds h = threads.get(Thread.currentThread());
        return h != null && h.first().isHeld();
    }

    /** The calling thread's hold count (0 if it does not hold the lock, or the hold was lost). */
    public synchronized int getHoldCount() {
        Holds h = threads.get(Thread.currentThread());
        return h != null && h.first().isHeld() ? h.handles.size() : 0;
    }

    /**
     * The guard of the current hold (fencing token, guarded operations, loss listener): the
     * handle of its acquisition, which the last {@link #unlock()} closes.
     *
     * @throws IllegalMonitorStateException if the calling thread does not hold the lock
     */
    public synchronized LockGuard guard() {
        Holds h = threads.get(Thread.currentThread());
        if (h == null) {
            throw new IllegalMonitorStateException("lock \"" + name + "\" is not held by this thread");
        }
        return h.first();
    }

    @Override
    public String toString() {
        StringJoiner owners = new StringJoiner(",");
        synchronized (this) {
            for (Thread t : threads.keySet()) {
                owners.add(t.getName());
            }
        }
        return "EtcdLock{name=" + name + (owners.length() == 0 ? ", unlocked}" : ", owner=" + owners + "}");
    }
}
