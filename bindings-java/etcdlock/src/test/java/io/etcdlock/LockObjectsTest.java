package io.etcdlock;

import static io.etcdlock.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The lock objects as the whole API: the guard-returning calls of {@link EtcdLock},
 * {@link EtcdSemaphore}, {@link EtcdReadWriteLock.ReadLock}, {@link EtcdElection} and
 * {@link EtcdMultiLock} (each an independent hold, not counted by the object's per-thread
 * holds), and {@link EtcdLockClientBuilder}.
 */
@ExtendWith(EtcdExtension.class)
class LockObjectsTest {
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

    @Test
    void aGuardIsAnIndependentHoldNotCountedByTheLock() throws Exception {
        String name = uniqueName("obj-guard");
        EtcdLock lock = a.newLock(name);
        LockGuard g = lock.acquire(Duration.ofSeconds(5));
        assertTrue(g.isHeld());
        assertEquals(name, g.name());
        assertEquals(0, lock.getHoldCount(), "a guard is not a Lock hold");
        assertFalse(lock.isLocked());
        assertFalse(lock.isHeldByCurrentThread());
        assertThrows(IllegalMonitorStateException.class, lock::unlock);
        assertFalse(lock.tryLock(), "the guard excludes this object's Lock side too");
        assertEquals(Optional.empty(), lock.tryAcquire(), "a guard is never re-entered");
        assertEquals(1, keysUnder(name));
        g.close();
        assertFalse(g.isHeld());
        awaitKeys(name, 0, Duration.ofSeconds(5));

        assertTrue(lock.tryLock());
        assertEquals(1, lock.getHoldCount());
        assertEquals(Optional.empty(), lock.tryAcquire(), "a Lock hold excludes a guard of the same object");
        assertEquals(1, lock.getHoldCount());
        lock.unlock();
        awaitKeys(name, 0, Duration.ofSeconds(5));

        try (LockGuard t = lock.tryAcquire().orElseThrow()) {
            assertTrue(t.isHeld());
            assertTrue(t.fencingToken() > g.fencingToken(), "tokens increase per lock");
        }
        awaitKeys(name, 0, Duration.ofSeconds(5));
    }

    @Test
    void acquireTimeoutsZeroAndNull() throws Exception {
        String name = uniqueName("obj-timeouts");
        EtcdLock mine = b.newLock(name);
        try (LockGuard held = a.newLock(name).acquire()) {
            LockTimeoutException once = assertThrows(LockTimeoutException.class, () -> mine.acquire(Duration.ZERO));
            assertTrue(once.isRetryable());
            LockTimeoutException late = assertThrows(LockTimeoutException.class,
                    () -> mine.acquire(Duration.ofMillis(150)));
            assertTrue(late.isRetryable());
            assertEquals(1, keysUnder(name), "no waiter key is left behind");
            assertThrows(InvalidArgumentException.class, () -> mine.acquire(Duration.ofSeconds(-1)));
            assertEquals(1, keysUnder(name));

            // null: as long as it takes.
            CompletableFuture<LockGuard> waiter = CompletableFuture.supplyAsync(() -> mine.acquire(null));
            awaitKeys(name, 2, Duration.ofSeconds(10));
            assertFalse(waiter.isDone());
            long first = held.fencingToken();
            held.close();
            try (LockGuard next = waiter.get(20, TimeUnit.SECONDS)) {
                assertTrue(next.fencingToken() > first);
                assertEquals(1, keysUnder(name));
            }
        }
        awaitKeys(name, 0, Duration.ofSeconds(5));
    }

    @Test
    void acquireInterruptiblyRemovesTheWaiterKeyOnInterrupt() throws Exception {
        String name = uniqueName("obj-interrupt");
        EtcdLock mine = b.newLock(name);
        Thread.currentThread().interrupt();
        assertThrows(InterruptedException.class, () -> mine.acquireInterruptibly(Duration.ofSeconds(5)));
        assertFalse(Thread.currentThread().isInterrupted(), "the interrupt status is cleared");
        assertEquals(0, keysUnder(name), "nothing was written");
        try (LockGuard held = a.newLock(name).acquire(Duration.ofSeconds(5))) {
            AtomicReference<Throwable> thrown = new AtomicReference<>();
            CountDownLatch done = new CountDownLatch(1);
            Thread t = new Thread(() -> {
                try {
                    mine.acquireInterruptibly(null).close();
                } catch (Throwable e) {
                    thrown.set(e);
                } finally {
                    done.countDown();
                }
            });
            t.start();
            awaitKeys(name, 2, Duration.ofSeconds(10));
            t.interrupt();
            assertTrue(done.await(10, TimeUnit.SECONDS));
            assertTrue(thrown.get() instanceof InterruptedException, String.valueOf(thrown.get()));
            assertTrue(thrown.get().getCause() instanceof CancelledException, String.valueOf(thrown.get().getCause()));
            assertEquals(1, keysUnder(name), "the waiter key was removed before the throw");
            assertTrue(held.isHeld());
        }
        awaitKeys(name, 0, Duration.ofSeconds(5));
    }

    @Test
    void acquireAsyncCompletesTimesOutAndCancels() throws Exception {
        String name = uniqueName("obj-async");
        EtcdLock mine = b.newLock(name);
        LockGuard held = a.newLock(name).acquire();
        CompletableFuture<LockGuard> timesOut = mine.acquireAsync(Duration.ofMillis(150));
        ExecutionException e = assertThrows(ExecutionException.class, () -> timesOut.get(10, TimeUnit.SECONDS));
        assertTrue(e.getCause() instanceof LockTimeoutException, String.valueOf(e.getCause()));
        awaitKeys(name, 1, Duration.ofSeconds(5));

        CompletableFuture<LockGuard> cancelled = mine.acquireAsync();
        awaitKeys(name, 2, Duration.ofSeconds(10));
        assertTrue(cancelled.cancel(true));
        awaitKeys(name, 1, Duration.ofSeconds(10));

        CompletableFuture<LockGuard> waits = mine.acquireAsync(Duration.ofSeconds(20));
        awaitKeys(name, 2, Duration.ofSeconds(10));
        assertFalse(waits.isDone());
        held.close();
        try (LockGuard g = waits.get(20, TimeUnit.SECONDS)) {
            assertTrue(g.isHeld());
            assertEquals(0, mine.getHoldCount());
        }
        awaitKeys(name, 0, Duration.ofSeconds(5));
        assertThrows(InvalidArgumentException.class, () -> mine.acquireAsync(Duration.ofMillis(-1)));
    }

    @Test
    void optionsGivenToTheLockApplyToEveryAcquisition() throws Exception {
        String name = uniqueName("obj-opts");
        AcquireOptions opts = AcquireOptions.builder().metadata("job", "objects-test").build();
        EtcdLock lock = a.newLock(name, opts);
        assertSame(opts, lock.options());
        try (LockGuard g = lock.acquire(Duration.ofSeconds(5))) {
            awaitHolderMetadata(name, g.key());
        }
        lock.lock();
        try {
            awaitHolderMetadata(name, lock.guard().key());
        } finally {
            lock.unlock();
        }
        EtcdSemaphore delayed = a.newSemaphore(name + "-sem", 2,
                AcquireOptions.builder().lockDelay(Duration.ofSeconds(1)).build());
        assertThrows(InvalidArgumentException.class, () -> delayed.acquirePermit(Duration.ofSeconds(1)),
                "a lock-delay is refused for permits");
        assertEquals(0, keysUnder(name + "-sem"));
        awaitKeys(name, 0, Duration.ofSeconds(5));
    }

    /** The holder's metadata is written after the acquisition: wait until status shows it. */
    private static void awaitHolderMetadata(String name, String key) throws InterruptedException {
        await("the metadata of " + key, Duration.ofSeconds(10), () -> {
            List<LockStatus.Contender> holders = a.status(name).holders();
            return holders.size() == 1 && holders.get(0).key().equals(key)
                    && "objects-test".equals(holders.get(0).metadata().get("job"));
        });
    }

    @Test
    void semaphorePermitsAsGuards() throws Exception {
        String name = uniqueName("obj-sem");
        EtcdSemaphore sem = a.newSemaphore(name, 2);
        LockGuard p1 = sem.acquirePermit(Duration.ofSeconds(5));
        LockGuard p2 = b.newSemaphore(name, 2).tryAcquirePermit().orElseThrow();
        assertTrue(p1.isHeld() && p2.isHeld());
        assertNotEquals(p1.fencingToken(), p2.fencingToken());
        assertEquals(0, sem.heldPermits(), "a guard permit is not counted by the object");
        assertThrows(NotHeldException.class, sem::release);
        assertEquals(0, sem.availablePermits());
        assertEquals(Optional.empty(), sem.tryAcquirePermit());
        assertThrows(LockTimeoutException.class, () -> sem.acquirePermit(Duration.ZERO));
        assertEquals(2, keysUnder(name));
        assertThrows(InvalidArgumentException.class, () -> b.newSemaphore(name, 3).acquirePermit(Duration.ofSeconds(5)),
                "a different count than the holders'");
        assertThrows(InvalidArgumentException.class, () -> a.newSemaphore(name, 0));

        CompletableFuture<LockGuard> cancelled = sem.acquirePermitAsync(null);
        awaitKeys(name, 3, Duration.ofSeconds(10));
        assertTrue(cancelled.cancel(true));
        awaitKeys(name, 2, Duration.ofSeconds(10));

        CompletableFuture<LockGuard> third = sem.acquirePermitAsync(Duration.ofSeconds(20));
        awaitKeys(name, 3, Duration.ofSeconds(10));
        assertFalse(third.isDone());
        p1.close();
        try (LockGuard p3 = third.get(20, TimeUnit.SECONDS)) {
            assertTrue(p3.isHeld());
        }
        p2.close();
        awaitKeys(name, 0, Duration.ofSeconds(5));
    }

    @Test
    void readLockGuardsShareAndExcludeWriters() throws Exception {
        String name = uniqueName("obj-rw");
        EtcdReadWriteLock rw = a.newReadWriteLock(name);
        LockGuard r1 = rw.readLock().acquire(Duration.ofSeconds(5));
        LockGuard r2 = b.newReadWriteLock(name).readLock().tryAcquire().orElseThrow();
        assertTrue(r1.key().endsWith("-r") && r2.key().endsWith("-r"));
        assertEquals(0, rw.readLock().getHoldCount(), "a read guard is not a read-lock hold");
        assertEquals(0, rw.readLock().getReadLockCount());
        assertEquals(Optional.empty(), b.newReadWriteLock(name).writeLock().tryAcquire(), "readers exclude a writer");
        r1.close();
        r2.close();
        awaitKeys(name, 0, Duration.ofSeconds(5));

        LockGuard w = rw.writeLock().acquire(Duration.ofSeconds(5));
        assertEquals(Optional.empty(), rw.readLock().tryAcquire(), "a writer excludes readers");
        assertThrows(LockTimeoutException.class, () -> rw.readLock().acquire(Duration.ZERO));
        CompletableFuture<LockGuard> reader = b.newReadWriteLock(name).readLock().acquireAsync(Duration.ofSeconds(20));
        awaitKeys(name, 2, Duration.ofSeconds(10));
        assertFalse(reader.isDone());
        w.close();
        reader.get(20, TimeUnit.SECONDS).close();
        awaitKeys(name, 0, Duration.ofSeconds(5));
    }

    @Test
    void electionObject() throws Exception {
        String name = uniqueName("obj-elect");
        EtcdElection ea = a.newElection(name);
        EtcdElection eb = b.newElection(name);
        assertEquals(name, ea.name());
        assertEquals(Optional.empty(), ea.leader());
        try (Leadership lead = ea.campaign("node-a")) {
            Leader now = eb.leader().orElseThrow();
            assertEquals("node-a", now.valueAsString());
            assertEquals(lead.key(), now.key());
            assertEquals(lead.fencingToken(), now.revision());
            assertThrows(LockTimeoutException.class, () -> eb.campaign("node-b", Duration.ZERO));
            assertEquals(1, keysUnder(name));
            CompletableFuture<Leadership> second = eb.campaignAsync("node-b".getBytes(StandardCharsets.UTF_8), null);
            awaitKeys(name, 2, Duration.ofSeconds(10));
            assertFalse(second.isDone());
            lead.resign();
            try (Leadership l2 = second.get(20, TimeUnit.SECONDS)) {
                assertEquals("node-b", ea.leader().orElseThrow().valueAsString());
                assertEquals(l2.key(), ea.leader().orElseThrow().key());
            }
        }
        awaitKeys(name, 0, Duration.ofSeconds(5));
        assertEquals(Optional.empty(), eb.leader());
        assertThrows(InvalidArgumentException.class, () -> ea.campaign((String) null));
        assertThrows(InvalidArgumentException.class, () -> ea.campaign((byte[]) null, null));
        assertThrows(InvalidArgumentException.class, () -> a.newElection(""));
    }

    @Test
    void multiLockObject() throws Exception {
        String base = uniqueName("obj-multi");
        List<String> names = new ArrayList<>(List.of(base + "-a", base + "-b"));
        EtcdMultiLock both = a.newMultiLock(names);
        names.add(base + "-c");
        assertEquals(List.of(base + "-a", base + "-b"), both.names(), "the names were copied");
        assertThrows(UnsupportedOperationException.class, () -> both.names().add("x"));
        try (MultiLockGuard m = both.acquire(Duration.ofSeconds(5))) {
            assertTrue(m.isHeld());
            assertEquals(1, keysUnder(base + "-a"));
            assertEquals(1, keysUnder(base + "-b"));
            assertEquals(Optional.empty(), b.newMultiLock(List.of(base + "-b", base + "-z")).tryAcquire());
            assertEquals(Optional.empty(), b.newLock(base + "-a").tryAcquire());
            assertEquals(0, keysUnder(base + "-z"), "a failed try leaves nothing behind");
        }
        awaitKeys(base + "-a", 0, Duration.ofSeconds(5));
        try (MultiLockGuard m = b.newMultiLock(List.of(base + "-b", base + "-z")).acquireAsync(Duration.ofSeconds(10))
                .get(20, TimeUnit.SECONDS)) {
            assertTrue(m.isHeld());
        }
        assertThrows(InvalidArgumentException.class, () -> a.newMultiLock(null));
        assertThrows(InvalidArgumentException.class, () -> a.newMultiLock(List.of(base, "")));
        assertThrows(InvalidArgumentException.class, () -> a.newMultiLock(List.of()).acquire(Duration.ofSeconds(1)));
    }

    @Test
    void builderHasItsOwnType() {
        EtcdLockClientBuilder builder = EtcdLockClient.builder().endpoints(EtcdExtension.endpoints())
                .ttl(Duration.ofSeconds(5));
        assertTrue(builder instanceof EtcdLockClient.Builder, "builder() keeps the type existing code names");
        try (EtcdLockClient c = builder.build(); LockGuard g = c.newLock(uniqueName("obj-builder")).acquire()) {
            assertEquals(5, c.ttlSeconds());
            assertTrue(g.isHeld());
        }
    }

    @Test
    void deprecatedDelegatesKeepTheirChecks() throws Exception {
        String name = uniqueName("obj-delegates");
        try (LockGuard held = a.newLock(name).acquire()) {
            @SuppressWarnings("removal")
            LockTimeoutException zero = assertThrows(LockTimeoutException.class, () -> b.acquire(name, Duration.ZERO));
            assertEquals("lock \"" + name + "\" is held (zero timeout)", zero.getMessage());
            assertTrue(zero.isRetryable());
            assertEquals(1, keysUnder(name));
        }
        @SuppressWarnings("removal")
        InvalidArgumentException noTimeout = assertThrows(InvalidArgumentException.class, () -> a.acquire(null, null));
        assertEquals("timeout must not be null", noTimeout.getMessage(), "the timeout is checked first, as before");
        awaitKeys(name, 0, Duration.ofSeconds(5));
    }
}
