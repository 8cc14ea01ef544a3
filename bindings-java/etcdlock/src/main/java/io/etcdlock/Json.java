package io.etcdlock;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A strict JSON reader (RFC 8259) for the records the native core sends, which
 * {@link Records} then decodes: objects become {@link LinkedHashMap}s in document order, arrays
 * {@link List}s, strings {@link String}s, integers {@link Long}s (a {@link Double} beyond the
 * range of a long), other numbers {@link Double}s, {@code true}/{@code false} {@link Boolean}s
 * and {@code null} null. Anything else (trailing text, a lone surrogate escape, a raw control
 * character, a leading zero, nesting deeper than {@value #MAX_DEPTH}) is an
 * {@link IllegalArgumentException} naming the offset.
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
}
