package io.etcdlock;

import static org.junit.jupiter.api.Assertions.*;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The three ways the native library is found, and the per-user cache of the bundled copy,
 * each in fresh JVMs (with their own cache directory and {@code java.io.tmpdir}).
 */
class NativeLibraryTest {
    static final String BUNDLED = "/native/linux-x86_64/libetcdlock_jni.so";

    @TempDir
    Path tmp;

    static List<String> command(String... args) {
        String java = System.getProperty("java.home") + File.separator + "bin" + File.separator + "java";
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        List<String> cmd = new ArrayList<>(List.of(java));
        int i = 0;
        for (; i < args.length && args[i].startsWith("-"); i++) {
            cmd.add(args[i]);
        }
        cmd.addAll(List.of("-cp", cp, LoaderProbe.class.getName()));
        for (; i < args.length; i++) {
            cmd.add(args[i]);
        }
        return cmd;
    }

    static String probe(String... jvmArgs) throws Exception {
        Process p = new ProcessBuilder(command(jvmArgs)).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), out);
        return out;
    }

    /** The cache file name the bundled library gets: its SHA-256's first 32 hex digits. */
    static String cachedName() throws Exception {
        try (InputStream in = NativeLibrary.class.getResourceAsStream(BUNDLED)) {
            String h = NativeCache.hex(MessageDigest.getInstance("SHA-256").digest(in.readAllBytes()));
            return "libetcdlock_jni-" + h.substring(0, 32) + ".so";
        }
    }

    static String bundledSha256() throws Exception {
        return NativeCache.sha256(Path.of(NativeLibrary.class.getResource(BUNDLED).toURI()));
    }

    static List<String> names(Path dir) throws Exception {
        try (Stream<Path> s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString()).sorted().collect(Collectors.toList());
        }
    }

    @Test
    void loadsTheBundledCopyThroughTheCache() throws Exception {
        assertNotNull(NativeLibrary.class.getResource(BUNDLED), "the jar/classes carry the library");
        Path cache = tmp.resolve("cache");
        Path jtmp = Files.createDirectory(tmp.resolve("jtmp"));
        String out = probe("-D" + NativeLibrary.CACHE_PROPERTY + "=" + cache, "-Djava.io.tmpdir=" + jtmp);
        assertTrue(out.contains("FROM " + cache.resolve(cachedName())), out);
        assertTrue(out.contains("VERSION 0."), out);
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(cache)));
        assertEquals("r-x------", PosixFilePermissions.toString(Files.getPosixFilePermissions(cache.resolve(cachedName()))));
        assertEquals(List.of(), names(jtmp), "nothing extracted to java.io.tmpdir");
    }

    /** kill -9 twice: the cache holds the one copy the first JVM made, and nothing else is left anywhere. */
    @Test
    void killNineLeavesNothingBeyondTheCachedCopy() throws Exception {
        Path cache = tmp.resolve("cache");
        Path jtmp = Files.createDirectory(tmp.resolve("jtmp"));
        for (int run = 0; run < 2; run++) {
            Process p = new ProcessBuilder(command("-D" + NativeLibrary.CACHE_PROPERTY + "=" + cache,
                    "-Djava.io.tmpdir=" + jtmp, "hold")).redirectErrorStream(true).start();
            BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
            StringBuilder seen = new StringBuilder();
            String line;
            while ((line = r.readLine()) != null && !line.equals("READY")) {
                seen.append(line).append('\n');
            }
            assertEquals("READY", line, seen.toString());
            assertTrue(seen.toString().contains("FROM " + cache.resolve(cachedName())), seen.toString());
            p.destroyForcibly(); // SIGKILL on Linux
            assertTrue(p.waitFor(30, TimeUnit.SECONDS));
            assertEquals(137, p.exitValue(), "killed by SIGKILL");
            assertEquals(List.of(cachedName()), names(cache), "run " + run);
            assertEquals(List.of(), names(jtmp), "run " + run);
        }
    }

    /** A corrupted copy, and a different (valid) library planted under the expected name, are never loaded. */
    @Test
    void aCorruptedOrPlantedCacheFileIsRefused() throws Exception {
        Path cache = Files.createDirectory(tmp.resolve("cache"));
        Path file = cache.resolve(cachedName());
        byte[] good = Files.readAllBytes(Path.of(NativeLibrary.class.getResource(BUNDLED).toURI()));
        byte[] truncated = java.util.Arrays.copyOf(good, good.length / 2);
        Path otherLibrary = Path.of(System.getProperty("java.home"), "lib", "libzip.so");
        assertTrue(Files.isRegularFile(otherLibrary), otherLibrary + " (a valid ELF library to plant)");
        for (byte[] bad : List.of(truncated, Files.readAllBytes(otherLibrary))) {
            Files.write(file, bad);
            String out = probe("-D" + NativeLibrary.CACHE_PROPERTY + "=" + cache);
            assertTrue(out.contains("refusing the cached native library " + file), out);
            assertTrue(out.contains("FROM " + file) && out.contains("VERSION 0."), out);
            assertEquals(bundledSha256(), NativeCache.sha256(file), "replaced by the jar's copy");
            assertEquals(List.of(cachedName()), names(cache));
        }
    }

    /**
     * A cache directory that is a symlink, or another user's, is not used (the per-user temp
     * cache is); a group- and world-writable one of ours is made 0700.
     */
    @Test
    void aSymlinkedCacheDirectoryIsNotUsedAndAnOpenOneIsClosed() throws Exception {
        Path real = Files.createDirectory(tmp.resolve("real"));
        Path link = Files.createSymbolicLink(tmp.resolve("link"), real);
        Path jtmp = Files.createDirectory(tmp.resolve("jtmp"));
        String out = probe("-D" + NativeLibrary.CACHE_PROPERTY + "=" + link, "-Djava.io.tmpdir=" + jtmp);
        assertTrue(out.contains("not using the native library cache " + link), out);
        Path fallback = jtmp.resolve("etcdlock-" + System.getProperty("user.name"));
        assertTrue(out.contains("FROM " + fallback.resolve(cachedName())), out);
        assertEquals(List.of(), names(real));

        // Another user's directory (made so by chown where the test runs as root, as in CI).
        if (Integer.valueOf(0).equals(Files.getAttribute(Path.of("/proc/self"), "unix:uid"))) {
            Path others = Files.createDirectory(tmp.resolve("others"), PosixFilePermissions.asFileAttribute(
                    PosixFilePermissions.fromString("rwxrwxrwx")));
            Files.setAttribute(others, "unix:uid", 65534);
            out = probe("-D" + NativeLibrary.CACHE_PROPERTY + "=" + others, "-Djava.io.tmpdir=" + jtmp);
            assertTrue(out.contains("not using the native library cache " + others + ": " + others + " belongs to another user"), out);
            assertTrue(out.contains("FROM " + fallback.resolve(cachedName())), out);
            assertEquals(List.of(), names(others));
        }

        Path open = Files.createDirectory(tmp.resolve("open"));
        Files.setPosixFilePermissions(open, PosixFilePermissions.fromString("rwxrwxrwx"));
        out = probe("-D" + NativeLibrary.CACHE_PROPERTY + "=" + open);
        assertTrue(out.contains("FROM " + open.resolve(cachedName())), out);
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(open)));
    }

    /** Four JVMs starting together on an empty cache: all load, one copy stays, no temporary file is left. */
    @Test
    void concurrentStartsShareOneCopy() throws Exception {
        Path cache = tmp.resolve("cache");
        List<Process> ps = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            ps.add(new ProcessBuilder(command("-D" + NativeLibrary.CACHE_PROPERTY + "=" + cache)).redirectErrorStream(true).start());
        }
        for (Process p : ps) {
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertTrue(p.waitFor(60, TimeUnit.SECONDS));
            assertEquals(0, p.exitValue(), out);
            assertTrue(out.contains("FROM " + cache.resolve(cachedName())), out);
        }
        assertEquals(List.of(cachedName()), names(cache));
        assertEquals(bundledSha256(), NativeCache.sha256(cache.resolve(cachedName())));
    }

    @Test
    void systemPropertyOverrides() throws Exception {
        String file = new File(NativeLibrary.class.getResource(BUNDLED).toURI()).getAbsolutePath();
        String out = probe("-D" + NativeLibrary.PATH_PROPERTY + "=" + file);
        assertTrue(out.contains("FROM " + file), out);
    }

    @Test
    void javaLibraryPathIsTried() throws Exception {
        String dir = new File(NativeLibrary.class.getResource(BUNDLED).toURI()).getParent();
        String out = probe("-Djava.library.path=" + dir);
        assertTrue(out.contains("FROM java.library.path"), out);
    }

    @Test
    void platformName() {
        assertEquals("linux-x86_64", NativeLibrary.platform());
    }
}
