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

    /** An application JVM ({@link InitiatorNode}) and the events it printed. */
    static final class Jvm implements AutoCloseable {
        final String name;
        final Process process;
        final BlockingQueue<String[]> events = new LinkedBlockingQueue<>();

        Jvm(String name, String election) throws Exception {
            this.name = name;
            process = io.etcdlock.TestSupport.childJvm(InitiatorNode.class, String.join(",", EtcdExtension.endpoints()),
                    election, "3");
            Thread reader = new Thread(() -> {
                try (java.io.BufferedReader r = new java.io.BufferedReader(new java.io.InputStreamReader(
                        process.getInputStream(), java.nio.charset.StandardCharsets.UTF_8))) {
                    String l;
                    while ((l = r.readLine()) != null) {
                        String[] ev = l.split(" ");
                        if (ev.length >= 2 && ev[0].matches("STARTED|GRANTED|REVOKED")) {
                            events.add(ev);
                        }
                    }
                } catch (java.io.IOException ignored) {
                    // process gone
                }
            });
            reader.setDaemon(true);
            reader.start();
        }

        /** The next event, which must be {@code what}. */
        String[] expect(String what, long withinMs) throws InterruptedException {
            String[] ev = events.poll(withinMs, TimeUnit.MILLISECONDS);
            assertNotNull(ev, name + ": no " + what + " within " + withinMs + " ms");
            assertEquals(what, ev[0], name);
            return ev;
        }

        @Override
        public void close() throws Exception {
            if (process.isAlive()) {
                process.getOutputStream().close();
                if (!process.waitFor(20, TimeUnit.SECONDS)) {
                    process.destroyForcibly();
                }
            }
        }
    }

    @Test
    void killMinus9OfTheLeadersJvmGrantsTheOtherNeverBoth() throws Exception {
        String election = "initiator-jvm-" + System.nanoTime();
        try (Jvm a = new Jvm("A", election)) {
            // A, alone, is granted while its context starts: GRANTED and STARTED in either order.
            String[] first = a.events.poll(60, TimeUnit.SECONDS);
            String[] second = a.events.poll(15, TimeUnit.SECONDS);
            assertNotNull(first, "A started");
            assertNotNull(second, "A granted");
            String[] grantA = first[0].equals("GRANTED") ? first : second;
            assertEquals("GRANTED", grantA[0]);
            assertEquals("STARTED", (grantA == first ? second : first)[0]);
            long tokenA = Long.parseLong(grantA[2]);
            try (Jvm b = new Jvm("B", election)) {
                b.expect("STARTED", 60_000);
                // B campaigns behind A: not granted while A lives.
                assertNull(b.events.poll(1, TimeUnit.SECONDS), "B granted while A leads");
                long killed = System.nanoTime();
                Process kill = new ProcessBuilder("kill", "-9", Long.toString(a.process.pid())).inheritIO().start();
                assertEquals(0, kill.waitFor());
                String[] g = b.expect("GRANTED", 10_000);
                long grantedB = Long.parseLong(g[1]);
                assertTrue(grantedB > killed, "B granted only after A was killed");
                assertTrue(Long.parseLong(g[2]) > tokenA, "fencing tokens increase");
                double s = (grantedB - killed) / 1e9;
                System.out.printf("leader initiator: kill -9 of the leader's JVM -> the other granted after %.3f s "
                        + "(TTL 3 s)%n", s);
                assertTrue(s < 3 + 1, "granted within TTL + 1 s: " + s + " s");
                assertTrue(a.events.isEmpty(), "the killed JVM printed nothing more");
                b.process.getOutputStream().close();
                b.expect("REVOKED", 15_000);
            }
        }
    }
}
