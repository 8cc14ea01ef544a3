package io.etcdlock.kotlin

import io.etcdlock.EtcdExtension
import io.etcdlock.EtcdLockClient
import io.etcdlock.InvalidArgumentException
import io.etcdlock.Leader
import io.etcdlock.LockGuard
import io.etcdlock.LockTimeoutException
import io.etcdlock.TestSupport
import io.etcdlock.TestSupport.keysUnder
import io.etcdlock.TestSupport.uniqueName
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.cancelAndJoin
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.test.runTest
import kotlinx.coroutines.withContext
import kotlinx.coroutines.withTimeout
import kotlinx.coroutines.withTimeoutOrNull
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.extension.ExtendWith
import java.util.Collections
import java.util.concurrent.atomic.AtomicInteger
import java.util.concurrent.atomic.AtomicReference
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds

/**
 * The coroutines API against real etcd: exclusion by withLock (exact counts), cancellation during
 * a wait (no key left), release on return, exception and cancellation, typed errors, observe, and
 * leadership whose collection end resigns so that another candidate is elected. The tests wait on
 * etcd in real time (Dispatchers.IO inside runTest).
 */
@ExtendWith(EtcdExtension::class)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class CoroutinesTest {
    private lateinit var a: EtcdLockClient
    private lateinit var b: EtcdLockClient

    @BeforeAll
    fun clients() {
        a = TestSupport.client()
        b = TestSupport.client()
    }

    @AfterAll
    fun close() {
        a.close()
        b.close()
    }

    /** A test body on real time, bounded as a whole (CI runs on 2 loaded cores). */
    private fun real(body: suspend CoroutineScope.() -> Unit) =
        runTest(timeout = 90.seconds) { withContext(Dispatchers.IO) { body() } }

    /** Wait until exactly [n] keys exist under [name] (polling etcd in real time, bounded). */
    private suspend fun awaitKeys(
        name: String,
        n: Long,
    ) {
        withTimeout(30.seconds) {
            while (keysUnder(name) != n) {
                delay(10)
            }
        }
    }

    /** Expect [block] to throw exactly an exception of type [T]. */
    private suspend inline fun <reified T : Throwable> assertThrowsSuspending(block: suspend () -> Unit): T {
        try {
            block()
        } catch (e: Throwable) {
            assertEquals(T::class.java, e.javaClass, "exception: $e")
            return e as T
        }
        throw AssertionError("expected ${T::class.java.simpleName}, nothing was thrown")
    }

    @Test
    fun lockAndTryLock() =
        real {
            val name = uniqueName("kt-lock")
            val g = a.lockSuspending(name, 30.seconds)
            g.put("$name-data", "v")
            assertEquals("v", g.get("$name-data"))
            assertNull(b.tryLockSuspending(name))
            assertEquals(1, keysUnder(name))
            g.close()
            val h = b.tryLockSuspending(name)
            assertTrue(h!!.isHeld)
            h.close()
            assertEquals(0, keysUnder(name))
        }

    @Test
    fun withLockExcludesASecondCaller() =
        real {
            val name = uniqueName("kt-with")
            val inside = AtomicInteger()
            val maxInside = AtomicInteger()
            val order = Collections.synchronizedList(mutableListOf<String>())
            val releaseFirst = CompletableDeferred<Unit>()
            val first =
                async {
                    a.withLock(name, 30.seconds) {
                        maxInside.accumulateAndGet(inside.incrementAndGet(), Math::max)
                        order.add("first in")
                        releaseFirst.await()
                        order.add("first out")
                        inside.decrementAndGet()
                        "first"
                    }
                }
            awaitKeys(name, 1)
            val second =
                async {
                    b.withLock(name, 30.seconds) {
                        maxInside.accumulateAndGet(inside.incrementAndGet(), Math::max)
                        order.add("second in")
                        inside.decrementAndGet()
                        "second"
                    }
                }
            awaitKeys(name, 2) // the second waits behind the first
            assertEquals(listOf("first in"), order.toList())
            releaseFirst.complete(Unit)
            assertEquals("first", first.await())
            assertEquals("second", second.await())
            assertEquals(listOf("first in", "first out", "second in"), order.toList())
            assertEquals(1, maxInside.get())
            assertEquals(0, keysUnder(name))
        }

    @Test
    fun cancellationDuringAWaitLeavesNoKey() =
        real {
            val name = uniqueName("kt-cancel")
            val holder = a.newLock(name).acquire(java.time.Duration.ofSeconds(30))
            val delivered = AtomicInteger()
            val waiter =
                launch {
                    b.lockSuspending(name)
                    delivered.incrementAndGet()
                }
            awaitKeys(name, 2)
            waiter.cancelAndJoin()
            awaitKeys(name, 1) // the waiter key is deleted, the holder's stays
            // A coroutine timeout abandons the wait the same way.
            assertNull(withTimeoutOrNull(300.milliseconds) { b.lockSuspending(name) })
            awaitKeys(name, 1)
            holder.close()
            assertEquals(0, keysUnder(name))
            assertEquals(0, delivered.get())
            // The next caller takes the lock at once: no ghost waiter is ahead of it.
            b.tryLockSuspending(name)!!.close()
        }

    @Test
    fun aGuardThatArrivesAfterTheCancellationIsReleased() =
        real {
            // The holder's release and the waiter's cancellation race: whichever wins, no hold
            // or waiter key is left behind and the next try takes the lock.
            val name = uniqueName("kt-race")
            repeat(20) {
                val holder = a.newLock(name).acquire(java.time.Duration.ofSeconds(30))
                // The guard is kept by the coroutine itself, not returned through an
                // async's Deferred: a Deferred cancelled after its body returned completes
                // as cancelled and drops the value (kotlinx.coroutines' JobSupport), a leak
                // of the test's own making that no library can see.
                val got = AtomicReference<LockGuard?>()
                val waiter = launch { got.set(b.lockSuspending(name)) }
                awaitKeys(name, 2)
                val releaser = Thread { holder.close() }
                releaser.start()
                waiter.cancel()
                releaser.join()
                waiter.join()
                // Resumed before the cancellation took effect: the caller's to release.
                got.get()?.close()
                awaitKeys(name, 0)
            }
            a.tryLockSuspending(name)!!.close()
        }

    @Test
    fun withLockReleasesOnExceptionAndOnCancellation() =
        real {
            val name = uniqueName("kt-release")
            val e = assertThrowsSuspending<IllegalStateException> { a.withLock(name) { throw IllegalStateException("body failed") } }
            assertEquals("body failed", e.message)
            assertEquals(0, keysUnder(name))

            val entered = CompletableDeferred<Unit>()
            val running =
                launch {
                    a.withLock(name) {
                        entered.complete(Unit)
                        CompletableDeferred<Unit>().await() // until cancelled
                    }
                }
            entered.await()
            assertEquals(1, keysUnder(name))
            running.cancelAndJoin()
            assertEquals(0, keysUnder(name)) // released before the cancelled coroutine completed

            assertEquals(42, a.withLock(name) { 42 })
            assertEquals(0, keysUnder(name))
        }

    @Test
    fun errorsAreTheBindingsExceptionTypes() =
        real {
            val name = uniqueName("kt-errors")
            assertThrowsSuspending<InvalidArgumentException> { a.lockSuspending("") }
            assertThrowsSuspending<InvalidArgumentException> { a.withLock("") { 1 } }
            a.newLock(name).acquire(java.time.Duration.ofSeconds(30)).use {
                val ran = AtomicInteger()
                assertThrowsSuspending<LockTimeoutException> { b.lockSuspending(name, 200.milliseconds) }
                assertThrowsSuspending<LockTimeoutException> { b.withLock(name, 200.milliseconds) { ran.incrementAndGet() } }
                assertEquals(0, ran.get())
                assertEquals(1, keysUnder(name))
            }
        }

    @Test
    fun observeSeesNobodyThenTheLeader() =
        real {
            val name = uniqueName("kt-observe")
            val seen = Channel<Leader?>(Channel.UNLIMITED)
            val job = launch { b.observe(name).collect { seen.send(it) } }
            try {
                assertNull(withTimeout(30.seconds) { seen.receive() })
                a.newElection(name).campaign("node-a").use { l ->
                    val now = withTimeout(30.seconds) { seen.receive() }
                    assertEquals("node-a", now!!.valueAsString())
                    assertEquals(l.fencingToken(), now.revision())
                }
                assertNull(withTimeout(30.seconds) { seen.receive() })
            } finally {
                job.cancelAndJoin()
            }
        }

    @Test
    fun leadershipCollectionEndResignsAndAnotherCandidateIsElected() =
        real {
            val name = uniqueName("kt-leader")
            val evA = Channel<LeadershipEvent>(Channel.UNLIMITED)
            val evB = Channel<LeadershipEvent>(Channel.UNLIMITED)
            val la = launch { a.leadership(name, "a").collect { evA.send(it) } }
            val electedA = next<LeadershipEvent.Elected>(evA)
            val lb = launch { b.leadership(name, "b").collect { evB.send(it) } }
            try {
                // B sees A lead, and waits.
                assertEquals("a", next<LeadershipEvent.LeaderChanged>(evB).leader!!.valueAsString())
                awaitKeys(name, 2)

                la.cancelAndJoin()
                // The collection ended after A's loop had resigned: only B's key is left.
                assertTrue(electedA.term.cancelled().isDone)
                assertEquals(1, keysUnder(name))
                val electedB = next<LeadershipEvent.Elected>(evB)
                assertTrue(electedB.term.fencingToken() > electedA.term.fencingToken())
                assertEquals("b", TestSupport.rawGet(electedB.term.key()))
            } finally {
                lb.cancelAndJoin()
            }
            assertEquals(0, keysUnder(name))

            // A collector that stops at its first term resigns it before first() returns.
            val term = a.leadership(name, "a").first { it is LeadershipEvent.Elected } as LeadershipEvent.Elected
            assertTrue(term.term.cancelled().isDone)
            assertEquals(0, keysUnder(name))
        }

    /**
     * The ```kotlin block of docs/lang/java.md, run as a copy with the test's endpoints and a
     * namespace: [readmeExampleIsEveryKotlinBlockOfTheDocs] checks that the copy is the block.
     */
    @Test
    fun readmeExample() =
        runBlocking {
            val ns = "readme-kt-${System.nanoTime()}/"
            var left = 0
            var wasLeader = false
            // ---- as on the page ----
            EtcdLockClient.builder().endpoints(EtcdExtension.endpoints()).namespace(ns).build().use { client ->
                left =
                    client.withLock("stock", 5.seconds) { guard ->
                        val stock = guard.get("inventory/stock")?.toInt() ?: 300
                        guard.put("inventory/stock", (stock - 1).toString()) // rejected by etcd if the lock was lost
                        stock - 1
                    }
                println("stock left: $left")

                // The first term; leaving first() stops the loop and resigns.
                val elected = client.leadership("scheduler", "node-1").first { it is LeadershipEvent.Elected }
                wasLeader = (elected as LeadershipEvent.Elected).term.fencingToken() > 0
                println("was leader: $wasLeader")
            }
            // ---- end of the page's block ----
            assertEquals(299, left) // the page says it prints "stock left: 299"
            assertTrue(wasLeader) // and "was leader: true"
            assertEquals(0, keysUnder(ns + "scheduler"))
        }

    /**
     * Every ```kotlin block of bindings-java/README.md and of the documentation site's pages
     * (every .md file under docs/) is the copy [readmeExample] runs: the same code once whitespace is
     * dropped, with the copy's endpoints and namespace as the page's endpoint, its results kept
     * in variables (`left =`, `wasLeader`) where the page prints them directly.
     */
    @Test
    fun readmeExampleIsEveryKotlinBlockOfTheDocs() {
        val root = java.nio.file.Path.of("..", "..")
        val pages = mutableListOf(java.nio.file.Path.of("bindings-java", "README.md"))
        java.nio.file.Files.walk(root.resolve("docs")).use { s ->
            s.filter { it.toString().endsWith(".md") }.map { root.relativize(it) }.sorted().forEach { pages.add(it) }
        }
        val blocks = mutableMapOf<String, String>()
        for (page in pages) {
            val lines = java.nio.file.Files.readAllLines(root.resolve(page))
            var i = 0
            while (i < lines.size) {
                if (lines[i].startsWith("```")) {
                    var j = i + 1
                    while (j < lines.size && lines[j].trim() != "```") j++
                    if (lines[i].trim() == "```kotlin") blocks["$page:${i + 1}"] = lines.subList(i + 1, j).joinToString("\n")
                    i = j
                }
                i++
            }
        }
        assertTrue(blocks.keys.any { it.startsWith("docs/") }, "no kotlin block in docs/: ${blocks.keys}")
        val source =
            java.nio.file.Files.readString(java.nio.file.Path.of("src/test/kotlin/io/etcdlock/kotlin/CoroutinesTest.kt"))
        val copy =
            source
                .substringAfter("// ---- as on the page ----")
                .substringBefore("// ---- end of the page's block ----")
                .replace(".endpoints(EtcdExtension.endpoints()).namespace(ns)", ".endpoints(\"http://127.0.0.1:2379\")")
                .replace("left =", "val left =")
                .replace("wasLeader = (elected as LeadershipEvent.Elected).term.fencingToken() > 0", "")
                .replace("println(\"was leader: \$wasLeader\")",
                    "println(\"was leader: \${(elected as LeadershipEvent.Elected).term.fencingToken() > 0}\")")
        val squeeze = { s: String -> s.replace(Regex("\\s+"), "") }
        for ((id, block) in blocks) {
            val body = block.substringAfter("fun main() = runBlocking {").substringBeforeLast("}")
            assertEquals(squeeze(copy), squeeze(body), "$id differs from the copy readmeExample runs")
            println("$id is the copy readmeExample runs")
        }
    }

    /** The next event of type [E], skipping others (bounded). */
    private suspend inline fun <reified E : LeadershipEvent> next(ch: Channel<LeadershipEvent>): E =
        withTimeout(30.seconds) {
            var e = ch.receive()
            while (e !is E) {
                e = ch.receive()
            }
            e
        }
}
