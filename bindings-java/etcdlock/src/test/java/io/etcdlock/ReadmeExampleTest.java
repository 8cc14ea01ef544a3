package io.etcdlock;

import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The README's and the Javadoc's usage examples, run as written (modulo the endpoints). */
@ExtendWith(EtcdExtension.class)
class ReadmeExampleTest {

    @Test
    void readmeUsage() throws Exception {
        List<Long> written = new ArrayList<>();
        ExecutorService myExecutor = Executors.newSingleThreadExecutor();
        String ns = "readme-" + System.nanoTime() + "/";
        try (EtcdLockClient client = EtcdLockClient.builder()
                .endpoints(EtcdExtension.endpoints())
                .ttl(Duration.ofSeconds(10))
                .namespace(ns)
                .build()) {
            try (LockGuard guard = client.acquire("stock", Duration.ofSeconds(5))) {
                guard.put("inventory/stock", "300"); // setup for the example
            }

            // 1. try-with-resources guard
            try (LockGuard guard = client.acquire("stock", Duration.ofSeconds(5))) {
                guard.onLost(reason -> fail("lost the stock lock: " + reason));
                int stock = Integer.parseInt(guard.get("inventory/stock"));
                guard.put("inventory/stock", Integer.toString(stock - 1));
                written.add(guard.fencingToken());
            }

            // 2. java.util.concurrent.locks.Lock
            EtcdLock lock = client.newLock("nightly-report");
            if (lock.tryLock(2, TimeUnit.SECONDS)) {
                try {
                    written.add(lock.guard().fencingToken());
                } finally {
                    lock.unlock();
                }
            }

            // 3. async
            client.acquireAsync("orders", Duration.ofSeconds(30))
                    .thenAcceptAsync(g -> {
                        try (g) {
                            synchronized (written) {
                                written.add(g.fencingToken());
                            }
                        }
                    }, myExecutor)
                    .get(30, TimeUnit.SECONDS);

            try (LockGuard guard = client.acquire("stock", Duration.ofSeconds(5))) {
                assertEquals("299", guard.get("inventory/stock"));
            }
        } finally {
            myExecutor.shutdown();
        }
        assertEquals(3, written.size());
        assertEquals("299", TestSupport.rawGet(ns + "inventory/stock"));
    }

    // The README's recipes block, with its placeholders (transcode, storage, log, ...) as stubs.
    private final List<String> events = java.util.Collections.synchronizedList(new ArrayList<>());

    private void transcode() {
        events.add("transcode");
    }

    private void readConfig() {
        events.add("readConfig");
    }

    private void transfer(long token) {
        events.add("transfer " + (token > 0));
    }

    private void stopScheduling() {
        events.add("stopScheduling");
    }

    private final class Storage {
        void write(Object data, long token) {
            events.add("write " + (token > 0));
        }
    }

    private final class Log {
        void info(String fmt, Object... args) {
            events.add("log " + fmt);
        }
    }

    @Test
    @SuppressWarnings("unused")
    void readmeRecipes() throws Exception {
        Storage storage = new Storage();
        Log log = new Log();
        Object data = "data";
        java.nio.charset.Charset UTF_8 = java.nio.charset.StandardCharsets.UTF_8;
        String ns = "readme-recipes-" + System.nanoTime() + "/";
        try (EtcdLockClient client = EtcdLockClient.builder().endpoints(EtcdExtension.endpoints())
                .ttl(Duration.ofSeconds(10)).namespace(ns).build()) {
            // ---- as in the README ----
            // Semaphore: at most 3 holders at once, cluster-wide (java.util.concurrent.Semaphore's shape).
            EtcdSemaphore transcoders = client.newSemaphore("transcoders", 3);
            transcoders.acquire();                            // interruptible; tryAcquire(timeout, unit) too
            try { transcode(); } finally { transcoders.release(); }
            try (LockGuard permit = client.acquirePermit("transcoders", 3, Duration.ofSeconds(10))) {
                storage.write(data, permit.fencingToken());   // a permit is a LockGuard
            }

            // Read-write lock: a java.util.concurrent.locks.ReadWriteLock. Readers share; the write side
            // is the mutex itself, so etcdctl lock, Go's Mutex and client.acquire() exclude readers too.
            java.util.concurrent.locks.ReadWriteLock config = client.newReadWriteLock("config");
            config.readLock().lock();
            try { readConfig(); } finally { config.readLock().unlock(); }

            // Several locks at once: one etcd transaction, no deadlock whatever the order.
            try (MultiLockGuard both = client.acquireAll(List.of("account-1", "account-2"), Duration.ofSeconds(5))) {
                transfer(both.fencingToken());
            }

            // Leader election (the keys of Go's concurrency.Election and etcdctl elect).
            try (LeaderObservation watch = client.observe("scheduler", leader ->     // Optional.empty(): no leader
                    log.info("leader now {}", leader.map(Leader::valueAsString).orElse("(none)")))) {
                try (Leadership leadership = client.campaign("scheduler", "node-1")) { // closing resigns
                    leadership.onLost(reason -> stopScheduling());
                    leadership.proclaim("node-1, epoch 2");
                    client.leader("scheduler").ifPresent(l -> log.info("{} since revision {}", l.valueAsString(), l.revision()));
                }
            }
            java.util.concurrent.CompletableFuture<Leadership> later = client.campaignAsync("scheduler", "node-1".getBytes(UTF_8), null);

            // Who holds, who waits, for any kind of lock (what `etcdlock status` shows).
            LockStatus st = client.status("transcoders");
            st.holders().forEach(c -> log.info("{} {} {}", c.kind(), c.key(), c.owner().orElse("etcdctl/Go")));
            // ---- end of the README block ----
            later.get(10, TimeUnit.SECONDS).close();
            assertEquals(0, st.holders().size());
        }
        assertTrue(events.containsAll(List.of("transcode", "write true", "readConfig", "transfer true",
                "log {} since revision {}")), events.toString());
        assertFalse(events.contains("stopScheduling"), events.toString());
    }

    /** The README's "Lock-delay, lease time, metadata; latches and barriers" block, as written. */
    @Test
    void readmeOptionsAndSync() throws Exception {
        Log log = new Log();
        String ns = "readme-options-" + System.nanoTime() + "/";
        try (EtcdLockClient client = EtcdLockClient.builder().endpoints(EtcdExtension.endpoints())
                .ttl(Duration.ofSeconds(10)).namespace(ns).build()) {
            // ---- as in the README ----
            AcquireOptions opts = AcquireOptions.builder()
                    .lockDelay(Duration.ofSeconds(3))        // a holder that dies keeps the lock 3 s more
                    .leaseTime(Duration.ofMinutes(5))        // released after 5 minutes whatever happens
                    .metadata("job", "nightly-report")       // shown in status() to everyone
                    .build();
            try (LockGuard report = client.acquire("reports", Duration.ofSeconds(10), opts)) {
                client.status("reports").holders().forEach(h -> log.info("held for {}", h.metadata().get("job")));
            }

            // A count-down latch and a barrier shared by every process that opens the same name.
            try (EtcdLatch shards = client.latch("nightly-shards", 1);
                 EtcdBarrier start = client.barrier("nightly-start", 1)) {
                int arrival = start.await(Duration.ofSeconds(30)); // returns in every party when all arrived
                shards.countDown();                                 // each worker, when its shard is done
                shards.await(Duration.ofMinutes(5));                // the reducer: LockTimeoutException if late
            }
            // ---- end of the README block ----
            assertEquals(0, client.status("reports").holders().size());
        }
        assertTrue(events.contains("log held for {}"), events.toString());
    }

    @Test
    void aForgottenGuardIsReleasedByTheCleaner() throws Exception {
        String name = TestSupport.uniqueName("forgotten");
        try (EtcdLockClient client = TestSupport.client()) {
            forget(client, name);
            TestSupport.await("the forgotten guard's key to go", Duration.ofSeconds(20), () -> {
                System.gc();
                try {
                    return TestSupport.keysUnder(name) == 0;
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            });
            try (LockGuard g = client.acquire(name, Duration.ofSeconds(5))) {
                assertTrue(g.isHeld());
            }
        }
    }

    @Test
    void aGuardKeepsItsClientAlive() throws Exception {
        String name = TestSupport.uniqueName("orphan");
        LockGuard g = TestSupport.client().acquire(name); // the client object is never stored
        for (int i = 0; i < 5; i++) {
            System.gc();
            Thread.sleep(50);
        }
        assertTrue(g.isHeld(), "the unreachable-looking client was not cleaned up under a live guard");
        g.close();
        assertEquals(0, TestSupport.keysUnder(name));
    }

    private static void forget(EtcdLockClient client, String name) throws Exception {
        LockGuard g = client.acquire(name);
        assertEquals(1, TestSupport.keysUnder(name));
        assertTrue(g.isHeld());
    }
}
