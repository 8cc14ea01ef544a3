package io.etcdlock;

/** The lock was not acquired within the caller's deadline ({@link ErrorCode#TIMEOUT}). */
public class LockTimeoutException extends EtcdLockException {
    private static final long serialVersionUID = 1L;

    /** An exception with this message. */
    public LockTimeoutException(String message) {
        super(ErrorCode.TIMEOUT, message);
    }
}
