package io.etcdlock;

import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * Leadership of an election, won by {@link EtcdElection#campaign(String)}: the same
 * keys as Go's {@code concurrency.Election} and {@code etcdctl elect}. It is a hold like any
 * {@link LockGuard} (fencing token, loss listener, guarded operations, {@link #guard()}), plus
 * {@link #proclaim(String)} and {@link #resign()}; closing it resigns.
 *
 * <pre>{@code
 * try (Leadership leader = client.newElection("scheduler").campaign("node-1")) {
 *     leader.onLost(reason -> stopScheduling());
 *     runScheduler(leader.fencingToken());
 * }
 * }</pre>
 */
public final class Leadership implements AutoCloseable {
    private final LockGuard guard;

    Leadership(LockGuard guard) {
        this.guard = guard;
    }

    /** The hold behind this leadership (guarded put/get/delete, loss reason, ...). */
    public LockGuard guard() {
        return guard;
    }

    /** The election name. */
    public String name() {
        return guard.name();
    }

    /** Our candidate key in etcd. */
    public String key() {
        return guard.key();
    }

    /** Our key's create revision: strictly increases from one leader to the next. */
    public long fencingToken() {
        return guard.fencingToken();
    }

    /** True while we lead (see {@link LockGuard#isHeld()}). */
    public boolean isLeader() {
        return guard.isHeld();
    }

    /** Why the leadership was lost, if it was. */
    public Optional<LossReason> lossReason() {
        return guard.lossReason();
    }

    /** Call {@code listener} once if the leadership is lost (see {@link LockGuard#onLost(Consumer)}). */
    public Leadership onLost(Consumer<LossReason> listener) {
        guard.onLost(listener);
        return this;
    }

    /**
     * Announce a new value as leader. Guarded by our key's create revision, so a leader that
     * lost its leadership is refused by etcd.
     *
     * @throws LockLostException if we no longer lead
     * @throws NotHeldException after {@link #resign()}
     */
    public void proclaim(byte[] value) {
        guard.setValue(value);
    }

    /** {@link #proclaim(byte[])} with UTF-8 text. */
    public void proclaim(String value) {
        if (value == null) {
            throw new InvalidArgumentException("value must not be null");
        }
        proclaim(Args.checkText(value, "value").getBytes(StandardCharsets.UTF_8));
    }

    /** Give up leadership (the next candidate leads); same as {@link #close()}. */
    public void resign() {
        guard.close();
    }

    /** Resign (see {@link LockGuard#close()}). */
    @Override
    public void close() {
        guard.close();
    }

    @Override
    public String toString() {
        return "Leadership{name=" + name() + ", key=" + key() + ", fencingToken=" + fencingToken() + "}";
    }
}
