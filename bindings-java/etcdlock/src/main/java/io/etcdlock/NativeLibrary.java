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
 *   <li>else the copy inside this jar at {@code /native/<os>-<arch>/}, extracted to a temp file.</li>
 * </ol>
 */
public final class NativeLibrary {
    /** System property naming the native library file to load instead of the bundled one. */
    public static final String PATH_PROPERTY = "etcdlock.library.path";
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
        try (InputStream in = NativeLibrary.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new UnsatisfiedLinkError("etcdlock: no native library for " + platform()
                        + " in the jar (" + resource + "); set -D" + PATH_PROPERTY + "=/path/to/libetcdlock_jni.so");
            }
            Path tmp = extract(in);
            System.load(tmp.toAbsolutePath().toString());
            loadedFrom = resource;
            LOG.debug("etcdlock native library extracted from {} to {}", resource, tmp);
        } catch (IOException e) {
            throw new UnsatisfiedLinkError("etcdlock: cannot extract " + resource + ": " + e);
        }
    }

    /**
     * Copy the bundled library to a new file in {@code java.io.tmpdir}, created exclusively
     * ({@code O_EXCL}: never an existing file or a planted symlink) and owner-only. Not
     * {@code Files.createTempFile}: its random name comes from {@code SecureRandom}, whose
     * provider classes and seeding cost the process about 1 MB of native memory for nothing a
     * PID-and-clock name with an exclusive create does not already give.
     */
    private static Path extract(InputStream in) throws IOException {
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
                in.transferTo(out);
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
