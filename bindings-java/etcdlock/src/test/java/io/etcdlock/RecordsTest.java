package io.etcdlock;

import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;

import org.junit.jupiter.api.Test;

/**
 * The one generic decoder of core's records ({@link Records}): {@link LockStatus},
 * {@link Metrics} and {@link Leader} by field name, unknown fields accepted (no etcd).
 */
class RecordsTest {
    /** 7587862106543470159 (0x694d9a0b1c2d3e4f) is beyond 2^53: a double would round it. */
    private static final long BIG = 0x694d_9a0b_1c2d_3e4fL;

    /** A contender as core's records encode it (core/src/records/mod.rs). */
    private static String contender(String kind, String permits, boolean holds) {
        return "{\"key\":\"locks/a/694d9a0b1c2d3e4f\",\"kind\":\"" + kind + "\",\"permits\":" + permits + ",\"holds\":" + holds
                + ",\"lease_id\":\"" + BIG + "\",\"ttl_remaining\":9,\"fencing_token\":\"42\",\"owner\":\"h:7\",\"age_ms\":1500,"
                + "\"value\":[0,255],\"host\":\"h\",\"pid\":7,\"language\":\"rust\",\"local_waiters\":null,"
                + "\"metadata\":{\"app\":\"billing\",\"z\":\"\\u00e9\"},\"foreign\":false}";
    }

    @Test
    void aStatusDecodesByFieldName() {
        LockStatus st = LockStatus.of("{\"name\":\"a\",\"revision\":\"43\",\"holders\":[" + contender("permit", "3", true)
                + "],\"waiters\":[" + contender("reader", "null", false) + "],\"kind\":\"semaphore\"}");
        assertEquals("a", st.name());
        assertEquals(43, st.revision());
        assertEquals(LockStatus.LockKind.SEMAPHORE, st.lockKind().orElseThrow());
        LockStatus.Contender h = st.holders().get(0);
        assertEquals("locks/a/694d9a0b1c2d3e4f", h.key());
        assertEquals(LockStatus.Kind.PERMIT, h.kind());
        assertEquals(3, h.permits());
        assertTrue(h.holds());
        assertEquals(BIG, h.leaseId());
        assertEquals(OptionalLong.of(9), h.ttlRemainingSeconds());
        assertEquals(42, h.fencingToken());
        assertEquals("h:7", h.owner().orElseThrow());
        assertEquals(OptionalLong.of(1500), h.ageMillis());
        assertArrayEquals(new byte[] {0, (byte) 255}, h.value());
        assertEquals("h", h.host().orElseThrow());
        assertEquals(OptionalInt.of(7), h.pid());
        assertEquals("rust", h.language().orElseThrow());
        assertEquals(OptionalInt.empty(), h.localWaiters());
        assertEquals(List.of("app", "z"), List.copyOf(h.metadata().keySet()));
        assertEquals("\u00e9", h.metadata().get("z"));
        assertFalse(h.foreign());
        LockStatus.Contender w = st.waiters().get(0);
        assertEquals(LockStatus.Kind.READER, w.kind());
        assertEquals(1, w.permits());
        assertFalse(w.holds());
        assertEquals(1, st.waiters().size());

        List<LockStatus> l = LockStatus.listOf("[{\"name\":\"x\",\"revision\":\"1\",\"holders\":[],\"waiters\":[],\"kind\":null}]");
        assertEquals(1, l.size());
        assertEquals("x", l.get(0).name());
        assertTrue(l.get(0).lockKind().isEmpty());
        assertEquals(List.of(), LockStatus.listOf("[]"));
    }

    @Test
    void aRecordThatDoesNotDecodeIsInternal() {
        InternalException e = assertThrows(InternalException.class, () -> LockStatus.of("{\"name\":\"a\"}"));
        assertEquals(ErrorCode.INTERNAL, e.code());
        assertInstanceOf(IllegalArgumentException.class, e.getCause());
        assertThrows(InternalException.class, () -> LockStatus.listOf("{}"));
        assertThrows(InternalException.class, () -> Metrics.of("{\"acquisitions\": {}}"));
        assertThrows(InternalException.class, () -> Metrics.of("not json"));
    }

    @Test
    void metricsDecodeByFieldName() {
        String json = metricsJson();
        Metrics m = Metrics.of(json);
        for (Metrics.Result r : Metrics.Result.values()) {
            assertEquals(r.ordinal() + 1, m.count(r));
            assertEquals(Duration.ofMillis(500).plusSeconds(r.ordinal()), m.waitTotal(r));
        }
        assertEquals(2, m.waiting());
        assertEquals(1, m.held());
        assertEquals(Duration.ofMillis(250), m.heldDuration());
        assertEquals(4, m.holdsEnded());
        assertEquals(Duration.ofNanos(1_000_000_001), m.holdTotal());
        assertEquals(1, m.lost(LossReason.LEASE_EXPIRED));
        assertEquals(2, m.lost(LossReason.KEY_DELETED));
        assertEquals(3, m.lost(LossReason.CONNECTION_LOST));
        assertEquals(4, m.lost(LossReason.CLIENT_CLOSED));
        assertEquals(9, m.keepalives());
        assertEquals(Duration.ofMillis(2), m.keepaliveRoundTrip());
        assertEquals(3, m.memberFailures());
        assertNull(Metrics.of(json.replace("\"keepalive_rtt_seconds\":0.002", "\"keepalive_rtt_seconds\":null"))
                .keepaliveRoundTrip());
    }

    /** A key core may add to any record later: every decoder must accept it. */
    private static final String NEW = "\"added_later\":{\"nested\":[1,\"x\",null]},";

    private static String metricsJson() {
        StringBuilder acq = new StringBuilder();
        String[] results = {"acquired", "timeout", "would_block", "cancelled", "error"};
        for (int i = 0; i < results.length; i++) {
            acq.append(i == 0 ? "" : ",").append('"').append(results[i]).append("\":{\"count\":").append(i + 1)
                    .append(",\"wait_seconds\":").append(i).append(".5}");
        }
        return "{\"acquisitions\":{" + acq + "},\"waiting\":2,\"held\":1,\"held_seconds\":0.25,\"holds_ended\":4,"
                + "\"hold_seconds\":1.000000001,\"lost\":{\"LeaseExpired\":1,\"KeyDeleted\":2,\"ConnectionLost\":3,"
                + "\"ClientClosed\":4},\"keepalives\":9,\"keepalive_rtt_seconds\":0.002,\"wait_histogram\":{},"
                + "\"member_failures\":3}";
    }

    @Test
    void aStatusWithAnUnknownFieldDecodes() {
        String c = contender("permit", "3", true);
        LockStatus st = LockStatus.of("{" + NEW + "\"name\":\"a\",\"revision\":\"43\",\"holders\":[{" + NEW
                + c.substring(1) + "],\"waiters\":[],\"kind\":\"semaphore\",\"zz_new\":true}");
        assertEquals("a", st.name());
        assertEquals(43, st.revision());
        assertEquals(1, st.holders().size());
        assertEquals(3, st.holders().get(0).permits());
        assertEquals(BIG, st.holders().get(0).leaseId());
        assertEquals(0, st.waiters().size());
    }

    @Test
    void metricsWithAnUnknownFieldDecode() {
        String json = metricsJson();
        Metrics m = Metrics.of("{" + NEW + json.substring(1, json.length() - 1)
                + ",\"acquisitions_new\":7,\"lost_new\":{\"SomeNewReason\":1}}");
        assertEquals(3, m.memberFailures());
        assertEquals(1, m.count(Metrics.Result.ACQUIRED));
        // A loss reason a newer core counts is skipped, the known ones stay.
        Metrics n = Metrics.of(json.replace("\"ClientClosed\":4", "\"ClientClosed\":4,\"SomeNewReason\":5"));
        assertEquals(4, n.lost(LossReason.CLIENT_CLOSED));
        assertEquals(4, n.count(Metrics.Result.CANCELLED));
    }

    @Test
    void aLeaderDecodesWithAnUnknownField() {
        Leader l = Leader.of("{\"key\":\"jobs/694d9a0b1c2d3e4f\",\"value\":[104,105]," + NEW
                + "\"revision\":\"42\",\"lease_id\":\"" + BIG + "\"}").orElseThrow();
        assertEquals("jobs/694d9a0b1c2d3e4f", l.key());
        assertEquals("hi", l.valueAsString());
        assertEquals(42, l.revision());
        assertEquals(BIG, l.leaseId());
        assertEquals(Optional.empty(), Leader.of(null));
        assertEquals(l, Leader.of("{\"lease_id\":\"" + BIG + "\",\"revision\":42,\"value\":[104,105],"
                + "\"key\":\"jobs/694d9a0b1c2d3e4f\"}").orElseThrow());
    }

    @Test
    void aMissingOrMistypedFieldNamesItsPath() {
        InternalException e = assertThrows(InternalException.class,
                () -> Leader.of("{\"key\":\"k\",\"value\":[],\"revision\":\"1\"}"));
        assertEquals("a leader from the native core does not decode: $.lease_id is missing", e.getMessage());
        e = assertThrows(InternalException.class,
                () -> Leader.of("{\"key\":\"k\",\"value\":[256],\"revision\":\"1\",\"lease_id\":\"1\"}"));
        assertTrue(e.getMessage().endsWith("$.value holds a non-byte: 256"), e.getMessage());
        e = assertThrows(InternalException.class,
                () -> Leader.of("{\"key\":\"k\",\"value\":[],\"revision\":\"1x\",\"lease_id\":\"1\"}"));
        assertTrue(e.getMessage().endsWith("$.revision is not a decimal long: 1x"), e.getMessage());
        e = assertThrows(InternalException.class,
                () -> Leader.of("{\"key\":\"k\",\"value\":[],\"revision\":null,\"lease_id\":\"1\"}"));
        assertTrue(e.getMessage().endsWith("$.revision is null"), e.getMessage());
        e = assertThrows(InternalException.class, () -> LockStatus.of("{\"name\":\"a\",\"revision\":\"1\",\"holders\":["
                + contender("nope", "null", true) + "],\"waiters\":[],\"kind\":null}"));
        assertTrue(e.getMessage().endsWith("$.holders[0].kind names no Kind: nope"), e.getMessage());
        e = assertThrows(InternalException.class, () -> Metrics.of(metricsJson().replace("\"KeyDeleted\":2,", "")));
        assertTrue(e.getMessage().endsWith("$.lost has no entry for KEY_DELETED"), e.getMessage());
    }

    @Test
    void snakeCaseKeysComeFromCamelCaseFields() {
        assertEquals("lease_id", Records.key("leaseId"));
        assertEquals("keepalive_rtt_seconds", Records.key("keepaliveRttSeconds"));
        assertEquals("name", Records.key("name"));
    }
}
