package io.etcdlock;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;

/**
 * Which C library this (Linux) JVM runs on, for the choice between the glibc and the musl build
 * of the native library. The answer is about this process, not about what is installed: a glibc
 * system may have musl's loader installed beside its own (Debian's {@code musl} package puts
 * {@code /lib/ld-musl-x86_64.so.1} there), and a glibc JVM must still get the glibc build.
 * <ol>
 *   <li>{@code /proc/self/maps}: the JVM's own mappings name its C library; musl's is its loader
 *       {@code ld-musl-<arch>.so.1} (Alpine also names it {@code libc.musl-<arch>.so.1}), glibc's
 *       is {@code libc.so.6};</li>
 *   <li>where {@code /proc} is not readable: the ELF interpreter ({@code PT_INTERP}) of the
 *       JVM's launcher {@code $java.home/bin/java}, which is musl's loader for a musl build;</li>
 *   <li>else glibc.</li>
 * </ol>
 */
final class Libc {
    private static volatile Boolean musl;

    private Libc() {}

    /** Whether this JVM runs on musl (computed once). */
    static boolean isMusl() {
        Boolean m = musl;
        if (m == null) {
            m = detect();
            musl = m;
        }
        return m;
    }

    private static boolean detect() {
        try {
            Boolean fromMaps = muslFromMaps(Files.readAllLines(Path.of("/proc/self/maps"), StandardCharsets.ISO_8859_1));
            if (fromMaps != null) {
                return fromMaps;
            }
        } catch (IOException | SecurityException | java.io.UncheckedIOException e) {
            // no /proc: try the launcher's interpreter
        }
        try {
            String interp = elfInterpreter(Path.of(System.getProperty("java.home"), "bin", "java"));
            if (interp != null) {
                return isMuslPath(interp);
            }
        } catch (IOException | RuntimeException e) {
            // not an ELF file we can read
        }
        return false;
    }

    /** musl (true), glibc (false) or unknown (null) from the lines of a {@code /proc/<pid>/maps}. */
    static Boolean muslFromMaps(List<String> lines) {
        boolean glibc = false;
        for (String line : lines) {
            int slash = line.indexOf('/');
            if (slash < 0) {
                continue;
            }
            String path = line.substring(slash);
            if (isMuslPath(path)) {
                return true;
            }
            String name = path.substring(path.lastIndexOf('/') + 1);
            if (name.equals("libc.so.6") || name.startsWith("libc-2.") || name.startsWith("ld-linux")) {
                glibc = true;
            }
        }
        return glibc ? Boolean.FALSE : null;
    }

    static boolean isMuslPath(String path) {
        String name = path.substring(path.lastIndexOf('/') + 1);
        return name.startsWith("ld-musl-") || name.startsWith("libc.musl-");
    }

    /** The {@code PT_INTERP} path of an ELF executable, or null if it has none. */
    static String elfInterpreter(Path exe) throws IOException {
        try (FileChannel ch = FileChannel.open(exe, StandardOpenOption.READ)) {
            ByteBuffer h = ByteBuffer.allocate(64);
            ch.read(h, 0);
            h.flip();
            if (h.remaining() < 52 || h.getInt(0) != 0x7f454c46) {
                return null;
            }
            boolean is64 = h.get(4) == 2;
            h.order(h.get(5) == 2 ? ByteOrder.BIG_ENDIAN : ByteOrder.LITTLE_ENDIAN);
            long phoff = is64 ? h.getLong(32) : Integer.toUnsignedLong(h.getInt(28));
            int phentsize = Short.toUnsignedInt(h.getShort(is64 ? 54 : 42));
            int phnum = Short.toUnsignedInt(h.getShort(is64 ? 56 : 44));
            ByteBuffer ph = ByteBuffer.allocate(phentsize).order(h.order());
            for (int i = 0; i < phnum && i < 64; i++) {
                ph.clear();
                ch.read(ph, phoff + (long) i * phentsize);
                if (ph.getInt(0) == 3) { // PT_INTERP
                    long off = is64 ? ph.getLong(8) : Integer.toUnsignedLong(ph.getInt(4));
                    long size = is64 ? ph.getLong(32) : Integer.toUnsignedLong(ph.getInt(16));
                    if (size <= 0 || size > 4096) {
                        return null;
                    }
                    ByteBuffer s = ByteBuffer.allocate((int) size);
                    ch.read(s, off);
                    String interp = new String(s.array(), 0, s.position(), StandardCharsets.ISO_8859_1);
                    int nul = interp.indexOf('\0');
                    return nul >= 0 ? interp.substring(0, nul) : interp;
                }
            }
            return null;
        }
    }
}
