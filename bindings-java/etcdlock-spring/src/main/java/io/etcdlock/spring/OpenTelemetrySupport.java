package io.etcdlock.spring;

import org.springframework.beans.factory.BeanFactory;

import io.etcdlock.EtcdLockClientBuilder;
import io.opentelemetry.api.OpenTelemetry;

/** The application's {@link OpenTelemetry} bean for the client (loaded only with the API on the classpath). */
final class OpenTelemetrySupport {
    private OpenTelemetrySupport() {}

    /** Pass the one {@link OpenTelemetry} bean, if there is exactly one, to {@code b}. */
    static void apply(EtcdLockClientBuilder b, BeanFactory beans) {
        OpenTelemetry o = beans.getBeanProvider(OpenTelemetry.class).getIfUnique();
        if (o != null) {
            b.openTelemetry(o);
        }
    }
}
