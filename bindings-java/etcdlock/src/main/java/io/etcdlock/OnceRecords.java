package io.etcdlock;

import java.time.Duration;
import java.time.Instant;
import java.util.Optional;

/**
 * Run-once records of one client ({@link EtcdLockClient#once()}): a job scheduled on every node
 * runs on one node per tick, with ShedLock's {@code lockAtMostFor}/{@code lockAtLeastFor}. Each
 * job is one etcd key, {@code __etcdlock/once/<name>} (under the client's namespace), whose JSON
 * value says until when it is taken; every change is one compare-and-swap Txn on its revision, and
 * a hold is the revision it wrote. The same record is what {@code etcdlock-shedlock}'s
 * provider, Python's {@code client.once} and Node's {@code client.runOnce} keep, so jobs
 * scheduled from several languages on one name still run once per tick between them.
 */
public final class OnceRecords {
    private final EtcdLockClient client;

    OnceRecords(EtcdLockClient client) {
        this.client = client;
    }

    /**
     * Take job {@code name}'s run-once record until {@code lockUntil} if no node holds it at
     * {@code now} (the caller's clock, e.g. ShedLock's {@code ClockProvider}): the hold, or empty
     * at once. The record is the one {@code etcdlock-shedlock}, Python's {@code client.once} and
     * Node's {@code runOnce} keep (ShedLock's semantics, one compare-and-swap per change); it
     * outlives this client. Expiry compares wall clocks: keep nodes in sync.
     */
    public Optional<OnceHold> take(String name, Instant now, Instant lockUntil) {
        Args.checkName(name);
        return OnceHold.of(name, client.withClient(c -> NativeBridge.onceTake(c, name, ms(now), ms(lockUntil))));
    }

    /** {@link #take(String, Instant, Instant)} from now on the system clock, for {@code atMost}. */
    public Optional<OnceHold> take(String name, Duration atMost) {
        Instant now = Instant.now();
        return take(name, now, now.plus(java.util.Objects.requireNonNull(atMost, "atMost")));
    }

    /**
     * Finish a run-once hold: keep the job taken until {@code atLeastUntil} if that is after
     * {@code now} (never beyond its {@code lockUntil}), else delete the record. False, and nothing
     * changed, if the record is no longer this hold's (expired and taken by another node, or
     * finished already).
     */
    public boolean finish(OnceHold hold, Instant now, Instant atLeastUntil) {
        return client.withClient(c -> NativeBridge.onceFinish(c, hold.name(), hold.revision(), ms(hold.lockedAt()),
                ms(hold.lockUntil()), ms(now), ms(atLeastUntil)));
    }

    /** Extend a run-once hold to {@code lockUntil} if still ours and unexpired at {@code now}: the new hold, or empty. */
    public Optional<OnceHold> extend(OnceHold hold, Instant now, Instant lockUntil) {
        return OnceHold.of(hold.name(), client.withClient(c -> NativeBridge.onceExtend(c, hold.name(), hold.revision(),
                ms(hold.lockedAt()), ms(hold.lockUntil()), ms(now), ms(lockUntil))));
    }

    /** Job {@code name}'s run-once record as etcd has it (taken or expired), or empty if none. */
    public Optional<OnceHold> record(String name) {
        Args.checkName(name);
        return OnceHold.of(name, client.withClient(c -> NativeBridge.onceRecord(c, name)));
    }

    private static long ms(Instant t) {
        Args.checkNotOnRuntimeThread("a run-once call");
        return java.util.Objects.requireNonNull(t, "instant").toEpochMilli();
    }
}
