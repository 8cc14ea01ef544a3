package io.etcdlock;

import static io.etcdlock.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReadWriteLock;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Semaphore, read-write lock, multi-lock, election and the queue view through the Java API,
 * against real etcd. The recipes are core's (tested at scale in core/tests); these pin the Java
 * shapes (Semaphore, ReadWriteLock, CompletableFuture, listeners), errors and cleanup.
 */
@ExtendWith(EtcdExtension.class)
class RecipesTest {
    static EtcdLockClient a;
    static EtcdLockClient b;
    static final ExecutorService POOL = Executors.newCachedThreadPool();

    @BeforeAll
    static void connect() {
        a = client();
        b = client();
    }

    @AfterAll
    static void close() {
        POOL.shutdownNow();
        a.close();
        b.close();
    }

    @Test
    void threePermitsAreHeldAtOnceAndAFourthWaits() throws Exception {
        String name = uniqueName("sem");
        CyclicBarrier together = new CyclicBarrier(3);
        List<Future<LockGuard>> held = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            EtcdLockClient c = i % 2 == 0 ? a : b;
            held.add(POOL.submit(() -> {
                LockGuard g = c.acquirePermit(name, 3, Duration.ofSeconds(20));
                together.await(20, TimeUnit.SECONDS); // passes only with 3 permits held at once
                return g;
            }));
        }
        List<LockGuard> permits = new ArrayList<>();
        for (Future<LockGuard> f : held) {
            permits.add(f.get(30, TimeUnit.SECONDS));
        }
        assertEquals(3, keysUnder(name));
        assertEquals(Optional.empty(), b.tryAcquirePermit(name, 3), "a one-try fourth fails");
        assertEquals(3, keysUnder(name), "and leaves no key");
        LockStatus st = a.status(name);
        assertEquals(3, st.holders().size());
        for (LockStatus.Contender c : st.holders()) {
            assertEquals(LockStatus.Kind.PERMIT, c.kind());
            assertEquals(3, c.permits());
            assertTrue(c.owner().orElse("").contains(":"), c.toString());
        }
        CompletableFuture<LockGuard> fourth = b.acquirePermitAsync(name, 3, Duration.ofSeconds(20));
        awaitKeys(name, 4, Duration.ofSeconds(10));
        assertFalse(fourth.isDone());
        permits.sort((x, y) -> Long.compare(x.fencingToken(), y.fencingToken()));
        permits.get(0).close();
        LockGuard g4 = fourth.get(20, TimeUnit.SECONDS);
        assertTrue(g4.isHeld());
        g4.close();
        for (LockGuard g : permits) {
            g.close();
        }
        awaitKeys(name, 0, Duration.ofSeconds(5));
    }

    @Test
    void semaphoreNeverHasMoreHoldersThanPermits() throws Exception {
        String name = uniqueName("sem-many");
        AtomicInteger active = new AtomicInteger();
        AtomicInteger peak = new AtomicInteger();
        AtomicInteger done = new AtomicInteger();
        List<Future<?>> fs = new ArrayList<>();
        for (int t = 0; t < 8; t++) {
            EtcdSemaphore sem = (t % 2 == 0 ? a : b).newSemaphore(name, 3);
            fs.add(POOL.submit(() -> {
                for (int i = 0; i < 5; i++) {
                    sem.acquire();
                    try {
                        peak.accumulateAndGet(active.incrementAndGet(), Math::max);
                        Thread.sleep(1);
                        active.decrementAndGet();
                        done.incrementAndGet();
                    } finally {
                        sem.release();
                    }
                }
                return null;
            }));
        }
        for (Future<?> f : fs) {
            f.get(60, TimeUnit.SECONDS);
        }
        assertEquals(40, done.get());
        assertTrue(peak.get() >= 1 && peak.get() <= 3, "peak " + peak.get());
        awaitKeys(name, 0, Duration.ofSeconds(5));
    }

    @Test
    void semaphoreShapeAndBadCounts() throws Exception {
        String name = uniqueName("sem-shape");
        EtcdSemaphore sem = a.newSemaphore(name, 2);
        assertEquals(2, sem.availablePermits());
        assertTrue(sem.tryAcquire());
        assertTrue(sem.tryAcquire(5, TimeUnit.SECONDS));
        assertEquals(0, sem.availablePermits());
        assertEquals(2, sem.heldPermits());
        assertFalse(sem.tryAcquire());
        assertFalse(sem.tryAcquire(200, TimeUnit.MILLISECONDS));
        assertThrows(InvalidArgumentException.class, () -> b.acquirePermit(name, 3, Duration.ofSeconds(5)),
                "a different count than the holders'");
        assertEquals(2, keysUnder(name));
        sem.release();
        sem.release();
        assertThrows(NotHeldException.class, sem::release);
        assertThrows(InvalidArgumentException.class, () -> a.newSemaphore(name, 0));
        assertThrows(InvalidArgumentException.class, () -> a.acquirePermit(name, -1, Duration.ofSeconds(1)));
        assertThrows(InvalidArgumentException.class, () -> a.acquirePermit(name, 1025, Duration.ofSeconds(1)));
        awaitKeys(name, 0, Duration.ofSeconds(5));
    }

    @Test
    void readersShareAndAQueuedWriterGoesBeforeLaterReaders() throws Exception {
        String name = uniqueName("rw");
        LockGuard r1 = a.acquireRead(name, Duration.ofSeconds(5));
        LockGuard r2 = b.acquireRead(name, Duration.ofSeconds(5));
        assertTrue(r1.isHeld() && r2.isHeld() && r1.key().endsWith("-r"));
        assertEquals(Optional.empty(), b.tryAcquire(name), "a writer is excluded by readers");
        CompletableFuture<LockGuard> writer = b.acquireAsync(name, Duration.ofSeconds(20));
        awaitKeys(name, 3, Duration.ofSeconds(10));
        assertThrows(LockTimeoutException.class, () -> a.acquireRead(name, Duration.ZERO));
        assertEquals(3, keysUnder(name));
        CompletableFuture<LockGuard> later = a.acquireReadAsync(name, Duration.ofSeconds(20));
        awaitKeys(name, 4, Duration.ofSeconds(10));
        r1.close();
        r2.close();
        LockGuard w = writer.get(20, TimeUnit.SECONDS);
        assertFalse(later.isDone(), "the later reader waits for the writer");
        w.close();
        later.get(20, TimeUnit.SECONDS).close();
        awaitKeys(name, 0, Duration.ofSeconds(5));
    }

    @Test
    void readWriteLockIsAJavaReadWriteLock() throws Exception {
        String name = uniqueName("rwlock");
        ReadWriteLock rw = a.newReadWriteLock(name);
        Lock read = rw.readLock();
        read.lock();
        read.lock(); // reentrant per thread
        assertEquals(2, ((EtcdReadWriteLock.ReadLock) read).getHoldCount());
        // Another thread reads at the same time; no thread can write.
        assertTrue(POOL.submit(() -> {
            boolean ok = read.tryLock(5, TimeUnit.SECONDS);
            if (ok) {
                read.unlock();
            }
            return ok;
        }).get(10, TimeUnit.SECONDS));
        assertFalse(POOL.submit(() -> rw.writeLock().tryLock()).get(10, TimeUnit.SECONDS));
        read.unlock();
        assertEquals(1, keysUnder(name));
        read.unlock();
        awaitKeys(name, 0, Duration.ofSeconds(5));
        assertThrows(IllegalMonitorStateException.class, read::unlock);
        rw.writeLock().lock();
        try {
            assertFalse(POOL.submit(() -> read.tryLock()).get(10, TimeUnit.SECONDS), "a writer excludes readers");
        } finally {
            rw.writeLock().unlock();
        }
        awaitKeys(name, 0, Duration.ofSeconds(5));
    }

    @Test
    void multiLockGuardedOperationsNeedEveryLock() throws Exception {
        String base = uniqueName("mguard");
        List<String> names = Arrays.asList(base + "-1", base + "-2");
        MultiLockGuard m = a.acquireAll(names, Duration.ofSeconds(5));
        m.put(base + "-ledger", "100");
        assertEquals("100", m.get(base + "-ledger"));
        assertTrue(m.delete(base + "-ledger"));
        assertFalse(m.delete(base + "-ledger"));
        assertNull(m.get(base + "-ledger"));
        assertThrows(InvalidArgumentException.class, () -> m.put(names.get(1) + "/inside", "x"));
        m.put(base + "-ledger", "1");
        raw().getKVClient().delete(bs(m.keys().get(1))).get(5, TimeUnit.SECONDS);
        LockLostException e = assertThrows(LockLostException.class, () -> m.put(base + "-ledger", "2"));
        assertEquals(LossReason.KEY_DELETED, e.reason());
        assertEquals(Optional.of(java.util.Map.entry(names.get(1), LossReason.KEY_DELETED)), m.lost());
        assertEquals("1", rawGet(base + "-ledger"));
        assertThrows(LockLostException.class, m::close);
    }

    @Test
    void acquireAllHoldsEveryNameWithOneRevision() throws Exception {
        String base = uniqueName("multi");
        List<String> names = Arrays.asList(base + "-a", base + "-b", base + "-c");
        try (MultiLockGuard m = a.acquireAll(names, Duration.ofSeconds(5))) {
            assertTrue(m.isHeld());
            assertEquals(names, m.names());
            assertTrue(m.fencingToken() > 0);
            for (int i = 0; i < names.size(); i++) {
                assertTrue(m.keys().get(i).startsWith(names.get(i) + "/"), m.keys().get(i));
                assertEquals(1, keysUnder(names.get(i)));
                assertEquals(Optional.empty(), b.tryAcquire(names.get(i)));
            }
            assertThrows(LockTimeoutException.class, () -> b.acquireAll(Arrays.asList(base + "-z", names.get(1)), Duration.ZERO));
            assertEquals(0, keysUnder(base + "-z"), "a one-try leaves no key");
            assertEquals(Optional.empty(), m.lost());
        }
        for (String n : names) {
            awaitKeys(n, 0, Duration.ofSeconds(5));
        }
        assertThrows(InvalidArgumentException.class, () -> a.acquireAll(List.of(), Duration.ofSeconds(1)));
        assertThrows(InvalidArgumentException.class, () -> a.acquireAll(List.of(base, base), Duration.ofSeconds(1)));
        assertThrows(InvalidArgumentException.class, () -> a.acquireAll(List.of(base, ""), Duration.ofSeconds(1)));
        assertThrows(InvalidArgumentException.class, () -> a.acquireAll(List.of(base, "x\uDC00"), Duration.ofSeconds(1)));
        List<String> tooMany = new ArrayList<>();
        for (int i = 0; i <= 128; i++) {
            tooMany.add(base + "-" + i);
        }
        assertThrows(InvalidArgumentException.class, () -> a.acquireAll(tooMany, Duration.ofSeconds(1)));
    }

    @Test
    void oppositeOrdersNeverDeadlock() throws Exception {
        String base = uniqueName("multi-order");
        List<String> xy = Arrays.asList(base + "-x", base + "-y");
        List<String> yx = Arrays.asList(base + "-y", base + "-x");
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger bad = new AtomicInteger();
        AtomicInteger done = new AtomicInteger();
        List<Future<?>> fs = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            EtcdLockClient c = t % 2 == 0 ? a : b;
            List<String> order = t % 2 == 0 ? xy : yx;
            fs.add(POOL.submit(() -> {
                for (int i = 0; i < 10; i++) {
                    try (MultiLockGuard m = c.acquireAll(order, Duration.ofSeconds(30))) {
                        if (inside.incrementAndGet() > 1) {
                            bad.incrementAndGet();
                        }
                        Thread.sleep(1);
                        inside.decrementAndGet();
                        done.incrementAndGet();
                    }
                }
                return null;
            }));
        }
        for (Future<?> f : fs) {
            f.get(60, TimeUnit.SECONDS);
        }
        assertEquals(40, done.get());
        assertEquals(0, bad.get());
    }

    @Test
    void campaignProclaimResignAndObserveIncludingNoLeader() throws Exception {
        String name = uniqueName("elect");
        assertEquals(Optional.empty(), a.leader(name));
        BlockingQueue<Optional<Leader>> seen = new LinkedBlockingQueue<>();
        try (LeaderObservation obs = b.observe(name, seen::add)) {
            assertEquals(Optional.empty(), seen.poll(10, TimeUnit.SECONDS), "no leader is reported too");
            Leadership lead = a.campaign(name, "node-a");
            Leader now = seen.poll(10, TimeUnit.SECONDS).orElseThrow();
            assertEquals("node-a", now.valueAsString());
            assertEquals(lead.key(), now.key());
            assertEquals(lead.fencingToken(), now.revision());
            assertEquals(Optional.of(now), b.leader(name));
            lead.proclaim("node-a v2");
            assertEquals("node-a v2", seen.poll(10, TimeUnit.SECONDS).orElseThrow().valueAsString());
            CompletableFuture<Leadership> second = b.campaignAsync(name, "node-b".getBytes(StandardCharsets.UTF_8), null);
            awaitKeys(name, 2, Duration.ofSeconds(10));
            lead.resign();
            Leadership l2 = second.get(20, TimeUnit.SECONDS);
            assertEquals("node-b", seen.poll(10, TimeUnit.SECONDS).orElseThrow().valueAsString());
            assertThrows(NotHeldException.class, () -> lead.proclaim("late"));
            l2.close();
            assertEquals(Optional.empty(), seen.poll(10, TimeUnit.SECONDS));
            obs.close();
            obs.ended().get(10, TimeUnit.SECONDS);
        }
        assertNull(seen.poll(300, TimeUnit.MILLISECONDS), "nothing after the observation ended");
    }

    @Test
    void aDeposedLeaderCannotProclaim() throws Exception {
        String name = uniqueName("elect-deposed");
        Leadership lead = a.campaign(name, "v1");
        CompletableFuture<LossReason> lost = new CompletableFuture<>();
        lead.onLost(lost::complete);
        raw().getKVClient().delete(bs(lead.key())).get(10, TimeUnit.SECONDS);
        assertEquals(LossReason.KEY_DELETED, lost.get(10, TimeUnit.SECONDS));
        assertFalse(lead.isLeader());
        assertThrows(LockLostException.class, () -> lead.proclaim("v2"));
        assertThrows(LockLostException.class, lead::close);
    }

    @Test
    void anObservationEndsWhenItsClientCloses() throws Exception {
        String name = uniqueName("elect-close");
        EtcdLockClient c = client();
        BlockingQueue<Optional<Leader>> seen = new LinkedBlockingQueue<>();
        LeaderObservation obs = c.observe(name, seen::add);
        assertEquals(Optional.empty(), seen.poll(10, TimeUnit.SECONDS));
        c.close();
        var e = assertThrows(java.util.concurrent.ExecutionException.class, () -> obs.ended().get(10, TimeUnit.SECONDS));
        assertInstanceOf(ClosedException.class, e.getCause());
    }
}
