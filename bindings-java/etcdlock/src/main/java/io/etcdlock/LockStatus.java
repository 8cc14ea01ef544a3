package io.etcdlock;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;

/**
 * The holders and waiters of one name, for any kind of lock (mutex, semaphore, read-write
 * lock, election; etcdctl and Go keys too), as one read saw them
 * ({@link EtcdLockClient#status(String)}): what {@code etcdlock status} shows.
 */
public final class LockStatus {
    /** What a name is used as. */
    public enum LockKind {
        MUTEX,
        ELECTION,
        SEMAPHORE,
        RWLOCK
    }

    /** What a contender is. */
    public enum Kind {
        /** A mutex or election key, or a read-write lock's writer. */
        EXCLUSIVE,
        /** A read-write lock's reader. */
        READER,
        /** A semaphore permit. */
        PERMIT
    }

    /** One key in the queue. */
    public static final class Contender {
        // Set by Records.decode from core's records JSON, by name (key() of each); never changed after.
        private String key;
        private Kind kind;
        private Integer permits;
        private boolean holds;
        private long leaseId;
        private Long ttlRemaining;
        private long fencingToken;
        private String owner;
        private Long ageMs;
        private byte[] value;
        private String host;
        private Integer pid;
        private String language;
        private Integer localWaiters;
        private boolean foreign;
        private Map<String, String> metadata;

        private Contender() {}

        /**
         * The holder's metadata ({@link AcquireOptions.Builder#metadata}), as its acquisition gave
         * it (empty when none, and for keys of etcdctl, Go or other programs). Stored in the
         * name's meta record, written once a name has been in use for about 100 ms.
         */
        public Map<String, String> metadata() {
            return metadata;
        }

        /** The holder's host (etcdlock keys). */
        public Optional<String> host() {
            return Optional.ofNullable(host);
        }

        /** The holder's process id (etcdlock keys). */
        public OptionalInt pid() {
            return pid == null ? OptionalInt.empty() : OptionalInt.of(pid);
        }

        /** The language its client uses etcdlock from ("java", "python", ...), once its meta record is written (~100 ms). */
        public Optional<String> language() {
            return Optional.ofNullable(language);
        }

        /** Acquisitions of this name in progress in its client: its local queue (it keeps at most two keys per name in etcd). */
        public OptionalInt localWaiters() {
            return localWaiters == null ? OptionalInt.empty() : OptionalInt.of(localWaiters);
        }

        /** A key without etcdlock's owner info: etcdctl, Go's Mutex or Election. */
        public boolean foreign() {
            return foreign;
        }

        /** The key (with the namespace). */
        public String key() {
            return key;
        }

        public Kind kind() {
            return kind;
        }

        /** The semaphore's permit count for {@link Kind#PERMIT}, else 1. */
        public int permits() {
            return permits == null ? 1 : permits;
        }

        /** Whether it holds now (by its kind's rule), or waits. */
        public boolean holds() {
            return holds;
        }

        public long leaseId() {
            return leaseId;
        }

        /** Seconds left on its lease, if etcd said. */
        public OptionalLong ttlRemainingSeconds() {
            return ttlRemaining == null ? OptionalLong.empty() : OptionalLong.of(ttlRemaining);
        }

        /** The key's create revision (a holder's fencing token). */
        public long fencingToken() {
            return fencingToken;
        }

        /** {@code host:pid} for etcdlock keys; empty for etcdctl and Go keys. */
        public Optional<String> owner() {
            return Optional.ofNullable(owner);
        }

        /** Milliseconds since the key was created (etcdlock keys). */
        public OptionalLong ageMillis() {
            return ageMs == null ? OptionalLong.empty() : OptionalLong.of(ageMs);
        }

        /** The key's value (an election's proclamation; etcdlock's owner info), a copy. */
        public byte[] value() {
            return value.clone();
        }

        @Override
        public String toString() {
            return (holds ? "holds " : "waits ") + kind + " " + key + (owner == null ? "" : " (" + owner + ")");
        }
    }

    // Set by Records.decode from core's records JSON (core/src/records/mod.rs), by name.
    private String name;
    private LockKind kind;
    private long revision;
    private List<Contender> holders;
    private List<Contender> waiters;

    private LockStatus() {}

    /** The status {@code NativeBridge.status} sends: one records JSON object. */
    static LockStatus of(String json) {
        return Records.decode(json, LockStatus.class, "a lock status");
    }

    /** The statuses {@code NativeBridge.list} sends: one records JSON array. */
    static List<LockStatus> listOf(String json) {
        return Records.decodeList(json, LockStatus.class, "a lock list");
    }

    public String name() {
        return name;
    }

    /**
     * What the name is used as, from the contenders' meta records or their keys (a reader key
     * means a read-write lock, a permit count a semaphore); empty when they do not tell.
     */
    public Optional<LockKind> lockKind() {
        return Optional.ofNullable(kind);
    }

    /** The store revision of the read. */
    public long revision() {
        return revision;
    }

    /** Who holds, oldest first. */
    public List<Contender> holders() {
        return holders;
    }

    /** Who waits, in the order they will be served. */
    public List<Contender> waiters() {
        return waiters;
    }

    @Override
    public String toString() {
        return "LockStatus{name=" + name + ", kind=" + kind + ", holders=" + holders + ", waiters=" + waiters + "}";
    }
}
