package io.etcdlock;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The native core's log events, into the SLF4J logger {@value #NAME}: {@code DEBUG} for each
 * hold acquired and released, {@code INFO} when an etcd member fails over or the watch stream is
 * re-created, {@code WARN} when keep-alives start failing (a hold at risk), when a hold is lost
 * and when an unlock could not reach etcd. The message is core's, followed by the event's fields
 * as {@code key=value} ({@code lock}, {@code reason}, {@code fencing_token}, ...); with SLF4J 2's
 * fluent API the fields are also the event's key-value pairs, with {@code target}, the core
 * module that logged it.
 *
 * <p>Core forwards only the records the logger is enabled for: the level is read when a client
 * is built, at each acquisition, and whenever a record arrives (a record the logger no longer
 * wants is dropped and lowers what core forwards). Records reach SLF4J on one daemon thread,
 * {@code etcdlock-log}, never on the caller's or the runtime's threads.
 */
final class CoreLogs {
    /** The logger every core event goes to. */
    static final String NAME = "io.etcdlock.core";
    private static final Logger LOG = LoggerFactory.getLogger(NAME);
    /** SLF4J 2's fluent API ({@code Logger.atWarn()}) is on the class path (an SLF4J 1.7 API is not). */
    private static final boolean FLUENT = hasFluent();
    /** What core forwards now (see {@link #level()}); -1 before the first {@link #sync()}. */
    private static volatile int forwarded = -1;

    private CoreLogs() {}

    private static boolean hasFluent() {
        try {
            Logger.class.getMethod("atWarn");
            return true;
        } catch (NoSuchMethodException | LinkageError e) {
            return false;
        }
    }

    /** Install core's forwarder (once per process; false if core had a subscriber already) and sync the level. */
    static void start() {
        NativeBridge.forwardLogs();
        sync();
    }

    /** The lowest level the logger wants, in core's numbers: 4 debug, 3 info, 2 warn, 1 error, 0 none. */
    static int level() {
        return LOG.isDebugEnabled() ? 4 : LOG.isInfoEnabled() ? 3 : LOG.isWarnEnabled() ? 2
                : LOG.isErrorEnabled() ? 1 : 0;
    }

    /** Tell core which records the logger wants now (a native call only when that changed). */
    static void sync() {
        int l = level();
        if (l != forwarded) {
            forwarded = l;
            NativeBridge.setLogLevel(l);
        }
    }

    /** One record from core's log thread; {@code fields} alternate names and values. */
    static void log(int level, String target, String message, String[] fields) {
        try {
            if (level > level()) {
                sync(); // the logger no longer wants it: forward less from now on
                return;
            }
            StringBuilder text = new StringBuilder(message);
            for (int i = 0; i + 1 < fields.length; i += 2) {
                text.append(' ').append(fields[i]).append('=').append(fields[i + 1]);
            }
            String msg = text.toString();
            if (FLUENT) {
                org.slf4j.spi.LoggingEventBuilder b;
                switch (level) {
                    case 1: b = LOG.atError(); break;
                    case 2: b = LOG.atWarn(); break;
                    case 3: b = LOG.atInfo(); break;
                    case 4: b = LOG.atDebug(); break;
                    default: b = LOG.atTrace(); break;
                }
                b = b.setMessage(msg).addKeyValue("target", target);
                for (int i = 0; i + 1 < fields.length; i += 2) {
                    b = b.addKeyValue(fields[i], fields[i + 1]);
                }
                b.log();
                return;
            }
            switch (level) {
                case 1: LOG.error(msg); break;
                case 2: LOG.warn(msg); break;
                case 3: LOG.info(msg); break;
                case 4: LOG.debug(msg); break;
                default: LOG.trace(msg); break;
            }
        } catch (Throwable t) {
            // A failing logger loses this record, never core's log thread.
        }
    }
}
