package io.etcdlock;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;

/**
 * A distributed {@link Lock} on one etcd lock name, reentrant per thread (a hold count,
 * like {@link java.util.concurrent.locks.ReentrantLock}). Obtain it from
 * {@link EtcdLockClient#newLock(String)}:
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

    EtcdLock(EtcdLockClient client, String name) {
        this.client = client;
        this.name = name;
    }

    /** The lock name. */
    public String name() {
        return name;
    }

    private synchronized boolean reenter() {
        if (owner == Thread.currentThread()) {
            if (holds == Integer.MAX_VALUE) {
                throw new Error("maximum lock count exceeded");
            }
            holds++;
            return true;
        }
        return false;
    }

    private synchronized void took(LockGuard g) {
        owner = Thread.currentThread();
        holds = 1;
        guard = g;
    }

    /** Wait (uninterruptibly, as {@link Lock#lock()} requires) until the lock is held. */
    @Override
    public void lock() {
        if (reenter()) {
            return;
        }
        took(client.lockNative(name, -1, false));
    }

    @Override
    public void lockInterruptibly() throws InterruptedException {
        if (Thread.interrupted()) {
            throw new InterruptedException("interrupted before locking " + name);
        }
        if (reenter()) {
            return;
        }
        took(client.acquireInterruptibly(name, null));
    }

    /** Take the lock if it is free right now (one etcd round trip). */
    @Override
    public boolean tryLock() {
        if (reenter()) {
            return true;
        }
        LockGuard g = client.tryAcquire(name).orElse(null);
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
        if (reenter()) {
            return true;
        }
        long ms = Math.max(0, unit.toMillis(time));
        if (ms == 0) {
            return tryLock(); // "does not wait at all", but still takes a free lock
        }
        try {
            took(client.acquireInterruptibly(name, java.time.Duration.ofMillis(ms)));
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

    /** Not supported: etcd has no condition variables. */
    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("etcdlock locks do not support conditions");
    }

    /** Whether some thread of this process holds the lock through this object. */
    public synchronized boolean isLocked() {
        return owner != null;
    }

    /** Whether the calling thread holds this lock. */
    public synchronized boolean isHeldByCurrentThread() {
        return owner == Thread.currentThread();
    }

    /** The calling thread's hold count (0 if it does not hold the lock). */
    public synchronized int getHoldCount() {
        return owner == Thread.currentThread() ? holds : 0;
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
