package io.etcdlock;

/** A try-lock found the lock held by someone else ({@link ErrorCode#WOULD_BLOCK}). */
public class WouldBlockException extends EtcdLockException {
    private static final long serialVersionUID = 1L;

    /** An exception with this message. */
    public WouldBlockException(String message) {
        super(ErrorCode.WOULD_BLOCK, message);
    }
}
