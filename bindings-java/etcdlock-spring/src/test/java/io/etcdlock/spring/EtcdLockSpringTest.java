package io.etcdlock.spring;

import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.Lock;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.integration.support.locks.LockRegistry;

import io.etcdlock.EtcdExtension;
import io.etcdlock.LockGuard;
import io.micrometer.core.instrument.Measurement;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.Statistic;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.springframework.boot.actuate.health.Health;
import org.springframework.boot.actuate.health.Status;
import io.etcdlock.EtcdLock;
import io.etcdlock.EtcdLockClient;
import io.etcdlock.InvalidArgumentException;
import io.etcdlock.TestSupport;
import io.etcdlock.UnavailableException;

/** The auto-configuration and the Spring Integration registry, in real Spring contexts on real etcd. */
@ExtendWith(EtcdExtension.class)
class EtcdLockSpringTest {

    ApplicationContextRunner runner() {
        return new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(EtcdLockAutoConfiguration.class))
                .withPropertyValues("etcdlock.endpoints=" + String.join(",", EtcdExtension.endpoints()),
                        "etcdlock.ttl=5s");
    }

    /**
     * The {@code ```properties} blocks of bindings-java/README.md and of every page of the
     * documentation site (docs/**&#47;*.md), each as "page:line" and its text.
     */
    static java.util.Map<String, String> propertiesBlocks() throws java.io.IOException {
        java.nio.file.Path root = java.nio.file.Path.of("..", "..");
        java.util.List<java.nio.file.Path> pages = new java.util.ArrayList<>();
        pages.add(java.nio.file.Path.of("bindings-java", "README.md"));
        try (java.util.stream.Stream<java.nio.file.Path> s = java.nio.file.Files.walk(root.resolve("docs"))) {
            s.filter(p -> p.toString().endsWith(".md")).map(root::relativize).sorted().forEach(pages::add);
        }
        java.util.Map<String, String> out = new java.util.LinkedHashMap<>();
        for (java.nio.file.Path page : pages) {
            java.util.List<String> lines = java.nio.file.Files.readAllLines(root.resolve(page));
            for (int i = 0; i < lines.size(); i++) {
                if (!lines.get(i).startsWith("```")) {
                    continue;
                }
                int j = i + 1;
                StringBuilder block = new StringBuilder();
                while (j < lines.size() && !lines.get(j).strip().equals("```")) {
                    block.append(lines.get(j)).append('\n');
                    j++;
                }
                if (lines.get(i).strip().equals("```properties")) {
                    out.put(page.toString().replace('\\', '/') + ":" + (i + 1), block.toString());
                }
                i = j;
            }
        }
        return out;
    }

    /** Binds one block's etcdlock.* keys; an etcdlock.* key the starter does not have fails. */
    static EtcdLockProperties bind(String block) throws java.io.IOException {
        java.util.Properties props = new java.util.Properties();
        props.load(new java.io.StringReader(block));
        return new org.springframework.boot.context.properties.bind.Binder(
                new org.springframework.boot.context.properties.source.MapConfigurationPropertySource(props))
                .bind("etcdlock", org.springframework.boot.context.properties.bind.Bindable.of(EtcdLockProperties.class),
                        new org.springframework.boot.context.properties.bind.handler.NoUnboundElementsBindHandler(
                                org.springframework.boot.context.properties.bind.BindHandler.DEFAULT))
                .orElseGet(EtcdLockProperties::new);
    }

    /**
     * Every properties block of the README and the docs pages binds as written (unknown
     * etcdlock.* keys fail), and the Spring Boot guide's full block gives the values it says.
     */
    @org.junit.jupiter.api.TestFactory
    java.util.List<org.junit.jupiter.api.DynamicTest> everyPropertiesBlockBindsAsWritten() throws Exception {
        java.util.Map<String, String> blocks = propertiesBlocks();
        assertTrue(blocks.keySet().stream().anyMatch(k -> k.startsWith("docs/guides/spring-boot.md:")),
                "the Spring Boot guide's properties block: " + blocks.keySet());
        java.util.List<org.junit.jupiter.api.DynamicTest> tests = new java.util.ArrayList<>();
        blocks.forEach((id, block) -> tests.add(org.junit.jupiter.api.DynamicTest.dynamicTest(id, () -> {
            for (String line : block.split("\n")) {
                String l = line.strip();
                assertTrue(l.isEmpty() || l.startsWith("#") || !l.contains(" #"),
                        id + ": a comment after a value is part of the value: " + l);
            }
            EtcdLockProperties p = bind(block);
            if (id.startsWith("docs/guides/spring-boot.md:") && block.contains("etcdlock.leader.role")) {
                assertEquals(java.util.List.of("http://10.0.0.1:2379", "http://10.0.0.2:2379"), p.getEndpoints());
                assertEquals(Duration.ofSeconds(15), p.getTtl());
                assertEquals(Duration.ofSeconds(5), p.getKeepaliveInterval());
                assertEquals(Duration.ofSeconds(2), p.getMargin());
                assertEquals(Boolean.TRUE, p.getWatchHeldKeys());
                assertEquals(Boolean.FALSE, p.getLazyConnect());
                assertEquals("spring-integration", p.getRegistryKey());
                assertFalse(p.getMetrics().isLockNameTag());
                assertTrue(p.isEnabled());
            }
            System.out.println("bound " + id);
        })));
        return tests;
    }

    @Test
    void anOpenTelemetryBeanGetsTheClientsSpans() {
        io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter spans =
                io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter.create();
        io.opentelemetry.sdk.OpenTelemetrySdk otel = io.opentelemetry.sdk.OpenTelemetrySdk.builder()
                .setTracerProvider(io.opentelemetry.sdk.trace.SdkTracerProvider.builder()
                        .addSpanProcessor(io.opentelemetry.sdk.trace.export.SimpleSpanProcessor.create(spans)).build())
                .build();
        String name = TestSupport.uniqueName("spring-otel");
        java.util.List<String> got = new java.util.ArrayList<>();
        // The context closes the SDK bean (AutoCloseable), which empties the exporter: read it before.
        runner().withBean(io.opentelemetry.api.OpenTelemetry.class, () -> otel).run(ctx -> {
            assertNull(ctx.getStartupFailure());
            ctx.getBean(EtcdLockClient.class).newLock(name).acquire().close();
            for (io.opentelemetry.sdk.trace.data.SpanData s : spans.getFinishedSpanItems()) {
                got.add(s.getName() + " " + s.getAttributes().get(
                        io.opentelemetry.api.common.AttributeKey.stringKey("etcdlock.lock.name")));
            }
        });
        assertEquals(java.util.List.of("etcdlock.acquire " + name, "etcdlock.hold " + name), got);
    }

    @Test
    void withoutSpringIntegrationTheStarterStillGivesAClientAndNoRegistry() {
        runner().withClassLoader(new org.springframework.boot.test.context.FilteredClassLoader(
                "org.springframework.integration")).run(ctx -> {
                    assertNull(ctx.getStartupFailure());
                    EtcdLockClient client = ctx.getBean(EtcdLockClient.class);
                    assertTrue(ctx.getBeansOfType(EtcdLockRegistry.class).isEmpty(), "no registry without Spring Integration");
                    try (LockGuard g = client.acquire("spring-no-integration")) {
                        assertTrue(g.isHeld());
                    }
                });
    }

    @Test
    void aDurationWithoutAUnitIsSecondsAndEveryCoreOptionHasAProperty() {
        runner().withPropertyValues("etcdlock.ttl=6", "etcdlock.margin=1", "etcdlock.keepalive-interval=500ms",
                "etcdlock.watch-held-keys=false", "etcdlock.request-timeout=3").run(ctx -> {
                    assertNull(ctx.getStartupFailure());
                    EtcdLockClient client = ctx.getBean(EtcdLockClient.class);
                    assertEquals(6, client.ttlSeconds());
                    EtcdLockProperties p = ctx.getBean(EtcdLockProperties.class);
                    assertEquals(Duration.ofSeconds(1), p.getMargin());
                    assertEquals(Duration.ofSeconds(3), p.getRequestTimeout());
                    try (LockGuard g = client.acquire("spring-units")) {
                        assertTrue(g.isHeld());
                    }
                });
        runner().withPropertyValues("etcdlock.margin=4").run(ctx -> assertNotNull(ctx.getStartupFailure(),
                "a margin above half the TTL (5 s) is refused by core"));
    }

    @Test
    void autoConfigurationBindsPropertiesAndCreatesTheBeans() {
        runner().withPropertyValues("etcdlock.ttl=7s", "etcdlock.namespace=ns-a/", "etcdlock.registry-key=reg")
                .run(ctx -> {
                    assertNull(ctx.getStartupFailure());
                    EtcdLockClient client = ctx.getBean(EtcdLockClient.class);
                    assertEquals(7, client.ttlSeconds());
                    LockRegistry registry = ctx.getBean(LockRegistry.class);
                    assertTrue(registry instanceof EtcdLockRegistry);
                    assertEquals("reg", ((EtcdLockRegistry) registry).getRegistryKey());
                    Lock lock = registry.obtain("k1");
                    assertSame(lock, registry.obtain("k1"), "one lock object per key");
                    lock.lock();
                    try {
                        String key = ((EtcdLock) lock).guard().key();
                        assertTrue(key.startsWith("ns-a/reg/k1/"), key);
                        assertEquals(1, TestSupport.keysUnder("ns-a/reg/k1"));
                    } finally {
                        lock.unlock();
                    }
                    assertEquals(0, TestSupport.keysUnder("ns-a/reg/k1"));
                });
    }

    /** Micrometer meters and the Actuator health indicator, bound by the auto-configuration, read the core. */
    @Test
    void metersAndTheHealthIndicatorReadTheNativeCore() {
        runner().run(ctx -> {
            assertNull(ctx.getStartupFailure());
            EtcdLockClient client = ctx.getBean(EtcdLockClient.class);
            SimpleMeterRegistry reg = new SimpleMeterRegistry();
            ctx.getBean(EtcdLockMeterBinder.class).bindTo(reg);
            EtcdLockHealthIndicator health = ctx.getBean("etcdlockHealthIndicator", EtcdLockHealthIndicator.class);
            Health up = health.health();
            assertEquals(Status.UP, up.getStatus(), up.toString());
            assertTrue(up.getDetails().containsKey("roundTripMillis"), up.toString());

            String name = "metered-" + System.nanoTime();
            try (LockGuard g = client.acquire(name)) {
                assertEquals(1.0, held(reg, Statistic.ACTIVE_TASKS));
                assertTrue(held(reg, Statistic.DURATION) >= 0.0);
                assertFalse(client.tryAcquire(name).isPresent());
            }
            assertEquals(0.0, held(reg, Statistic.ACTIVE_TASKS));
            assertEquals(Meter.Type.LONG_TASK_TIMER, reg.get("etcdlock.held").meter().getId().getType());
            assertEquals(0.0, reg.get("etcdlock.waiting").gauge().value());
            assertEquals(1.0, reg.get("etcdlock.acquire").tag("result", "acquired").functionTimer().count());
            // Java's tryAcquire is a zero-timeout acquisition: core counts it as a timeout.
            assertEquals(1.0, reg.get("etcdlock.acquire").tag("result", "timeout").functionTimer().count());
            assertEquals(0.0, reg.get("etcdlock.acquire").tag("result", "would_block").functionTimer().count());
            assertEquals(1.0, reg.get("etcdlock.hold").functionTimer().count());
            // A client on a healthy etcd has no member failures.
            assertEquals(0.0, reg.get("etcdlock.etcd.member.failures").functionCounter().count());

            // A hold lost to an outside delete, by reason.
            LockGuard g = client.acquire(name);
            TestSupport.raw().getKVClient().delete(io.etcd.jetcd.ByteSequence.from(g.key(), java.nio.charset.StandardCharsets.UTF_8))
                    .get(10, TimeUnit.SECONDS);
            TestSupport.await("the loss", Duration.ofSeconds(5), () -> !g.isHeld());
            assertEquals(1.0, reg.get("etcdlock.lost").tag("reason", "key_deleted").functionCounter().count());
            assertEquals(0.0, reg.get("etcdlock.lost").tag("reason", "lease_expired").functionCounter().count());
            assertThrows(io.etcdlock.LockLostException.class, g::close);

            client.close();
            Health down = health.health();
            assertEquals(Status.DOWN, down.getStatus(), down.toString());
            assertEquals("CLOSED", down.getDetails().get("error"), down.toString());
            assertTrue(Double.isNaN(held(reg, Statistic.ACTIVE_TASKS)));
        });
    }

    /**
     * {@code etcdlock.lazy-connect=true}: the context starts with etcd down, health is DOWN
     * within the request timeout, a lock call fails within its own timeout; on a live etcd the
     * first call connects. Without it the context does not start.
     */
    @Test
    void lazyConnectStartsTheApplicationWhileEtcdIsDown() {
        new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(EtcdLockAutoConfiguration.class))
                .withPropertyValues("etcdlock.endpoints=127.0.0.1:1", "etcdlock.lazy-connect=true",
                        "etcdlock.request-timeout=500ms")
                .run(ctx -> {
                    assertNull(ctx.getStartupFailure());
                    long t0 = System.nanoTime();
                    Health down = ctx.getBean("etcdlockHealthIndicator", EtcdLockHealthIndicator.class).health();
                    long ms = (System.nanoTime() - t0) / 1_000_000;
                    assertEquals(Status.DOWN, down.getStatus(), down.toString());
                    assertEquals("UNAVAILABLE", down.getDetails().get("error"), down.toString());
                    assertTrue(ms < 500 + 700, "health took " + ms + " ms");
                    java.util.concurrent.locks.Lock lock = ctx.getBean(LockRegistry.class).obtain("lazy");
                    t0 = System.nanoTime();
                    try {
                        assertFalse(lock.tryLock(1, TimeUnit.SECONDS));
                    } catch (UnavailableException | io.etcdlock.LockTimeoutException expected) {
                        // etcd down: either is the answer, in time
                    }
                    ms = (System.nanoTime() - t0) / 1_000_000;
                    assertTrue(ms < 1000 + 700, "tryLock(1 s) took " + ms + " ms");
                });
        runner().withPropertyValues("etcdlock.lazy-connect=true").run(ctx -> {
            assertNull(ctx.getStartupFailure());
            Lock lock = ctx.getBean(LockRegistry.class).obtain("lazy-live");
            assertTrue(lock.tryLock(5, TimeUnit.SECONDS));
            lock.unlock();
        });
        new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(EtcdLockAutoConfiguration.class))
                .withPropertyValues("etcdlock.endpoints=127.0.0.1:1", "etcdlock.connect-timeout=300ms")
                .run(ctx -> assertNotNull(ctx.getStartupFailure()));
    }

    /** A statistic of the etcdlock.held long task timer. */
    static double held(SimpleMeterRegistry reg, Statistic st) {
        for (Measurement m : reg.get("etcdlock.held").meter().measure()) {
            if (m.getStatistic() == st) {
                return m.getValue();
            }
        }
        throw new AssertionError("etcdlock.held has no " + st);
    }

    @Test
    void lockNamesAreTagsOnlyWhenAskedFor() {
        runner().withPropertyValues("etcdlock.metrics.lock-name-tag=true").run(ctx -> {
            assertNull(ctx.getStartupFailure());
            EtcdLockClient client = ctx.getBean(EtcdLockClient.class);
            SimpleMeterRegistry reg = new SimpleMeterRegistry();
            ctx.getBean(EtcdLockMeterBinder.class).bindTo(reg);
            String a = "tagged-a-" + System.nanoTime();
            String b = "tagged-b-" + System.nanoTime();
            client.acquire(a).close();
            client.acquire(a, Duration.ofSeconds(5)).close();
            try (LockGuard held = client.acquire(b)) {
                assertFalse(client.tryAcquire(b).isPresent());
                assertThrows(io.etcdlock.LockTimeoutException.class, () -> client.acquire(b, Duration.ofMillis(50)));
            }
            // Recorded before each call returned.
            assertEquals(5, reg.find("etcdlock.acquire").timers().stream().mapToLong(t -> t.count()).sum());
            assertEquals(2, reg.get("etcdlock.acquire").tag("lock", b).tag("result", "timeout").timer().count());
            assertEquals(2, reg.get("etcdlock.acquire").tag("lock", a).tag("result", "acquired").timer().count());
            assertEquals(1, reg.get("etcdlock.acquire").tag("lock", b).tag("result", "acquired").timer().count());
            assertTrue(reg.get("etcdlock.acquire").tag("lock", b).tag("result", "timeout").timer()
                    .totalTime(TimeUnit.MILLISECONDS) >= 50);
            // Every etcdlock.acquire meter carries the lock tag (no untagged aggregate beside them).
            assertTrue(reg.find("etcdlock.acquire").meters().stream().allMatch(m -> m.getId().getTag("lock") != null));
        });
        // Default: no lock tag anywhere.
        runner().run(ctx -> {
            SimpleMeterRegistry reg = new SimpleMeterRegistry();
            ctx.getBean(EtcdLockMeterBinder.class).bindTo(reg);
            ctx.getBean(EtcdLockClient.class).acquire("untagged-" + System.nanoTime()).close();
            assertTrue(reg.find("etcdlock.acquire").meters().stream().noneMatch(m -> m.getId().getTag("lock") != null));
            assertEquals(1.0, reg.get("etcdlock.acquire").tag("result", "acquired").functionTimer().count());
        });
    }

    @Test
    void twoContextsExcludeEachOther() {
        String key = "shared-" + System.nanoTime();
        runner().run(ctx1 -> runner().run(ctx2 -> {
            Lock l1 = ctx1.getBean(LockRegistry.class).obtain(key);
            Lock l2 = ctx2.getBean(LockRegistry.class).obtain(key);
            assertTrue(l1.tryLock(5, TimeUnit.SECONDS));
            AtomicReference<Boolean> other = new AtomicReference<>();
            Thread t = new Thread(() -> other.set(l2.tryLock()));
            t.start();
            t.join();
            assertEquals(Boolean.FALSE, other.get());
            l1.unlock();
            Thread t2 = new Thread(() -> {
                try {
                    other.set(l2.tryLock(5, TimeUnit.SECONDS));
                    l2.unlock();
                } catch (InterruptedException e) {
                    other.set(null);
                }
            });
            t2.start();
            t2.join();
            assertEquals(Boolean.TRUE, other.get());
        }));
    }

    @Test
    void renewAndExpire() {
        runner().run(ctx -> {
            EtcdLockRegistry registry = ctx.getBean(EtcdLockRegistry.class);
            String key = "renew-" + System.nanoTime();
            assertThrows(IllegalStateException.class, () -> registry.renewLock(key));
            Lock lock = registry.obtain(key);
            lock.lock();
            registry.renewLock(key);
            registry.expireUnusedOlderThan(-1);
            assertEquals(1, registry.size(), "a held lock is never expired");
            lock.unlock();
            assertThrows(IllegalStateException.class, () -> registry.renewLock(key));
            registry.expireUnusedOlderThan(-1);
            assertEquals(0, registry.size());
            assertThrows(IllegalArgumentException.class, () -> registry.obtain(42));
            assertThrows(IllegalArgumentException.class, () -> registry.obtain(""));
        });
    }

    @Test
    void disabledCreatesNothing() {
        runner().withPropertyValues("etcdlock.enabled=false").run(ctx -> {
            assertTrue(ctx.getBeansOfType(EtcdLockClient.class).isEmpty());
            assertTrue(ctx.getBeansOfType(LockRegistry.class).isEmpty());
        });
    }

    @Test
    void badPropertiesFailTheContextWithTypedExceptions() {
        runner().withPropertyValues("etcdlock.ttl=0s").run(ctx -> {
            assertNotNull(ctx.getStartupFailure());
            assertTrue(hasCause(ctx.getStartupFailure(), InvalidArgumentException.class), String.valueOf(ctx.getStartupFailure()));
        });
        runner().withPropertyValues("etcdlock.endpoints=http://127.0.0.1:1", "etcdlock.connect-timeout=500ms").run(ctx -> {
            assertNotNull(ctx.getStartupFailure());
            assertTrue(hasCause(ctx.getStartupFailure(), UnavailableException.class), String.valueOf(ctx.getStartupFailure()));
        });
    }

    @Test
    void credentialAndTlsPropertiesReachTheClient() {
        runner().withPropertyValues("etcdlock.username=app", "etcdlock.password=pw",
                "etcdlock.tls.ca=/nonexistent/etcdlock-ca.pem", "etcdlock.tls.domain=etcd.local",
                "etcdlock.connect-timeout=2s", "etcdlock.request-timeout=3s")
                .withBean("myClient", EtcdLockClient.class,
                        () -> EtcdLockClient.builder().endpoints(EtcdExtension.endpoints()).build())
                .run(ctx -> {
                    EtcdLockProperties p = ctx.getBean(EtcdLockProperties.class);
                    assertEquals("app", p.getUsername());
                    assertEquals("pw", p.getPassword());
                    assertEquals("/nonexistent/etcdlock-ca.pem", p.getTls().getCa());
                    assertEquals("etcd.local", p.getTls().getDomain());
                    assertEquals(Duration.ofSeconds(2), p.getConnectTimeout());
                    assertEquals(Duration.ofSeconds(3), p.getRequestTimeout());
                });
        runner().withPropertyValues("etcdlock.tls.ca=/nonexistent/etcdlock-ca.pem").run(ctx -> {
            // The CA file is handed to the core, which refuses the missing file (plaintext
            // endpoints with TLS options are refused too): a typed InvalidArgumentException.
            assertNotNull(ctx.getStartupFailure());
            assertTrue(hasCause(ctx.getStartupFailure(), InvalidArgumentException.class), String.valueOf(ctx.getStartupFailure()));
        });
    }

    /**
     * An empty property is an unset one, for every property, whether it comes from the command
     * line ({@code --etcdlock.tls.ca=}) or from an empty {@code ETCDLOCK_*} variable: the context
     * starts with the default (no TLS, no credentials, no namespace, the default registry key).
     */
    @Test
    void anEmptyPropertyIsUnset() {
        org.springframework.boot.test.context.runner.ContextConsumer<org.springframework.boot.test.context.assertj.AssertableApplicationContext> unset = ctx -> {
            assertNull(ctx.getStartupFailure());
            EtcdLockProperties p = ctx.getBean(EtcdLockProperties.class);
            assertNull(p.getTls().getCa());
            assertNull(p.getTls().getCert());
            assertNull(p.getTls().getKey());
            assertNull(p.getTls().getDomain());
            assertNull(p.getNamespace());
            assertNull(p.getUsername());
            assertNull(p.getPassword());
            assertEquals(EtcdLockRegistry.DEFAULT_REGISTRY_KEY, p.getRegistryKey());
            try (LockGuard g = ctx.getBean(EtcdLockClient.class).acquire("spring-empty")) {
                assertTrue(g.isHeld());
            }
        };
        runner().withPropertyValues("etcdlock.tls.ca=", "etcdlock.tls.cert=", "etcdlock.tls.key=", "etcdlock.tls.domain=",
                "etcdlock.namespace=", "etcdlock.username=", "etcdlock.password=", "etcdlock.registry-key=").run(unset);
        runner().withPropertyValues("etcdlock.tls.ca=").run(unset);
        // The same from the environment, as Spring's relaxed binding reads ETCDLOCK_TLS_CA.
        java.util.Map<String, Object> env = new java.util.HashMap<>();
        for (String v : new String[] {"ETCDLOCK_TLS_CA", "ETCDLOCK_TLS_CERT", "ETCDLOCK_TLS_KEY", "ETCDLOCK_TLS_DOMAIN",
                "ETCDLOCK_NAMESPACE", "ETCDLOCK_USERNAME", "ETCDLOCK_PASSWORD", "ETCDLOCK_REGISTRYKEY"}) {
            env.put(v, "");
        }
        runner().withInitializer(ctx -> ctx.getEnvironment().getPropertySources().addFirst(
                new org.springframework.core.env.SystemEnvironmentPropertySource("test-environment", env))).run(unset);
        // Empty endpoints and TTL: the defaults (etcd on 127.0.0.1:2379 is not there: lazy connect).
        runner().withPropertyValues("etcdlock.endpoints=", "etcdlock.ttl=", "etcdlock.lazy-connect=true").run(ctx -> {
            assertNull(ctx.getStartupFailure());
            EtcdLockProperties p = ctx.getBean(EtcdLockProperties.class);
            assertEquals(java.util.List.of("http://127.0.0.1:2379"), p.getEndpoints());
            assertEquals(Duration.ofSeconds(15), p.getTtl());
            assertEquals(15, ctx.getBean(EtcdLockClient.class).ttlSeconds());
        });
    }

    @Test
    void userBeansWin() {
        runner().withBean("myClient", EtcdLockClient.class,
                () -> EtcdLockClient.builder().endpoints(EtcdExtension.endpoints()).ttl(Duration.ofSeconds(9)).build())
                .run(ctx -> {
                    assertEquals(9, ctx.getBean(EtcdLockClient.class).ttlSeconds());
                    assertEquals(1, ctx.getBeansOfType(EtcdLockClient.class).size());
                });
    }

    static boolean hasCause(Throwable t, Class<? extends Throwable> type) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (type.isInstance(c)) {
                return true;
            }
        }
        return false;
    }
}
