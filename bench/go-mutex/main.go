// Command go-mutex measures etcd's own Go concurrency.Mutex the way
// `etcdlock bench` measures etcdlock: uncontended lock+unlock, and N
// contenders on one lock (handoff = next holder's acquisition - previous
// holder's unlock call). Prints JSON lines. Used by bench/compare.sh so both
// run against the same etcd in the same run.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

func pct(v []time.Duration, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	return float64(v[int(float64(len(v)-1)*q+0.5)]) / 1e6
}

func main() {
	endpoints := flag.String("endpoints", "http://127.0.0.1:2379", "comma separated")
	iterations := flag.Int("iterations", 1000, "uncontended iterations")
	contenders := flag.Int("contenders", 8, "contenders on one lock")
	duration := flag.Duration("duration", 15*time.Second, "contention duration")
	breadthClients := flag.Int("breadth-clients", 0, "breadth mode only: clients (each its own connection and session) locking random names")
	breadthNames := flag.Int("breadth-names", 1000, "breadth mode: distinct names")
	flag.Parse()
	ctx := context.Background()
	newClient := func() *clientv3.Client {
		c, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(*endpoints, ","), DialTimeout: 5 * time.Second})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return c
	}
	out := json.NewEncoder(os.Stdout)
	if *breadthClients > 0 {
		breadth(out, newClient, strings.Split(*endpoints, ",")[0], *breadthClients, *breadthNames, *duration)
		return
	}

	c := newClient()
	s, err := concurrency.NewSession(c)
	if err != nil {
		panic(err)
	}
	m := concurrency.NewMutex(s, "go-bench-uncontended")
	var unc []time.Duration
	for i := 0; i < *iterations+*iterations/10; i++ {
		t := time.Now()
		if err := m.Lock(ctx); err != nil {
			panic(err)
		}
		if err := m.Unlock(ctx); err != nil {
			panic(err)
		}
		if i >= *iterations/10 {
			unc = append(unc, time.Since(t))
		}
	}
	out.Encode(map[string]any{"metric": "go_mutex_uncontended_lock_unlock", "p50_ms": pct(unc, .5), "p99_ms": pct(unc, .99), "n": len(unc)})

	var mu sync.Mutex
	var lastUnlock time.Time
	var handoffs, waits []time.Duration
	end := time.Now().Add(*duration)
	var wg sync.WaitGroup
	for i := 0; i < *contenders; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc := newClient()
			defer cc.Close()
			ss, err := concurrency.NewSession(cc)
			if err != nil {
				panic(err)
			}
			defer ss.Close()
			mm := concurrency.NewMutex(ss, "go-bench-contended")
			for time.Now().Before(end) {
				t := time.Now()
				if err := mm.Lock(ctx); err != nil {
					panic(err)
				}
				got := time.Now()
				mu.Lock()
				waits = append(waits, got.Sub(t))
				if !lastUnlock.IsZero() {
					handoffs = append(handoffs, got.Sub(lastUnlock))
				}
				lastUnlock = time.Now()
				mu.Unlock()
				if err := mm.Unlock(ctx); err != nil {
					panic(err)
				}
			}
		}()
	}
	wg.Wait()
	out.Encode(map[string]any{"metric": "go_mutex_contended", "contenders": *contenders, "seconds": duration.Seconds(),
		"acquisitions": len(waits), "acquisitions_per_s": float64(len(waits)) / duration.Seconds(),
		"handoff_p50_ms": pct(handoffs, .5), "handoff_p99_ms": pct(handoffs, .99),
		"wait_p50_ms": pct(waits, .5), "wait_p99_ms": pct(waits, .99)})
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// etcdCounters: etcd's CPU seconds and its completed KV requests so far,
// from the first member's /metrics (as `etcdlock bench --breadth` reads them).
func etcdCounters(endpoint string) (cpu, kv float64, ok bool) {
	r, err := http.Get(strings.TrimSuffix(endpoint, "/") + "/metrics")
	if err != nil {
		return 0, 0, false
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return 0, 0, false
	}
	value := func(l string) float64 {
		v, _ := strconv.ParseFloat(l[strings.LastIndex(l, " ")+1:], 64)
		return v
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "process_cpu_seconds_total ") {
			cpu, ok = value(l), true
		} else if strings.HasPrefix(l, "grpc_server_handled_total{") && strings.Contains(l, `grpc_service="etcdserverpb.KV"`) {
			kv += value(l)
		}
	}
	return
}

// breadth: `clients` clients, each with its own connection and session, lock
// and unlock names drawn at random from `names` for `duration` (after a 0.5 s
// warm-up), as `etcdlock bench --breadth` does.
func breadth(out *json.Encoder, newClient func() *clientv3.Client, endpoint string, clients, names int, duration time.Duration) {
	ctx := context.Background()
	type worker struct {
		c *clientv3.Client
		s *concurrency.Session
		m map[int]*concurrency.Mutex
	}
	ws := make([]*worker, clients)
	for i := range ws {
		c := newClient()
		s, err := concurrency.NewSession(c)
		if err != nil {
			panic(err)
		}
		ws[i] = &worker{c, s, map[int]*concurrency.Mutex{}}
	}
	run := func(d time.Duration, seed int64) (acq, cyc []time.Duration, errors int64, elapsed, cpu time.Duration) {
		var stop atomic.Bool
		var mu sync.Mutex
		var wg sync.WaitGroup
		t0, c0 := time.Now(), cpuTime()
		for i, w := range ws {
			wg.Add(1)
			go func(i int, w *worker) {
				defer wg.Done()
				rng := rand.New(rand.NewSource(seed + int64(i)))
				var a, c []time.Duration
				var e int64
				for !stop.Load() {
					n := rng.Intn(names)
					m, ok := w.m[n]
					if !ok {
						m = concurrency.NewMutex(w.s, fmt.Sprintf("go-breadth-%d", n))
						w.m[n] = m
					}
					t := time.Now()
					if err := m.Lock(ctx); err != nil {
						e++
						continue
					}
					got := time.Since(t)
					if err := m.Unlock(ctx); err != nil {
						e++
						continue
					}
					a = append(a, got)
					c = append(c, time.Since(t))
				}
				mu.Lock()
				acq = append(acq, a...)
				cyc = append(cyc, c...)
				errors += e
				mu.Unlock()
			}(i, w)
		}
		time.Sleep(d)
		stop.Store(true)
		wg.Wait()
		return acq, cyc, errors, time.Since(t0), cpuTime() - c0
	}
	run(500*time.Millisecond, 0)
	cpu0, kv0, ok0 := etcdCounters(endpoint)
	acq, cyc, errors, elapsed, cpu := run(duration, 42)
	cpu1, kv1, ok1 := etcdCounters(endpoint)
	n := len(cyc)
	var etcdCPU, kvReqs any
	if ok0 && ok1 {
		etcdCPU, kvReqs = (cpu1-cpu0)*1e6/float64(max(n, 1)), (kv1-kv0)/float64(max(n, 1))
	}
	out.Encode(map[string]any{"metric": "go_mutex_breadth", "clients": clients, "names": names, "seconds": duration.Seconds(),
		"acquisitions": n, "acquisitions_per_s": float64(n) / elapsed.Seconds(),
		"acquire_p50_ms": pct(acq, .5), "acquire_p99_ms": pct(acq, .99),
		"cycle_p50_ms": pct(cyc, .5), "cycle_p99_ms": pct(cyc, .99),
		"client_cpu_us_per_acquisition": float64(cpu.Microseconds()) / float64(max(n, 1)), "errors": errors,
		"etcd_cpu_us_per_acquisition": etcdCPU, "kv_requests_per_acquisition": kvReqs})
	for _, w := range ws {
		w.s.Close()
		w.c.Close()
	}
}
