package io.etcdlock;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Objects;
import java.util.Optional;

/** The leader of an election, as read from etcd ({@link EtcdLockClient#leader(String)}). */
public final class Leader {
    // Set by Records.decode from core's records JSON (core/src/records/mod.rs), by name.
    private String key;
    private byte[] value;
    private long revision;
    private long leaseId;

    private Leader() {}

    /** The leader the native side sends: one records JSON object, or null when nobody leads. */
    static Optional<Leader> of(String json) {
        return json == null ? Optional.empty() : Optional.of(Records.decode(json, Leader.class, "a leader"));
    }

    /** The leader's key (with the namespace), e.g. {@code scheduler/694d7a3e4b2c8f05}. */
    public String key() {
        return key;
    }

    /** Its proclamation (a copy). */
    public byte[] value() {
        return value.clone();
    }

    /** Its proclamation as UTF-8 text. */
    public String valueAsString() {
        return new String(value, StandardCharsets.UTF_8);
    }

    /** Its key's create revision: the leadership's fencing token. */
    public long revision() {
        return revision;
    }

    /** Its lease. */
    public long leaseId() {
        return leaseId;
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof Leader)) {
            return false;
        }
        Leader l = (Leader) o;
        return key.equals(l.key) && Arrays.equals(value, l.value) && revision == l.revision && leaseId == l.leaseId;
    }

    @Override
    public int hashCode() {
        return Objects.hash(key, Arrays.hashCode(value), revision, leaseId);
    }

    @Override
    public String toString() {
        return "Leader{key=" + key + ", value=" + valueAsString() + ", revision=" + revision + "}";
    }
}
