package io.etcdlock.demo;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

import io.etcdlock.EtcdLockClient;
import io.etcdlock.LockGuard;

/**
 * Seed 001's load test, end to end: stock 300 in etcd, two {@link StockServer} JVMs on
 * loopback ports, 500 concurrent purchase requests spread over both; prints sold, final
 * stock and oversold. Runs once with the lock and once with it switched off.
 *
 * <p>Run: {@code bindings-java/demo.sh stock} (args: [stock] [requests] [lock|no-lock|both]).
 */
public final class StockDemo {
    /** Outcome of one run. */
    public static final class Result {
        public final int sold;
        public final int soldOut;
        public final int errors;
        public final int finalStock;
        public final int initialStock;

        Result(int sold, int soldOut, int errors, int finalStock, int initialStock) {
            this.sold = sold;
            this.soldOut = soldOut;
            this.errors = errors;
            this.finalStock = finalStock;
            this.initialStock = initialStock;
        }

        /** Items sold that did not exist: sold beyond what the stock decrease accounts for. */
        public int oversold() {
            return sold - (initialStock - finalStock);
        }

        @Override
        public String toString() {
            return String.format("sold=%d, stock=%d, oversold=%d (sold-out answers %d, errors %d)",
                    sold, finalStock, oversold(), soldOut, errors);
        }
    }

    public static void main(String[] args) throws Exception {
        int stock = args.length > 0 ? Integer.parseInt(args[0]) : 300;
        int requests = args.length > 1 ? Integer.parseInt(args[1]) : 500;
        String mode = args.length > 2 ? args[2] : "both";
        try (DemoEtcd etcd = DemoEtcd.start()) {
            if (!mode.equals("no-lock")) {
                Result r = run(etcd.endpoints(), stock, requests, true);
                System.out.println("with the etcdlock lock:    " + r);
            }
            if (!mode.equals("lock")) {
                Result r = run(etcd.endpoints(), stock, requests, false);
                System.out.println("with the lock switched off: " + r);
            }
        }
        System.exit(0);
    }

    /** Starts one stock service instance that prints {@code LISTENING <port>} on stdout. */
    public interface Launcher {
        Process start(String endpoints, boolean useLock) throws Exception;
    }

    /** One run against two {@link StockServer} JVMs. */
    public static Result run(List<String> endpoints, int stock, int requests, boolean useLock) throws Exception {
        return run(endpoints, stock, requests, useLock, StockDemo::startServer);
    }

    /** One run: reset the stock, start two servers, fire the requests, read the result. */
    public static Result run(List<String> endpoints, int stock, int requests, boolean useLock, Launcher launcher)
            throws Exception {
        String eps = String.join(",", endpoints);
        try (EtcdLockClient admin = EtcdLockClient.builder().endpoints(endpoints).build()) {
            try (LockGuard g = admin.newLock(StockServer.LOCK).acquire(Duration.ofSeconds(10))) {
                g.put(StockServer.STOCK_KEY, Integer.toString(stock));
            }
            List<Process> servers = new ArrayList<>();
            List<Integer> ports = new ArrayList<>();
            try {
                for (int i = 0; i < 2; i++) {
                    Process p = launcher.start(eps, useLock);
                    servers.add(p);
                    BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
                    String line = r.readLine();
                    while (line != null && !line.startsWith("LISTENING ")) {
                        line = r.readLine(); // skip start-up logging
                    }
                    if (line == null) {
                        throw new IllegalStateException("stock server did not start: " + line);
                    }
                    ports.add(Integer.parseInt(line.substring(10).trim()));
                }
                AtomicInteger sold = new AtomicInteger();
                AtomicInteger soldOut = new AtomicInteger();
                AtomicInteger errors = new AtomicInteger();
                ExecutorService pool = Executors.newFixedThreadPool(64);
                // The client gets its own executor: the pool's threads all block in send().
                HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
                        .connectTimeout(Duration.ofSeconds(10)).build();
                CountDownLatch go = new CountDownLatch(1);
                List<CompletableFuture<Void>> all = new ArrayList<>();
                for (int i = 0; i < requests; i++) {
                    URI uri = URI.create("http://127.0.0.1:" + ports.get(i % 2) + "/stock/reduce");
                    all.add(CompletableFuture.runAsync(() -> {
                        try {
                            go.await();
                            HttpResponse<String> resp = http.send(HttpRequest.newBuilder(uri)
                                    .timeout(Duration.ofSeconds(120)).build(), HttpResponse.BodyHandlers.ofString());
                            String body = resp.body();
                            if (body.startsWith("SOLD-OUT")) {
                                soldOut.incrementAndGet();
                            } else if (body.startsWith("SOLD")) {
                                sold.incrementAndGet();
                            } else {
                                errors.incrementAndGet();
                                System.err.println("request failed: " + body);
                            }
                        } catch (Exception e) {
                            errors.incrementAndGet();
                            System.err.println("request failed: " + e);
                        }
                    }, pool));
                }
                go.countDown(); // all 500 at once
                CompletableFuture.allOf(all.toArray(new CompletableFuture[0])).join();
                pool.shutdown();
                int finalStock;
                try (LockGuard g = admin.newLock(StockServer.LOCK).acquire(Duration.ofSeconds(10))) {
                    finalStock = Integer.parseInt(g.get(StockServer.STOCK_KEY));
                }
                return new Result(sold.get(), soldOut.get(), errors.get(), finalStock, stock);
            } finally {
                for (Process p : servers) {
                    p.getOutputStream().close();
                }
                for (Process p : servers) {
                    p.waitFor();
                }
            }
        }
    }

    /** Start a {@link StockServer} JVM. */
    public static Process startServer(String eps, boolean useLock) throws Exception {
        String java = System.getProperty("java.home") + File.separator + "bin" + File.separator + "java";
        List<String> cmd = new ArrayList<>(List.of(java, "-cp", System.getProperty("java.class.path"),
                StockServer.class.getName(), eps, "0"));
        if (!useLock) {
            cmd.add("--no-lock");
        }
        return new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }
}
