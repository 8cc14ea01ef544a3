package io.etcdlock;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
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
        private final String key;
        private final Kind kind;
        private final int permits;
        private final boolean holds;
        private final long leaseId;
        private final long ttlRemaining;
        private final long fencingToken;
        private final String owner;
        private final long ageMillis;
        private final byte[] value;
        private final String host;
        private final int pid;
        private final String language;
        private final int localWaiters;
        private final boolean foreign;
        private final Map<String, String> metadata;

        Contender(RecipeCodec r) {
            key = r.string();
            kind = Kind.values()[r.i32()];
            permits = r.i32();
            holds = r.i32() != 0;
            leaseId = r.i64();
            ttlRemaining = r.i64();
            fencingToken = r.i64();
            owner = r.string();
            ageMillis = r.i64();
            byte[] v = r.bytes();
            value = v == null ? new byte[0] : v;
            host = r.string();
            pid = r.i32();
            language = r.string();
            localWaiters = r.i32();
            foreign = r.i32() != 0;
            int pairs = r.i32();
            Map<String, String> m = new LinkedHashMap<>();
            for (int i = 0; i < pairs; i++) {
                m.put(r.string(), r.string());
            }
            metadata = Collections.unmodifiableMap(m);
        }

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
            return pid < 0 ? OptionalInt.empty() : OptionalInt.of(pid);
        }

        /** The language its client uses etcdlock from ("java", "python", ...), once its meta record is written (~100 ms). */
        public Optional<String> language() {
            return Optional.ofNullable(language);
        }

        /** Acquisitions of this name in progress in its client: its local queue (it keeps at most two keys per name in etcd). */
        public OptionalInt localWaiters() {
            return localWaiters < 0 ? OptionalInt.empty() : OptionalInt.of(localWaiters);
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
            return permits;
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
            return ttlRemaining < 0 ? OptionalLong.empty() : OptionalLong.of(ttlRemaining);
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
            return ageMillis < 0 ? OptionalLong.empty() : OptionalLong.of(ageMillis);
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

    private final String name;
    private final LockKind lockKind;
    private final long revision;
    private final List<Contender> holders;
    private final List<Contender> waiters;

    LockStatus(String name, byte[] encoded) {
        this(name, new RecipeCodec(encoded));
    }

    LockStatus(String name, RecipeCodec r) {
        this.name = name;
        this.revision = r.i64();
        int k = r.i32();
        this.lockKind = k < 0 ? null : LockKind.values()[k];
        int n = r.i32();
        List<Contender> h = new ArrayList<>();
        List<Contender> w = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Contender c = new Contender(r);
            (c.holds() ? h : w).add(c);
        }
        this.holders = Collections.unmodifiableList(h);
        this.waiters = Collections.unmodifiableList(w);
    }

    public String name() {
        return name;
    }

    /**
     * What the name is used as, from the contenders' meta records or their keys (a reader key
     * means a read-write lock, a permit count a semaphore); empty when they do not tell.
     */
    public Optional<LockKind> lockKind() {
        return Optional.ofNullable(lockKind);
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
        return "LockStatus{name=" + name + ", kind=" + lockKind + ", holders=" + holders + ", waiters=" + waiters + "}";
    }

    /** The statuses {@code NativeBridge.list} encodes: a count, then each name and status. */
    static java.util.List<LockStatus> listOf(byte[] encoded) {
        RecipeCodec r = new RecipeCodec(encoded);
        int n = r.i32();
        java.util.List<LockStatus> out = new java.util.ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            out.add(new LockStatus(r.string(), r));
        }
        return java.util.Collections.unmodifiableList(out);
    }
}
