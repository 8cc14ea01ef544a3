package io.etcdlock;

/**
 * The work a leader does during one term of an {@link EtcdLeaderLoop}. It runs on a thread of
 * the loop, once per term; when it returns (or throws) the term ends: the loop resigns and, with
 * {@link LeaderLoopBuilder#again(boolean) again}, campaigns again.
 */
@FunctionalInterface
public interface LeaderTask {
    /**
     * Lead until done. The term is over when {@link LeaderTerm#isCancelled()}: leadership lost,
     * or the loop closed. The running thread is then interrupted; return promptly. The loop never
     * starts another task before this one has returned.
     */
    void run(LeaderTerm term) throws Exception;
}
