package io.etcdlock;

import static io.etcdlock.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import io.etcd.jetcd.options.GetOption;

/** Issue 32: count-down latches and barriers across clients. */
@ExtendWith(EtcdExtension.class)
class LatchBarrierTest {
    static final int PARTIES = 3;

    static long keysWithPrefix(String prefix) throws Exception {
        return raw().getKVClient()
                .get(bs(prefix), GetOption.newBuilder().isPrefix(true).withCountOnly(true).build())
                .get(10, TimeUnit.SECONDS).getCount();
    }

    /**
     * Three parties, each on its own client: they meet at a barrier (indices 0, 1, 2, released
     * together), count a latch down and wait for it; once the clients are closed and the TTL has
     * passed, nothing is left in the namespace (latch and barrier keys sit beside their names,
     * {@code <namespace>NAME\0etcdlock-latch/...}).
     */
    @Test
    void threePartiesMeetAtABarrierAndALatchAndLeaveNoKeys() throws Exception {
        String ns = "test/sync-" + UUID.randomUUID().toString().substring(0, 8) + "/";
        long ttl = 2;
        String sync = ns;
        // The keys are where the check below looks: a latch opened here has some there.
        try (EtcdLockClient c = builder().namespace(ns).ttl(Duration.ofSeconds(ttl)).build();
                EtcdLatch probe = c.latch("probe", 1)) {
            assertTrue(keysWithPrefix(sync) > 0, "latch keys under " + sync);
        }
        ExecutorService pool = Executors.newFixedThreadPool(PARTIES);
        try {
            List<Future<long[]>> parties = new ArrayList<>();
            for (int i = 0; i < PARTIES; i++) {
                parties.add(pool.submit(() -> {
                    try (EtcdLockClient c = builder().namespace(ns).ttl(Duration.ofSeconds(ttl)).build();
                            EtcdBarrier b = c.barrier("start", PARTIES);
                            EtcdLatch l = c.latch("done", PARTIES)) {
                        assertEquals(PARTIES, b.parties());
                        assertEquals(PARTIES, l.initialCount());
                        int index = b.await(Duration.ofSeconds(20));
                        long released = System.nanoTime();
                        long after = l.countDown();
                        l.await(Duration.ofSeconds(20));
                        assertEquals(0, l.getCount());
                        assertEquals(0, l.countDown(), "a count-down at zero is a no-op");
                        return new long[] {index, released, after};
                    }
                }));
            }
            Set<Long> indices = new TreeSet<>();
            Set<Long> afters = new TreeSet<>();
            long first = Long.MAX_VALUE;
            long last = Long.MIN_VALUE;
            for (Future<long[]> f : parties) {
                long[] r = f.get(60, TimeUnit.SECONDS);
                indices.add(r[0]);
                afters.add(r[2]);
                first = Math.min(first, r[1]);
                last = Math.max(last, r[1]);
            }
            assertEquals(Set.of(0L, 1L, 2L), indices, "arrival indices");
            assertEquals(Set.of(0L, 1L, 2L), afters, "counts after each count-down");
            double spreadMs = (last - first) / 1e6;
            System.out.printf("barrier: 3 parties released within %.1f ms of each other%n", spreadMs);
            assertTrue(spreadMs < 1000, "released together, spread " + spreadMs + " ms");
        } finally {
            pool.shutdownNow();
        }
        await("no keys under " + sync, Duration.ofSeconds(ttl + 5), () -> {
            try {
                return keysWithPrefix(sync) == 0;
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        });
    }

    @Test
    void aLatchKeepsItsClientAlive() throws Exception {
        EtcdLatch l = client().latch(uniqueName("orphan-latch"), 2); // the client object is never stored
        for (int i = 0; i < 5; i++) {
            System.gc();
            Thread.sleep(50);
        }
        assertEquals(1, l.countDown(), "the unreachable-looking client was not closed under a live latch");
        l.close();
    }

    @Test
    void latchAndBarrierErrors() throws Exception {
        String name = uniqueName("sync-errors");
        try (EtcdLockClient a = client(); EtcdLockClient b = client()) {
            assertThrows(InvalidArgumentException.class, () -> a.latch(name, 0));
            assertThrows(InvalidArgumentException.class, () -> a.latch(name, -1));
            assertThrows(InvalidArgumentException.class, () -> a.barrier(name, 0));
            assertThrows(InvalidArgumentException.class, () -> a.barrier(name, -1));
            try (EtcdLatch l = a.latch(name, 2)) {
                assertThrows(InvalidArgumentException.class, () -> b.latch(name, 3), "count mismatch");
                long t0 = System.nanoTime();
                assertThrows(LockTimeoutException.class, () -> l.await(Duration.ofMillis(200)));
                assertTrue(System.nanoTime() - t0 >= TimeUnit.MILLISECONDS.toNanos(200));
                assertEquals(1, l.countDown());
                // An interrupted wait throws InterruptedException and cancels the native wait.
                Thread.currentThread().interrupt();
                assertThrows(InterruptedException.class, l::await);
                Thread waiter = new Thread(() -> {
                    try {
                        l.await();
                    } catch (InterruptedException expected) {
                        Thread.currentThread().interrupt();
                    }
                });
                waiter.start();
                Thread.sleep(200);
                waiter.interrupt();
                waiter.join(5000);
                assertFalse(waiter.isAlive(), "an interrupt ends the wait");
                l.close();
                l.close(); // idempotent
                assertThrows(ClosedException.class, l::countDown);
                assertThrows(ClosedException.class, l::getCount);
            }
            try (EtcdBarrier solo = a.barrier(name + "-solo", 1)) {
                assertEquals(0, solo.await(Duration.ofSeconds(5)));
                assertThrows(InvalidArgumentException.class, () -> b.barrier(name + "-solo", 1),
                        "a finished barrier refuses a new party");
            }
            try (EtcdBarrier x = a.barrier(name + "-pair", 2)) {
                assertThrows(InvalidArgumentException.class, () -> b.barrier(name + "-pair", 3), "parties mismatch");
                assertThrows(LockTimeoutException.class, () -> x.await(Duration.ofMillis(200)));
                x.close();
                assertThrows(ClosedException.class, () -> x.await(Duration.ofSeconds(1)));
            }
        }
    }
}
