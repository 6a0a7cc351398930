// mqttpub: an MQTT publish-rate client on eclipse/paho.mqtt.golang. Publishers each keep up to
// -inflight messages unfinished (QoS 1: until its PUBACK; QoS 0: until written) for -seconds,
// then wait for all of them. A subscriber at the same QoS counts what the broker delivered: in
// the same process (-role both), or in a process of its own (-role sub, started first; it prints
// "subscribed" once subscribed and ends after -idle seconds without a message) so that the
// publisher's process does nothing else (-role pub). With -rate, each publisher is paced open
// loop at that many messages per second and stamps every payload with its intended send time;
// the subscriber then reports delivery latency from that time (p50, p99, max), and the
// publisher how late it wrote (lag p99), as mqtt-bench's latency scenario measures it.
// Prints one JSON line.
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// connect opens one client; a subscriber runs its handler in paho's router goroutine (ordered),
// which costs less per message than a goroutine each.
func connect(broker, id string, ordered bool) mqtt.Client {
	o := mqtt.NewClientOptions().AddBroker(broker).SetClientID(id).SetCleanSession(true).
		SetAutoReconnect(false).SetOrderMatters(ordered).SetMaxResumePubInFlight(0)
	c := mqtt.NewClient(o)
	if t := c.Connect(); t.Wait() && t.Error() != nil {
		fmt.Fprintln(os.Stderr, "mqttpub: connect:", t.Error())
		os.Exit(1)
	}
	return c
}

// counter is a subscriber's tally: messages, when the first and the last arrived, and (for
// stamped payloads) each one's delivery latency in ns. Handlers run in paho's one router
// goroutine (ordered), so latencies needs no lock.
type counter struct {
	n, firstNs, lastNs atomic.Int64
	epoch              time.Time
	stamped            bool
	latencies          []int64
}

func (c *counter) handle(_ mqtt.Client, m mqtt.Message) {
	at := time.Now()
	now := int64(at.Sub(c.epoch))
	if c.n.Add(1) == 1 {
		c.firstNs.Store(now)
	}
	c.lastNs.Store(now)
	if p := m.Payload(); c.stamped && len(p) >= 8 {
		c.latencies = append(c.latencies, at.UnixNano()-int64(binary.LittleEndian.Uint64(p)))
	}
}

// percentiles of ns samples as µs: p50, p99, max.
func percentiles(ns []int64) map[string]float64 {
	if len(ns) == 0 {
		return nil
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i] < ns[j] })
	at := func(q float64) float64 { return float64(ns[int(q*float64(len(ns)-1))]) / 1e3 }
	return map[string]float64{"p50_us": at(0.5), "p99_us": at(0.99), "max_us": at(1)}
}

func subscribe(broker, topic string, qos int, c *counter) mqtt.Client {
	sub := connect(broker, fmt.Sprintf("parity-sub-%d", os.Getpid()), true)
	if t := sub.Subscribe(topic+"/#", byte(qos), c.handle); t.Wait() && t.Error() != nil {
		fmt.Fprintln(os.Stderr, "mqttpub: subscribe:", t.Error())
		os.Exit(1)
	}
	return sub
}

func emit(fields map[string]any) {
	out, _ := json.Marshal(fields)
	fmt.Println(string(out))
}

func main() {
	broker := flag.String("broker", "tcp://127.0.0.1:1883", "")
	qos := flag.Int("qos", 1, "0 or 1")
	pubs := flag.Int("publishers", 1, "")
	seconds := flag.Float64("seconds", 10, "publishing window")
	size := flag.Int("size", 64, "payload bytes")
	inflight := flag.Int("inflight", 64, "unfinished messages per publisher")
	topic := flag.String("topic", "parity", "topic prefix")
	role := flag.String("role", "both", "both, pub or sub")
	idle := flag.Float64("idle", 3, "sub: seconds without a message that end it")
	rate := flag.Float64("rate", 0, "per publisher: messages per second, open loop, stamped (0: as fast as the window allows)")
	flag.Parse()
	count := &counter{epoch: time.Now(), stamped: *rate > 0}

	if *role == "sub" {
		sub := subscribe(*broker, *topic, *qos, count)
		fmt.Println("subscribed")
		cpu0 := cpuSeconds()
		limit := time.Now().Add(10 * time.Minute)
		for seen := int64(-1); time.Now().Before(limit); {
			time.Sleep(time.Duration(*idle * float64(time.Second)))
			n := count.n.Load()
			if n > 0 && n == seen {
				break
			}
			seen = n
		}
		span := float64(count.lastNs.Load()-count.firstNs.Load()) / 1e9
		emit(map[string]any{"delivered": count.n.Load(), "delivered_span_s": span, "cpu_s": cpuSeconds() - cpu0,
			"latency": percentiles(count.latencies)})
		sub.Disconnect(250)
		return
	}

	var sub mqtt.Client
	if *role == "both" {
		sub = subscribe(*broker, *topic, *qos, count)
	}
	clients := make([]mqtt.Client, *pubs)
	for i := range clients {
		clients[i] = connect(*broker, fmt.Sprintf("parity-pub-%d-%d", os.Getpid(), i), false)
	}
	payload := make([]byte, *size)
	cpu0 := cpuSeconds()
	start := time.Now()
	count.epoch = start
	deadline := start.Add(time.Duration(*seconds * float64(time.Second)))
	var wg sync.WaitGroup
	var sent, errs atomic.Int64
	lags := make([][]int64, len(clients))
	for i, c := range clients {
		wg.Add(1)
		go func(i int, c mqtt.Client) {
			defer wg.Done()
			window := make(chan mqtt.Token, *inflight)
			t := fmt.Sprintf("%s/%d", *topic, i)
			drain := func(tok mqtt.Token) {
				if tok.Wait(); tok.Error() != nil {
					errs.Add(1)
				}
			}
			var body []byte
			for n := int64(0); time.Now().Before(deadline); n++ {
				if len(window) == cap(window) {
					drain(<-window)
				}
				if *rate > 0 {
					intended := start.Add(time.Duration(float64(n) * 1e9 / *rate))
					if wait := time.Until(intended); wait > 0 {
						time.Sleep(wait)
					}
					lags[i] = append(lags[i], int64(time.Since(intended)))
					body = make([]byte, max(len(payload), 8))
					binary.LittleEndian.PutUint64(body, uint64(intended.UnixNano()))
				} else {
					body = payload
				}
				window <- c.Publish(t, byte(*qos), false, body)
				sent.Add(1)
			}
			for len(window) > 0 {
				drain(<-window)
			}
		}(i, c)
	}
	wg.Wait()
	published := time.Since(start).Seconds()
	total := sent.Load()
	fields := map[string]any{"qos": *qos, "publishers": *pubs, "inflight": *inflight, "messages": total,
		"errors": errs.Load(), "published_per_s": float64(total) / published}
	if *rate > 0 {
		var all []int64
		for _, l := range lags {
			all = append(all, l...)
		}
		fields["lag"] = percentiles(all)
	}
	if sub != nil {
		// Waits (bounded) for the subscriber to receive what was sent.
		for quiet := 0; count.n.Load() < total && quiet < 20; quiet++ {
			before := count.n.Load()
			time.Sleep(100 * time.Millisecond)
			if count.n.Load() != before {
				quiet = 0
			}
		}
		fields["delivered"] = count.n.Load()
		fields["delivered_per_s"] = float64(count.n.Load()) / (float64(count.lastNs.Load()) / 1e9)
	}
	fields["cpu_s"] = cpuSeconds() - cpu0
	emit(fields)
	for _, c := range clients {
		c.Disconnect(250)
	}
	if sub != nil {
		sub.Disconnect(250)
	}
}
