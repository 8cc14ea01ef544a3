package io.etcdlock;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * The in-process store that {@code mem://NAME} endpoints reach, and what a test does to it: the
 * faults and the other parties that make a hold be lost the ways production loses it, so a test
 * can watch its code cope. A client connected to etcd has no such handle; a {@code MemStore}
 * comes from a store name, never from a client. The clients of this JVM that name the store see
 * each control as they would see the same thing happen on etcd: the same signals and reasons, in
 * the same order, within the same bounds.
 *
 * <table>
 *   <caption>What each control does, and what a holder sees</caption>
 *   <tr><th>control</th><th>the store</th><th>a holder ({@link LockGuard})</th></tr>
 *   <tr><td>{@link #expireLease(long)}</td><td>ends the lease now, as its TTL would; its keys go</td>
 *       <td>{@link LockGuard#onLost} with {@link LossReason#LEASE_EXPIRED}; the next waiter is granted</td></tr>
 *   <tr><td>{@link #deleteKey(String)}</td><td>deletes a lock's key, as an operator would</td>
 *       <td>{@link LossReason#KEY_DELETED}; the next waiter is granted</td></tr>
 *   <tr><td>{@link #silence(Duration)}</td><td>answers nothing for a while (an etcd that hangs);
 *       leases expire meanwhile</td>
 *       <td>{@link LockGuard#onRenewal} reports {@link Renewal#isFailing() failing} a keep-alive
 *       interval after the last renewal (still held: time to pause), then the hold is lost at its
 *       local deadline with {@link LossReason#CONNECTION_LOST}; an {@code acquire} ends at its
 *       timeout ({@link LockTimeoutException}), other calls at the request timeout
 *       ({@link UnavailableException})</td></tr>
 *   <tr><td>{@link #stall(long, Duration)}</td><td>answers nothing to one client (its lease) while
 *       the others go on</td>
 *       <td>that client's holds as under silence; other clients are granted its locks once its
 *       lease expires</td></tr>
 * </table>
 *
 * <pre>{@code
 * MemStore store = MemStore.open("orders-test");
 * try (EtcdLockClient client = EtcdLockClient.builder().endpoints(store.endpoint()).build()) {
 *     LockGuard guard = client.newLock("job").acquire(Duration.ofSeconds(5));
 *     CompletableFuture<LossReason> lost = new CompletableFuture<>();
 *     guard.onLost(lost::complete);
 *     store.expireLease(guard.leaseId());
 *     assert lost.get(5, TimeUnit.SECONDS) == LossReason.LEASE_EXPIRED;
 * }
 * }</pre>
 *
 * The store lives as long as the JVM (it locks nothing across processes). Give each test a store
 * of its own (a name of its own), as the {@code etcdlock-test} module's JUnit extension does, and
 * {@link #resume()} after a test that silenced or stalled it. Thread-safe; two {@code MemStore}s
 * of one name are the same store (and equal).
 */
public final class MemStore {
    private final String name;

    private MemStore(String name) {
        this.name = name;
    }

    /**
     * The store {@code mem://NAME} ({@code ""}: the JVM-wide {@code mem://}), started if no
     * client started it yet.
     *
     * @throws InvalidArgumentException if {@code name} is null or not up to 64 of
     *     {@code A-Z a-z 0-9 . _ -}
     */
    public static MemStore open(String name) {
        if (name == null) {
            throw new InvalidArgumentException("store name must not be null");
        }
        return new MemStore(NativeBridge.memOpen(Args.checkText(name, "store name")));
    }

    /** The endpoint clients give to reach this store: {@code mem://NAME}. */
    public String endpoint() {
        return "mem://" + name;
    }

    /** The store's name ({@code ""} for {@code mem://}). */
    public String name() {
        return name;
    }

    /**
     * End lease {@code leaseId} now, as its time-to-live would: every key on it is deleted at one
     * revision, its holders lose their holds with {@link LossReason#LEASE_EXPIRED}, and waiters
     * behind them are granted. A client's lease is its guards' {@link LockGuard#leaseId()}.
     *
     * @return false if the store has no such lease
     */
    public boolean expireLease(long leaseId) {
        return NativeBridge.memExpireLease(name, leaseId);
    }

    /**
     * Delete {@code key} as another party would (an operator, a script): a lock's key is
     * {@link LockGuard#key()}; its holder loses the hold with {@link LossReason#KEY_DELETED}.
     *
     * @return false if there was no such key
     * @throws InvalidArgumentException if {@code key} is null or not valid Unicode
     */
    public boolean deleteKey(String key) {
        return deleteKey(LockGuard.utf8(key, "key"));
    }

    /** {@link #deleteKey(String)} for a key of any bytes. */
    public boolean deleteKey(byte[] key) {
        if (key == null) {
            throw new InvalidArgumentException("key must not be null");
        }
        return NativeBridge.memDeleteKey(name, key);
    }

    /**
     * Answer nothing for {@code d}, as an etcd that hangs: every request, keep-alive and watch
     * event waits, and is answered when the silence ends if its caller still waits. Time goes on:
     * leases whose time-to-live runs out meanwhile expire. A hold turns at risk
     * ({@link LockGuard#onRenewal}) a keep-alive interval after its last renewal and is lost at
     * its local deadline ({@link LossReason#CONNECTION_LOST}); an {@code acquire} ends at its
     * timeout, other calls at the request timeout ({@link UnavailableException}). A later call
     * replaces the end; {@link Duration#ZERO} ends it now.
     *
     * @throws InvalidArgumentException if {@code d} is null, negative or over a century
     */
    public void silence(Duration d) {
        NativeBridge.memSilence(name, nanos(d, "silence"));
    }

    /**
     * Answer nothing to the client of lease {@code leaseId} for {@code d}, while every other
     * client goes on: as a client cut off from etcd. Its holds turn at risk and are lost as under
     * {@link #silence(Duration)}; once its lease expires, other clients are granted its locks.
     * {@link Duration#ZERO} ends it now.
     *
     * @throws InvalidArgumentException if {@code d} is null, negative or over a century
     */
    public void stall(long leaseId, Duration d) {
        NativeBridge.memStall(name, leaseId, nanos(d, "stall"));
    }

    /** End every silence and stall now. */
    public void resume() {
        NativeBridge.memResume(name);
    }

    /**
     * The keys under {@code prefix} (every key for {@code ""}), in key order: what the store
     * holds, for a test to assert on. A lock's keys are under its name and {@code /} (with the
     * client's namespace before it).
     *
     * @throws InvalidArgumentException if {@code prefix} is null or not valid Unicode
     */
    public List<MemKey> keys(String prefix) {
        if (prefix == null) {
            throw new InvalidArgumentException("prefix must not be null");
        }
        return keys(Args.checkText(prefix, "prefix").getBytes(StandardCharsets.UTF_8));
    }

    /** {@link #keys(String)} for a prefix of any bytes. */
    public List<MemKey> keys(byte[] prefix) {
        if (prefix == null) {
            throw new InvalidArgumentException("prefix must not be null");
        }
        Object[] found = NativeBridge.memKeys(name, prefix);
        List<MemKey> out = new ArrayList<>(found.length);
        for (Object k : found) {
            out.add((MemKey) k);
        }
        return Collections.unmodifiableList(out);
    }

    /** A duration as nanoseconds for core, which refuses a negative or over-long one. */
    private static double nanos(Duration d, String what) {
        if (d == null) {
            throw new InvalidArgumentException(what + " duration must not be null");
        }
        return d.getSeconds() * 1e9 + d.getNano();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof MemStore && ((MemStore) o).name.equals(name);
    }

    @Override
    public int hashCode() {
        return name.hashCode();
    }

    @Override
    public String toString() {
        return "MemStore[" + endpoint() + "]";
    }
}
