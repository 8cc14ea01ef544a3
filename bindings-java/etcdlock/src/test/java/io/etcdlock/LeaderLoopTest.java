package io.etcdlock;

import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The leader loop against real etcd: three candidates (TTL 3 s), one of them behind a harness
 * proxy; a partition cancels its task within the TTL before any other task starts; closing the
 * leader's loop hands over in under 1 s; never two tasks at once; re-campaign after the task
 * returns; {@code again(false)}; events in order.
 */
@ExtendWith(EtcdExtension.class)
class LeaderLoopTest {
    static final Duration TTL = Duration.ofSeconds(3);

    /** What one task did: who, when it started and ended, its fencing token. */
    static final class Run {
        final String who;
        final long token;
        final long startNs;
        volatile long endNs;

        Run(String who, long token, long startNs) {
            this.who = who;
            this.token = token;
            this.startNs = startNs;
        }
    }

    /** Tasks of all candidates: a shared running counter, asserted exactly <= 1 throughout. */
    static final class Tasks {
        final AtomicInteger running = new AtomicInteger();
        final AtomicInteger maxRunning = new AtomicInteger();
        final List<Run> runs = Collections.synchronizedList(new ArrayList<>());
        final BlockingQueue<Run> started = new LinkedBlockingQueue<>();
        final BlockingQueue<Run> ended = new LinkedBlockingQueue<>();

        /** A task that leads until its term is over (waiting on the term, not sleeping). */
        LeaderTask untilCancelled(String who) {
            return term -> {
                Run r = begin(who, term);
                try {
                    term.cancelled().get();
                } catch (InterruptedException e) {
                    // the loop interrupts the task when the term is over
                } finally {
                    finish(r);
                }
            };
        }

        /** A task that returns at once. */
        LeaderTask returning(String who) {
            return term -> finish(begin(who, term));
        }

        Run begin(String who, LeaderTerm term) {
            int n = running.incrementAndGet();
            maxRunning.accumulateAndGet(n, Math::max);
            Run r = new Run(who, term.fencingToken(), System.nanoTime());
            // Each task writes through its leadership's guarded put and reads it back.
            term.put("leader-loop-test/owner", who);
            assertEquals(who, term.get("leader-loop-test/owner"));
            runs.add(r);
            started.add(r);
            return r;
        }

        void finish(Run r) {
            r.endNs = System.nanoTime();
            running.decrementAndGet();
            ended.add(r);
        }
    }

    /** A listener recording every event as text, in order. */
    static final class Events implements LeaderListener {
        final BlockingQueue<String> all = new LinkedBlockingQueue<>();
        final List<String> seen = Collections.synchronizedList(new ArrayList<>());

        private void add(String e) {
            seen.add(e);
            all.add(e);
        }

        @Override
        public void elected(LeaderTerm term) {
            add("elected");
        }

        @Override
        public void lost(LossReason reason) {
            add("lost " + reason);
        }

        @Override
        public void resigned() {
            add("resigned");
        }

        @Override
        public void leaderChanged(Optional<Leader> leader) {
            add("leader " + leader.map(Leader::valueAsString).orElse("-"));
        }

        @Override
        public void campaignFailed(EtcdLockException error) {
            add("campaignFailed " + error.code());
        }

        @Override
        public void stopped() {
            add("stopped");
        }

        /** Wait for event {@code e} (skipping others); fails after 10 s. */
        void await(String e) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (true) {
                String next = all.poll(deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
                assertNotNull(next, "event '" + e + "' within 10 s; seen " + seen);
                if (next.equals(e)) {
                    return;
                }
            }
        }

        /** The events other than leader changes, in order. */
        List<String> terms() {
            List<String> out = new ArrayList<>();
            synchronized (seen) {
                for (String s : seen) {
                    if (!s.startsWith("leader ")) {
                        out.add(s);
                    }
                }
            }
            return out;
        }

        /** The leader changes, in order. */
        List<String> leaders() {
            List<String> out = new ArrayList<>();
            synchronized (seen) {
                for (String s : seen) {
                    if (s.startsWith("leader ")) {
                        out.add(s);
                    }
                }
            }
            return out;
        }
    }

    static EtcdLockClient client(String endpoint) {
        return EtcdLockClient.builder().endpoints(endpoint).ttl(TTL).requestTimeout(Duration.ofSeconds(1)).build();
    }

    static Run poll(BlockingQueue<Run> q, String what) throws InterruptedException {
        Run r = q.poll(15, TimeUnit.SECONDS);
        assertNotNull(r, what + " within 15 s");
        return r;
    }

    @Test
    void partitionCancelsTheLeaderWithinTheTtlThenAnotherLeadsAndCloseHandsOverFast() throws Exception {
        String name = "leader-loop-partition";
        Tasks tasks = new Tasks();
        Events ea = new Events();
        Events eb = new Events();
        Events ec = new Events();
        try (EtcdExtension.Etcd etcd = EtcdExtension.Etcd.start()) {
            EtcdExtension.Etcd.Proxy proxy = etcd.proxy();
            String direct = etcd.endpoints.get(0);
            try (EtcdLockClient ca = client(proxy.endpoint);
                 EtcdLockClient cb = client(direct);
                 EtcdLockClient cc = client(direct)) {
                EtcdLeaderLoop la = ca.newLeaderLoop(name).value("A").listener(ea).start(tasks.untilCancelled("A"));
                Run a = poll(tasks.started, "A's task");
                assertEquals("A", a.who);
                EtcdLeaderLoop lb = cb.newLeaderLoop(name).value("B").listener(eb).start(tasks.untilCancelled("B"));
                EtcdLeaderLoop lc = cc.newLeaderLoop(name).value("C").listener(ec).start(tasks.untilCancelled("C"));
                eb.await("leader A");
                ec.await("leader A");

                long pause = System.nanoTime();
                etcd.proxyPause(proxy);
                Run second;
                try {
                    Run endA = poll(tasks.ended, "A's task cancelled");
                    assertSame(a, endA);
                    double cancelS = (endA.endNs - pause) / 1e9;
                    second = poll(tasks.started, "the next task");
                    double nextS = (second.startNs - pause) / 1e9;
                    System.out.printf("leader loop: partition -> A's task cancelled after %.3f s, next task (%s) "
                            + "started after %.3f s (TTL %d s)%n", cancelS, second.who, nextS, TTL.getSeconds());
                    assertTrue(cancelS < TTL.getSeconds(), "A's task cancelled within the TTL: " + cancelS + " s");
                    assertTrue(second.startNs > endA.endNs, "the next task starts only after A's ended");
                    assertNotEquals("A", second.who);
                    assertTrue(second.token > a.token, "fencing tokens increase");
                    ea.await("lost " + LossReason.CONNECTION_LOST);
                } finally {
                    etcd.proxyResume(proxy);
                }
                assertEquals(List.of("elected", "lost CONNECTION_LOST"), ea.terms().subList(0, 2));

                // Closing the current leader's loop hands over to the next task in under 1 s.
                EtcdLeaderLoop leaderLoop = second.who.equals("B") ? lb : lc;
                Events leaderEvents = second.who.equals("B") ? eb : ec;
                long close = System.nanoTime();
                leaderLoop.close();
                Run third = poll(tasks.started, "the task after the close");
                double handoverS = (third.startNs - close) / 1e9;
                System.out.printf("leader loop: close of %s's loop -> %s's task started after %.3f s%n", second.who,
                        third.who, handoverS);
                assertTrue(handoverS < 1.0, "handover under 1 s: " + handoverS + " s");
                assertNotEquals(second.who, third.who);
                assertTrue(third.token > second.token, "fencing tokens increase");
                assertTrue(third.startNs > second.endNs, "the next task starts only after the closed one ended");
                assertTrue(leaderLoop.stopped().isDone(), "close() returns once the loop has stopped");
                assertEquals(List.of("elected", "resigned", "stopped"), leaderEvents.terms());

                la.close();
                lb.close();
                lc.close();
                for (Events e : List.of(ea, eb, ec)) {
                    List<String> t = e.terms();
                    assertEquals("stopped", t.get(t.size() - 1), "events end with stopped: " + t);
                }
                // Whoever watched saw the leaders in order: A, then the second, then the third.
                List<String> seenByThird = (third.who.equals("B") ? eb : ec).leaders();
                assertEquals("leader A", seenByThird.get(0));
                assertTrue(seenByThird.indexOf("leader " + second.who) > 0, "saw " + seenByThird);
                assertTrue(seenByThird.indexOf("leader " + third.who) > seenByThird.indexOf("leader " + second.who),
                        "saw " + seenByThird);
            }
        }
        assertEquals(0, tasks.running.get());
        assertEquals(1, tasks.maxRunning.get(), "never two tasks at once");
    }

    @Test
    void aTaskThatReturnsResignsAndTheLoopCampaignsAgain() throws Exception {
        Tasks tasks = new Tasks();
        Events ev = new Events();
        try (EtcdLockClient c = client(EtcdExtension.endpoints().get(0));
             EtcdLeaderLoop loop = c.newLeaderLoop("leader-loop-again").listener(ev).start(tasks.returning("X"))) {
            long prev = 0;
            for (int i = 0; i < 3; i++) {
                Run r = poll(tasks.started, "term " + i);
                assertTrue(r.token > prev, "fencing tokens strictly increase: " + r.token + " after " + prev);
                prev = r.token;
            }
            ev.await("resigned");
            ev.await("resigned");
        }
        List<String> t = ev.terms();
        assertEquals(List.of("elected", "resigned", "elected", "resigned"), t.subList(0, 4));
        assertEquals("stopped", t.get(t.size() - 1));
        assertEquals(1, tasks.maxRunning.get());
    }

    @Test
    void againFalseRunsOneTerm() throws Exception {
        Tasks tasks = new Tasks();
        Events ev = new Events();
        try (EtcdLockClient c = client(EtcdExtension.endpoints().get(0))) {
            EtcdLeaderLoop loop = c.newLeaderLoop("leader-loop-once").again(false).listener(ev)
                    .start(tasks.returning("X"));
            loop.stopped().get(15, TimeUnit.SECONDS);
            assertEquals(1, tasks.runs.size());
            assertEquals(List.of("elected", "resigned", "stopped"), ev.terms());
            loop.close();
            assertFalse(c.leader("leader-loop-once").isPresent(), "resigned: nobody leads");
        }
    }

    @Test
    void closeWhileCampaigningStopsWithoutATerm() throws Exception {
        Tasks tasks = new Tasks();
        Events ev = new Events();
        try (EtcdLockClient other = client(EtcdExtension.endpoints().get(0));
             Leadership holder = other.newElection("leader-loop-queued").campaign("other");
             EtcdLockClient c = client(EtcdExtension.endpoints().get(0))) {
            EtcdLeaderLoop loop = c.newLeaderLoop("leader-loop-queued").listener(ev).start(tasks.returning("X"));
            ev.await("leader other");
            loop.close();
            assertTrue(loop.stopped().isDone());
            assertEquals(List.of("stopped"), ev.terms());
            assertEquals(0, tasks.runs.size());
        }
    }

    @Test
    void anEndedTermsWritesAndAClosedClientAreTypedErrors() throws Exception {
        java.util.concurrent.CompletableFuture<LeaderTerm> kept = new java.util.concurrent.CompletableFuture<>();
        EtcdLockClient c = client(EtcdExtension.endpoints().get(0));
        try (EtcdLeaderLoop loop = c.newLeaderLoop("leader-loop-ended").again(false).start(kept::complete)) {
            LeaderTerm t = kept.get(15, TimeUnit.SECONDS);
            loop.stopped().get(15, TimeUnit.SECONDS);
            assertTrue(t.isCancelled());
            assertTrue(t.cancelled().isDone());
            assertFalse(t.leadership().isLeader());
            EtcdLockException e = assertThrows(EtcdLockException.class, () -> t.put("leader-loop-ended-data/x", "late"));
            assertTrue(e instanceof NotHeldException || e instanceof LockLostException, "typed: " + e);
        }
        c.close();
        assertThrows(ClosedException.class, () -> c.newLeaderLoop("leader-loop-ended").start(t -> {}));
    }

    @Test
    void badInputIsATypedError() throws Exception {
        try (EtcdLockClient c = client(EtcdExtension.endpoints().get(0))) {
            assertThrows(InvalidArgumentException.class, () -> c.newLeaderLoop(""));
            assertThrows(InvalidArgumentException.class, () -> c.newLeaderLoop("x").value((byte[]) null));
            assertThrows(InvalidArgumentException.class, () -> c.newLeaderLoop("x").retry(Duration.ofMillis(-1)));
            assertThrows(InvalidArgumentException.class, () -> c.newLeaderLoop("x").start(null));
            assertThrows(InvalidArgumentException.class, () -> c.newLeaderLoop("x").listener(null));
            assertThrows(InvalidArgumentException.class,
                    () -> c.newLeaderLoop("x").options(AcquireOptions.builder().leaseTime(Duration.ofMillis(-5))
                            .build()).start(t -> {}));
        }
    }
}
