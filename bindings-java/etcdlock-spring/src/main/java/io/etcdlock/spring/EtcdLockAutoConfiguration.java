package io.etcdlock.spring;

import java.nio.file.Path;

import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.integration.support.locks.LockRegistry;

import io.etcdlock.EtcdLockClient;
import io.etcdlock.EtcdLockClientBuilder;

/**
 * Spring Boot auto-configuration: an {@link EtcdLockClient} bean built from
 * {@link EtcdLockProperties} ({@code etcdlock.*}), closed with the context, and, when
 * Spring Integration is present, an {@link EtcdLockRegistry} as the {@link LockRegistry};
 * with Micrometer, {@link EtcdLockMeterBinder} meters; with Actuator, the {@code etcdlock}
 * health indicator ({@link EtcdLockHealthIndicator} on Boot 3, {@link EtcdLockBoot4HealthIndicator}
 * on Boot 4: the one whose health API is on the classpath); with an {@code OpenTelemetry} bean
 * (the OpenTelemetry API on the classpath), the client's spans go to it.
 * Either bean can be replaced by declaring your own. {@code etcdlock.enabled=false} turns
 * it all off.
 */
@AutoConfiguration
@ConditionalOnClass(EtcdLockClient.class)
@ConditionalOnProperty(prefix = "etcdlock", name = "enabled", matchIfMissing = true)
@EnableConfigurationProperties(EtcdLockProperties.class)
public class EtcdLockAutoConfiguration {

    /** The OpenTelemetry API is on the classpath (its types are named only in {@link OpenTelemetrySupport}). */
    private static final boolean OPEN_TELEMETRY = org.springframework.util.ClassUtils.isPresent(
            "io.opentelemetry.api.OpenTelemetry", EtcdLockAutoConfiguration.class.getClassLoader());

    /**
     * The client; connects at startup (fails the context with a typed exception if it cannot),
     * or with {@code etcdlock.lazy-connect=true} on its first call. Its spans go to the
     * application's {@code OpenTelemetry} bean when there is exactly one, else to the global
     * OpenTelemetry (once set).
     */
    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    public EtcdLockClient etcdLockClient(EtcdLockProperties p, org.springframework.beans.factory.BeanFactory beans) {
        EtcdLockClientBuilder b = EtcdLockClient.builder().endpoints(p.getEndpoints()).ttl(p.getTtl());
        // EtcdLockProperties keeps an empty value as null (unset).
        if (p.getNamespace() != null) {
            b.namespace(p.getNamespace());
        }
        if (p.getUsername() != null) {
            b.user(p.getUsername(), p.getPassword() == null ? "" : p.getPassword());
        }
        EtcdLockProperties.Tls tls = p.getTls();
        if (tls.getCa() != null || tls.getCert() != null || tls.getKey() != null) {
            b.tls(path(tls.getCa()), path(tls.getCert()), path(tls.getKey()));
            if (tls.getDomain() != null) {
                b.tlsDomain(tls.getDomain());
            }
        }
        if (p.getConnectTimeout() != null) {
            b.connectTimeout(p.getConnectTimeout());
        }
        if (p.getRequestTimeout() != null) {
            b.requestTimeout(p.getRequestTimeout());
        }
        if (p.getKeepaliveInterval() != null) {
            b.keepaliveInterval(p.getKeepaliveInterval());
        }
        if (p.getMargin() != null) {
            b.margin(p.getMargin());
        }
        if (p.getWatchHeldKeys() != null) {
            b.watchHeldKeys(p.getWatchHeldKeys());
        }
        if (p.getLazyConnect() != null) {
            b.lazyConnect(p.getLazyConnect());
        }
        if (OPEN_TELEMETRY) {
            OpenTelemetrySupport.apply(b, beans);
        }
        return b.build();
    }

    private static Path path(String s) {
        return s == null ? null : Path.of(s);
    }

    /**
     * {@link Locked} on bean methods: the advisor, and an auto-proxy creator if the application
     * has none (Boot's AOP auto-configuration usually registers it; this one only applies
     * infrastructure advisors such as this and {@code @Transactional}'s).
     * {@code etcdlock.locked.enabled=false} turns it off.
     */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnProperty(prefix = "etcdlock.locked", name = "enabled", matchIfMissing = true)
    @org.springframework.context.annotation.Import(LockedConfiguration.AutoProxy.class)
    static class LockedConfiguration {
        @Bean
        @org.springframework.context.annotation.Role(org.springframework.beans.factory.config.BeanDefinition.ROLE_INFRASTRUCTURE)
        static org.springframework.aop.Advisor etcdLockLockedAdvisor(
                org.springframework.beans.factory.ObjectProvider<EtcdLockClient> client) {
            // The client is looked up on use: advisors are created before ordinary beans.
            return new org.springframework.aop.support.DefaultPointcutAdvisor(
                    new org.springframework.aop.support.annotation.AnnotationMatchingPointcut(null, Locked.class, true),
                    new LockedInterceptor(client::getObject));
        }

        static class AutoProxy implements org.springframework.context.annotation.ImportBeanDefinitionRegistrar {
            @Override
            public void registerBeanDefinitions(org.springframework.core.type.AnnotationMetadata metadata,
                    org.springframework.beans.factory.support.BeanDefinitionRegistry registry) {
                org.springframework.aop.config.AopConfigUtils.registerAutoProxyCreatorIfNecessary(registry);
            }
        }
    }

    /** Micrometer meters over the core's metrics, when Micrometer is on the classpath. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "io.micrometer.core.instrument.binder.MeterBinder")
    static class MetricsConfiguration {
        @Bean
        @ConditionalOnMissingBean
        EtcdLockMeterBinder etcdLockMeterBinder(EtcdLockClient client, EtcdLockProperties p) {
            return new EtcdLockMeterBinder(client, p.getMetrics().isLockNameTag());
        }
    }

    /** The Actuator health indicator {@code etcdlock} on Spring Boot 3, when Actuator is on the classpath. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.boot.actuate.health.AbstractHealthIndicator")
    static class HealthConfiguration {
        @Bean
        @ConditionalOnMissingBean(name = "etcdlockHealthIndicator")
        EtcdLockHealthIndicator etcdlockHealthIndicator(EtcdLockClient client) {
            return new EtcdLockHealthIndicator(client);
        }
    }

    /**
     * The Actuator health indicator {@code etcdlock} on Spring Boot 4 (its health classes live in
     * {@code org.springframework.boot.health.contributor}, module spring-boot-health).
     */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.boot.health.contributor.AbstractHealthIndicator")
    static class Boot4HealthConfiguration {
        @Bean
        @ConditionalOnMissingBean(name = "etcdlockHealthIndicator")
        EtcdLockBoot4HealthIndicator etcdlockHealthIndicator(EtcdLockClient client) {
            return new EtcdLockBoot4HealthIndicator(client);
        }
    }

    /**
     * The leader initiator, with {@code etcdlock.leader.enabled=true}: started and stopped with
     * the context; Spring Integration's leader events when it is on the classpath, else
     * {@link LeaderGrantedEvent} / {@link LeaderRevokedEvent}.
     */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnProperty(prefix = "etcdlock.leader", name = "enabled", havingValue = "true")
    static class LeaderConfiguration {
        @Bean
        @ConditionalOnMissingBean
        EtcdLeaderInitiator etcdLeaderInitiator(EtcdLockClient client, EtcdLockProperties p,
                org.springframework.core.env.Environment env,
                org.springframework.context.ApplicationEventPublisher publisher,
                org.springframework.beans.factory.ObjectProvider<EtcdLeaderInitiator.Events> events) {
            EtcdLockProperties.LeaderElection l = p.getLeader();
            String role = l.getRole() != null ? l.getRole()
                    : EtcdLockProperties.unset(env.getProperty("spring.application.name")) != null
                            ? env.getProperty("spring.application.name") : "application";
            String name = l.getName() != null ? l.getName() : role;
            EtcdLeaderInitiator.Events ev = events.getIfAvailable(() -> new EtcdLeaderInitiator.Events() {
                @Override
                public void granted(EtcdLeaderInitiator i, io.etcdlock.LeaderTerm term) {
                    publisher.publishEvent(new LeaderGrantedEvent(i, i.getRole(), term.fencingToken()));
                }

                @Override
                public void revoked(EtcdLeaderInitiator i, io.etcdlock.LeaderTerm term) {
                    publisher.publishEvent(new LeaderRevokedEvent(i, i.getRole()));
                }
            });
            return new EtcdLeaderInitiator(client, name, role, ev);
        }

        /** Spring Integration's OnGrantedEvent / OnRevokedEvent, when it is on the classpath. */
        @Configuration(proxyBeanMethods = false)
        @ConditionalOnClass(name = "org.springframework.integration.leader.event.OnGrantedEvent")
        static class IntegrationEvents {
            @Bean
            @ConditionalOnMissingBean
            IntegrationLeaderEvents etcdLeaderEvents(org.springframework.context.ApplicationEventPublisher publisher) {
                return new IntegrationLeaderEvents(publisher);
            }
        }
    }

    /** The Spring Integration registry, when Spring Integration is on the classpath. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(LockRegistry.class)
    static class RegistryConfiguration {
        @Bean
        @ConditionalOnMissingBean(LockRegistry.class)
        EtcdLockRegistry etcdLockRegistry(EtcdLockClient client, EtcdLockProperties p) {
            return new EtcdLockRegistry(client, p.getRegistryKey());
        }
    }
}
