package io.etcdlock;

/** The wait was cancelled ({@link ErrorCode#CANCELLED}). */
public class CancelledException extends EtcdLockException {
    private static final long serialVersionUID = 1L;

    /** An exception with this message. */
    public CancelledException(String message) {
        super(ErrorCode.CANCELLED, message);
    }
}
