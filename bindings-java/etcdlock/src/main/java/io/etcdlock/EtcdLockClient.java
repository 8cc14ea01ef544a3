package io.etcdlock;

import java.lang.ref.Cleaner;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.function.LongConsumer;
import java.util.function.LongFunction;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A connection to etcd that hands out distributed locks. Thread-safe; create one
 * per application and share it. All locks of a client share one etcd lease, kept
 * alive in the background by the native core.
 *
 * <pre>{@code
 * try (EtcdLockClient client = EtcdLockClient.builder()
 *         .endpoints("http://127.0.0.1:2379")
 *         .ttl(Duration.ofSeconds(10))
 *         .build();
 *      LockGuard guard = client.acquire("stock", Duration.ofSeconds(5))) {
 *     long stock = Long.parseLong(guard.get("inventory/stock"));
 *     guard.put("inventory/stock", Long.toString(stock - 1)); // etcd rejects it if we lost the lock
 * }
 * }</pre>
 *
 * Lock names are prefixes in etcd's own lock layout (as Go's {@code concurrency.Mutex},
 * {@code etcdctl lock} and jetcd's Lock client use), so all of them exclude each other.
 */
public final class EtcdLockClient implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(EtcdLockClient.class);
    static final Cleaner CLEANER = Cleaner.create();

    private final NativeHandle handle;
    private final Cleaner.Cleanable cleanable;
    private final String endpoints;

    private EtcdLockClient(long ptr, String endpoints) {
        this.handle = new NativeHandle(ptr, NativeBridge::freeClient,
                () -> new ClosedException("the etcdlock client was closed"));
        this.cleanable = CLEANER.register(this, handle::close);
        this.endpoints = endpoints;
    }

    /** A builder; {@link Builder#build()} connects. */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Same as {@link #builder()}: every builder takes what it is not given from the
     * {@code ETCDLOCK_*} environment (core's one rule, the same in every language).
     *
     * @deprecated use {@link #builder()}
     */
    @Deprecated
    public static Builder builderFromEnv() {
        return new Builder();
    }

    /**
     * A {@link java.util.concurrent.locks.Lock} on {@code name}, reentrant per thread.
     * Each call returns a new lock object; reentrancy is tracked per object, so share the
     * object between the code paths that should re-enter it.
     */
    public EtcdLock newLock(String name) {
        checkName(name);
        return new EtcdLock(this, name);
    }

    /** Told of every acquisition a client finishes. */
    @FunctionalInterface
    public interface AcquisitionListener {
        /**
         * The acquisition of {@code name} ended with {@code result} after the caller waited
         * {@code waited}. Runs on the etcdlock runtime thread that finished it: keep it short and
         * non-blocking (recording a Micrometer timer is fine); an exception it throws is ignored.
         */
        void onAcquisition(String name, Metrics.Result result, Duration waited);
    }

    private volatile AcquisitionListener acquisitionListener;

    /**
     * Install the listener told of each acquisition of this client, by lock name (null removes
     * it; one per client). The core's per-client counters ({@link #metrics()}) need none: this
     * is for what they leave out on purpose, per-name figures (the Spring module's
     * {@code etcdlock.metrics.lock-name-tag}). Results are classified as {@link #metrics()}
     * counts them: a zero timeout or {@link #tryAcquire} that finds the lock held is
     * {@code TIMEOUT}.
     */
    public void setAcquisitionListener(AcquisitionListener listener) {
        this.acquisitionListener = listener;
    }

    static Metrics.Result resultOf(Throwable error) {
        if (error == null) {
            return Metrics.Result.ACQUIRED;
        } else if (error instanceof LockTimeoutException) {
            return Metrics.Result.TIMEOUT;
        } else if (error instanceof WouldBlockException) {
            return Metrics.Result.WOULD_BLOCK;
        } else if (error instanceof CancelledException) {
            return Metrics.Result.CANCELLED;
        }
        return Metrics.Result.ERROR;
    }

    /** Wait as long as it takes for the lock {@code name}. */
    public LockGuard acquire(String name) {
        return lockNative(name, -1, false);
    }

    /**
     * Wait at most {@code timeout} for the lock {@code name}.
     *
     * @throws LockTimeoutException if it was not acquired in time (no waiter key is left behind)
     */
    public LockGuard acquire(String name, Duration timeout) {
        long ms = toMillis(timeout);
        if (ms == 0) {
            return tryAcquire(name).orElseThrow(() -> new LockTimeoutException("lock \"" + name + "\" is held (zero timeout)"));
        }
        return lockNative(name, ms, false);
    }

    /**
     * Like {@link #acquire(String, Duration)} ({@code timeout} may be null: no bound), but
     * {@link Thread#interrupt()} cancels the wait, removes the waiter key and throws
     * {@link InterruptedException}.
     */
    public LockGuard acquireInterruptibly(String name, Duration timeout) throws InterruptedException {
        if (Thread.interrupted()) {
            throw new InterruptedException("interrupted before acquiring lock " + name);
        }
        try {
            return lockNative(name, timeout == null ? -1 : toMillis(timeout), true);
        } catch (CancelledException e) {
            throw EtcdLockClient.interrupted("interrupted while waiting for lock " + name, e);
        }
    }

    /**
     * Take the lock if it is free right now; empty if someone holds or waits for it (one
     * etcd round trip that writes nothing when the lock is taken).
     */
    public Optional<LockGuard> tryAcquire(String name) {
        try {
            return Optional.of(lockNative(name, 0, false));
        } catch (LockTimeoutException e) {
            return Optional.empty();
        }
    }

    /** {@link #acquireAsync(String, Duration)} without a timeout. */
    public CompletableFuture<LockGuard> acquireAsync(String name) {
        return acquireAsync(name, null);
    }

    /**
     * Acquire without blocking the caller. The future completes on an etcdlock runtime
     * thread: keep continuations short and non-blocking, or use the {@code *Async}
     * continuation methods with your own executor (a blocking etcdlock call made on a
     * runtime thread is refused with {@link InvalidArgumentException}). Cancelling the
     * future cancels the wait and removes the waiter key; a guard that arrives after
     * cancellation is released.
     *
     * @param timeout null for no bound; else fails with {@link LockTimeoutException}
     */
    public CompletableFuture<LockGuard> acquireAsync(String name, Duration timeout) {
        return startAcquire(name, timeout == null ? -1 : toMillis(timeout));
    }

    private AsyncAcquire<LockGuard> startAcquire(String name, long ms) {
        checkName(name);
        return startAcquire(name, g -> new LockGuard(this, name, g), NativeBridge::freeGuard,
                (c, id) -> NativeBridge.lockAsync(c, name, ms, id));
    }

    /** Starts one native acquisition; {@code wrap} turns its handle into the Java object. */
    interface NativeStart {
        void run(long client, long id);
    }

    <T extends AutoCloseable> AsyncAcquire<T> startAcquire(String label, LongFunction<T> wrap, LongConsumer free,
            NativeStart start) {
        AsyncAcquire<T> f = new AsyncAcquire<>(label, wrap, free);
        long c;
        try {
            c = handle.pin();
        } catch (RuntimeException e) {
            NativeBridge.forget(f.id);
            f.completeExceptionally(e);
            return f;
        }
        try {
            start.run(c, f.id);
        } catch (RuntimeException e) {
            NativeBridge.forget(f.id);
            f.completeExceptionally(e);
        } finally {
            handle.unpin();
        }
        return f;
    }

    // ---- recipes: semaphore, read-write lock, multi-lock, election, queue view ----

    private static final int PERMIT = 1;
    private static final int READ = 2;
    private static final int CAMPAIGN = 3;
    private static final int MANY = 4;

    private AsyncAcquire<LockGuard> startRecipe(int kind, String name, byte[] arg, int permits, long ms) {
        checkName(name);
        return startAcquire(name, g -> new LockGuard(this, name, g), NativeBridge::freeGuard,
                (c, id) -> NativeBridge.recipeAsync(c, kind, name, arg, permits, ms, id));
    }

    private LockGuard awaitRecipe(int kind, String name, byte[] arg, int permits, long ms, String what) {
        checkNotOnRuntimeThread(what);
        return await(startRecipe(kind, name, arg, permits, ms), what, false);
    }

    /** A permit, waiting in Java; interruptible waits throw {@link CancelledException} (key removed). */
    LockGuard permitNative(String name, int permits, long ms, boolean interruptible) {
        String what = "semaphore \"" + name + "\"";
        checkNotOnRuntimeThread(what);
        return await(startRecipe(PERMIT, name, null, permits, ms), what, interruptible);
    }

    /** A read hold, waiting in Java; interruptible as {@link #permitNative}. */
    LockGuard readNative(String name, long ms, boolean interruptible) {
        String what = "read lock \"" + name + "\"";
        checkNotOnRuntimeThread(what);
        return await(startRecipe(READ, name, null, 0, ms), what, interruptible);
    }

    private static long msOrForever(Duration timeout) {
        return timeout == null ? -1 : toMillis(timeout);
    }

    /**
     * Wait (in arrival order) for one of {@code permits} permits of the semaphore {@code name}:
     * at most {@code permits} holders at once, cluster-wide. The permit is a {@link LockGuard}
     * (fencing token, loss listener, guarded operations; close to release). Every contender
     * must use the same {@code permits}; one that finds an older key with another count gets
     * {@link InvalidArgumentException}.
     *
     * @param timeout null waits as long as it takes; zero is one try
     * @throws LockTimeoutException if no permit came in time (no key is left behind)
     */
    public LockGuard acquirePermit(String name, int permits, Duration timeout) {
        return awaitRecipe(PERMIT, name, null, permits, msOrForever(timeout), "semaphore \"" + name + "\"");
    }

    /** A permit if one is free right now (one etcd round trip that writes nothing otherwise). */
    public Optional<LockGuard> tryAcquirePermit(String name, int permits) {
        try {
            return Optional.of(acquirePermit(name, permits, Duration.ZERO));
        } catch (LockTimeoutException e) {
            return Optional.empty();
        }
    }

    /** {@link #acquirePermit(String, int, Duration)} without blocking (see {@link #acquireAsync(String, Duration)}). */
    public CompletableFuture<LockGuard> acquirePermitAsync(String name, int permits, Duration timeout) {
        return startRecipe(PERMIT, name, null, permits, msOrForever(timeout));
    }

    /**
     * Wait for the read side of the read-write lock {@code name}: shared with other readers,
     * excluded by writers. The write side is the plain lock ({@link #acquire(String)}), so
     * {@code etcdctl lock} and Go's Mutex on {@code name} exclude readers too. In arrival order:
     * a reader behind a waiting writer waits for it (a stream of readers cannot starve a writer).
     *
     * @param timeout null waits as long as it takes; zero is one try that writes nothing
     */
    public LockGuard acquireRead(String name, Duration timeout) {
        return awaitRecipe(READ, name, null, 0, msOrForever(timeout), "read lock \"" + name + "\"");
    }

    /** {@link #acquireRead(String, Duration)} without blocking. */
    public CompletableFuture<LockGuard> acquireReadAsync(String name, Duration timeout) {
        return startRecipe(READ, name, null, 0, msOrForever(timeout));
    }

    /**
     * Lock every name in {@code names} together (at most 128). The waiter keys are created in
     * one etcd transaction, so every client queues in the same order on every name: no
     * deadlock, no release-and-retry loop (as Redisson's MultiLock needs). A timeout or
     * interrupt removes every key; losing any one lock loses the hold.
     *
     * @param timeout null waits as long as it takes; zero is one try
     */
    public MultiLockGuard acquireAll(List<String> names, Duration timeout) {
        String what = "locks " + names;
        checkNotOnRuntimeThread(what);
        return await(startAll(names, msOrForever(timeout)), what, false);
    }

    /** {@link #acquireAll(List, Duration)} without blocking. */
    public CompletableFuture<MultiLockGuard> acquireAllAsync(List<String> names, Duration timeout) {
        return startAll(names, msOrForever(timeout));
    }

    private AsyncAcquire<MultiLockGuard> startAll(List<String> names, long ms) {
        if (names == null) {
            throw new InvalidArgumentException("names must not be null");
        }
        List<String> copy = new ArrayList<>(names);
        byte[] enc = RecipeCodec.names(copy);
        return startAcquire(String.join(",", copy), m -> new MultiLockGuard(this, copy, m), NativeBridge::freeMulti,
                (c, id) -> NativeBridge.recipeAsync(c, MANY, null, enc, 0, ms, id));
    }

    /**
     * Campaign for leadership of the election {@code name}, announcing {@code value}: wait (in
     * arrival order among candidates) until elected. The keys are those of Go's
     * {@code concurrency.Election} and {@code etcdctl elect}, which take part in the same election.
     */
    public Leadership campaign(String name, String value) {
        return campaign(name, utf8(value), null);
    }

    /**
     * {@link #campaign(String, String)} with a byte value and a bound.
     *
     * @param timeout null waits as long as it takes; zero is one try
     * @throws LockTimeoutException if not elected in time (our candidate key is removed)
     */
    public Leadership campaign(String name, byte[] value, Duration timeout) {
        if (value == null) {
            throw new InvalidArgumentException("value must not be null");
        }
        return new Leadership(awaitRecipe(CAMPAIGN, name, value, 0, msOrForever(timeout), "election \"" + name + "\""));
    }

    /** {@link #campaign(String, byte[], Duration)} without blocking; cancelling withdraws the candidacy. */
    public CompletableFuture<Leadership> campaignAsync(String name, byte[] value, Duration timeout) {
        if (value == null) {
            throw new InvalidArgumentException("value must not be null");
        }
        return startRecipe(CAMPAIGN, name, value, 0, msOrForever(timeout)).thenApply(Leadership::new);
    }

    private static byte[] utf8(String s) {
        if (s == null) {
            throw new InvalidArgumentException("value must not be null");
        }
        return checkText(s, "value").getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }

    /** The current leader of the election {@code name}, or empty when nobody leads. */
    public Optional<Leader> leader(String name) {
        checkName(name);
        checkNotOnRuntimeThread("leader \"" + name + "\"");
        long c = handle.pin();
        try {
            byte[] b = NativeBridge.leader(c, name);
            return b == null ? Optional.empty() : Optional.of(new RecipeCodec(b).leader());
        } finally {
            handle.unpin();
        }
    }

    /**
     * Follow the election {@code name}: {@code listener} gets the current leader first, then
     * each change (a new proclamation is a change), and {@link Optional#empty()} whenever
     * nobody leads. It runs on an etcdlock runtime thread, one call at a time: keep it short
     * and do not make blocking etcdlock calls in it. Close the returned observation to stop.
     */
    public LeaderObservation observe(String name, java.util.function.Consumer<Optional<Leader>> listener) {
        checkName(name);
        if (listener == null) {
            throw new InvalidArgumentException("listener must not be null");
        }
        long id = NativeBridge.nextId();
        LeaderObservation o = new LeaderObservation(name, id);
        NativeBridge.registerObserver(id, new NativeBridge.Observer(listener, o));
        long c;
        try {
            c = handle.pin();
        } catch (RuntimeException e) {
            NativeBridge.forgetObserver(id);
            throw e;
        }
        try {
            NativeBridge.observe(c, name, id);
        } catch (RuntimeException e) {
            NativeBridge.forgetObserver(id);
            throw e;
        } finally {
            handle.unpin();
        }
        return o;
    }

    /**
     * The holders and waiters of {@code name} for any kind of lock (mutex, semaphore,
     * read-write lock, election; etcdctl and Go keys too): what {@code etcdlock status} shows.
     */
    public LockStatus status(String name) {
        checkName(name);
        checkNotOnRuntimeThread("status \"" + name + "\"");
        long c = handle.pin();
        try {
            return new LockStatus(name, NativeBridge.status(c, name));
        } finally {
            handle.unpin();
        }
    }

    /**
     * Every lock, election, semaphore and read-write lock whose name starts with {@code prefix}
     * (empty: all of this client's namespace), sorted by name, from one read: what {@code
     * etcdlock list} shows.
     */
    public java.util.List<LockStatus> list(String prefix) {
        java.util.Objects.requireNonNull(prefix, "prefix");
        checkNotOnRuntimeThread("list \"" + prefix + "\"");
        long c = handle.pin();
        try {
            RecipeCodec r = new RecipeCodec(NativeBridge.list(c, prefix));
            int n = r.i32();
            java.util.List<LockStatus> out = new java.util.ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                out.add(new LockStatus(r.string(), r));
            }
            return java.util.Collections.unmodifiableList(out);
        } finally {
            handle.unpin();
        }
    }

    /**
     * Free a lock whose holder is wedged: delete the hold of {@code name} whose fencing token is
     * {@code token} ({@link #status} shows it), whoever holds it; a later holder is never touched.
     * Returns true if it was released, false if no hold has that token. The former holder's guard
     * reports the loss with reason {@code KEY_DELETED}.
     */
    public boolean release(String name, long token) {
        checkName(name);
        checkNotOnRuntimeThread("release \"" + name + "\"");
        long c = handle.pin();
        try {
            return NativeBridge.release(c, name, token);
        } finally {
            handle.unpin();
        }
    }

    /** A {@link java.util.concurrent.Semaphore}-shaped handle on the semaphore {@code name}. */
    public EtcdSemaphore newSemaphore(String name, int permits) {
        checkName(name);
        return new EtcdSemaphore(this, name, permits);
    }

    /** A {@link java.util.concurrent.locks.ReadWriteLock} on {@code name}. */
    public EtcdReadWriteLock newReadWriteLock(String name) {
        checkName(name);
        return new EtcdReadWriteLock(this, name);
    }

    /**
     * What this client has done so far (acquisitions by result and their wait, waiters and holds
     * now, hold time, losses by reason, keep-alive round trip): a snapshot of the native core's
     * counters, the same figures as in every other language.
     *
     * @throws ClosedException after {@link #close()}
     */
    public Metrics metrics() {
        long c = handle.pin();
        try {
            return new Metrics(NativeBridge.metrics(c));
        } finally {
            handle.unpin();
        }
    }

    /**
     * Check that etcd answers and this client's session is alive (a lost session is reopened,
     * as the next lock call would): one read, bounded by the request timeout. For health checks.
     *
     * @return the read's round trip
     * @throws UnavailableException if no member answers
     * @throws ClosedException after {@link #close()}
     */
    public Duration ping() {
        long c = handle.pin();
        try {
            return Duration.ofNanos(NativeBridge.ping(c));
        } finally {
            handle.unpin();
        }
    }

    /** The effective lease TTL in seconds (etcd may raise a requested TTL below its minimum). */
    public long ttlSeconds() {
        long c = handle.pin();
        try {
            return NativeBridge.ttl(c);
        } finally {
            handle.unpin();
        }
    }

    /** The endpoints this client was built with. */
    public String endpoints() {
        return endpoints;
    }

    /** The shutdown hook of {@link Builder#releaseOnExit(boolean)}, while registered. */
    private volatile Thread exitHook;

    private void closeOnExit() {
        Thread hook = new Thread(this::close, "etcdlock-release-on-exit");
        exitHook = hook;
        Runtime.getRuntime().addShutdownHook(hook);
    }

    /** Whether {@link #close()} was called. */
    public boolean isClosed() {
        return handle.isClosed();
    }

    /**
     * Close the client: revoke its lease (which releases every lock it holds at once),
     * report {@link LossReason#CLIENT_CLOSED} to held guards, fail waiting calls with
     * {@link ClosedException}. Idempotent.
     */
    @Override
    public void close() {
        Thread hook = exitHook;
        if (hook != null && hook != Thread.currentThread()) {
            exitHook = null;
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException shuttingDown) {
                // the hook runs (or ran) anyway; close is idempotent
            }
        }
        if (handle.isClosed()) {
            return;
        }
        long c;
        try {
            c = handle.pin();
        } catch (ClosedException e) {
            return;
        }
        try {
            NativeBridge.close(c);
        } finally {
            handle.unpin();
            cleanable.clean();
        }
        LOG.debug("etcdlock client for {} closed", endpoints);
    }

    /** Benchmark floor: one raw Txn (put with {@code lease}) + Delete of {@code key}, no lock protocol. */
    void rawRoundTrip(String key, long lease) {
        checkName(key);
        long c = handle.pin();
        try {
            NativeBridge.rawRoundTrip(c, key, lease);
        } finally {
            handle.unpin();
        }
    }

    /** Benchmark: one uncontended lock + unlock done entirely in the native core; returns the token. */
    long coreLockUnlock(String name) {
        checkName(name);
        long c = handle.pin();
        try {
            return NativeBridge.coreLockUnlock(c, name);
        } finally {
            handle.unpin();
        }
    }

    /** Benchmark helper: grant a lease of {@code ttlSeconds} through the raw etcd client. */
    long rawGrantLease(long ttlSeconds) {
        long c = handle.pin();
        try {
            return NativeBridge.rawGrant(c, ttlSeconds);
        } finally {
            handle.unpin();
        }
    }

    /**
     * Acquire, waiting in Java and never inside native code: the native side runs the
     * acquisition on the etcdlock runtime and completes a future; the caller parks on it. A
     * virtual thread therefore unmounts while it waits instead of pinning its carrier (with
     * every carrier pinned by waiters, the holder could never be scheduled to unlock).
     * Interrupting an interruptible wait cancels the native acquisition and waits for it to
     * settle (its waiter key removed) before throwing {@link CancelledException}; an
     * uninterruptible wait keeps waiting and re-asserts the interrupt afterwards.
     */
    LockGuard lockNative(String name, long timeoutMs, boolean interruptible) {
        checkNotOnRuntimeThread("lock \"" + name + "\"");
        return await(startAcquire(name, timeoutMs), "lock \"" + name + "\"", interruptible);
    }

    <T extends AutoCloseable> T await(AsyncAcquire<T> f, String what, boolean interruptible) {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return f.get();
                } catch (InterruptedException e) {
                    if (interruptible) {
                        f.cancelAndSettle();
                        throw new CancelledException("interrupted while waiting for " + what);
                    }
                    interrupted = true;
                } catch (ExecutionException e) {
                    Throwable cause = e.getCause();
                    if (cause instanceof RuntimeException) {
                        throw (RuntimeException) cause;
                    }
                    if (cause instanceof Error) {
                        throw (Error) cause;
                    }
                    throw new InternalException(what + ": " + cause);
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * The {@link InterruptedException} a cancelled interruptible wait throws: the interrupt
     * status is cleared (as the JDK's blocking methods do) and {@code e} is the cause.
     */
    static InterruptedException interrupted(String message, CancelledException e) {
        Thread.interrupted();
        InterruptedException ie = new InterruptedException(message);
        ie.initCause(e);
        return ie;
    }

    /**
     * Blocking calls are refused on the etcdlock runtime's own threads (where async
     * callbacks run): waiting there could stall the very runtime that must complete the wait.
     */
    static void checkNotOnRuntimeThread(String what) {
        if (Thread.currentThread().getName().startsWith("etcdlock-rt")) {
            throw new InvalidArgumentException(what + ": a blocking etcdlock call was made on an etcdlock runtime thread"
                    + " (inside an async callback); use the *Async methods or continue on your own executor");
        }
    }

    static void checkName(String name) {
        if (name == null) {
            throw new InvalidArgumentException("lock name must not be null");
        }
        if (name.isEmpty()) {
            throw new InvalidArgumentException("lock name is empty");
        }
        checkText(name, "lock name");
    }

    /**
     * Refuse a string that is not valid Unicode (a lone UTF-16 surrogate): it has no UTF-8
     * form, so encoding it would be lossy ({@code String.getBytes} writes {@code ?}) and
     * JNI's modified UTF-8 would smuggle it to the core as a CESU-8 fragment. Checked here,
     * before any native call, so every binding gives the same {@link InvalidArgumentException}.
     */
    static String checkText(String s, String what) {
        if (s == null) {
            return null;
        }
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (Character.isHighSurrogate(c)) {
                if (i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
                    i++;
                    continue;
                }
                throw new InvalidArgumentException(what + " contains a lone UTF-16 surrogate at index " + i
                        + " (not valid Unicode; it has no UTF-8 form)");
            }
            if (Character.isLowSurrogate(c)) {
                throw new InvalidArgumentException(what + " contains a lone UTF-16 surrogate at index " + i
                        + " (not valid Unicode; it has no UTF-8 form)");
            }
        }
        return s;
    }

    static long toMillis(Duration d) {
        if (d == null) {
            throw new InvalidArgumentException("timeout must not be null");
        }
        if (d.isNegative()) {
            throw new InvalidArgumentException("timeout must not be negative: " + d);
        }
        try {
            return d.toMillis();
        } catch (ArithmeticException e) {
            return Long.MAX_VALUE / 2;
        }
    }

    final class AsyncAcquire<T extends AutoCloseable> extends CompletableFuture<T> {
        final long id;
        /** Completes when the native side has finished (acquired, failed or cancelled). */
        final CompletableFuture<Void> settled = new CompletableFuture<>();

        AsyncAcquire(String name, LongFunction<T> wrap, LongConsumer free) {
            long start = System.nanoTime();
            this.id = NativeBridge.register((g, value, error) -> {
                // Tell the listener first, so the acquisition is recorded by the time the caller
                // sees its outcome.
                AcquisitionListener l = acquisitionListener;
                if (l != null) {
                    try {
                        l.onAcquisition(name, error == null && isDone() ? Metrics.Result.CANCELLED : resultOf(error),
                                Duration.ofNanos(System.nanoTime() - start));
                    } catch (RuntimeException ignored) {
                        // a listener's failure is not the acquisition's
                    }
                }
                try {
                    if (error != null) {
                        completeExceptionally(error);
                    } else if (isDone() || !complete(wrap.apply(g))) {
                        // Cancelled meanwhile: nobody will use this hold; release it.
                        free.accept(g);
                    }
                } finally {
                    settled.complete(null);
                }
            });
        }

        /**
         * Cancel and wait (uninterruptibly; bounded by the request timeout on the native
         * side) until the waiter key is gone. A hold that won the race is released.
         */
        void cancelAndSettle() {
            cancel(true);
            boolean interrupted = Thread.interrupted();
            try {
                while (true) {
                    try {
                        settled.get();
                        break;
                    } catch (InterruptedException e) {
                        interrupted = true;
                    } catch (ExecutionException e) {
                        break;
                    }
                }
            } finally {
                if (interrupted) {
                    Thread.currentThread().interrupt();
                }
            }
            if (isDone() && !isCancelled() && !isCompletedExceptionally()) {
                try {
                    join().close();
                } catch (Exception ignored) {
                    // lost meanwhile: nothing left to release
                }
            }
        }

        @Override
        public boolean cancel(boolean mayInterruptIfRunning) {
            boolean r = super.cancel(mayInterruptIfRunning);
            if (r) {
                NativeBridge.cancelAsync(id);
            }
            return r;
        }
    }

    /**
     * Options for {@link EtcdLockClient}. An option not set here comes from its
     * {@code ETCDLOCK_*} environment variable ({@code ETCDLOCK_ENDPOINTS}, {@code ETCDLOCK_TTL},
     * {@code ETCDLOCK_NAMESPACE}, {@code ETCDLOCK_USERNAME}, {@code ETCDLOCK_PASSWORD},
     * {@code ETCDLOCK_TLS_CA}, {@code ETCDLOCK_TLS_CERT}, {@code ETCDLOCK_TLS_KEY},
     * {@code ETCDLOCK_TLS_DOMAIN}, {@code ETCDLOCK_CONNECT_TIMEOUT},
     * {@code ETCDLOCK_REQUEST_TIMEOUT}, {@code ETCDLOCK_MARGIN}, {@code ETCDLOCK_WATCH_HELD_KEYS}),
     * else the default: endpoint {@code http://127.0.0.1:2379}, TTL 15 s, no namespace, no
     * auth, plaintext. An option set here wins, and a malformed variable for it is ignored:
     * the rule core applies for every language.
     */
    public static final class Builder {
        private final List<String> endpoints = new ArrayList<>();
        private long ttlSecs = 0; // 0: not set
        private String namespace;
        private String user;
        private String password;
        private String ca;
        private String cert;
        private String key;
        private String domain;
        private long connectTimeoutMs = -1;
        private long requestTimeoutMs = -1;
        private long marginMs = -1;
        private int watchHeldKeys = -1; // -1: not set
        private boolean releaseOnExit;

        Builder() {}

        /** etcd endpoints ({@code http://host:port}, {@code https://...} with TLS, or {@code host:port}). */
        public Builder endpoints(String... endpoints) {
            if (endpoints == null) {
                throw new InvalidArgumentException("endpoints must not be null");
            }
            return endpoints(Arrays.asList(endpoints));
        }

        /** etcd endpoints. */
        public Builder endpoints(List<String> endpoints) {
            if (endpoints == null) {
                throw new InvalidArgumentException("endpoints must not be null");
            }
            if (endpoints.isEmpty()) {
                throw new InvalidArgumentException("no etcd endpoints given");
            }
            this.endpoints.clear();
            for (String e : endpoints) {
                if (e == null || e.trim().isEmpty() || e.contains(",")) {
                    throw new InvalidArgumentException("bad endpoint: " + (e == null ? "null" : '"' + e + '"'));
                }
                checkText(e, "endpoint");
                this.endpoints.add(e.trim());
            }
            return this;
        }

        /**
         * Lease TTL (whole seconds, rounded up; between 1 s and 9,000,000,000 s). A holder that
         * dies releases its locks after at most this long.
         */
        public Builder ttl(Duration ttl) {
            if (ttl == null) {
                throw new InvalidArgumentException("ttl must not be null");
            }
            if (ttl.isNegative() || ttl.isZero()) {
                throw new InvalidArgumentException("ttl must be positive, got " + ttl);
            }
            long s = ttl.getSeconds() + (ttl.getNano() > 0 ? 1 : 0);
            this.ttlSecs = s;
            return this;
        }

        /** Prefix prepended to every key this client touches (lock keys and guarded keys). */
        public Builder namespace(String namespace) {
            this.namespace = checkText(namespace, "namespace");
            return this;
        }

        /** etcd username and password. */
        public Builder user(String user, String password) {
            if (user == null || password == null) {
                throw new InvalidArgumentException("user and password must not be null");
            }
            this.user = checkText(user, "user");
            this.password = checkText(password, "password");
            return this;
        }

        /** TLS with a CA bundle and, for mutual TLS, a client certificate and key (PEM files; cert/key may be null). */
        public Builder tls(Path ca, Path cert, Path key) {
            if (ca == null && cert == null && key == null) {
                throw new InvalidArgumentException("tls needs at least a CA file");
            }
            this.ca = ca == null ? null : ca.toString();
            this.cert = cert == null ? null : cert.toString();
            this.key = key == null ? null : key.toString();
            return this;
        }

        /** Server name to verify instead of the endpoint host (TLS only). */
        public Builder tlsDomain(String domain) {
            this.domain = checkText(domain, "tlsDomain");
            return this;
        }

        /** Bound on reaching etcd at connect time (default 5 s). */
        public Builder connectTimeout(Duration d) {
            this.connectTimeoutMs = positiveMillis(d, "connectTimeout");
            return this;
        }

        /** Bound on every call that does not wait for a lock (tryLock, unlock, guarded operations, status, ping), retries and failover included: {@code UnavailableException} after it (default 2 s). Lock calls are bounded by their own timeout. */
        public Builder requestTimeout(Duration d) {
            this.requestTimeoutMs = positiveMillis(d, "requestTimeout");
            return this;
        }

        /**
         * Safety margin subtracted from the TTL for local loss detection (default: TTL/5, at
         * most 2 s). It must be below the TTL: {@link #build()} rejects a larger one with
         * {@link InvalidArgumentException} (never clamped).
         */
        public Builder margin(Duration margin) {
            if (margin == null || margin.isNegative()) {
                throw new InvalidArgumentException("margin must not be null or negative, got " + margin);
            }
            this.marginMs = toMillis(margin);
            return this;
        }

        /**
         * Watch each held key so an outside delete is reported at once (default true); with
         * false such a delete is noticed only by a guarded operation.
         */
        public Builder watchHeldKeys(boolean watch) {
            this.watchHeldKeys = watch ? 1 : 0;
            return this;
        }

        /**
         * Close the client from a JVM shutdown hook (SIGTERM, SIGINT, SIGHUP, {@code System.exit}),
         * so its locks are free at once instead of after the TTL; {@link #close()} removes the hook.
         * Default false. Spring's starter closes its client when the context closes, which a
         * graceful shutdown does after draining; this is for plain Java programs.
         */
        public Builder releaseOnExit(boolean release) {
            this.releaseOnExit = release;
            return this;
        }

        private static long positiveMillis(Duration d, String what) {
            if (d == null || d.isNegative() || d.isZero()) {
                throw new InvalidArgumentException(what + " must be positive, got " + d);
            }
            return Math.max(1, toMillis(d));
        }

        /**
         * Connect and open the session (grant the lease).
         *
         * @throws UnavailableException if no endpoint answers within the connect timeout
         * @throws AuthFailedException on bad credentials
         * @throws InvalidArgumentException on bad options
         */
        public EtcdLockClient build() {
            NativeBridge.ensureLoaded();
            String joined = endpoints.isEmpty() ? null : String.join(",", endpoints);
            long ptr = NativeBridge.connect(joined, ttlSecs, namespace, user, password, ca, cert, key, domain,
                    connectTimeoutMs, requestTimeoutMs, marginMs, watchHeldKeys);
            String eps = NativeBridge.endpoints(ptr);
            LOG.debug("etcdlock client connected to {}", eps);
            EtcdLockClient client = new EtcdLockClient(ptr, eps);
            if (releaseOnExit) {
                client.closeOnExit();
            }
            return client;
        }
    }
}
