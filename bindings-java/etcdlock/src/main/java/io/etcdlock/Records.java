package io.etcdlock;

import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.Type;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

/**
 * The one decoder of core's records (core/src/records/mod.rs: {@link LockStatus}, {@link Metrics},
 * {@link Leader}), as Python's and Node's: a JSON object becomes an instance of a record class by
 * the class's own fields, so adding a field to a record in core needs no edit here.
 *
 * <p>The rules, the same for every record class:
 * <ul>
 *   <li>Each non-static, non-transient field of the class is read from the key of its name in
 *       snake_case ({@code leaseId} from {@code lease_id}); the class has a no-argument
 *       constructor (private is fine). Keys the class has no field for are ignored (a newer
 *       core may send more); a field whose key is missing is an error.</li>
 *   <li>{@code null} is accepted by fields of reference types and refused by primitives.</li>
 *   <li>{@code long}/{@link Long}: an integer, or a decimal string (64-bit identities travel as
 *       strings); {@code int}/{@link Integer}: an integer in range; {@code boolean},
 *       {@code double}, {@link String} as JSON has them.</li>
 *   <li>{@link Duration}: seconds as a number (the records' {@code *_seconds} keys), to the
 *       nanosecond.</li>
 *   <li>{@code byte[]}: an array of byte values 0-255.</li>
 *   <li>An enum: a string naming a constant, compared without case and underscores
 *       ({@code would_block} and {@code WouldBlock} both name {@code WOULD_BLOCK}).</li>
 *   <li>{@link List}, {@link Optional}, {@link Map} with {@link String} or enum keys; a map keyed
 *       by an enum skips keys naming no constant (a newer core's) and must name every constant.
 *       Lists and maps are unmodifiable, maps keep the document's order.</li>
 *   <li>Any other class: a nested record, by these same rules.</li>
 * </ul>
 * Anything else is an {@link IllegalArgumentException} naming the field's path; {@link #decode}
 * reports it as {@link InternalException} (a record core sent that does not decode is a bug).
 */
final class Records {
    private Records() {}

    /** The record of class {@code type} that {@code json} holds; {@code what} names it in errors. */
    static <T> T decode(String json, Class<T> type, String what) {
        return decodeAs(json, type, type, what);
    }

    /** The list of records of class {@code type} that the JSON array {@code json} holds. */
    @SuppressWarnings("unchecked")
    static <T> List<T> decodeList(String json, Class<T> type, String what) {
        return decodeAs(json, List.class, new ListOf(type), what);
    }

    private static <T> T decodeAs(String json, Class<T> result, Type type, String what) {
        try {
            return result.cast(value(Json.parse(json), type, "$"));
        } catch (IllegalArgumentException | ArithmeticException e) {
            InternalException x = new InternalException(what + " from the native core does not decode: " + e.getMessage());
            x.initCause(e);
            throw x;
        }
    }

    /** The JSON key of a field: its name in snake_case. */
    static String key(String field) {
        StringBuilder b = new StringBuilder(field.length() + 4);
        for (int i = 0; i < field.length(); i++) {
            char c = field.charAt(i);
            if (Character.isUpperCase(c)) {
                b.append('_').append(Character.toLowerCase(c));
            } else {
                b.append(c);
            }
        }
        return b.toString();
    }

    private static Object value(Object v, Type type, String path) {
        if (type instanceof ParameterizedType) {
            return generic(v, (ParameterizedType) type, path);
        }
        if (type instanceof ListOf) {
            return list(v, ((ListOf) type).element, path);
        }
        if (!(type instanceof Class)) {
            throw new IllegalArgumentException(path + ": unsupported field type " + type);
        }
        Class<?> c = (Class<?>) type;
        if (v == null) {
            if (c.isPrimitive()) {
                throw new IllegalArgumentException(path + " is null");
            }
            return null;
        }
        if (c == String.class) {
            return typed(v, String.class, path);
        }
        if (c == boolean.class || c == Boolean.class) {
            return typed(v, Boolean.class, path);
        }
        if (c == long.class || c == Long.class) {
            return integer(v, path);
        }
        if (c == int.class || c == Integer.class) {
            return Math.toIntExact(integer(v, path));
        }
        if (c == double.class || c == Double.class) {
            return typed(v, Number.class, path).doubleValue();
        }
        if (c == Duration.class) {
            return Duration.ofNanos(Math.round(typed(v, Number.class, path).doubleValue() * 1e9));
        }
        if (c == byte[].class) {
            return bytes(v, path);
        }
        if (c.isEnum()) {
            Object e = constant(c, typed(v, String.class, path));
            if (e == null) {
                throw new IllegalArgumentException(path + " names no " + c.getSimpleName() + ": " + v);
            }
            return e;
        }
        if (c.isPrimitive() || c.isArray() || c.isInterface() || c.getName().startsWith("java.")) {
            throw new IllegalArgumentException(path + ": unsupported field type " + c.getName());
        }
        return record(v, c, path);
    }

    private static Object generic(Object v, ParameterizedType p, String path) {
        Type raw = p.getRawType();
        Type[] args = p.getActualTypeArguments();
        if (raw == Optional.class) {
            return Optional.ofNullable(value(v, args[0], path));
        }
        if (v == null) {
            return null;
        }
        if (raw == List.class) {
            return list(v, args[0], path);
        }
        if (raw == Map.class) {
            return map(v, args[0], args[1], path);
        }
        throw new IllegalArgumentException(path + ": unsupported field type " + p);
    }

    private static List<Object> list(Object v, Type element, String path) {
        List<?> l = typed(v, List.class, path);
        List<Object> out = new ArrayList<>(l.size());
        for (int i = 0; i < l.size(); i++) {
            out.add(value(l.get(i), element, path + "[" + i + "]"));
        }
        return Collections.unmodifiableList(out);
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static Map<Object, Object> map(Object v, Type key, Type value, String path) {
        Map<String, Object> m = object(v, path);
        if (key == String.class) {
            Map<Object, Object> out = new LinkedHashMap<>();
            for (Map.Entry<String, Object> e : m.entrySet()) {
                out.put(e.getKey(), value(e.getValue(), value, path + "." + e.getKey()));
            }
            return Collections.unmodifiableMap(out);
        }
        if (key instanceof Class && ((Class<?>) key).isEnum()) {
            Class<? extends Enum> k = (Class<? extends Enum>) key;
            Map<Object, Object> out = new EnumMap(k);
            for (Map.Entry<String, Object> e : m.entrySet()) {
                Object c = constant(k, e.getKey());
                if (c != null) {
                    out.put(c, value(e.getValue(), value, path + "." + e.getKey()));
                }
            }
            for (Object c : k.getEnumConstants()) {
                if (!out.containsKey(c)) {
                    throw new IllegalArgumentException(path + " has no entry for " + c);
                }
            }
            return Collections.unmodifiableMap(out);
        }
        throw new IllegalArgumentException(path + ": unsupported map key type " + key);
    }

    private static Object record(Object v, Class<?> c, String path) {
        Map<String, Object> m = object(v, path);
        Object r;
        try {
            Constructor<?> k = c.getDeclaredConstructor();
            k.setAccessible(true);
            r = k.newInstance();
        } catch (ReflectiveOperationException e) {
            throw new IllegalArgumentException(c.getName() + " is no record class (no-argument constructor): " + e, e);
        }
        for (Field f : c.getDeclaredFields()) {
            int mod = f.getModifiers();
            if (Modifier.isStatic(mod) || Modifier.isTransient(mod) || f.isSynthetic()) {
                continue;
            }
            String k = key(f.getName());
            if (!m.containsKey(k)) {
                throw new IllegalArgumentException(path + "." + k + " is missing");
            }
            Object fv = value(m.get(k), f.getGenericType(), path + "." + k);
            try {
                f.setAccessible(true);
                f.set(r, fv);
            } catch (IllegalAccessException e) {
                throw new IllegalArgumentException(path + "." + k + " cannot be set: " + e, e);
            }
        }
        return r;
    }

    /** The constant of {@code type} that {@code name} names, without case and underscores; null if none. */
    private static Object constant(Class<?> type, String name) {
        String n = name.replace("_", "").toUpperCase(Locale.ROOT);
        for (Object c : type.getEnumConstants()) {
            if (((Enum<?>) c).name().replace("_", "").equals(n)) {
                return c;
            }
        }
        return null;
    }

    private static long integer(Object v, String path) {
        if (v instanceof Long) {
            return (Long) v;
        }
        if (v instanceof String) {
            try {
                return Long.parseLong((String) v);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException(path + " is not a decimal long: " + v);
            }
        }
        throw new IllegalArgumentException(path + " is not an integer: " + v);
    }

    private static byte[] bytes(Object v, String path) {
        List<?> l = typed(v, List.class, path);
        byte[] out = new byte[l.size()];
        for (int i = 0; i < out.length; i++) {
            Object b = l.get(i);
            if (!(b instanceof Long) || (Long) b < 0 || (Long) b > 255) {
                throw new IllegalArgumentException(path + " holds a non-byte: " + b);
            }
            out[i] = (byte) (long) (Long) b;
        }
        return out;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> object(Object v, String path) {
        return typed(v, Map.class, path);
    }

    private static <T> T typed(Object v, Class<T> type, String path) {
        if (!type.isInstance(v)) {
            throw new IllegalArgumentException(path + " is not a " + type.getSimpleName() + ": " + v);
        }
        return type.cast(v);
    }

    /** The type of a top-level array of records. */
    private static final class ListOf implements Type {
        final Class<?> element;

        ListOf(Class<?> element) {
            this.element = element;
        }
    }
}
