package main

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func main() {
	ep := flag.String("ep", "", "endpoint")
	mode := flag.String("mode", "range", "range|ka")
	rate := flag.Int("rate", 1000, "ops/s total")
	conns := flag.Int("conns", 50, "connections")
	secs := flag.Int("secs", 20, "seconds")
	flag.Parse()
	var cs []*clientv3.Client
	for i := 0; i < *conns; i++ {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{*ep}, DialTimeout: 5 * time.Second})
		if err != nil {
			panic(err)
		}
		cs = append(cs, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*secs)*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	n := 0
	var mu sync.Mutex
	if *mode == "range" || *mode == "srange" {
		opts := []clientv3.OpOption{clientv3.WithCountOnly()}
		if *mode == "srange" {
			opts = append(opts, clientv3.WithSerializable())
		}
		per := time.Duration(float64(time.Second) * float64(*conns) / float64(*rate))
		for i, c := range cs {
			wg.Add(1)
			go func(i int, c *clientv3.Client) {
				defer wg.Done()
				time.Sleep(per * time.Duration(i) / time.Duration(*conns))
				t := time.NewTicker(per)
				for {
					select {
					case <-ctx.Done():
						return
					case <-t.C:
						if _, err := c.Get(ctx, "probe", opts...); err == nil {
							mu.Lock(); n++; mu.Unlock()
						}
					}
				}
			}(i, c)
		}
		wg.Wait()
		fmt.Println("ranges", n)
	} else {
		// each lease renewed every TTL/3 = 5 s by the client's own loop
		leases := *rate * 5 / *conns
		for _, c := range cs {
			for j := 0; j < leases; j++ {
				g, err := c.Grant(context.Background(), 15)
				if err != nil {
					panic(err)
				}
				ch, err := c.KeepAlive(ctx, g.ID)
				if err != nil {
					panic(err)
				}
				go func() { for range ch {} }()
			}
		}
		fmt.Println("leases", leases*len(cs))
		<-ctx.Done()
	}
}
