package io.etcdlock;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A strict JSON reader (RFC 8259) for the records the native core sends ({@link LockStatus},
 * {@link Metrics}): objects become {@link LinkedHashMap}s in document order, arrays
 * {@link List}s, strings {@link String}s, integers {@link Long}s (a {@link Double} beyond the
 * range of a long), other numbers {@link Double}s, {@code true}/{@code false} {@link Boolean}s
 * and {@code null} null. Anything else (trailing text, a lone surrogate escape, a raw control
 * character, a leading zero, nesting deeper than {@value #MAX_DEPTH}) is an
 * {@link IllegalArgumentException} naming the offset.
 *
 * <p>{@link Obj} reads a decoded object by field name with the records' conventions: 64-bit
 * identities are decimal strings, durations are seconds in keys ending {@code _seconds}; a
 * missing field or one of another type is an {@link IllegalArgumentException} too.
 */
final class Json {
    static final int MAX_DEPTH = 64;

    private final String s;
    private int i;

    private Json(String s) {
        this.s = s;
    }

    /** The value {@code text} holds. */
    static Object parse(String text) {
        if (text == null) {
            throw new IllegalArgumentException("JSON text is null");
        }
        Json p = new Json(text);
        p.ws();
        Object v = p.value(0);
        p.ws();
        if (p.i != text.length()) {
            throw p.error("trailing text");
        }
        return v;
    }

    /** The object {@code text} holds. */
    static Obj parseObject(String text) {
        return Obj.of(parse(text), "the record");
    }

    /** The array of objects {@code text} holds. */
    static List<Obj> parseObjects(String text) {
        return objects(parse(text), "the records");
    }

    /** A record the native core sent that does not decode: a bug, reported as {@link ErrorCode#INTERNAL}. */
    static InternalException internal(String what, RuntimeException cause) {
        InternalException e = new InternalException(what + " from the native core does not decode: " + cause.getMessage());
        e.initCause(cause);
        return e;
    }

    private static List<Obj> objects(Object v, String what) {
        if (!(v instanceof List)) {
            throw new IllegalArgumentException(what + " is not an array");
        }
        List<?> l = (List<?>) v;
        List<Obj> out = new ArrayList<>(l.size());
        for (Object o : l) {
            out.add(Obj.of(o, "an element of " + what));
        }
        return out;
    }

    private IllegalArgumentException error(String what) {
        return new IllegalArgumentException("malformed JSON at offset " + i + ": " + what);
    }

    private void ws() {
        while (i < s.length()) {
            char c = s.charAt(i);
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                return;
            }
            i++;
        }
    }

    private char peek() {
        if (i >= s.length()) {
            throw error("unexpected end");
        }
        return s.charAt(i);
    }

    private void expect(char c) {
        if (peek() != c) {
            throw error("expected '" + c + "'");
        }
        i++;
    }

    private Object value(int depth) {
        if (depth >= MAX_DEPTH) {
            throw error("nested deeper than " + MAX_DEPTH);
        }
        char c = peek();
        switch (c) {
            case '{':
                return object(depth);
            case '[':
                return array(depth);
            case '"':
                return string();
            case 't':
                return word("true", Boolean.TRUE);
            case 'f':
                return word("false", Boolean.FALSE);
            case 'n':
                return word("null", null);
            default:
                if (c == '-' || (c >= '0' && c <= '9')) {
                    return number();
                }
                throw error("unexpected '" + c + "'");
        }
    }

    private Object word(String w, Object v) {
        if (!s.startsWith(w, i)) {
            throw error("expected " + w);
        }
        i += w.length();
        return v;
    }

    private Map<String, Object> object(int depth) {
        expect('{');
        Map<String, Object> m = new LinkedHashMap<>();
        ws();
        if (peek() == '}') {
            i++;
            return m;
        }
        while (true) {
            ws();
            if (peek() != '"') {
                throw error("expected a string key");
            }
            String k = string();
            ws();
            expect(':');
            ws();
            Object v = value(depth + 1);
            if (m.containsKey(k)) {
                throw error("duplicate key \"" + k + "\"");
            }
            m.put(k, v);
            ws();
            if (peek() == ',') {
                i++;
                continue;
            }
            expect('}');
            return m;
        }
    }

    private List<Object> array(int depth) {
        expect('[');
        List<Object> l = new ArrayList<>();
        ws();
        if (peek() == ']') {
            i++;
            return l;
        }
        while (true) {
            ws();
            l.add(value(depth + 1));
            ws();
            if (peek() == ',') {
                i++;
                continue;
            }
            expect(']');
            return l;
        }
    }

    private String string() {
        expect('"');
        StringBuilder b = new StringBuilder();
        while (true) {
            char c = peek();
            i++;
            if (c == '"') {
                return b.toString();
            }
            if (c < 0x20) {
                i--;
                throw error("raw control character in a string");
            }
            if (c != '\\') {
                b.append(c);
                continue;
            }
            char e = peek();
            i++;
            switch (e) {
                case '"': b.append('"'); break;
                case '\\': b.append('\\'); break;
                case '/': b.append('/'); break;
                case 'b': b.append('\b'); break;
                case 'f': b.append('\f'); break;
                case 'n': b.append('\n'); break;
                case 'r': b.append('\r'); break;
                case 't': b.append('\t'); break;
                case 'u': {
                    char u = hex4();
                    if (Character.isHighSurrogate(u)) {
                        if (!s.startsWith("\\u", i)) {
                            throw error("lone surrogate escape");
                        }
                        i += 2;
                        char lo = hex4();
                        if (!Character.isLowSurrogate(lo)) {
                            throw error("lone surrogate escape");
                        }
                        b.append(u).append(lo);
                    } else if (Character.isLowSurrogate(u)) {
                        throw error("lone surrogate escape");
                    } else {
                        b.append(u);
                    }
                    break;
                }
                default:
                    i--;
                    throw error("bad escape '\\" + e + "'");
            }
        }
    }

    private char hex4() {
        if (i + 4 > s.length()) {
            throw error("short \\u escape");
        }
        int v = 0;
        for (int k = 0; k < 4; k++) {
            int d = Character.digit(s.charAt(i + k), 16);
            if (d < 0) {
                throw error("bad \\u escape");
            }
            v = v * 16 + d;
        }
        i += 4;
        return (char) v;
    }

    private Object number() {
        int start = i;
        if (peek() == '-') {
            i++;
        }
        if (peek() == '0') {
            i++;
        } else {
            digits();
        }
        boolean integral = true;
        if (i < s.length() && s.charAt(i) == '.') {
            i++;
            digits();
            integral = false;
        }
        if (i < s.length() && (s.charAt(i) == 'e' || s.charAt(i) == 'E')) {
            i++;
            if (i < s.length() && (s.charAt(i) == '+' || s.charAt(i) == '-')) {
                i++;
            }
            digits();
            integral = false;
        }
        String t = s.substring(start, i);
        if (integral) {
            try {
                return Long.parseLong(t);
            } catch (NumberFormatException beyondLong) {
                return Double.parseDouble(t);
            }
        }
        return Double.parseDouble(t);
    }

    private void digits() {
        char c = peek();
        if (c < '0' || c > '9') {
            throw error("expected a digit");
        }
        while (i < s.length() && s.charAt(i) >= '0' && s.charAt(i) <= '9') {
            i++;
        }
    }

    /** A decoded JSON object, read by field name. */
    static final class Obj {
        private final Map<String, Object> m;

        private Obj(Map<String, Object> m) {
            this.m = m;
        }

        @SuppressWarnings("unchecked")
        static Obj of(Object v, String what) {
            if (!(v instanceof Map)) {
                throw new IllegalArgumentException(what + " is not an object");
            }
            return new Obj((Map<String, Object>) v);
        }

        /** The field's value, which may be null; a missing field is an error. */
        Object get(String key) {
            if (!m.containsKey(key)) {
                throw new IllegalArgumentException("field \"" + key + "\" is missing");
            }
            return m.get(key);
        }

        private <T> T typed(String key, Class<T> type, boolean nullable) {
            Object v = get(key);
            if (v == null && nullable) {
                return null;
            }
            if (!type.isInstance(v)) {
                throw new IllegalArgumentException("field \"" + key + "\" is not a " + type.getSimpleName() + ": " + v);
            }
            return type.cast(v);
        }

        /** A string, or null when the field is null. */
        String string(String key) {
            return typed(key, String.class, true);
        }

        boolean bool(String key) {
            return typed(key, Boolean.class, false);
        }

        /** An integer, or null when the field is null. */
        Long optLong(String key) {
            return typed(key, Long.class, true);
        }

        long lng(String key) {
            return typed(key, Long.class, false);
        }

        /** A 64-bit identity, sent as a decimal string. */
        long decimal(String key) {
            String v = typed(key, String.class, false);
            try {
                return Long.parseLong(v);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("field \"" + key + "\" is not a decimal long: " + v);
            }
        }

        /** Seconds (a {@code *_seconds} field) as a duration to the nanosecond, or null when null. */
        Duration seconds(String key) {
            Object v = get(key);
            if (v == null) {
                return null;
            }
            if (!(v instanceof Number)) {
                throw new IllegalArgumentException("field \"" + key + "\" is not a number: " + v);
            }
            return Duration.ofNanos(Math.round(((Number) v).doubleValue() * 1e9));
        }

        Obj obj(String key) {
            return of(get(key), "field \"" + key + "\"");
        }

        List<?> list(String key) {
            return typed(key, List.class, false);
        }

        List<Obj> objects(String key) {
            return Json.objects(get(key), "field \"" + key + "\"");
        }

        /** The field names, in document order. */
        java.util.Set<String> keys() {
            return Collections.unmodifiableSet(m.keySet());
        }
    }
}
