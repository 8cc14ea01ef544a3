import io.etcdlock.EtcdBarrier;
import io.etcdlock.EtcdLatch;
import io.etcdlock.EtcdLock;
import io.etcdlock.EtcdLockClient;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Virtual threads on etcdlock: run by bindings-java/test.sh on a JDK >= 21 with
 * {@code -Djdk.virtualThreadScheduler.parallelism=2}, against a real etcd started through the
 * testkit harness. A wait inside native code deadlocks here: waiters blocked inside native code pinned both
 * carriers, and the holder, once it slept, had no carrier left to resume on and unlock.
 * Prints "vthreads: N passed, M failed" and exits non-zero on any failure.
 */
public final class VirtualThreadsCheck {
    static int passed, failed;

    public static void main(String[] args) throws Exception {
        Process harness = new ProcessBuilder(System.getenv("ETCDLOCK_HARNESS")).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        String line = new BufferedReader(new InputStreamReader(harness.getInputStream())).readLine();
        Matcher m = Pattern.compile("\"(http://127\\.0\\.0\\.1:\\d+)\"").matcher(line);
        if (!m.find()) {
            throw new IllegalStateException("no endpoint in " + line);
        }
        String endpoint = m.group(1);
        try (EtcdLockClient client = EtcdLockClient.builder().endpoints(endpoint).ttl(Duration.ofSeconds(10)).build()) {
            check("3 virtual threads, lock / sleep(1) / unlock x 20 each (the pinned-carrier deadlock)", () -> run(client, "vt3", 3, 20));
            check("1000 virtual threads, lock / sleep(1) / unlock, counter exact", () -> run(client, "vt1000", 1000, 1));
            check("interrupting a virtual thread's lockInterruptibly removes its waiter key", () -> interrupt(client));
            check("50 virtual threads await a latch that a 51st counts down; 4 parties meet at a barrier", () -> sync(client));
        } finally {
            harness.getOutputStream().close();
            harness.waitFor(10, TimeUnit.SECONDS);
        }
        System.out.println("vthreads: " + passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }

    interface Body {
        void run() throws Exception;
    }

    static void check(String what, Body b) {
        long t0 = System.nanoTime();
        try {
            b.run();
            passed++;
            System.out.printf("ok   %s (%d ms)%n", what, (System.nanoTime() - t0) / 1_000_000);
        } catch (Throwable t) {
            failed++;
            System.out.println("FAIL " + what + ": " + t);
        }
    }

    static int counter;

    static void run(EtcdLockClient client, String name, int threads, int rounds) throws Exception {
        EtcdLock lock = client.newLock(name);
        counter = 0;
        List<Thread> ts = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            ts.add(Thread.ofVirtual().start(() -> {
                for (int r = 0; r < rounds; r++) {
                    lock.lock();
                    try {
                        int c = counter;
                        Thread.sleep(1); // unmounts the holder: it needs a free carrier to come back
                        counter = c + 1;
                    } catch (InterruptedException e) {
                        throw new RuntimeException(e);
                    } finally {
                        lock.unlock();
                    }
                }
            }));
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        for (Thread t : ts) {
            long left = Math.max(1, (deadline - System.nanoTime()) / 1_000_000);
            if (!t.join(Duration.ofMillis(left))) {
                throw new AssertionError("stalled: a virtual thread did not finish in 120 s");
            }
        }
        if (counter != threads * rounds) {
            throw new AssertionError("counter " + counter + " != " + threads * rounds);
        }
    }

    /** Latch and barrier waits park in Java too: with both carriers waiting, the others still run. */
    static void sync(EtcdLockClient client) throws Exception {
        try (EtcdLatch latch = client.latch("vt-latch", 1); EtcdBarrier barrier = client.barrier("vt-barrier", 4)) {
            List<Thread> ts = new ArrayList<>();
            for (int i = 0; i < 50; i++) {
                ts.add(Thread.ofVirtual().start(() -> {
                    try {
                        latch.await(Duration.ofSeconds(60));
                    } catch (InterruptedException e) {
                        throw new RuntimeException(e);
                    }
                }));
            }
            ts.add(Thread.ofVirtual().start(() -> {
                try {
                    Thread.sleep(200);
                } catch (InterruptedException e) {
                    throw new RuntimeException(e);
                }
                latch.countDown();
            }));
            int[] indices = new int[4];
            for (int i = 0; i < 4; i++) {
                int k = i;
                ts.add(Thread.ofVirtual().start(() -> indices[k] = barrier.await(Duration.ofSeconds(60))));
            }
            for (Thread t : ts) {
                if (!t.join(Duration.ofSeconds(90))) {
                    throw new AssertionError("stalled: a virtual thread's latch or barrier wait did not end");
                }
            }
            if (latch.getCount() != 0) {
                throw new AssertionError("latch count " + latch.getCount());
            }
            if (java.util.Arrays.stream(indices).sorted().boxed().toList().equals(List.of(0, 1, 2, 3)) == false) {
                throw new AssertionError("barrier arrival indices " + java.util.Arrays.toString(indices));
            }
        }
    }

    static void interrupt(EtcdLockClient client) throws Exception {
        EtcdLock held = client.newLock("vt-int");
        held.lock();
        try {
            EtcdLock other = client.newLock("vt-int");
            Throwable[] seen = new Throwable[1];
            Thread t = Thread.ofVirtual().start(() -> {
                try {
                    other.lockInterruptibly();
                    seen[0] = new AssertionError("acquired a held lock");
                } catch (Throwable e) {
                    seen[0] = e;
                }
            });
            Thread.sleep(300); // let it queue (if it has not, the interrupt still ends the call)
            t.interrupt();
            if (!t.join(Duration.ofSeconds(10))) {
                throw new AssertionError("interrupt did not end the wait");
            }
            if (!(seen[0] instanceof InterruptedException)) {
                throw new AssertionError("expected InterruptedException, got " + seen[0]);
            }
        } finally {
            held.unlock();
        }
        // No waiter key was left behind: another client takes the lock at once.
        try (EtcdLockClient other = EtcdLockClient.builder().endpoints(client.endpoints().split(",")).build()) {
            other.tryAcquire("vt-int").orElseThrow(() -> new AssertionError("a ghost waiter key blocks the lock")).close();
        }
    }
}
