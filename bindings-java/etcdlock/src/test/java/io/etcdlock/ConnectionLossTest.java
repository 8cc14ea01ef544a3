package io.etcdlock;

import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

/**
 * etcd frozen (SIGSTOP through the harness) under a holder with TTL 2 s: the holder's
 * guard reports the loss locally, before etcd could hand the lock to anyone, and after
 * etcd resumes the stale guard's writes are refused.
 */
class ConnectionLossTest {

    @Test
    void frozenEtcdEndsTheHoldLocallyWithinTheTtl() throws Exception {
        try (EtcdExtension.Etcd etcd = EtcdExtension.Etcd.start();
             EtcdLockClient c = EtcdLockClient.builder().endpoints(etcd.endpoints).ttl(Duration.ofSeconds(2))
                     .requestTimeout(Duration.ofSeconds(1)).build()) {
            LockGuard g = c.acquire("conn-loss", Duration.ofSeconds(5));
            CountDownLatch lost = new CountDownLatch(1);
            AtomicReference<LossReason> why = new AtomicReference<>();
            g.onLost(r -> {
                why.set(r);
                lost.countDown();
            });
            etcd.command("pause 0");
            long t0 = System.nanoTime();
            try {
                assertTrue(lost.await(10, TimeUnit.SECONDS), "loss reported while etcd is frozen");
                double s = (System.nanoTime() - t0) / 1e9;
                assertTrue(s < 2.0, "reported within the TTL (before etcd could expire the lease): " + s + " s");
                assertEquals(LossReason.CONNECTION_LOST, why.get());
                assertFalse(g.isHeld());
                assertEquals(LossReason.CONNECTION_LOST, g.lossReason().orElse(null));
            } finally {
                etcd.command("resume 0");
            }
            LockLostException e = assertThrows(LockLostException.class, () -> g.put("conn-loss-data", "stale"));
            assertEquals(LossReason.CONNECTION_LOST, e.reason());
            assertThrows(LockLostException.class, g::close);
            // The client recovers with a fresh session once etcd answers again.
            try (LockGuard again = c.acquire("conn-loss", Duration.ofSeconds(15))) {
                assertTrue(again.isHeld());
                assertTrue(again.fencingToken() > g.fencingToken());
            }
        }
    }

    @Test
    void renewalFailingIsSignalledThenRecoveredAndTheHoldSurvives() throws Exception {
        try (EtcdExtension.Etcd etcd = EtcdExtension.Etcd.start();
             EtcdLockClient c = EtcdLockClient.builder().endpoints(etcd.endpoints).ttl(Duration.ofSeconds(5)).build()) {
            LockGuard g = c.acquire("renewal", Duration.ofSeconds(5));
            assertFalse(g.renewal().isFailing());
            java.util.concurrent.BlockingQueue<Renewal> events = new java.util.concurrent.LinkedBlockingQueue<>();
            g.onRenewal(events::add);
            long t0 = System.nanoTime();
            // Hung 2.5 s at TTL 5 s: failing 1.5 s after the last acknowledgement, the hold lasts 4 s.
            etcd.command("pause 0 2500");
            Renewal failing = events.poll(2500, TimeUnit.MILLISECONDS);
            assertNotNull(failing, "no failing event while etcd hung");
            assertTrue(failing.isFailing() && failing.validFor().get().toMillis() > 0, failing.toString());
            assertTrue(g.renewal().isFailing());
            assertTrue(g.isHeld());
            Renewal ok = events.poll(3, TimeUnit.SECONDS);
            assertNotNull(ok, "no recovery event after etcd resumed");
            assertFalse(ok.isFailing(), ok.toString());
            assertFalse(g.renewal().isFailing());
            assertTrue(g.isHeld());
            System.out.println("renewal failing then recovered in " + (System.nanoTime() - t0) / 1_000_000 + " ms: " + failing);
            g.close();
        }
    }
}
