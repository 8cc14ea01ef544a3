package io.etcdlock;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
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

        Contender(Json.Obj o) {
            key = o.string("key");
            kind = Kind.valueOf(o.string("kind").toUpperCase(Locale.ROOT));
            Long n = o.optLong("permits");
            permits = n == null ? 1 : Math.toIntExact(n);
            holds = o.bool("holds");
            leaseId = o.decimal("lease_id");
            Long ttl = o.optLong("ttl_remaining");
            ttlRemaining = ttl == null ? -1 : ttl;
            fencingToken = o.decimal("fencing_token");
            owner = o.string("owner");
            Long age = o.optLong("age_ms");
            ageMillis = age == null ? -1 : age;
            List<?> v = o.list("value");
            value = new byte[v.size()];
            for (int i = 0; i < value.length; i++) {
                Object b = v.get(i);
                if (!(b instanceof Long) || (Long) b < 0 || (Long) b > 255) {
                    throw new IllegalArgumentException("field \"value\" holds a non-byte: " + b);
                }
                value[i] = (byte) (long) (Long) b;
            }
            host = o.string("host");
            Long p = o.optLong("pid");
            pid = p == null ? -1 : Math.toIntExact(p);
            language = o.string("language");
            Long w = o.optLong("local_waiters");
            localWaiters = w == null ? -1 : Math.toIntExact(w);
            foreign = o.bool("foreign");
            Json.Obj md = o.obj("metadata");
            Map<String, String> m = new LinkedHashMap<>();
            for (String k : md.keys()) {
                m.put(k, md.string(k));
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

    private LockStatus(Json.Obj o) {
        this.name = o.string("name");
        this.revision = o.decimal("revision");
        String k = o.string("kind");
        this.lockKind = k == null ? null : LockKind.valueOf(k.toUpperCase(Locale.ROOT));
        this.holders = contenders(o, "holders");
        this.waiters = contenders(o, "waiters");
    }

    private static List<Contender> contenders(Json.Obj o, String key) {
        List<Contender> out = new ArrayList<>();
        for (Json.Obj c : o.objects(key)) {
            out.add(new Contender(c));
        }
        return Collections.unmodifiableList(out);
    }

    /** The status {@code NativeBridge.status} sends: one records JSON object. */
    static LockStatus of(String json) {
        try {
            return new LockStatus(Json.parseObject(json));
        } catch (IllegalArgumentException | ArithmeticException e) {
            throw Json.internal("a lock status", e);
        }
    }

    /** The statuses {@code NativeBridge.list} sends: one records JSON array. */
    static List<LockStatus> listOf(String json) {
        try {
            List<LockStatus> out = new ArrayList<>();
            for (Json.Obj o : Json.parseObjects(json)) {
                out.add(new LockStatus(o));
            }
            return Collections.unmodifiableList(out);
        } catch (IllegalArgumentException | ArithmeticException e) {
            throw Json.internal("a lock list", e);
        }
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
}
