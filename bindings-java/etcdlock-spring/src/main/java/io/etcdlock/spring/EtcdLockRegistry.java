package io.etcdlock.spring;

import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.Lock;

import org.springframework.integration.support.locks.ExpirableLockRegistry;
import org.springframework.integration.support.locks.RenewableLockRegistry;

import io.etcdlock.EtcdLock;
import io.etcdlock.EtcdLockClient;
import io.etcdlock.LockGuard;
import io.etcdlock.LockLostException;

/**
 * A Spring Integration {@link org.springframework.integration.support.locks.LockRegistry}
 * whose locks are etcdlock distributed locks, exclusive across every process that uses
 * the same etcd and registry key:
 *
 * <pre>{@code
 * Lock lock = registry.obtain("orders-42");
 * if (lock.tryLock(5, TimeUnit.SECONDS)) {
 *     try { ... } finally { lock.unlock(); }
 * }
 * }</pre>
 *
 * {@link #obtain(Object)} returns the same {@link EtcdLock} for the same key (reentrant per
 * thread). The lock name in etcd is {@code <registryKey>/<lockKey>}.
 *
 * <p>Renewal: the client's lease is kept alive in the background for every lock it holds,
 * so {@link #renewLock(Object)} only checks that the calling thread still holds a valid
 * lock. {@link #expireUnusedOlderThan(long)} forgets unlocked lock objects that were not
 * obtained for that long.
 */
public class EtcdLockRegistry implements ExpirableLockRegistry, RenewableLockRegistry {
    /** The default registry key (prefix of the lock names). */
    public static final String DEFAULT_REGISTRY_KEY = "spring-integration";

    private final EtcdLockClient client;
    private final String registryKey;
    private final Map<String, Entry> locks = new ConcurrentHashMap<>();

    private static final class Entry {
        final EtcdLock lock;
        volatile long lastUsed = System.currentTimeMillis();

        Entry(EtcdLock lock) {
            this.lock = lock;
        }
    }

    /** A registry on this client with the default registry key. */
    public EtcdLockRegistry(EtcdLockClient client) {
        this(client, DEFAULT_REGISTRY_KEY);
    }

    /** A registry on this client; lock names are {@code registryKey + "/" + lockKey}. */
    public EtcdLockRegistry(EtcdLockClient client, String registryKey) {
        if (client == null) {
            throw new IllegalArgumentException("client must not be null");
        }
        if (registryKey == null || registryKey.isEmpty()) {
            throw new IllegalArgumentException("registryKey must not be empty");
        }
        this.client = client;
        this.registryKey = registryKey;
    }

    /**
     * The lock for {@code lockKey} (a non-empty {@link String}).
     *
     * @throws IllegalArgumentException if the key is not a non-empty String
     */
    @Override
    public Lock obtain(Object lockKey) {
        String key = key(lockKey);
        Entry e = locks.computeIfAbsent(key, k -> new Entry(client.newLock(registryKey + "/" + k)));
        e.lastUsed = System.currentTimeMillis();
        return e.lock;
    }

    /** Forget lock objects that are not locked and were last obtained more than {@code age} ms ago. */
    @Override
    public void expireUnusedOlderThan(long age) {
        long now = System.currentTimeMillis();
        for (Iterator<Map.Entry<String, Entry>> it = locks.entrySet().iterator(); it.hasNext();) {
            Entry e = it.next().getValue();
            if (now - e.lastUsed > age && !e.lock.isLocked()) {
                it.remove();
            }
        }
    }

    /**
     * Check that the calling thread holds the lock for {@code lockKey} and that the hold is
     * still valid (the lease is renewed in the background; nothing else to do).
     *
     * @throws IllegalStateException if the calling thread does not hold the lock
     * @throws LockLostException if the hold was lost (lease expired, key deleted, ...)
     */
    @Override
    public void renewLock(Object lockKey) {
        String key = key(lockKey);
        Entry e = locks.get(key);
        if (e == null || !e.lock.isHeldByCurrentThread()) {
            throw new IllegalStateException("the lock " + key + " is not held by the current thread");
        }
        LockGuard g = e.lock.guard();
        if (!g.isHeld()) {
            throw new LockLostException(g.lossReason().orElse(null), "the lock " + key + " was lost");
        }
    }

    /**
     * Spring Integration 7's form: as {@link #renewLock(Object)}. An etcdlock hold has no
     * expiry of its own to move: it lasts while this client's session lives (renewed in the
     * background) and ends at unlock or loss, so {@code ttl} is only checked.
     *
     * @throws IllegalArgumentException if {@code ttl} is null or not positive
     */
    public void renewLock(Object lockKey, java.time.Duration ttl) {
        if (ttl == null || ttl.isNegative() || ttl.isZero()) {
            throw new IllegalArgumentException("ttl must be positive, got " + ttl);
        }
        renewLock(lockKey);
    }

    /** The number of lock objects currently cached (for tests and metrics). */
    public int size() {
        return locks.size();
    }

    /** The registry key (prefix of the lock names). */
    public String getRegistryKey() {
        return registryKey;
    }

    private static String key(Object lockKey) {
        if (!(lockKey instanceof String) || ((String) lockKey).isEmpty()) {
            throw new IllegalArgumentException("the lock key must be a non-empty String, got " + lockKey);
        }
        return (String) lockKey;
    }
}
