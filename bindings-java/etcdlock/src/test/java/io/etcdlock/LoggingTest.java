package io.etcdlock;

import static io.etcdlock.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.slf4j.LoggerFactory;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;

/** Core's log events reach SLF4J's {@code io.etcdlock.core} logger (logback here). */
@ExtendWith(EtcdExtension.class)
class LoggingTest {
    /** A ListAppender that also hands each event to a queue, so a test awaits it. */
    static final class Captured extends ListAppender<ILoggingEvent> {
        final BlockingQueue<ILoggingEvent> queue = new LinkedBlockingQueue<>();

        @Override
        protected void append(ILoggingEvent e) {
            // Fix the event's thread name (and message) here, on the appending thread: logback
            // reads Thread.currentThread() on the first getThreadName(), which would otherwise
            // be the test's thread whenever it got the event before another appender asked.
            e.prepareForDeferredProcessing();
            super.append(e);
            queue.add(e);
        }

        /** The next event whose message starts with {@code prefix} (others are skipped). */
        ILoggingEvent next(String prefix) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (true) {
                ILoggingEvent e = queue.poll(deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
                assertNotNull(e, () -> "no log event \"" + prefix + "...\" within 30 s; had " + messages());
                if (e.getFormattedMessage().startsWith(prefix)) {
                    return e;
                }
            }
        }

        /**
         * The messages so far. Core's log thread appends while a test reads: AppenderBase's
         * doAppend holds the appender's monitor, so read under it (an unsynchronized read threw
         * ConcurrentModificationException in 2 of 3 full runs on a loaded machine).
         */
        List<String> messages() {
            synchronized (this) {
                return list.stream().map(ILoggingEvent::getFormattedMessage).collect(Collectors.toList());
            }
        }
    }

    final Logger core = (Logger) LoggerFactory.getLogger("io.etcdlock.core");
    final Captured appender = new Captured();
    Level before;

    @BeforeEach
    void attach() {
        before = core.getLevel();
        appender.start();
        core.addAppender(appender);
    }

    @AfterEach
    void detach() {
        core.detachAppender(appender);
        core.setLevel(before);
    }

    static Map<String, String> kv(ILoggingEvent e) {
        return e.getKeyValuePairs().stream().collect(Collectors.toMap(p -> p.key, p -> String.valueOf(p.value)));
    }

    @Test
    void lossByAnOutsideDeleteLogsAWarning() throws Exception {
        core.setLevel(Level.WARN);
        String name = uniqueName("log-lost");
        try (EtcdLockClient c = client()) {
            LockGuard g = c.newLock(name).acquire();
            CompletableFuture<LossReason> lost = new CompletableFuture<>();
            g.onLost(lost::complete);
            raw().getKVClient().delete(bs(g.key())).get(10, TimeUnit.SECONDS);
            assertEquals(LossReason.KEY_DELETED, lost.get(30, TimeUnit.SECONDS));
            ILoggingEvent e = appender.next("lock lost");
            assertEquals(ch.qos.logback.classic.Level.WARN, e.getLevel());
            assertEquals("io.etcdlock.core", e.getLoggerName());
            assertEquals("lock lost lock=" + name + " reason=KeyDeleted", e.getFormattedMessage());
            Map<String, String> kv = kv(e);
            assertEquals(name, kv.get("lock"));
            assertEquals("KeyDeleted", kv.get("reason"));
            assertTrue(kv.get("target").startsWith("etcdlock"), "target: " + kv.get("target"));
            assertThrows(LockLostException.class, g::close);
        }
    }

    @Test
    void acquiredIsLoggedOnlyAtDebug() throws Exception {
        String atInfo = uniqueName("log-info");
        String atDebug = uniqueName("log-debug");
        core.setLevel(Level.INFO);
        try (EtcdLockClient c = client()) {
            c.newLock(atInfo).acquire().close();
            core.setLevel(Level.DEBUG);
            LockGuard g = c.newLock(atDebug).acquire();
            ILoggingEvent e = appender.next("acquired lock=" + atDebug);
            assertEquals(ch.qos.logback.classic.Level.DEBUG, e.getLevel());
            assertEquals("acquired lock=" + atDebug + " fencing_token=" + g.fencingToken(), e.getFormattedMessage());
            assertEquals(Long.toString(g.fencingToken()), kv(e).get("fencing_token"));
            g.close();
            appender.next("released lock=" + atDebug);
        }
        // Core's records reach SLF4J in order on one thread: the INFO-time acquisition came
        // first and would be in the list before the DEBUG-time one had it been forwarded.
        for (String m : appender.messages()) {
            assertFalse(m.contains(atInfo), "logged while the logger was at INFO: " + m);
        }
    }

    @Test
    void logThreadIsADaemonNamedEtcdlockLog() throws Exception {
        core.setLevel(Level.DEBUG);
        String name = uniqueName("log-thread");
        try (EtcdLockClient c = client()) {
            c.newLock(name).acquire().close();
            assertEquals("etcdlock-log", appender.next("acquired lock=" + name).getThreadName());
        }
        Thread t = Thread.getAllStackTraces().keySet().stream()
                .filter(th -> th.getName().equals("etcdlock-log")).findFirst().orElseThrow();
        assertTrue(t.isDaemon());
    }
}
