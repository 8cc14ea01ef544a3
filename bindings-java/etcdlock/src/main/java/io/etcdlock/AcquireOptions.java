package io.etcdlock;

import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

/**
 * What an acquisition may ask for beyond its timeout: a lock-delay, a lease time, holder
 * metadata and deadlock detection. Immutable; build one with {@link #builder()} and give it to a lock object, whose
 * every acquisition then uses it:
 * {@link EtcdLockClient#newLock(String, AcquireOptions) newLock},
 * {@link EtcdLockClient#newSemaphore(String, int, AcquireOptions) newSemaphore},
 * {@link EtcdLockClient#newReadWriteLock(String, AcquireOptions) newReadWriteLock} and
 * {@link EtcdLockClient#newElection(String, AcquireOptions) newElection}. The timeout stays each
 * call's own {@link Duration} argument.
 *
 * <pre>{@code
 * AcquireOptions opts = AcquireOptions.builder()
 *         .lockDelay(Duration.ofSeconds(3))     // a vanished holder's successor waits 3 s more
 *         .leaseTime(Duration.ofMinutes(5))     // held at most 5 minutes
 *         .metadata("job", "nightly-report")    // shown in status()
 *         .build();
 * try (LockGuard g = client.newLock("reports", opts).acquire(Duration.ofSeconds(10))) {
 *     // ...
 * }
 * }</pre>
 *
 * The values are checked by the native core, by the same rules and with the same messages in
 * every language: an acquisition with a bad one throws {@link InvalidArgumentException} and
 * writes nothing.
 */
public final class AcquireOptions {
    /** No lock-delay, no lease time, no metadata: what the overloads without options use. */
    public static final AcquireOptions NONE = new Builder().build();

    private final Duration lockDelay;
    private final Duration leaseTime;
    private final Map<String, String> metadata;
    private final boolean detectDeadlock;

    private AcquireOptions(Builder b) {
        this.lockDelay = b.lockDelay;
        this.leaseTime = b.leaseTime;
        this.metadata = Collections.unmodifiableMap(new LinkedHashMap<>(b.metadata));
        this.detectDeadlock = b.detectDeadlock;
    }

    /** A builder with nothing set. */
    public static Builder builder() {
        return new Builder();
    }

    /** A builder starting from these options. */
    public Builder toBuilder() {
        Builder b = new Builder();
        b.lockDelay = lockDelay;
        b.leaseTime = leaseTime;
        b.metadata.putAll(metadata);
        b.detectDeadlock = detectDeadlock;
        return b;
    }

    /** The lock-delay, if set ({@link Builder#lockDelay}). */
    public Optional<Duration> lockDelay() {
        return Optional.ofNullable(lockDelay);
    }

    /** The lease time, if set ({@link Builder#leaseTime}). */
    public Optional<Duration> leaseTime() {
        return Optional.ofNullable(leaseTime);
    }

    /** The holder metadata, in the order set (unmodifiable). */
    public Map<String, String> metadata() {
        return metadata;
    }

    /** Whether a wait that would close a cycle fails with {@link DeadlockException} ({@link Builder#detectDeadlock()}). */
    public boolean detectDeadlock() {
        return detectDeadlock;
    }

    /** A span as the native side takes it: milliseconds with fractions, NaN when not set. */
    private static double ms(Duration d) {
        return d == null ? Double.NaN : d.getSeconds() * 1000.0 + d.getNano() / 1e6;
    }

    double lockDelayMs() {
        return ms(lockDelay);
    }

    double leaseTimeMs() {
        return ms(leaseTime);
    }

    /** The metadata as alternating keys and values; null when empty. */
    String[] metadataPairs() {
        if (metadata.isEmpty()) {
            return null;
        }
        String[] out = new String[metadata.size() * 2];
        int i = 0;
        for (Map.Entry<String, String> e : metadata.entrySet()) {
            out[i++] = e.getKey();
            out[i++] = e.getValue();
        }
        return out;
    }

    @Override
    public String toString() {
        return "AcquireOptions{lockDelay=" + lockDelay + ", leaseTime=" + leaseTime + ", metadata=" + metadata
                + ", detectDeadlock=" + detectDeadlock + "}";
    }

    /** Builds {@link AcquireOptions}; not thread-safe. */
    public static final class Builder {
        private Duration lockDelay;
        private Duration leaseTime;
        private final Map<String, String> metadata = new LinkedHashMap<>();
        private boolean detectDeadlock;

        Builder() {}

        /**
         * Chubby's lock-delay (Consul's {@code LockDelay}): if this hold ends because its lease
         * ended (the process died or froze, its session expired or was revoked, it was cut off
         * from etcd) rather than by an unlock, the next etcdlock holder, in any language, is
         * granted the lock no earlier than this long after etcd removed the key, so requests
         * the vanished holder still had in flight drain first. A clean unlock (or closing the
         * guard or the client, or {@link EtcdLockClient#release}) hands over at once.
         * Rounded up to whole seconds; at most a day. Locks and elections only: a permit or read
         * lock with a lock-delay is refused ({@link InvalidArgumentException}). {@code etcdctl
         * lock}, Go's Mutex and {@link EtcdMultiLock} do not wait for it.
         *
         * @param delay null: none (the default)
         */
        public Builder lockDelay(Duration delay) {
            this.lockDelay = delay;
            return this;
        }

        /**
         * Hold at most this long (Redisson's {@code leaseTime}): then the client releases the
         * hold even if the holder never unlocks, and its guard reports the loss with
         * {@link LossReason#LEASE_EXPIRED}. Positive, at most a day.
         *
         * @param leaseTime null: none (the default; a hold lasts until unlock or the session's end)
         */
        public Builder leaseTime(Duration leaseTime) {
            this.leaseTime = leaseTime;
            return this;
        }

        /**
         * One pair of holder metadata (ShedLock's {@code lockedBy}), which everyone can read in
         * {@link EtcdLockClient#status} as {@link LockStatus.Contender#metadata()}. Keys are not
         * empty; at most 1 KB of keys and values in all. A key set again replaces its value.
         */
        public Builder metadata(String key, String value) {
            if (key == null || value == null) {
                throw new InvalidArgumentException("metadata keys and values must not be null");
            }
            metadata.put(Args.checkText(key, "metadata key"), Args.checkText(value, "metadata value"));
            return this;
        }

        /** Every pair of {@code pairs} as {@link #metadata(String, String)}, in its iteration order. */
        public Builder metadata(Map<String, String> pairs) {
            if (pairs == null) {
                throw new InvalidArgumentException("metadata must not be null");
            }
            pairs.forEach(this::metadata);
            return this;
        }

        /**
         * Fail a wait that would close a cycle of clients waiting on each other's holds (this
         * client holds x and waits for y while the holder of y waits for x, in any language) with
         * {@link DeadlockException} naming the cycle, instead of waiting to the timeout. Checked
         * when the acquisition queues and again each time the key it waits behind changes (one
         * read of the client's namespace per check); when several waits of a cycle are checked
         * at once only the youngest fails, so one member backs off and the others are served.
         * Off by default. {@link EtcdLockClient#deadlocks(String)} finds the cycles without
         * taking part.
         */
        public Builder detectDeadlock() {
            return detectDeadlock(true);
        }

        /** {@link #detectDeadlock()} on or off. */
        public Builder detectDeadlock(boolean on) {
            this.detectDeadlock = on;
            return this;
        }

        /** The options; the builder can be used on. */
        public AcquireOptions build() {
            return new AcquireOptions(this);
        }
    }
}
