package io.etcdlock;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.function.LongConsumer;
import java.util.function.LongFunction;

/**
 * One native acquisition in flight, as a {@link CompletableFuture} of its Java object:
 * completed from the etcdlock runtime, cancellable (the waiter key is then removed).
 */
final class AsyncAcquire<T extends AutoCloseable> extends CompletableFuture<T> {
    final long id;
    /** Completes when the native side has finished (acquired, failed or cancelled). */
    final CompletableFuture<Void> settled = new CompletableFuture<>();

    /** The acquisition's span, or null. */
    private final Telemetry.Acquire span;

    /** {@code span}: the acquisition's span (ended here), or null. */
    AsyncAcquire(EtcdLockClient client, String name, LongFunction<T> wrap, LongConsumer free, Telemetry.Acquire span) {
        long start = System.nanoTime();
        this.span = span;
        this.id = NativeBridge.register((g, value, error) -> {
            // Tell the listener first, so the acquisition is recorded by the time the caller
            // sees its outcome.
            Metrics.Result result = error == null && isDone() ? Metrics.Result.CANCELLED : resultOf(error);
            heard(client, name, result, start);
            try {
                if (error != null) {
                    spanEnded(result, error);
                    completeExceptionally(error);
                } else if (isDone()) {
                    // Cancelled meanwhile: nobody will use this hold; release it.
                    spanEnded(Metrics.Result.CANCELLED, null);
                    free.accept(g);
                } else {
                    T held = wrap.apply(g);
                    // The hold's span starts before the caller can see (and end) the hold.
                    if (span != null && held instanceof LockGuard) {
                        span.acquired((LockGuard) held);
                    }
                    if (!complete(held)) {
                        // Cancelled between the check above and now: nobody will use this
                        // hold. Free it through the wrapper's own handle (once; its cleaner
                        // would free it again if the pointer were freed here directly).
                        if (held instanceof LockGuard) {
                            ((LockGuard) held).endHoldSpan(null);
                            ((LockGuard) held).discard();
                        } else if (held instanceof MultiLockGuard) {
                            ((MultiLockGuard) held).discard();
                        } else {
                            free.accept(g);
                        }
                    }
                }
            } finally {
                settled.complete(null);
            }
        });
    }

    private void spanEnded(Metrics.Result result, Throwable error) {
        if (span != null) {
            span.ended(result, error);
        }
    }

    /** The acquisition could not start: fail the future (and end its span) with {@code e}. */
    void failedToStart(RuntimeException e) {
        spanEnded(resultOf(e), e);
        completeExceptionally(e);
    }

    /**
     * Cancel and wait (uninterruptibly; bounded by the request timeout on the native
     * side) until the waiter key is gone. A hold that won the race is released.
     */
    void cancelAndSettle() {
        cancel(true);
        boolean interrupted = Thread.interrupted();
        try {
            while (true) {
                try {
                    settled.get();
                    break;
                } catch (InterruptedException e) {
                    interrupted = true;
                } catch (ExecutionException e) {
                    break;
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
        if (isDone() && !isCancelled() && !isCompletedExceptionally()) {
            try {
                join().close();
            } catch (Exception ignored) {
                // lost meanwhile: nothing left to release
            }
        }
    }

    @Override
    public boolean cancel(boolean mayInterruptIfRunning) {
        boolean r = super.cancel(mayInterruptIfRunning);
        if (r) {
            NativeBridge.cancelAsync(id);
        }
        return r;
    }

    /** Tell {@code client}'s acquisition listener, if any, how an acquisition begun at {@code startNanos} ended. */
    static void heard(EtcdLockClient client, String name, Metrics.Result result, long startNanos) {
        EtcdLockClient.AcquisitionListener l = client.acquisitionListener;
        if (l != null) {
            try {
                l.onAcquisition(name, result, Duration.ofNanos(System.nanoTime() - startNanos));
            } catch (RuntimeException ignored) {
                // a listener's failure is not the acquisition's
            }
        }
    }

    static Metrics.Result resultOf(Throwable error) {
        if (error == null) {
            return Metrics.Result.ACQUIRED;
        } else if (error instanceof LockTimeoutException) {
            return Metrics.Result.TIMEOUT;
        } else if (error instanceof WouldBlockException) {
            return Metrics.Result.WOULD_BLOCK;
        } else if (error instanceof CancelledException) {
            return Metrics.Result.CANCELLED;
        }
        return Metrics.Result.ERROR;
    }

    /** Wait for {@code f}: interruptibly (cancelling and settling it) or not (re-asserting the interrupt). */
    static <T extends AutoCloseable> T await(AsyncAcquire<T> f, String what, boolean interruptible) {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return f.get();
                } catch (InterruptedException e) {
                    if (interruptible) {
                        f.cancelAndSettle();
                        throw new CancelledException("interrupted while waiting for " + what);
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
