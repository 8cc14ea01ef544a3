package io.etcdlock;

import static io.etcdlock.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Mutual exclusion and loss detection across JVM processes. */
@ExtendWith(EtcdExtension.class)
class MultiProcessTest {

    @Test
    void sixteenThreadsInTwoJvmsKeepANonAtomicCounterExact() throws Exception {
        String name = uniqueName("counter");
        String counter = name + "-count";
        int threadsPerJvm = 8;
        int rounds = 15;
        String eps = String.join(",", EtcdExtension.endpoints());
        Process child = childJvm(CounterWorker.class, eps, name, counter, "" + threadsPerJvm, "" + rounds);
        try (EtcdLockClient c = client()) {
            CounterWorker.run(c, name, counter, threadsPerJvm, rounds);
        }
        assertTrue(child.waitFor(120, TimeUnit.SECONDS), "child JVM finished");
        String out = new String(child.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, child.exitValue(), out);
        assertTrue(out.contains("DONE"), out);
        assertEquals(Integer.toString(2 * threadsPerJvm * rounds), rawGet(counter));
        assertEquals(0, keysUnder(name));
    }

    @Test
    void holderFrozenPastTtlLosesTheLockAndItsGuardedPutIsRejected() throws Exception {
        String name = uniqueName("sigstop");
        String eps = String.join(",", EtcdExtension.endpoints());
        Process child = childJvm(HolderWorker.class, eps, name, "2");
        BlockingQueue<String> lines = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(
                    new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8))) {
                String l;
                while ((l = r.readLine()) != null) {
                    lines.add(l);
                }
            } catch (Exception ignored) {
                // child gone
            }
        });
        reader.setDaemon(true);
        reader.start();
        PrintStream toChild = new PrintStream(child.getOutputStream(), true, StandardCharsets.UTF_8);
        try (EtcdLockClient c = client()) {
            String held = lines.poll(30, TimeUnit.SECONDS);
            assertNotNull(held, "child reported its hold");
            assertTrue(held.startsWith("HELD "), held);
            long childToken = Long.parseLong(held.substring(5));

            signal("STOP", child.pid());
            long t0 = System.nanoTime();
            // etcd expires the frozen holder's lease (TTL 2 s) and hands us the lock.
            try (LockGuard g = c.acquire(name, Duration.ofSeconds(20))) {
                double waited = (System.nanoTime() - t0) / 1e9;
                assertTrue(g.fencingToken() > childToken);
                assertTrue(waited > 1.0, "the lock only moved after the lease expired, waited " + waited + " s");
                signal("CONT", child.pid());
                String key = name + "-stale";
                toChild.println("PUT " + key);
                String lost = null;
                String put = null;
                for (int i = 0; i < 2 && put == null; i++) {
                    String l = lines.poll(20, TimeUnit.SECONDS);
                    assertNotNull(l, "child answered");
                    if (l.startsWith("LOST ")) {
                        lost = l;
                    } else {
                        put = l;
                    }
                }
                // Paused past its TTL, the holder asks etcd why: the lease is gone there.
                assertEquals("PUT-REJECTED LOCK_LOST LEASE_EXPIRED", put);
                assertNull(rawGet(key), "etcd did not apply the stale holder's write");
                if (lost == null) {
                    lost = lines.poll(20, TimeUnit.SECONDS);
                }
                assertNotNull(lost, "loss listener fired in the frozen JVM");
                assertEquals("LOST LEASE_EXPIRED", lost);
                assertTrue(g.isHeld(), "the new holder is unaffected");
            }
        } finally {
            signal("CONT", child.pid());
            toChild.close();
            if (!child.waitFor(30, TimeUnit.SECONDS)) {
                child.destroyForcibly();
            }
        }
    }

    @Test
    void sigtermWithReleaseOnExitFreesTheLockWithinOneSecond() throws Exception {
        String name = uniqueName("sigterm");
        String eps = String.join(",", EtcdExtension.endpoints());
        Process child = childJvm(HolderWorker.class, eps, name, "10", "release-on-exit");
        try (BufferedReader r = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
                EtcdLockClient c = client()) {
            String held = r.readLine();
            assertNotNull(held, "child reported its hold");
            assertTrue(held.startsWith("HELD "), held);
            signal("TERM", child.pid());
            long t0 = System.nanoTime();
            try (LockGuard g = c.acquire(name, Duration.ofSeconds(1))) {
                double s = (System.nanoTime() - t0) / 1e9;
                assertTrue(s <= 1.0, "free after " + s + " s");
            }
            assertTrue(child.waitFor(30, TimeUnit.SECONDS), "child JVM ended");
            assertEquals(143, child.exitValue());
        } finally {
            child.destroyForcibly();
        }
    }

    static void signal(String sig, long pid) throws Exception {
        Process k = new ProcessBuilder("kill", "-" + sig, Long.toString(pid)).inheritIO().start();
        assertEquals(0, k.waitFor());
    }
}
