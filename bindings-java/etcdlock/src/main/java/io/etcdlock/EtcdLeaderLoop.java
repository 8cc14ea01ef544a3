package io.etcdlock;

import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Leadership as a loop (Curator's {@code LeaderSelector} with auto-requeue, client-go's
 * {@code LeaderElector}), started by {@link LeaderLoopBuilder#start(LeaderTask)}: campaign; when
 * elected, run the task on a thread of the loop; when leadership is lost or the loop is closed,
 * the term is cancelled and the task's thread interrupted; once the task has returned, resign
 * and campaign again (unless {@code again(false)}).
 *
 * <p>Invariants: one task at a time per loop (the next campaign waits until the previous term's
 * task has returned); a term ends with exactly one of {@link LeaderListener#lost} or
 * {@link LeaderListener#resigned}; the events end with {@link LeaderListener#stopped()}. Events
 * reach the listener in order on the loop's event thread. A loop that is never closed runs
 * until its client is closed.
 */
public final class EtcdLeaderLoop implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(EtcdLeaderLoop.class);
    private static final AtomicInteger THREADS = new AtomicInteger();

    static final int ELECTED = 1;
    static final int RENEWAL_FAILING = 2;
    static final int RENEWAL_RECOVERED = 3;
    static final int LOST = 4;
    static final int RESIGNED = 5;
    static final int CAMPAIGN_FAILED = 6;
    static final int LEADER = 7;
    static final int STOPPED = 8;
    static final int TERM_CANCELLED = 9;

    private final EtcdLockClient client;
    private final String name;
    private final LeaderListener listener;
    private final LeaderTask task;
    private final ThreadFactory threads;
    private final BlockingQueue<Runnable> events = new LinkedBlockingQueue<>();
    private final CompletableFuture<Void> stopped = new CompletableFuture<>();
    private final AtomicBoolean closed = new AtomicBoolean();
    private final Object lock = new Object();
    private NativeHandle handle;
    private Thread eventThread;
    /** The term whose task runs (or is about to), null between terms. Guarded by {@code lock}. */
    private LeaderTerm term;
    private Thread taskThread;

    EtcdLeaderLoop(EtcdLockClient client, String name, LeaderLoopBuilder b, LeaderTask task) {
        this.client = client;
        this.name = name;
        this.listener = b.listener;
        this.task = task;
        this.threads = b.threads != null ? b.threads : r -> {
            Thread t = new Thread(r, "etcdlock-leader-" + name + "-" + THREADS.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }

    /** Start the native loop on the client behind {@code clientHandle}. */
    static EtcdLeaderLoop start(EtcdLockClient client, NativeHandle clientHandle, String name, LeaderLoopBuilder b,
            LeaderTask task) {
        EtcdLeaderLoop loop = new EtcdLeaderLoop(client, name, b, task);
        loop.eventThread = loop.threads.newThread(loop::dispatch);
        long id = NativeBridge.nextId();
        NativeBridge.registerLeaderLoop(id, loop::onNative);
        long c;
        try {
            c = clientHandle.pin();
        } catch (RuntimeException e) {
            NativeBridge.forgetLeaderLoop(id);
            throw e;
        }
        try {
            AcquireOptions o = b.options;
            long h = NativeBridge.leaderStart(c, name, b.value, b.again, b.retry.toMillis(), o.lockDelayMs(),
                    o.leaseTimeMs(), o.metadataPairs(), id);
            loop.handle = new NativeHandle(h, NativeBridge::freeLeaderLoop,
                    () -> new ClosedException("the leader loop of \"" + name + "\" was closed"));
        } catch (RuntimeException e) {
            NativeBridge.forgetLeaderLoop(id);
            throw e;
        } finally {
            clientHandle.unpin();
        }
        loop.stopped.whenComplete((v, e) -> NativeBridge.forgetLeaderLoop(id));
        loop.eventThread.start();
        return loop;
    }

    /** The election name. */
    public String name() {
        return name;
    }

    /** The current term while this loop leads and its task runs. */
    public Optional<LeaderTerm> currentTerm() {
        synchronized (lock) {
            return Optional.ofNullable(term);
        }
    }

    /** Completes after {@link LeaderListener#stopped()}: the loop has stopped and resigned. */
    public CompletableFuture<Void> stopped() {
        return stopped;
    }

    /**
     * Stop: cancel the campaign, or cancel the current term (its task's thread is interrupted),
     * wait for its task to return, resign, and wait for the loop to stop. Called from the task
     * or a listener, it does not wait. Idempotent.
     */
    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            long p = handle.pin();
            try {
                NativeBridge.leaderStop(p);
            } finally {
                handle.unpin();
            }
            handle.close();
        }
        interruptTask(0);
        Thread me = Thread.currentThread();
        synchronized (lock) {
            if (me == eventThread || me == taskThread) {
                return;
            }
        }
        boolean interrupted = false;
        while (true) {
            try {
                stopped.get();
                break;
            } catch (InterruptedException e) {
                interrupted = true;
            } catch (java.util.concurrent.ExecutionException e) {
                break;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    // ---- events ---------------------------------------------------------------------------

    /** From a runtime thread (never throws, never blocks). */
    private void onNative(int kind, long termId, long guard, int reason, int code, boolean retryable, String leader,
            String msg) {
        switch (kind) {
            case TERM_CANCELLED:
                interruptTask(termId);
                return;
            case ELECTED: {
                LeaderTerm t;
                try {
                    t = new LeaderTerm(client, name, termId, guard);
                } catch (RuntimeException e) {
                    LOG.warn("etcdlock: leader term of {} could not be set up", name, e);
                    NativeBridge.freeGuard(guard);
                    NativeBridge.termEnd(termId, true);
                    NativeBridge.freeTerm(termId);
                    return;
                }
                synchronized (lock) {
                    term = t;
                }
                events.add(() -> runTerm(t));
                return;
            }
            case RENEWAL_FAILING:
                events.add(listener::renewalFailing);
                return;
            case RENEWAL_RECOVERED:
                events.add(listener::renewalRecovered);
                return;
            case LOST: {
                LossReason r = LossReason.of(reason);
                interruptTask(0);
                events.add(() -> listener.lost(r));
                return;
            }
            case RESIGNED:
                events.add(listener::resigned);
                return;
            case CAMPAIGN_FAILED: {
                EtcdLockException e = NativeBridge.error(code, 0, retryable, msg);
                events.add(() -> listener.campaignFailed(e));
                return;
            }
            case LEADER: {
                Optional<Leader> l = Leader.of(leader);
                events.add(() -> listener.leaderChanged(l));
                return;
            }
            case STOPPED:
                events.add(() -> {
                    listener.stopped();
                    throw new Stop();
                });
                return;
            default:
                LOG.warn("etcdlock: unknown leader event {}", kind);
        }
    }

    /** Ends the event thread after the stopped event. */
    private static final class Stop extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Stop() {
            super(null, null, false, false);
        }
    }

    /** The event thread: each event in order, until stopped. */
    private void dispatch() {
        try {
            while (true) {
                Runnable ev;
                try {
                    ev = events.take();
                } catch (InterruptedException e) {
                    continue; // only stop ends the loop's events
                }
                try {
                    ev.run();
                } catch (Stop s) {
                    return;
                } catch (Throwable t) {
                    LOG.warn("etcdlock: a leader listener threw", t);
                }
            }
        } finally {
            stopped.complete(null);
        }
    }

    /** On the event thread: tell the listener, then run the task on its own thread. */
    private void runTerm(LeaderTerm t) {
        try {
            listener.elected(t);
        } catch (Throwable e) {
            LOG.warn("etcdlock: a leader listener threw", e);
        }
        Thread th = threads.newThread(() -> {
            try {
                task.run(t);
            } catch (InterruptedException e) {
                // the term was cancelled
            } catch (Throwable e) {
                LOG.warn("etcdlock: the leader task of {} threw", name, e);
            } finally {
                synchronized (lock) {
                    if (term == t) {
                        term = null;
                        taskThread = null;
                    }
                }
                Thread.interrupted();
                t.end();
            }
        });
        synchronized (lock) {
            if (term == t) {
                taskThread = th;
            }
        }
        th.start();
        if (t.isCancelled()) {
            // Cancelled before its thread was alive (an interrupt then is lost): interrupt now.
            t.markCancelled();
            th.interrupt();
        }
    }

    /** Interrupt the running task (of term {@code termId}; 0: whichever runs) and mark its term cancelled. */
    private void interruptTask(long termId) {
        synchronized (lock) {
            LeaderTerm t = term;
            if (t == null || (termId != 0 && t.id() != termId)) {
                return;
            }
            t.markCancelled();
            if (taskThread != null) {
                taskThread.interrupt();
            }
        }
    }

    @Override
    public String toString() {
        return "EtcdLeaderLoop{name=" + name + (stopped.isDone() ? ", stopped}" : "}");
    }
}
