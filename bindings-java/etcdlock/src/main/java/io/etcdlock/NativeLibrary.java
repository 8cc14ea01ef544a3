package io.etcdlock;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Loads the native part ({@code libetcdlock_jni.so}) with no setup:
 * <ol>
 *   <li>if the system property {@code etcdlock.library.path} names a file, that file (an override);</li>
 *   <li>else {@code System.loadLibrary("etcdlock_jni")} (i.e. {@code java.library.path});</li>
 *   <li>else the copy inside this jar at {@code /native/<os>-<arch>/}, through a per-user cache.</li>
 * </ol>
 *
 * <p>The cache: the jar's library is copied once to {@code libetcdlock_jni-<sha256>.so} in
 * {@code $XDG_CACHE_HOME/etcdlock} (default {@code ~/.cache/etcdlock}; macOS
 * {@code ~/Library/Caches/etcdlock}; {@code -Detcdlock.cache.dir} overrides), and every later
 * JVM loads that file, so neither a normal exit nor {@code kill -9} leaves a file behind. The
 * directory must be this user's and is made owner-only ({@code 0700}); the file must be a
 * regular file of this user whose SHA-256 is the jar copy's, checked before every load: a
 * corrupted or planted file is never loaded but replaced (atomically, so JVMs starting
 * together share one copy safely). If the directory cannot be used (not this user's, a
 * symlink, not writable), {@code java.io.tmpdir/etcdlock-<user>} is tried the same way, and
 * as a last resort the library is extracted to a new owner-only temp file removed at exit.
 */
public final class NativeLibrary {
    /** System property naming the native library file to load instead of the bundled one. */
    public static final String PATH_PROPERTY = "etcdlock.library.path";
    /** System property naming the cache directory for the bundled library. */
    public static final String CACHE_PROPERTY = "etcdlock.cache.dir";
    private static final Logger LOG = LoggerFactory.getLogger(NativeLibrary.class);
    private static volatile String loadedFrom;

    private NativeLibrary() {}

    /** Load the library once; later calls return at once. */
    public static synchronized void load() {
        if (loadedFrom != null) {
            return;
        }
        String override = System.getProperty(PATH_PROPERTY);
        if (override != null && !override.isEmpty()) {
            System.load(Path.of(override).toAbsolutePath().toString());
            loadedFrom = override;
            LOG.debug("etcdlock native library loaded from {} ({})", override, PATH_PROPERTY);
            return;
        }
        try {
            System.loadLibrary("etcdlock_jni");
            loadedFrom = "java.library.path";
            LOG.debug("etcdlock native library loaded from java.library.path");
            return;
        } catch (UnsatisfiedLinkError notOnPath) {
            // fall through to the bundled copy
        }
        String resource = "/native/" + platform() + "/libetcdlock_jni.so";
        byte[] lib;
        try (InputStream in = NativeLibrary.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new UnsatisfiedLinkError("etcdlock: no native library for " + platform()
                        + " in this jar (it has: " + String.join(", ", bundledPlatforms())
                        + "); set -D" + PATH_PROPERTY + "=/path/to/libetcdlock_jni.so built for this platform");
            }
            lib = in.readAllBytes();
        } catch (IOException e) {
            throw new UnsatisfiedLinkError("etcdlock: cannot read " + resource + ": " + e);
        }
        String hash = sha256(lib);
        String name = "libetcdlock_jni-" + hash.substring(0, 32) + ".so";
        for (Path dir : cacheDirs()) {
            try {
                Path file = NativeCache.install(dir, name, lib, hash);
                System.load(file.toString());
                loadedFrom = file.toString();
                LOG.debug("etcdlock native library loaded from the cache {}", file);
                return;
            } catch (IOException | SecurityException e) {
                LOG.warn("etcdlock: not using the native library cache {}: {}", dir, e.getMessage());
            }
        }
        try {
            Path tmp = extract(lib);
            System.load(tmp.toAbsolutePath().toString());
            loadedFrom = tmp.toString();
            LOG.debug("etcdlock native library extracted from {} to {}", resource, tmp);
        } catch (IOException e) {
            throw new UnsatisfiedLinkError("etcdlock: cannot extract " + resource + ": " + e);
        }
    }

    /** The cache directories to try, in order. */
    static java.util.List<Path> cacheDirs() {
        java.util.List<Path> dirs = new java.util.ArrayList<>();
        String prop = System.getProperty(CACHE_PROPERTY, "");
        if (!prop.isEmpty()) {
            dirs.add(Path.of(prop).toAbsolutePath());
        } else {
            String xdg = System.getenv("XDG_CACHE_HOME");
            String home = System.getProperty("user.home", "");
            boolean mac = System.getProperty("os.name", "").toLowerCase(Locale.ROOT).startsWith("mac");
            if (xdg != null && Path.of(xdg).isAbsolute()) {
                dirs.add(Path.of(xdg, "etcdlock"));
            } else if (mac && !home.isEmpty()) {
                dirs.add(Path.of(home, "Library", "Caches", "etcdlock"));
            } else if (!home.isEmpty()) {
                dirs.add(Path.of(home, ".cache", "etcdlock"));
            }
        }
        String user = System.getProperty("user.name", "user").replaceAll("[^A-Za-z0-9._-]", "_");
        dirs.add(Path.of(System.getProperty("java.io.tmpdir"), "etcdlock-" + user));
        return dirs;
    }

    private static String sha256(byte[] b) {
        try {
            return NativeCache.hex(java.security.MessageDigest.getInstance("SHA-256").digest(b));
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is a required JDK algorithm", e);
        }
    }

    /** The platforms whose library this jar carries (for the error when this one is missing). */
    static java.util.List<String> bundledPlatforms() {
        java.util.List<String> found = new java.util.ArrayList<>();
        for (String p : new String[] {"linux-x86_64", "linux-aarch64", "macos-x86_64", "macos-aarch64"}) {
            if (NativeLibrary.class.getResource("/native/" + p + "/libetcdlock_jni.so") != null
                    || NativeLibrary.class.getResource("/native/" + p + "/libetcdlock_jni.dylib") != null) {
                found.add(p);
            }
        }
        return found;
    }

    /**
     * The last resort: a new file in {@code java.io.tmpdir}, created exclusively
     * ({@code O_EXCL}: never an existing file or a planted symlink) and owner-only, removed at
     * a normal exit. Not {@code Files.createTempFile}: its random name comes from
     * {@code SecureRandom}, whose provider classes and seeding cost the process about 1 MB of
     * native memory for nothing a PID-and-clock name with an exclusive create does not give.
     */
    private static Path extract(byte[] lib) throws IOException {
        Path dir = Path.of(System.getProperty("java.io.tmpdir"));
        long pid = ProcessHandle.current().pid();
        for (int attempt = 0; ; attempt++) {
            Path tmp = dir.resolve("etcdlock_jni-" + pid + "-" + Long.toHexString(System.nanoTime()) + ".so");
            java.io.OutputStream out;
            try {
                out = Files.newOutputStream(tmp, java.nio.file.StandardOpenOption.CREATE_NEW, java.nio.file.StandardOpenOption.WRITE);
            } catch (java.nio.file.FileAlreadyExistsException e) {
                if (attempt > 100) {
                    throw e;
                }
                continue;
            }
            tmp.toFile().deleteOnExit();
            try (out) {
                tmp.toFile().setReadable(false, false);
                tmp.toFile().setReadable(true, true);
                tmp.toFile().setWritable(false, false);
                tmp.toFile().setWritable(true, true);
                out.write(lib);
            }
            return tmp;
        }
    }

    /** Where the library came from ({@code null} before {@link #load()}). */
    public static String loadedFrom() {
        return loadedFrom;
    }

    /** The {@code <os>-<arch>} folder name for this JVM, e.g. {@code linux-x86_64}. */
    public static String platform() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        String o = os.startsWith("linux") ? "linux" : os.startsWith("mac") ? "macos" : os.replace(' ', '_');
        String a = arch.equals("amd64") || arch.equals("x86_64") ? "x86_64"
                : arch.equals("aarch64") || arch.equals("arm64") ? "aarch64" : arch;
        return o + "-" + a;
    }
}
