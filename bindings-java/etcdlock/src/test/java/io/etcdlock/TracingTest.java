package io.etcdlock;

import static io.etcdlock.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import io.opentelemetry.api.GlobalOpenTelemetry;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.EventData;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;

/** The client's OpenTelemetry spans, captured by the SDK's in-memory exporter, against real etcd. */
@ExtendWith(EtcdExtension.class)
class TracingTest {
    static final AttributeKey<String> NAME = AttributeKey.stringKey("etcdlock.lock.name");
    static final AttributeKey<String> OPERATION = AttributeKey.stringKey("etcdlock.operation");
    static final AttributeKey<String> OUTCOME = AttributeKey.stringKey("etcdlock.outcome");
    static final AttributeKey<Long> TOKEN = AttributeKey.longKey("etcdlock.fencing_token");
    static final AttributeKey<String> ERROR_TYPE = AttributeKey.stringKey("error.type");
    static final AttributeKey<String> END = AttributeKey.stringKey("etcdlock.end");
    static final AttributeKey<String> LOSS_REASON = AttributeKey.stringKey("etcdlock.loss.reason");

    InMemorySpanExporter exporter;
    OpenTelemetrySdk otel;
    EtcdLockClient a;
    EtcdLockClient b;

    @BeforeEach
    void setUp() {
        exporter = InMemorySpanExporter.create();
        otel = OpenTelemetrySdk.builder()
                .setTracerProvider(SdkTracerProvider.builder().addSpanProcessor(SimpleSpanProcessor.create(exporter)).build())
                .build();
        a = builder().openTelemetry(otel).build();
        b = client(); // no OpenTelemetry given, none global: no spans
    }

    @AfterEach
    void tearDown() {
        a.close();
        b.close();
        otel.close();
    }

    /** The finished spans named {@code name} whose lock is {@code lock}. */
    List<SpanData> spans(String name, String lock) {
        return exporter.getFinishedSpanItems().stream()
                .filter(s -> s.getName().equals(name) && lock.equals(s.getAttributes().get(NAME)))
                .collect(Collectors.toList());
    }

    SpanData one(String name, String lock) {
        List<SpanData> l = spans(name, lock);
        assertEquals(1, l.size(), name + " spans of " + lock + ": " + l);
        return l.get(0);
    }

    SpanData awaitOne(String name, String lock) throws InterruptedException {
        await(name + " of " + lock + " ended", Duration.ofSeconds(30), () -> !spans(name, lock).isEmpty());
        return one(name, lock);
    }

    @Test
    void lockThatWaitsForAnotherClientsRelease() throws Exception {
        String name = uniqueName("otel-wait");
        LockGuard held = b.newLock(name).acquire();
        CompletableFuture<LockGuard> waiting = CompletableFuture.supplyAsync(() -> a.newLock(name).acquire());
        awaitKeys(name, 2, Duration.ofSeconds(30)); // a's call is waiting in its queue
        long t0 = System.nanoTime();
        Thread.sleep(200); // how long b holds on: the wait the span must cover
        held.close();
        long waited = System.nanoTime() - t0;
        LockGuard g = waiting.get(30, TimeUnit.SECONDS);

        SpanData acq = one("etcdlock.acquire", name);
        assertEquals(SpanKind.INTERNAL, acq.getKind());
        assertEquals("lock", acq.getAttributes().get(OPERATION));
        assertEquals("acquired", acq.getAttributes().get(OUTCOME));
        assertEquals(g.fencingToken(), acq.getAttributes().get(TOKEN));
        assertEquals(StatusCode.UNSET, acq.getStatus().getStatusCode());
        assertNull(acq.getAttributes().get(ERROR_TYPE));
        long duration = acq.getEndEpochNanos() - acq.getStartEpochNanos();
        assertTrue(duration >= waited, "acquire span " + duration + " ns < the wait " + waited + " ns");
        assertEquals("etcdlock", acq.getInstrumentationScopeInfo().getName());
        assertEquals(OtelTelemetry.Version.VALUE, acq.getInstrumentationScopeInfo().getVersion());
        assertTrue(acq.getInstrumentationScopeInfo().getVersion().startsWith("0."), "version "
                + acq.getInstrumentationScopeInfo().getVersion());
        assertTrue(spans("etcdlock.hold", name).isEmpty(), "the hold span ends with the hold");
        g.close();
    }

    @Test
    void timeoutIsNotAnError() throws Exception {
        String name = uniqueName("otel-timeout");
        try (LockGuard held = b.newLock(name).acquire()) {
            assertThrows(LockTimeoutException.class, () -> a.newLock(name).acquire(Duration.ofMillis(200)));
            SpanData acq = one("etcdlock.acquire", name);
            assertEquals("lock", acq.getAttributes().get(OPERATION));
            assertEquals("timeout", acq.getAttributes().get(OUTCOME));
            assertEquals(StatusCode.UNSET, acq.getStatus().getStatusCode());
            assertNull(acq.getAttributes().get(ERROR_TYPE));
            assertNull(acq.getAttributes().get(TOKEN));

            exporter.reset();
            assertFalse(a.newLock(name).tryLock());
            SpanData tried = one("etcdlock.acquire", name);
            assertEquals("try_lock", tried.getAttributes().get(OPERATION));
            assertEquals("would_block", tried.getAttributes().get(OUTCOME));
            assertEquals(StatusCode.UNSET, tried.getStatus().getStatusCode());
        }
    }

    @Test
    void badInputIsAnError() {
        String name = "n".repeat(32769); // over core's limit: refused by core, not by Java's checks
        assertThrows(InvalidArgumentException.class, () -> a.newLock(name).acquire());
        SpanData acq = one("etcdlock.acquire", name);
        assertEquals("error", acq.getAttributes().get(OUTCOME));
        assertEquals("InvalidArgument", acq.getAttributes().get(ERROR_TYPE));
        assertEquals(StatusCode.ERROR, acq.getStatus().getStatusCode());
        assertTrue(spans("etcdlock.hold", name).isEmpty());
    }

    @Test
    void holdEndedByUnlock() throws Exception {
        String name = uniqueName("otel-release");
        EtcdLock lock = a.newLock(name);
        lock.lock();
        long token = lock.guard().fencingToken();
        assertTrue(lock.tryLock(), "re-entry");
        lock.unlock();
        assertTrue(spans("etcdlock.hold", name).isEmpty(), "held until the last unlock");
        lock.unlock();
        SpanData hold = one("etcdlock.hold", name);
        assertEquals(SpanKind.INTERNAL, hold.getKind());
        assertEquals(token, hold.getAttributes().get(TOKEN));
        assertEquals("released", hold.getAttributes().get(END));
        assertEquals(StatusCode.UNSET, hold.getStatus().getStatusCode());
        assertTrue(hold.getEvents().isEmpty());
        assertEquals(1, spans("etcdlock.acquire", name).size(), "a re-entry asks etcd nothing and makes no span");
        SpanData acq = one("etcdlock.acquire", name);
        assertTrue(hold.getStartEpochNanos() >= acq.getStartEpochNanos());
    }

    @Test
    void holdLostByAnOutsideDelete() throws Exception {
        String name = uniqueName("otel-lost");
        LockGuard g = a.newLock(name).acquire();
        raw().getKVClient().delete(bs(g.key())).get(10, TimeUnit.SECONDS);
        // Nobody calls anything: the loss core reports ends the span.
        SpanData hold = awaitOne("etcdlock.hold", name);
        assertEquals("lost", hold.getAttributes().get(END));
        assertEquals(g.fencingToken(), hold.getAttributes().get(TOKEN));
        assertEquals(StatusCode.ERROR, hold.getStatus().getStatusCode());
        List<EventData> events = hold.getEvents();
        assertEquals(1, events.size(), events.toString());
        assertEquals("etcdlock.lost", events.get(0).getName());
        assertEquals("KeyDeleted", events.get(0).getAttributes().get(LOSS_REASON));
        assertThrows(LockLostException.class, g::close);
        assertEquals(1, spans("etcdlock.hold", name).size(), "one end");
    }

    @Test
    void asyncAndCampaign() throws Exception {
        String name = uniqueName("otel-async");
        LockGuard g = a.newLock(name).acquireAsync(Duration.ofSeconds(10)).get(30, TimeUnit.SECONDS);
        assertEquals("acquired", one("etcdlock.acquire", name).getAttributes().get(OUTCOME));
        g.close();
        assertEquals("released", one("etcdlock.hold", name).getAttributes().get(END));

        String election = uniqueName("otel-election");
        try (Leadership l = a.newElection(election).campaign("node-1")) {
            SpanData acq = one("etcdlock.acquire", election);
            assertEquals("campaign", acq.getAttributes().get(OPERATION));
            assertEquals(l.fencingToken(), acq.getAttributes().get(TOKEN));
        }
        assertEquals("released", one("etcdlock.hold", election).getAttributes().get(END));
    }

    @Test
    void cancelledAsyncWaitIsNotAnError() throws Exception {
        String name = uniqueName("otel-cancel");
        try (LockGuard held = b.newLock(name).acquire()) {
            CompletableFuture<LockGuard> f = a.newLock(name).acquireAsync();
            awaitKeys(name, 2, Duration.ofSeconds(30));
            assertTrue(f.cancel(true));
            SpanData acq = awaitOne("etcdlock.acquire", name);
            assertEquals("cancelled", acq.getAttributes().get(OUTCOME));
            assertEquals(StatusCode.UNSET, acq.getStatus().getStatusCode());
        }
    }

    @Test
    void globalOpenTelemetryByDefault() throws Exception {
        GlobalOpenTelemetry.resetForTest();
        GlobalOpenTelemetry.set(otel);
        try (EtcdLockClient c = client()) {
            String name = uniqueName("otel-global");
            c.newLock(name).acquire().close();
            assertEquals("acquired", one("etcdlock.acquire", name).getAttributes().get(OUTCOME));
            assertEquals("released", one("etcdlock.hold", name).getAttributes().get(END));
        } finally {
            GlobalOpenTelemetry.resetForTest();
        }
    }

    @Test
    void noSpansWithoutAnOpenTelemetry() throws Exception {
        String name = uniqueName("otel-none");
        b.newLock(name).acquire().close(); // b: none given, none global
        assertTrue(exporter.getFinishedSpanItems().isEmpty());
    }
}
