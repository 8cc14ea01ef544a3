package io.etcdlock;

import static io.etcdlock.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The core behaviour suite, in Java, against a real etcd. */
@ExtendWith(EtcdExtension.class)
class LockBehaviourTest {
    static EtcdLockClient a;
    static EtcdLockClient b;

    @BeforeAll
    static void connect() {
        a = client();
        b = client();
    }

    @AfterAll
    static void close() {
        a.close();
        b.close();
    }

    /**
     * Start a thread that runs {@code body} and records what it returned, or what it threw,
     * in {@code outcome}.
     */
    static Thread startWaiter(java.util.concurrent.Callable<Object> body, AtomicReference<Object> outcome) {
        Thread t = new Thread(() -> {
            try {
                outcome.set(body.call());
            } catch (Throwable e) {
                outcome.set(e);
            }
        });
        t.start();
        return t;
    }

    @Test
    void uncontendedAcquireAndRelease() throws Exception {
        String name = uniqueName("uncontended");
        try (LockGuard g = a.acquire(name, Duration.ofSeconds(5))) {
            assertTrue(g.isHeld());
            assertTrue(g.key().startsWith(name + "/"), g.key());
            assertTrue(g.fencingToken() > 0);
            assertNotEquals(0, g.leaseId());
            assertEquals(Optional.empty(), g.lossReason());
            assertEquals(1, keysUnder(name));
        }
        assertEquals(0, keysUnder(name), "unlock deletes the key");
    }

    @Test
    void tryAcquireWhenHeldLeavesNoKey() throws Exception {
        String name = uniqueName("try");
        try (LockGuard g = a.acquire(name)) {
            assertEquals(Optional.empty(), b.tryAcquire(name));
            assertEquals(1, keysUnder(name), "a failed try leaves no key");
            assertFalse(b.newLock(name).tryLock());
            assertEquals(1, keysUnder(name));
        }
        Optional<LockGuard> g = b.tryAcquire(name);
        assertTrue(g.isPresent());
        g.get().close();
    }

    @Test
    void timeoutLeavesNoKey() throws Exception {
        String name = uniqueName("timeout");
        try (LockGuard g = a.acquire(name)) {
            long t0 = System.nanoTime();
            assertThrows(LockTimeoutException.class, () -> b.acquire(name, Duration.ofMillis(300)));
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms >= 290 && ms < 3000, "waited " + ms + " ms");
            awaitKeys(name, 1, Duration.ofSeconds(5));
            assertFalse(b.newLock(name).tryLock(100, TimeUnit.MILLISECONDS));
            awaitKeys(name, 1, Duration.ofSeconds(5));
        }
        awaitKeys(name, 0, Duration.ofSeconds(5));
    }

    @Test
    void interruptCancelsTheWaitAndRemovesTheWaiterKey() throws Exception {
        String name = uniqueName("interrupt");
        try (LockGuard g = a.acquire(name)) {
            EtcdLock lock = b.newLock(name);
            AtomicReference<Object> outcome = new AtomicReference<>();
            Thread t = startWaiter(() -> {
                lock.lockInterruptibly();
                return new AssertionError("acquired although held elsewhere");
            }, outcome);
            awaitKeys(name, 2, Duration.ofSeconds(5)); // the waiter's key is queued
            t.interrupt();
            t.join(5000);
            assertFalse(t.isAlive());
            assertTrue(outcome.get() instanceof InterruptedException, String.valueOf(outcome.get()));
            awaitKeys(name, 1, Duration.ofSeconds(5)); // ...and removed again
            assertTrue(g.isHeld());
        }
    }

    /**
     * {@code lock()} on a platform thread waits inside native code: an interrupt neither ends
     * the wait nor is lost (the flag is still set when it returns), and the acquisition
     * listener hears of it as of one through a future.
     */
    @Test
    void lockOnAPlatformThreadIgnoresAnInterruptAndKeepsTheFlag() throws Exception {
        String name = uniqueName("uninterruptible");
        EtcdLockClient c = client();
        List<String> heard = Collections.synchronizedList(new ArrayList<>());
        c.setAcquisitionListener((n, result, waited) -> heard.add(n + " " + result));
        try {
            LockGuard g = a.acquire(name);
            EtcdLock lock = c.newLock(name);
            AtomicReference<Object> outcome = new AtomicReference<>();
            Thread t = startWaiter(() -> {
                lock.lock();
                String kept = Thread.currentThread().isInterrupted() ? "acquired, flag kept" : "acquired, flag lost";
                lock.unlock();
                return kept;
            }, outcome);
            awaitKeys(name, 2, Duration.ofSeconds(5));
            t.interrupt();
            t.join(300);
            assertTrue(t.isAlive(), "an interrupt ended lock(): " + outcome.get());
            assertEquals(2, keysUnder(name), "the waiter's key stays");
            g.close();
            t.join(10_000);
            assertFalse(t.isAlive());
            assertEquals("acquired, flag kept", outcome.get());
            assertEquals(List.of(name + " ACQUIRED"), heard);
            awaitKeys(name, 0, Duration.ofSeconds(5));
        } finally {
            c.close();
        }
    }

    /**
     * A {@code ForkJoinPool} worker waiting in {@code acquire()} lets the pool start a spare
     * worker (as any {@code CompletableFuture.get()} there does): a pool of one still runs the
     * next task, here the one the holder waits for before it unlocks.
     */
    @Test
    void aForkJoinWorkersLockWaitLetsThePoolRunOtherTasks() throws Exception {
        String name = uniqueName("fork-join");
        ForkJoinPool pool = new ForkJoinPool(1);
        LockGuard g = a.acquire(name);
        try {
            Future<Long> waiter = pool.submit(() -> {
                try (LockGuard h = b.acquire(name)) {
                    return h.fencingToken();
                }
            });
            awaitKeys(name, 2, Duration.ofSeconds(5)); // the pool's only worker waits for the lock
            Future<String> next = pool.submit(() -> "ran");
            assertEquals("ran", next.get(5, TimeUnit.SECONDS), "the pool ran nothing while its worker waited");
            g.close();
            assertTrue(waiter.get(10, TimeUnit.SECONDS) > g.fencingToken());
        } finally {
            g.close();
            pool.shutdownNow();
        }
    }

    @Test
    void waitersAreServedInArrivalOrder() throws Exception {
        String name = uniqueName("fifo");
        int n = 5;
        List<Integer> order = Collections.synchronizedList(new ArrayList<>());
        List<Thread> threads = new ArrayList<>();
        LockGuard first = a.acquire(name);
        // One client per waiter: a client's own waiters take turns in the
        // client (at most 2 keys in etcd's queue), so arrival order in etcd is
        // set across clients.
        List<EtcdLockClient> clients = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            clients.add(client());
        }
        for (int i = 0; i < n; i++) {
            final int id = i;
            Thread t = new Thread(() -> {
                try (LockGuard g = clients.get(id).acquire(name, Duration.ofSeconds(30))) {
                    order.add(id);
                }
            });
            t.start();
            threads.add(t);
            awaitKeys(name, i + 2, Duration.ofSeconds(5)); // arrival order is fixed before the next starts
        }
        first.close();
        for (Thread t : threads) {
            t.join(30_000);
        }
        clients.forEach(EtcdLockClient::close);
        assertEquals(List.of(0, 1, 2, 3, 4), order);
        assertEquals(0, keysUnder(name));
    }

    @Test
    void fencingTokensStrictlyIncrease() throws Exception {
        String name = uniqueName("tokens");
        long last = 0;
        for (int i = 0; i < 6; i++) {
            try (LockGuard g = (i % 2 == 0 ? a : b).acquire(name)) {
                assertTrue(g.fencingToken() > last, g.fencingToken() + " after " + last);
                last = g.fencingToken();
            }
        }
    }

    @Test
    void guardedOperations() throws Exception {
        String name = uniqueName("guarded");
        String k = name + "-data";
        LockGuard g = a.acquire(name);
        g.put(k, "42");
        assertEquals("42", g.get(k));
        assertEquals("42", rawGet(k));
        assertArrayEquals("42".getBytes(), g.get(k.getBytes()));
        assertTrue(g.delete(k));
        assertFalse(g.delete(k));
        assertNull(g.get(k));
        g.close();
        assertFalse(g.isHeld());
        assertThrows(NotHeldException.class, () -> g.put(k, "1"));
        g.close(); // idempotent
    }

    @Test
    void operatorDeleteIsReportedAsLoss() throws Exception {
        String name = uniqueName("deleted");
        LockGuard g = a.acquire(name);
        CountDownLatch lost = new CountDownLatch(1);
        AtomicReference<LossReason> why = new AtomicReference<>();
        g.onLost(r -> {
            why.set(r);
            lost.countDown();
        });
        raw().getKVClient().delete(bs(g.key())).get(5, TimeUnit.SECONDS);
        assertTrue(lost.await(10, TimeUnit.SECONDS), "loss listener called");
        assertEquals(LossReason.KEY_DELETED, why.get());
        assertFalse(g.isHeld());
        LockLostException e = assertThrows(LockLostException.class, () -> g.put(name + "-x", "1"));
        assertEquals(LossReason.KEY_DELETED, e.reason());
        assertThrows(LockLostException.class, g::close);
        assertNull(rawGet(name + "-x"));
    }

    @Test
    void closingTheClientEndsItsHolds() throws Exception {
        String name = uniqueName("closeclient");
        EtcdLockClient c = client();
        LockGuard g = c.acquire(name);
        CountDownLatch lost = new CountDownLatch(1);
        AtomicReference<LossReason> why = new AtomicReference<>();
        g.onLost(r -> {
            why.set(r);
            lost.countDown();
        });
        c.close();
        assertTrue(lost.await(10, TimeUnit.SECONDS));
        assertEquals(LossReason.CLIENT_CLOSED, why.get());
        awaitKeys(name, 0, Duration.ofSeconds(5));
        assertThrows(ClosedException.class, () -> c.acquire(name));
        assertThrows(ClosedException.class, () -> c.newLock(name).lock());
        c.close(); // idempotent
        try (LockGuard g2 = b.acquire(name, Duration.ofSeconds(5))) {
            assertTrue(g2.isHeld());
        }
    }

    @Test
    void closingTheClientWakesWaiters() throws Exception {
        String name = uniqueName("closewait");
        EtcdLockClient c = client();
        try (LockGuard g = a.acquire(name)) {
            AtomicReference<Object> outcome = new AtomicReference<>();
            // acquire() on a platform thread waits inside native code: close() must end it, at once.
            Thread t = startWaiter(() -> c.acquire(name), outcome);
            awaitKeys(name, 2, Duration.ofSeconds(5));
            long t0 = System.nanoTime();
            c.close();
            t.join(5000);
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertFalse(t.isAlive(), "acquire() still waiting 5 s after close()");
            assertTrue(ms < 2000, "acquire() ended " + ms + " ms after close()");
            // The core reports a waiter whose client closes as Closed or as LockLost(ClientClosed).
            Object o = outcome.get();
            assertTrue(o instanceof ClosedException
                    || (o instanceof LockLostException && ((LockLostException) o).reason() == LossReason.CLIENT_CLOSED),
                    String.valueOf(o));
            awaitKeys(name, 1, Duration.ofSeconds(5));
        }
    }
}
