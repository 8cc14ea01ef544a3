package io.etcdlock.spring;

import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;

import org.springframework.context.SmartLifecycle;

import io.etcdlock.EtcdLeaderLoop;
import io.etcdlock.EtcdLockClient;
import io.etcdlock.LeaderTerm;

/**
 * Leader election for a Spring application on an etcdlock leader loop: while this instance leads
 * the election {@link #getName()}, it is granted its role; it is revoked when leadership is lost,
 * when it yields, or when the context stops (stopping resigns). Grant and revoke are published as
 * application events on the loop's task thread: Spring Integration's {@code OnGrantedEvent} and
 * {@code OnRevokedEvent} when spring-integration-core is on the classpath, else
 * {@link LeaderGrantedEvent} and {@link LeaderRevokedEvent}.
 *
 * <p>At most one instance of the election is granted at a time: an instance is revoked before it
 * resigns, and the next instance is granted only after that. A {@code OnRevokedEvent} listener
 * delays the handover while it runs.
 */
public class EtcdLeaderInitiator implements SmartLifecycle {
    /** How grant and revoke reach the application. */
    public interface Events {
        void granted(EtcdLeaderInitiator initiator, LeaderTerm term);

        void revoked(EtcdLeaderInitiator initiator, LeaderTerm term);
    }

    private final EtcdLockClient client;
    private final String name;
    private final String role;
    private final Events events;
    private final Object lock = new Object();
    private EtcdLeaderLoop loop;
    private volatile LeaderTerm term;
    private volatile CompletableFuture<Void> yielded = new CompletableFuture<>();

    /**
     * @param name the election name (a lock name)
     * @param role the role granted, also the proclamation ({@code Leader#valueAsString()})
     */
    public EtcdLeaderInitiator(EtcdLockClient client, String name, String role, Events events) {
        this.client = client;
        this.name = name;
        this.role = role;
        this.events = events;
    }

    /** The election name. */
    public String getName() {
        return name;
    }

    /** The role this instance is granted while it leads. */
    public String getRole() {
        return role;
    }

    /** True while granted: elected and the term not over. */
    public boolean isLeader() {
        LeaderTerm t = term;
        return t != null && !t.isCancelled();
    }

    /** The current term while granted: fencing token, guarded put/get. */
    public Optional<LeaderTerm> currentTerm() {
        return Optional.ofNullable(term);
    }

    /** Give up the current grant: revoke, resign, and campaign again. No effect unless granted. */
    public void yieldLeadership() {
        yielded.complete(null);
    }

    /** Campaign; idempotent. */
    @Override
    public void start() {
        synchronized (lock) {
            if (loop == null) {
                loop = client.newLeaderLoop(name).value(role).start(this::lead);
            }
        }
    }

    /** Stop: revoke if granted, resign, and wait for the loop to stop. */
    @Override
    public void stop() {
        EtcdLeaderLoop l;
        synchronized (lock) {
            l = loop;
            loop = null;
        }
        if (l != null) {
            l.close();
        }
    }

    @Override
    public boolean isRunning() {
        synchronized (lock) {
            return loop != null;
        }
    }

    /** Late start, early stop (Spring Integration's leader initiators use the same phase). */
    @Override
    public int getPhase() {
        return Integer.MAX_VALUE - 1000;
    }

    /** One term: granted until the term is over or the instance yields, then revoked. */
    private void lead(LeaderTerm t) {
        CompletableFuture<Void> y = new CompletableFuture<>();
        yielded = y;
        term = t;
        try {
            events.granted(this, t);
            CompletableFuture.anyOf(t.cancelled(), y).get();
        } catch (InterruptedException e) {
            // the term is over
        } catch (ExecutionException e) {
            // not completed exceptionally
        } finally {
            term = null;
            events.revoked(this, t);
        }
    }

    @Override
    public String toString() {
        return "EtcdLeaderInitiator{name=" + name + ", role=" + role + ", leader=" + isLeader() + "}";
    }
}
