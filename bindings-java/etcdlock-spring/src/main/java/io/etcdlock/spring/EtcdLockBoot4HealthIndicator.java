package io.etcdlock.spring;

import org.springframework.boot.health.contributor.AbstractHealthIndicator;
import org.springframework.boot.health.contributor.Health;

import io.etcdlock.EtcdLockClient;

/**
 * Actuator health {@code etcdlock} on Spring Boot 4, whose health API moved to
 * {@code org.springframework.boot.health.contributor}: the same check as Boot 3's
 * {@link EtcdLockHealthIndicator} (UP with round trip, held and waiting; DOWN with the error
 * code and message). The auto-configuration registers whichever of the two the application's
 * Boot has.
 */
public class EtcdLockBoot4HealthIndicator extends AbstractHealthIndicator {
    private final EtcdLockClient client;

    public EtcdLockBoot4HealthIndicator(EtcdLockClient client) {
        super("etcdlock health check failed");
        this.client = client;
    }

    @Override
    protected void doHealthCheck(Health.Builder builder) {
        HealthCheck h = HealthCheck.of(client);
        (h.up ? builder.up() : builder.down()).withDetails(h.details);
    }
}
