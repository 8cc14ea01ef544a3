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
