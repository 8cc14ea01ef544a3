package io.etcdlock;

import java.time.Duration;
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

    /** One outcome's acquisitions: how many, and their wait summed. */
    private static final class Acquisitions {
        private long count;
        private Duration waitSeconds;

        private Acquisitions() {}
    }

    // Set by Records.decode from core's records JSON (core/src/records/mod.rs), by name; keys the
    // core adds later (e.g. its wait histogram) are ignored.
    private Map<Result, Acquisitions> acquisitions;
    private long waiting;
    private long held;
    private Duration heldSeconds;
    private long holdsEnded;
    private Duration holdSeconds;
    private Map<LossReason, Long> lost;
    private long keepalives;
    private Duration keepaliveRttSeconds;
    private long memberFailures;

    private Metrics() {}

    /** The snapshot {@code NativeBridge.metrics} sends: one records JSON object. */
    static Metrics of(String json) {
        return Records.decode(json, Metrics.class, "a metrics snapshot");
    }

    /** Acquisition calls that ended with {@code result}. */
    public long count(Result result) {
        return acquisitions.get(result).count;
    }

    /** The time those calls took, summed. */
    public Duration waitTotal(Result result) {
        return acquisitions.get(result).waitSeconds;
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
        return heldSeconds;
    }

    /** Holds that ended (released or lost). */
    public long holdsEnded() {
        return holdsEnded;
    }

    /** How long the ended holds lasted, summed. */
    public Duration holdTotal() {
        return holdSeconds;
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
        return keepaliveRttSeconds;
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
