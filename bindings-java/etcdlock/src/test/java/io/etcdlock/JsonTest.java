package io.etcdlock;

import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;
import java.util.OptionalLong;

import org.junit.jupiter.api.Test;

/** The records' JSON reader and the decode of {@link LockStatus} and {@link Metrics} by field name (no etcd). */
class JsonTest {
    /** 7587862106543470159 (0x694d9a0b1c2d3e4f) is beyond 2^53: a double would round it. */
    private static final long BIG = 0x694d_9a0b_1c2d_3e4fL;

    @Test
    void valuesDecodeToMapsListsStringsLongsDoublesBooleansAndNull() {
        Object v = Json.parse(" {\"b\": [1, -2, 0.5, 1e3, true, false, null], \"a\": {}, \"c\": []}\n");
        Map<String, Object> expected = new LinkedHashMap<>();
        expected.put("b", Arrays.asList(1L, -2L, 0.5, 1000.0, true, false, null));
        expected.put("a", Map.of());
        expected.put("c", List.of());
        assertEquals(expected, v);
        assertEquals(List.of("b", "a", "c"), List.copyOf(((Map<?, ?>) v).keySet()));
        assertEquals(BIG, Json.parse(Long.toString(BIG)));
        assertEquals(Long.MIN_VALUE, Json.parse(Long.toString(Long.MIN_VALUE)));
        assertEquals(1.8446744073709552E19, Json.parse("18446744073709551615"));
    }

    @Test
    void escapesDecode() {
        assertEquals("q\" b\\ s/ \b\f\n\r\t é \u20ac \uD83D\uDE00",
                Json.parse("\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t \\u00e9 \u20ac \\uD83D\\uDE00\""));
        assertEquals("", Json.parse("\"\""));
    }

    @Test
    void aDecimalIdBeyond2To53IsExact() {
        Json.Obj o = Json.parseObject("{\"lease_id\": \"" + BIG + "\", \"revision\": \"-1\"}");
        assertEquals(BIG, o.decimal("lease_id"));
        assertEquals(-1L, o.decimal("revision"));
        assertNotEquals(BIG, (long) (double) BIG);
    }

    @Test
    void malformedTextIsAnIllegalArgumentException() {
        for (String bad : new String[] {"", " ", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "01", "-", "1.", "1e",
                ".5", "+1", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\uD83D\"", "\"\\uDE00x\"", "\"a\nb\"", "tru", "nul",
                "1 2", "{} x", "[1] ]", "{\"a\":1,\"a\":2}", "NaN", "'a'", "[".repeat(65) + "]".repeat(65)}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Json.parse(bad), bad);
            assertTrue(e.getMessage().startsWith("malformed JSON at offset "), e.getMessage());
        }
        assertThrows(IllegalArgumentException.class, () -> Json.parse(null));
        assertEquals(64, Json.MAX_DEPTH);
        assertInstanceOf(List.class, Json.parse("[".repeat(64) + "]".repeat(64)));
    }

    @Test
    void fieldsAreReadByNameAndType() {
        Json.Obj o = Json.parseObject("{\"s\": \"x\", \"n\": null, \"i\": 3, \"f\": 0.002, \"id\": \"1x\"}");
        assertEquals("x", o.string("s"));
        assertNull(o.string("n"));
        assertNull(o.optLong("n"));
        assertEquals(3L, o.lng("i"));
        assertEquals(Duration.ofMillis(2), o.seconds("f"));
        assertEquals(Duration.ofSeconds(3), o.seconds("i"));
        assertNull(o.seconds("n"));
        assertEquals("field \"missing\" is missing",
                assertThrows(IllegalArgumentException.class, () -> o.get("missing")).getMessage());
        assertThrows(IllegalArgumentException.class, () -> o.lng("s"));
        assertThrows(IllegalArgumentException.class, () -> o.lng("n"));
        assertThrows(IllegalArgumentException.class, () -> o.bool("i"));
        assertThrows(IllegalArgumentException.class, () -> o.decimal("id"));
        assertThrows(IllegalArgumentException.class, () -> o.obj("s"));
        assertThrows(IllegalArgumentException.class, () -> Json.parseObject("[]"));
        assertThrows(IllegalArgumentException.class, () -> Json.parseObjects("[1]"));
    }

    /** A contender as core's records encode it (core/src/records.rs). */
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
        StringBuilder acq = new StringBuilder();
        String[] results = {"acquired", "timeout", "would_block", "cancelled", "error"};
        for (int i = 0; i < results.length; i++) {
            acq.append(i == 0 ? "" : ",").append('"').append(results[i]).append("\":{\"count\":").append(i + 1)
                    .append(",\"wait_seconds\":").append(i).append(".5}");
        }
        String json = "{\"acquisitions\":{" + acq + "},\"waiting\":2,\"held\":1,\"held_seconds\":0.25,\"holds_ended\":4,"
                + "\"hold_seconds\":1.000000001,\"lost\":{\"LeaseExpired\":1,\"KeyDeleted\":2,\"ConnectionLost\":3,"
                + "\"ClientClosed\":4},\"keepalives\":9,\"keepalive_rtt_seconds\":0.002,\"wait_histogram\":{},"
                + "\"member_failures\":3}";
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
}
