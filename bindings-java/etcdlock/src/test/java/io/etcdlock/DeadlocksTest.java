package io.etcdlock;

import static io.etcdlock.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.stream.Collectors;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@code deadlocks} (cycles of clients waiting on each other, from one read), the
 * {@code detectDeadlock} acquisition option ({@link DeadlockException} for the wait that would close
 * a cycle) and {@code history} (a name's holds and waits from etcd's MVCC history).
 */
@ExtendWith(EtcdExtension.class)
class DeadlocksTest {
    private static final Duration LONG = Duration.ofSeconds(20);
    private static final AcquireOptions DETECT = AcquireOptions.builder().detectDeadlock().build();

    /** Until the read under {@code prefix} sees {@code n} waiting keys (each wait's key reached etcd). */
    private static void waitsQueued(EtcdLockClient c, String prefix, int n) throws InterruptedException {
        await(n + " waits queued under " + prefix, Duration.ofSeconds(10), () -> c.deadlocks(prefix).waits() == n);
    }

    @Test
    void findsTheCycleOfTwoClients() throws Exception {
        try (EtcdLockClient a = client(); EtcdLockClient b = client()) {
            String base = uniqueName("dl");
            LockGuard hx = a.acquire(base + "/x");
            LockGuard hy = b.acquire(base + "/y");
            Deadlocks none = a.deadlocks(base + "/");
            assertEquals(base + "/", none.prefix());
            assertEquals(2, none.clients());
            assertEquals(0, none.waits());
            assertEquals(List.of(), none.cycles());
            CompletableFuture<LockGuard> wa = a.acquireAsync(base + "/y", LONG);
            CompletableFuture<LockGuard> wb = b.acquireAsync(base + "/x", LONG);
            waitsQueued(a, base + "/", 2);
            Deadlocks d = b.deadlocks(base + "/");
            assertTrue(d.revision() > hy.fencingToken());
            assertEquals(2, d.clients());
            assertEquals(2, d.waits());
            assertEquals(1, d.cycles().size(), d.toString());
            List<Deadlocks.WaitEdge> edges = d.cycles().get(0).edges();
            assertEquals(2, edges.size());
            assertEquals(edges.get(0).holder().leaseId(), edges.get(1).waiter().leaseId());
            assertEquals(edges.get(1).holder().leaseId(), edges.get(0).waiter().leaseId());
            Map<String, Deadlocks.WaitEdge> by = edges.stream()
                    .collect(Collectors.toMap(Deadlocks.WaitEdge::name, Function.identity()));
            Deadlocks.WaitEdge ex = by.get(base + "/x");
            assertEquals(hx.leaseId(), ex.holder().leaseId());
            assertEquals(hy.leaseId(), ex.waiter().leaseId());
            assertEquals(hx.fencingToken(), ex.fencingToken());
            assertEquals(hx.key(), ex.holderKey());
            assertTrue(ex.waiterKey().startsWith(base + "/x/"), ex.waiterKey());
            assertTrue(ex.waiterRevision() > hy.fencingToken());
            assertEquals("java", ex.holder().language().orElseThrow());
            assertEquals((int) ProcessHandle.current().pid(), ex.holder().pid().getAsInt());
            assertEquals(ex.holder().host().orElseThrow() + ":" + ProcessHandle.current().pid(),
                    ex.holder().owner().orElseThrow());
            assertEquals(hy.fencingToken(), by.get(base + "/y").fencingToken());
            String line = d.cycles().get(0).toString();
            assertTrue(line.contains("waits for \"" + base + "/x\" held by ")
                    && line.contains("(java, lease " + Long.toHexString(hx.leaseId()) + ")"), line);
            // A prefix with one of the two names sees no cycle.
            assertEquals(List.of(), a.deadlocks(base + "/x").cycles());
            hy.unlock();
            LockGuard gy = wa.get(10, TimeUnit.SECONDS);
            assertTrue(gy.fencingToken() > hy.fencingToken());
            assertEquals(List.of(), a.deadlocks(base + "/").cycles());
            gy.unlock();
            hx.unlock();
            wb.get(10, TimeUnit.SECONDS).unlock();
        }
    }

    @Test
    void detectDeadlockFailsTheWaitThatClosesTheCycle() throws Exception {
        try (EtcdLockClient a = client(); EtcdLockClient b = client()) {
            String base = uniqueName("dd");
            LockGuard hx = a.acquire(base + "/x");
            LockGuard hy = b.acquire(base + "/y");
            CompletableFuture<LockGuard> wa = a.newLock(base + "/y", DETECT).acquireAsync(LONG);
            waitsQueued(a, base + "/", 1);
            long t0 = System.nanoTime();
            DeadlockException e = assertThrows(DeadlockException.class, () -> b.newLock(base + "/x", DETECT).acquire(LONG));
            double ms = (System.nanoTime() - t0) / 1e6;
            assertEquals(ErrorCode.DEADLOCK, e.code());
            assertEquals(12, e.code().value());
            assertFalse(e.isRetryable());
            assertTrue(e.getMessage().contains("waits for \"" + base + "/x\"")
                    && e.getMessage().contains("waits for \"" + base + "/y\""), e.getMessage());
            assertTrue(ms < 2000, "Deadlock came " + ms + " ms after the wait began");
            System.out.printf("detectDeadlock: DeadlockException %.1f ms after the closing wait began%n", ms);
            Deadlocks d = a.deadlocks(base + "/");
            assertEquals(1, d.waits());
            assertEquals(List.of(), d.cycles());
            hy.unlock();
            wa.get(10, TimeUnit.SECONDS).unlock();
            hx.unlock();
        }
    }

    @Test
    void detectDeadlockIsAnOptionLikeTheOthers() {
        AcquireOptions o = AcquireOptions.builder().metadata("k", "v").detectDeadlock().build();
        assertTrue(o.detectDeadlock());
        assertTrue(o.toBuilder().build().detectDeadlock());
        assertFalse(o.toBuilder().detectDeadlock(false).build().detectDeadlock());
        assertFalse(AcquireOptions.NONE.detectDeadlock());
        assertTrue(o.toString().contains("detectDeadlock=true"), o.toString());
        assertEquals(DeadlockException.class, EtcdLockException.of(ErrorCode.DEADLOCK, null, "m").getClass());
        assertEquals(ErrorCode.DEADLOCK, ErrorCode.of(12));
    }

    @Test
    void historyListsEveryHoldAndWait() throws Exception {
        try (EtcdLockClient a = client(); EtcdLockClient b = client()) {
            String name = uniqueName("hist");
            LockGuard h1 = a.acquire(name);
            CompletableFuture<LockGuard> w = b.acquireAsync(name, LONG);
            awaitKeys(name, 2, Duration.ofSeconds(10));
            assertThrows(LockTimeoutException.class, () -> a.newLock(name).acquire(Duration.ofMillis(100)));
            h1.unlock();
            LockGuard h2 = w.get(10, TimeUnit.SECONDS);
            LockHistory live = a.history(name, null);
            assertEquals(name, live.name());
            assertTrue(live.fromRevision() <= h1.fencingToken());
            assertTrue(live.revision() > h2.fencingToken());
            assertFalse(live.read().isAfter(Instant.now()));
            assertEquals(List.of(LockHistory.End.RELEASED, LockHistory.End.HOLDING, LockHistory.End.ABANDONED),
                    live.entries().stream().map(LockHistory.Entry::ended).collect(Collectors.toList()));
            LockHistory.Entry e1 = live.entries().get(0);
            LockHistory.Entry e2 = live.entries().get(1);
            LockHistory.Entry e3 = live.entries().get(2);
            assertEquals(h1.fencingToken(), e1.fencingToken());
            assertEquals(h1.leaseId(), e1.leaseId());
            assertEquals(h1.key(), e1.key());
            assertEquals(LockStatus.Kind.EXCLUSIVE, e1.kind());
            assertEquals(1, e1.permits());
            assertEquals("java", e1.language().orElseThrow());
            assertEquals(h1.fencingToken(), e1.grantedRevision().getAsLong());
            assertTrue(e1.held().isPresent() && !e1.endedAt().orElseThrow().isBefore(e1.granted().orElseThrow()));
            assertEquals(h2.fencingToken(), e2.fencingToken());
            assertEquals(e1.endedRevision().getAsLong(), e2.grantedRevision().getAsLong());
            assertTrue(e2.endedRevision().isEmpty() && e2.endedAt().isEmpty());
            assertFalse(e2.waited().isNegative());
            assertTrue(e3.grantedRevision().isEmpty() && e3.held().isEmpty());
            assertEquals(h1.leaseId(), e3.leaseId());
            h2.unlock();
            assertEquals(List.of(LockHistory.End.RELEASED, LockHistory.End.RELEASED, LockHistory.End.ABANDONED),
                    b.history(name, null).entries().stream().map(LockHistory.Entry::ended).collect(Collectors.toList()));
            // `since`: an empty window leaves every key out; all of them fit a minute.
            assertEquals(List.of(), a.history(name, Duration.ZERO).entries());
            assertEquals(3, a.history(name, Duration.ofMinutes(1)).entries().size());
            assertEquals(List.of(), a.history(uniqueName("never"), null).entries());
        }
    }

    @Test
    void recordsDecodeByTheOneDecoderAndAcceptNewFields() {
        String party = "{\"lease_id\":\"9223372036854775807\",\"owner\":null,\"host\":null,\"pid\":null,"
                + "\"language\":null,\"newer\":1}";
        Deadlocks d = Deadlocks.of("{\"prefix\":\"p/\",\"revision\":\"12\",\"clients\":2,\"waits\":2,\"later\":[],"
                + "\"cycles\":[{\"edges\":[{\"waiter\":" + party + ",\"name\":\"p/x\",\"waiter_key\":\"p/x/1\","
                + "\"holder\":" + party + ",\"holder_key\":\"p/x/2\",\"fencing_token\":\"7\",\"waiter_revision\":\"9\"}]}]}");
        Deadlocks.WaitEdge e = d.cycles().get(0).edges().get(0);
        assertEquals(Long.MAX_VALUE, e.waiter().leaseId());
        assertEquals(7, e.fencingToken());
        assertEquals(9, e.waiterRevision());
        assertEquals(12, d.revision());
        assertEquals("lease 7fffffffffffffff waits for \"p/x\" held by lease 7fffffffffffffff", d.cycles().get(0).toString());
        LockHistory h = LockHistory.of("{\"name\":\"n\",\"revision\":\"20\",\"from_revision\":\"1\",\"read_ms\":1000,"
                + "\"entries\":[{\"key\":\"n/1\",\"kind\":\"permit\",\"permits\":3,\"lease_id\":\"5\",\"fencing_token\":\"4\","
                + "\"owner\":null,\"host\":null,\"pid\":null,\"language\":null,\"queued_ms\":500,\"granted_revision\":4,"
                + "\"granted_ms\":500,\"ended_revision\":null,\"ended_ms\":null,\"ended\":\"lease_ended\",\"wait_ms\":0,"
                + "\"hold_ms\":null,\"newer\":true}]}");
        LockHistory.Entry x = h.entries().get(0);
        assertEquals(LockHistory.End.LEASE_ENDED, x.ended());
        assertEquals(LockStatus.Kind.PERMIT, x.kind());
        assertEquals(3, x.permits());
        assertEquals(4, x.grantedRevision().getAsLong());
        assertEquals(Instant.ofEpochMilli(500), x.queued());
        assertTrue(x.endedRevision().isEmpty() && x.held().isEmpty());
        assertEquals(Instant.ofEpochMilli(1000), h.read());
        assertThrows(InternalException.class, () -> LockHistory.of("{\"name\":\"n\"}"));
    }

    @Test
    void historyAndDeadlocksRefuseBadInput() {
        try (EtcdLockClient a = client()) {
            assertThrows(InvalidArgumentException.class, () -> a.history("", null));
            assertThrows(InvalidArgumentException.class, () -> a.history(null, null));
            assertThrows(InvalidArgumentException.class, () -> a.history("n", Duration.ofMillis(-1)));
            assertThrows(NullPointerException.class, () -> a.deadlocks(null));
        }
    }
}
