package io.etcdlock;

import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;

/**
 * The history of one name from etcd's MVCC history ({@link EtcdLockClient#history}): every key
 * queued on it since {@link #fromRevision()} (etcd's compaction revision, set by etcd's
 * {@code --auto-compaction-*} flags), each a wait and the hold it became: what {@code etcdlock
 * history} shows.
 *
 * <p>etcd keeps revisions, not times: each etcdlock key carries the wall-clock time it was
 * written, and the times of grants and ends are placed between those stamps by revision. A
 * delete looks the same in etcd whoever made it: a hold whose lease lived on ended
 * {@link End#RELEASED}, one gone with its lease {@link End#LEASE_ENDED}.
 */
public final class LockHistory {
    /** How a key's wait or hold ended, or that it has not. */
    public enum End {
        /** Deleted while its lease lived on (an unlock, or a release by token). */
        RELEASED,
        /** Gone with its lease (expired, or revoked by a close). */
        LEASE_ENDED,
        /** Deleted before it held: a timeout, a cancel or a one-try. */
        ABANDONED,
        /** It holds now. */
        HOLDING,
        /** It waits now. */
        WAITING
    }

    /** One key queued on the name: a wait, and the hold it became. */
    public static final class Entry {
        // Set by Records.decode from core's records JSON (core/src/records/history.rs), by name.
        private String key;
        private LockStatus.Kind kind;
        private Integer permits;
        private long leaseId;
        private long fencingToken;
        private String owner;
        private String host;
        private Integer pid;
        private String language;
        private long queuedMs;
        private Long grantedRevision;
        private Long grantedMs;
        private Long endedRevision;
        private Long endedMs;
        private End ended;
        private long waitMs;
        private Long holdMs;

        private Entry() {}

        /** The key (with the namespace). */
        public String key() {
            return key;
        }

        public LockStatus.Kind kind() {
            return kind;
        }

        /** The semaphore's permit count for {@link LockStatus.Kind#PERMIT}, else 1. */
        public int permits() {
            return permits == null ? 1 : permits;
        }

        /** Its lease: the client. */
        public long leaseId() {
            return leaseId;
        }

        /** Its create revision: its fencing token if it held. */
        public long fencingToken() {
            return fencingToken;
        }

        /** {@code host:pid}, for etcdlock keys. */
        public Optional<String> owner() {
            return Optional.ofNullable(owner);
        }

        /** The client's host, for etcdlock keys. */
        public Optional<String> host() {
            return Optional.ofNullable(host);
        }

        /** The client's process id, for etcdlock keys. */
        public OptionalInt pid() {
            return pid == null ? OptionalInt.empty() : OptionalInt.of(pid);
        }

        /** The client's language ("java", "python", ...), for etcdlock keys. */
        public Optional<String> language() {
            return Optional.ofNullable(language);
        }

        /** When the key was queued (wall clock). */
        public Instant queued() {
            return Instant.ofEpochMilli(queuedMs);
        }

        /** The revision at which it came to hold; empty if it never held. */
        public OptionalLong grantedRevision() {
            return grantedRevision == null ? OptionalLong.empty() : OptionalLong.of(grantedRevision);
        }

        /** When it came to hold (estimated); empty if it never held. */
        public Optional<Instant> granted() {
            return Optional.ofNullable(grantedMs).map(Instant::ofEpochMilli);
        }

        /** The revision of its delete; empty while it is there. */
        public OptionalLong endedRevision() {
            return endedRevision == null ? OptionalLong.empty() : OptionalLong.of(endedRevision);
        }

        /** When it was deleted (estimated); empty while it is there. */
        public Optional<Instant> endedAt() {
            return Optional.ofNullable(endedMs).map(Instant::ofEpochMilli);
        }

        /** How it ended, or {@link End#HOLDING} / {@link End#WAITING} while it is there. */
        public End ended() {
            return ended;
        }

        /** How long it waited (to its grant, its end, or the read). */
        public Duration waited() {
            return Duration.ofMillis(waitMs);
        }

        /** How long it held (to its end, or the read), if it held. */
        public Optional<Duration> held() {
            return Optional.ofNullable(holdMs).map(Duration::ofMillis);
        }

        @Override
        public String toString() {
            return ended + " " + key + " token " + fencingToken + (owner == null ? "" : " (" + owner + ")");
        }
    }

    private String name;
    private long revision;
    private long fromRevision;
    private long readMs;
    private List<Entry> entries;

    private LockHistory() {}

    /** The record {@code NativeBridge.history} sends. */
    static LockHistory of(String json) {
        return Records.decode(json, LockHistory.class, "a lock history");
    }

    public String name() {
        return name;
    }

    /** The store revision of the read: the history ends there. */
    public long revision() {
        return revision;
    }

    /** The first revision replayed: etcd's compaction revision (or 1); nothing older is known. */
    public long fromRevision() {
        return fromRevision;
    }

    /** When the read was made (wall clock). */
    public Instant read() {
        return Instant.ofEpochMilli(readMs);
    }

    /** Every key queued since {@link #fromRevision()} (or in the window asked for), oldest first. */
    public List<Entry> entries() {
        return entries;
    }

    @Override
    public String toString() {
        return "LockHistory{name=" + name + ", revision=" + revision + ", fromRevision=" + fromRevision
                + ", entries=" + entries + "}";
    }
}
