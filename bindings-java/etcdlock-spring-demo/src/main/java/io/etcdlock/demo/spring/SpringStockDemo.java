package io.etcdlock.demo.spring;

import java.io.File;
import java.util.ArrayList;
import java.util.List;

import io.etcdlock.demo.DemoEtcd;
import io.etcdlock.demo.StockDemo;

/**
 * Seed 001's load test against two Spring Boot instances of {@link StockApplication} on
 * loopback ports: stock 300 in etcd, 500 concurrent purchases across both; prints sold,
 * stock and oversold, with the lock and with it switched off.
 *
 * <p>Run: {@code bindings-java/demo.sh spring-stock} (args: [stock] [requests] [lock|no-lock|both]).
 */
public final class SpringStockDemo {
    public static void main(String[] args) throws Exception {
        int stock = args.length > 0 ? Integer.parseInt(args[0]) : 300;
        int requests = args.length > 1 ? Integer.parseInt(args[1]) : 500;
        String mode = args.length > 2 ? args[2] : "both";
        try (DemoEtcd etcd = DemoEtcd.start()) {
            if (!mode.equals("no-lock")) {
                System.out.println("Spring Boot, with the etcdlock LockRegistry: "
                        + StockDemo.run(etcd.endpoints(), stock, requests, true, SpringStockDemo::startApp));
            }
            if (!mode.equals("lock")) {
                System.out.println("Spring Boot, lock switched off:             "
                        + StockDemo.run(etcd.endpoints(), stock, requests, false, SpringStockDemo::startApp));
            }
        }
        System.exit(0);
    }

    /** Start one {@link StockApplication} JVM on a free loopback port. */
    public static Process startApp(String endpoints, boolean useLock) throws Exception {
        return startApp(endpoints, useLock, System.getProperty("java.home"), false);
    }

    /**
     * Start one {@link StockApplication} JVM with the JDK at {@code javaHome}; with
     * {@code virtualThreads} (JDK 21+) Tomcat serves every request on a virtual thread
     * ({@code spring.threads.virtual.enabled=true}) scheduled on 2 carriers, and a request
     * that finds itself on a platform thread fails.
     */
    public static Process startApp(String endpoints, boolean useLock, String javaHome, boolean virtualThreads) throws Exception {
        return startApp(endpoints, useLock, javaHome, virtualThreads, List.of());
    }

    /** As above, with more {@code --name=value} application arguments. */
    public static Process startApp(String endpoints, boolean useLock, String javaHome, boolean virtualThreads,
            List<String> appArgs) throws Exception {
        String java = javaHome + File.separator + "bin" + File.separator + "java";
        // The app's temporary files (Tomcat's work directory) go where this JVM's do.
        List<String> cmd = new ArrayList<>(List.of(java, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "-Djava.io.tmpdir=" + System.getProperty("java.io.tmpdir")));
        if (virtualThreads) {
            cmd.addAll(List.of("-Djdk.virtualThreadScheduler.parallelism=2", "--enable-native-access=ALL-UNNAMED"));
        }
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), StockApplication.class.getName(),
                "--etcdlock.endpoints=" + endpoints, "--server.port=0", "--stock.lock=" + useLock));
        if (virtualThreads) {
            cmd.addAll(List.of("--spring.threads.virtual.enabled=true", "--stock.require-virtual-threads=true"));
        }
        cmd.addAll(appArgs);
        return new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }
}
