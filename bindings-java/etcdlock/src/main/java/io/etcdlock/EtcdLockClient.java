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
            Thread.interrupted();
            InterruptedException ie = new InterruptedException("interrupted while waiting for lock " + name);
            ie.initCause(e);
            throw ie;
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

    private AsyncAcquire startAcquire(String name, long ms) {
        checkName(name);
        AsyncAcquire f = new AsyncAcquire(name);
        long c;
        try {
            c = handle.pin();
        } catch (RuntimeException e) {
            NativeBridge.forget(f.id);
            f.completeExceptionally(e);
            return f;
        }
        try {
            NativeBridge.lockAsync(c, name, ms, f.id);
        } catch (RuntimeException e) {
            NativeBridge.forget(f.id);
            f.completeExceptionally(e);
        } finally {
            handle.unpin();
        }
        return f;
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
        AsyncAcquire f = startAcquire(name, timeoutMs);
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return f.get();
                } catch (InterruptedException e) {
                    if (interruptible) {
                        f.cancelAndSettle();
                        throw new CancelledException("interrupted while waiting for lock \"" + name + "\"");
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
                    throw new InternalException("lock \"" + name + "\": " + cause);
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
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

    private final class AsyncAcquire extends CompletableFuture<LockGuard> {
        final long id;
        /** Completes when the native side has finished (acquired, failed or cancelled). */
        final CompletableFuture<Void> settled = new CompletableFuture<>();

        AsyncAcquire(String name) {
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
                    } else if (isDone() || !complete(new LockGuard(EtcdLockClient.this, name, g))) {
                        // Cancelled meanwhile: nobody will use this guard; release it.
                        NativeBridge.freeGuard(g);
                    }
                } finally {
                    settled.complete(null);
                }
            });
        }

        /**
         * Cancel and wait (uninterruptibly; bounded by the request timeout on the native
         * side) until the waiter key is gone. A guard that won the race is released.
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
                } catch (RuntimeException ignored) {
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

        /** Bound on each etcd request (default 5 s). */
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
            return new EtcdLockClient(ptr, eps);
        }
    }
}
