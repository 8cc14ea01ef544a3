package io.etcdlock;

/** The JVM shutdown hook of {@link EtcdLockClientBuilder#releaseOnExit(boolean)}, while registered. */
final class ExitHook {
    private volatile Thread hook;

    /** Run {@code close} at JVM shutdown. */
    void register(Runnable close) {
        Thread t = new Thread(close, "etcdlock-release-on-exit");
        hook = t;
        Runtime.getRuntime().addShutdownHook(t);
    }

    /** Forget the hook (the client is closing now), unless the hook itself is what closes it. */
    void unregister() {
        Thread t = hook;
        if (t != null && t != Thread.currentThread()) {
            hook = null;
            try {
                Runtime.getRuntime().removeShutdownHook(t);
            } catch (IllegalStateException shuttingDown) {
                // the hook runs (or ran) anyway; close is idempotent
            }
        }
    }
}
