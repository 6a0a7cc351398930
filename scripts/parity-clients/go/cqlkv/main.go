// cqlkv: gocql doing what sql-bench crud does on a CQL server, on sql-bench's own tables:
// SELECT v FROM KS.crud_read WHERE k = ? (k uniform in 1..rows) or
// INSERT INTO KS.crud_write (k, v) VALUES (?, ?) (keys negative: sql-bench's are positive),
// prepared, at consistency ONE, from -threads workers each with a session and one connection
// of its own opened before the window. Prints "OPS_PER_S CPU_US_PER_OP".
package main

import (
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gocql/gocql"
)

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func main() {
	host := flag.String("host", "127.0.0.1:9042", "host:port")
	keyspace := flag.String("keyspace", "fairbench", "")
	op := flag.String("op", "read", "read or write")
	threads := flag.Int("threads", 16, "workers, one session each")
	seconds := flag.Float64("seconds", 10, "")
	rows := flag.Int64("rows", 1000, "")
	leg := flag.Int64("leg", 1, "keeps each leg's write keys apart")
	flag.Parse()

	sessions := make([]*gocql.Session, *threads)
	for i := range sessions {
		cluster := gocql.NewCluster(*host)
		cluster.Keyspace = *keyspace
		cluster.Consistency = gocql.One
		cluster.NumConns = 1
		cluster.Timeout = 10 * time.Second
		cluster.ConnectTimeout = 10 * time.Second
		cluster.DisableInitialHostLookup = true
		s, err := cluster.CreateSession()
		if err != nil {
			fmt.Fprintln(os.Stderr, "cqlkv:", err)
			os.Exit(1)
		}
		sessions[i] = s
	}
	read := fmt.Sprintf("SELECT v FROM %s.crud_read WHERE k = ?", *keyspace)
	write := fmt.Sprintf("INSERT INTO %s.crud_write (k, v) VALUES (?, ?)", *keyspace)
	value := strings.Repeat("v", 100)
	// A first statement on every session prepares it before the window opens.
	for i, s := range sessions {
		var v string
		if err := s.Query(read, int64(1)).Scan(&v); err != nil {
			fmt.Fprintln(os.Stderr, "cqlkv: first read:", err)
			os.Exit(1)
		}
		if *op == "write" {
			if err := s.Query(write, -(*leg*1e12 + int64(i)*1e9), value).Exec(); err != nil {
				fmt.Fprintln(os.Stderr, "cqlkv: first write:", err)
				os.Exit(1)
			}
		}
	}

	counts := make([]int64, *threads)
	errs := make([]error, *threads)
	var wg sync.WaitGroup
	cpu0 := cpuSeconds()
	start := time.Now()
	deadline := start.Add(time.Duration(*seconds * float64(time.Second)))
	for i, s := range sessions {
		wg.Add(1)
		go func(i int, s *gocql.Session) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(*leg*1000 + int64(i)))
			base := -(*leg*1e12 + int64(i)*1e9 + 1)
			var n int64
			for time.Now().Before(deadline) {
				if *op == "read" {
					var v string
					if err := s.Query(read, 1+rng.Int63n(*rows)).Scan(&v); err != nil || len(v) != 100 {
						errs[i] = fmt.Errorf("read: %v (value of %d bytes)", err, len(v))
						return
					}
				} else if err := s.Query(write, base-n, value).Exec(); err != nil {
					errs[i] = fmt.Errorf("write: %v", err)
					return
				}
				n++
			}
			counts[i] = n
		}(i, s)
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	cpu := cpuSeconds() - cpu0
	for _, err := range errs {
		if err != nil {
			fmt.Fprintln(os.Stderr, "cqlkv:", err)
			os.Exit(1)
		}
	}
	var total int64
	for _, n := range counts {
		total += n
	}
	fmt.Printf("%.1f %.2f\n", float64(total)/elapsed, cpu*1e6/float64(total))
	for _, s := range sessions {
		s.Close()
	}
}
