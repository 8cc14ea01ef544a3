package io.etcdlock;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * A leader election on one name, obtained from {@link EtcdLockClient#newElection(String)}: the
 * keys of Go's {@code concurrency.Election} and {@code etcdctl elect}, which take part in the same
 * election. Candidates are elected in arrival order; each {@code campaign} call is an independent
 * candidacy, and the {@link Leadership} it returns is its hold (closing it resigns).
 *
 * <pre>{@code
 * EtcdElection scheduler = client.newElection("scheduler");
 * try (Leadership leader = scheduler.campaign("node-1")) {
 *     leader.onLost(reason -> stopScheduling());
 *     runScheduler(leader.fencingToken());
 * }
 * }</pre>
 *
 * {@link #leader()} and {@link #observe(Consumer)} read the election whoever campaigns (the
 * same as {@link EtcdLockClient#leader(String)} and {@link EtcdLockClient#observe}).
 * Thread-safe; the object holds no state of its own.
 */
public final class EtcdElection {
    private final EtcdLockClient client;
    private final String name;
    private final AcquireOptions options;

    /** Unchecked: the core checks {@code name} at each campaign. {@code options} null: none. */
    EtcdElection(EtcdLockClient client, String name, AcquireOptions options) {
        this.client = client;
        this.name = name;
        this.options = options == null ? AcquireOptions.NONE : options;
    }

    /** The election name. */
    public String name() {
        return name;
    }

    /** The acquisition options every campaign uses ({@link AcquireOptions#NONE} unless given). */
    public AcquireOptions options() {
        return options;
    }

    /** Campaign announcing {@code value} (UTF-8): wait as long as it takes to be elected. */
    public Leadership campaign(String value) {
        return campaign(Args.utf8(value), null);
    }

    /** {@link #campaign(byte[], Duration)} with a text value (UTF-8). */
    public Leadership campaign(String value, Duration timeout) {
        return campaign(Args.utf8(value), timeout);
    }

    /**
     * Campaign announcing {@code value}: wait (in arrival order among candidates) until
     * elected.
     *
     * @param timeout null waits as long as it takes; zero is one try
     * @throws LockTimeoutException if not elected in time (our candidate key is removed)
     * @throws InvalidArgumentException if {@code value} is null
     */
    public Leadership campaign(byte[] value, Duration timeout) {
        if (value == null) {
            throw new InvalidArgumentException("value must not be null");
        }
        long ms = Acquirer.msOrForever(timeout);
        return new Leadership(Acquirer.awaitRecipe("election \"" + name + "\"",
                () -> client.acq.startCampaign(name, value, ms, options)));
    }

    /**
     * {@link #campaign(byte[], Duration)} without blocking, as
     * {@link EtcdLock#acquireAsync(Duration)}: cancelling the future withdraws the candidacy.
     */
    public CompletableFuture<Leadership> campaignAsync(byte[] value, Duration timeout) {
        if (value == null) {
            throw new InvalidArgumentException("value must not be null");
        }
        return client.acq.startCampaign(name, value, Acquirer.msOrForever(timeout), options)
                .thenApply(Leadership::new);
    }

    /** The current leader, or empty when nobody leads (one etcd read). */
    public Optional<Leader> leader() {
        return client.leader(name);
    }

    /**
     * Follow the election: as {@link EtcdLockClient#observe(String, Consumer)}. Close the
     * returned observation to stop.
     */
    public LeaderObservation observe(Consumer<Optional<Leader>> listener) {
        return client.observe(name, listener);
    }

    @Override
    public String toString() {
        return "EtcdElection{name=" + name + "}";
    }
}
