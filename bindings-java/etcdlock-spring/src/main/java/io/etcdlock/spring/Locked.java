package io.etcdlock.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Runs the annotated method of a Spring bean while holding the etcdlock lock {@link #value()}:
 * the lock is acquired before the method runs (waiting in the fair queue, at most
 * {@link #timeout()}) and released when it returns or throws, on every instance of the
 * application at once.
 *
 * <pre>{@code
 * @Locked("stock")
 * public void sell() { ... }                          // one caller at a time, cluster-wide
 *
 * @Locked(value = "order", key = "#orderId", timeout = "5s")
 * public void ship(long orderId) { ... }              // lock "order:<orderId>"
 * }</pre>
 *
 * <p>With Spring Boot, {@link EtcdLockAutoConfiguration} registers the advisor that applies it
 * (Spring AOP proxies: as with {@code @Transactional}, a call from inside the same bean does not
 * go through the proxy and takes no lock). What the method sees as failures:
 * <ul>
 *   <li>{@link io.etcdlock.LockTimeoutException} when the lock was not acquired within
 *       {@link #timeout()} (the method did not run);</li>
 *   <li>{@link io.etcdlock.LockLostException} after the method returned when the hold was lost
 *       while it ran (its lease ended, or the key was released by token), so the caller learns
 *       the method may not have run alone to its end; the method's own exception wins if it threw;</li>
 *   <li>{@link io.etcdlock.InvalidArgumentException} for an empty name, a {@link #key()} that does
 *       not evaluate, or a timeout that does not parse.</li>
 * </ul>
 * For fencing (a token to compare in the resource itself), take the lock with
 * {@link io.etcdlock.EtcdLock#acquire(java.time.Duration)} and use its
 * {@link io.etcdlock.LockGuard}.
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface Locked {

    /** The lock name (a plain string). */
    String value();

    /**
     * An optional SpEL expression over the method's arguments ({@code #name} with parameter names
     * compiled in, or {@code #p0}, {@code #a0}); when set, the lock is
     * {@code value + ":" + <its result>}, one lock per key (per order, per user).
     */
    String key() default "";

    /**
     * How long to wait for the lock: {@code "500ms"}, {@code "5s"}, {@code "2m"}, an ISO-8601
     * duration ({@code "PT5S"}), or a number of seconds ({@code "5"}) as in {@code etcdlock.*}
     * properties. Empty (the default): as long as it takes. {@code "0"}: only if it is free now.
     */
    String timeout() default "";
}
