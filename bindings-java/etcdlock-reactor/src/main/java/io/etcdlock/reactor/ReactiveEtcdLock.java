package io.etcdlock.reactor;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

import org.reactivestreams.Publisher;

import io.etcdlock.AcquireOptions;
import io.etcdlock.EtcdLeaderLoop;
import io.etcdlock.EtcdLockClient;
import io.etcdlock.EtcdLockException;
import io.etcdlock.InvalidArgumentException;
import io.etcdlock.Leader;
import io.etcdlock.LeaderListener;
import io.etcdlock.LeaderObservation;
import io.etcdlock.LeaderTerm;
import io.etcdlock.LockGuard;
import io.etcdlock.LockTimeoutException;
import io.etcdlock.LossReason;
import reactor.core.publisher.Flux;
import reactor.core.publisher.FluxSink;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * Project Reactor API over an {@link EtcdLockClient}: locks as {@link Mono}, a lock held for the
 * lifetime of a {@link Mono} or {@link Flux} ({@link #withLock}), leader observation and
 * leadership as {@link Flux}. Every publisher is cold: nothing reaches etcd before subscription,
 * and each subscription is its own acquisition, observation or leader loop.
 *
 * <p>Errors are the binding's {@link EtcdLockException} subclasses ({@link LockTimeoutException},
 * {@link InvalidArgumentException}, ...), never wrapped. Guards and observed leaders are
 * delivered on the {@link Scheduler} given at construction ({@link Schedulers#boundedElastic()}
 * by default), never on an etcdlock runtime thread, so blocking guard calls ({@link
 * LockGuard#put}, {@link LockGuard#get(String)}) work in the subscriber; releases run on it too.
 *
 * <pre>{@code
 * ReactiveEtcdLock locks = ReactiveEtcdLock.of(client);
 * Mono<Integer> stock = locks.withLock("stock", Duration.ofSeconds(5),
 *         guard -> Mono.fromCallable(() -> decrement(guard)));
 * }</pre>
 */
public final class ReactiveEtcdLock {
    private final EtcdLockClient client;
    private final Scheduler scheduler;

    private ReactiveEtcdLock(EtcdLockClient client, Scheduler scheduler) {
        this.client = Objects.requireNonNull(client, "client");
        this.scheduler = Objects.requireNonNull(scheduler, "scheduler");
    }

    /** Reactor calls on {@code client}, delivering and releasing on {@link Schedulers#boundedElastic()}. */
    public static ReactiveEtcdLock of(EtcdLockClient client) {
        return new ReactiveEtcdLock(client, Schedulers.boundedElastic());
    }

    /**
     * Reactor calls on {@code client}, delivering guards and leaders, and releasing guards, on
     * {@code scheduler} (it must allow the short blocking calls of a release).
     */
    public static ReactiveEtcdLock of(EtcdLockClient client, Scheduler scheduler) {
        return new ReactiveEtcdLock(client, scheduler);
    }

    /** The client these calls go through. */
    public EtcdLockClient client() {
        return client;
    }

    // ---- locks ------------------------------------------------------------------------------

    /** {@link #lock(String, Duration)} without a timeout: waits as long as it takes. */
    public Mono<LockGuard> lock(String name) {
        return lock(name, null, AcquireOptions.NONE);
    }

    /**
     * An independent hold of the lock {@code name} (as {@link io.etcdlock.EtcdLock#acquireAsync}):
     * the caller closes the guard. Cancelling the subscription while it waits abandons the wait:
     * the waiter key is deleted, and a guard that arrives after the cancel is released.
     *
     * @param timeout null waits as long as it takes; zero is one try; else the Mono fails with
     *     {@link LockTimeoutException} (no waiter key is left behind)
     */
    public Mono<LockGuard> lock(String name, Duration timeout) {
        return lock(name, timeout, AcquireOptions.NONE);
    }

    /** {@link #lock(String, Duration)} with acquisition options (lock-delay, lease time, metadata). */
    public Mono<LockGuard> lock(String name, Duration timeout, AcquireOptions options) {
        return Mono.<LockGuard>create(sink -> {
            CompletableFuture<LockGuard> f = client.newLock(name, options).acquireAsync(timeout);
            Handoff h = new Handoff(sink, f);
            sink.onCancel(h::cancelled);
            f.whenComplete(h::settled);
        }).doOnDiscard(LockGuard.class, ReactiveEtcdLock::release);
    }

    private static final int PENDING = 0;
    private static final int OFFERED = 1;
    private static final int CANCELLED = 2;

    /**
     * One subscription's acquisition on its way to the subscriber, so that every guard has
     * exactly one owner. The outcome is settled on the scheduler (never on an etcdlock runtime
     * thread) and handed to the sink there in one step: no operator queue holds the guard
     * between the two (a {@code publishOn} did, and a cancel that came while the guard waited in
     * it for the scheduler dropped the guard unreleased, its key left until the garbage
     * collector ran the guard's cleaner). PENDING, then OFFERED (the outcome went to the sink)
     * or CANCELLED (before that: a guard that arrives is released here). The sink calls
     * {@link #cancelled} only for a cancel that came before it delivered the guard, so a cancel
     * of an OFFERED guard means the subscriber never got it (the sink discarded it, or dropped
     * it in the race of its delivery with the cancel): it is released here as well (a second
     * close does nothing).
     */
    private final class Handoff {
        private final MonoSink<LockGuard> sink;
        private final CompletableFuture<LockGuard> acquisition;
        private final AtomicInteger state = new AtomicInteger(PENDING);
        /** The guard offered to the sink, set before the state says OFFERED. */
        private volatile LockGuard offered;

        Handoff(MonoSink<LockGuard> sink, CompletableFuture<LockGuard> acquisition) {
            this.sink = sink;
            this.acquisition = acquisition;
        }

        /** The acquisition's outcome ({@code g} or {@code e}), settled on the scheduler. */
        void settled(LockGuard g, Throwable e) {
            try {
                scheduler.schedule(() -> settle(g, e));
            } catch (RejectedExecutionException r) {
                // The scheduler was disposed: nobody can take the guard.
                if (g != null) {
                    release(g);
                }
                if (state.compareAndSet(PENDING, OFFERED)) {
                    sink.error(r);
                }
            }
        }

        private void settle(LockGuard g, Throwable e) {
            offered = g;
            if (!state.compareAndSet(PENDING, OFFERED)) {
                if (g != null) {
                    release(g); // cancelled before: nobody will use it
                }
            } else if (e != null) {
                sink.error(unwrap(e));
            } else {
                sink.success(g);
            }
        }

        void cancelled() {
            int was = state.getAndSet(CANCELLED);
            if (was == PENDING) {
                acquisition.cancel(true);
            } else if (was == OFFERED) {
                LockGuard g = offered;
                if (g != null) {
                    releaseOnScheduler(g);
                }
            }
        }
    }

    /** {@link #release} on the scheduler (a cancel may come on a thread that must not block). */
    private void releaseOnScheduler(LockGuard g) {
        try {
            scheduler.schedule(() -> release(g));
        } catch (RejectedExecutionException r) {
            release(g);
        }
    }

    /**
     * The lock {@code name} if it is free right now (one try that writes nothing when it is held
     * or waited for), else empty.
     */
    public Mono<Optional<LockGuard>> tryLock(String name) {
        return lock(name, Duration.ZERO).map(Optional::of)
                .onErrorResume(LockTimeoutException.class, e -> Mono.just(Optional.empty()));
    }

    /** {@link #withLock(String, Duration, Function)} without a timeout. */
    public <T> Mono<T> withLock(String name, Function<LockGuard, ? extends Mono<T>> body) {
        return withLock(name, null, body);
    }

    /**
     * Acquire {@code name} (as {@link #lock(String, Duration)}), run {@code body} with the guard,
     * and release the lock when the body's Mono completes, fails or is cancelled. The result is
     * the body's. Releasing a hold that was lost while the body ran fails a completed result
     * with {@link io.etcdlock.LockLostException} (the critical section may not have been
     * protected to its end); after the body's error or a cancel the loss is not reported.
     */
    public <T> Mono<T> withLock(String name, Duration timeout, Function<LockGuard, ? extends Mono<T>> body) {
        Objects.requireNonNull(body, "body");
        return Mono.usingWhen(lock(name, timeout), body, this::releaseChecked,
                (g, err) -> releaseQuietly(g), this::releaseQuietly);
    }

    /**
     * {@link #withLock(String, Duration, Function)} for a body of many values: the lock is held
     * from before the body's subscription until it completes, fails or is cancelled.
     */
    public <T> Flux<T> withLockMany(String name, Duration timeout,
            Function<LockGuard, ? extends Publisher<T>> body) {
        Objects.requireNonNull(body, "body");
        return Flux.usingWhen(lock(name, timeout), body, this::releaseChecked,
                (g, err) -> releaseQuietly(g), this::releaseQuietly);
    }

    private Mono<Void> releaseChecked(LockGuard g) {
        return Mono.<Void>fromRunnable(g::close).subscribeOn(scheduler);
    }

    private Mono<Void> releaseQuietly(LockGuard g) {
        return Mono.<Void>fromRunnable(() -> release(g)).subscribeOn(scheduler);
    }

    /** Release a guard nobody will use; a hold already lost has nothing to release. */
    static void release(LockGuard g) {
        try {
            g.close();
        } catch (EtcdLockException ignored) {
            // lost meanwhile: nothing left to release
        }
    }

    // ---- elections --------------------------------------------------------------------------

    /**
     * Follow the election {@code name}: the current leader first, then each change (a new
     * proclamation is a change), and {@link Optional#empty()} whenever nobody leads. Cancel to
     * stop. A subscriber that requests slower than leaders change gets the newest leader (the
     * ones in between are skipped). Fails with {@link io.etcdlock.ClosedException} when the
     * client is closed.
     */
    public Flux<Optional<Leader>> observe(String name) {
        return Flux.<Optional<Leader>>create(sink -> {
            LeaderObservation o = client.observe(name, sink::next);
            sink.onDispose(o::close);
            o.ended().whenComplete((v, e) -> {
                if (e != null) {
                    sink.error(unwrap(e));
                } else {
                    sink.complete();
                }
            });
        }, FluxSink.OverflowStrategy.LATEST).publishOn(scheduler);
    }

    /** {@link #leadership(String, byte[], AcquireOptions)} with a UTF-8 value and no options. */
    public Flux<LeaderEvent> leadership(String name, String value) {
        if (value == null) {
            return Flux.error(new InvalidArgumentException("value must not be null"));
        }
        return leadership(name, value.getBytes(StandardCharsets.UTF_8), AcquireOptions.NONE);
    }

    /**
     * Campaign for the election {@code name} in a leader loop ({@link
     * EtcdLockClient#newLeaderLoop}) for as long as the subscription lasts, proclaiming {@code
     * value}: each term is an {@link LeaderEvent.Kind#ELECTED} event and lasts until leadership
     * is lost ({@link LeaderEvent.Kind#LOST}, then the loop campaigns again) or the subscription
     * is cancelled. Cancelling stops the loop: the current term is cancelled ({@link
     * LeaderTerm#cancelled()} completes) and the loop resigns, without blocking the canceller.
     * Events arrive in order on the loop's own event thread; the Flux completes if the loop
     * stops by itself (its client closed).
     */
    public Flux<LeaderEvent> leadership(String name, byte[] value, AcquireOptions options) {
        return Flux.<LeaderEvent>create(sink -> {
            LeaderListener listener = new LeaderListener() {
                @Override
                public void elected(LeaderTerm term) {
                    sink.next(LeaderEvent.elected(term));
                }

                @Override
                public void renewalFailing() {
                    sink.next(LeaderEvent.of(LeaderEvent.Kind.RENEWAL_FAILING));
                }

                @Override
                public void renewalRecovered() {
                    sink.next(LeaderEvent.of(LeaderEvent.Kind.RENEWAL_RECOVERED));
                }

                @Override
                public void lost(LossReason reason) {
                    sink.next(LeaderEvent.lost(reason));
                }

                @Override
                public void resigned() {
                    sink.next(LeaderEvent.of(LeaderEvent.Kind.RESIGNED));
                }

                @Override
                public void leaderChanged(Optional<Leader> leader) {
                    sink.next(LeaderEvent.leaderChanged(leader));
                }

                @Override
                public void campaignFailed(EtcdLockException error) {
                    sink.next(LeaderEvent.campaignFailed(error));
                }

                @Override
                public void stopped() {
                    sink.complete();
                }
            };
            EtcdLeaderLoop loop = client.newLeaderLoop(name).value(value).options(options).listener(listener)
                    .start(ReactiveEtcdLock::leadUntilCancelled);
            sink.onDispose(() -> scheduler.schedule(loop::close));
        }, FluxSink.OverflowStrategy.BUFFER);
    }

    /** A term's task: lead until the term is over (lost, or the loop stopped). */
    static void leadUntilCancelled(LeaderTerm term) throws Exception {
        try {
            term.cancelled().get();
        } catch (InterruptedException e) {
            // the loop interrupts the task when the term is over
        }
    }

    /** The etcdlock exception behind a future's failure. */
    static Throwable unwrap(Throwable e) {
        while (e instanceof CompletionException && e.getCause() != null) {
            e = e.getCause();
        }
        return e;
    }
}
