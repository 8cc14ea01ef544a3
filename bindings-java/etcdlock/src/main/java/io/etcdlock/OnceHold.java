package io.etcdlock;

import java.time.Instant;
import java.util.Objects;
import java.util.Optional;

/**
 * A taken run-once record ({@link OnceRecords#take}): plain values, kept by the caller
 * and handed back to {@link OnceRecords#finish} or {@link OnceRecords#extend}.
 */
public final class OnceHold {
    private final String name;
    private final long revision;
    private final Instant lockedAt;
    private final Instant lockUntil;

    /**
     * @param name the job's name
     * @param revision the etcd revision that wrote this hold
     * @param lockedAt when the hold began
     * @param lockUntil until when the job is taken
     */
    public OnceHold(String name, long revision, Instant lockedAt, Instant lockUntil) {
        this.name = Objects.requireNonNull(name, "name");
        this.revision = revision;
        this.lockedAt = Objects.requireNonNull(lockedAt, "lockedAt");
        this.lockUntil = Objects.requireNonNull(lockUntil, "lockUntil");
    }

    static Optional<OnceHold> of(String name, long[] v) {
        if (v == null) {
            return Optional.empty();
        }
        return Optional.of(new OnceHold(name, v[0], Instant.ofEpochMilli(v[1]), Instant.ofEpochMilli(v[2])));
    }

    /** The job's name. */
    public String name() {
        return name;
    }

    /**
     * The etcd revision that wrote this hold: it identifies the hold and rises strictly per job
     * (a fencing token for what the job writes).
     */
    public long revision() {
        return revision;
    }

    /** When the hold began. */
    public Instant lockedAt() {
        return lockedAt;
    }

    /** Until when the job is taken. */
    public Instant lockUntil() {
        return lockUntil;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof OnceHold && ((OnceHold) o).name.equals(name) && ((OnceHold) o).revision == revision
                && ((OnceHold) o).lockedAt.equals(lockedAt) && ((OnceHold) o).lockUntil.equals(lockUntil);
    }

    @Override
    public int hashCode() {
        return Objects.hash(name, revision, lockedAt, lockUntil);
    }

    @Override
    public String toString() {
        return "OnceHold{name=" + name + ", revision=" + revision + ", lockedAt=" + lockedAt + ", lockUntil=" + lockUntil + "}";
    }
}
