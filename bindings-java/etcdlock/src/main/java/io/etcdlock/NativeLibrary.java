package io.etcdlock;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Loads the native part ({@code libetcdlock_jni.so}, {@code libetcdlock_jni.dylib} or
 * {@code etcdlock_jni.dll}) with no setup:
 * <ol>
 *   <li>if the system property {@code etcdlock.library.path} names a file, that file (an override);</li>
 *   <li>else {@code System.loadLibrary("etcdlock_jni")} (i.e. {@code java.library.path});</li>
 *   <li>else the copy inside this jar at {@code /native/<platform>/<file>}, through a per-user cache.</li>
 * </ol>
 *
 * <p>The platform folders and files the jar carries ({@link #SUPPORTED}):
 * {@code linux-x86_64}, {@code linux-aarch64} (glibc), {@code linux-x86_64-musl},
 * {@code linux-aarch64-musl} (musl, e.g. Alpine), each with {@code libetcdlock_jni.so};
 * {@code macos-x86_64}, {@code macos-aarch64} with {@code libetcdlock_jni.dylib};
 * {@code windows-x86_64} with {@code etcdlock_jni.dll}. Any other platform is an
 * {@link UnsatisfiedLinkError} naming it and that list (the override still works there).
 * On Linux the C library is the one this JVM runs on: musl when the JVM's own process maps
 * musl's loader ({@code /proc/self/maps}), else when the JVM executable's ELF interpreter is
 * musl's; a system that merely has musl installed beside glibc is glibc.
 *
 * <p>Whichever way it is found, the library must report the version of this jar (without
 * {@code -SNAPSHOT}): a library left on {@code java.library.path} or named by the override from
 * another release is refused with an {@link UnsatisfiedLinkError} naming both versions and
 * its path (it is loaded by then, so the JVM must be restarted without it).
 *
 * <p>The cache: the jar's library is copied once to {@code libetcdlock_jni-<sha256>.so}
 * ({@code .dylib}; {@code etcdlock_jni-<sha256>.dll} on Windows) in
 * {@code $XDG_CACHE_HOME/etcdlock} (default {@code ~/.cache/etcdlock}; macOS
 * {@code ~/Library/Caches/etcdlock}; Windows {@code %LOCALAPPDATA%\etcdlock\cache}, default
 * {@code %USERPROFILE%\AppData\Local\etcdlock\cache}; {@code -Detcdlock.cache.dir}
 * overrides), and every later JVM loads that file, so neither a normal exit nor {@code kill -9}
 * leaves a file behind. On POSIX file systems the directory must be this user's and is made
 * owner-only ({@code 0700}); on Windows it is in the user's profile, whose ACLs keep other
 * users out. The file must be a regular file (of this user, on POSIX) whose SHA-256 is the jar
 * copy's, checked before every load: a corrupted or planted file is never loaded but replaced
 * (atomically, so JVMs starting together share one copy safely). If the directory cannot be
 * used (not this user's, a symlink, not writable), {@code java.io.tmpdir/etcdlock-<user>} is
 * tried the same way, and as a last resort the library is extracted to a new owner-only temp
 * file removed at exit (on Windows a loaded DLL cannot be deleted, so that file stays).
 */
public final class NativeLibrary {
    /** System property naming the native library file to load instead of the bundled one. */
    public static final String PATH_PROPERTY = "etcdlock.library.path";
    /** System property naming the cache directory for the bundled library. */
    public static final String CACHE_PROPERTY = "etcdlock.cache.dir";
    /** The platform folders a jar may carry a library for, in the jar's {@code /native/}. */
    public static final java.util.List<String> SUPPORTED = java.util.List.of(
            "linux-x86_64", "linux-aarch64", "linux-x86_64-musl", "linux-aarch64-musl",
            "macos-x86_64", "macos-aarch64", "windows-x86_64");
    private static final String NAME = "etcdlock_jni";
    private static final Logger LOG = LoggerFactory.getLogger(NativeLibrary.class);
    private static volatile String loadedFrom;
    /** The file loaded, where known (for the version error). */
    private static volatile String loadedFile;

    private NativeLibrary() {}

    /** A platform folder of the jar and the library file name in it. */
    static final class Target {
        final String folder;
        final String file;

        Target(String folder, String file) {
            this.folder = folder;
            this.file = file;
        }

        /** The resource path of the library in the jar, e.g. {@code /native/linux-x86_64/libetcdlock_jni.so}. */
        String resource() {
            return "/native/" + folder + "/" + file;
        }

        /** The cache file name for the library with this SHA-256 (hex). */
        String cachedName(String sha256) {
            int dot = file.lastIndexOf('.');
            return file.substring(0, dot) + "-" + sha256.substring(0, 32) + file.substring(dot);
        }

        @Override
        public String toString() {
            return resource();
        }
    }

    /** Load the library once; later calls return at once. */
    public static synchronized void load() {
        if (loadedFrom != null) {
            return;
        }
        String override = System.getProperty(PATH_PROPERTY);
        if (override != null && !override.isEmpty()) {
            String abs = Path.of(override).toAbsolutePath().toString();
            System.load(abs);
            loadedFile = abs;
            loadedFrom = override;
            LOG.debug("etcdlock native library loaded from {} ({})", override, PATH_PROPERTY);
            return;
        }
        try {
            System.loadLibrary(NAME);
            loadedFile = findOnLibraryPath();
            loadedFrom = "java.library.path" + (loadedFile == null ? "" : " (" + loadedFile + ")");
            LOG.debug("etcdlock native library loaded from {}", loadedFrom);
            return;
        } catch (UnsatisfiedLinkError notOnPath) {
            // fall through to the bundled copy
        }
        Target target = target();
        String resource = target.resource();
        byte[] lib;
        try (InputStream in = NativeLibrary.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new UnsatisfiedLinkError("etcdlock: no native library for " + target.folder
                        + " in this jar (it has: " + String.join(", ", bundledPlatforms())
                        + "); set -D" + PATH_PROPERTY + "=/path/to/" + target.file + " built for this platform");
            }
            lib = in.readAllBytes();
        } catch (IOException e) {
            throw new UnsatisfiedLinkError("etcdlock: cannot read " + resource + ": " + e);
        }
        String hash = sha256(lib);
        String name = target.cachedName(hash);
        for (Path dir : cacheDirs()) {
            try {
                Path file = NativeCache.install(dir, name, lib, hash);
                System.load(file.toString());
                loadedFile = file.toString();
                loadedFrom = file.toString();
                LOG.debug("etcdlock native library loaded from the cache {}", file);
                return;
            } catch (IOException | SecurityException e) {
                LOG.warn("etcdlock: not using the native library cache {}: {}", dir, e.getMessage());
            }
        }
        try {
            Path tmp = extract(lib, target.file.substring(target.file.lastIndexOf('.')));
            System.load(tmp.toAbsolutePath().toString());
            loadedFile = tmp.toString();
            loadedFrom = tmp.toString();
            LOG.debug("etcdlock native library extracted from {} to {}", resource, tmp);
        } catch (IOException e) {
            throw new UnsatisfiedLinkError("etcdlock: cannot extract " + resource + ": " + e);
        }
    }

    /** The file {@code System.loadLibrary} found on {@code java.library.path}, or null. */
    private static String findOnLibraryPath() {
        String file = System.mapLibraryName(NAME);
        for (String dir : System.getProperty("java.library.path", "").split(java.io.File.pathSeparator)) {
            if (!dir.isEmpty()) {
                Path p = Path.of(dir, file);
                if (Files.isRegularFile(p)) {
                    return p.toAbsolutePath().toString();
                }
            }
        }
        return null;
    }

    /**
     * Refuse the loaded library unless it reports this jar's version. {@code nativeVersion} is
     * what the library's {@code version()} returned, null if it has no such function.
     */
    static void checkVersion(String nativeVersion) {
        String problem = versionMismatch(expectedVersion(), nativeVersion,
                loadedFile != null ? loadedFile : String.valueOf(loadedFrom));
        if (problem != null) {
            throw new UnsatisfiedLinkError(problem);
        }
    }

    /**
     * Why a library at {@code path} reporting {@code actual} (null: reports none) may not serve
     * a jar of version {@code expected}, or null if it may.
     */
    static String versionMismatch(String expected, String actual, String path) {
        if (expected != null && expected.equals(actual)) {
            return null;
        }
        return "etcdlock: the native library " + path + " is version "
                + (actual == null ? "unknown (it reports none)" : actual)
                + ", this jar needs version " + expected + "; remove it from java.library.path (or -D" + PATH_PROPERTY
                + ") to use the jar's own library, or install the matching one";
    }

    /** This jar's version without {@code -SNAPSHOT}: the version its native library reports. */
    static String expectedVersion() {
        try (InputStream in = NativeLibrary.class.getResourceAsStream("etcdlock-version.properties")) {
            if (in == null) {
                throw new IllegalStateException("etcdlock: io/etcdlock/etcdlock-version.properties is missing from the jar");
            }
            java.util.Properties p = new java.util.Properties();
            p.load(in);
            String v = p.getProperty("version", "");
            return v.endsWith("-SNAPSHOT") ? v.substring(0, v.length() - "-SNAPSHOT".length()) : v;
        } catch (IOException e) {
            throw new IllegalStateException("etcdlock: cannot read io/etcdlock/etcdlock-version.properties", e);
        }
    }

    /** The cache directories to try, in order. */
    static java.util.List<Path> cacheDirs() {
        java.util.List<Path> dirs = new java.util.ArrayList<>();
        String prop = System.getProperty(CACHE_PROPERTY, "");
        if (!prop.isEmpty()) {
            dirs.add(Path.of(prop).toAbsolutePath());
        } else {
            String home = System.getProperty("user.home", "");
            String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
            if (os.startsWith("windows")) {
                String local = System.getenv("LOCALAPPDATA");
                if (local != null && !local.isEmpty() && Path.of(local).isAbsolute()) {
                    dirs.add(Path.of(local, "etcdlock", "cache"));
                } else if (!home.isEmpty()) {
                    dirs.add(Path.of(home, "AppData", "Local", "etcdlock", "cache"));
                }
            } else {
                String xdg = System.getenv("XDG_CACHE_HOME");
                if (xdg != null && Path.of(xdg).isAbsolute()) {
                    dirs.add(Path.of(xdg, "etcdlock"));
                } else if (os.startsWith("mac") && !home.isEmpty()) {
                    dirs.add(Path.of(home, "Library", "Caches", "etcdlock"));
                } else if (!home.isEmpty()) {
                    dirs.add(Path.of(home, ".cache", "etcdlock"));
                }
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
        for (String p : SUPPORTED) {
            for (String f : new String[] {"lib" + NAME + ".so", "lib" + NAME + ".dylib", NAME + ".dll"}) {
                if (NativeLibrary.class.getResource("/native/" + p + "/" + f) != null) {
                    found.add(p);
                    break;
                }
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
    private static Path extract(byte[] lib, String suffix) throws IOException {
        Path dir = Path.of(System.getProperty("java.io.tmpdir"));
        long pid = ProcessHandle.current().pid();
        for (int attempt = 0; ; attempt++) {
            Path tmp = dir.resolve("etcdlock_jni-" + pid + "-" + Long.toHexString(System.nanoTime()) + suffix);
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

    /** The platform folder name for this JVM, e.g. {@code linux-x86_64} or {@code linux-x86_64-musl}. */
    public static String platform() {
        return target().folder;
    }

    /** This JVM's platform folder and file; an {@link UnsatisfiedLinkError} if unsupported. */
    static Target target() {
        String os = System.getProperty("os.name", "");
        return target(os, System.getProperty("os.arch", ""),
                os.toLowerCase(Locale.ROOT).startsWith("linux") && Libc.isMusl());
    }

    /**
     * The platform folder and library file for these {@code os.name} and {@code os.arch} values
     * ({@code musl}: a Linux JVM on musl); an {@link UnsatisfiedLinkError} naming the platform
     * and {@link #SUPPORTED} for any other.
     */
    static Target target(String osName, String osArch, boolean musl) {
        String os = osName.toLowerCase(Locale.ROOT);
        String arch = osArch.toLowerCase(Locale.ROOT);
        String o = os.startsWith("linux") ? "linux"
                : os.startsWith("mac") || os.startsWith("darwin") ? "macos"
                : os.startsWith("windows") ? "windows"
                : os.replaceAll("[^a-z0-9]+", "_");
        String a = arch.equals("amd64") || arch.equals("x86_64") || arch.equals("x64") || arch.equals("x86-64") ? "x86_64"
                : arch.equals("aarch64") || arch.equals("arm64") ? "aarch64"
                : arch.replaceAll("[^a-z0-9_]+", "_");
        String folder = o + "-" + a + (o.equals("linux") && musl ? "-musl" : "");
        if (!SUPPORTED.contains(folder)) {
            throw new UnsatisfiedLinkError("etcdlock: unsupported platform " + folder + " (os.name \"" + osName
                    + "\", os.arch \"" + osArch + "\"" + (o.equals("linux") ? musl ? ", musl" : ", glibc" : "")
                    + "); the jar has native libraries for " + String.join(", ", SUPPORTED)
                    + " only; for another platform build bindings-java/native and set -D" + PATH_PROPERTY + "=/path/to/it");
        }
        String file = o.equals("windows") ? NAME + ".dll" : o.equals("macos") ? "lib" + NAME + ".dylib" : "lib" + NAME + ".so";
        return new Target(folder, file);
    }
}
