package io.etcdlock;

import java.math.BigDecimal;
import java.time.Duration;

/** Checks and conversions of Java arguments before they reach the native core. */
final class Args {
    private Args() {}

    /**
     * The {@link InterruptedException} a cancelled interruptible wait throws: the interrupt
     * status is cleared (as the JDK's blocking methods do) and {@code e} is the cause.
     */
    static InterruptedException interrupted(String message, CancelledException e) {
        Thread.interrupted();
        InterruptedException ie = new InterruptedException(message);
        ie.initCause(e);
        return ie;
    }

    /**
     * Blocking calls are refused on the etcdlock runtime's own threads (where async
     * callbacks run): waiting there could stall the very runtime that must complete the wait.
     */
    static void checkNotOnRuntimeThread(String what) {
        if (Thread.currentThread().getName().startsWith("etcdlock-rt")) {
            throw new InvalidArgumentException(what + ": a blocking etcdlock call was made on an etcdlock runtime thread"
                    + " (inside an async callback); use the *Async methods or continue on your own executor");
        }
    }

    /** {@code Thread.isVirtual()} where the JDK has it (21+); before that there are none. */
    private static final java.lang.invoke.MethodHandle IS_VIRTUAL = isVirtualHandle();

    private static java.lang.invoke.MethodHandle isVirtualHandle() {
        try {
            return java.lang.invoke.MethodHandles.publicLookup().findVirtual(Thread.class, "isVirtual",
                    java.lang.invoke.MethodType.methodType(boolean.class));
        } catch (ReflectiveOperationException e) {
            return null;
        }
    }

    /**
     * Whether the calling thread may wait inside native code: not a virtual thread (it would pin
     * its carrier) and not a {@code ForkJoinPool} worker (parked on a future it lets the pool
     * start a spare worker, {@code ForkJoinPool.managedBlock}; blocked in native code it would
     * not, and a pool of one worker could never run the task that frees the lock).
     */
    static boolean mayWaitInNative() {
        Thread t = Thread.currentThread();
        if (t instanceof java.util.concurrent.ForkJoinWorkerThread) {
            return false;
        }
        if (IS_VIRTUAL == null) {
            return true;
        }
        try {
            return !(boolean) IS_VIRTUAL.invokeExact(t);
        } catch (Throwable e) {
            return false; // cannot tell: take the path that is safe for every thread
        }
    }

    static void checkName(String name) {
        if (name == null) {
            throw new InvalidArgumentException("lock name must not be null");
        }
        if (name.isEmpty()) {
            throw new InvalidArgumentException("lock name is empty");
        }
        checkText(name, "lock name");
    }

    /** Check each name ({@link #checkName}); the names as an array, in order. */
    static String[] checkNames(java.util.List<String> names) {
        for (String n : names) {
            checkName(n);
        }
        return names.toArray(new String[0]);
    }

    /**
     * Refuse a string that is not valid Unicode (a lone UTF-16 surrogate): it has no UTF-8
     * form, so encoding it would be lossy ({@code String.getBytes} writes {@code ?}) and
     * JNI's modified UTF-8 would smuggle it to the core as a CESU-8 fragment. Checked here,
     * before any native call, so every binding gives the same {@link InvalidArgumentException}.
     */
    static String checkText(String s, String what) {
        if (s == null) {
            return null;
        }
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (Character.isHighSurrogate(c)) {
                if (i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
                    i++;
                    continue;
                }
                throw new InvalidArgumentException(what + " contains a lone UTF-16 surrogate at index " + i
                        + " (not valid Unicode; it has no UTF-8 form)");
            }
            if (Character.isLowSurrogate(c)) {
                throw new InvalidArgumentException(what + " contains a lone UTF-16 surrogate at index " + i
                        + " (not valid Unicode; it has no UTF-8 form)");
            }
        }
        return s;
    }

    static long toMillis(Duration d) {
        if (d == null) {
            throw new InvalidArgumentException("timeout must not be null");
        }
        if (d.isNegative()) {
            throw new InvalidArgumentException("timeout must not be negative: " + d);
        }
        try {
            return d.toMillis();
        } catch (ArithmeticException e) {
            return Long.MAX_VALUE / 2;
        }
    }

    /** A duration as core's option text (seconds, with nanoseconds). */
    static String duration(Duration d, String what) {
        if (d == null) {
            throw new InvalidArgumentException(what + " must not be null");
        }
        return BigDecimal.valueOf(d.getSeconds()).add(BigDecimal.valueOf(d.getNano(), 9)).toPlainString() + "s";
    }

    /** A text value as UTF-8, refused when null or not valid Unicode. */
    static byte[] utf8(String s) {
        if (s == null) {
            throw new InvalidArgumentException("value must not be null");
        }
        return checkText(s, "value").getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }
}
