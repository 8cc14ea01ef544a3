package io.etcdlock;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The byte[] encoding the native side uses for a multi-lock's keys ({@code NativeBridge.multiKeys}):
 * a big-endian int count, then each key as an int length and its UTF-8 bytes.
 */
final class RecipeCodec {
    private final ByteBuffer b;

    RecipeCodec(byte[] bytes) {
        this.b = ByteBuffer.wrap(bytes);
    }

    List<String> strings() {
        int n = b.getInt();
        List<String> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            byte[] v = new byte[b.getInt()];
            b.get(v);
            out.add(new String(v, StandardCharsets.UTF_8));
        }
        return out;
    }
}
