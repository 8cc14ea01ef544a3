package io.etcdlock.spring;

import static org.junit.jupiter.api.Assertions.*;

import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.autoconfigure.ImportAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.ApplicationEvent;
import org.springframework.context.ApplicationListener;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;
import org.springframework.integration.leader.event.OnGrantedEvent;
import org.springframework.integration.leader.event.OnRevokedEvent;

import io.etcdlock.EtcdExtension;

/**
 * The auto-configured leader initiator ({@code etcdlock.leader.*}) in real application contexts on
 * real etcd: two contexts, exactly one granted at a time, and closing the leader's context grants
 * the other within 1 s.
 */
@ExtendWith(EtcdExtension.class)
class EtcdLeaderInitiatorTest {

    @Configuration(proxyBeanMethods = false)
    @ImportAutoConfiguration(EtcdLockAutoConfiguration.class)
    static class App {}

    /** Grants of both contexts: who, what, when; a shared granted counter. */
    static final class Grants {
        final AtomicInteger granted = new AtomicInteger();
        final AtomicInteger maxGranted = new AtomicInteger();
        final BlockingQueue<String> events = new LinkedBlockingQueue<>();
        volatile long lastGrantNs;

        ApplicationListener<ApplicationEvent> listener(String who) {
            return e -> {
                if (e instanceof OnGrantedEvent) {
                    int n = granted.incrementAndGet();
                    maxGranted.accumulateAndGet(n, Math::max);
                    EtcdLeaderInitiator i = (EtcdLeaderInitiator) e.getSource();
                    // Each grant is written through the term's guarded put.
                    i.currentTerm().orElseThrow().put("leader-initiator-test/owner", who);
                    lastGrantNs = System.nanoTime();
                    events.add("granted " + who);
                } else if (e instanceof OnRevokedEvent) {
                    granted.decrementAndGet();
                    events.add("revoked " + who);
                }
            };
        }

        String next() throws InterruptedException {
            String e = events.poll(15, TimeUnit.SECONDS);
            assertNotNull(e, "a leader event within 15 s");
            return e;
        }
    }

    static ConfigurableApplicationContext app(String who, Grants grants) {
        return new SpringApplicationBuilder(App.class).web(WebApplicationType.NONE)
                .listeners(grants.listener(who))
                .properties("etcdlock.endpoints=" + String.join(",", EtcdExtension.endpoints()), "etcdlock.ttl=3s",
                        "etcdlock.leader.enabled=true", "etcdlock.leader.name=initiator-test",
                        "spring.application.name=app-" + who, "etcdlock.leader.role=worker",
                        "spring.main.banner-mode=off")
                .run();
    }

    @Test
    void oneContextIsGrantedAtATimeAndClosingItGrantsTheOtherWithinOneSecond() throws Exception {
        Grants grants = new Grants();
        ConfigurableApplicationContext a = app("a", grants);
        ConfigurableApplicationContext b = null;
        try {
            assertEquals("granted a", grants.next());
            EtcdLeaderInitiator ia = a.getBean(EtcdLeaderInitiator.class);
            assertTrue(ia.isLeader());
            assertEquals("worker", ia.getRole());
            b = app("b", grants);
            EtcdLeaderInitiator ib = b.getBean(EtcdLeaderInitiator.class);
            assertFalse(ib.isLeader());
            assertTrue(ib.isRunning());
            assertEquals("worker", a.getBean(io.etcdlock.EtcdLockClient.class).leader("initiator-test")
                    .orElseThrow().valueAsString());

            long close = System.nanoTime();
            a.close();
            assertEquals("revoked a", grants.next());
            assertEquals("granted b", grants.next());
            double s = (grants.lastGrantNs - close) / 1e9;
            System.out.printf("leader initiator: closing the leader's context granted the other after %.3f s%n", s);
            assertTrue(s < 1.0, "the other context granted within 1 s: " + s + " s");
            assertTrue(ib.isLeader());
            assertFalse(ia.isRunning());

            // Yield: revoked, then granted again (the only candidate).
            ib.yieldLeadership();
            assertEquals("revoked b", grants.next());
            assertEquals("granted b", grants.next());
        } finally {
            a.close();
            if (b != null) {
                b.close();
            }
        }
        assertEquals("revoked b", grants.next());
        assertEquals(0, grants.granted.get());
        assertEquals(1, grants.maxGranted.get(), "never two contexts granted at once");
    }

    ApplicationContextRunner runner() {
        return new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(EtcdLockAutoConfiguration.class))
                .withPropertyValues("etcdlock.endpoints=" + String.join(",", EtcdExtension.endpoints()),
                        "etcdlock.ttl=3s");
    }

    @Test
    void theInitiatorIsOptIn() {
        runner().run(ctx -> {
            assertNull(ctx.getStartupFailure());
            assertTrue(ctx.getBeansOfType(EtcdLeaderInitiator.class).isEmpty(), "no initiator by default");
        });
    }

    @Test
    void withoutSpringIntegrationTheStartersOwnEventsArePublishedWithTheAppNameAsRole() {
        BlockingQueue<ApplicationEvent> events = new LinkedBlockingQueue<>();
        runner().withClassLoader(new FilteredClassLoader("org.springframework.integration"))
                .withPropertyValues("etcdlock.leader.enabled=true", "spring.application.name=billing")
                .withBean("recorder", ApplicationListener.class,
                        () -> (ApplicationListener<ApplicationEvent>) e -> {
                            if (e instanceof LeaderGrantedEvent || e instanceof LeaderRevokedEvent) {
                                events.add(e);
                            }
                        })
                .run(ctx -> {
                    assertNull(ctx.getStartupFailure());
                    EtcdLeaderInitiator i = ctx.getBean(EtcdLeaderInitiator.class);
                    assertEquals("billing", i.getRole());
                    assertEquals("billing", i.getName());
                    ApplicationEvent e = events.poll(15, TimeUnit.SECONDS);
                    assertTrue(e instanceof LeaderGrantedEvent, "granted: " + e);
                    assertEquals("billing", ((LeaderGrantedEvent) e).getRole());
                    assertEquals(i.currentTerm().orElseThrow().fencingToken(),
                            ((LeaderGrantedEvent) e).getFencingToken());
                    ctx.stop();
                    ApplicationEvent r = events.poll(15, TimeUnit.SECONDS);
                    assertTrue(r instanceof LeaderRevokedEvent, "revoked on stop: " + r);
                    assertFalse(i.isRunning());
                });
    }
}
