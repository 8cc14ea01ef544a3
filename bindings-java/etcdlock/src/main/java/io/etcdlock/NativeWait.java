package io.etcdlock;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;

/**
 * A native wait (latch, barrier) in flight, as a future of its value: the native side waits on
 * the etcdlock runtime and completes it, so the Java caller parks in Java (a virtual thread
 * unmounts instead of pinning its carrier), as lock waits do ({@link AsyncAcquire}).
 */
final class NativeWait extends CompletableFuture<Long> {
    /** Starts the native wait with the future's id. */
    interface Start {
        void run(long id);
    }

    final long id;

    private NativeWait() {
        this.id = NativeBridge.register((h, value, error) -> {
            if (error != null) {
                completeExceptionally(error);
            } else {
                complete(value);
            }
        });
    }

    @Override
    public boolean cancel(boolean mayInterruptIfRunning) {
        boolean r = super.cancel(mayInterruptIfRunning);
        if (r) {
            NativeBridge.cancelAsync(id);
        }
        return r;
    }

    static long msOrForever(Duration timeout) {
        return Acquirer.msOrForever(timeout);
    }

    /**
     * Start a wait and park on it. Interruptible: an interrupt cancels the native wait and throws
     * {@link InterruptedException}. Not interruptible: the wait goes on and the interrupt is
     * re-asserted afterwards. Errors are thrown as the native side made them.
     */
    static long await(String what, Start start, boolean interruptible) throws InterruptedException {
        Args.checkNotOnRuntimeThread(what);
        if (interruptible && Thread.interrupted()) {
            throw new InterruptedException("interrupted before waiting for " + what);
        }
        NativeWait f = new NativeWait();
        try {
            start.run(f.id);
        } catch (RuntimeException e) {
            NativeBridge.forget(f.id);
            throw e;
        }
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return f.get();
                } catch (InterruptedException e) {
                    if (interruptible) {
                        f.cancel(true);
                        throw e;
                    }
                    interrupted = true;
                } catch (ExecutionException e) {
                    Throwable cause = e.getCause();
                    if (cause instanceof RuntimeException) {
                        throw (RuntimeException) cause;
                    }
                    if (cause instanceof Error) {
                        throw (Error) cause;
                    }
                    throw new InternalException(what + ": " + cause);
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
