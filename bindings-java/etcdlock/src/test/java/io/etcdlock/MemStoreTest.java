package io.etcdlock;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The fault controls of an in-process store ({@link MemStore}) from Java: what a holder sees
 * for each (the signal and its reason, awaited as events), what other clients see, and bad input
 * as typed exceptions. Every control travels core's real path (core/tests/mem_faults.rs is the
 * Rust twin); loss tests use TTL 3 s clients so a silenced hold is lost in about 3 s.
 */
class MemStoreTest {
    /** Where the module's pom has stores write their URLs (ETCDLOCK_MEM_URL_DIR): it must exist. */
    @BeforeAll
    static void urlDir() {
        String dir = System.getenv("ETCDLOCK_MEM_URL_DIR");
        if (dir != null) {
            new java.io.File(dir).mkdirs();
        }
    }

    static EtcdLockClient client(MemStore store, long ttlSeconds) {
        return EtcdLockClient.builder().endpoints(store.endpoint()).ttl(Duration.ofSeconds(ttlSeconds))
                .requestTimeout(Duration.ofSeconds(1)).build();
    }

    static <T> T within(CompletableFuture<T> f, long seconds, String what) throws Exception {
        try {
            return f.get(seconds, TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            throw new AssertionError("not within " + seconds + " s: " + what);
        }
    }

    static CompletableFuture<LossReason> lost(LockGuard g) {
        CompletableFuture<LossReason> f = new CompletableFuture<>();
        g.onLost(f::complete);
        return f;
    }

    /** An acquire on a thread of its own (a second instance waiting for the lock). */
    static CompletableFuture<LockGuard> acquireInBackground(EtcdLockClient c, String name, Duration timeout) {
        CompletableFuture<LockGuard> f = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                f.complete(c.newLock(name).acquire(timeout));
            } catch (Throwable e) {
                f.completeExceptionally(e);
            }
        }, "waiter-" + name);
        t.setDaemon(true);
        t.start();
        return f;
    }

    static void awaitKeys(MemStore store, String prefix, int n) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (store.keys(prefix).size() != n) {
            assertTrue(System.nanoTime() < deadline, n + " keys under " + prefix + ": " + store.keys(prefix));
            Thread.sleep(10);
        }
    }

    @Test
    void expireLeaseLosesTheHoldWithLeaseExpiredAndGrantsTheWaiter() throws Exception {
        MemStore store = MemStore.open("java-faults-expire");
        try (EtcdLockClient a = client(store, 15); EtcdLockClient b = client(store, 15)) {
            LockGuard g = a.newLock("job").acquire(Duration.ofSeconds(5));
            CompletableFuture<LossReason> lost = lost(g);
            CompletableFuture<LockGuard> waiter = acquireInBackground(b, "job", Duration.ofSeconds(10));
            awaitKeys(store, "job/", 2); // the waiter queued behind the holder
            assertTrue(store.expireLease(g.leaseId()));
            assertFalse(store.expireLease(g.leaseId()), "gone already");
            assertEquals(LossReason.LEASE_EXPIRED, within(lost, 5, "the loss"));
            assertFalse(g.isHeld());
            assertEquals(LossReason.LEASE_EXPIRED, g.lossReason().orElseThrow());
            LockGuard h = within(waiter, 5, "the waiter granted");
            assertTrue(h.fencingToken() > g.fencingToken());
            LockLostException e = assertThrows(LockLostException.class, g::close);
            assertEquals(LossReason.LEASE_EXPIRED, e.reason());
            h.close();
        }
    }

    @Test
    void deleteKeyLosesTheHoldWithKeyDeleted() throws Exception {
        MemStore store = MemStore.open("java-faults-delete");
        try (EtcdLockClient a = client(store, 15)) {
            LockGuard g = a.newLock("job").acquire(Duration.ofSeconds(5));
            CompletableFuture<LossReason> lost = lost(g);
            List<MemKey> held = store.keys(g.key());
            assertEquals(1, held.size());
            MemKey k = held.get(0);
            assertEquals(g.key(), k.keyString());
            assertArrayEquals(g.key().getBytes(StandardCharsets.UTF_8), k.key());
            assertEquals(g.leaseId(), k.lease());
            assertEquals(g.fencingToken(), k.createRevision());
            assertTrue(k.modRevision() >= k.createRevision());
            assertEquals(k, store.keys("job/").get(0));
            assertTrue(store.deleteKey(g.key()));
            assertFalse(store.deleteKey(g.key()));
            assertEquals(LossReason.KEY_DELETED, within(lost, 5, "the loss"));
            LockLostException e = assertThrows(LockLostException.class, g::close);
            assertEquals(LossReason.KEY_DELETED, e.reason());
        }
    }

    /**
     * What a holder is told, in order, as text: {@code at risk (held)} when its renewal turns
     * failing, {@code renewed}, and {@code lost REASON}.
     */
    static BlockingQueue<String> events(LockGuard g) {
        BlockingQueue<String> events = new LinkedBlockingQueue<>();
        g.onRenewal(r -> events.add(r.isFailing() ? "at risk (" + (g.isHeld() ? "held" : "not held") + ")" : "renewed"));
        g.onLost(r -> events.add("lost " + r));
        return events;
    }

    static String next(BlockingQueue<String> events, long seconds) throws InterruptedException {
        String e = events.poll(seconds, TimeUnit.SECONDS);
        return e == null ? "nothing within " + seconds + " s" : e;
    }

    @Test
    void silenceTurnsAHoldAtRiskThenLostAndCallsEndAtTheirBounds() throws Exception {
        MemStore store = MemStore.open("java-faults-silence");
        try (EtcdLockClient a = client(store, 3)) {
            LockGuard g = a.newLock("job").acquire(Duration.ofSeconds(5));
            BlockingQueue<String> events = events(g);
            long t0 = System.nanoTime();
            store.silence(Duration.ofSeconds(60));
            try {
                // A lock call ends at its timeout, not later.
                assertThrows(LockTimeoutException.class, () -> a.newLock("other").acquire(Duration.ofMillis(500)));
                assertTrue(ms(t0) < 1500, ms(t0) + " ms");
                // At risk first (still held), then lost, on the session's own clock.
                assertEquals("at risk (held)", next(events, 5));
                assertEquals("lost CONNECTION_LOST", next(events, 5));
                assertTrue(ms(t0) < 4000, "lost within the TTL: " + ms(t0) + " ms");
                assertFalse(g.isHeld());
                // A call without a timeout of its own ends at the request timeout (1 s).
                long t1 = System.nanoTime();
                assertThrows(UnavailableException.class, () -> a.status("job"));
                assertTrue(ms(t1) < 1700, ms(t1) + " ms");
            } finally {
                store.resume();
            }
            // The store answers again: a new hold is granted.
            try (LockGuard again = a.newLock("job").acquire(Duration.ofSeconds(10))) {
                assertTrue(again.isHeld());
            }
            assertEquals(LossReason.CONNECTION_LOST, assertThrows(LockLostException.class, g::close).reason());
        }
    }

    @Test
    void stallCutsOffOneClientWhileTheOthersGoOn() throws Exception {
        MemStore store = MemStore.open("java-faults-stall");
        try (EtcdLockClient a = client(store, 3); EtcdLockClient b = client(store, 3)) {
            LockGuard g = a.newLock("job").acquire(Duration.ofSeconds(5));
            BlockingQueue<String> events = events(g);
            long t0 = System.nanoTime();
            store.stall(g.leaseId(), Duration.ofSeconds(60));
            try {
                // b goes on while a is stalled.
                try (LockGuard other = b.newLock("other").acquire(Duration.ofSeconds(1))) {
                    assertTrue(ms(t0) < 1000, ms(t0) + " ms");
                }
                // b waits for a's lock, and is granted it once a's lease has expired in the store.
                CompletableFuture<LockGuard> h = acquireInBackground(b, "job", Duration.ofSeconds(10));
                assertEquals("at risk (held)", next(events, 5));
                assertEquals("lost CONNECTION_LOST", next(events, 5));
                assertTrue(ms(t0) < 4000, "lost within the TTL: " + ms(t0) + " ms");
                LockGuard next = within(h, 6, "b granted a's lock");
                assertTrue(next.fencingToken() > g.fencingToken());
                next.close();
            } finally {
                store.stall(g.leaseId(), Duration.ZERO);
            }
        }
    }

    @Test
    void theStoreByName() {
        MemStore s = MemStore.open("java-faults-name");
        assertEquals("java-faults-name", s.name());
        assertEquals("mem://java-faults-name", s.endpoint());
        assertEquals(s, MemStore.open("java-faults-name"));
        assertEquals(s.hashCode(), MemStore.open("java-faults-name").hashCode());
        assertEquals("MemStore[mem://java-faults-name]", s.toString());
        MemStore dflt = MemStore.open("");
        assertEquals("", dflt.name());
        assertEquals("mem://", dflt.endpoint());
        // Nothing to act on: false, never an error.
        assertFalse(s.expireLease(12345));
        assertFalse(s.deleteKey("no/such/key"));
        assertFalse(s.deleteKey(new byte[] {(byte) 0xff}));
        assertTrue(s.keys("nothing/").isEmpty());
        assertTrue(s.keys(new byte[0]).isEmpty());
        // Controls with nothing to end or stall are no-ops.
        s.resume();
        s.stall(12345, Duration.ZERO);
        s.silence(Duration.ZERO);
    }

    @Test
    void badInputIsInvalidArgument() {
        assertThrows(InvalidArgumentException.class, () -> MemStore.open(null));
        for (String bad : new String[] {"a/b", "a b", "x".repeat(65), "caf\u00e9", "\ud800"}) {
            InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> MemStore.open(bad), bad);
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            assertFalse(e.isRetryable());
        }
        MemStore.open("x".repeat(64)); // the longest name
        MemStore s = MemStore.open("java-faults-bad");
        assertThrows(InvalidArgumentException.class, () -> s.silence(null));
        assertThrows(InvalidArgumentException.class, () -> s.silence(Duration.ofMillis(-1)));
        assertThrows(InvalidArgumentException.class, () -> s.silence(Duration.ofDays(365L * 200)));
        assertThrows(InvalidArgumentException.class, () -> s.silence(Duration.ofSeconds(Long.MIN_VALUE)));
        assertThrows(InvalidArgumentException.class, () -> s.stall(1, null));
        assertThrows(InvalidArgumentException.class, () -> s.stall(1, Duration.ofSeconds(-1)));
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
                () -> s.stall(1, Duration.ofSeconds(Long.MAX_VALUE)));
        assertTrue(e.getMessage().contains("stall"), e.getMessage());
        assertThrows(InvalidArgumentException.class, () -> s.deleteKey((String) null));
        assertThrows(InvalidArgumentException.class, () -> s.deleteKey((byte[]) null));
        assertThrows(InvalidArgumentException.class, () -> s.deleteKey("\udc00"));
        assertThrows(InvalidArgumentException.class, () -> s.keys((String) null));
        assertThrows(InvalidArgumentException.class, () -> s.keys((byte[]) null));
        assertThrows(InvalidArgumentException.class, () -> s.keys("\ud800x"));
        // The natives themselves, called with what the Java layer refuses: typed, never a crash.
        assertThrows(InvalidArgumentException.class, () -> NativeBridge.memOpen(null));
        assertThrows(InvalidArgumentException.class, () -> NativeBridge.memSilence("java-faults-bad", Double.NaN));
        assertThrows(InvalidArgumentException.class,
                () -> NativeBridge.memStall("java-faults-bad", 1, Double.POSITIVE_INFINITY));
        assertThrows(InvalidArgumentException.class, () -> NativeBridge.memKeys("java-faults-bad", null));
        assertThrows(InvalidArgumentException.class, () -> NativeBridge.memDeleteKey("java-faults-bad", null));
        assertThrows(InvalidArgumentException.class, () -> NativeBridge.memExpireLease("a/b", 1));
        assertThrows(InvalidArgumentException.class, () -> NativeBridge.memResume(null));
    }

    static long ms(long t0) {
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    }
}
