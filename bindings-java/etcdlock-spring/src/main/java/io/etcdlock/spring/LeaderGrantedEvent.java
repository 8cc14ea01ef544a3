package io.etcdlock.spring;

import org.springframework.context.ApplicationEvent;

/**
 * {@link EtcdLeaderInitiator}: this instance leads and is granted its role (published when
 * Spring Integration is not on the classpath; with it, {@code OnGrantedEvent}).
 */
public class LeaderGrantedEvent extends ApplicationEvent {
    private static final long serialVersionUID = 1L;
    private final String role;
    private final long fencingToken;

    public LeaderGrantedEvent(EtcdLeaderInitiator source, String role, long fencingToken) {
        super(source);
        this.role = role;
        this.fencingToken = fencingToken;
    }

    /** The role granted. */
    public String getRole() {
        return role;
    }

    /** The term's fencing token: strictly increases from one grant (of any instance) to the next. */
    public long getFencingToken() {
        return fencingToken;
    }

    @Override
    public EtcdLeaderInitiator getSource() {
        return (EtcdLeaderInitiator) super.getSource();
    }
}
