package io.etcdlock;

import java.lang.ref.Cleaner;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.function.LongFunction;

import static io.etcdlock.Args.checkName;
import static io.etcdlock.Args.checkNotOnRuntimeThread;
import static io.etcdlock.Args.checkText;
import static io.etcdlock.Args.toMillis;

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

    /**
     * {@link #newLock(String)} whose every acquisition uses {@code options} (lock-delay, lease
     * time, holder metadata: see {@link AcquireOptions}).
     *
     * @param options null: none
     */
    public EtcdLock newLock(String name, AcquireOptions options) {
        checkName(name);
        return new EtcdLock(this, name, options);
    }

    /** Told of every acquisition a client finishes. */
    @FunctionalInterface
    public interface AcquisitionListener {
        /**
         * The acquisition of {@code name} ended with {@code result} after the caller waited
         * {@code waited}. Runs on the thread that finished it (an etcdlock runtime thread, or the
         * caller's own for {@code lock()}/{@code acquire()} on a platform thread): keep it short
         * and non-blocking (recording a Micrometer timer is fine); an exception it throws is
         * ignored.
         */
        void onAcquisition(String name, Metrics.Result result, Duration waited);
    }

    volatile AcquisitionListener acquisitionListener;
    final Acquirer acq = new Acquirer(this);

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

    /** Wait as long as it takes for the lock {@code name}. */
    public LockGuard acquire(String name) {
        return acq.lockNative(name, -1, false);
    }

    /**
     * Wait at most {@code timeout} for the lock {@code name}.
     *
     * @throws LockTimeoutException if it was not acquired in time (no waiter key is left behind)
     */
    public LockGuard acquire(String name, Duration timeout) {
        long ms = toMillis(timeout);
        if (ms == 0) {
            return tryAcquire(name).orElseThrow(
                    () -> EtcdLockException.of(ErrorCode.TIMEOUT, null, "lock \"" + name + "\" is held (zero timeout)", true));
        }
        return acq.lockNative(name, ms, false);
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
            return acq.lockNative(name, timeout == null ? -1 : toMillis(timeout), true);
        } catch (CancelledException e) {
            throw Args.interrupted("interrupted while waiting for lock " + name, e);
        }
    }

    /**
     * Take the lock if it is free right now; empty if someone holds or waits for it (one
     * etcd round trip that writes nothing when the lock is taken).
     */
    public Optional<LockGuard> tryAcquire(String name) {
        try {
            return Optional.of(acq.lockNative(name, 0, false));
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
        return acq.startLock(name, timeout == null ? -1 : toMillis(timeout));
    }

    /**
     * {@link #acquire(String, Duration)} with acquisition options (lock-delay, lease time,
     * holder metadata: see {@link AcquireOptions}).
     *
     * @param timeout null waits as long as it takes; zero is one try ({@link LockTimeoutException}
     *     if the lock is held or in its lock-delay)
     * @param options null: none
     * @throws InvalidArgumentException if an option is out of range (nothing is written)
     */
    public LockGuard acquire(String name, Duration timeout, AcquireOptions options) {
        return acq.lockNative(name, Acquirer.msOrForever(timeout), options, false);
    }

    /**
     * {@link #acquireInterruptibly(String, Duration)} with acquisition options.
     *
     * @param options null: none
     */
    public LockGuard acquireInterruptibly(String name, Duration timeout, AcquireOptions options)
            throws InterruptedException {
        if (Thread.interrupted()) {
            throw new InterruptedException("interrupted before acquiring lock " + name);
        }
        try {
            return acq.lockNative(name, Acquirer.msOrForever(timeout), options, true);
        } catch (CancelledException e) {
            throw Args.interrupted("interrupted while waiting for lock " + name, e);
        }
    }

    /**
     * {@link #tryAcquire(String)} with acquisition options: empty if someone holds or waits for
     * the lock, or it is in a vanished holder's lock-delay.
     *
     * @param options null: none
     */
    public Optional<LockGuard> tryAcquire(String name, AcquireOptions options) {
        try {
            return Optional.of(acq.lockNative(name, 0, options, false));
        } catch (LockTimeoutException e) {
            return Optional.empty();
        }
    }

    /**
     * {@link #acquireAsync(String, Duration)} with acquisition options.
     *
     * @param options null: none
     */
    public CompletableFuture<LockGuard> acquireAsync(String name, Duration timeout, AcquireOptions options) {
        return acq.startLock(name, Acquirer.msOrForever(timeout), options);
    }

    /**
     * Free a permit of the semaphore {@code name} whose holder is wedged: the permit whose id
     * (its {@link LockGuard#fencingToken() fencing token}, as {@link #status} shows it) is
     * {@code id}, whoever holds it; another permit is never touched. Returns true if it was
     * released, false if no permit has that id. The former holder's guard reports the loss with
     * reason {@link LossReason#KEY_DELETED}.
     */
    public boolean releasePermit(String name, long id) {
        checkName(name);
        checkNotOnRuntimeThread("releasePermit \"" + name + "\"");
        return withClient(c -> NativeBridge.releasePermit(c, name, id));
    }

    /**
     * Open the count-down latch {@code name} with {@code count} (Java's {@link
     * java.util.concurrent.CountDownLatch}, shared by every process that opens the same name):
     * created with {@code count} if it does not exist. Every process must open it with the same
     * count. Close the latch when done; once every handle is closed its keys expire within the TTL
     * and the name starts afresh.
     *
     * @param count between 1 and 2^31
     * @throws InvalidArgumentException for a count out of range, or another count than the
     *     name's creator gave
     */
    public EtcdLatch latch(String name, long count) {
        checkName(name);
        checkNotOnRuntimeThread("latch \"" + name + "\"");
        long h = withClient(c -> NativeBridge.latchOpen(c, name, count));
        return new EtcdLatch(this, name, count, h);
    }

    /**
     * Open the barrier {@code name} for {@code parties} parties (a one-shot {@link
     * java.util.concurrent.CyclicBarrier} across processes): {@link EtcdBarrier#await()} returns in
     * every party at once when the last has arrived. Every process opens it with the same number.
     * Once released the barrier is finished: use a new name per round.
     *
     * @param parties between 1 and 2^31 - 1
     * @throws InvalidArgumentException for a number out of range, another number than the name's
     *     creator gave, or a barrier that has already released its parties and is still open
     */
    public EtcdBarrier barrier(String name, int parties) {
        checkName(name);
        checkNotOnRuntimeThread("barrier \"" + name + "\"");
        long h = withClient(c -> NativeBridge.barrierOpen(c, name, parties));
        return new EtcdBarrier(this, name, parties, h);
    }

    // ---- recipes: semaphore, read-write lock, multi-lock, election, queue view ----

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
        return acq.awaitRecipe(Acquirer.PERMIT, name, null, permits, Acquirer.msOrForever(timeout), "semaphore \"" + name + "\"");
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
        return acq.startRecipe(Acquirer.PERMIT, name, null, permits, Acquirer.msOrForever(timeout));
    }

    /**
     * {@link #acquirePermit(String, int, Duration)} with acquisition options: a lease time or
     * metadata (a lock-delay is refused for permits with {@link InvalidArgumentException}).
     *
     * @param options null: none
     */
    public LockGuard acquirePermit(String name, int permits, Duration timeout, AcquireOptions options) {
        return acq.awaitRecipe(Acquirer.PERMIT, name, null, permits, Acquirer.msOrForever(timeout), options,
                "semaphore \"" + name + "\"");
    }

    /** {@link #acquirePermit(String, int, Duration, AcquireOptions)} without blocking. */
    public CompletableFuture<LockGuard> acquirePermitAsync(String name, int permits, Duration timeout,
            AcquireOptions options) {
        return acq.startRecipe(Acquirer.PERMIT, name, null, permits, Acquirer.msOrForever(timeout), options);
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
        return acq.awaitRecipe(Acquirer.READ, name, null, 0, Acquirer.msOrForever(timeout), "read lock \"" + name + "\"");
    }

    /** {@link #acquireRead(String, Duration)} without blocking. */
    public CompletableFuture<LockGuard> acquireReadAsync(String name, Duration timeout) {
        return acq.startRecipe(Acquirer.READ, name, null, 0, Acquirer.msOrForever(timeout));
    }

    /**
     * {@link #acquireRead(String, Duration)} with acquisition options: a lease time or metadata
     * (a lock-delay is refused for read locks with {@link InvalidArgumentException}).
     *
     * @param options null: none
     */
    public LockGuard acquireRead(String name, Duration timeout, AcquireOptions options) {
        return acq.awaitRecipe(Acquirer.READ, name, null, 0, Acquirer.msOrForever(timeout), options,
                "read lock \"" + name + "\"");
    }

    /** {@link #acquireRead(String, Duration, AcquireOptions)} without blocking. */
    public CompletableFuture<LockGuard> acquireReadAsync(String name, Duration timeout, AcquireOptions options) {
        return acq.startRecipe(Acquirer.READ, name, null, 0, Acquirer.msOrForever(timeout), options);
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
        return AsyncAcquire.await(acq.startAll(names, Acquirer.msOrForever(timeout)), what, false);
    }

    /** {@link #acquireAll(List, Duration)} without blocking. */
    public CompletableFuture<MultiLockGuard> acquireAllAsync(List<String> names, Duration timeout) {
        return acq.startAll(names, Acquirer.msOrForever(timeout));
    }

    /**
     * Campaign for leadership of the election {@code name}, announcing {@code value}: wait (in
     * arrival order among candidates) until elected. The keys are those of Go's
     * {@code concurrency.Election} and {@code etcdctl elect}, which take part in the same election.
     */
    public Leadership campaign(String name, String value) {
        return campaign(name, Args.utf8(value), null);
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
        return new Leadership(acq.awaitRecipe(Acquirer.CAMPAIGN, name, value, 0, Acquirer.msOrForever(timeout), "election \"" + name + "\""));
    }

    /** {@link #campaign(String, byte[], Duration)} without blocking; cancelling withdraws the candidacy. */
    public CompletableFuture<Leadership> campaignAsync(String name, byte[] value, Duration timeout) {
        if (value == null) {
            throw new InvalidArgumentException("value must not be null");
        }
        return acq.startRecipe(Acquirer.CAMPAIGN, name, value, 0, Acquirer.msOrForever(timeout)).thenApply(Leadership::new);
    }

    /**
     * {@link #campaign(String, byte[], Duration)} with acquisition options (a lock-delay applies
     * to elections as to locks: see {@link AcquireOptions.Builder#lockDelay}).
     *
     * @param options null: none
     */
    public Leadership campaign(String name, byte[] value, Duration timeout, AcquireOptions options) {
        if (value == null) {
            throw new InvalidArgumentException("value must not be null");
        }
        return new Leadership(acq.awaitRecipe(Acquirer.CAMPAIGN, name, value, 0, Acquirer.msOrForever(timeout), options,
                "election \"" + name + "\""));
    }

    /** {@link #campaign(String, byte[], Duration, AcquireOptions)} without blocking; cancelling withdraws the candidacy. */
    public CompletableFuture<Leadership> campaignAsync(String name, byte[] value, Duration timeout,
            AcquireOptions options) {
        if (value == null) {
            throw new InvalidArgumentException("value must not be null");
        }
        return acq.startRecipe(Acquirer.CAMPAIGN, name, value, 0, Acquirer.msOrForever(timeout), options)
                .thenApply(Leadership::new);
    }

    /** The current leader of the election {@code name}, or empty when nobody leads. */
    public Optional<Leader> leader(String name) {
        checkName(name);
        checkNotOnRuntimeThread("leader \"" + name + "\"");
        byte[] b = withClient(c -> NativeBridge.leader(c, name));
        return b == null ? Optional.empty() : Optional.of(new RecipeCodec(b).leader());
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
        return LeaderObservation.start(handle, name, listener);
    }

    /**
     * The holders and waiters of {@code name} for any kind of lock (mutex, semaphore,
     * read-write lock, election; etcdctl and Go keys too): what {@code etcdlock status} shows.
     */
    public LockStatus status(String name) {
        checkName(name);
        checkNotOnRuntimeThread("status \"" + name + "\"");
        return withClient(c -> new LockStatus(name, NativeBridge.status(c, name)));
    }

    /**
     * Every lock, election, semaphore and read-write lock whose name starts with {@code prefix}
     * (empty: all of this client's namespace), sorted by name, from one read: what {@code
     * etcdlock list} shows.
     */
    public java.util.List<LockStatus> list(String prefix) {
        java.util.Objects.requireNonNull(prefix, "prefix");
        checkNotOnRuntimeThread("list \"" + prefix + "\"");
        return withClient(c -> LockStatus.listOf(NativeBridge.list(c, prefix)));
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
        return withClient(c -> NativeBridge.release(c, name, token));
    }

    /** Run-once records: a job scheduled on every node runs on one per tick (ShedLock's semantics). */
    public OnceRecords once() {
        return new OnceRecords(this);
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
        return withClient(c -> new Metrics(NativeBridge.metrics(c)));
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
        return withClient(c -> Duration.ofNanos(NativeBridge.ping(c)));
    }

    /** The effective lease TTL in seconds (etcd may raise a requested TTL below its minimum). */
    public long ttlSeconds() {
        return withClient(c -> NativeBridge.ttl(c));
    }

    /** The endpoints this client was built with. */
    public String endpoints() {
        return endpoints;
    }

    private final ExitHook exitHook = new ExitHook();

    /** Whether {@link #close()} was called. */
    public boolean isClosed() {
        return handle.isClosed();
    }

    /**
     * Close the client: revoke its lease (which releases every lock it holds at once),
     * report {@link LossReason#CLIENT_CLOSED} to held guards, fail waiting calls with
     * {@link ClosedException} at once (also one retrying while etcd is away), and close the
     * connection to etcd. Returns within the request timeout, whatever etcd does. Idempotent.
     */
    @Override
    public void close() {
        exitHook.unregister();
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

    /** Run {@code f} with the native client pinned (never freed meanwhile). */
    <T> T withClient(LongFunction<T> f) {
        long c = handle.pin();
        try {
            return f.apply(c);
        } finally {
            handle.unpin();
        }
    }

    /** The native client handle (pin/unpin around a native call); LockBenchmark uses it. */
    NativeHandle handle() {
        return handle;
    }

    /**
     * Options for {@link EtcdLockClient}. An option not set here comes from its
     * {@code ETCDLOCK_*} environment variable ({@code ETCDLOCK_ENDPOINTS}, {@code ETCDLOCK_TTL},
     * {@code ETCDLOCK_NAMESPACE}, {@code ETCDLOCK_USERNAME}, {@code ETCDLOCK_PASSWORD},
     * {@code ETCDLOCK_TLS_CA}, {@code ETCDLOCK_TLS_CERT}, {@code ETCDLOCK_TLS_KEY},
     * {@code ETCDLOCK_TLS_DOMAIN}, {@code ETCDLOCK_CONNECT_TIMEOUT},
     * {@code ETCDLOCK_REQUEST_TIMEOUT}, {@code ETCDLOCK_MARGIN}, {@code ETCDLOCK_WATCH_HELD_KEYS},
     * {@code ETCDLOCK_KEEPALIVE_INTERVAL}, {@code ETCDLOCK_LAZY_CONNECT}), else the default: endpoint
     * {@code http://127.0.0.1:2379}, TTL 15 s, no namespace, no auth, plaintext. An option set
     * here wins, and a malformed variable for it is ignored: the rule core applies for every
     * language. The core checks every value ({@link InvalidArgumentException} from
     * {@link #build()} names the option); a setter only turns its Java value into the option.
     */
    public static final class Builder {
        /** Core option keys and their values in core's syntax, in the order set. */
        private final Map<String, String> options = new LinkedHashMap<>();
        private boolean releaseOnExit;

        Builder() {}

        private Builder option(String key, String value) {
            options.put(key, value);
            return this;
        }

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
            // Not endpoints.contains(null): List.of(...) lists throw NullPointerException for it.
            for (String e : endpoints) {
                if (e == null) {
                    throw new InvalidArgumentException("endpoints must not be null");
                }
                checkText(e, "endpoint");
            }
            // "," for an empty list: core refuses it ("no etcd endpoints given").
            return option("endpoints", endpoints.isEmpty() ? "," : String.join(",", endpoints));
        }

        /**
         * Lease TTL (whole seconds, rounded up; between 1 s and 9,000,000,000 s). A holder that
         * dies releases its locks after at most this long.
         */
        public Builder ttl(Duration ttl) {
            if (ttl == null) {
                throw new InvalidArgumentException("ttl must not be null");
            }
            long s = ttl.getSeconds() + (ttl.getNano() > 0 ? 1 : 0);
            return option("ttl", Long.toString(s));
        }

        /** Prefix prepended to every key this client touches (lock keys and guarded keys). */
        public Builder namespace(String namespace) {
            return option("namespace", checkText(namespace, "namespace"));
        }

        /** etcd username and password. */
        public Builder user(String user, String password) {
            if (user == null || password == null) {
                throw new InvalidArgumentException("user and password must not be null");
            }
            option("username", checkText(user, "user"));
            return option("password", checkText(password, "password"));
        }

        /** TLS with a CA bundle and, for mutual TLS, a client certificate and key (PEM files; cert/key may be null). */
        public Builder tls(Path ca, Path cert, Path key) {
            if (ca == null && cert == null && key == null) {
                throw new InvalidArgumentException("tls needs at least a CA file");
            }
            if (ca != null) {
                option("tls_ca", ca.toString());
            }
            if (cert != null) {
                option("tls_cert", cert.toString());
            }
            return key == null ? this : option("tls_key", key.toString());
        }

        /** Server name to verify instead of the endpoint host (TLS only). */
        public Builder tlsDomain(String domain) {
            return option("tls_domain", checkText(domain, "tlsDomain"));
        }

        /** Bound on reaching etcd at connect time (default 5 s). */
        public Builder connectTimeout(Duration d) {
            return option("connect_timeout", Args.duration(d, "connectTimeout"));
        }

        /** Bound on every call that does not wait for a lock (tryLock, unlock, guarded operations, status, ping), retries and failover included: {@code UnavailableException} after it (default 2 s). Lock calls are bounded by their own timeout. */
        public Builder requestTimeout(Duration d) {
            return option("request_timeout", Args.duration(d, "requestTimeout"));
        }

        /**
         * Safety margin subtracted from the TTL for local loss detection (default: TTL/5, at
         * most 2 s). At most half the TTL: {@link #build()} rejects a larger one with
         * {@link InvalidArgumentException} (never clamped).
         */
        public Builder margin(Duration margin) {
            return option("margin", Args.duration(margin, "margin"));
        }

        /**
         * Time between lease keep-alives (default TTL/3): at least 50 ms and at most half of
         * TTL minus margin, else {@link #build()} throws {@link InvalidArgumentException}.
         */
        public Builder keepaliveInterval(Duration interval) {
            return option("keepalive_interval", Args.duration(interval, "keepaliveInterval"));
        }

        /**
         * Watch each held key so an outside delete is reported at once (default true); with
         * false such a delete is noticed only by a guarded operation.
         */
        public Builder watchHeldKeys(boolean watch) {
            return option("watch_held_keys", Boolean.toString(watch));
        }

        /**
         * Connect on first use (default false: {@link #build()} throws
         * {@link UnavailableException} within the connect timeout when no member answers). With
         * true, {@code build()} only checks the options, so an application starts while etcd is
         * briefly down; {@link EtcdLockClient#ping()} throws until a member answers, and each
         * call reaches etcd within its own bound (a lock call its timeout, others the request
         * timeout).
         */
        public Builder lazyConnect(boolean lazy) {
            return option("lazy_connect", Boolean.toString(lazy));
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

        /**
         * Connect and open the session (grant the lease).
         *
         * @throws UnavailableException if no endpoint answers within the connect timeout
         * @throws AuthFailedException on bad credentials
         * @throws InvalidArgumentException on bad options
         */
        public EtcdLockClient build() {
            NativeBridge.ensureLoaded();
            String[] pairs = new String[options.size() * 2];
            int i = 0;
            for (Map.Entry<String, String> e : options.entrySet()) {
                pairs[i++] = e.getKey();
                pairs[i++] = e.getValue();
            }
            long ptr = NativeBridge.connect(pairs);
            String eps = NativeBridge.endpoints(ptr);
            LOG.debug("etcdlock client connected to {}", eps);
            EtcdLockClient client = new EtcdLockClient(ptr, eps);
            if (releaseOnExit) {
                client.exitHook.register(client::close);
            }
            return client;
        }
    }
}
