package io.etcdlock.shedlock;

import java.time.Instant;
import java.util.Objects;
import java.util.Optional;

import io.etcdlock.EtcdLockClient;
import io.etcdlock.InvalidArgumentException;
import io.etcdlock.OnceHold;
import net.javacrumbs.shedlock.core.AbstractSimpleLock;
import net.javacrumbs.shedlock.core.ClockProvider;
import net.javacrumbs.shedlock.core.ExtensibleLockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;

/**
 * A ShedLock {@link ExtensibleLockProvider} on etcdlock's run-once records: the record core
 * keeps for every language (Python's {@code client.once}, Node's {@code runOnce}), so jobs
 * scheduled from Java and from other languages on one name run once per tick between them.
 *
 * <p>ShedLock lock {@code N} is the run-once record {@code <prefix>/N}, at the etcd key
 * {@code __etcdlock/once/<prefix>/N} (under the client's namespace), whose JSON value says until
 * when it is taken ({@code lock_until_ms}), since when and by whom. Every change is one
 * compare-and-swap Txn on the record's revision, and a hold is identified by the revision it
 * wrote:
 *
 * <ul>
 *   <li>{@link #lock} is one try that never waits: empty if the record's {@code lockUntil} is
 *       still ahead of {@link ClockProvider#now()}, else it writes {@code lockUntil =
 *       lockAtMostUntil}. After that instant another instance takes the lock, whether or not this
 *       one ever unlocks.</li>
 *   <li>{@link SimpleLock#unlock()} deletes the record if {@code lockAtLeastFor} has passed, else
 *       lowers {@code lockUntil} to {@code lockAtLeastUntil} (never raises it), and only while the
 *       record is still this hold's: a record written by a newer holder is left alone.</li>
 *   <li>{@link SimpleLock#extend} sets {@code lockUntil = now + lockAtMostFor} (a new hold) only
 *       if the record is still this hold's and has not expired; empty otherwise.</li>
 * </ul>
 *
 * <p>Expiry compares {@code lockUntil} with the clock of the instance that reads it, as ShedLock's
 * JDBC and Mongo providers do: keep the instances' clocks synchronised (NTP); {@code
 * lockAtLeastFor} absorbs small skews.
 *
 * <p>Keys are not shared with ShedLock's {@code shedlock-provider-etcd-jetcd}: do not let both
 * providers guard the same job.
 */
public final class EtcdLockProvider implements ExtensibleLockProvider {
    /** The default record name prefix. */
    public static final String DEFAULT_PREFIX = "shedlock";

    private final EtcdLockClient client;
    private final String prefix;

    /** A provider whose records are named {@value #DEFAULT_PREFIX}{@code /<lock name>}. */
    public EtcdLockProvider(EtcdLockClient client) {
        this(client, DEFAULT_PREFIX);
    }

    /** A provider whose records are named {@code prefix + "/" + <lock name>}. */
    public EtcdLockProvider(EtcdLockClient client, String prefix) {
        this.client = Objects.requireNonNull(client, "client");
        if (prefix == null || prefix.isEmpty()) {
            throw new InvalidArgumentException("prefix must not be empty");
        }
        this.prefix = prefix.endsWith("/") ? prefix.substring(0, prefix.length() - 1) : prefix;
    }

    /** The run-once record name of ShedLock lock {@code name}. */
    public String recordName(String name) {
        return prefix + "/" + name;
    }

    /** The etcd key (without the client's namespace) of the record of ShedLock lock {@code name}. */
    public String recordKey(String name) {
        return "__etcdlock/once/" + recordName(name);
    }

    /** The record of ShedLock lock {@code name} as it is in etcd (taken or expired), if any. */
    public Optional<OnceHold> record(String name) {
        return client.once().record(recordName(name));
    }

    @Override
    public Optional<SimpleLock> lock(LockConfiguration config) {
        Optional<OnceHold> hold = client.once().take(recordName(config.getName()), ClockProvider.now(), config.getLockAtMostUntil());
        return hold.map(h -> new EtcdSimpleLock(config, h));
    }

    @Override
    public String toString() {
        return "EtcdLockProvider{prefix=" + prefix + ", endpoints=" + client.endpoints() + "}";
    }

    private final class EtcdSimpleLock extends AbstractSimpleLock {
        private final OnceHold hold;

        EtcdSimpleLock(LockConfiguration config, OnceHold hold) {
            super(config);
            this.hold = hold;
        }

        @Override
        protected void doUnlock() {
            client.once().finish(hold, ClockProvider.now(), lockConfiguration.getLockAtLeastUntil());
        }

        @Override
        protected Optional<SimpleLock> doExtend(LockConfiguration newConfiguration) {
            Instant now = ClockProvider.now();
            return client.once().extend(hold, now, newConfiguration.getLockAtMostUntil())
                    .map(h -> new EtcdSimpleLock(newConfiguration, h));
        }
    }
}
