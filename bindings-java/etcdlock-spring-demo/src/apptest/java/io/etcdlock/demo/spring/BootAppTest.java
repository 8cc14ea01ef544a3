package io.etcdlock.demo.spring;

import static org.junit.jupiter.api.Assertions.*;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import io.etcdlock.demo.DemoEtcd;
import io.etcdlock.demo.StockDemo;

/**
 * The starter as a Spring Boot application uses it, run on each Boot the starter supports:
 * this one source is compiled and run by etcdlock-spring-demo (Boot 3.5) and by
 * etcdlock-spring-boot4-app (Boot 4), each with {@code -Detcdlock.expect-boot=<major>} so a
 * module cannot silently test the other's Boot. Two instances sell exactly the stock; the
 * {@code etcdlock} health is UP with etcd up, DOWN within its request timeout with etcd hung
 * (SIGSTOP), UP again after; the {@code etcdlock.*} meters are on {@code /actuator/metrics}.
 */
class BootAppTest {
    static DemoEtcd etcd;
    static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    @BeforeAll
    static void start() throws Exception {
        etcd = DemoEtcd.start();
    }

    @AfterAll
    static void stop() throws Exception {
        etcd.close();
    }

    @Test
    void twoInstancesSellExactlyTheStock() throws Exception {
        StockDemo.Result r = StockDemo.run(etcd.endpoints(), 300, 500, true, SpringStockDemo::startApp);
        System.out.println("Spring Boot " + expectedBoot() + " with the lock: " + r);
        assertEquals(0, r.errors, r.toString());
        assertEquals(300, r.sold, r.toString());
        assertEquals(0, r.finalStock, r.toString());
        assertEquals(0, r.oversold(), r.toString());
    }

    @Test
    void healthFollowsEtcdAndTheMetersAreExposed() throws Exception {
        Process app = SpringStockDemo.startApp(String.join(",", etcd.endpoints()), true,
                System.getProperty("java.home"), false, List.of("--etcdlock.request-timeout=1"));
        try {
            BufferedReader out = new BufferedReader(new InputStreamReader(app.getInputStream(), StandardCharsets.UTF_8));
            String boot = null;
            String line;
            while ((line = out.readLine()) != null && !line.startsWith("LISTENING ")) {
                if (line.startsWith("BOOT ")) {
                    boot = line.substring(5).trim();
                }
            }
            assertNotNull(line, "the app did not start");
            assertNotNull(boot, "the app did not say its Boot version");
            assertTrue(boot.startsWith(expectedBoot() + "."), "running Boot " + boot + ", expected " + expectedBoot() + ".x");
            String base = "http://127.0.0.1:" + line.substring(10).trim();

            HttpResponse<String> up = get(base + "/actuator/health/etcdlock");
            assertEquals(200, up.statusCode(), up.body());
            assertTrue(up.body().contains("\"status\":\"UP\""), up.body());
            assertTrue(up.body().contains("\"roundTripMillis\""), up.body());

            // One purchase, so the acquire meter has a sample; then the meters are listed.
            assertTrue(get(base + "/stock/reduce").body().startsWith("SOLD"));
            HttpResponse<String> names = get(base + "/actuator/metrics");
            for (String meter : List.of("etcdlock.acquire", "etcdlock.held", "etcdlock.waiting")) {
                assertTrue(names.body().contains("\"" + meter + "\""), meter + " missing from " + names.body());
            }
            HttpResponse<String> acquire = get(base + "/actuator/metrics/etcdlock.acquire");
            assertEquals(200, acquire.statusCode(), acquire.body());

            // etcd hung: DOWN within the 1 s request timeout (plus HTTP and scheduling slack).
            etcd.command("pause 0");
            try {
                long t0 = System.nanoTime();
                HttpResponse<String> down = get(base + "/actuator/health/etcdlock");
                long ms = (System.nanoTime() - t0) / 1_000_000;
                System.out.println("Spring Boot " + boot + ": health with etcd hung answered in " + ms + " ms: " + down.body());
                assertEquals(503, down.statusCode(), down.body());
                assertTrue(down.body().contains("\"status\":\"DOWN\""), down.body());
                assertTrue(ms < 3000, "health took " + ms + " ms with a 1 s request timeout");
            } finally {
                etcd.command("resume 0");
            }
            HttpResponse<String> again = get(base + "/actuator/health/etcdlock");
            assertEquals(200, again.statusCode(), again.body());
        } finally {
            app.getOutputStream().close();
            app.waitFor();
        }
    }

    private static HttpResponse<String> get(String url) throws Exception {
        return HTTP.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(30)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    private static String expectedBoot() {
        String v = System.getProperty("etcdlock.expect-boot", "");
        assertFalse(v.isEmpty(), "set -Detcdlock.expect-boot=<Boot major> (the module's pom does)");
        return v;
    }
}
