package io.etcdlock.demo;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.Lock;

import io.etcdlock.EtcdLock;
import io.etcdlock.EtcdLockClient;

/**
 * Seed 000, route 1 ({@code EtcdClient} + {@code MyThread}), rewritten: three threads
 * contend for {@code /lock/mylock}; each prints when it holds the lock, with its key and
 * fencing token, works, and releases. No hand-made lease, keep-alive timer, UUID key or
 * predecessor watch: etcdlock does those (and removes the waiter key if a wait is abandoned).
 *
 * <p>Run: {@code bindings-java/demo.sh route1}
 */
public final class Route1Demo {
    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 3;
        long workMs = args.length > 1 ? Long.parseLong(args[1]) : 500;
        try (DemoEtcd etcd = DemoEtcd.start();
             EtcdLockClient client = EtcdLockClient.builder().endpoints(etcd.endpoints()).ttl(Duration.ofSeconds(15)).build()) {
            String lockName = "/lock/mylock";
            List<Thread> ts = new ArrayList<>();
            long[] lastToken = {0};
            for (int i = 0; i < threads; i++) {
                Thread t = new Thread(() -> {
                    Lock lock = client.newLock(lockName); // one Lock per thread, like the seed's MyThread
                    lock.lock();
                    try {
                        long token = ((EtcdLock) lock).guard().fencingToken();
                        synchronized (lastToken) {
                            if (token <= lastToken[0]) {
                                throw new IllegalStateException("fencing token went backwards");
                            }
                            lastToken[0] = token;
                        }
                        System.out.printf("[lock]   %s holds %s (key %s, fencing token %d)%n",
                                Thread.currentThread().getName(), lockName, ((EtcdLock) lock).guard().key(), token);
                        Thread.sleep(workMs); // the business logic
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    } finally {
                        System.out.printf("[unlock] %s releases %s%n", Thread.currentThread().getName(), lockName);
                        lock.unlock();
                    }
                }, "Thread-" + i);
                t.start();
                ts.add(t);
            }
            for (Thread t : ts) {
                t.join();
            }
            System.out.println("route 1: " + threads + " threads took turns, tokens strictly increasing");
        }
    }
}
