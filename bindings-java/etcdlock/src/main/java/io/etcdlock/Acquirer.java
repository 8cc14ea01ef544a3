package io.etcdlock;

import static io.etcdlock.Args.checkName;
import static io.etcdlock.Args.checkNames;
import static io.etcdlock.Args.checkNotOnRuntimeThread;
import static io.etcdlock.Args.toMillis;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.LongConsumer;
import java.util.function.LongFunction;
import java.util.function.Supplier;

/**
 * How a client's acquisitions run: each starts on the native side, which completes an
 * {@link AsyncAcquire}; a blocking acquisition parks on it in Java, except an uninterruptible
 * lock on a platform thread, which waits in native code ({@link #lockNative}).
 */
final class Acquirer {
    private final EtcdLockClient client;

    Acquirer(EtcdLockClient client) {
        this.client = client;
    }

    AsyncAcquire<LockGuard> startLock(String name, long ms) {
        return startLock(name, ms, AcquireOptions.NONE);
    }

    /** {@code opts} null: none. */
    AsyncAcquire<LockGuard> startLock(String name, long ms, AcquireOptions opts) {
        return startLock(name, ms, opts, NO_OWNER);
    }

    /** No owner: a plain acquisition (an owner, see {@link EtcdLock}, is never 0). */
    static final long NO_OWNER = 0;

    /** {@code owner} {@link #NO_OWNER}: a plain lock; else reentrant for it (core's {@code lock_reentrant}). */
    AsyncAcquire<LockGuard> startLock(String name, long ms, AcquireOptions opts, long owner) {
        checkName(name);
        AcquireOptions o = opts == null ? AcquireOptions.NONE : opts;
        return startAcquire(name, operation(ms), g -> new LockGuard(client, name, g), NativeBridge::freeGuard,
                (c, id) -> {
                    if (owner == NO_OWNER) {
                        NativeBridge.lockAsync(c, name, ms, o.lockDelayMs(), o.leaseTimeMs(), o.metadataPairs(),
                                o.detectDeadlock(), id);
                    } else {
                        NativeBridge.lockReentrantAsync(c, name, owner, ms, o.lockDelayMs(), o.leaseTimeMs(),
                                o.metadataPairs(), o.detectDeadlock(), id);
                    }
                });
    }

    /**
     * {@code owner}'s re-entry of the hold of {@code name} it has (core's {@code lock_reentrant}
     * for an owner that holds the lock): another handle of that hold at once, without a request,
     * or {@link LockLostException} if the hold was lost. Nothing is acquired, so there is no span
     * and no acquisition listener call. A zero timeout, should core find no hold to re-enter:
     * one try then, never a wait.
     */
    LockGuard reenter(String name, AcquireOptions o, long owner) {
        long c = client.handle().pin();
        long g;
        try {
            g = NativeBridge.lockReentrant(c, name, owner, 0, o.lockDelayMs(), o.leaseTimeMs(), o.metadataPairs(),
                    o.detectDeadlock());
        } finally {
            client.handle().unpin();
        }
        return wrap(name, g);
    }

    /** The Java guard of the native hold {@code g}; the hold is freed if that fails. */
    private LockGuard wrap(String name, long g) {
        try {
            return new LockGuard(client, name, g);
        } catch (RuntimeException | Error e) {
            NativeBridge.freeGuard(g);
            throw e;
        }
    }

    /** Starts one native acquisition; {@code wrap} turns its handle into the Java object. */
    interface NativeStart {
        void run(long client, long id);
    }

    /** The span operation of a lock, permit or read acquisition: a zero timeout is one try. */
    static String operation(long ms) {
        return ms == 0 ? "try_lock" : "lock";
    }

    /** An acquisition's span (see {@link Telemetry}); null without one, or for {@code operation} null. */
    Telemetry.Acquire span(String label, String operation) {
        Telemetry t = client.telemetry;
        return t == null || operation == null ? null : t.acquire(label, operation);
    }

    /**
     * Start an acquisition. {@code operation}: its span's {@code etcdlock.operation}
     * ({@code lock}, {@code try_lock}, {@code campaign}); null makes no span.
     */
    <T extends AutoCloseable> AsyncAcquire<T> startAcquire(String label, String operation, LongFunction<T> wrap,
            LongConsumer free, NativeStart start) {
        CoreLogs.sync();
        AsyncAcquire<T> f = new AsyncAcquire<>(client, label, wrap, free, span(label, operation));
        long c;
        try {
            c = client.handle().pin();
        } catch (RuntimeException e) {
            NativeBridge.forget(f.id);
            f.failedToStart(e);
            return f;
        }
        try {
            start.run(c, f.id);
        } catch (RuntimeException e) {
            NativeBridge.forget(f.id);
            f.failedToStart(e);
        } finally {
            client.handle().unpin();
        }
        return f;
    }

    /** Starts one recipe acquisition: the native call that carries the recipe's own values. */
    interface RecipeStart {
        void run(long client, AcquireOptions opts, long id);
    }

    /** A permit of a {@code permits} semaphore; {@code opts} null: none. */
    AsyncAcquire<LockGuard> startPermit(String name, int permits, long ms, AcquireOptions opts) {
        return startRecipe(name, operation(ms), opts, (c, o, id) -> NativeBridge.permitAsync(c, name, permits, ms, o, id));
    }

    /** The read side of a read-write lock; {@code opts} null: none. */
    AsyncAcquire<LockGuard> startRead(String name, long ms, AcquireOptions opts) {
        return startRecipe(name, operation(ms), opts, (c, o, id) -> NativeBridge.readLockAsync(c, name, ms, o, id));
    }

    /** A campaign with {@code value}; {@code opts} null: none. */
    AsyncAcquire<LockGuard> startCampaign(String name, byte[] value, long ms, AcquireOptions opts) {
        return startRecipe(name, "campaign", opts, (c, o, id) -> NativeBridge.campaignAsync(c, name, value, ms, o, id));
    }

    private AsyncAcquire<LockGuard> startRecipe(String name, String operation, AcquireOptions opts, RecipeStart start) {
        checkName(name);
        AcquireOptions o = opts == null ? AcquireOptions.NONE : opts;
        return startAcquire(name, operation, g -> new LockGuard(client, name, g), NativeBridge::freeGuard,
                (c, id) -> start.run(c, o, id));
    }

    /** A recipe acquisition {@code start} makes, waited for uninterruptibly in Java. */
    static LockGuard awaitRecipe(String what, Supplier<AsyncAcquire<LockGuard>> start) {
        checkNotOnRuntimeThread(what);
        return AsyncAcquire.await(start.get(), what, false);
    }

    /** A permit, waiting in Java; interruptible waits throw {@link CancelledException} (key removed). */
    LockGuard permitNative(String name, int permits, AcquireOptions opts, long ms, boolean interruptible) {
        String what = "semaphore \"" + name + "\"";
        checkNotOnRuntimeThread(what);
        return AsyncAcquire.await(startPermit(name, permits, ms, opts), what, interruptible);
    }

    /** A read hold, waiting in Java; interruptible as {@link #permitNative}. */
    LockGuard readNative(String name, AcquireOptions opts, long ms, boolean interruptible) {
        String what = "read lock \"" + name + "\"";
        checkNotOnRuntimeThread(what);
        return AsyncAcquire.await(startRead(name, ms, opts), what, interruptible);
    }

    static long msOrForever(Duration timeout) {
        return timeout == null ? -1 : toMillis(timeout);
    }

    AsyncAcquire<MultiLockGuard> startAll(List<String> names, long ms) {
        if (names == null) {
            throw new InvalidArgumentException("names must not be null");
        }
        List<String> copy = new ArrayList<>(names);
        String[] checked = checkNames(copy);
        return startAcquire(String.join(",", copy), null, m -> new MultiLockGuard(client, copy, m), NativeBridge::freeMulti,
                (c, id) -> NativeBridge.lockManyAsync(c, checked, ms, id));
    }

    /**
     * Acquire. On a virtual thread, and for every interruptible wait, the caller waits in Java
     * and never inside native code: the native side runs the acquisition on the etcdlock
     * runtime and completes a future; the caller parks on it. A virtual thread therefore
     * unmounts while it waits instead of pinning its carrier (with every carrier pinned by
     * waiters, the holder could never be scheduled to unlock).
     * Interrupting an interruptible wait cancels the native acquisition and waits for it to
     * settle (its waiter key removed) before throwing {@link CancelledException}; an
     * uninterruptible wait keeps waiting and re-asserts the interrupt afterwards.
     */
    LockGuard lockNative(String name, long timeoutMs, boolean interruptible) {
        return lockNative(name, timeoutMs, AcquireOptions.NONE, interruptible);
    }

    /**
     * {@link #lockNative(String, long, boolean)} with acquisition options.
     *
     * <p>An uninterruptible wait on a platform thread that is not a {@code ForkJoinPool} worker
     * waits inside native code instead ({@link #lockBlocking}, {@link Args#mayWaitInNative}):
     * there is no virtual thread to unmount, no pool to compensate and no interrupt to answer,
     * and the runtime worker that reads etcd's answer then wakes this thread itself,
     * without the upcall that completes a future first ({@code LockBenchmark}: {@code
     * Lock.lock()+unlock()} 1.08x the core's lock+unlock in the same JVM through the future,
     * 1.02-1.03x this way).
     */
    LockGuard lockNative(String name, long timeoutMs, AcquireOptions opts, boolean interruptible) {
        return lockNative(name, timeoutMs, opts, interruptible, NO_OWNER);
    }

    /** {@link #lockNative(String, long, AcquireOptions, boolean)}, reentrant for {@code owner} as {@link #startLock}. */
    LockGuard lockNative(String name, long timeoutMs, AcquireOptions opts, boolean interruptible, long owner) {
        checkNotOnRuntimeThread("lock \"" + name + "\"");
        if (!interruptible && Args.mayWaitInNative()) {
            return lockBlocking(name, timeoutMs, opts == null ? AcquireOptions.NONE : opts, owner);
        }
        return AsyncAcquire.await(startLock(name, timeoutMs, opts, owner), "lock \"" + name + "\"", interruptible);
    }

    /**
     * Wait for the lock in native code on this platform thread. The interrupt status is left
     * as it was (an interrupt neither ends nor is cleared by the wait, as with {@code lock()}
     * through a future); the acquisition listener hears of it as of one through a future.
     */
    private LockGuard lockBlocking(String name, long timeoutMs, AcquireOptions o, long owner) {
        checkName(name);
        CoreLogs.sync();
        Telemetry.Acquire span = span(name, operation(timeoutMs));
        long start = System.nanoTime();
        long g;
        long c;
        try {
            c = client.handle().pin();
        } catch (RuntimeException e) {
            if (span != null) {
                span.ended(AsyncAcquire.resultOf(e), e);
            }
            throw e;
        }
        try {
            g = owner == NO_OWNER
                    ? NativeBridge.lock(c, name, timeoutMs, o.lockDelayMs(), o.leaseTimeMs(), o.metadataPairs(),
                            o.detectDeadlock())
                    : NativeBridge.lockReentrant(c, name, owner, timeoutMs, o.lockDelayMs(), o.leaseTimeMs(),
                            o.metadataPairs(), o.detectDeadlock());
        } catch (RuntimeException e) {
            Metrics.Result r = AsyncAcquire.resultOf(e);
            AsyncAcquire.heard(client, name, r, start);
            if (span != null) {
                span.ended(r, e);
            }
            throw e;
        } finally {
            client.handle().unpin();
        }
        AsyncAcquire.heard(client, name, Metrics.Result.ACQUIRED, start);
        LockGuard guard;
        try {
            guard = new LockGuard(client, name, g);
        } catch (RuntimeException | Error e) {
            NativeBridge.freeGuard(g);
            if (span != null) {
                span.ended(Metrics.Result.ERROR, e);
            }
            throw e;
        }
        if (span != null) {
            span.acquired(guard);
        }
        return guard;
    }
}
