package io.etcdlock;

import java.lang.ref.Cleaner;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.function.LongFunction;

import static io.etcdlock.Args.checkName;
import static io.etcdlock.Args.checkNotOnRuntimeThread;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A connection to etcd: one etcd lease, kept alive in the background by the native core, shared
 * by every hold taken through it. Thread-safe; create one per application and share it.
 *
 * <p>Locks are objects made by the client, as Redisson's {@code getLock} and Curator's
 * {@code InterProcessMutex}: {@link #newLock(String)}, {@link #newSemaphore(String, int)},
 * {@link #newReadWriteLock(String)}, {@link #newElection(String)} and
 * {@link #newMultiLock(List)}. Each offers the {@code java.util.concurrent} shape where there is
 * one (reentrant per thread) and guard-returning calls ({@code acquire}, {@code tryAcquire},
 * {@code acquireAsync}), each of which is an independent hold, released by closing its
 * {@link LockGuard}:
 *
 * <pre>{@code
 * try (EtcdLockClient client = EtcdLockClient.builder()
 *         .endpoints("http://127.0.0.1:2379")
 *         .ttl(Duration.ofSeconds(10))
 *         .build();
 *      LockGuard guard = client.newLock("stock").acquire(Duration.ofSeconds(5))) {
 *     long stock = Long.parseLong(guard.get("inventory/stock"));
 *     guard.put("inventory/stock", Long.toString(stock - 1)); // etcd rejects it if we lost the lock
 * }
 * }</pre>
 *
 * The client itself offers what concerns the connection, or any name whoever holds it:
 * {@link #status}, {@link #list}, {@link #deadlocks}, {@link #history}, {@link #release},
 * {@link #releasePermit}, {@link #leader}, {@link #observe}, {@link #latch}, {@link #barrier},
 * {@link #once()}, {@link #metrics()}, {@link #ping()} and {@link #close()}. Lock names are prefixes in etcd's own lock layout (as
 * Go's {@code concurrency.Mutex}, {@code etcdctl lock} and jetcd's Lock client use), so all of
 * them exclude each other.
 */
public final class EtcdLockClient implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(EtcdLockClient.class);
    static final Cleaner CLEANER = Cleaner.create();

    private final NativeHandle handle;
    private final Cleaner.Cleanable cleanable;
    private final String endpoints;
    /** The client's spans (null: no OpenTelemetry API on the class path). */
    final Telemetry telemetry;

    EtcdLockClient(long ptr, String endpoints, Telemetry telemetry) {
        this.telemetry = telemetry;
        this.handle = new NativeHandle(ptr, NativeBridge::freeClient,
                () -> new ClosedException("the etcdlock client was closed"));
        this.cleanable = CLEANER.register(this, handle::close);
        this.endpoints = endpoints;
    }

    /**
     * A builder; {@link EtcdLockClientBuilder#build()} connects. Declare a variable for it as
     * {@link EtcdLockClientBuilder}: the subclass returned exists for code that names
     * {@code EtcdLockClient.Builder}.
     */
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
     * A {@link java.util.concurrent.locks.Lock} on {@code name}, reentrant per thread, whose
     * {@link EtcdLock#acquire(Duration)} family also hands out independent holds as
     * {@link LockGuard}s. Each call returns a new lock object; reentrancy is tracked per object,
     * so share the object between the code paths that should re-enter it.
     *
     * @throws InvalidArgumentException if {@code name} is null, empty or not valid Unicode
     */
    public EtcdLock newLock(String name) {
        checkName(name);
        return new EtcdLock(this, name);
    }

    /**
     * {@link #newLock(String)} whose every acquisition uses {@code options} (lock-delay, lease
     * time, holder metadata: see {@link AcquireOptions}; each acquisition checks them and writes
     * nothing when one is out of range).
     *
     * @param options null: none
     */
    public EtcdLock newLock(String name, AcquireOptions options) {
        checkName(name);
        return new EtcdLock(this, name, options);
    }

    /**
     * A {@link java.util.concurrent.Semaphore}-shaped handle on the semaphore {@code name} of
     * {@code permits} permits; {@link EtcdSemaphore#acquirePermit(Duration)} hands out a permit
     * as a {@link LockGuard}.
     *
     * @throws InvalidArgumentException if {@code permits} is below 1 or the name is invalid
     */
    public EtcdSemaphore newSemaphore(String name, int permits) {
        return newSemaphore(name, permits, null);
    }

    /**
     * {@link #newSemaphore(String, int)} whose every acquisition uses {@code options} (a lease
     * time or metadata; each acquisition refuses a lock-delay with
     * {@link InvalidArgumentException}).
     *
     * @param options null: none
     */
    public EtcdSemaphore newSemaphore(String name, int permits, AcquireOptions options) {
        checkName(name);
        EtcdSemaphore.checkPermits(permits);
        return new EtcdSemaphore(this, name, permits, options);
    }

    /** A {@link java.util.concurrent.locks.ReadWriteLock} on {@code name}. */
    public EtcdReadWriteLock newReadWriteLock(String name) {
        return newReadWriteLock(name, null);
    }

    /**
     * {@link #newReadWriteLock(String)} whose every acquisition, read or write, uses
     * {@code options} (each read acquisition refuses a lock-delay with
     * {@link InvalidArgumentException}).
     *
     * @param options null: none
     */
    public EtcdReadWriteLock newReadWriteLock(String name, AcquireOptions options) {
        checkName(name);
        return new EtcdReadWriteLock(this, name, options);
    }

    /** The election {@code name}: campaign for its leadership, read or follow its leader. */
    public EtcdElection newElection(String name) {
        return newElection(name, null);
    }

    /**
     * {@link #newElection(String)} whose every campaign uses {@code options} (a lock-delay
     * applies to elections as to locks: see {@link AcquireOptions.Builder#lockDelay}).
     *
     * @param options null: none
     */
    public EtcdElection newElection(String name, AcquireOptions options) {
        checkName(name);
        return new EtcdElection(this, name, options);
    }

    /**
     * A leader loop on the election {@code name}: configure it, then
     * {@link LeaderLoopBuilder#start(LeaderTask)} campaigns and runs the task once per term
     * (see {@link EtcdLeaderLoop}).
     */
    public LeaderLoopBuilder newLeaderLoop(String name) {
        checkName(name);
        return new LeaderLoopBuilder(this, name);
    }

    EtcdLeaderLoop startLeaderLoop(String name, LeaderLoopBuilder b, LeaderTask task) {
        return EtcdLeaderLoop.start(this, handle, name, b, task);
    }

    /**
     * The locks {@code names} (at most 128), taken together: see {@link EtcdMultiLock}.
     *
     * @throws InvalidArgumentException if {@code names} is null or holds an invalid name
     */
    public EtcdMultiLock newMultiLock(List<String> names) {
        return EtcdMultiLock.checked(this, names);
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
     * counts them: a zero timeout or {@link EtcdLock#tryAcquire()} that finds the lock held is
     * {@code TIMEOUT}.
     */
    public void setAcquisitionListener(AcquisitionListener listener) {
        this.acquisitionListener = listener;
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

    /** The current leader of the election {@code name}, or empty when nobody leads. */
    public Optional<Leader> leader(String name) {
        checkName(name);
        checkNotOnRuntimeThread("leader \"" + name + "\"");
        return Leader.of(withClient(c -> NativeBridge.leader(c, name)));
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
        return withClient(c -> LockStatus.of(NativeBridge.status(c, name)));
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
     * The cycles of clients waiting on each other's holds among the locks whose names start with
     * {@code prefix} (empty: all of this client's namespace), whatever language each client uses,
     * from one read: what {@code etcdlock deadlocks} shows. Two threads of one client waiting on
     * each other are not in etcd's state (see {@link Deadlocks}).
     */
    public Deadlocks deadlocks(String prefix) {
        java.util.Objects.requireNonNull(prefix, "prefix");
        checkNotOnRuntimeThread("deadlocks \"" + prefix + "\"");
        return withClient(c -> Deadlocks.of(NativeBridge.deadlocks(c, prefix)));
    }

    /**
     * Every hold and wait of {@code name} that etcd's history still has (back to its compaction
     * revision), or only those of the last {@code since} (null: all): what {@code etcdlock
     * history} shows. Costs etcd a put and a delete of a marker key beside the name and a watch
     * replayed from the oldest revision it keeps. A negative {@code since} is
     * {@link InvalidArgumentException}.
     */
    public LockHistory history(String name, Duration since) {
        checkName(name);
        checkNotOnRuntimeThread("history \"" + name + "\"");
        double ms = since == null ? Double.NaN : since.getSeconds() * 1000.0 + since.getNano() / 1e6;
        return withClient(c -> LockHistory.of(NativeBridge.history(c, name, ms)));
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

    /**
     * What this client has done so far (acquisitions by result and their wait, waiters and holds
     * now, hold time, losses by reason, keep-alive round trip): a snapshot of the native core's
     * counters, the same figures as in every other language.
     *
     * @throws ClosedException after {@link #close()}
     */
    public Metrics metrics() {
        return withClient(c -> Metrics.of(NativeBridge.metrics(c)));
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

    final ExitHook exitHook = new ExitHook();

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

    // ---- acquisitions on the client: each is the lock object's call of the same name ----
    // The lock objects are made here without the checks of newLock etc., so that each argument
    // is checked in the order, and with the message, these calls always had. One block of
    // one-line delegations, without blank lines between them.

    /** @deprecated use {@link EtcdLock#acquire()} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public LockGuard acquire(String name) {
        return new EtcdLock(this, name).acquire();
    }
    /** @deprecated use {@link EtcdLock#acquire(Duration)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public LockGuard acquire(String name, Duration timeout) {
        return new EtcdLock(this, name).acquireBounded(timeout);
    }
    /** @deprecated use {@link EtcdLock#acquire(Duration)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public LockGuard acquire(String name, Duration timeout, AcquireOptions options) {
        return new EtcdLock(this, name, options).acquire(timeout);
    }
    /** @deprecated use {@link EtcdLock#acquireInterruptibly(Duration)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public LockGuard acquireInterruptibly(String name, Duration timeout) throws InterruptedException {
        return new EtcdLock(this, name).acquireInterruptibly(timeout);
    }
    /** @deprecated use {@link EtcdLock#acquireInterruptibly(Duration)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public LockGuard acquireInterruptibly(String name, Duration timeout, AcquireOptions options)
            throws InterruptedException {
        return new EtcdLock(this, name, options).acquireInterruptibly(timeout);
    }
    /** @deprecated use {@link EtcdLock#tryAcquire()} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public Optional<LockGuard> tryAcquire(String name) {
        return new EtcdLock(this, name).tryAcquire();
    }
    /** @deprecated use {@link EtcdLock#tryAcquire()} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public Optional<LockGuard> tryAcquire(String name, AcquireOptions options) {
        return new EtcdLock(this, name, options).tryAcquire();
    }
    /** @deprecated use {@link EtcdLock#acquireAsync()} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public CompletableFuture<LockGuard> acquireAsync(String name) {
        return new EtcdLock(this, name).acquireAsync();
    }
    /** @deprecated use {@link EtcdLock#acquireAsync(Duration)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public CompletableFuture<LockGuard> acquireAsync(String name, Duration timeout) {
        return new EtcdLock(this, name).acquireAsync(timeout);
    }
    /** @deprecated use {@link EtcdLock#acquireAsync(Duration)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public CompletableFuture<LockGuard> acquireAsync(String name, Duration timeout, AcquireOptions options) {
        return new EtcdLock(this, name, options).acquireAsync(timeout);
    }
    /** @deprecated use {@link EtcdSemaphore#acquirePermit(Duration)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public LockGuard acquirePermit(String name, int permits, Duration timeout) {
        return new EtcdSemaphore(this, name, permits, null).acquirePermit(timeout);
    }
    /** @deprecated use {@link EtcdSemaphore#acquirePermit(Duration)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public LockGuard acquirePermit(String name, int permits, Duration timeout, AcquireOptions options) {
        return new EtcdSemaphore(this, name, permits, options).acquirePermit(timeout);
    }
    /** @deprecated use {@link EtcdSemaphore#tryAcquirePermit()} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public Optional<LockGuard> tryAcquirePermit(String name, int permits) {
        return new EtcdSemaphore(this, name, permits, null).tryAcquirePermit();
    }
    /** @deprecated use {@link EtcdSemaphore#acquirePermitAsync(Duration)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public CompletableFuture<LockGuard> acquirePermitAsync(String name, int permits, Duration timeout) {
        return new EtcdSemaphore(this, name, permits, null).acquirePermitAsync(timeout);
    }
    /** @deprecated use {@link EtcdSemaphore#acquirePermitAsync(Duration)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public CompletableFuture<LockGuard> acquirePermitAsync(String name, int permits, Duration timeout,
            AcquireOptions options) {
        return new EtcdSemaphore(this, name, permits, options).acquirePermitAsync(timeout);
    }
    /** @deprecated use {@link EtcdReadWriteLock.ReadLock#acquire(Duration)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public LockGuard acquireRead(String name, Duration timeout) {
        return new EtcdReadWriteLock(this, name, null).readLock().acquire(timeout);
    }
    /** @deprecated use {@link EtcdReadWriteLock.ReadLock#acquire(Duration)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public LockGuard acquireRead(String name, Duration timeout, AcquireOptions options) {
        return new EtcdReadWriteLock(this, name, options).readLock().acquire(timeout);
    }
    /** @deprecated use {@link EtcdReadWriteLock.ReadLock#acquireAsync(Duration)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public CompletableFuture<LockGuard> acquireReadAsync(String name, Duration timeout) {
        return new EtcdReadWriteLock(this, name, null).readLock().acquireAsync(timeout);
    }
    /** @deprecated use {@link EtcdReadWriteLock.ReadLock#acquireAsync(Duration)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public CompletableFuture<LockGuard> acquireReadAsync(String name, Duration timeout, AcquireOptions options) {
        return new EtcdReadWriteLock(this, name, options).readLock().acquireAsync(timeout);
    }
    /** @deprecated use {@link EtcdMultiLock#acquire(Duration)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public MultiLockGuard acquireAll(List<String> names, Duration timeout) {
        return new EtcdMultiLock(this, names).acquire(timeout);
    }
    /** @deprecated use {@link EtcdMultiLock#acquireAsync(Duration)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public CompletableFuture<MultiLockGuard> acquireAllAsync(List<String> names, Duration timeout) {
        return new EtcdMultiLock(this, names).acquireAsync(timeout);
    }
    /** @deprecated use {@link EtcdElection#campaign(String)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public Leadership campaign(String name, String value) {
        return new EtcdElection(this, name, null).campaign(value);
    }
    /** @deprecated use {@link EtcdElection#campaign(byte[], Duration)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public Leadership campaign(String name, byte[] value, Duration timeout) {
        return new EtcdElection(this, name, null).campaign(value, timeout);
    }
    /** @deprecated use {@link EtcdElection#campaign(byte[], Duration)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public Leadership campaign(String name, byte[] value, Duration timeout, AcquireOptions options) {
        return new EtcdElection(this, name, options).campaign(value, timeout);
    }
    /** @deprecated use {@link EtcdElection#campaignAsync(byte[], Duration)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public CompletableFuture<Leadership> campaignAsync(String name, byte[] value, Duration timeout) {
        return new EtcdElection(this, name, null).campaignAsync(value, timeout);
    }
    /** @deprecated use {@link EtcdElection#campaignAsync(byte[], Duration)} */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public CompletableFuture<Leadership> campaignAsync(String name, byte[] value, Duration timeout,
            AcquireOptions options) {
        return new EtcdElection(this, name, options).campaignAsync(value, timeout);
    }

    /**
     * What {@link #builder()} returns: an {@link EtcdLockClientBuilder} whose setters return
     * this type, so that code declaring {@code EtcdLockClient.Builder} variables compiles and
     * links as before.
     *
     * @deprecated declare {@link EtcdLockClientBuilder} instead
     */
    @Deprecated(since = "0.1.0", forRemoval = true)
    public static final class Builder extends EtcdLockClientBuilder {
        Builder() {}

        @Override public Builder endpoints(String... endpoints) { super.endpoints(endpoints); return this; }
        @Override public Builder endpoints(List<String> endpoints) { super.endpoints(endpoints); return this; }
        @Override public Builder ttl(Duration ttl) { super.ttl(ttl); return this; }
        @Override public Builder namespace(String namespace) { super.namespace(namespace); return this; }
        @Override public Builder user(String user, String password) { super.user(user, password); return this; }
        @Override public Builder tls(Path ca, Path cert, Path key) { super.tls(ca, cert, key); return this; }
        @Override public Builder tlsDomain(String domain) { super.tlsDomain(domain); return this; }
        @Override public Builder connectTimeout(Duration d) { super.connectTimeout(d); return this; }
        @Override public Builder requestTimeout(Duration d) { super.requestTimeout(d); return this; }
        @Override public Builder margin(Duration margin) { super.margin(margin); return this; }
        @Override public Builder keepaliveInterval(Duration interval) { super.keepaliveInterval(interval); return this; }
        @Override public Builder watchHeldKeys(boolean watch) { super.watchHeldKeys(watch); return this; }
        @Override public Builder lazyConnect(boolean lazy) { super.lazyConnect(lazy); return this; }
        @Override public Builder releaseOnExit(boolean release) { super.releaseOnExit(release); return this; }
    }
}
