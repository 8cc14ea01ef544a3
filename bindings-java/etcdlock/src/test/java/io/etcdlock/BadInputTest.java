package io.etcdlock;

import static io.etcdlock.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Bad input gets typed exceptions; nothing crashes the JVM. */
@ExtendWith(EtcdExtension.class)
class BadInputTest {
    static EtcdLockClient a;

    @BeforeAll
    static void connect() {
        a = client();
    }

    @AfterAll
    static void close() {
        a.close();
    }

    @Test
    void nullsAndEmptyNames() {
        assertThrows(InvalidArgumentException.class, () -> a.newLock(null));
        assertThrows(InvalidArgumentException.class, () -> a.newLock(""));
        assertThrows(InvalidArgumentException.class, () -> a.acquire(null));
        assertThrows(InvalidArgumentException.class, () -> a.acquire("", Duration.ofSeconds(1)));
        assertThrows(InvalidArgumentException.class, () -> a.acquire("x", null));
        assertThrows(InvalidArgumentException.class, () -> a.acquire("x", Duration.ofSeconds(-1)));
        assertThrows(InvalidArgumentException.class, () -> a.tryAcquire(null));
        assertThrows(InvalidArgumentException.class, () -> a.acquireAsync(null));
        assertThrows(InvalidArgumentException.class, () -> a.newLock("x").tryLock(1, null));
        assertThrows(InvalidArgumentException.class, () -> EtcdLockClient.builder().endpoints((String[]) null));
        assertThrows(InvalidArgumentException.class, () -> EtcdLockClient.builder().endpoints((List<String>) null));
        assertThrows(InvalidArgumentException.class, () -> EtcdLockClient.builder().endpoints("a", null));
        // List.of lists refuse contains(null) with NullPointerException: still InvalidArgument for a bad
        // endpoint, and a List.of list is taken.
        assertThrows(InvalidArgumentException.class, () -> EtcdLockClient.builder().endpoints(List.of(" ")).build());
        EtcdLockClient.builder().endpoints(List.of("127.0.0.1:2379"));
        // Values are checked by the core when build() connects (the option is named).
        assertThrows(InvalidArgumentException.class, () -> EtcdLockClient.builder().endpoints(" ").build());
        assertThrows(InvalidArgumentException.class, () -> EtcdLockClient.builder().endpoints().build());
        assertThrows(InvalidArgumentException.class, () -> EtcdLockClient.builder().endpoints("bad endpoint").build());
        assertThrows(InvalidArgumentException.class, () -> EtcdLockClient.builder().ttl(null));
        assertThrows(InvalidArgumentException.class, () -> EtcdLockClient.builder().user(null, "p"));
        assertThrows(InvalidArgumentException.class, () -> EtcdLockClient.builder().tls(null, null, null));
    }

    @Test
    void oversizedNameIsRejectedByTheCore() {
        char[] big = new char[40 * 1024];
        Arrays.fill(big, 'n');
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> a.acquire(new String(big)));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
    }

    @Test
    void badTtl() {
        InvalidArgumentException zero = assertThrows(InvalidArgumentException.class,
                () -> EtcdLockClient.builder().ttl(Duration.ZERO).build());
        assertTrue(zero.getMessage().contains("ttl"), zero.getMessage());
        assertFalse(zero.isRetryable());
        assertThrows(InvalidArgumentException.class, () -> EtcdLockClient.builder().ttl(Duration.ofSeconds(-5)).build());
        // Above etcd's maximum lease TTL (9e9 s): rejected by the core before connecting.
        assertThrows(InvalidArgumentException.class,
                () -> builder().ttl(Duration.ofSeconds(9_000_000_001L)).build());
    }

    @Test
    void keepaliveIntervalIsAnOptionTheCoreChecks() throws Exception {
        try (EtcdLockClient c = builder().ttl(Duration.ofSeconds(5)).keepaliveInterval(Duration.ofMillis(250)).build();
                LockGuard g = c.acquire("ka-opt")) {
            assertTrue(g.isHeld());
        }
        for (Duration bad : new Duration[] {Duration.ofMillis(1), Duration.ofSeconds(3), Duration.ofMillis(-1)}) {
            InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
                    () -> builder().ttl(Duration.ofSeconds(5)).keepaliveInterval(bad).build());
            assertTrue(e.getMessage().contains("keepalive_interval"), e.getMessage());
        }
    }

    @Test
    void errorsSayWhetherARetryMaySucceed() {
        UnavailableException down = assertThrows(UnavailableException.class, () -> EtcdLockClient.builder()
                .endpoints("127.0.0.1:1").connectTimeout(Duration.ofMillis(300)).build());
        assertTrue(down.isRetryable());
        try (EtcdLockClient other = client(); LockGuard g = a.acquire("retry-held")) {
            LockTimeoutException busy = assertThrows(LockTimeoutException.class,
                    () -> other.acquire("retry-held", Duration.ofMillis(100)));
            assertTrue(busy.isRetryable());
            LockTimeoutException once = assertThrows(LockTimeoutException.class,
                    () -> other.acquire("retry-held", Duration.ZERO));
            assertTrue(once.isRetryable());
        }
    }

    @Test
    void badEndpointsAndTls() {
        assertThrows(InvalidArgumentException.class,
                () -> EtcdLockClient.builder().endpoints("https://127.0.0.1:1").build(), "https without TLS");
        assertThrows(InvalidArgumentException.class,
                () -> EtcdLockClient.builder().endpoints("127.0.0.1:1")
                        .tls(Path.of("/nonexistent/ca.pem"), null, null).build());
    }

    @Test
    void unreachableEndpointIsUnavailable() {
        long t0 = System.nanoTime();
        UnavailableException e = assertThrows(UnavailableException.class,
                () -> EtcdLockClient.builder().endpoints("http://127.0.0.1:1")
                        .connectTimeout(Duration.ofMillis(500)).build());
        assertTrue(e.getMessage().contains("127.0.0.1:1"), e.getMessage());
        assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(10));
    }

    @Test
    void guardedOperationsWithNulls() {
        try (LockGuard g = a.acquire(uniqueName("nullops"))) {
            assertThrows(InvalidArgumentException.class, () -> g.put((String) null, "v"));
            assertThrows(InvalidArgumentException.class, () -> g.put("k", null));
            assertThrows(InvalidArgumentException.class, () -> g.put((byte[]) null, new byte[0]));
            assertThrows(InvalidArgumentException.class, () -> g.get((byte[]) null));
            assertThrows(InvalidArgumentException.class, () -> g.delete((String) null));
            assertThrows(InvalidArgumentException.class, () -> g.onLost(null));
            assertTrue(g.isHeld());
        }
    }

    @Test
    void aRustPanicBecomesAnInternalException() {
        InternalException e = assertThrows(InternalException.class, NativeBridge::panicForTest);
        assertTrue(e.getMessage().contains("deliberate panic"), e.getMessage());
        // The library still works afterwards.
        try (LockGuard g = a.acquire(uniqueName("afterpanic"))) {
            assertTrue(g.isHeld());
        }
    }

    @Test
    void useAfterCloseIsClosed() {
        EtcdLockClient c = client();
        c.close();
        assertTrue(c.isClosed());
        assertThrows(ClosedException.class, () -> c.acquire("x"));
        assertThrows(ClosedException.class, () -> c.tryAcquire("x"));
        assertThrows(ClosedException.class, c::ttlSeconds);
        assertTrue(c.acquireAsync("x").isCompletedExceptionally());
    }

    @Test
    void everyErrorCodeHasItsOwnSubclass() {
        for (ErrorCode code : ErrorCode.values()) {
            EtcdLockException e = EtcdLockException.of(code, LossReason.LEASE_EXPIRED, "m");
            assertEquals(code, e.code());
            assertEquals(code == ErrorCode.INTERNAL ? InternalException.class : e.getClass(), e.getClass());
        }
        assertEquals(12, Arrays.stream(ErrorCode.values()).map(c -> EtcdLockException.of(c, null, "m").getClass())
                .distinct().count());
        assertEquals(LossReason.LEASE_EXPIRED,
                ((LockLostException) EtcdLockException.of(ErrorCode.LOCK_LOST, LossReason.LEASE_EXPIRED, "m")).reason());
    }

    @Test
    void builderFromTheEtcdlockEnvironment() throws Exception {
        String java = System.getProperty("java.home") + "/bin/java";
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        ProcessBuilder pb = new ProcessBuilder(java, "-cp", cp, EnvProbe.class.getName(), "envlock").redirectErrorStream(true);
        pb.environment().put("ETCDLOCK_ENDPOINTS", String.join(",", EtcdExtension.endpoints()));
        pb.environment().put("ETCDLOCK_TTL", "7");
        pb.environment().put("ETCDLOCK_NAMESPACE", "envns/");
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), out);
        assertTrue(out.contains("TTL 7"), out);
        assertTrue(out.contains("KEY envns/envlock/"), out);
        assertTrue(out.contains("ENDPOINTS " + String.join(",", EtcdExtension.endpoints())), out);
    }

    /** Core's one rule: an option set on the builder wins, and a malformed variable for it is ignored. */
    @Test
    void anExplicitOptionWinsOverAMalformedVariable() throws Exception {
        String java = System.getProperty("java.home") + "/bin/java";
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        ProcessBuilder pb = new ProcessBuilder(java, "-cp", cp, EnvProbe.class.getName(), "envlock2", "9").redirectErrorStream(true);
        pb.environment().put("ETCDLOCK_ENDPOINTS", String.join(",", EtcdExtension.endpoints()));
        pb.environment().put("ETCDLOCK_TTL", "garbage");
        // `etcdlock run` exports the lock key as ETCDLOCK_KEY: never read as a TLS key.
        pb.environment().put("ETCDLOCK_KEY", "jobs/abc");
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), out);
        assertTrue(out.contains("TTL 9"), out);
    }

    @Test
    void effectiveTtl() {
        assertEquals(5, a.ttlSeconds());
    }
}
