package io.etcdlock.test;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;

import io.etcdlock.EtcdLockClient;
import io.etcdlock.LockGuard;
import io.etcdlock.LockLostException;
import io.etcdlock.LossReason;

/**
 * The code under test of {@link JobLossTest}, as an application has it: a job that writes report
 * lines while it holds the lock {@code report}, and stops as soon as the loss of its hold is
 * reported (another instance may hold the lock now).
 */
class ReportJob {
    private final EtcdLockClient client;
    private final Consumer<String> out;

    ReportJob(EtcdLockClient client, Consumer<String> out) {
        this.client = client;
        this.out = out;
    }

    /** Write until the hold is lost: why it was. */
    LossReason run() throws InterruptedException {
        AtomicReference<LossReason> why = new AtomicReference<>();
        CountDownLatch lost = new CountDownLatch(1);
        try (LockGuard guard = client.newLock("report").acquire(Duration.ofSeconds(10))) {
            guard.onLost(r -> {
                why.set(r);
                lost.countDown();
            });
            for (int line = 0; !lost.await(20, TimeUnit.MILLISECONDS); line++) {
                out.accept("line " + line + " (token " + guard.fencingToken() + ")");
            }
            return why.get();
        } catch (LockLostException e) {
            return e.reason(); // close() of a lost hold says so
        }
    }
}
