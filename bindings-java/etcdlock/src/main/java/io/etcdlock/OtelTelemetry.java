package io.etcdlock;

import java.util.concurrent.atomic.AtomicBoolean;

import io.opentelemetry.api.GlobalOpenTelemetry;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;

/**
 * {@link Telemetry} on the OpenTelemetry API (loaded only when {@link Telemetry#PRESENT}).
 * Without an explicit {@link OpenTelemetry}, spans go to the global one once it is set
 * ({@code GlobalOpenTelemetry.isSet()}, API 1.52 and later; an older API is asked with
 * {@code GlobalOpenTelemetry.get()}): etcdlock never sets the global instance itself, so an
 * SDK registered after the first lock still takes effect.
 */
final class OtelTelemetry extends Telemetry {
    static final String SCOPE = "etcdlock";
    static final AttributeKey<String> NAME = AttributeKey.stringKey("etcdlock.lock.name");
    static final AttributeKey<String> OPERATION = AttributeKey.stringKey("etcdlock.operation");
    static final AttributeKey<String> OUTCOME = AttributeKey.stringKey("etcdlock.outcome");
    static final AttributeKey<Long> TOKEN = AttributeKey.longKey("etcdlock.fencing_token");
    static final AttributeKey<String> ERROR_TYPE = AttributeKey.stringKey("error.type");
    static final AttributeKey<String> END = AttributeKey.stringKey("etcdlock.end");
    static final AttributeKey<String> LOSS_REASON = AttributeKey.stringKey("etcdlock.loss.reason");

    private final OpenTelemetry explicit;
    private volatile Tracer tracer;

    private OtelTelemetry(OpenTelemetry explicit) {
        this.explicit = explicit;
    }

    static Telemetry create(Object openTelemetry) {
        return new OtelTelemetry((OpenTelemetry) openTelemetry);
    }

    /** The tracer, or null while no global OpenTelemetry is set (and none was given). */
    private Tracer tracer() {
        Tracer t = tracer;
        if (t != null) {
            return t;
        }
        OpenTelemetry o = explicit;
        if (o == null) {
            if (!globalSet()) {
                return null;
            }
            o = GlobalOpenTelemetry.get();
        }
        t = o.getTracerProvider().tracerBuilder(SCOPE).setInstrumentationVersion(Version.VALUE).build();
        tracer = t;
        return t;
    }

    private static boolean globalSet() {
        try {
            return GlobalOpenTelemetry.isSet();
        } catch (NoSuchMethodError older) {
            return true;
        }
    }

    /** The artifact's version (the instrumentation scope's version), read once. */
    static final class Version {
        static final String VALUE = read();

        private static String read() {
            try (java.io.InputStream in = NativeLibrary.class.getResourceAsStream("etcdlock-version.properties")) {
                java.util.Properties p = new java.util.Properties();
                if (in != null) {
                    p.load(in);
                }
                return p.getProperty("version", "unknown");
            } catch (java.io.IOException e) {
                return "unknown";
            }
        }
    }

    @Override
    Acquire acquire(String name, String operation) {
        try {
            Tracer t = tracer();
            if (t == null) {
                return null;
            }
            Context parent = Context.current();
            Span s = t.spanBuilder("etcdlock.acquire").setSpanKind(SpanKind.INTERNAL).setParent(parent)
                    .setAttribute(NAME, name).setAttribute(OPERATION, operation).startSpan();
            if (!s.isRecording()) {
                s.end();
                return null;
            }
            return new OtelAcquire(t, parent, s, name, operation);
        } catch (RuntimeException | LinkageError e) {
            return null; // a failing tracer costs the spans, never the lock
        }
    }

    private static final class OtelAcquire implements Acquire {
        private final Tracer tracer;
        private final Context parent;
        private final Span span;
        private final String name;
        private final String operation;

        OtelAcquire(Tracer tracer, Context parent, Span span, String name, String operation) {
            this.tracer = tracer;
            this.parent = parent;
            this.span = span;
            this.name = name;
            this.operation = operation;
        }

        @Override
        public void acquired(LockGuard guard) {
            try {
                long token = guard.fencingToken();
                span.setAttribute(OUTCOME, "acquired").setAttribute(TOKEN, token).end();
                Span hold = tracer.spanBuilder("etcdlock.hold").setSpanKind(SpanKind.INTERNAL).setParent(parent)
                        .setAttribute(NAME, name).setAttribute(TOKEN, token).startSpan();
                guard.traceHold(new OtelHold(hold));
            } catch (RuntimeException | LinkageError e) {
                // the spans are lost, not the hold
            }
        }

        @Override
        public void ended(Metrics.Result result, Throwable error) {
            try {
                switch (result) {
                    case TIMEOUT:
                        // A one try that found the lock taken is core's Timeout for "zero timeout".
                        span.setAttribute(OUTCOME, operation.equals("try_lock") ? "would_block" : "timeout");
                        break;
                    case WOULD_BLOCK:
                        span.setAttribute(OUTCOME, "would_block");
                        break;
                    case CANCELLED:
                        span.setAttribute(OUTCOME, "cancelled");
                        break;
                    default:
                        span.setAttribute(OUTCOME, "error");
                        span.setAttribute(ERROR_TYPE, error instanceof EtcdLockException
                                ? coreName(((EtcdLockException) error).code().name())
                                : error == null ? "Internal" : error.getClass().getName());
                        span.setStatus(StatusCode.ERROR, error == null ? "" : String.valueOf(error.getMessage()));
                        break;
                }
                span.end();
            } catch (RuntimeException | LinkageError e) {
                // the span is lost, not the outcome
            }
        }
    }

    private static final class OtelHold implements Hold {
        private final Span span;
        private final AtomicBoolean ended = new AtomicBoolean();

        OtelHold(Span span) {
            this.span = span;
        }

        @Override
        public void end(LossReason lost) {
            if (!ended.compareAndSet(false, true)) {
                return;
            }
            try {
                if (lost == null) {
                    span.setAttribute(END, "released");
                } else {
                    span.addEvent("etcdlock.lost", Attributes.of(LOSS_REASON, coreName(lost.name())));
                    span.setAttribute(END, "lost");
                    span.setStatus(StatusCode.ERROR, "lock lost: " + coreName(lost.name()));
                }
                span.end();
            } catch (RuntimeException | LinkageError e) {
                // the span is lost, not the release
            }
        }
    }
}
