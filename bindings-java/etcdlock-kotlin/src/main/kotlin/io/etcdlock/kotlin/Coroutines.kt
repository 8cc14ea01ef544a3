/**
 * Kotlin coroutines API over [EtcdLockClient]: a suspending lock and `withLock`, leader
 * observation and leadership as [Flow]. Built on the client's `CompletableFuture` calls and its
 * leader loop; nothing here blocks a thread while waiting for etcd.
 *
 * Errors are the binding's [io.etcdlock.EtcdLockException] subclasses
 * ([LockTimeoutException], [io.etcdlock.InvalidArgumentException], ...), never wrapped.
 */
@file:JvmName("EtcdLockCoroutines")

package io.etcdlock.kotlin

import io.etcdlock.AcquireOptions
import io.etcdlock.EtcdLockClient
import io.etcdlock.EtcdLockException
import io.etcdlock.Leader
import io.etcdlock.LeaderListener
import io.etcdlock.LeaderTerm
import io.etcdlock.LockGuard
import io.etcdlock.LockTimeoutException
import io.etcdlock.LossReason
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.NonCancellable
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.channels.awaitClose
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.buffer
import kotlinx.coroutines.flow.callbackFlow
import kotlinx.coroutines.flow.channelFlow
import kotlinx.coroutines.flow.conflate
import kotlinx.coroutines.future.await
import kotlinx.coroutines.suspendCancellableCoroutine
import kotlinx.coroutines.withContext
import java.util.Optional
import java.util.concurrent.CompletionException
import java.util.concurrent.atomic.AtomicInteger
import kotlin.coroutines.resume
import kotlin.coroutines.resumeWithException
import kotlin.time.Duration
import kotlin.time.toJavaDuration

/**
 * An independent hold of the lock [name] (as [io.etcdlock.EtcdLock.acquireAsync]); the caller
 * closes the guard. Suspends while the lock is held by others. Cancelling the coroutine while it
 * waits abandons the wait: the waiter key is deleted, and a guard that arrives after the cancel
 * is released.
 *
 * @param timeout null waits as long as it takes; zero is one try; else [LockTimeoutException]
 *     (no waiter key is left behind)
 */
public suspend fun EtcdLockClient.lockSuspending(
    name: String,
    timeout: Duration? = null,
    options: AcquireOptions = AcquireOptions.NONE,
): LockGuard {
    val future = newLock(name, options).acquireAsync(timeout?.toJavaDuration())
    return suspendCancellableCoroutine { cont ->
        // PENDING -> RESUMED (the guard went to the coroutine) or CANCELLED (the guard, if any,
        // is released here): exactly one owner for every guard.
        val state = AtomicInteger(PENDING)
        cont.invokeOnCancellation {
            if (state.compareAndSet(PENDING, CANCELLED)) {
                future.cancel(true)
            }
        }
        future.whenComplete { guard, error ->
            if (error != null) {
                if (state.compareAndSet(PENDING, RESUMED)) {
                    cont.resumeWithException(unwrap(error))
                }
            } else if (state.compareAndSet(PENDING, RESUMED)) {
                // Cancelled between here and the resumption: the guard is released.
                cont.resume(guard) { _, g, _ -> releaseQuietly(g) }
            } else {
                releaseQuietly(guard)
            }
        }
    }
}

private const val PENDING = 0
private const val RESUMED = 1
private const val CANCELLED = 2

/**
 * The lock [name] if it is free right now (one try that writes nothing when it is held or waited
 * for), else null.
 */
public suspend fun EtcdLockClient.tryLockSuspending(
    name: String,
    options: AcquireOptions = AcquireOptions.NONE,
): LockGuard? =
    try {
        lockSuspending(name, Duration.ZERO, options)
    } catch (e: LockTimeoutException) {
        null
    }

/**
 * Acquire [name] (as [lockSuspending]), run [block] with the guard, and release the lock when
 * the block returns, throws or is cancelled; returns the block's result. Releasing a hold that
 * was lost while the block ran throws [io.etcdlock.LockLostException] after a normal return (the
 * critical section may not have been protected to its end); after the block's exception it is
 * added to that exception as suppressed. Cancellation while waiting abandons the wait.
 */
public suspend fun <T> EtcdLockClient.withLock(
    name: String,
    timeout: Duration? = null,
    block: suspend (LockGuard) -> T,
): T {
    val guard = lockSuspending(name, timeout)
    val result =
        try {
            block(guard)
        } catch (e: Throwable) {
            try {
                release(guard)
            } catch (lost: EtcdLockException) {
                e.addSuppressed(lost)
            }
            throw e
        }
    release(guard)
    return result
}

/** Close [guard] off the caller's dispatcher (closing waits for etcd), even when cancelled. */
private suspend fun release(guard: LockGuard) {
    withContext(NonCancellable + Dispatchers.IO) { guard.close() }
}

private fun releaseQuietly(guard: LockGuard) {
    try {
        guard.close()
    } catch (e: EtcdLockException) {
        // lost meanwhile: nothing left to release
    }
}

/**
 * Follow the election [name]: the current leader first, then each change (a new proclamation is
 * a change), and null whenever nobody leads. Stops when the collection ends. A collector slower
 * than the changes gets the newest leader (the ones in between are skipped). Fails with
 * [io.etcdlock.ClosedException] when the client is closed.
 */
public fun EtcdLockClient.observe(name: String): Flow<Leader?> =
    callbackFlow {
        val observation = observe(name) { leader: Optional<Leader> -> trySend(leader.orElse(null)) }
        observation.ended().whenComplete { _, error -> close(error?.let(::unwrap)) }
        awaitClose { observation.close() }
    }.conflate()

/** One event of a leader loop run by [leadership]; a term begins with [Elected] and ends with [Lost] or [Resigned]. */
public sealed class LeadershipEvent {
    /** This candidate leads: [term] lasts until it is lost or the collection ends. */
    public data class Elected(val term: LeaderTerm) : LeadershipEvent()

    /** Keep-alives are failing while leader: the term is lost at the local deadline unless one gets through. */
    public data object RenewalFailing : LeadershipEvent()

    /** Keep-alives got through again. */
    public data object RenewalRecovered : LeadershipEvent()

    /** The term's leadership was lost, for [reason]; the loop campaigns again. */
    public data class Lost(val reason: LossReason?) : LeadershipEvent()

    /** The term ended by resigning. */
    public data object Resigned : LeadershipEvent()

    /** Who leads now, any candidate (this one included); null when nobody leads. */
    public data class LeaderChanged(val leader: Leader?) : LeadershipEvent()

    /** A campaign failed; the loop campaigns again after its retry pause. */
    public data class CampaignFailed(val error: EtcdLockException) : LeadershipEvent()
}

/**
 * Campaign for the election [name] in a leader loop ([EtcdLockClient.newLeaderLoop]) for as long
 * as the collection lasts, proclaiming [value]: each term is an [LeadershipEvent.Elected] and
 * lasts until leadership is lost (then the loop campaigns again) or the collection ends. When the
 * collection ends (cancelled, or the collector stops early), the loop is stopped: the current
 * term is cancelled ([LeaderTerm.cancelled] completes) and the loop resigns before the
 * collection returns. The flow completes if the loop stops by itself (its client closed).
 */
public fun EtcdLockClient.leadership(
    name: String,
    value: String = "",
    options: AcquireOptions = AcquireOptions.NONE,
): Flow<LeadershipEvent> =
    channelFlow {
        val listener =
            object : LeaderListener {
                override fun elected(term: LeaderTerm) {
                    trySend(LeadershipEvent.Elected(term))
                }

                override fun renewalFailing() {
                    trySend(LeadershipEvent.RenewalFailing)
                }

                override fun renewalRecovered() {
                    trySend(LeadershipEvent.RenewalRecovered)
                }

                override fun lost(reason: LossReason?) {
                    trySend(LeadershipEvent.Lost(reason))
                }

                override fun resigned() {
                    trySend(LeadershipEvent.Resigned)
                }

                override fun leaderChanged(leader: Optional<Leader>) {
                    trySend(LeadershipEvent.LeaderChanged(leader.orElse(null)))
                }

                override fun campaignFailed(error: EtcdLockException) {
                    trySend(LeadershipEvent.CampaignFailed(error))
                }
            }
        val loop =
            newLeaderLoop(name)
                .value(value)
                .options(options)
                .listener(listener)
                .start { term -> leadUntilCancelled(term) }
        try {
            // A copy: cancelling the await must not cancel the loop's own future.
            loop.stopped().thenApply { }.await()
        } finally {
            // Closing waits until the loop has resigned and stopped.
            withContext(NonCancellable + Dispatchers.IO) { loop.close() }
        }
    }.buffer(Channel.UNLIMITED)

/** A term's task: lead until the term is over (lost, or the loop stopped). */
private fun leadUntilCancelled(term: LeaderTerm) {
    try {
        term.cancelled().get()
    } catch (e: InterruptedException) {
        // the loop interrupts the task when the term is over
    }
}

/** The etcdlock exception behind a future's failure. */
private fun unwrap(error: Throwable): Throwable {
    var e = error
    while (e is CompletionException && e.cause != null) {
        e = e.cause!!
    }
    return e
}
