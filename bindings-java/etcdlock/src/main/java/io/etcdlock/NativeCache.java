package io.etcdlock;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Set;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The per-user cache of the bundled native library ({@link NativeLibrary} describes where and
 * why). {@link #install} returns a file that is, at the moment it returns: a regular file (not
 * a symlink) owned by this user, in a directory owned by this user with mode {@code 0700},
 * whose SHA-256 is the expected one. A file that fails any of that is never returned: a wrong
 * hash (corrupted, truncated, planted) is replaced by an atomic rename of a fresh copy; a
 * directory or file of another user is an {@link IOException} (the caller tries elsewhere).
 * On a file system without POSIX attributes (Windows) there are no modes to set and the owner
 * is not compared (an elevated process's files belong to the Administrators group): the
 * directory is in the user's profile, whose ACLs keep other users out, and the SHA-256 check
 * still applies.
 */
final class NativeCache {
    private static final Logger LOG = LoggerFactory.getLogger(NativeCache.class);
    private static final LinkOption NOFOLLOW = LinkOption.NOFOLLOW_LINKS;
    private static final Set<PosixFilePermission> DIR_MODE = PosixFilePermissions.fromString("rwx------");
    private static final Set<PosixFilePermission> FILE_MODE = PosixFilePermissions.fromString("r-x------");

    private NativeCache() {}

    static Path install(Path dir, String name, byte[] lib, String sha256) throws IOException {
        ensureDir(dir);
        Path file = dir.resolve(name);
        String problem = check(file, sha256);
        if (problem == null) {
            return file;
        }
        if (Files.exists(file, NOFOLLOW)) {
            LOG.warn("etcdlock: refusing the cached native library {} ({}); writing a fresh copy", file, problem);
        }
        Path tmp = dir.resolve("." + name + "." + ProcessHandle.current().pid() + "." + Long.toHexString(System.nanoTime()) + ".tmp");
        try {
            try (OutputStream out = Files.newOutputStream(tmp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                if (posix(dir)) {
                    Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rw-------"));
                }
                out.write(lib);
            }
            if (posix(dir)) {
                Files.setPosixFilePermissions(tmp, FILE_MODE);
            }
            // rename(2): atomic, replaces a bad file; JVMs installing together write the same bytes.
            try {
                Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (IOException moveFailed) {
                // Windows cannot replace a DLL another JVM has loaded: if that JVM installed
                // the same bytes meanwhile, use its copy.
                if (check(file, sha256) != null) {
                    throw moveFailed;
                }
            }
        } catch (FileAlreadyExistsException e) {
            throw new IOException("temporary file " + tmp + " exists", e);
        } finally {
            Files.deleteIfExists(tmp);
        }
        problem = check(file, sha256);
        if (problem != null) {
            throw new IOException(file + " still fails its check after a fresh copy: " + problem);
        }
        return file;
    }

    /** Create {@code dir} if missing; it must then be a directory of this user, made 0700. */
    private static void ensureDir(Path dir) throws IOException {
        if (!Files.exists(dir, NOFOLLOW)) {
            Files.createDirectories(dir.getParent());
            try {
                if (posix(dir.getParent())) {
                    Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(DIR_MODE));
                } else {
                    Files.createDirectory(dir);
                }
            } catch (FileAlreadyExistsException raced) {
                // another JVM made it: checked below like any existing directory
            }
        }
        if (Files.isSymbolicLink(dir) || !Files.isDirectory(dir, NOFOLLOW)) {
            throw new IOException(dir + " is not a directory (or is a symlink)");
        }
        if (!posix(dir)) {
            return;
        }
        if (!ownedByMe(dir)) {
            throw new IOException(dir + " belongs to another user");
        }
        if (!Files.getPosixFilePermissions(dir, NOFOLLOW).equals(DIR_MODE)) {
            Files.setPosixFilePermissions(dir, DIR_MODE);
        }
    }

    /** Why {@code file} may not be loaded, or null if it may. */
    static String check(Path file, String sha256) throws IOException {
        if (!Files.exists(file, NOFOLLOW)) {
            return "missing";
        }
        if (!Files.isRegularFile(file, NOFOLLOW)) {
            return "not a regular file";
        }
        if (posix(file)) {
            if (!ownedByMe(file)) {
                return "owned by another user";
            }
            Set<PosixFilePermission> mode = Files.getPosixFilePermissions(file, NOFOLLOW);
            if (mode.contains(PosixFilePermission.GROUP_WRITE) || mode.contains(PosixFilePermission.OTHERS_WRITE)) {
                return "writable by others";
            }
        }
        String actual = sha256(file);
        return actual.equals(sha256) ? null : "SHA-256 " + actual + ", expected " + sha256;
    }

    /** Whether {@code p}'s file system has POSIX owners and modes (not Windows). */
    private static boolean posix(Path p) {
        return p.getFileSystem().supportedFileAttributeViews().contains("posix");
    }

    private static boolean ownedByMe(Path p) throws IOException {
        Object me = myUid();
        if (me != null) {
            return me.equals(Files.getAttribute(p, "unix:uid", NOFOLLOW));
        }
        return Files.getOwner(p, NOFOLLOW).getName().equals(System.getProperty("user.name"));
    }

    private static Object myUid() {
        try {
            Path self = Path.of("/proc/self");
            return Files.exists(self) ? Files.getAttribute(self, "unix:uid") : null;
        } catch (IOException | UnsupportedOperationException e) {
            return null;
        }
    }

    static String sha256(Path file) throws IOException {
        try (InputStream in = Files.newInputStream(file, NOFOLLOW)) {
            MessageDigest md = MessageDigest.getInstance("SHA-256");
            byte[] buf = new byte[1 << 16];
            for (int n; (n = in.read(buf)) > 0; ) {
                md.update(buf, 0, n);
            }
            return hex(md.digest());
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is a required JDK algorithm", e);
        }
    }

    static String hex(byte[] d) {
        StringBuilder sb = new StringBuilder(d.length * 2);
        for (byte x : d) {
            sb.append(Character.forDigit((x >> 4) & 0xf, 16)).append(Character.forDigit(x & 0xf, 16));
        }
        return sb.toString();
    }
}
