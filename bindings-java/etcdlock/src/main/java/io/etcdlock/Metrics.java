package io.etcdlock;

import java.time.Duration;
import java.util.Collections;
import java.util.EnumMap;
import java.util.Map;

/**
 * What one {@link EtcdLockClient} has done so far, from the native core's metrics source
 * (the same figures in every language): acquisitions by {@link Result} with their total wait,
 * waiters and holds now, hold time, losses by {@link LossReason}, and the keep-alive's last
 * round trip. Counters only grow; {@link #waiting()} and {@link #held()} are "now". Taken by
 * {@link EtcdLockClient#metrics()}; cheap enough to poll (the Spring module's Micrometer meters
 * read it on every scrape).
 */
public final class Metrics {
    /** How an acquisition call ended (the {@code result} tag of {@code etcdlock.acquire}). */
    public enum Result {
        /** The lock was taken. */
        ACQUIRED("acquired"),
        /** Not taken within the timeout (or held, for a zero timeout). */
        TIMEOUT("timeout"),
        /** A try found the lock held. */
        WOULD_BLOCK("would_block"),
        /** Cancelled or interrupted while waiting. */
        CANCELLED("cancelled"),
        /** Any other error. */
        ERROR("error");

        private final String tag;

        Result(String tag) {
            this.tag = tag;
        }

        /** The lower-case name every language uses ({@code acquired}, {@code would_block}, ...). */
        public String tag() {
            return tag;
        }
    }

    private final long[] counts = new long[5];
    private final long[] waitNanos = new long[5];
    private final long waiting;
    private final long held;
    private final long heldNanos;
    private final long holdsEnded;
    private final long holdNanos;
    private final Map<LossReason, Long> lost;
    private final long keepalives;
    private final long keepaliveRttNanos;

    Metrics(long[] v) {
        if (v == null || v.length != 21) {
            throw new InternalException("metrics snapshot of unexpected shape");
        }
        System.arraycopy(v, 0, counts, 0, 5);
        System.arraycopy(v, 5, waitNanos, 0, 5);
        waiting = v[10];
        held = v[11];
        heldNanos = v[12];
        holdsEnded = v[13];
        holdNanos = v[14];
        EnumMap<LossReason, Long> m = new EnumMap<>(LossReason.class);
        LossReason[] reasons = {LossReason.LEASE_EXPIRED, LossReason.KEY_DELETED, LossReason.CONNECTION_LOST,
                LossReason.CLIENT_CLOSED};
        for (int i = 0; i < 4; i++) {
            m.put(reasons[i], v[15 + i]);
        }
        lost = Collections.unmodifiableMap(m);
        keepalives = v[19];
        keepaliveRttNanos = v[20];
    }

    /** Acquisition calls that ended with {@code result}. */
    public long count(Result result) {
        return counts[result.ordinal()];
    }

    /** The time those calls took, summed. */
    public Duration waitTotal(Result result) {
        return Duration.ofNanos(waitNanos[result.ordinal()]);
    }

    /** Acquisition calls in progress now. */
    public long waiting() {
        return waiting;
    }

    /** Locks held now. */
    public long held() {
        return held;
    }

    /** How long the locks held now have been held, summed. */
    public Duration heldDuration() {
        return Duration.ofNanos(heldNanos);
    }

    /** Holds that ended (released or lost). */
    public long holdsEnded() {
        return holdsEnded;
    }

    /** How long the ended holds lasted, summed. */
    public Duration holdTotal() {
        return Duration.ofNanos(holdNanos);
    }

    /** Holds lost for {@code reason}. */
    public long lost(LossReason reason) {
        return lost.get(reason);
    }

    /** Keep-alive round trips acknowledged. */
    public long keepalives() {
        return keepalives;
    }

    /** The last acknowledged keep-alive's round trip, or null before the first. */
    public Duration keepaliveRoundTrip() {
        return keepaliveRttNanos < 0 ? null : Duration.ofNanos(keepaliveRttNanos);
    }

    @Override
    public String toString() {
        return "Metrics{acquired=" + count(Result.ACQUIRED) + ", timeout=" + count(Result.TIMEOUT) + ", wouldBlock="
                + count(Result.WOULD_BLOCK) + ", cancelled=" + count(Result.CANCELLED) + ", error=" + count(Result.ERROR)
                + ", waiting=" + waiting + ", held=" + held + ", holdsEnded=" + holdsEnded + ", lost=" + lost + "}";
    }
}
