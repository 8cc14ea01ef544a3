package io.etcdlock;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.ThreadFactory;

/**
 * Configures a leader loop on one election ({@link EtcdLockClient#newLeaderLoop(String)}), then
 * {@link #start(LeaderTask)} starts it. Not thread-safe; each {@code start} starts an
 * independent loop with the settings given so far.
 *
 * <pre>{@code
 * try (EtcdLeaderLoop loop = client.newLeaderLoop("scheduler").value("node-1")
 *         .listener(new LeaderListener() {
 *             public void lost(LossReason reason) { log.warn("leadership lost: {}", reason); }
 *         })
 *         .start(term -> runScheduler(term))) {
 *     ...
 * }
 * }</pre>
 */
public final class LeaderLoopBuilder {
    private final EtcdLockClient client;
    private final String name;
    byte[] value = new byte[0];
    boolean again = true;
    Duration retry = Duration.ofSeconds(1);
    AcquireOptions options = AcquireOptions.NONE;
    LeaderListener listener = new LeaderListener() {};
    ThreadFactory threads;

    LeaderLoopBuilder(EtcdLockClient client, String name) {
        this.client = client;
        this.name = name;
    }

    /** The proclamation while leader (what {@link Leader#value()} shows). Default empty. */
    public LeaderLoopBuilder value(byte[] value) {
        if (value == null) {
            throw new InvalidArgumentException("value must not be null");
        }
        this.value = value.clone();
        return this;
    }

    /** {@link #value(byte[])} as UTF-8 text. */
    public LeaderLoopBuilder value(String value) {
        if (value == null) {
            throw new InvalidArgumentException("value must not be null");
        }
        return value(Args.checkText(value, "value").getBytes(StandardCharsets.UTF_8));
    }

    /**
     * Campaign again after a term ended (leadership lost, or the task returned) and after a
     * failed campaign. {@code false}: the loop stops after its first term or first failure.
     * Default {@code true}.
     */
    public LeaderLoopBuilder again(boolean again) {
        this.again = again;
        return this;
    }

    /** The pause before campaigning again after a failed campaign. Default 1 s. */
    public LeaderLoopBuilder retry(Duration retry) {
        if (retry == null || retry.isNegative()) {
            throw new InvalidArgumentException("retry must be a duration >= 0");
        }
        this.retry = retry;
        return this;
    }

    /** Options of each campaign (lock-delay, lease time, metadata); a timeout is not used. */
    public LeaderLoopBuilder options(AcquireOptions options) {
        this.options = options == null ? AcquireOptions.NONE : options;
        return this;
    }

    /** Told of the loop's events (see {@link LeaderListener}). Default: none. */
    public LeaderLoopBuilder listener(LeaderListener listener) {
        if (listener == null) {
            throw new InvalidArgumentException("listener must not be null");
        }
        this.listener = listener;
        return this;
    }

    /**
     * Makes the loop's threads: its event thread and one thread per term for the task (pass
     * {@code Thread.ofVirtual().factory()} for virtual threads). Default: daemon platform threads
     * named {@code etcdlock-leader-<name>}.
     */
    public LeaderLoopBuilder threadFactory(ThreadFactory threads) {
        this.threads = threads;
        return this;
    }

    /**
     * Start campaigning; {@code task} runs once per term on a thread of the loop. Close the
     * returned loop to stop (and resign).
     */
    public EtcdLeaderLoop start(LeaderTask task) {
        if (task == null) {
            throw new InvalidArgumentException("task must not be null");
        }
        return client.startLeaderLoop(name, this, task);
    }
}
