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
	"os"
	"sort"
	"strings"
	"sync"
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
