package io.etcdlock;

/**
 * A client's OpenTelemetry spans, when the OpenTelemetry API is on the class path
 * ({@link OtelTelemetry}); this class names no OpenTelemetry type, so the library runs
 * without it. Spans:
 *
 * <ul>
 *   <li>{@code etcdlock.acquire} (INTERNAL), from the call of an acquisition (lock, tryLock,
 *       acquire, their async twins, a permit, a read lock, campaign) to its return:
 *       {@code etcdlock.lock.name}, {@code etcdlock.operation} ({@code lock}, {@code try_lock}
 *       for a one-try acquisition, {@code campaign}), {@code etcdlock.outcome}
 *       ({@code acquired}, {@code would_block}, {@code timeout}, {@code cancelled},
 *       {@code error}); on {@code acquired} {@code etcdlock.fencing_token}; on {@code error}
 *       {@code error.type} (the core error code's name) and status ERROR.</li>
 *   <li>{@code etcdlock.hold} (INTERNAL), from the acquisition to the hold's end:
 *       {@code etcdlock.lock.name}, {@code etcdlock.fencing_token}, and at its end
 *       {@code etcdlock.end} ({@code released} or {@code lost}); a loss adds the event
 *       {@code etcdlock.lost} ({@code etcdlock.loss.reason}) and status ERROR.</li>
 * </ul>
 *
 * A multi-lock makes no spans, nor does a re-entry of an {@link EtcdLock} by its owner thread
 * (it asks etcd nothing).
 */
abstract class Telemetry {
    /** The OpenTelemetry API is on the class path (checked once). */
    static final boolean PRESENT = present();

    private static boolean present() {
        try {
            ClassLoader l = Telemetry.class.getClassLoader();
            Class.forName("io.opentelemetry.api.OpenTelemetry", false, l);
            Class.forName("io.opentelemetry.context.Context", false, l);
            return true;
        } catch (ClassNotFoundException | LinkageError e) {
            return false;
        }
    }

    /**
     * The telemetry of a client: null without the API. {@code openTelemetry} is an
     * {@code io.opentelemetry.api.OpenTelemetry}; null: the global one.
     */
    static Telemetry of(Object openTelemetry) {
        return PRESENT ? OtelTelemetry.create(openTelemetry) : null;
    }

    /** An acquisition's span, started now; null when nothing records it. Never throws. */
    abstract Acquire acquire(String name, String operation);

    /** One acquisition's span. */
    interface Acquire {
        /** Acquired {@code guard}: the acquire span ends and the hold span starts (ended by the guard). */
        void acquired(LockGuard guard);

        /** Ended without a hold ({@code error} null for a cancellation that raced a grant). */
        void ended(Metrics.Result result, Throwable error);
    }

    /** One hold's span; the first end counts. */
    interface Hold {
        /** The hold ended: released ({@code lost} null), or lost for {@code lost}. */
        void end(LossReason lost);
    }

    /** A code or reason as core names it: {@code INVALID_ARGUMENT} to {@code InvalidArgument}. */
    static String coreName(String enumName) {
        StringBuilder sb = new StringBuilder();
        for (String part : enumName.split("_")) {
            if (!part.isEmpty()) {
                sb.append(part.charAt(0)).append(part.substring(1).toLowerCase(java.util.Locale.ROOT));
            }
        }
        return sb.toString();
    }
}
