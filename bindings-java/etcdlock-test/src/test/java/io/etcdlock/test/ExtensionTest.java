package io.etcdlock.test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;
import org.junit.platform.launcher.listeners.SummaryGeneratingListener;
import org.junit.platform.launcher.listeners.TestExecutionSummary;

import io.etcdlock.EtcdLockClient;
import io.etcdlock.InvalidArgumentException;
import io.etcdlock.LockGuard;
import io.etcdlock.LossReason;
import io.etcdlock.MemStore;

/**
 * The extension's promises, each shown by running a small test class through the JUnit launcher
 * (as surefire would) and looking at what it saw: a store per test method, shared with its
 * {@code @BeforeEach}; a client per parameter, on that store, closed after the test; the store
 * resumed after a test that silenced it, even a failing one; the client options of
 * {@link EtcdLockExtension#withClients}. And that a job which ignores the loss of its lock fails
 * {@link JobLossTest}'s check.
 */
class ExtensionTest {
    /** What the classes run below saw, by test name. */
    static final Map<String, Object[]> SEEN = new ConcurrentHashMap<>();

    static TestExecutionSummary run(Class<?> testClass) {
        SummaryGeneratingListener listener = new SummaryGeneratingListener();
        LauncherFactory.create().execute(LauncherDiscoveryRequestBuilder.request().selectors(selectClass(testClass)).build(),
                listener);
        return listener.getSummary();
    }

    @EtcdLockTest
    static class TwoTests {
        MemStore before;

        @BeforeEach
        void setUp(MemStore store) {
            before = store;
        }

        @Test
        void first(EtcdLockClient a, EtcdLockClient b, MemStore store) {
            SEEN.put("first", new Object[] {before, store, a, b});
            // Two clients of one store exclude each other: two instances of a service.
            try (LockGuard held = a.newLock("job").acquire(Duration.ofSeconds(5))) {
                assertTrue(b.newLock("job").tryAcquire().isEmpty());
            }
        }

        @Test
        void second(EtcdLockClient a, MemStore store) {
            SEEN.put("second", new Object[] {before, store, a});
            // A store of its own: nothing of the other test's is in it.
            assertTrue(store.keys("").isEmpty());
        }
    }

    @Test
    void eachTestGetsAStoreOfItsOwnAndClientsClosedAfterIt() {
        TestExecutionSummary s = run(TwoTests.class);
        assertEquals(2, s.getTestsSucceededCount(), () -> failures(s));
        Object[] first = SEEN.get("first");
        Object[] second = SEEN.get("second");
        MemStore s1 = (MemStore) first[1];
        MemStore s2 = (MemStore) second[1];
        assertSame(first[0], s1, "@BeforeEach gets the test's store");
        assertSame(second[0], s2);
        assertNotEquals(s1, s2);
        assertTrue(s1.name().startsWith("TwoTests.first-"), s1.name());
        EtcdLockClient a = (EtcdLockClient) first[2];
        EtcdLockClient b = (EtcdLockClient) first[3];
        assertNotSame(a, b);
        assertEquals(s1.endpoint(), a.endpoints());
        assertTrue(a.isClosed() && b.isClosed() && ((EtcdLockClient) second[2]).isClosed(), "closed after the test");
        // Closing the clients revoked their lease: the store holds nothing of theirs.
        assertTrue(s1.keys("").isEmpty());
    }

    static class Silenced {
        @RegisterExtension
        static EtcdLockExtension etcdlock = EtcdLockExtension.withClients(b -> b.ttl(Duration.ofSeconds(3))
                .requestTimeout(Duration.ofSeconds(1)).namespace("ns/"));

        @Test
        void silencesAndFails(EtcdLockClient client, MemStore store) {
            SEEN.put("silenced", new Object[] {store, client.ttlSeconds(), client});
            try (LockGuard g = client.newLock("job").acquire(Duration.ofSeconds(5))) {
                SEEN.put("silenced-key", new Object[] {g.key()});
            }
            store.silence(Duration.ofHours(1));
            throw new AssertionError("a test that fails while its store is silent");
        }
    }

    @Test
    void aSilencedStoreIsResumedAfterItsTestAndTheOptionsApply() throws Exception {
        TestExecutionSummary s = run(Silenced.class);
        assertEquals(1, s.getTestsFailedCount());
        assertEquals("a test that fails while its store is silent", s.getFailures().get(0).getException().getMessage());
        Object[] seen = SEEN.get("silenced");
        MemStore store = (MemStore) seen[0];
        assertEquals(3L, seen[1]);
        assertTrue(((String) SEEN.get("silenced-key")[0]).startsWith("ns/job/"));
        assertTrue(((EtcdLockClient) seen[2]).isClosed());
        // The store answers again: a fresh client takes a lock on it at once.
        try (EtcdLockClient c = EtcdLockClient.builder().endpoints(store.endpoint())
                .connectTimeout(Duration.ofSeconds(1)).build();
             LockGuard g = c.newLock("job").acquire(Duration.ofSeconds(1))) {
            assertTrue(g.isHeld());
        }
    }

    /** A job that goes on writing after its hold is lost: the bug JobLossTest is there to catch. */
    static class IgnoresLoss extends ReportJob {
        final EtcdLockClient client;
        final java.util.function.Consumer<String> out;

        IgnoresLoss(EtcdLockClient client, java.util.function.Consumer<String> out) {
            super(client, out);
            this.client = client;
            this.out = out;
        }

        @Override
        LossReason run() throws InterruptedException {
            LockGuard guard = client.newLock("report").acquire(Duration.ofSeconds(10));
            // (Until the extension closes the client after the test.)
            for (int line = 0; !client.isClosed(); line++) {
                out.accept("line " + line + " (token " + guard.fencingToken() + ")");
                Thread.sleep(20);
            }
            return null;
        }
    }

    @EtcdLockTest
    static class WithTheBrokenJob {
        @Test
        void myJobStopsWritingWhenItsLeaseExpires(EtcdLockClient client, MemStore store) throws Exception {
            BlockingQueue<String> lines = new LinkedBlockingQueue<>();
            var stopped = JobLossTest.started(new IgnoresLoss(client, lines::add), lines);
            assertTrue(store.expireLease(store.keys("report/").get(0).lease()));
            assertEquals(LossReason.LEASE_EXPIRED, stopped.get(1, TimeUnit.SECONDS), "the job stopped on the loss");
        }
    }

    @Test
    void theJobTestCatchesAJobThatIgnoresTheLoss() {
        TestExecutionSummary s = run(WithTheBrokenJob.class);
        assertEquals(1, s.getTestsFailedCount(), () -> failures(s));
        Throwable why = s.getFailures().get(0).getException();
        assertTrue(why instanceof java.util.concurrent.TimeoutException, why.toString());
    }

    @Test
    void newStoreNamesAStoreOfItsOwn() {
        MemStore a = EtcdLockExtension.newStore("Orders Test/with:odd chars");
        MemStore b = EtcdLockExtension.newStore("Orders Test/with:odd chars");
        assertNotEquals(a, b);
        assertTrue(a.name().startsWith("Orders_Test_with_odd_chars-"), a.name());
        MemStore longOne = EtcdLockExtension.newStore("x".repeat(200));
        assertTrue(longOne.name().length() <= 64, longOne.name());
        assertNotNull(EtcdLockExtension.newStore(null).endpoint());
        assertThrows(InvalidArgumentException.class, () -> EtcdLockExtension.withClients(null));
    }

    static String failures(TestExecutionSummary s) {
        List<String> out = new CopyOnWriteArrayList<>();
        s.getFailures().forEach(f -> out.add(f.getTestIdentifier().getDisplayName() + ": " + f.getException()));
        return String.join("\n", out);
    }
}
