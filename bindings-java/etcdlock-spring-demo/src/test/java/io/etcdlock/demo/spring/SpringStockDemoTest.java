package io.etcdlock.demo.spring;

import static org.junit.jupiter.api.Assertions.*;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import io.etcdlock.demo.DemoEtcd;
import io.etcdlock.demo.StockDemo;

/** The Spring Boot stock service: two app instances, 500 requests, stock 300, real etcd. */
class SpringStockDemoTest {
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
    void twoSpringBootInstancesSellExactlyTheStock() throws Exception {
        StockDemo.Result r = StockDemo.run(etcd.endpoints(), 300, 500, true, SpringStockDemo::startApp);
        System.out.println("Spring Boot with the lock: " + r);
        assertEquals(0, r.errors, r.toString());
        assertEquals(300, r.sold, r.toString());
        assertEquals(0, r.finalStock, r.toString());
        assertEquals(0, r.oversold(), r.toString());
    }

    @Test
    void withTheLockSwitchedOffTheyOversell() throws Exception {
        StockDemo.Result r = StockDemo.run(etcd.endpoints(), 300, 500, false, SpringStockDemo::startApp);
        System.out.println("Spring Boot, lock off: " + r);
        assertEquals(0, r.errors, r.toString());
        assertTrue(r.oversold() > 0, r.toString());
    }
}
