package io.etcdlock.spring;

import org.springframework.boot.actuate.health.AbstractHealthIndicator;
import org.springframework.boot.actuate.health.Health;

import io.etcdlock.EtcdLockClient;

/**
 * Actuator health {@code etcdlock} on Spring Boot 3 (Boot 4 gets
 * {@link EtcdLockBoot4HealthIndicator}, the same check): UP while the client's session is
 * alive and etcd answers a read within the request timeout ({@link EtcdLockClient#ping()}),
 * with the round trip and the locks held and waited for; DOWN with the error code and message
 * otherwise (etcd unreachable, client closed, credentials refused).
 */
public class EtcdLockHealthIndicator extends AbstractHealthIndicator {
    private final EtcdLockClient client;

    public EtcdLockHealthIndicator(EtcdLockClient client) {
        super("etcdlock health check failed");
        this.client = client;
    }

    @Override
    protected void doHealthCheck(Health.Builder builder) {
        HealthCheck h = HealthCheck.of(client);
        (h.up ? builder.up() : builder.down()).withDetails(h.details);
    }
}
