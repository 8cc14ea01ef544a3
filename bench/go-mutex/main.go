// Command go-mutex measures etcd's own Go concurrency.Mutex the way
// `etcdlock bench` measures etcdlock: uncontended lock+unlock, and N
// contenders on one lock (handoff = next holder's acquisition - previous
// holder's unlock call). Prints JSON lines. Used by bench/compare.sh so both
// run against the same etcd in the same run.
package main

import (
	"bufio"
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

var endpointsFlag func() string

func main() {
	endpoints := flag.String("endpoints", "http://127.0.0.1:2379", "comma separated")
	endpointsFlag = func() string { return *endpoints }
	iterations := flag.Int("iterations", 1000, "uncontended iterations")
	contenders := flag.Int("contenders", 8, "contenders on one lock")
	duration := flag.Duration("duration", 15*time.Second, "contention duration")
	breadthClients := flag.Int("breadth-clients", 0, "breadth mode only: clients (each its own connection and session) locking random names")
	breadthNames := flag.Int("breadth-names", 1000, "breadth mode: distinct names")
	fleetClients := flag.Int("fleet-clients", 0, "fleet mode only (bench/fleet.sh): clients, each its own clientv3.Client and concurrency.Session, holding -fleet-locks Mutexes each")
	fleetLocks := flag.Int("fleet-locks", 10, "fleet mode: locks each client holds")
	fleetWaiters := flag.Int("fleet-waiters", 0, "fleet mode: Lock calls queued on names the fleet holds")
	fleetPrefix := flag.String("fleet-prefix", "gofleet-", "fleet mode: prefix of the lock names")
	fleetSample := flag.Int("fleet-sample", 100, "fleet mode: clients whose keep-alive gaps are sampled")
	ttl := flag.Int("ttl", 60, "fleet mode: session TTL in seconds (concurrency.WithTTL)")
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
	if *fleetClients > 0 {
		fleet(out, newClient, *fleetClients, *fleetLocks, *fleetWaiters, *fleetPrefix, *fleetSample, *ttl)
		return
	}
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

// fleet: one process of a client fleet, driven by bench/fleet.sh over
// stdin/stdout as `etcdlock bench --fleet` is (see cli/src/bench_fleet.rs):
// "holding" once every Mutex is held and every waiter's key is in etcd;
// stdin "window" starts the steady window, "release" (or EOF) ends it; then
// "done" with losses (a session whose Done() closed before release loses
// its holds), false losses (etcd, asked when Done() closed, still had the
// key under a live lease) and
// keep-alive gaps. The gaps: a second KeepAlive channel on a sampled
// client's session lease (clientv3's lessor fans one lease's answers out to
// every channel, sending no extra request), the time between two answers.
func fleet(out *json.Encoder, newClient func() *clientv3.Client, clients, locks, waiters int, prefix string, sample, ttl int) {
	ctx := context.Background()
	t0 := time.Now()
	type member struct {
		c  *clientv3.Client
		s  *concurrency.Session
		ms []*concurrency.Mutex
	}
	fail := func(stage string, err error) {
		out.Encode(map[string]any{"event": "error", "stage": stage, "error": err.Error()})
		os.Exit(1)
	}
	fs := make([]*member, clients)
	sem := make(chan struct{}, 16) // as many at once as `etcdlock bench --fleet` forms
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var firstErr error
	var stage string
	for i := range fs {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(endpointsFlag(), ","), DialTimeout: 5 * time.Second})
			if err == nil {
				var s *concurrency.Session
				s, err = concurrency.NewSession(c, concurrency.WithTTL(ttl))
				if err == nil {
					fs[i] = &member{c: c, s: s}
					return
				}
			}
			errMu.Lock()
			if firstErr == nil {
				firstErr, stage = err, "connect"
			}
			errMu.Unlock()
		}(i)
	}
	wg.Wait()
	if firstErr != nil {
		fail(stage, firstErr)
	}
	connectS := time.Since(t0).Seconds()
	for i, m := range fs {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int, m *member) {
			defer wg.Done()
			defer func() { <-sem }()
			for j := 0; j < locks; j++ {
				mu := concurrency.NewMutex(m.s, fmt.Sprintf("%sc%d-l%d", prefix, i, j))
				if err := mu.Lock(ctx); err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
					return
				}
				m.ms = append(m.ms, mu)
			}
		}(i, m)
	}
	wg.Wait()
	if firstErr != nil {
		fail("lock", firstErr)
	}
	if locks == 0 {
		waiters = 0
	}
	waiters = min(waiters, clients)
	wctx, cancelWaiters := context.WithCancel(ctx)
	var waiterErrors atomic.Int64
	var wwg sync.WaitGroup
	for w := 0; w < waiters; w++ {
		wwg.Add(1)
		go func(w int) {
			defer wwg.Done()
			mu := concurrency.NewMutex(fs[(w+1)%clients].s, fmt.Sprintf("%sc%d-l0", prefix, w))
			// Never granted while the fleet holds; cancelled at release (Lock deletes its key).
			if err := mu.Lock(wctx); err != nil && wctx.Err() == nil {
				waiterErrors.Add(1)
			}
		}(w)
	}
	holds := clients * locks
	kv := fs[0].c
	deadline := time.Now().Add(120 * time.Second)
	var keys int64
	for {
		r, err := kv.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil {
			keys = r.Count
		}
		if keys >= int64(holds+waiters) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	out.Encode(map[string]any{"event": "holding", "pid": os.Getpid(), "clients": clients, "holds": holds,
		"waiters": waiters, "keys": keys, "connect_s": connectS, "setup_s": time.Since(t0).Seconds()})

	// Losses as they happen (as bench_fleet.rs): a session whose Done()
	// closes before release loses its holds; false if etcd, asked at once,
	// still has the key under a live lease.
	formed := time.Now()
	type verdict struct {
		i       int
		at      float64
		isFalse bool
	}
	var vMu sync.Mutex
	var verdicts []verdict
	released := make(chan struct{})
	for i, m := range fs {
		go func(i int, m *member) {
			select {
			case <-released:
				return
			case <-m.s.Done():
			}
			at := time.Since(formed).Seconds()
			r, err1 := kv.Get(ctx, m.ms[0].Key())
			l, err2 := kv.TimeToLive(ctx, m.s.Lease())
			f := err1 == nil && err2 == nil && len(r.Kvs) > 0 && l.TTL > 0
			vMu.Lock()
			verdicts = append(verdicts, verdict{i, at, f})
			vMu.Unlock()
		}(i, m)
	}
	var recording, stop atomic.Bool
	var gapMu sync.Mutex
	var gaps []time.Duration
	step := max(clients/max(min(sample, clients), 1), 1)
	sampled := 0
	kctx, cancelKa := context.WithCancel(ctx)
	for i := 0; i < clients; i += step {
		ch, err := fs[i].c.KeepAlive(kctx, fs[i].s.Lease())
		if err != nil {
			continue
		}
		sampled++
		go func() {
			last := time.Now()
			for range ch {
				now := time.Now()
				if recording.Load() {
					gapMu.Lock()
					gaps = append(gaps, now.Sub(last))
					gapMu.Unlock()
				}
				last = now
			}
		}()
	}
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- strings.TrimSpace(sc.Text())
		}
		lines <- "release"
	}()
	until := func(what string) {
		for l := range lines {
			if l == what || l == "release" {
				return
			}
		}
	}
	until("window")
	recording.Store(true)
	until("release")
	recording.Store(false)
	stop.Store(true)
	gapMu.Lock()
	g := append([]time.Duration(nil), gaps...)
	gapMu.Unlock()

	close(released)
	vMu.Lock()
	vs := append([]verdict(nil), verdicts...)
	vMu.Unlock()
	falseClient := map[int]bool{}
	var firstLoss, lastLoss any
	for k, v := range vs {
		falseClient[v.i] = v.isFalse
		if k == 0 || v.at < firstLoss.(float64) {
			firstLoss = v.at
		}
		if k == 0 || v.at > lastLoss.(float64) {
			lastLoss = v.at
		}
	}
	lost, falseLosses, heldAtEnd := 0, 0, 0
	for i, m := range fs {
		select {
		case <-m.s.Done():
			lost += len(m.ms)
			if falseClient[i] {
				falseLosses += len(m.ms)
			}
		default:
			heldAtEnd += len(m.ms)
		}
	}
	cancelKa()
	cancelWaiters()
	wwg.Wait()
	tRel := time.Now()
	var unlockErrors atomic.Int64
	for _, m := range fs {
		wg.Add(1)
		sem <- struct{}{}
		go func(m *member) {
			defer wg.Done()
			defer func() { <-sem }()
			for _, mu := range m.ms {
				if err := mu.Unlock(ctx); err != nil {
					unlockErrors.Add(1)
				}
			}
			m.s.Close()
			m.c.Close()
		}(m)
	}
	wg.Wait()
	var p50, p99, mx any
	if len(g) > 0 {
		p50, p99 = pct(g, .5), pct(g, .99)
		mx = float64(g[len(g)-1]) / 1e6
	}
	out.Encode(map[string]any{"event": "done", "clients": clients, "holds": holds, "held_at_end": heldAtEnd,
		"lost": lost, "false_losses": falseLosses, "clients_lost": len(vs), "first_loss_s": firstLoss, "last_loss_s": lastLoss, "waiter_errors": waiterErrors.Load(), "unlock_errors": unlockErrors.Load(),
		"release_s": time.Since(tRel).Seconds(), "sampled_clients": sampled, "keepalive_gaps": len(g),
		"keepalive_gap_p50_ms": p50, "keepalive_gap_p99_ms": p99, "keepalive_gap_max_ms": mx})
}
