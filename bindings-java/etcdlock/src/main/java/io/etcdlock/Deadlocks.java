package io.etcdlock;

import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.stream.Collectors;

/**
 * The cycles of clients waiting on each other's holds under a prefix, from one read of etcd
 * ({@link EtcdLockClient#deadlocks(String)}): what {@code etcdlock deadlocks} shows.
 *
 * <p>Every client that waits on a name has a key queued there, so a cycle of clients in any
 * languages (this Java client holds x and waits for y, a Python client holds y and waits for x)
 * is in etcd's state. Two threads of one client waiting on each other are not: both wait on
 * the same lease, and etcd cannot tell them apart.
 */
public final class Deadlocks {
    /** A client in a cycle: its lease and who it is, from its key. */
    public static final class Party {
        // Set by Records.decode from core's records JSON, by name; never changed after.
        private long leaseId;
        private String owner;
        private String host;
        private Integer pid;
        private String language;

        private Party() {}

        /** Its session's lease: the client. */
        public long leaseId() {
            return leaseId;
        }

        /** {@code host:pid}, for etcdlock keys. */
        public Optional<String> owner() {
            return Optional.ofNullable(owner);
        }

        /** Its host, for etcdlock keys. */
        public Optional<String> host() {
            return Optional.ofNullable(host);
        }

        /** Its process id, for etcdlock keys. */
        public OptionalInt pid() {
            return pid == null ? OptionalInt.empty() : OptionalInt.of(pid);
        }

        /** The language it uses etcdlock from ("java", "python", ...), for etcdlock keys. */
        public Optional<String> language() {
            return Optional.ofNullable(language);
        }

        /** {@code host:pid (language, lease <hex>)}, as core describes a party. */
        @Override
        public String toString() {
            String lease = "lease " + Long.toHexString(leaseId);
            if (owner == null) {
                return lease;
            }
            return owner + " (" + (language == null ? "" : language + ", ") + lease + ")";
        }
    }

    /** One wait of a cycle: {@link #waiter()} waits in {@link #name()} for {@link #holder()}. */
    public static final class WaitEdge {
        private Party waiter;
        private String name;
        private String waiterKey;
        private Party holder;
        private String holderKey;
        private long fencingToken;
        private long waiterRevision;

        private WaitEdge() {}

        /** The waiting client. */
        public Party waiter() {
            return waiter;
        }

        /** The name it waits for. */
        public String name() {
            return name;
        }

        /** Its queued key (with the namespace). */
        public String waiterKey() {
            return waiterKey;
        }

        /** The client holding {@link #name()}. */
        public Party holder() {
            return holder;
        }

        /** The holder's key (with the namespace). */
        public String holderKey() {
            return holderKey;
        }

        /** The holder's fencing token. */
        public long fencingToken() {
            return fencingToken;
        }

        /** The waiter's key's create revision: when its wait reached etcd. */
        public long waiterRevision() {
            return waiterRevision;
        }

        @Override
        public String toString() {
            return waiter + " waits for \"" + name + "\" held by " + holder;
        }
    }

    /**
     * Clients that wait on each other: each edge's holder is the next edge's waiter, and the
     * last edge's holder is the first edge's waiter.
     */
    public static final class Cycle {
        private List<WaitEdge> edges;

        private Cycle() {}

        /** The waits, in order around the cycle. */
        public List<WaitEdge> edges() {
            return edges;
        }

        /** One line: {@code A waits for "y" held by B; B waits for "x" held by A}. */
        @Override
        public String toString() {
            return edges.stream().map(WaitEdge::toString).collect(Collectors.joining("; "));
        }
    }

    // Set by Records.decode from core's records JSON (core/src/records/deadlock.rs), by name.
    private String prefix;
    private long revision;
    private int clients;
    private int waits;
    private List<Cycle> cycles;

    private Deadlocks() {}

    /** The record {@code NativeBridge.deadlocks} sends. */
    static Deadlocks of(String json) {
        return Records.decode(json, Deadlocks.class, "a deadlock report");
    }

    /** The prefix read (empty: the whole namespace). */
    public String prefix() {
        return prefix;
    }

    /** The store revision of the read. */
    public long revision() {
        return revision;
    }

    /** How many clients have a key under the prefix. */
    public int clients() {
        return clients;
    }

    /** How many queued keys wait. */
    public int waits() {
        return waits;
    }

    /** One cycle per group of clients that wait on each other; empty: no deadlock. */
    public List<Cycle> cycles() {
        return cycles;
    }

    @Override
    public String toString() {
        return "Deadlocks{prefix=" + prefix + ", revision=" + revision + ", clients=" + clients + ", waits=" + waits
                + ", cycles=" + cycles + "}";
    }
}
