package io.etcdlock;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A key as an in-process store holds it: what {@link MemStore#keys(String)} lists, for a test to
 * assert on (which keys a lock left, on which lease, at which revision). A value: equal when every
 * field is.
 */
public final class MemKey {
    private final byte[] key;
    private final byte[] value;
    private final long lease;
    private final long createRevision;
    private final long modRevision;

    MemKey(byte[] key, byte[] value, long lease, long createRevision, long modRevision) {
        this.key = key;
        this.value = value;
        this.lease = lease;
        this.createRevision = createRevision;
        this.modRevision = modRevision;
    }

    /** The key's bytes (a copy). */
    public byte[] key() {
        return key.clone();
    }

    /** The key as UTF-8 text: a lock's key is {@link LockGuard#key()}. */
    public String keyString() {
        return new String(key, StandardCharsets.UTF_8);
    }

    /** The value's bytes (a copy). */
    public byte[] value() {
        return value.clone();
    }

    /** The value as UTF-8 text. */
    public String valueString() {
        return new String(value, StandardCharsets.UTF_8);
    }

    /** The lease the key lives on (0: none); a lock's key lives on its {@link LockGuard#leaseId()}. */
    public long lease() {
        return lease;
    }

    /** The revision that created the key: a lock key's fencing token. */
    public long createRevision() {
        return createRevision;
    }

    /** The revision of the key's last write. */
    public long modRevision() {
        return modRevision;
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof MemKey)) {
            return false;
        }
        MemKey k = (MemKey) o;
        return Arrays.equals(key, k.key) && Arrays.equals(value, k.value) && lease == k.lease
                && createRevision == k.createRevision && modRevision == k.modRevision;
    }

    @Override
    public int hashCode() {
        return ((Arrays.hashCode(key) * 31 + Arrays.hashCode(value)) * 31 + Long.hashCode(lease)) * 31
                + Long.hashCode(createRevision);
    }

    @Override
    public String toString() {
        return "MemKey{key=" + keyString() + ", lease=" + Long.toHexString(lease) + ", createRevision="
                + createRevision + ", modRevision=" + modRevision + "}";
    }
}
