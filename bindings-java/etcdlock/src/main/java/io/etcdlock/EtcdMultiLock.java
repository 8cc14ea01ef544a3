package io.etcdlock;

import static io.etcdlock.Args.checkNotOnRuntimeThread;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * Several locks taken together, obtained from {@link EtcdLockClient#newMultiLock(List)}. The
 * waiter keys of every name are created in one etcd transaction, so every client queues in the
 * same order on every name: no deadlock, no release-and-retry loop (as Redisson's MultiLock
 * needs). A timeout or interrupt removes every key; losing any one lock loses the hold. Each
 * {@code acquire} call is an independent hold, a {@link MultiLockGuard} (close it to release
 * every name). Thread-safe; the object holds no state of its own.
 */
public final class EtcdMultiLock {
    private final EtcdLockClient client;
    private final List<String> names;

    /** Unchecked: {@code names} is checked (and copied) at each acquisition. */
    EtcdMultiLock(EtcdLockClient client, List<String> names) {
        this.client = client;
        this.names = names;
    }

    static EtcdMultiLock checked(EtcdLockClient client, List<String> names) {
        if (names == null) {
            throw new InvalidArgumentException("names must not be null");
        }
        List<String> copy = new ArrayList<>(names);
        Args.checkNames(copy);
        return new EtcdMultiLock(client, Collections.unmodifiableList(copy));
    }

    /** The lock names, in the order given. */
    public List<String> names() {
        return names;
    }

    /**
     * Wait at most {@code timeout} until every name is held.
     *
     * @param timeout null waits as long as it takes; zero is one try
     * @throws LockTimeoutException if they were not all acquired in time (no key is left behind)
     * @throws InvalidArgumentException for more than 128 names, or none
     */
    public MultiLockGuard acquire(Duration timeout) {
        String what = "locks " + names;
        checkNotOnRuntimeThread(what);
        return AsyncAcquire.await(client.acq.startAll(names, Acquirer.msOrForever(timeout)), what, false);
    }

    /** Every name if all are free right now; empty otherwise (nothing is left behind). */
    public Optional<MultiLockGuard> tryAcquire() {
        try {
            return Optional.of(acquire(Duration.ZERO));
        } catch (LockTimeoutException e) {
            return Optional.empty();
        }
    }

    /**
     * {@link #acquire(Duration)} without blocking, as {@link EtcdLock#acquireAsync(Duration)}:
     * cancelling the future removes every waiter key.
     */
    public CompletableFuture<MultiLockGuard> acquireAsync(Duration timeout) {
        return client.acq.startAll(names, Acquirer.msOrForever(timeout));
    }

    @Override
    public String toString() {
        return "EtcdMultiLock{names=" + names + "}";
    }
}
