package io.etcdlock;

import static io.etcdlock.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** {@code acquireAsync}: futures completed from the core runtime. */
@ExtendWith(EtcdExtension.class)
class AsyncTest {
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
    void completesFromTheRuntimeWhenReleased() throws Exception {
        String name = uniqueName("async");
        LockGuard held = a.acquire(name);
        AtomicReference<String> thread = new AtomicReference<>();
        CompletableFuture<LockGuard> f = b.acquireAsync(name, Duration.ofSeconds(20));
        CompletableFuture<Long> token = f.thenApply(g -> {
            thread.set(Thread.currentThread().getName());
            return g.fencingToken();
        });
        awaitKeys(name, 2, Duration.ofSeconds(5));
        assertFalse(f.isDone(), "pending while held elsewhere");
        long first = held.fencingToken();
        held.close();
        // Wait on the dependent, not on f: a thread blocked in f.get() may itself run f's
        // dependents (CompletableFuture "helping"), which would hide the completing thread.
        assertTrue(token.get(10, TimeUnit.SECONDS) > first);
        LockGuard g = f.get(10, TimeUnit.SECONDS);
        assertTrue(g.isHeld());
        assertTrue(thread.get().startsWith("etcdlock-rt"), thread.get());
        g.close();
        assertEquals(0, keysUnder(name));
    }

    /**
     * A runtime thread attaches to the JVM once, as a daemon, and stays attached: completing
     * 200 futures starts no Java thread per completion. (Attached for each call and detached
     * after, HotSpot registered a new java.lang.Thread for every completion: 200 here.)
     */
    @Test
    void completionsDoNotStartAThreadEach() throws Exception {
        String name = uniqueName("asyncthreads");
        java.lang.management.ThreadMXBean mx = java.lang.management.ManagementFactory.getThreadMXBean();
        a.acquireAsync(name).get(10, TimeUnit.SECONDS).close(); // the runtime threads exist
        long before = mx.getTotalStartedThreadCount();
        for (int i = 0; i < 200; i++) {
            a.acquireAsync(name).get(10, TimeUnit.SECONDS).close();
        }
        long started = mx.getTotalStartedThreadCount() - before;
        assertTrue(started < 20, started + " threads started for 200 completions");
        java.util.List<Thread> rt = Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.getName().startsWith("etcdlock-rt")).collect(java.util.stream.Collectors.toList());
        assertFalse(rt.isEmpty(), "the runtime threads stay attached");
        assertTrue(rt.stream().allMatch(Thread::isDaemon),
                "runtime threads are daemons (the JVM never waits for them at exit): " + rt);
    }

    @Test
    void timeoutFailsTheFuture() throws Exception {
        String name = uniqueName("asynctimeout");
        try (LockGuard held = a.acquire(name)) {
            CompletableFuture<LockGuard> f = b.acquireAsync(name, Duration.ofMillis(200));
            ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS));
            assertTrue(e.getCause() instanceof LockTimeoutException, String.valueOf(e.getCause()));
            awaitKeys(name, 1, Duration.ofSeconds(5));
        }
    }

    @Test
    void cancelRemovesTheWaiterKey() throws Exception {
        String name = uniqueName("asynccancel");
        try (LockGuard held = a.acquire(name)) {
            CompletableFuture<LockGuard> f = b.acquireAsync(name);
            awaitKeys(name, 2, Duration.ofSeconds(5));
            assertTrue(f.cancel(true));
            awaitKeys(name, 1, Duration.ofSeconds(5));
        }
        awaitKeys(name, 0, Duration.ofSeconds(5));
    }

    @Test
    void manyConcurrentFuturesAllComplete() throws Exception {
        String name = uniqueName("asyncmany");
        int n = 20;
        @SuppressWarnings("unchecked")
        CompletableFuture<Void>[] all = new CompletableFuture[n];
        for (int i = 0; i < n; i++) {
            all[i] = (i % 2 == 0 ? a : b).acquireAsync(name, Duration.ofSeconds(60))
                    .thenAcceptAsync(LockGuard::close);
        }
        CompletableFuture.allOf(all).get(60, TimeUnit.SECONDS);
        assertEquals(0, keysUnder(name));
    }

    @Test
    void blockingCallInsideACallbackIsRefusedNotDeadlocked() throws Exception {
        // Closing a guard in a callback is fine (released in the background); a blocking
        // acquire there is refused with a clear error instead of stalling the runtime.
        String name = uniqueName("asyncblocking");
        LockGuard held = b.acquire(name); // so the callback surely runs on the runtime thread
        CompletableFuture<LockGuard> nested = a.acquireAsync(name)
                .thenApply(g -> {
                    try {
                        return a.acquire(name + "-inner");
                    } finally {
                        g.close();
                    }
                });
        awaitKeys(name, 2, Duration.ofSeconds(5));
        held.close();
        ExecutionException e = assertThrows(ExecutionException.class, () -> nested.get(10, TimeUnit.SECONDS));
        assertTrue(e.getCause() instanceof InvalidArgumentException, String.valueOf(e.getCause()));
        awaitKeys(name, 0, Duration.ofSeconds(5));
        assertEquals(0, keysUnder(name + "-inner"));
    }

    /** Guarded operations inside an async callback are refused too, consistently. */
    @Test
    void guardedOpsInsideACallbackAreRefused() throws Exception {
        String name = uniqueName("asyncguarded");
        LockGuard held = b.acquire(name); // so the callback surely runs on the runtime thread
        CompletableFuture<String> nested = a.acquireAsync(name).thenApply(g -> {
            try {
                g.put("data-" + name, "v");
                return "accepted";
            } finally {
                g.close();
            }
        });
        awaitKeys(name, 2, Duration.ofSeconds(5));
        held.close();
        ExecutionException e = assertThrows(ExecutionException.class, () -> nested.get(10, TimeUnit.SECONDS));
        assertTrue(e.getCause() instanceof InvalidArgumentException, String.valueOf(e.getCause()));
        awaitKeys(name, 0, Duration.ofSeconds(5));
    }
}
