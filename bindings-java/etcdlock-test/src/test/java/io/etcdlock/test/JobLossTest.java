package io.etcdlock.test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.etcdlock.EtcdLockClient;
import io.etcdlock.LossReason;
import io.etcdlock.MemKey;
import io.etcdlock.MemStore;

/**
 * A test as a user writes it with the extension: "my job stops writing when it loses its lock",
 * for the two ways another party ends a hold at once (its lease expired, its key deleted).
 */
@EtcdLockTest
class JobLossTest {
    /** Start the job on a thread of its own; return once it has written (it holds the lock). */
    static CompletableFuture<LossReason> started(ReportJob job, BlockingQueue<String> lines) throws Exception {
        CompletableFuture<LossReason> stopped = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                stopped.complete(job.run());
            } catch (Throwable e) {
                stopped.completeExceptionally(e);
            }
        }, "report-job");
        t.setDaemon(true);
        t.start();
        assertNotNull(lines.poll(5, TimeUnit.SECONDS), "the job writes while it holds the lock");
        return stopped;
    }

    @Test
    void myJobStopsWritingWhenItsLeaseExpires(EtcdLockClient client, MemStore store) throws Exception {
        BlockingQueue<String> lines = new LinkedBlockingQueue<>();
        CompletableFuture<LossReason> stopped = started(new ReportJob(client, lines::add), lines);
        // The job's hold, as the store has it: one key under report/, on the client's lease.
        List<MemKey> held = store.keys("report/");
        assertEquals(1, held.size());
        assertTrue(store.expireLease(held.get(0).lease()));
        assertEquals(LossReason.LEASE_EXPIRED, stopped.get(5, TimeUnit.SECONDS), "the job stopped on the loss");
        assertTrue(store.keys("report/").isEmpty(), "the lease took its key");
    }

    @Test
    void myJobStopsWritingWhenItsKeyIsDeleted(EtcdLockClient client, MemStore store) throws Exception {
        BlockingQueue<String> lines = new LinkedBlockingQueue<>();
        CompletableFuture<LossReason> stopped = started(new ReportJob(client, lines::add), lines);
        assertTrue(store.deleteKey(store.keys("report/").get(0).keyString()));
        assertEquals(LossReason.KEY_DELETED, stopped.get(5, TimeUnit.SECONDS));
    }
}
