package io.etcdlock;

import java.time.Duration;
import java.util.Optional;

/**
 * The keep-alive renewal of a held lock: see {@link LockGuard#renewal()}. Failing once no
 * keep-alive has been acknowledged for an interval past when one was due, with how long
 * the hold still lasts unless one gets through. A failing hold is still held: it is the
 * time to pause guarded work, not to assume the lock is gone.
 */
public final class Renewal {
    static final Renewal OK = new Renewal(null);

    private final Duration validFor;

    private Renewal(Duration validFor) {
        this.validFor = validFor;
    }

    static Renewal ofMillis(long ms) {
        return ms < 0 ? OK : new Renewal(Duration.ofMillis(ms));
    }

    /** Whether renewal is failing. */
    public boolean isFailing() {
        return validFor != null;
    }

    /** While failing: how long the hold still lasts unless a keep-alive gets through. */
    public Optional<Duration> validFor() {
        return Optional.ofNullable(validFor);
    }

    @Override
    public String toString() {
        return validFor == null ? "Renewal[ok]" : "Renewal[failing, valid for " + validFor.toMillis() + " ms]";
    }
}
