package io.etcdlock.spring;

import java.lang.reflect.Method;
import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.springframework.aop.support.AopUtils;
import org.springframework.context.expression.MethodBasedEvaluationContext;
import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.expression.Expression;
import org.springframework.expression.ExpressionException;
import org.springframework.expression.spel.standard.SpelExpressionParser;

import io.etcdlock.EtcdLockClient;
import io.etcdlock.EtcdLockException;
import io.etcdlock.InvalidArgumentException;
import io.etcdlock.LockGuard;

/**
 * The advice behind {@link Locked}: acquires the lock, proceeds, releases it. Registered by
 * {@link EtcdLockAutoConfiguration}; without Spring Boot, declare a
 * {@code DefaultPointcutAdvisor(new AnnotationMatchingPointcut(null, Locked.class, true), new LockedInterceptor(client))}
 * bean and an auto-proxy creator.
 */
public class LockedInterceptor implements MethodInterceptor {
    private static final Pattern SIMPLE = Pattern.compile("(\\d+(?:\\.\\d+)?)\\s*(ms|s|m|h)?");
    private final java.util.function.Supplier<EtcdLockClient> client;
    private final SpelExpressionParser parser = new SpelExpressionParser();
    private final ParameterNameDiscoverer names = new DefaultParameterNameDiscoverer();
    private final Map<String, Expression> expressions = new ConcurrentHashMap<>();

    public LockedInterceptor(EtcdLockClient client) {
        this(() -> client);
    }

    /** With the client looked up on each call (an advisor is created before the client bean). */
    public LockedInterceptor(java.util.function.Supplier<EtcdLockClient> client) {
        this.client = client;
    }

    @Override
    public Object invoke(MethodInvocation invocation) throws Throwable {
        Method method = invocation.getMethod();
        Object target = invocation.getThis();
        Method specific = target == null ? method : AopUtils.getMostSpecificMethod(method, target.getClass());
        Locked locked = AnnotatedElementUtils.findMergedAnnotation(specific, Locked.class);
        if (locked == null) {
            locked = AnnotatedElementUtils.findMergedAnnotation(method, Locked.class);
        }
        if (locked == null) {
            return invocation.proceed();
        }
        String name = name(locked, specific, invocation.getArguments(), target);
        Duration timeout = timeout(locked.timeout());
        LockGuard guard = client.get().newLock(name).acquire(timeout); // null: as long as it takes
        Object result;
        try {
            result = invocation.proceed();
        } catch (Throwable t) {
            try {
                guard.close();
            } catch (EtcdLockException e) {
                t.addSuppressed(e);
            }
            throw t;
        }
        guard.close(); // LockLostException when the hold did not last to the end
        return result;
    }

    private String name(Locked locked, Method method, Object[] args, Object target) {
        if (locked.value().isEmpty()) {
            throw new InvalidArgumentException("@Locked on " + method + ": the lock name is empty");
        }
        if (locked.key().isEmpty()) {
            return locked.value();
        }
        Object key;
        try {
            Expression e = expressions.computeIfAbsent(locked.key(), parser::parseExpression);
            key = e.getValue(new MethodBasedEvaluationContext(target, method, args, names));
        } catch (ExpressionException | IllegalStateException e) {
            throw new InvalidArgumentException("@Locked on " + method + ": key \"" + locked.key()
                    + "\" does not evaluate: " + e.getMessage());
        }
        if (key == null) {
            throw new InvalidArgumentException("@Locked on " + method + ": key \"" + locked.key() + "\" is null");
        }
        return locked.value() + ":" + key;
    }

    /** {@code null}: wait as long as it takes. */
    static Duration timeout(String text) {
        String t = text.trim();
        if (t.isEmpty()) {
            return null;
        }
        Matcher m = SIMPLE.matcher(t);
        if (m.matches()) {
            double v = Double.parseDouble(m.group(1));
            String unit = m.group(2) == null ? "s" : m.group(2);
            double ms = v * switch (unit) {
                case "ms" -> 1;
                case "m" -> 60_000;
                case "h" -> 3_600_000;
                default -> 1_000;
            };
            return Duration.ofNanos(Math.round(ms * 1_000_000));
        }
        try {
            return Duration.parse(t);
        } catch (DateTimeParseException e) {
            throw new InvalidArgumentException("@Locked timeout \"" + text
                    + "\" is not a duration (\"500ms\", \"5s\", \"2m\", \"PT5S\", or seconds)");
        }
    }
}
