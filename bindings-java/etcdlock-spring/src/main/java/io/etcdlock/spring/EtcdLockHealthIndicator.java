package io.etcdlock.spring;

import java.time.Duration;

import org.springframework.boot.actuate.health.AbstractHealthIndicator;
import org.springframework.boot.actuate.health.Health;

import io.etcdlock.EtcdLockClient;
import io.etcdlock.EtcdLockException;
import io.etcdlock.Metrics;

/**
 * Actuator health {@code etcdlock}: UP while the client's session is alive and etcd answers a
 * read within the request timeout ({@link EtcdLockClient#ping()}), with the round trip and the
 * locks held and waited for; DOWN with the error code and message otherwise (etcd unreachable,
 * client closed, credentials refused).
 */
public class EtcdLockHealthIndicator extends AbstractHealthIndicator {
    private final EtcdLockClient client;

    public EtcdLockHealthIndicator(EtcdLockClient client) {
        super("etcdlock health check failed");
        this.client = client;
    }

    @Override
    protected void doHealthCheck(Health.Builder builder) {
        try {
            Duration rtt = client.ping();
            Metrics m = client.metrics();
            builder.up()
                    .withDetail("endpoints", client.endpoints())
                    .withDetail("roundTripMillis", rtt.toNanos() / 1e6)
                    .withDetail("held", m.held())
                    .withDetail("waiting", m.waiting());
        } catch (EtcdLockException e) {
            builder.down().withDetail("error", e.code().name()).withDetail("message", e.getMessage());
        }
    }
}
