package io.etcdlock.demo;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.UUID;
import java.util.concurrent.Executors;
import java.util.concurrent.locks.Lock;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import io.etcdlock.EtcdLock;
import io.etcdlock.EtcdLockClient;
import io.etcdlock.LockGuard;

/**
 * Seed 001's {@code StockController}, as a plain-Java HTTP service on 127.0.0.1: {@code GET
 * /stock/reduce} sells one item if the stock in etcd is above zero. The stock lives in etcd
 * and is read and written with the lock's guarded get/put, so a holder that lost the lock
 * cannot write. With {@code --no-lock} every request locks a name of its own, i.e. there is
 * no mutual exclusion, and the same read-modify-write oversells.
 *
 * <p>Args: endpoints(comma) port [--no-lock]. Prints {@code LISTENING <port>}.
 */
public final class StockServer {
    public static final String LOCK = "stock-demo/lock";
    public static final String STOCK_KEY = "stock-demo/stock";

    public static void main(String[] args) throws Exception {
        EtcdLockClient client = EtcdLockClient.builder().endpoints(Arrays.asList(args[0].split(",")))
                .ttl(Duration.ofSeconds(10)).build();
        int port = Integer.parseInt(args[1]);
        boolean useLock = !(args.length > 2 && args[2].equals("--no-lock"));
        Lock lock = client.newLock(LOCK);
        HttpServer http = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 512);
        http.setExecutor(Executors.newFixedThreadPool(32));
        http.createContext("/stock/reduce", ex -> {
            try {
                reply(ex, 200, useLock ? reduceLocked(lock) : reduceUnlocked(client));
            } catch (RuntimeException e) {
                reply(ex, 500, "ERROR " + e);
            }
        });
        http.start();
        System.out.println("LISTENING " + http.getAddress().getPort());
        System.out.flush();
        // Stop when the parent closes our stdin.
        while (System.in.read() >= 0) {
            // ignore input
        }
        http.stop(0);
        client.close();
        System.exit(0);
    }

    /** The seed's controller body, under the distributed lock. */
    static String reduceLocked(Lock lock) {
        lock.lock();
        try {
            return sellOne(((EtcdLock) lock).guard());
        } finally {
            lock.unlock();
        }
    }

    /** The same body without exclusion: each request "locks" a name nobody else uses. */
    static String reduceUnlocked(EtcdLockClient client) {
        try (LockGuard own = client.newLock("stock-demo/nolock/" + UUID.randomUUID()).acquire()) {
            return sellOne(own);
        }
    }

    /** Sell one item if the stock (read and written through the guard) is above zero. */
    public static String sellOne(LockGuard guard) {
        int stock = Integer.parseInt(guard.get(STOCK_KEY));
        if (stock > 0) {
            pause(); // the seed's "business logic" between the read and the write
            guard.put(STOCK_KEY, Integer.toString(stock - 1));
            return "SOLD " + guard.fencingToken();
        }
        return "SOLD-OUT";
    }

    static void pause() {
        try {
            Thread.sleep(1);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static void reply(HttpExchange ex, int code, String body) throws IOException {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        ex.sendResponseHeaders(code, b.length);
        try (OutputStream os = ex.getResponseBody()) {
            os.write(b);
        }
    }
}
