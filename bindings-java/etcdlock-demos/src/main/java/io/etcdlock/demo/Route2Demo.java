package io.etcdlock.demo;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import io.etcdlock.EtcdLockClient;
import io.etcdlock.LockGuard;
import io.etcdlock.LockTimeoutException;

/**
 * Seed 000, route 2 ({@code DistributedLock} + {@code KeepAliveTask} + {@code LockResult} over
 * jetcd's Lock client), rewritten: five threads contend for {@code /lock/mylock} through
 * try-with-resources guards. The lease and its keep-alive belong to the client (one for all
 * locks, no timer per lock that races the wait); a loss listener says if a hold ever ends
 * early; a timeout leaves no key behind.
 *
 * <p>Run: {@code bindings-java/demo.sh route2}
 */
public final class Route2Demo {
    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 5;
        long workMs = args.length > 1 ? Long.parseLong(args[1]) : 300;
        try (DemoEtcd etcd = DemoEtcd.start();
             EtcdLockClient client = EtcdLockClient.builder().endpoints(etcd.endpoints()).ttl(Duration.ofSeconds(30)).build()) {
            String lockName = "/lock/mylock";
            List<Thread> ts = new ArrayList<>();
            for (int i = 0; i < threads; i++) {
                Thread t = new Thread(() -> {
                    String me = Thread.currentThread().getName();
                    System.out.println("[lock]   start to lock. " + me);
                    try (LockGuard guard = client.newLock(lockName).acquire(Duration.ofSeconds(60))) {
                        guard.onLost(reason -> System.out.println("[lost]   " + me + " lost the lock: " + reason));
                        System.out.printf("[lock]   lock successfully. %s (fencing token %d, lease %x)%n",
                                me, guard.fencingToken(), guard.leaseId());
                        Thread.sleep(workMs); // the business logic
                        System.out.println("[unlock] start to unlock. " + me);
                    } catch (LockTimeoutException e) {
                        System.out.println("[error]  " + me + " gave up waiting: " + e.getMessage());
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                    System.out.println("[unlock] unlock successfully. " + me);
                }, "Thread-" + i);
                t.start();
                ts.add(t);
            }
            for (Thread t : ts) {
                t.join();
            }
            System.out.println("route 2: " + threads + " threads took turns");
        }
    }
}
