package io.etcdlock;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The byte[] encoding the native side uses for results with several values (leader, queue,
 * keys) and for name lists: big-endian int and long, a string or byte string as an int length
 * and its bytes (UTF-8 for strings), an absent one as length -1.
 */
final class RecipeCodec {
    private final ByteBuffer b;

    RecipeCodec(byte[] bytes) {
        this.b = ByteBuffer.wrap(bytes);
    }

    int i32() {
        return b.getInt();
    }

    long i64() {
        return b.getLong();
    }

    byte[] bytes() {
        int n = b.getInt();
        if (n < 0) {
            return null;
        }
        byte[] out = new byte[n];
        b.get(out);
        return out;
    }

    String string() {
        byte[] v = bytes();
        return v == null ? null : new String(v, StandardCharsets.UTF_8);
    }

    Leader leader() {
        String key = string();
        byte[] value = bytes();
        long revision = i64();
        long lease = i64();
        return new Leader(key, value, revision, lease);
    }

    List<String> strings() {
        int n = i32();
        List<String> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            out.add(string());
        }
        return out;
    }

    static byte[] names(List<String> names) {
        List<byte[]> enc = new ArrayList<>(names.size());
        int size = 4;
        for (String n : names) {
            Args.checkName(n);
            byte[] v = n.getBytes(StandardCharsets.UTF_8);
            enc.add(v);
            size += 4 + v.length;
        }
        ByteBuffer out = ByteBuffer.allocate(size);
        out.putInt(enc.size());
        for (byte[] v : enc) {
            out.putInt(v.length).put(v);
        }
        return out.array();
    }
}
