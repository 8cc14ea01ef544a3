package io.etcdlock.reactor;

import java.util.Objects;
import java.util.Optional;

import io.etcdlock.EtcdLockException;
import io.etcdlock.Leader;
import io.etcdlock.LeaderTerm;
import io.etcdlock.LossReason;

/**
 * One event of a leader loop run by {@link ReactiveEtcdLock#leadership}: what {@link
 * io.etcdlock.LeaderListener} is told, as a value. The {@link #kind()} says which fields are set.
 * A term begins with {@link Kind#ELECTED} and ends with exactly one of {@link Kind#LOST} or
 * {@link Kind#RESIGNED}.
 */
public final class LeaderEvent {
    /** What happened. */
    public enum Kind {
        /** This candidate leads: {@link #term()} is the term. */
        ELECTED,
        /** Keep-alives are failing while leader: the term is lost at the local deadline unless one gets through. */
        RENEWAL_FAILING,
        /** Keep-alives got through again. */
        RENEWAL_RECOVERED,
        /** The term's leadership was lost: {@link #lossReason()} says why. */
        LOST,
        /** The term ended by resigning. */
        RESIGNED,
        /** Who leads now, any candidate (this one included): {@link #leader()}, empty when nobody leads. */
        LEADER_CHANGED,
        /** A campaign failed: {@link #error()}; the loop campaigns again after its retry pause. */
        CAMPAIGN_FAILED
    }

    private final Kind kind;
    private final LeaderTerm term;
    private final LossReason lossReason;
    private final Leader leader;
    private final EtcdLockException error;

    private LeaderEvent(Kind kind, LeaderTerm term, LossReason lossReason, Leader leader, EtcdLockException error) {
        this.kind = kind;
        this.term = term;
        this.lossReason = lossReason;
        this.leader = leader;
        this.error = error;
    }

    static LeaderEvent elected(LeaderTerm term) {
        return new LeaderEvent(Kind.ELECTED, term, null, null, null);
    }

    static LeaderEvent of(Kind kind) {
        return new LeaderEvent(kind, null, null, null, null);
    }

    static LeaderEvent lost(LossReason reason) {
        return new LeaderEvent(Kind.LOST, null, reason, null, null);
    }

    static LeaderEvent leaderChanged(Optional<Leader> leader) {
        return new LeaderEvent(Kind.LEADER_CHANGED, null, null, leader.orElse(null), null);
    }

    static LeaderEvent campaignFailed(EtcdLockException error) {
        return new LeaderEvent(Kind.CAMPAIGN_FAILED, null, null, null, error);
    }

    /** What happened. */
    public Kind kind() {
        return kind;
    }

    /**
     * For {@link Kind#ELECTED}: the term (fencing token, guarded operations, {@link
     * LeaderTerm#cancelled()} completing when it is over).
     */
    public Optional<LeaderTerm> term() {
        return Optional.ofNullable(term);
    }

    /** For {@link Kind#LOST}: why. */
    public Optional<LossReason> lossReason() {
        return Optional.ofNullable(lossReason);
    }

    /** For {@link Kind#LEADER_CHANGED}: the leader now, empty when nobody leads. */
    public Optional<Leader> leader() {
        return Optional.ofNullable(leader);
    }

    /** For {@link Kind#CAMPAIGN_FAILED}: the campaign's error. */
    public Optional<EtcdLockException> error() {
        return Optional.ofNullable(error);
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof LeaderEvent)) {
            return false;
        }
        LeaderEvent e = (LeaderEvent) o;
        return kind == e.kind && term == e.term && lossReason == e.lossReason && Objects.equals(leader, e.leader)
                && error == e.error;
    }

    @Override
    public int hashCode() {
        return Objects.hash(kind, term, lossReason, leader, error);
    }

    @Override
    public String toString() {
        switch (kind) {
            case ELECTED:
                return "Elected{" + term + "}";
            case LOST:
                return "Lost{" + lossReason + "}";
            case LEADER_CHANGED:
                return "LeaderChanged{" + (leader == null ? "none" : leader) + "}";
            case CAMPAIGN_FAILED:
                return "CampaignFailed{" + error + "}";
            default:
                return kind.toString();
        }
    }
}
