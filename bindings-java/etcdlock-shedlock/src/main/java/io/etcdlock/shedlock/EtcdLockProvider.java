package io.etcdlock.shedlock;

import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Objects;
import java.util.Optional;
import java.util.UUID;
import java.util.function.Function;

import io.etcdlock.EtcdLockClient;
import io.etcdlock.InvalidArgumentException;
import io.etcdlock.LockGuard;
import io.etcdlock.LockLostException;
import net.javacrumbs.shedlock.core.AbstractSimpleLock;
import net.javacrumbs.shedlock.core.ClockProvider;
import net.javacrumbs.shedlock.core.ExtensibleLockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A ShedLock {@link ExtensibleLockProvider} on etcdlock.
 *
 * <p>Each ShedLock lock {@code N} is a <em>record</em> in etcd, {@code <prefix>/state/N}, that says
 * until when it is taken ({@code lockUntil}), since when, by whom, and which hold wrote it (a
 * random id per hold). Every change of a record (take, unlock, extend) is made while holding the
 * etcdlock lock {@code <prefix>/lock/N} for a few round trips, through that lock's guarded
 * get/put/delete, so etcd itself rejects the change of an instance that lost that short hold.
 *
 * <ul>
 *   <li>{@link #lock} is one try that never waits: etcdlock's try-lock on {@code <prefix>/lock/N}
 *       (empty if another instance is changing the record at this very moment), then empty if
 *       the record is still taken ({@code lockUntil} in the future), else it writes a record with
 *       {@code lockUntil = createdAt + lockAtMostFor}. After that instant the record no longer
 *       counts and another instance takes the lock, whether or not this one ever unlocks.</li>
 *   <li>{@link SimpleLock#unlock()} rewrites the record only if it still carries this hold's id:
 *       deleted if {@code lockAtLeastFor} has passed, else {@code lockUntil} lowered to
 *       {@code createdAt + lockAtLeastFor} (never raised). A record written by a newer holder is
 *       left alone.</li>
 *   <li>{@link SimpleLock#extend} sets {@code lockUntil = now + lockAtMostFor} (and a new hold id)
 *       only if the record still carries this hold's id and has not expired; empty otherwise.</li>
 * </ul>
 *
 * <p>Expiry compares {@code lockUntil} with {@link ClockProvider#now()} of the instance that
 * reads it (as ShedLock's JDBC, Mongo and other storage providers do): keep the instances' clocks
 * synchronised (NTP); {@code lockAtLeastFor} absorbs small skews. etcd's leases are not used for
 * the hold's expiry because etcdlock's Java API keeps one lease per client alive for all its
 * locks; it has no per-hold lease.
 *
 * <p>Keys are not shared with ShedLock's {@code shedlock-provider-etcd-jetcd}: do not let both
 * providers guard the same job.
 */
public final class EtcdLockProvider implements ExtensibleLockProvider {
    private static final Logger LOG = LoggerFactory.getLogger(EtcdLockProvider.class);

    /** The default key prefix. */
    public static final String DEFAULT_PREFIX = "shedlock";
    /** How long unlock and extend wait for another instance's record change (a few round trips). */
    public static final Duration DEFAULT_CHANGE_TIMEOUT = Duration.ofSeconds(10);

    private final EtcdLockClient client;
    private final String prefix;
    private final Duration changeTimeout;
    private final String lockedBy;

    /** A provider with the key prefix {@value #DEFAULT_PREFIX}. */
    public EtcdLockProvider(EtcdLockClient client) {
        this(client, DEFAULT_PREFIX);
    }

    /** A provider whose keys live under {@code prefix + "/"} (plus the client's namespace). */
    public EtcdLockProvider(EtcdLockClient client, String prefix) {
        this(client, prefix, DEFAULT_CHANGE_TIMEOUT);
    }

    /**
     * @param changeTimeout how long {@code unlock()} and {@code extend()} wait for the short
     *     etcdlock hold under which records change ({@code lock()} never waits)
     */
    public EtcdLockProvider(EtcdLockClient client, String prefix, Duration changeTimeout) {
        this.client = Objects.requireNonNull(client, "client");
        if (prefix == null || prefix.isEmpty()) {
            throw new InvalidArgumentException("prefix must not be empty");
        }
        if (changeTimeout == null || changeTimeout.isNegative() || changeTimeout.isZero()) {
            throw new InvalidArgumentException("changeTimeout must be positive, got " + changeTimeout);
        }
        this.prefix = prefix.endsWith("/") ? prefix.substring(0, prefix.length() - 1) : prefix;
        this.changeTimeout = changeTimeout;
        this.lockedBy = hostname();
    }

    /** The etcd key (without the client's namespace) of the record of ShedLock lock {@code name}. */
    public String recordKey(String name) {
        return prefix + "/state/" + name;
    }

    private byte[] keyBytes(String name) {
        return recordKey(name).getBytes(StandardCharsets.UTF_8);
    }

    /** The etcdlock lock name under which the record of {@code name} changes. */
    public String mutexName(String name) {
        return prefix + "/lock/" + name;
    }

    @Override
    public Optional<SimpleLock> lock(LockConfiguration config) {
        String name = config.getName();
        Optional<LockGuard> mutex = client.tryAcquire(mutexName(name));
        if (mutex.isEmpty()) {
            LOG.debug("shedlock {}: record being changed by another instance; not taken", name);
            return Optional.empty();
        }
        return underMutex(mutex.get(), guard -> {
            Instant now = ClockProvider.now();
            LockRecord current = LockRecord.parse(guard.get(keyBytes(name)));
            if (current != null && current.lockUntil.isAfter(now)) {
                return Optional.<SimpleLock>empty();
            }
            String id = UUID.randomUUID().toString();
            guard.put(keyBytes(name), new LockRecord(config.getLockAtMostUntil(), now, lockedBy, id).format());
            return Optional.<SimpleLock>of(new EtcdSimpleLock(config, id));
        });
    }

    private void unlockRecord(LockConfiguration config, String id) {
        String name = config.getName();
        underMutex(client.acquire(mutexName(name), changeTimeout), guard -> {
            LockRecord current = LockRecord.parse(guard.get(keyBytes(name)));
            if (current == null || !current.id.equals(id)) {
                LOG.debug("shedlock {}: unlock of a hold that is no longer ours (expired); record left alone", name);
                return null;
            }
            Instant now = ClockProvider.now();
            Instant until = config.getLockAtLeastUntil();
            if (until.isAfter(current.lockUntil)) {
                until = current.lockUntil; // never extend a hold while unlocking
            }
            if (until.isAfter(now)) {
                guard.put(keyBytes(name), new LockRecord(until, current.lockedAt, current.lockedBy, id).format());
            } else {
                guard.delete(keyBytes(name));
            }
            return null;
        });
    }

    private Optional<SimpleLock> extendRecord(LockConfiguration newConfig, String id) {
        String name = newConfig.getName();
        return underMutex(client.acquire(mutexName(name), changeTimeout), guard -> {
            LockRecord current = LockRecord.parse(guard.get(keyBytes(name)));
            Instant now = ClockProvider.now();
            if (current == null || !current.id.equals(id) || !current.lockUntil.isAfter(now)) {
                return Optional.<SimpleLock>empty();
            }
            String newId = UUID.randomUUID().toString();
            guard.put(keyBytes(name),
                    new LockRecord(newConfig.getLockAtMostUntil(), current.lockedAt, lockedBy, newId).format());
            return Optional.<SimpleLock>of(new EtcdSimpleLock(newConfig, newId));
        });
    }

    /**
     * Run {@code body} with the record's etcdlock hold and release it. Guarded operations that
     * returned were applied by etcd while we held it, so a loss reported only at release does
     * not undo them and is not an error here.
     */
    private static <T> T underMutex(LockGuard guard, Function<LockGuard, T> body) {
        try {
            return body.apply(guard);
        } finally {
            try {
                guard.close();
            } catch (LockLostException e) {
                LOG.debug("etcdlock hold {} lost before release: {}", guard.name(), e.getMessage());
            }
        }
    }

    private static String hostname() {
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (Exception e) {
            return "unknown";
        }
    }

    @Override
    public String toString() {
        return "EtcdLockProvider{prefix=" + prefix + ", endpoints=" + client.endpoints() + "}";
    }

    private final class EtcdSimpleLock extends AbstractSimpleLock {
        private final String id;

        EtcdSimpleLock(LockConfiguration config, String id) {
            super(config);
            this.id = id;
        }

        @Override
        protected void doUnlock() {
            unlockRecord(lockConfiguration, id);
        }

        @Override
        protected Optional<SimpleLock> doExtend(LockConfiguration newConfiguration) {
            return extendRecord(newConfiguration, id);
        }
    }
}
