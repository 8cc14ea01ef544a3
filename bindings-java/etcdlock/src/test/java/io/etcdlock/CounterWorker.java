package io.etcdlock;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Child-JVM (and in-process) worker: {@code threads} threads each do {@code rounds} times
 * lock → read counter → write counter+1 → unlock, with the non-atomic read-modify-write
 * done through plain guarded get/put. Args: endpoints(comma) lockName counterKey threads rounds.
 */
public final class CounterWorker {
    public static void main(String[] args) throws Exception {
        List<String> eps = Arrays.asList(args[0].split(","));
        try (EtcdLockClient c = EtcdLockClient.builder().endpoints(eps).ttl(Duration.ofSeconds(5)).build()) {
            run(c, args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]));
        }
        System.out.println("DONE");
        System.out.flush();
    }

    static void run(EtcdLockClient c, String name, String counterKey, int threads, int rounds) throws Exception {
        List<Thread> ts = new ArrayList<>();
        List<Throwable> errors = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread th = new Thread(() -> {
                EtcdLock lock = c.newLock(name);
                try {
                    for (int i = 0; i < rounds; i++) {
                        lock.lock();
                        try {
                            LockGuard g = lock.guard();
                            String v = g.get(counterKey);
                            int n = v == null ? 0 : Integer.parseInt(v);
                            Thread.yield(); // widen the race window a lock must close
                            g.put(counterKey, Integer.toString(n + 1));
                        } finally {
                            lock.unlock();
                        }
                    }
                } catch (Throwable e) {
                    synchronized (errors) {
                        errors.add(e);
                    }
                }
            });
            th.start();
            ts.add(th);
        }
        for (Thread th : ts) {
            th.join();
        }
        if (!errors.isEmpty()) {
            throw new AssertionError("worker errors: " + errors, errors.get(0));
        }
    }
}
