package io.etcdlock.demo;

import static org.junit.jupiter.api.Assertions.*;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The rewritten seed demos run as tests against a real etcd (from the harness). */
class DemosTest {
    static DemoEtcd etcd;

    @BeforeAll
    static void start() throws Exception {
        etcd = DemoEtcd.start();
    }

    @AfterAll
    static void stop() throws Exception {
        etcd.close();
    }

    @Test
    void route1ThreeThreads() throws Exception {
        Route1Demo.main(new String[] {"3", "50"});
    }

    @Test
    void route2FiveThreads() throws Exception {
        Route2Demo.main(new String[] {"5", "50"});
    }

    @Test
    void stockServiceSellsExactlyTheStockWithTheLock() throws Exception {
        StockDemo.Result r = StockDemo.run(etcd.endpoints(), 300, 500, true);
        System.out.println("with the lock: " + r);
        assertEquals(0, r.errors, r.toString());
        assertEquals(300, r.sold, r.toString());
        assertEquals(0, r.finalStock, r.toString());
        assertEquals(0, r.oversold(), r.toString());
        assertEquals(200, r.soldOut, r.toString());
    }

    @Test
    void stockServiceOversellsWithTheLockSwitchedOff() throws Exception {
        StockDemo.Result r = StockDemo.run(etcd.endpoints(), 300, 500, false);
        System.out.println("lock switched off: " + r);
        assertEquals(0, r.errors, r.toString());
        assertEquals(500, r.sold + r.soldOut, r.toString());
        assertTrue(r.oversold() > 0, "without the lock the read-modify-write races: " + r);
    }
}
