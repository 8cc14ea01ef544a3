package io.etcdlock.shedlock;

import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.format.DateTimeParseException;

/**
 * What {@link EtcdLockProvider} stores at {@code <prefix>/state/<name>}: UTF-8 text, one
 * {@code key=value} per line (readable with {@code etcdctl get}):
 *
 * <pre>
 * lockUntil=2026-01-01T10:00:30Z
 * lockedAt=2026-01-01T10:00:00Z
 * lockedBy=host-1
 * id=5f0c...   (random per hold: unlock and extend change the record only while it is theirs)
 * </pre>
 *
 * The lock is taken while {@code lockUntil} is in the future.
 */
public final class LockRecord {
    final Instant lockUntil;
    final Instant lockedAt;
    final String lockedBy;
    final String id;

    LockRecord(Instant lockUntil, Instant lockedAt, String lockedBy, String id) {
        this.lockUntil = lockUntil;
        this.lockedAt = lockedAt;
        this.lockedBy = lockedBy.replaceAll("[\\r\\n]", " ");
        this.id = id;
    }

    /** Until when the lock is taken. */
    public Instant lockUntil() {
        return lockUntil;
    }

    /** When the hold began. */
    public Instant lockedAt() {
        return lockedAt;
    }

    /** The host name of the instance that took it. */
    public String lockedBy() {
        return lockedBy;
    }

    /** The id of the hold that wrote it. */
    public String id() {
        return id;
    }

    /** Whether the lock is taken at {@code now}. */
    public boolean isLockedAt(Instant now) {
        return lockUntil.isAfter(now);
    }

    byte[] format() {
        return ("lockUntil=" + lockUntil + "\nlockedAt=" + lockedAt + "\nlockedBy=" + lockedBy + "\nid=" + id + "\n")
                .getBytes(StandardCharsets.UTF_8);
    }

    /**
     * Parse a stored value; null for null. A value that is not a record (written by something
     * else) counts as expired, so it never blocks the lock forever.
     */
    public static LockRecord parse(byte[] value) {
        if (value == null) {
            return null;
        }
        Instant until = null;
        Instant at = null;
        String by = "";
        String id = "";
        for (String line : new String(value, StandardCharsets.UTF_8).split("\n")) {
            int eq = line.indexOf('=');
            if (eq < 0) {
                continue;
            }
            String k = line.substring(0, eq);
            String v = line.substring(eq + 1);
            try {
                switch (k) {
                    case "lockUntil": until = Instant.parse(v); break;
                    case "lockedAt": at = Instant.parse(v); break;
                    case "lockedBy": by = v; break;
                    case "id": id = v; break;
                    default: break;
                }
            } catch (DateTimeParseException e) {
                // leave it null: handled below
            }
        }
        if (until == null) {
            until = Instant.EPOCH;
        }
        return new LockRecord(until, at == null ? Instant.EPOCH : at, by, id);
    }

    @Override
    public String toString() {
        return "LockRecord{lockUntil=" + lockUntil + ", lockedAt=" + lockedAt + ", lockedBy=" + lockedBy + ", id=" + id + "}";
    }
}
