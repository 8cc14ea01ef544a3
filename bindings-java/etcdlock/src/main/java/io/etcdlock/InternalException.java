package io.etcdlock;

/** A bug in etcdlock (including a Rust panic), reported instead of a crash ({@link ErrorCode#INTERNAL}). */
public class InternalException extends EtcdLockException {
    private static final long serialVersionUID = 1L;

    /** An exception with this message. */
    public InternalException(String message) {
        super(ErrorCode.INTERNAL, message);
    }
}
