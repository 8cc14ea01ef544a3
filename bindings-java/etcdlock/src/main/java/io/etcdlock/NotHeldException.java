package io.etcdlock;

/** Unlock or guarded operation on a lock this handle does not hold ({@link ErrorCode#NOT_HELD}). */
public class NotHeldException extends EtcdLockException {
    private static final long serialVersionUID = 1L;

    /** An exception with this message. */
    public NotHeldException(String message) {
        super(ErrorCode.NOT_HELD, message);
    }
}
