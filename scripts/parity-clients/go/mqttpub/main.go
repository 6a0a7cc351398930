// mqttpub: an MQTT publish-rate client on eclipse/paho.mqtt.golang. One or more publishers
// each keep up to -inflight messages unfinished (QoS 1: until its PUBACK; QoS 0: until written)
// for -seconds, then wait for all of them; one subscriber at the same QoS, connected and
// subscribed before the window opens, counts what the broker delivered. Prints JSON: the acked
// (QoS 1) or written (QoS 0) rate, the delivered rate, messages lost, and this process's CPU
// per message.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
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

func connect(broker, id string) mqtt.Client {
	o := mqtt.NewClientOptions().AddBroker(broker).SetClientID(id).SetCleanSession(true).
		SetAutoReconnect(false).SetOrderMatters(false).SetMaxResumePubInFlight(0)
	c := mqtt.NewClient(o)
	if t := c.Connect(); t.Wait() && t.Error() != nil {
		fmt.Fprintln(os.Stderr, "mqttpub: connect:", t.Error())
		os.Exit(1)
	}
	return c
}

func main() {
	broker := flag.String("broker", "tcp://127.0.0.1:1883", "")
	qos := flag.Int("qos", 1, "0 or 1")
	pubs := flag.Int("publishers", 1, "")
	seconds := flag.Float64("seconds", 10, "publishing window")
	size := flag.Int("size", 64, "payload bytes")
	inflight := flag.Int("inflight", 64, "unfinished messages per publisher")
	topic := flag.String("topic", fmt.Sprintf("parity/%d", os.Getpid()), "topic prefix")
	flag.Parse()
	payload := make([]byte, *size)

	var delivered, lastNs atomic.Int64
	start := time.Now()
	sub := connect(*broker, fmt.Sprintf("parity-sub-%d", os.Getpid()))
	if t := sub.Subscribe(*topic+"/#", byte(*qos), func(_ mqtt.Client, _ mqtt.Message) {
		delivered.Add(1)
		lastNs.Store(int64(time.Since(start)))
	}); t.Wait() && t.Error() != nil {
		fmt.Fprintln(os.Stderr, "mqttpub: subscribe:", t.Error())
		os.Exit(1)
	}
	clients := make([]mqtt.Client, *pubs)
	for i := range clients {
		clients[i] = connect(*broker, fmt.Sprintf("parity-pub-%d-%d", os.Getpid(), i))
	}

	cpu0 := cpuSeconds()
	start = time.Now()
	deadline := start.Add(time.Duration(*seconds * float64(time.Second)))
	var wg sync.WaitGroup
	var sent, errs atomic.Int64
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
			for time.Now().Before(deadline) {
				if len(window) == cap(window) {
					drain(<-window)
				}
				window <- c.Publish(t, byte(*qos), false, payload)
				sent.Add(1)
			}
			for len(window) > 0 {
				drain(<-window)
			}
		}(i, c)
	}
	wg.Wait()
	published := time.Since(start).Seconds()
	cpuPub := cpuSeconds() - cpu0
	// Waits (bounded) for the subscriber to receive what was sent.
	for idle := 0; delivered.Load() < sent.Load() && idle < 20; idle++ {
		before := delivered.Load()
		time.Sleep(100 * time.Millisecond)
		if delivered.Load() != before {
			idle = 0
		}
	}
	total, got := sent.Load(), delivered.Load()
	cpu := cpuSeconds() - cpu0
	out, _ := json.Marshal(map[string]any{
		"qos": *qos, "publishers": *pubs, "inflight": *inflight, "messages": total, "errors": errs.Load(),
		"published_per_s":        float64(total) / published,
		"delivered":              got,
		"lost":                   total - got,
		"delivered_per_s":        float64(got) / (float64(lastNs.Load()) / 1e9),
		"client_cpu_us_per_msg":  cpu * 1e6 / float64(total),
		"publish_cpu_us_per_msg": cpuPub * 1e6 / float64(total),
	})
	fmt.Println(string(out))
	for _, c := range clients {
		c.Disconnect(250)
	}
	sub.Disconnect(250)
}
