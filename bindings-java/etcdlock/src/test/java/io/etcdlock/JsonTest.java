package io.etcdlock;

import static org.junit.jupiter.api.Assertions.*;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

/** The records' JSON reader (no etcd); {@link RecordsTest} decodes records from it. */
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
}
