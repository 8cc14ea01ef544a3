package io.etcdlock;

import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * docs/lang/java.md's usage, recipes and options fragments, run as written (modulo the
 * endpoints and the placeholders, stubbed here): the lock objects' API. {@link
 * #theCopiesAreThePagesFragments} checks that each copy is the page's block.
 */
@ExtendWith(EtcdExtension.class)
class ReadmeLockObjectsTest {
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

        void warn(String fmt, Object... args) {
            events.add("warn " + fmt);
        }
    }

    @Test
    void readmeUsage() throws Exception {
        Storage storage = new Storage();
        Log log = new Log();
        Object data = "data";
        ExecutorService myExecutor = Executors.newSingleThreadExecutor();
        String ns = "readme-objects-" + System.nanoTime() + "/";
        CompletableFuture<Void> orders;
        try (EtcdLockClient client = EtcdLockClient.builder()
                .endpoints(EtcdExtension.endpoints())
                .ttl(Duration.ofSeconds(10))
                .namespace(ns)
                .build()) {
            try (LockGuard guard = client.newLock("stock").acquire(Duration.ofSeconds(5))) {
                guard.put("inventory/stock", "300"); // setup for the example
            }
            // ---- as on docs/lang/java.md ----
            // 1. try-with-resources guard: fencing token, loss listener, guarded etcd operations
            EtcdLock stockLock = client.newLock("stock");
            try (LockGuard guard = stockLock.acquire(Duration.ofSeconds(5))) {   // LockTimeoutException
                guard.onLost(reason -> log.warn("lost the stock lock: {}", reason));
                int stock = Integer.parseInt(guard.get("inventory/stock"));
                guard.put("inventory/stock", Integer.toString(stock - 1));   // etcd rejects it if we lost the lock
                storage.write(data, guard.fencingToken());               // strictly increasing per lock
            }

            // 2. java.util.concurrent.locks.Lock, reentrant per thread
            EtcdLock lock = client.newLock("nightly-report");
            if (lock.tryLock(2, TimeUnit.SECONDS)) {          // Thread.interrupt() cancels the wait
                try { events.add("nightly " + lock.getHoldCount()); } finally { lock.unlock(); }        // non-owner unlock: IllegalMonitorStateException
            }

            // 3. async: completes on an etcdlock runtime thread
            orders = client.newLock("orders").acquireAsync(Duration.ofSeconds(30))
                  .thenAcceptAsync(g -> { try (g) { events.add("orders " + g.isHeld()); } }, myExecutor);
            // ---- end of the page's block ----
            orders.get(30, TimeUnit.SECONDS);
            try (LockGuard guard = stockLock.acquire(Duration.ofSeconds(5))) {
                assertEquals("299", guard.get("inventory/stock"));
            }
        } finally {
            myExecutor.shutdown();
        }
        assertEquals(List.of("write true", "nightly 1", "orders true"), events);
        assertEquals("299", TestSupport.rawGet(ns + "inventory/stock"));
    }

    @Test
    @SuppressWarnings("unused")
    void readmeRecipes() throws Exception {
        Storage storage = new Storage();
        Log log = new Log();
        Object data = "data";
        java.nio.charset.Charset UTF_8 = java.nio.charset.StandardCharsets.UTF_8;
        String ns = "readme-objects-recipes-" + System.nanoTime() + "/";
        try (EtcdLockClient client = EtcdLockClient.builder().endpoints(EtcdExtension.endpoints())
                .ttl(Duration.ofSeconds(10)).namespace(ns).build()) {
            // ---- as on docs/lang/java.md ----
            // Semaphore: at most 3 holders at once, cluster-wide (java.util.concurrent.Semaphore's shape).
            EtcdSemaphore transcoders = client.newSemaphore("transcoders", 3);
            transcoders.acquire();                            // interruptible; tryAcquire(timeout, unit) too
            try { transcode(); } finally { transcoders.release(); }
            try (LockGuard permit = transcoders.acquirePermit(Duration.ofSeconds(10))) {
                storage.write(data, permit.fencingToken());   // a permit as a LockGuard (not counted by release())
            }

            // Read-write lock: a java.util.concurrent.locks.ReadWriteLock. Readers share; the write side
            // is the mutex itself, so etcdctl lock, Go's Mutex and EtcdLock exclude readers too.
            EtcdReadWriteLock config = client.newReadWriteLock("config");
            config.readLock().lock();
            try { readConfig(); } finally { config.readLock().unlock(); }
            try (LockGuard read = config.readLock().acquire(Duration.ofSeconds(5))) {  // a read hold as a guard
                log.info("config read under token {}", read.fencingToken());
            }

            // Several locks at once: one etcd transaction, no deadlock whatever the order.
            EtcdMultiLock accounts = client.newMultiLock(List.of("account-1", "account-2"));
            try (MultiLockGuard both = accounts.acquire(Duration.ofSeconds(5))) {
                transfer(both.fencingToken());
                both.put("transfers/last", "account-1 -> account-2"); // applied only while both are held
            }

            // Leader election (the keys of Go's concurrency.Election and etcdctl elect).
            EtcdElection scheduler = client.newElection("scheduler");
            try (LeaderObservation watch = scheduler.observe(leader ->     // Optional.empty(): no leader
                    log.info("leader now {}", leader.map(Leader::valueAsString).orElse("(none)")))) {
                try (Leadership leadership = scheduler.campaign("node-1")) { // closing resigns
                    leadership.onLost(reason -> stopScheduling());
                    leadership.proclaim("node-1, epoch 2");
                    scheduler.leader().ifPresent(l -> log.info("{} since revision {}", l.valueAsString(), l.revision()));
                }
            }
            CompletableFuture<Leadership> later = scheduler.campaignAsync("node-1".getBytes(UTF_8), null);

            // Who holds, who waits, for any kind of lock (what `etcdlock status` shows).
            LockStatus st = client.status("transcoders");
            st.holders().forEach(c -> log.info("{} {} {}", c.kind(), c.key(), c.owner().orElse("etcdctl/Go")));
            // ---- end of the page's block ----
            later.get(10, TimeUnit.SECONDS).close();
            assertEquals(0, st.holders().size());
            assertEquals("account-1 -> account-2", TestSupport.rawGet(ns + "transfers/last"));
        }
        assertTrue(events.containsAll(List.of("transcode", "write true", "readConfig", "log config read under token {}",
                "transfer true", "log {} since revision {}")), events.toString());
        assertFalse(events.contains("stopScheduling"), events.toString());
    }

    @Test
    @SuppressWarnings("unused")
    void readmeOptionsAndSync() throws Exception {
        Log log = new Log();
        String ns = "readme-objects-options-" + System.nanoTime() + "/";
        try (EtcdLockClient client = EtcdLockClient.builder().endpoints(EtcdExtension.endpoints())
                .ttl(Duration.ofSeconds(10)).namespace(ns).build()) {
            // ---- as on docs/lang/java.md ----
            AcquireOptions opts = AcquireOptions.builder()
                    .lockDelay(Duration.ofSeconds(3))        // a holder that dies keeps the lock 3 s more
                    .leaseTime(Duration.ofMinutes(5))        // released after 5 minutes whatever happens
                    .metadata("job", "nightly-report")       // shown in status() to everyone
                    .build();
            try (LockGuard report = client.newLock("reports", opts).acquire(Duration.ofSeconds(10))) {
                client.status("reports").holders().forEach(h -> log.info("held for {}", h.metadata().get("job")));
            }

            // A count-down latch and a barrier shared by every process that opens the same name.
            try (EtcdLatch shards = client.latch("nightly-shards", 1);
                 EtcdBarrier start = client.barrier("nightly-start", 1)) {
                int arrival = start.await(Duration.ofSeconds(30)); // returns in every party when all arrived
                shards.countDown();                                 // each worker, when its shard is done
                shards.await(Duration.ofMinutes(5));                // the reducer: LockTimeoutException if late
            }
            // ---- end of the page's block ----
            assertEquals(0, client.status("reports").holders().size());
        }
        assertTrue(events.contains("log held for {}"), events.toString());
    }
    private static String squeeze(String s) {
        return s.replaceAll("\\s+", "");
    }

    /**
     * Each copy above (between its markers) is a ```java block of docs/lang/java.md: the same
     * code once whitespace is dropped, where the page's {@code ...} stands for the copy's stub
     * code, the page's client opening ({@code try (EtcdLockClient client = ...build()) {}) is the
     * test's, and the copy keeps the async future ({@code orders = }) to wait for it.
     */
    @Test
    void theCopiesAreThePagesFragments() throws Exception {
        java.nio.file.Path page = java.nio.file.Path.of("..", "..", "docs", "lang", "java.md");
        List<String> lines = java.nio.file.Files.readAllLines(page);
        List<String> blocks = new ArrayList<>();
        for (int i = 0; i < lines.size(); i++) {
            if (lines.get(i).strip().equals("```java")) {
                int j = i + 1;
                while (!lines.get(j).strip().equals("```")) {
                    j++;
                }
                String b = String.join("\n", lines.subList(i + 1, j));
                if (b.contains(".build()) {")) { // the client opening: the test opens its own
                    b = b.substring(b.indexOf(".build()) {") + ".build()) {".length(), b.lastIndexOf('}'));
                }
                blocks.add(b);
                i = j;
            }
        }
        String source = java.nio.file.Files.readString(
                java.nio.file.Path.of("src", "test", "java", "io", "etcdlock", "ReadmeLockObjectsTest.java"));
        java.util.regex.Matcher copies = java.util.regex.Pattern.compile(
                "// ---- as on docs/lang/java.md ----\n(.*?)// ---- end of the page's block ----",
                java.util.regex.Pattern.DOTALL).matcher(source);
        int n = 0;
        while (copies.find()) {
            String copy = squeeze(copies.group(1)).replace("orders=", "");
            n++;
            boolean found = false;
            for (String b : blocks) {
                StringBuilder re = new StringBuilder();
                for (String part : squeeze(b).split("\\.\\.\\.", -1)) {
                    re.append(re.length() == 0 ? "" : ".*?").append(java.util.regex.Pattern.quote(part));
                }
                found |= java.util.regex.Pattern.compile(re.toString(), java.util.regex.Pattern.DOTALL).matcher(copy).matches();
            }
            assertTrue(found, "copy " + n + " is no java block of " + page + ":\n" + copies.group(1));
        }
        assertEquals(3, n, "the copies: usage, recipes, options");
    }
}
