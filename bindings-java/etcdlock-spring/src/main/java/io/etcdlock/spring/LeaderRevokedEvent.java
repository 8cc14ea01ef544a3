package io.etcdlock.spring;

import org.springframework.context.ApplicationEvent;

/**
 * {@link EtcdLeaderInitiator}: the grant is over (leadership lost, yielded, or the context is
 * stopping). Published when Spring Integration is not on the classpath; with it,
 * {@code OnRevokedEvent}.
 */
public class LeaderRevokedEvent extends ApplicationEvent {
    private static final long serialVersionUID = 1L;
    private final String role;

    public LeaderRevokedEvent(EtcdLeaderInitiator source, String role) {
        super(source);
        this.role = role;
    }

    /** The role revoked. */
    public String getRole() {
        return role;
    }

    @Override
    public EtcdLeaderInitiator getSource() {
        return (EtcdLeaderInitiator) super.getSource();
    }
}
