package io.etcdlock.spring;

import org.springframework.context.ApplicationEventPublisher;
import org.springframework.integration.leader.Context;
import org.springframework.integration.leader.event.DefaultLeaderEventPublisher;
import org.springframework.integration.leader.event.LeaderEventPublisher;

import io.etcdlock.LeaderTerm;

/**
 * {@link EtcdLeaderInitiator}'s grant and revoke as Spring Integration's {@code OnGrantedEvent}
 * and {@code OnRevokedEvent}, with a {@link Context} whose {@code yield()} yields the grant.
 * Loaded only when spring-integration-core is on the classpath.
 */
public class IntegrationLeaderEvents implements EtcdLeaderInitiator.Events {
    private final LeaderEventPublisher publisher;

    public IntegrationLeaderEvents(ApplicationEventPublisher publisher) {
        this.publisher = new DefaultLeaderEventPublisher(publisher);
    }

    @Override
    public void granted(EtcdLeaderInitiator initiator, LeaderTerm term) {
        publisher.publishOnGranted(initiator, context(initiator), initiator.getRole());
    }

    @Override
    public void revoked(EtcdLeaderInitiator initiator, LeaderTerm term) {
        publisher.publishOnRevoked(initiator, context(initiator), initiator.getRole());
    }

    private static Context context(EtcdLeaderInitiator initiator) {
        return new Context() {
            @Override
            public boolean isLeader() {
                return initiator.isLeader();
            }

            @Override
            public void yield() {
                initiator.yieldLeadership();
            }

            @Override
            public String getRole() {
                return initiator.getRole();
            }

            @Override
            public String toString() {
                return "EtcdLeaderContext{role=" + initiator.getRole() + ", leader=" + isLeader() + "}";
            }
        };
    }
}
