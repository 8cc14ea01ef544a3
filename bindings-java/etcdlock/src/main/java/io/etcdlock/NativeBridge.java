package io.etcdlock;

import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import java.util.concurrent.atomic.AtomicLong;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** The JNI surface (private to the package). Handles are {@code long}s owned by {@link NativeHandle}. */
final class NativeBridge {
    private static final Logger LOG = LoggerFactory.getLogger(NativeBridge.class);
    private static final Map<Long, Completion> PENDING = new ConcurrentHashMap<>();
    private static final AtomicLong NEXT_ID = new AtomicLong();

    static {
        NativeLibrary.load();
        NativeLibrary.checkVersion(nativeVersion());
        init();
        CoreLogs.start();
    }

    /** The loaded library's version, null if it has no {@code version()} (not ours, or too old). */
    private static String nativeVersion() {
        try {
            return version();
        } catch (UnsatisfiedLinkError none) {
            return null;
        }
    }

    private NativeBridge() {}

    /** Forces class initialisation (library load) early, so load errors surface at build(). */
    static void ensureLoaded() {}

    /** What a native async operation reports back. */
    interface Completion {
        void done(long handle, long value, EtcdLockException error);
    }

    static long register(Completion c) {
        long id = NEXT_ID.incrementAndGet();
        PENDING.put(id, c);
        return id;
    }

    static void forget(long id) {
        PENDING.remove(id);
    }

    // ---- called from native code -------------------------------------------------------

    /** Every core error reaches Java here: its wire form (code, loss reason, retryable, message). */
    static EtcdLockException error(int code, int reason, boolean retryable, String message) {
        return EtcdLockException.of(ErrorCode.of(code), LossReason.of(reason), message, retryable);
    }

    static void complete(long id, long handle, long value, int code, int reason, boolean retryable, String message) {
        Completion c = PENDING.remove(id);
        if (c == null) {
            if (handle != 0) {
                freeGuard(handle);
            }
            return;
        }
        try {
            c.done(handle, value, code == 0 ? null : error(code, reason, retryable, message));
        } catch (Throwable t) {
            LOG.warn("etcdlock: a completion callback threw", t);
        }
    }

    /** One key of an in-process store, for {@link #memKeys}. */
    static MemKey memKey(byte[] key, byte[] value, long lease, long createRevision, long modRevision) {
        return new MemKey(key, value, lease, createRevision, modRevision);
    }

    /** A core log record, on core's log thread (see {@link CoreLogs}). */
    static void log(int level, String target, String message, String[] fields) {
        CoreLogs.log(level, target, message, fields);
    }

    /** A running leadership observation: its listener and its handle. */
    static final class Observer {
        final Consumer<Optional<Leader>> listener;
        final LeaderObservation observation;

        Observer(Consumer<Optional<Leader>> listener, LeaderObservation observation) {
            this.listener = listener;
            this.observation = observation;
        }
    }

    private static final Map<Long, Observer> OBSERVERS = new ConcurrentHashMap<>();

    static long nextId() {
        return NEXT_ID.incrementAndGet();
    }

    static void registerObserver(long id, Observer o) {
        OBSERVERS.put(id, o);
    }

    static void forgetObserver(long id) {
        OBSERVERS.remove(id);
    }

    static void observed(long id, int code, int reason, boolean retryable, String leader, String message) {
        Observer o = OBSERVERS.get(id);
        if (o == null) {
            return;
        }
        if (code != 0) {
            OBSERVERS.remove(id);
            o.observation.end(error(code, reason, retryable, message));
            return;
        }
        try {
            o.listener.accept(Leader.of(leader));
        } catch (Throwable t) {
            LOG.warn("etcdlock: a leadership listener threw", t);
        }
    }

    /** What a leader loop's native events go to (see {@link EtcdLeaderLoop}). */
    interface LeaderSink {
        void event(int kind, long term, long guard, int reason, int code, boolean retryable, String leader,
                String message);
    }

    private static final Map<Long, LeaderSink> LEADER_LOOPS = new ConcurrentHashMap<>();

    static void registerLeaderLoop(long id, LeaderSink sink) {
        LEADER_LOOPS.put(id, sink);
    }

    static void forgetLeaderLoop(long id) {
        LEADER_LOOPS.remove(id);
    }

    static void leaderEvent(long id, int kind, long term, long guard, int reason, int code, boolean retryable,
            String leader, String message) {
        LeaderSink s = LEADER_LOOPS.get(id);
        try {
            if (s == null) {
                if (kind == EtcdLeaderLoop.ELECTED) {
                    // Nobody runs this term: end it so the loop goes on.
                    freeGuard(guard);
                    termEnd(term, true);
                    freeTerm(term);
                }
                return;
            }
            s.event(kind, term, guard, reason, code, retryable, leader, message);
        } catch (Throwable t) {
            LOG.warn("etcdlock: a leader event could not be handled", t);
        }
    }

    // ---- natives -------------------------------------------------------------------------

    private static native void init();

    static native String version();

    static native void panicForTest();

    /** Hand core's log records to {@link #log}; false if core had a log subscriber already. */
    static native boolean forwardLogs();

    /** Forward core's records at {@code level} and above (4 debug, 3 info, 2 warn, 1 error; 0: none). */
    static native void setLogLevel(int level);

    /** Connect with core option keys and values, alternating; core parses and checks them. */
    static native long connect(String[] options);

    static native String endpoints(long client);

    /** Core's metrics snapshot as its records JSON (decoded by {@link Metrics}). */
    static native String metrics(long client);

    static native long ping(long client);

    static native long ttl(long client);

    static native void close(long client);

    static native void freeClient(long client);

    /**
     * Wait for the lock on this thread, uninterruptibly (a platform thread's {@code lock()}):
     * the guard's handle. Extras as {@link #lockAsync}.
     */
    static native long lock(long client, String name, long timeoutMs, double lockDelayMs, double leaseTimeMs,
            String[] metadata, boolean detectDeadlock);

    /**
     * Extras: spans in ms (NaN: not given), metadata as alternating keys and values (null: none),
     * and {@link AcquireOptions#detectDeadlock()}.
     */
    static native void lockAsync(long client, String name, long timeoutMs, double lockDelayMs, double leaseTimeMs,
            String[] metadata, boolean detectDeadlock, long id);

    /**
     * {@link #lock}, reentrant for {@code owner} (core's {@code lock_reentrant}): if
     * {@code owner} holds {@code name} on this client, another handle of that hold at once (no
     * request), or {@link LockLostException} if that hold was lost.
     */
    static native long lockReentrant(long client, String name, long owner, long timeoutMs, double lockDelayMs,
            double leaseTimeMs, String[] metadata, boolean detectDeadlock);

    /** {@link #lockAsync}, reentrant for {@code owner} as {@link #lockReentrant}. */
    static native void lockReentrantAsync(long client, String name, long owner, long timeoutMs, double lockDelayMs,
            double leaseTimeMs, String[] metadata, boolean detectDeadlock, long id);

    static native void cancelAsync(long id);

    static native String guardKey(long guard);

    static native long guardInfo(long guard, int what);

    static native void unlock(long guard);

    static native void put(long guard, byte[] key, byte[] value);

    static native byte[] get(long guard, byte[] key);

    static native boolean delete(long guard, byte[] key);

    static native void watchLoss(long guard, long id);

    static native void watchRenewal(long guard, long id, boolean failing);

    static native void watchMultiLoss(long multi, long id);

    static native void watchMultiRenewal(long multi, long id, boolean failing);

    static native void freeGuard(long guard);

    /** A permit of a {@code permits} semaphore; completes {@code id} as {@link #lockAsync}. {@code options} null: none. */
    static native void permitAsync(long client, String name, int permits, long timeoutMs, AcquireOptions options, long id);

    /** The read side of a read-write lock; completes {@code id} as {@link #lockAsync}. */
    static native void readLockAsync(long client, String name, long timeoutMs, AcquireOptions options, long id);

    /** A campaign with {@code value}; completes {@code id} with the leadership's guard. */
    static native void campaignAsync(long client, String name, byte[] value, long timeoutMs, AcquireOptions options,
            long id);

    /** Every name at once; completes {@code id} with a multi-lock handle. */
    static native void lockManyAsync(long client, String[] names, long timeoutMs, long id);

    static native void proclaim(long guard, byte[] value);

    /** The leader's records JSON (decoded by {@link Leader#of}), or null when nobody leads. */
    static native String leader(long client, String name);

    /** One name's status as its records JSON (decoded by {@link LockStatus}). */
    static native String status(long client, String name);

    /** The status of every name under a prefix, as one records JSON array. */
    static native String list(long client, String prefix);

    /** The cycles of waiting clients under a prefix, as records JSON (decoded by {@link Deadlocks}). */
    static native String deadlocks(long client, String prefix);

    /** A name's history as records JSON (decoded by {@link LockHistory}); {@code sinceMs} NaN: all. */
    static native String history(long client, String name, double sinceMs);

    static native boolean release(long client, String name, long token);

    static native boolean releasePermit(long client, String name, long id);

    static native long latchOpen(long client, String name, long count);

    static native long latchCountDown(long latch);

    static native long latchCount(long latch);

    /** Completes {@code id} (value 0) when the count is zero; {@code timeoutMs < 0}: no limit. */
    static native void latchWaitAsync(long latch, long timeoutMs, long id);

    static native void latchClose(long latch);

    static native void freeLatch(long latch);

    static native long barrierOpen(long client, String name, int parties);

    /** Completes {@code id} with the arrival index as its value; {@code timeoutMs < 0}: no limit. */
    static native void barrierWaitAsync(long barrier, long timeoutMs, long id);

    static native void barrierClose(long barrier);

    static native void freeBarrier(long barrier);

    static native long[] onceRecord(long client, String name);

    static native long[] onceTake(long client, String name, long nowMs, long lockUntilMs);

    static native boolean onceFinish(long client, String name, long revision, long lockedAtMs, long lockUntilMs,
            long nowMs, long atLeastUntilMs);

    static native long[] onceExtend(long client, String name, long revision, long lockedAtMs, long lockUntilMs,
            long nowMs, long lockUntilMsNew);

    static native void observe(long client, String name, long id);

    /** Start a leader loop reporting to {@link #leaderEvent} with {@code id}; its handle. */
    static native long leaderStart(long client, String name, byte[] value, boolean again, long retryMs,
            double lockDelayMs, double leaseTimeMs, String[] metadata, long id);

    static native void leaderStop(long loop);

    static native void freeLeaderLoop(long loop);

    /** With {@code end}, the term's task has ended; whether the term is cancelled. */
    static native boolean termEnd(long term, boolean end);

    static native void freeTerm(long term);

    static native byte[] multiKeys(long multi);

    static native long multiInfo(long multi, int what);

    static native void multiUnlock(long multi);

    static native void multiPut(long multi, byte[] key, byte[] value);

    static native byte[] multiGet(long multi, byte[] key);

    static native boolean multiDelete(long multi, byte[] key);

    static native void freeMulti(long multi);

    // In-process stores (mem://NAME): see MemStore. Each call opens the store by its name.

    /** Open (start if needed) the store {@code mem://NAME}: its name as core has it. */
    static native String memOpen(String name);

    static native boolean memExpireLease(String name, long lease);

    static native boolean memDeleteKey(String name, byte[] key);

    /** A span in nanoseconds (core refuses a negative or over-long one). */
    static native void memSilence(String name, double nanos);

    static native void memStall(String name, long lease, double nanos);

    static native void memResume(String name);

    /** The keys under the prefix, each a {@link MemKey} built by {@link #memKey}. */
    static native Object[] memKeys(String name, byte[] prefix);

    // Benchmark entry points: only in a native library built with the `bench`
    // feature (bench.sh); the published jar's library has none of them.

    static native long rawGrant(long client, long ttl);

    static native void rawRoundTrip(long client, String key, long lease);

    static native long coreLockUnlock(long client, String name);
}
