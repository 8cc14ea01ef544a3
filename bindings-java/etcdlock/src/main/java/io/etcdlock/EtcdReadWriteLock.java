package io.etcdlock;

import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReadWriteLock;

/**
 * A distributed {@link ReadWriteLock} on one name: many readers or one writer across every
 * process, in arrival order (a stream of readers cannot starve a writer: a reader that comes
 * after a waiting writer waits for it). The write side is exactly the etcdlock mutex
 * ({@link EtcdLock}, reentrant per thread), so {@code etcdctl lock}, Go's Mutex and
 * {@link EtcdLock#acquire(Duration)} on the same name exclude every reader too. The read
 * side is shared by threads and reentrant per thread (a hold count per thread, like
 * {@link java.util.concurrent.locks.ReentrantReadWriteLock}). Obtain it from
 * {@link EtcdLockClient#newReadWriteLock(String)}:
 *
 * <pre>{@code
 * ReadWriteLock config = client.newReadWriteLock("config");
 * config.readLock().lock();
 * try {
 *     return readConfig();
 * } finally {
 *     config.readLock().unlock();
 * }
 * }</pre>
 *
 * Besides {@link Lock}'s calls, each side hands out independent holds as guards
 * ({@link ReadLock#acquire(Duration)}, {@link EtcdLock#acquire(Duration)} and their
 * {@code tryAcquire}/{@code acquireAsync}), not counted by its per-thread holds.
 *
 * <p>Not supported: downgrading (taking the read lock while holding the write lock waits for
 * that write lock, like any other reader, so it never returns) and upgrading; conditions.
 */
public final class EtcdReadWriteLock implements ReadWriteLock {
    private final EtcdLock writer;
    private final ReadLock reader;

    /** Unchecked: the core checks {@code name} at each acquisition. {@code options} null: none. */
    EtcdReadWriteLock(EtcdLockClient client, String name, AcquireOptions options) {
        this.writer = new EtcdLock(client, name, options);
        this.reader = new ReadLock(client, name, options);
    }

    /** The lock name. */
    public String name() {
        return writer.name();
    }

    @Override
    public ReadLock readLock() {
        return reader;
    }

    @Override
    public EtcdLock writeLock() {
        return writer;
    }

    @Override
    public String toString() {
        return "EtcdReadWriteLock{name=" + name() + "}";
    }

    /** The read side: shared by threads, reentrant per thread. */
    public static final class ReadLock implements Lock {
        private final EtcdLockClient client;
        private final String name;
        private final AcquireOptions options;
        private final Map<Thread, Hold> holds = new ConcurrentHashMap<>();

        private static final class Hold {
            final LockGuard guard;
            int count = 1;

            Hold(LockGuard guard) {
                this.guard = guard;
            }
        }

        ReadLock(EtcdLockClient client, String name, AcquireOptions options) {
            this.client = client;
            this.name = name;
            this.options = options == null ? AcquireOptions.NONE : options;
        }

        /** Re-entry of the current thread: true if counted up; throws if its hold was lost. */
        private Boolean reenter() {
            Hold h = holds.get(Thread.currentThread());
            if (h == null) {
                return false;
            }
            if (h.guard.isHeld()) {
                h.count++;
                return true;
            }
            holds.remove(Thread.currentThread());
            try {
                h.guard.close();
            } catch (EtcdLockException ignored) {
                // known lost
            }
            return null;
        }

        private LockLostException lost() {
            return new LockLostException(LossReason.CONNECTION_LOST,
                    "read lock \"" + name + "\": this thread's hold was lost; it ended now");
        }

        @Override
        public void lock() {
            Boolean r = reenter();
            if (r == null) {
                throw lost();
            }
            if (!r) {
                holds.put(Thread.currentThread(), new Hold(client.acq.readNative(name, options, -1, false)));
            }
        }

        @Override
        public void lockInterruptibly() throws InterruptedException {
            if (Thread.interrupted()) {
                throw new InterruptedException("interrupted before read-locking " + name);
            }
            Boolean r = reenter();
            if (r == null) {
                throw lost();
            }
            if (r) {
                return;
            }
            try {
                holds.put(Thread.currentThread(), new Hold(client.acq.readNative(name, options, -1, true)));
            } catch (CancelledException e) {
                throw Args.interrupted("interrupted while waiting for read lock " + name, e);
            }
        }

        @Override
        public boolean tryLock() {
            Boolean r = reenter();
            if (r == null) {
                return false;
            }
            if (r) {
                return true;
            }
            try {
                holds.put(Thread.currentThread(), new Hold(client.acq.readNative(name, options, 0, false)));
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
                throw new InterruptedException("interrupted before read-locking " + name);
            }
            long ms = Math.max(0, unit.toMillis(time));
            if (ms == 0) {
                return tryLock();
            }
            Boolean r = reenter();
            if (r == null) {
                return false;
            }
            if (r) {
                return true;
            }
            try {
                holds.put(Thread.currentThread(), new Hold(client.acq.readNative(name, options, ms, true)));
                return true;
            } catch (LockTimeoutException e) {
                return false;
            } catch (CancelledException e) {
                throw Args.interrupted("interrupted while waiting for read lock " + name, e);
            }
        }

        @Override
        public void unlock() {
            Hold h = holds.get(Thread.currentThread());
            if (h == null) {
                throw new IllegalMonitorStateException("read lock \"" + name + "\" is not held by "
                        + Thread.currentThread().getName());
            }
            if (--h.count > 0) {
                return;
            }
            holds.remove(Thread.currentThread());
            h.guard.close();
        }

        /**
         * Wait (in arrival order: behind a waiting writer) at most {@code timeout} for an
         * independent read hold, returned as a guard and not counted by this thread's read holds.
         * A lease time or metadata apply; a lock-delay is refused with
         * {@link InvalidArgumentException}.
         *
         * @param timeout null waits as long as it takes; zero is one try that writes nothing
         * @throws LockTimeoutException if it was not acquired in time (no key is left behind)
         */
        public LockGuard acquire(Duration timeout) {
            long ms = Acquirer.msOrForever(timeout);
            return Acquirer.awaitRecipe("read lock \"" + name + "\"", () -> client.acq.startRead(name, ms, options));
        }

        /** An independent read hold if one can be had right now (one etcd round trip). */
        public Optional<LockGuard> tryAcquire() {
            try {
                return Optional.of(acquire(Duration.ZERO));
            } catch (LockTimeoutException e) {
                return Optional.empty();
            }
        }

        /** {@link #acquire(Duration)} without blocking, as {@link EtcdLock#acquireAsync(Duration)}. */
        public CompletableFuture<LockGuard> acquireAsync(Duration timeout) {
            return client.acq.startRead(name, Acquirer.msOrForever(timeout), options);
        }

        /** Not supported: etcd has no condition variables. */
        @Override
        public Condition newCondition() {
            throw new UnsupportedOperationException("etcdlock locks do not support conditions");
        }

        /** Whether the calling thread holds the read lock (false once its hold was lost). */
        public boolean isHeldByCurrentThread() {
            Hold h = holds.get(Thread.currentThread());
            return h != null && h.guard.isHeld();
        }

        /** The calling thread's read hold count (0 if none, or lost). */
        public int getHoldCount() {
            Hold h = holds.get(Thread.currentThread());
            return h != null && h.guard.isHeld() ? h.count : 0;
        }

        /** Threads of this process holding the read lock through this object. */
        public int getReadLockCount() {
            return holds.size();
        }

        /** The calling thread's read hold (fencing token, guarded reads). */
        public LockGuard guard() {
            Hold h = holds.get(Thread.currentThread());
            if (h == null) {
                throw new IllegalMonitorStateException("read lock \"" + name + "\" is not held by this thread");
            }
            return h.guard;
        }

        @Override
        public String toString() {
            return "EtcdReadWriteLock.ReadLock{name=" + name + ", holders here=" + holds.size() + "}";
        }
    }
}
