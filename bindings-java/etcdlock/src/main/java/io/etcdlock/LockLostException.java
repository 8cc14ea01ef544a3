package io.etcdlock;

/**
 * The hold ended without the holder unlocking it ({@link ErrorCode#LOCK_LOST}):
 * the lease expired, the key was deleted, the connection was lost past the
 * safety margin, or the client was closed. {@link #reason()} says which.
 */
public class LockLostException extends EtcdLockException {
    private static final long serialVersionUID = 1L;
    private final LossReason reason;

    /** An exception with this reason (may be null when unknown) and message. */
    public LockLostException(LossReason reason, String message) {
        super(ErrorCode.LOCK_LOST, message);
        this.reason = reason;
    }

    /** Why the hold ended, or {@code null} if the core did not say. */
    public LossReason reason() {
        return reason;
    }
}
