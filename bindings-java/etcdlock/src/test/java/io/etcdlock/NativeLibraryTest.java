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
        assertEquals("linux-x86_64", NativeLibrary.platform(), "this suite runs on glibc x86_64 Linux");
        assertFalse(Libc.isMusl(), "a glibc JVM is not musl even with musl installed beside it");
    }

    static String folderAndFile(String os, String arch, boolean musl) {
        NativeLibrary.Target t = NativeLibrary.target(os, arch, musl);
        return t.folder + "/" + t.file;
    }

    @Test
    void platformFoldersAndFileNames() {
        assertEquals("linux-x86_64/libetcdlock_jni.so", folderAndFile("Linux", "amd64", false));
        assertEquals("linux-x86_64-musl/libetcdlock_jni.so", folderAndFile("Linux", "amd64", true));
        assertEquals("linux-x86_64/libetcdlock_jni.so", folderAndFile("Linux", "x86_64", false));
        assertEquals("linux-aarch64/libetcdlock_jni.so", folderAndFile("Linux", "aarch64", false));
        assertEquals("linux-aarch64-musl/libetcdlock_jni.so", folderAndFile("Linux", "aarch64", true));
        assertEquals("macos-aarch64/libetcdlock_jni.dylib", folderAndFile("Mac OS X", "aarch64", false));
        assertEquals("macos-x86_64/libetcdlock_jni.dylib", folderAndFile("Mac OS X", "x86_64", false));
        assertEquals("macos-aarch64/libetcdlock_jni.dylib", folderAndFile("Mac OS X", "arm64", false));
        assertEquals("windows-x86_64/etcdlock_jni.dll", folderAndFile("Windows 11", "amd64", false));
        assertEquals("windows-x86_64/etcdlock_jni.dll", folderAndFile("Windows Server 2022", "amd64", false));
        assertEquals("windows-x86_64/etcdlock_jni.dll", folderAndFile("Windows 10", "x64", false));
        assertEquals("/native/windows-x86_64/etcdlock_jni.dll", NativeLibrary.target("Windows 11", "amd64", false).resource());
        assertEquals("etcdlock_jni-0123456789abcdef0123456789abcdef.dll",
                NativeLibrary.target("Windows 11", "amd64", false).cachedName("0123456789abcdef0123456789abcdef" + "0".repeat(32)));
        assertEquals("libetcdlock_jni-0123456789abcdef0123456789abcdef.so",
                NativeLibrary.target("Linux", "amd64", false).cachedName("0123456789abcdef0123456789abcdef" + "f".repeat(32)));
    }

    @Test
    void unsupportedPlatformsNameThemselvesAndTheSupportedList() {
        String[][] cases = {{"SunOS", "sparcv9", "sunos-sparcv9"}, {"Linux", "riscv64", "linux-riscv64"},
                {"Windows 11", "aarch64", "windows-aarch64"}, {"FreeBSD", "amd64", "freebsd-x86_64"},
                {"Linux", "arm", "linux-arm"}};
        for (String[] c : cases) {
            UnsatisfiedLinkError e = assertThrows(UnsatisfiedLinkError.class, () -> NativeLibrary.target(c[0], c[1], false));
            assertTrue(e.getMessage().contains("unsupported platform " + c[2] + " (os.name \"" + c[0] + "\", os.arch \"" + c[1] + "\""), e.getMessage());
            assertTrue(e.getMessage().contains(String.join(", ", NativeLibrary.SUPPORTED)), e.getMessage());
            assertTrue(e.getMessage().contains(NativeLibrary.PATH_PROPERTY), e.getMessage());
        }
        UnsatisfiedLinkError e = assertThrows(UnsatisfiedLinkError.class, () -> NativeLibrary.target("Linux", "riscv64", true));
        assertTrue(e.getMessage().contains("unsupported platform linux-riscv64-musl"), e.getMessage());
    }

    @Test
    void muslIsTheJvmsOwnCLibrary() throws Exception {
        assertEquals(Boolean.TRUE, Libc.muslFromMaps(List.of(
                "7f1c2a000000-7f1c2a014000 r--p 00000000 08:01 1234 /lib/ld-musl-x86_64.so.1")));
        assertEquals(Boolean.TRUE, Libc.muslFromMaps(List.of(
                "7f1c2a000000-7f1c2a014000 r-xp 00000000 08:01 1234 /usr/lib/libc.musl-aarch64.so.1")));
        assertEquals(Boolean.FALSE, Libc.muslFromMaps(List.of(
                "7f1c2a000000-7f1c2a014000 r-xp 00000000 08:01 1234 /usr/lib/x86_64-linux-gnu/libc.so.6",
                "7f1c2b000000-7f1c2b014000 r-xp 00000000 08:01 1235 /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")));
        assertNull(Libc.muslFromMaps(List.of("7f1c2a000000-7f1c2a014000 rw-p 00000000 00:00 0 [heap]")));
        // This JVM (glibc): its maps say so, and so does its launcher's ELF interpreter.
        assertEquals(Boolean.FALSE, Libc.muslFromMaps(Files.readAllLines(Path.of("/proc/self/maps"))));
        String interp = Libc.elfInterpreter(Path.of(System.getProperty("java.home"), "bin", "java"));
        assertNotNull(interp);
        assertTrue(interp.contains("ld-linux"), interp);
        assertFalse(Libc.isMuslPath(interp));
        assertTrue(Libc.isMuslPath("/lib/ld-musl-x86_64.so.1"));
    }

    @Test
    void versionComparison() {
        assertTrue(NativeLibrary.expectedVersion().matches("[0-9]+\\.[0-9]+\\.[0-9]+"), NativeLibrary.expectedVersion());
        assertFalse(NativeLibrary.expectedVersion().endsWith("-SNAPSHOT"), NativeLibrary.expectedVersion());
        assertNull(NativeLibrary.versionMismatch("0.1.0", "0.1.0", "/x/libetcdlock_jni.so"));
        String m = NativeLibrary.versionMismatch("0.2.0", "0.1.0", "/opt/lib/libetcdlock_jni.so");
        assertEquals("etcdlock: the native library /opt/lib/libetcdlock_jni.so is version 0.1.0, this jar needs version 0.2.0;"
                + " remove it from java.library.path (or -Detcdlock.library.path) to use the jar's own library,"
                + " or install the matching one", m);
        assertTrue(NativeLibrary.versionMismatch("0.2.0", null, "/l.so").contains("is version unknown (it reports none)"));
    }

    /** The C source of a real JNI library that reports another version (a stale install). */
    static final String STALE_C = "#include <jni.h>\n"
            + "JNIEXPORT jstring JNICALL Java_io_etcdlock_NativeBridge_version(JNIEnv *env, jclass c) {\n"
            + "  return (*env)->NewStringUTF(env, \"0.0.1-stale\");\n}\n";

    static Path buildStaleLibrary(Path dir) throws Exception {
        Path src = dir.resolve("stale.c");
        Files.writeString(src, STALE_C);
        Path lib = dir.resolve("libetcdlock_jni.so");
        Path jdk = Path.of(System.getProperty("java.home"));
        Process cc = new ProcessBuilder("cc", "-shared", "-fPIC", "-I" + jdk.resolve("include"),
                "-I" + jdk.resolve("include").resolve("linux"), "-o", lib.toString(), src.toString())
                .redirectErrorStream(true).start();
        String out = new String(cc.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(cc.waitFor(60, TimeUnit.SECONDS));
        assertEquals(0, cc.exitValue(), "cc (needs a C compiler and the JDK's jni.h): " + out);
        return lib;
    }

    static String failingProbe(String... jvmArgs) throws Exception {
        Process p = new ProcessBuilder(command(jvmArgs)).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        assertNotEquals(0, p.exitValue(), out);
        return out;
    }

    /**
     * A real library of another version (a small JNI library built here whose version() says
     * 0.0.1-stale) on java.library.path, or named by the override, is refused by name; one
     * with no version() at all (the JDK's libzip, named as ours) too.
     */
    @Test
    void aLibraryOfAnotherVersionIsRefused() throws Exception {
        Path dir = Files.createDirectory(tmp.resolve("stale"));
        Path lib = buildStaleLibrary(dir);
        String expected = NativeLibrary.expectedVersion();
        String want = "the native library " + lib + " is version 0.0.1-stale, this jar needs version " + expected;
        String out = failingProbe("-Djava.library.path=" + dir);
        assertTrue(out.contains("UnsatisfiedLinkError") && out.contains(want), out);
        out = failingProbe("-D" + NativeLibrary.PATH_PROPERTY + "=" + lib);
        assertTrue(out.contains(want), out);

        Path none = Files.createDirectory(tmp.resolve("none"));
        Files.copy(Path.of(System.getProperty("java.home"), "lib", "libzip.so"), none.resolve("libetcdlock_jni.so"));
        out = failingProbe("-Djava.library.path=" + none);
        assertTrue(out.contains("the native library " + none.resolve("libetcdlock_jni.so")
                + " is version unknown (it reports none), this jar needs version " + expected), out);
    }
}
