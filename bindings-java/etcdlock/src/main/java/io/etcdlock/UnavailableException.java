package io.etcdlock;

/** etcd was unreachable after retries ({@link ErrorCode#UNAVAILABLE}). */
public class UnavailableException extends EtcdLockException {
    private static final long serialVersionUID = 1L;

    /** An exception with this message. */
    public UnavailableException(String message) {
        super(ErrorCode.UNAVAILABLE, message);
    }
}
