package io.etcdlock;

import java.util.Optional;

/**
 * Told of a leader loop's events, in the order they happen, on the loop's event thread (one at a
 * time; a slow listener delays the following events). Every method does nothing by default.
 * A term ends with exactly one of {@link #lost} or {@link #resigned}; {@link #stopped()} is last.
 */
public interface LeaderListener {
    /** Elected: the term's task starts right after this returns. */
    default void elected(LeaderTerm term) {}

    /** Keep-alives are failing while leader: the term is lost at the local deadline unless one gets through. */
    default void renewalFailing() {}

    /** Keep-alives got through again. */
    default void renewalRecovered() {}

    /** Leadership was lost; the term's task has been interrupted. */
    default void lost(LossReason reason) {}

    /** The term ended by resigning (the task returned, or the loop was closed). */
    default void resigned() {}

    /** Who leads the election now (any candidate, this loop included; empty: nobody). */
    default void leaderChanged(Optional<Leader> leader) {}

    /** A campaign failed (etcd unavailable, ...); with again, the loop retries after its retry pause. */
    default void campaignFailed(EtcdLockException error) {}

    /** The loop has stopped; no event follows. */
    default void stopped() {}
}
