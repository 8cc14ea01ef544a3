package io.etcdlock.shedlock;

import static org.assertj.core.api.Assertions.assertThat;

import io.etcdlock.EtcdExtension;
import io.etcdlock.EtcdLockClient;
import io.etcdlock.TestSupport;
import java.time.Duration;
import java.util.Optional;
import java.util.UUID;
import net.javacrumbs.shedlock.core.ClockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Two instances (two clients, two providers) on one job: expiry, stale unlock, stale extend. */
@ExtendWith(EtcdExtension.class)
class TwoInstancesTest {
    private static LockConfiguration config(String name, Duration atMost, Duration atLeast) {
        return new LockConfiguration(ClockProvider.now(), name, atMost, atLeast);
    }

    /** The stored record (core's JSON), read with a plain jetcd client; null if none. */
    private static String record(String name) throws Exception {
        return TestSupport.rawGet("__etcdlock/once/shedlock/" + name);
    }

    static long lockUntilMs(String json) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("\"lock_until_ms\":(-?\\d+)").matcher(json);
        if (!m.find()) {
            throw new AssertionError("no lock_until_ms in " + json);
        }
        return Long.parseLong(m.group(1));
    }

    @Test
    void aHolderThatNeverUnlocksLosesTheJobAfterLockAtMostForAndItsLateUnlockAndExtendTouchNothing() throws Exception {
        String name = "job-" + UUID.randomUUID();
        try (EtcdLockClient a = TestSupport.client(); EtcdLockClient b = TestSupport.client()) {
            EtcdLockProvider pa = new EtcdLockProvider(a);
            EtcdLockProvider pb = new EtcdLockProvider(b);

            Optional<SimpleLock> first = pa.lock(config(name, Duration.ofMillis(800), Duration.ZERO));
            assertThat(first).isNotEmpty();
            assertThat(pb.lock(config(name, Duration.ofMinutes(5), Duration.ZERO))).isEmpty();

            Thread.sleep(1000); // a's lockAtMostFor is over; a's client (and lease) is still alive
            Optional<SimpleLock> second = pb.lock(config(name, Duration.ofMinutes(5), Duration.ZERO));
            assertThat(second).isNotEmpty();
            String bRecord = record(name);
            assertThat(pb.record(name).orElseThrow().lockUntil().toEpochMilli()).isEqualTo(lockUntilMs(bRecord));

            // a's late extend and unlock leave b's record as it is
            SimpleLock aLock = first.get();
            assertThat(aLock.extend(Duration.ofMinutes(5), Duration.ZERO)).isEmpty();
            assertThat(record(name)).isEqualTo(bRecord);
            Optional<SimpleLock> aAgain = pa.lock(config(name, Duration.ofMillis(800), Duration.ZERO));
            assertThat(aAgain).isEmpty();

            second.get().unlock();
            assertThat(record(name)).isNull();
            assertThat(pa.lock(config(name, Duration.ofMinutes(5), Duration.ZERO))).isNotEmpty();
        }
    }

    @Test
    void unlockBeforeLockAtLeastForKeepsTheJobTakenUntilThenAndNoLonger() throws Exception {
        String name = "job-" + UUID.randomUUID();
        try (EtcdLockClient a = TestSupport.client(); EtcdLockClient b = TestSupport.client()) {
            EtcdLockProvider pa = new EtcdLockProvider(a);
            EtcdLockProvider pb = new EtcdLockProvider(b);
            LockConfiguration cfg = config(name, Duration.ofMinutes(5), Duration.ofMillis(1500));
            SimpleLock lock = pa.lock(cfg).orElseThrow();
            lock.unlock();
            assertThat(lockUntilMs(record(name))).isEqualTo(cfg.getLockAtLeastUntil().toEpochMilli());
            assertThat(pb.lock(config(name, Duration.ofMinutes(5), Duration.ZERO))).isEmpty();
            Thread.sleep(Duration.between(ClockProvider.now(), cfg.getLockAtLeastUntil()).toMillis() + 100);
            assertThat(pb.lock(config(name, Duration.ofMinutes(5), Duration.ZERO))).isNotEmpty();
        }
    }

    @Test
    void extendMovesLockUntilAndTheOldHandleIsInvalid() throws Exception {
        String name = "job-" + UUID.randomUUID();
        try (EtcdLockClient a = TestSupport.client()) {
            EtcdLockProvider pa = new EtcdLockProvider(a);
            SimpleLock lock = pa.lock(config(name, Duration.ofSeconds(1), Duration.ZERO)).orElseThrow();
            SimpleLock extended = lock.extend(Duration.ofMinutes(5), Duration.ZERO).orElseThrow();
            assertThat(lockUntilMs(record(name))).isGreaterThan(ClockProvider.now().plusSeconds(250).toEpochMilli());
            Thread.sleep(1200);
            assertThat(pa.lock(config(name, Duration.ofMinutes(5), Duration.ZERO))).isEmpty();
            extended.unlock();
            assertThat(record(name)).isNull();
        }
    }

    @Test
    void theProviderSharesCoresRunOnceRecordWithEveryLanguage() throws Exception {
        String name = "job-" + UUID.randomUUID();
        try (EtcdLockClient a = TestSupport.client(); EtcdLockClient b = TestSupport.client()) {
            EtcdLockProvider pa = new EtcdLockProvider(a);
            // What Python's @client.once("shedlock/<name>") and Node's runOnce do: core's record.
            io.etcdlock.OnceHold other = b.once().take("shedlock/" + name, Duration.ofMinutes(1)).orElseThrow();
            assertThat(pa.lock(config(name, Duration.ofMinutes(5), Duration.ZERO))).isEmpty();
            assertThat(pa.record(name)).contains(other);
            assertThat(b.once().finish(other, java.time.Instant.now(), java.time.Instant.EPOCH)).isTrue();
            SimpleLock l = pa.lock(config(name, Duration.ofMinutes(5), Duration.ZERO)).orElseThrow();
            assertThat(b.once().take("shedlock/" + name, Duration.ofMinutes(1))).isEmpty();
            l.unlock();
            assertThat(pa.record(name)).isEmpty();
            // Bad input is the typed InvalidArgument of every language, and takes nothing.
            java.time.Instant now = java.time.Instant.now();
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> b.once().take("shedlock/" + name, now, now))
                    .isInstanceOf(io.etcdlock.InvalidArgumentException.class).hasMessageContaining("at_most");
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> b.once().take("", now, now.plusSeconds(1)))
                    .isInstanceOf(io.etcdlock.InvalidArgumentException.class);
            assertThat(pa.record(name)).isEmpty();
        }
    }
}
