package io.etcdlock;

/** The client was closed ({@link ErrorCode#CLOSED}). */
public class ClosedException extends EtcdLockException {
    private static final long serialVersionUID = 1L;

    /** An exception with this message. */
    public ClosedException(String message) {
        super(ErrorCode.CLOSED, message);
    }
}
