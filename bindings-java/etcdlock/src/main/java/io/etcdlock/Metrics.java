package io.etcdlock;

import java.time.Duration;
import java.util.Collections;
import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;

/**
 * What one {@link EtcdLockClient} has done so far, from the native core's metrics source
 * (the same figures in every language): acquisitions by {@link Result} with their total wait,
 * waiters and holds now, hold time, losses by {@link LossReason}, the keep-alive's last
 * round trip, and requests that failed on an etcd member. Counters only grow;
 * {@link #waiting()} and {@link #held()} are "now". Taken by {@link EtcdLockClient#metrics()};
 * cheap enough to poll (the Spring module's Micrometer meters read it on every scrape).
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
    private final Duration[] waitTotals = new Duration[5];
    private final long waiting;
    private final long held;
    private final Duration heldDuration;
    private final long holdsEnded;
    private final Duration holdTotal;
    private final Map<LossReason, Long> lost;
    private final long keepalives;
    private final Duration keepaliveRoundTrip;
    private final long memberFailures;

    private Metrics(Json.Obj o) {
        Json.Obj acquisitions = o.obj("acquisitions");
        for (Result r : Result.values()) {
            Json.Obj a = acquisitions.obj(r.tag());
            counts[r.ordinal()] = a.lng("count");
            waitTotals[r.ordinal()] = required(a, "wait_seconds");
        }
        waiting = o.lng("waiting");
        held = o.lng("held");
        heldDuration = required(o, "held_seconds");
        holdsEnded = o.lng("holds_ended");
        holdTotal = required(o, "hold_seconds");
        Json.Obj byReason = o.obj("lost");
        EnumMap<LossReason, Long> m = new EnumMap<>(LossReason.class);
        for (LossReason r : LossReason.values()) {
            m.put(r, byReason.lng(coreName(r)));
        }
        lost = Collections.unmodifiableMap(m);
        keepalives = o.lng("keepalives");
        keepaliveRoundTrip = o.seconds("keepalive_rtt_seconds");
        memberFailures = o.lng("member_failures");
    }

    /** The snapshot {@code NativeBridge.metrics} sends: one records JSON object. */
    static Metrics of(String json) {
        try {
            return new Metrics(Json.parseObject(json));
        } catch (IllegalArgumentException e) {
            throw Json.internal("a metrics snapshot", e);
        }
    }

    private static Duration required(Json.Obj o, String key) {
        Duration d = o.seconds(key);
        if (d == null) {
            throw new IllegalArgumentException("field \"" + key + "\" is null");
        }
        return d;
    }

    /** The core's name of a loss reason ({@code LEASE_EXPIRED} is {@code LeaseExpired}). */
    private static String coreName(LossReason r) {
        StringBuilder b = new StringBuilder();
        for (String word : r.name().split("_")) {
            b.append(word.charAt(0)).append(word.substring(1).toLowerCase(Locale.ROOT));
        }
        return b.toString();
    }

    /** Acquisition calls that ended with {@code result}. */
    public long count(Result result) {
        return counts[result.ordinal()];
    }

    /** The time those calls took, summed. */
    public Duration waitTotal(Result result) {
        return waitTotals[result.ordinal()];
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
        return heldDuration;
    }

    /** Holds that ended (released or lost). */
    public long holdsEnded() {
        return holdsEnded;
    }

    /** How long the ended holds lasted, summed. */
    public Duration holdTotal() {
        return holdTotal;
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
        return keepaliveRoundTrip;
    }

    /** Requests that failed on an etcd member, which is then avoided for a while. */
    public long memberFailures() {
        return memberFailures;
    }

    @Override
    public String toString() {
        return "Metrics{acquired=" + count(Result.ACQUIRED) + ", timeout=" + count(Result.TIMEOUT) + ", wouldBlock="
                + count(Result.WOULD_BLOCK) + ", cancelled=" + count(Result.CANCELLED) + ", error=" + count(Result.ERROR)
                + ", waiting=" + waiting + ", held=" + held + ", holdsEnded=" + holdsEnded + ", lost=" + lost
                + ", memberFailures=" + memberFailures + "}";
    }
}
