package io.etcdlock.spring;

import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.function.ToDoubleFunction;

import io.etcdlock.ClosedException;
import io.etcdlock.EtcdLockClient;
import io.etcdlock.LossReason;
import io.etcdlock.Metrics;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.FunctionTimer;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Measurement;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Statistic;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.MeterBinder;

/**
 * Micrometer meters over the native core's metrics source ({@link EtcdLockClient#metrics()}),
 * read on every scrape:
 *
 * <ul>
 *   <li>{@code etcdlock.acquire} (function timer, tag {@code result} = acquired, timeout,
 *       would_block, cancelled, error): acquisition calls and the time their callers waited;
 *   <li>{@code etcdlock.waiting} (gauge): acquisition calls in progress;
 *   <li>{@code etcdlock.held} (long task timer): locks held now (statistic
 *       {@code active_tasks}) and how long they have been held, summed ({@code duration},
 *       seconds). Micrometer's {@code LongTaskTimer} is fed by start/stop calls; this one is a
 *       meter of type {@code LONG_TASK_TIMER} whose two statistics read the core's counters, so
 *       registries export it as they export a long task timer;
 *   <li>{@code etcdlock.hold} (function timer): holds that ended and their total time;
 *   <li>{@code etcdlock.lost} (function counter, tag {@code reason} = lease_expired,
 *       key_deleted, connection_lost, client_closed);
 *   <li>{@code etcdlock.keepalive.rtt} (gauge, seconds): the last keep-alive round trip;
 *   <li>{@code etcdlock.etcd.member.failures} (function counter; Prometheus
 *       {@code etcdlock_etcd_member_failures_total}, as the core's exposition names it): requests
 *       that failed on an etcd member, which is then avoided for a while.
 * </ul>
 *
 * Lock names are not tags by default: the core counts per client, so the meters stay
 * low-cardinality. With {@code lockNameTag} ({@code etcdlock.metrics.lock-name-tag=true})
 * {@code etcdlock.acquire} is instead a timer per lock name and result (tags {@code lock} and
 * {@code result}), recorded by an {@link EtcdLockClient.AcquisitionListener} as each
 * acquisition ends: one time series per lock name, so only for a bounded set of names.
 */
public class EtcdLockMeterBinder implements MeterBinder {
    private final EtcdLockClient client;
    private final boolean lockNameTag;

    public EtcdLockMeterBinder(EtcdLockClient client) {
        this(client, false);
    }

    /** With {@code lockNameTag}, {@code etcdlock.acquire} carries the lock name as the tag {@code lock}. */
    public EtcdLockMeterBinder(EtcdLockClient client, boolean lockNameTag) {
        this.client = client;
        this.lockNameTag = lockNameTag;
    }

    /** The snapshot now, or null once the client is closed (the meters then read NaN / stay). */
    private static Metrics snap(EtcdLockClient c) {
        try {
            return c.metrics();
        } catch (ClosedException e) {
            return null;
        }
    }

    private static ToDoubleFunction<EtcdLockClient> of(ToDoubleFunction<Metrics> f) {
        return c -> {
            Metrics m = snap(c);
            return m == null ? Double.NaN : f.applyAsDouble(m);
        };
    }

    private static double seconds(java.time.Duration d) {
        return d.toNanos() / 1e9;
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        if (lockNameTag) {
            client.setAcquisitionListener((name, result, waited) -> Timer.builder("etcdlock.acquire")
                    .tag("result", result.tag())
                    .tag("lock", name)
                    .description("Lock acquisition calls by lock and outcome, and the time their callers waited")
                    .register(registry)
                    .record(waited));
        }
        for (Metrics.Result r : lockNameTag ? new Metrics.Result[0] : Metrics.Result.values()) {
            FunctionTimer.builder("etcdlock.acquire", client,
                            c -> { Metrics m = snap(c); return m == null ? 0 : m.count(r); },
                            c -> { Metrics m = snap(c); return m == null ? 0 : m.waitTotal(r).toNanos(); },
                            TimeUnit.NANOSECONDS)
                    .tag("result", r.tag())
                    .description("Lock acquisition calls by outcome, and the time their callers waited")
                    .register(registry);
        }
        Gauge.builder("etcdlock.waiting", client, of(Metrics::waiting))
                .description("Lock acquisition calls in progress").register(registry);
        ToDoubleFunction<EtcdLockClient> held = of(Metrics::held);
        ToDoubleFunction<EtcdLockClient> heldFor = of(m -> seconds(m.heldDuration()));
        Meter.builder("etcdlock.held", Meter.Type.LONG_TASK_TIMER, List.of(
                        new Measurement(() -> held.applyAsDouble(client), Statistic.ACTIVE_TASKS),
                        new Measurement(() -> heldFor.applyAsDouble(client), Statistic.DURATION)))
                .baseUnit("seconds").description("Locks held now, and how long they have been held, summed").register(registry);
        FunctionTimer.builder("etcdlock.hold", client,
                        c -> { Metrics m = snap(c); return m == null ? 0 : m.holdsEnded(); },
                        c -> { Metrics m = snap(c); return m == null ? 0 : m.holdTotal().toNanos(); },
                        TimeUnit.NANOSECONDS)
                .description("Holds that ended (released or lost), and their total time").register(registry);
        for (LossReason reason : LossReason.values()) {
            FunctionCounter.builder("etcdlock.lost", client, of(m -> m.lost(reason)))
                    .tag("reason", reason.name().toLowerCase(Locale.ROOT))
                    .description("Holds lost, by reason").register(registry);
        }
        Gauge.builder("etcdlock.keepalive.rtt", client, of(m -> m.keepaliveRoundTrip() == null ? Double.NaN : seconds(m.keepaliveRoundTrip())))
                .baseUnit("seconds").description("The last keep-alive's round trip").register(registry);
        FunctionCounter.builder("etcdlock.etcd.member.failures", client, of(Metrics::memberFailures))
                .description("Requests that failed on an etcd member (the member is then avoided for a while)")
                .register(registry);
    }
}
