package io.etcdlock.reactor;

import static io.etcdlock.TestSupport.awaitKeys;
import static io.etcdlock.TestSupport.keysUnder;
import static io.etcdlock.TestSupport.uniqueName;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import io.etcdlock.EtcdExtension;
import io.etcdlock.EtcdLockClient;
import io.etcdlock.InvalidArgumentException;
import io.etcdlock.Leader;
import io.etcdlock.LockGuard;
import io.etcdlock.LockTimeoutException;
import io.etcdlock.TestSupport;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import reactor.test.StepVerifier;

/**
 * The Reactor API against real etcd: exclusion by withLock (exact counts), cancel during a wait
 * (no key left), release on complete, error and cancel, typed errors, observe, and leadership
 * whose cancel resigns so that another candidate is elected.
 */
@ExtendWith(EtcdExtension.class)
class ReactiveEtcdLockTest {
    /** Bounds on waiting for etcd events: generous, as CI runs on 2 loaded cores. */
    static final Duration MAX = Duration.ofSeconds(30);

    static EtcdLockClient a;
    static EtcdLockClient b;
    static ReactiveEtcdLock ra;
    static ReactiveEtcdLock rb;

    @BeforeAll
    static void clients() {
        a = TestSupport.client();
        b = TestSupport.client();
        ra = ReactiveEtcdLock.of(a);
        rb = ReactiveEtcdLock.of(b);
    }

    @AfterAll
    static void close() {
        a.close();
        b.close();
    }

    @Test
    void lockDeliversAGuardOffTheRuntimeThreadAndTryLockSeesItHeld() throws Exception {
        String name = uniqueName("rx-lock");
        LockGuard g = ra.lock(name, MAX).block(MAX);
        assertTrue(g.isHeld());
        // A blocking guard call works in the subscriber (delivered on boundedElastic).
        StepVerifier.create(ra.lock(uniqueName("rx-put"), MAX).map(h -> {
            try (h) {
                h.put(name + "-data", "v");
                return h.get(name + "-data");
            }
        })).expectNext("v").expectComplete().verify(MAX);
        StepVerifier.create(rb.tryLock(name)).expectNext(Optional.empty()).expectComplete().verify(MAX);
        assertEquals(1, keysUnder(name));
        g.close();
        StepVerifier.create(rb.tryLock(name).map(o -> {
            o.get().close();
            return o.isPresent();
        })).expectNext(true).expectComplete().verify(MAX);
        assertEquals(0, keysUnder(name));
    }

    @Test
    void withLockExcludesASecondSubscriber() throws Exception {
        String name = uniqueName("rx-with");
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger maxInside = new AtomicInteger();
        List<String> order = Collections.synchronizedList(new ArrayList<>());
        Sinks.One<Integer> releaseFirst = Sinks.one();

        Mono<String> first = ra.withLock(name, MAX, g -> {
            maxInside.accumulateAndGet(inside.incrementAndGet(), Math::max);
            order.add("first in");
            return releaseFirst.asMono().map(x -> {
                order.add("first out");
                inside.decrementAndGet();
                return "first";
            });
        });
        Mono<String> second = rb.withLock(name, MAX, g -> Mono.fromCallable(() -> {
            maxInside.accumulateAndGet(inside.incrementAndGet(), Math::max);
            order.add("second in");
            inside.decrementAndGet();
            return "second";
        }));

        BlockingQueue<String> results = new LinkedBlockingQueue<>();
        first.subscribe(results::add);
        awaitKeys(name, 1, MAX);
        second.subscribe(results::add);
        awaitKeys(name, 2, MAX); // the second waits behind the first
        assertEquals(List.of("first in"), order);
        releaseFirst.tryEmitValue(1);
        // Mono.usingWhen delivers a body's value after its release, on the release's thread:
        // the second can acquire, run and deliver before the first's value arrives. Which
        // result arrives first is not the lock's to decide; the order inside the lock is.
        Set<String> got = new HashSet<>();
        got.add(results.poll(MAX.toSeconds(), TimeUnit.SECONDS));
        got.add(results.poll(MAX.toSeconds(), TimeUnit.SECONDS));
        assertEquals(Set.of("first", "second"), got);
        assertEquals(List.of("first in", "first out", "second in"), order);
        assertEquals(1, maxInside.get());
        awaitKeys(name, 0, MAX);
    }

    @Test
    void cancelDuringAWaitLeavesNoKey() throws Exception {
        String name = uniqueName("rx-cancel");
        LockGuard holder = a.newLock(name).acquire(MAX);
        AtomicInteger delivered = new AtomicInteger();
        Disposable waiting = rb.lock(name).subscribe(g -> delivered.incrementAndGet());
        awaitKeys(name, 2, MAX);
        waiting.dispose();
        awaitKeys(name, 1, MAX); // the waiter key is deleted, the holder's stays
        holder.close();
        awaitKeys(name, 0, MAX);
        assertEquals(0, delivered.get());
        // The next subscriber takes the lock at once: no ghost waiter is ahead of it.
        StepVerifier.create(rb.tryLock(name).map(o -> {
            o.ifPresent(LockGuard::close);
            return o.isPresent();
        })).expectNext(true).expectComplete().verify(MAX);
    }

    @Test
    void aGuardThatArrivesAfterTheCancelIsReleased() throws Exception {
        // The holder's release and the waiter's cancel race: whichever wins, no hold or
        // waiter key is left behind and the next try takes the lock.
        String name = uniqueName("rx-race");
        for (int i = 0; i < 20; i++) {
            LockGuard holder = a.newLock(name).acquire(MAX);
            BlockingQueue<LockGuard> delivered = new LinkedBlockingQueue<>();
            Disposable waiting = rb.lock(name).subscribe(delivered::add);
            awaitKeys(name, 2, MAX);
            Thread releaser = new Thread(holder::close);
            releaser.start();
            waiting.dispose();
            releaser.join();
            LockGuard won = delivered.poll();
            if (won != null) {
                won.close(); // delivered before the cancel: the subscriber's to release
            }
            awaitKeys(name, 0, MAX);
        }
        StepVerifier.create(ra.tryLock(name).map(o -> {
            o.ifPresent(LockGuard::close);
            return o.isPresent();
        })).expectNext(true).expectComplete().verify(MAX);
    }

    /**
     * The race above, made certain: the lock is taken while the scheduler has not yet run the
     * delivery, and the subscription is cancelled before it does. The guard is nobody's then
     * and must be released (a guard parked in an operator's queue when the cancel came was
     * dropped without a release, leaving the key until the GC ran the guard's cleaner).
     */
    @Test
    void aGuardAcquiredButNotYetDeliveredWhenCancelledIsReleased() throws Exception {
        String name = uniqueName("rx-parked");
        BlockingQueue<Runnable> tasks = new LinkedBlockingQueue<>();
        Scheduler parked = Schedulers.fromExecutor(tasks::add);
        try {
            BlockingQueue<LockGuard> delivered = new LinkedBlockingQueue<>();
            Disposable waiting = ReactiveEtcdLock.of(a, parked).lock(name, MAX).subscribe(delivered::add);
            Runnable delivery = tasks.poll(MAX.toSeconds(), TimeUnit.SECONDS);
            assertNotNull(delivery, "the acquired guard waits for the scheduler");
            assertEquals(1, keysUnder(name));
            waiting.dispose();
            delivery.run();
            for (Runnable t; (t = tasks.poll()) != null; ) {
                t.run();
            }
            assertEquals(0, delivered.size(), "cancelled before the delivery: nothing is delivered");
            // Released by the delivery task itself (a close on the scheduler), not later by
            // the garbage collector: no wait.
            assertEquals(0, keysUnder(name));
        } finally {
            parked.dispose();
        }
    }

    @Test
    void withLockReleasesOnErrorAndOnCancel() throws Exception {
        String name = uniqueName("rx-release");
        StepVerifier.create(ra.withLock(name, MAX, g -> Mono.error(new IllegalStateException("body failed"))))
                .expectErrorMessage("body failed").verify(MAX);
        awaitKeys(name, 0, MAX);

        Sinks.Empty<Void> entered = Sinks.empty();
        Disposable running = ra.withLock(name, MAX, g -> {
            entered.tryEmitEmpty();
            return Mono.never();
        }).subscribe();
        StepVerifier.create(entered.asMono()).expectComplete().verify(MAX);
        assertEquals(1, keysUnder(name));
        running.dispose();
        awaitKeys(name, 0, MAX);

        StepVerifier.create(ra.withLockMany(name, MAX, g -> Flux.just(1, 2, 3)))
                .expectNext(1, 2, 3).expectComplete().verify(MAX);
        awaitKeys(name, 0, MAX);
    }

    @Test
    void errorsAreTheBindingsExceptionTypes() throws Exception {
        String name = uniqueName("rx-errors");
        StepVerifier.create(ra.lock("")).expectError(InvalidArgumentException.class).verify(MAX);
        StepVerifier.create(ra.lock(name, Duration.ofSeconds(-1))).expectError(InvalidArgumentException.class)
                .verify(MAX);
        StepVerifier.create(ra.withLock("", g -> Mono.just(1))).expectError(InvalidArgumentException.class)
                .verify(MAX);
        try (LockGuard held = a.newLock(name).acquire(MAX)) {
            StepVerifier.create(rb.lock(name, Duration.ofMillis(200))).expectError(LockTimeoutException.class)
                    .verify(MAX);
            AtomicInteger ran = new AtomicInteger();
            StepVerifier.create(rb.withLock(name, Duration.ofMillis(200), g -> Mono.fromCallable(ran::incrementAndGet)))
                    .expectError(LockTimeoutException.class).verify(MAX);
            assertEquals(0, ran.get());
            assertEquals(1, keysUnder(name));
        }
    }

    @Test
    void observeSeesNobodyThenTheLeader() throws Exception {
        String name = uniqueName("rx-observe");
        BlockingQueue<Optional<Leader>> seen = new LinkedBlockingQueue<>();
        Disposable obs = rb.observe(name).subscribe(seen::add);
        try {
            assertEquals(Optional.empty(), seen.poll(MAX.toSeconds(), TimeUnit.SECONDS));
            try (var l = a.newElection(name).campaign("node-a")) {
                Optional<Leader> now = seen.poll(MAX.toSeconds(), TimeUnit.SECONDS);
                assertEquals("node-a", now.orElseThrow().valueAsString());
                assertEquals(l.fencingToken(), now.get().revision());
            }
            assertEquals(Optional.empty(), seen.poll(MAX.toSeconds(), TimeUnit.SECONDS));
        } finally {
            obs.dispose();
        }
    }

    @Test
    void leadershipCancelResignsAndAnotherCandidateIsElected() throws Exception {
        String name = uniqueName("rx-leader");
        BlockingQueue<LeaderEvent> evA = new LinkedBlockingQueue<>();
        BlockingQueue<LeaderEvent> evB = new LinkedBlockingQueue<>();
        Disposable la = ra.leadership(name, "a").subscribe(evA::add);
        LeaderEvent electedA = next(evA, LeaderEvent.Kind.ELECTED);
        long tokenA = electedA.term().orElseThrow().fencingToken();

        Disposable lb = rb.leadership(name, "b").subscribe(evB::add);
        try {
            // B sees A lead, and waits.
            LeaderEvent seenByB = next(evB, LeaderEvent.Kind.LEADER_CHANGED);
            assertEquals("a", seenByB.leader().orElseThrow().valueAsString());
            assertEquals(2, keysUnder(name));

            la.dispose();
            assertTrue(electedA.term().get().cancelled().get(MAX.toSeconds(), TimeUnit.SECONDS) == null);
            LeaderEvent electedB = next(evB, LeaderEvent.Kind.ELECTED);
            assertTrue(electedB.term().orElseThrow().fencingToken() > tokenA);
            assertEquals("b", TestSupport.rawGet(electedB.term().get().key()));
            // A's loop resigned: only B's key remains.
            awaitKeys(name, 1, MAX);
        } finally {
            lb.dispose();
        }
        awaitKeys(name, 0, MAX);
    }

    /** The next event of {@code kind}, skipping others (bounded). */
    static LeaderEvent next(BlockingQueue<LeaderEvent> q, LeaderEvent.Kind kind) throws InterruptedException {
        long deadline = System.nanoTime() + MAX.toNanos();
        while (true) {
            LeaderEvent e = q.poll(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            if (e == null) {
                throw new AssertionError("no " + kind + " event within " + MAX);
            }
            if (e.kind() == kind) {
                return e;
            }
        }
    }
}
