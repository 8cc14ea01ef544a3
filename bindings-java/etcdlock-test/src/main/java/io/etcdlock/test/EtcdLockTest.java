package io.etcdlock.test;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Runs a JUnit 5 test class (or method) with {@link EtcdLockExtension}: each test method gets an
 * in-process store of its own ({@code mem://}, no etcd) and, as parameters, the
 * {@link io.etcdlock.MemStore} and {@link io.etcdlock.EtcdLockClient}s on it, closed after the
 * test:
 *
 * <pre>{@code
 * @EtcdLockTest
 * class JobTest {
 *     @Test
 *     void secondInstanceWaits(EtcdLockClient a, EtcdLockClient b, MemStore store) {
 *         try (LockGuard held = a.newLock("job").acquire(Duration.ofSeconds(5))) {
 *             assertTrue(b.newLock("job").tryAcquire().isEmpty());
 *         }
 *     }
 * }
 * }</pre>
 *
 * For clients with other options (a short TTL for loss tests), register the extension in a
 * field instead: {@link EtcdLockExtension#withClients}.
 */
@Target({ElementType.TYPE, ElementType.METHOD, ElementType.ANNOTATION_TYPE})
@Retention(RetentionPolicy.RUNTIME)
@Documented
@Inherited
@ExtendWith(EtcdLockExtension.class)
public @interface EtcdLockTest {
}
