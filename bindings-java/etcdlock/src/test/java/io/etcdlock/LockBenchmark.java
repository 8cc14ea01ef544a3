package io.etcdlock;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;

import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.op.Cmp;
import io.etcd.jetcd.op.CmpTarget;
import io.etcd.jetcd.op.Op;
import io.etcd.jetcd.options.DeleteOption;
import io.etcd.jetcd.options.PutOption;

/**
 * Uncontended lock+unlock latency of etcdlock from Java, against floors measured in the
 * same run on the same etcd: the raw etcd round trip (Txn put-with-lease + Delete) through
 * the native etcd client, the same through jetcd, and jetcd's own Lock client.
 * Run: {@code bindings-java/bench.sh [iterations]}.
 */
public final class LockBenchmark {
    interface Op1 {
        void run(int i) throws Exception;
    }

    public static void main(String[] args) throws Exception {
        int n = args.length > 0 ? Integer.parseInt(args[0]) : 1000;
        int warm = Math.max(50, n / 5);
        try (EtcdExtension.Etcd etcd = EtcdExtension.Etcd.start();
             EtcdLockClient client = EtcdLockClient.builder().endpoints(etcd.endpoints).ttl(Duration.ofSeconds(30)).build();
             Client jetcd = Client.builder().endpoints(etcd.endpoints.toArray(new String[0])).build()) {
            long lease = client.rawGrantLease(30);
            long jlease = jetcd.getLeaseClient().grant(30).get().getID();
            // Keep the jetcd lease alive for the run.
            jetcd.getLeaseClient().keepAlive(jlease, new io.grpc.stub.StreamObserver<>() {
                public void onNext(io.etcd.jetcd.lease.LeaseKeepAliveResponse r) {}
                public void onError(Throwable t) {}
                public void onCompleted() {}
            });
            EtcdLock lock = client.newLock("bench/lock-interface");
            ByteSequence jkey = bs("bench/jetcd-raw/k");

            System.out.printf("etcdlock Java benchmark: %d iterations after %d warm-up, etcd %s%n", n, warm, etcd.endpoints);
            double[] raw = measure("raw floor: native etcd-client Txn(put+lease)+Delete", n, warm,
                    i -> client.rawRoundTrip("bench/raw/k", lease));
            double[] jraw = measure("raw floor: jetcd Txn(put+lease)+Delete", n, warm, i -> {
                jetcd.getKVClient().txn()
                        .If(new Cmp(jkey, Cmp.Op.EQUAL, CmpTarget.createRevision(0)))
                        .Then(Op.put(jkey, bs(""), PutOption.newBuilder().withLeaseId(jlease).build()))
                        .commit().get(5, TimeUnit.SECONDS);
                jetcd.getKVClient().delete(jkey).get(5, TimeUnit.SECONDS);
            });
            double[] guard = measure("etcdlock acquire()+close() (LockGuard)", n, warm, i -> {
                try (LockGuard g = client.acquire("bench/guard")) {
                    if (g.fencingToken() <= 0) {
                        throw new AssertionError();
                    }
                }
            });
            double[] lk = measure("etcdlock Lock.lock()+unlock()", n, warm, i -> {
                lock.lock();
                lock.unlock();
            });
            double[] jl = measure("jetcd Lock client lock()+unlock()", n, warm, i -> {
                ByteSequence key = jetcd.getLockClient().lock(bs("bench/jetcd-lock"), jlease).get(5, TimeUnit.SECONDS).getKey();
                jetcd.getLockClient().unlock(key).get(5, TimeUnit.SECONDS);
            });
            System.out.println();
            System.out.printf("p50 ratio etcdlock guard / raw floor (native)  = %.2fx%n", guard[0] / raw[0]);
            System.out.printf("p50 ratio etcdlock Lock  / raw floor (native)  = %.2fx%n", lk[0] / raw[0]);
            System.out.printf("p50 ratio etcdlock guard / raw floor (jetcd)   = %.2fx%n", guard[0] / jraw[0]);
            System.out.printf("p50 ratio jetcd Lock     / raw floor (native)  = %.2fx%n", jl[0] / raw[0]);
            System.out.printf("p50 ratio jetcd Lock     / etcdlock guard      = %.2fx%n", jl[0] / guard[0]);
            jetcd.getLeaseClient().revoke(jlease).get(5, TimeUnit.SECONDS);
        }
        System.exit(0);
    }

    static ByteSequence bs(String s) {
        return ByteSequence.from(s, StandardCharsets.UTF_8);
    }

    static double[] measure(String what, int n, int warm, Op1 op) throws Exception {
        for (int i = 0; i < warm; i++) {
            op.run(i);
        }
        long[] t = new long[n];
        for (int i = 0; i < n; i++) {
            long t0 = System.nanoTime();
            op.run(i);
            t[i] = System.nanoTime() - t0;
        }
        Arrays.sort(t);
        double p50 = t[n / 2] / 1e3;
        double p99 = t[Math.min(n - 1, (int) (n * 0.99))] / 1e3;
        System.out.printf("  %-55s p50 %8.1f us   p99 %8.1f us%n", what, p50, p99);
        return new double[] {p50, p99};
    }
}
