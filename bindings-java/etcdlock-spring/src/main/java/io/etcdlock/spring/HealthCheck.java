package io.etcdlock.spring;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;

import io.etcdlock.EtcdLockClient;
import io.etcdlock.EtcdLockException;
import io.etcdlock.Metrics;

/**
 * The one health check behind both Actuator indicators (Boot 3's
 * {@link EtcdLockHealthIndicator}, Boot 4's {@link EtcdLockBoot4HealthIndicator}): a
 * {@link EtcdLockClient#ping()} within the request timeout and the client's metrics.
 */
final class HealthCheck {
    final boolean up;
    final Map<String, Object> details = new LinkedHashMap<>();

    private HealthCheck(boolean up) {
        this.up = up;
    }

    static HealthCheck of(EtcdLockClient client) {
        try {
            Duration rtt = client.ping();
            Metrics m = client.metrics();
            HealthCheck h = new HealthCheck(true);
            h.details.put("endpoints", client.endpoints());
            h.details.put("roundTripMillis", rtt.toNanos() / 1e6);
            h.details.put("held", m.held());
            h.details.put("waiting", m.waiting());
            return h;
        } catch (EtcdLockException e) {
            HealthCheck h = new HealthCheck(false);
            h.details.put("error", e.code().name());
            h.details.put("message", e.getMessage());
            return h;
        }
    }
}
