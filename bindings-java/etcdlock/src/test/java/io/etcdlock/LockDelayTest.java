package io.etcdlock;

import static io.etcdlock.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Issue 32: acquisition options (lock-delay, lease time, metadata) and release of a permit. */
@ExtendWith(EtcdExtension.class)
class LockDelayTest {
    static final Duration DELAY = Duration.ofSeconds(3);
    static final long TTL_S = 2;

    /**
     * A holder with TTL 2 s and lock-delay 3 s is SIGKILLed: the queued waiter gets the lock no
     * earlier than 3 s after the kill (the key goes at most TTL after the last keep-alive and the
     * delay runs from there) and before kill + TTL + delay + 1 s (the record lease's headroom) + 2 s.
     */
    @Test
    void lockDelayAfterTheHolderIsKilledWithSigkill() throws Exception {
        String name = uniqueName("delay-kill");
        String eps = String.join(",", EtcdExtension.endpoints());
        Process child = childJvm(DelayHolder.class, eps, name, Long.toString(TTL_S), Long.toString(DELAY.toMillis()));
        try (BufferedReader r = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
                EtcdLockClient c = client()) {
            String held = r.readLine();
            assertNotNull(held, "child reported its hold");
            assertTrue(held.startsWith("HELD "), held);
            long childToken = Long.parseLong(held.substring(5));

            // Our waiter queues behind the child (with a delay of its own, as a real successor would).
            CompletableFuture<LockGuard> waiter = c.acquireAsync(name, Duration.ofSeconds(30),
                    AcquireOptions.builder().lockDelay(DELAY).build());
            awaitKeys(name, 2, Duration.ofSeconds(10));

            child.destroyForcibly(); // SIGKILL on Linux: no unlock, no lease revoke
            long killed = System.nanoTime();
            assertTrue(child.waitFor(10, TimeUnit.SECONDS), "child died");

            try (LockGuard g = waiter.get(30, TimeUnit.SECONDS)) {
                long acquired = System.nanoTime();
                double after = (acquired - killed) / 1e9;
                System.out.printf("lock-delay: acquired %.3f s after SIGKILL (TTL %d s, delay %d s)%n", after, TTL_S,
                        DELAY.getSeconds());
                assertTrue(g.fencingToken() > childToken);
                assertTrue(after >= DELAY.getSeconds(), "acquired only " + after + " s after the kill");
                assertTrue(after < TTL_S + DELAY.getSeconds() + 1 + 2, "acquired " + after + " s after the kill");
            }
        } finally {
            child.destroyForcibly();
        }
    }

    /** With a lock-delay, a clean unlock still hands over at once (< 500 ms). */
    @Test
    void aCleanUnlockHandsOverAtOnce() throws Exception {
        String name = uniqueName("delay-unlock");
        AcquireOptions opts = AcquireOptions.builder().lockDelay(DELAY).build();
        try (EtcdLockClient a = client(); EtcdLockClient b = client()) {
            LockGuard held = a.acquire(name, Duration.ofSeconds(5), opts);
            CompletableFuture<LockGuard> waiter = b.acquireAsync(name, Duration.ofSeconds(10), opts);
            awaitKeys(name, 2, Duration.ofSeconds(10));
            long t0 = System.nanoTime();
            held.unlock();
            try (LockGuard g = waiter.get(10, TimeUnit.SECONDS)) {
                double ms = (System.nanoTime() - t0) / 1e6;
                System.out.printf("lock-delay: a clean unlock handed over in %.1f ms%n", ms);
                assertTrue(ms < 500, "handed over after " + ms + " ms");
                assertTrue(g.isHeld());
            }
            // try with options: the lock is free again, no delay after a clean unlock
            try (LockGuard g = a.tryAcquire(name, opts).orElseThrow()) {
                assertTrue(g.isHeld());
            }
        }
    }

    @Test
    void metadataIsShownInStatus() throws Exception {
        String name = uniqueName("metadata");
        AcquireOptions opts = AcquireOptions.builder().metadata("app", "billing").metadata(Map.of("node", "n1")).build();
        assertEquals(Map.of("app", "billing", "node", "n1"), opts.metadata());
        try (EtcdLockClient c = client(); LockGuard g = c.acquire(name, null, opts)) {
            // The meta record is written once the name has been in use for ~100 ms.
            await("metadata in status", Duration.ofSeconds(5),
                    () -> !c.status(name).holders().isEmpty() && !c.status(name).holders().get(0).metadata().isEmpty());
            LockStatus.Contender h = c.status(name).holders().get(0);
            assertEquals("billing", h.metadata().get("app"));
            assertEquals("n1", h.metadata().get("node"));
            assertEquals(g.fencingToken(), h.fencingToken());
        }
        // A java.util.concurrent.locks.Lock whose acquisitions carry the options.
        String other = uniqueName("metadata-lock");
        try (EtcdLockClient c = client()) {
            EtcdLock lock = c.newLock(other, opts);
            assertSame(opts, lock.options());
            assertTrue(lock.tryLock());
            try {
                await("metadata in status", Duration.ofSeconds(5), () -> !c.status(other).holders().isEmpty()
                        && "billing".equals(c.status(other).holders().get(0).metadata().get("app")));
            } finally {
                lock.unlock();
            }
        }
    }

    @Test
    void badOptionsAreRefusedByTheCore() throws Exception {
        String name = uniqueName("bad-options");
        try (EtcdLockClient c = client()) {
            assertThrows(InvalidArgumentException.class,
                    () -> c.acquire(name, null, AcquireOptions.builder().lockDelay(Duration.ofMillis(-1)).build()));
            assertThrows(InvalidArgumentException.class,
                    () -> c.acquire(name, null, AcquireOptions.builder().leaseTime(Duration.ZERO).build()));
            assertThrows(InvalidArgumentException.class, () -> c.acquirePermit(name + "-pool", 2, null,
                    AcquireOptions.builder().lockDelay(Duration.ofSeconds(1)).build()));
            assertThrows(InvalidArgumentException.class, () -> c.acquireRead(name + "-rw", null,
                    AcquireOptions.builder().lockDelay(Duration.ofSeconds(1)).build()));
            assertThrows(InvalidArgumentException.class, () -> AcquireOptions.builder().metadata("k", null));
            assertEquals(0, keysUnder(name));
        }
    }

    @Test
    void leaseTimeEndsAHoldAndCampaignTakesOptions() throws Exception {
        String name = uniqueName("lease-time");
        try (EtcdLockClient c = client()) {
            LockGuard g = c.acquire(name, null, AcquireOptions.builder().leaseTime(Duration.ofMillis(500)).build());
            CompletableFuture<LossReason> lost = new CompletableFuture<>();
            g.onLost(lost::complete);
            assertEquals(LossReason.LEASE_EXPIRED, lost.get(5, TimeUnit.SECONDS));
            try (Leadership l = c.campaign(name + "-election", "v".getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(5),
                    AcquireOptions.builder().lockDelay(Duration.ofSeconds(1)).metadata("who", "me").build())) {
                assertTrue(l.guard().isHeld());
            }
        }
    }

    @Test
    void releasePermitDeletesThatPermitOnly() throws Exception {
        String name = uniqueName("release-permit");
        try (EtcdLockClient a = client(); EtcdLockClient b = client()) {
            LockGuard p = a.acquirePermit(name, 2, Duration.ofSeconds(5));
            LockGuard q = a.acquirePermit(name, 2, Duration.ofSeconds(5));
            CompletableFuture<LossReason> lost = new CompletableFuture<>();
            p.onLost(lost::complete);
            assertFalse(b.releasePermit(name, p.fencingToken() - 1000), "no permit has that id");
            assertTrue(b.releasePermit(name, p.fencingToken()));
            assertEquals(LossReason.KEY_DELETED, lost.get(5, TimeUnit.SECONDS));
            assertFalse(b.releasePermit(name, p.fencingToken()), "already released");
            assertTrue(q.isHeld(), "the other permit is untouched");
            q.close();
        }
    }
}
