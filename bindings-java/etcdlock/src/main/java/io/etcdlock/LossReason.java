package io.etcdlock;

/** Why a held lock ended without its holder unlocking it (mirrors the core's {@code LossReason}). */
public enum LossReason {
    /** etcd reported the session's lease gone (expired or revoked). */
    LEASE_EXPIRED(1),
    /** The lock key was deleted (by an operator, or a guarded write's compare failed). */
    KEY_DELETED(2),
    /** No keep-alive was acknowledged in time: the local validity window ran out. */
    CONNECTION_LOST(3),
    /** The client was closed while the lock was held. */
    CLIENT_CLOSED(4);

    private final int value;

    LossReason(int value) {
        this.value = value;
    }

    /** The numeric value shared with the other bindings. */
    public int value() {
        return value;
    }

    /** The reason for a numeric value, or {@code null} for 0 / unknown values. */
    public static LossReason of(int value) {
        for (LossReason r : values()) {
            if (r.value == value) {
                return r;
            }
        }
        return null;
    }
}
