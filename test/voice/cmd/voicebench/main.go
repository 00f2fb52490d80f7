// Command voicebench measures Concord's SFU: forwarded packets per second
// per core of the SFU process, with real UDP clients on loopback speaking
// Discord's voice protocol.
//
// It starts itself as a child process running only the SFU ("serve"), so
// the CPU time measured (the child's getrusage) is the SFU's alone, then
// drives rooms × speakers (+ listeners) clients from the parent: each
// speaker sends encrypted Opus-sized packets at -rate per second, every
// client counts what it receives.
//
//	go run ./test/voice/cmd/voicebench -rooms 50 -speakers 5 -listeners 0
//	go run ./test/voice/cmd/voicebench -rooms 1 -speakers 1 -listeners 500
package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/voice"
	"github.com/concord-chat/concord/runtime/domain/voice/devca"
	"github.com/concord-chat/concord/runtime/domain/voice/token"
	"github.com/concord-chat/concord/test/voice/voiceclient"
)

type served struct {
	Endpoint string `json:"endpoint"`
	CA       string `json:"ca"`
	Key      string `json:"key"`
	// Relay is the bare UDP relay of the SFU process (relay): the probe's
	// peer path.
	Relay string `json:"relay"`
}

type usage struct {
	CPUSeconds float64 `json:"cpu_seconds"`
	Forwarded  float64 `json:"forwarded"`
	// LiveBytes is heap in use plus goroutine stacks after a GC.
	LiveBytes uint64 `json:"live_bytes"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		if err := serve(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	rooms := flag.Int("rooms", 50, "calls")
	speakers := flag.Int("speakers", 5, "speakers per call")
	listeners := flag.Int("listeners", 0, "silent listeners per call")
	rate := flag.Int("rate", 50, "packets per second per speaker (50 = 20 ms Opus frames)")
	payload := flag.Int("payload", 120, "Opus payload bytes")
	dur := flag.Duration("duration", 10*time.Second, "measured interval")
	procs := flag.Int("sfu-procs", 1, "GOMAXPROCS of the SFU process")
	rcvbuf := flag.Int("sfu-rcvbuf", 0, "SFU media socket receive buffer in bytes (0: the SFU's default)")
	flag.Parse()
	if err := drive(*rooms, *speakers, *listeners, *rate, *payload, *dur, *procs, *rcvbuf); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// serve runs the SFU; each line on stdin is answered with its CPU usage.
func serve() error {
	key, err := token.GenerateKey()
	if err != nil {
		return err
	}
	reg := &voiceRegistry{}
	rcvbuf := 0
	if len(os.Args) > 2 {
		rcvbuf, _ = strconv.Atoi(os.Args[2])
	}
	srv, err := voice.New(voice.Config{ID: "bench", UDPAddr: "127.0.0.1:0", UDPReadBuffer: rcvbuf, TrustedKeys: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registerer: reg.r(), MaxParticipants: 1000})
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "voicebench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ca, err := devca.Ensure(dir)
	if err != nil {
		return err
	}
	cfg, err := ca.ServerConfig()
	if err != nil {
		return err
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = (&http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}).Serve(l) }()
	go func() { _ = srv.Run(ctx) }()
	rl, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	defer rl.Close()
	go relay(rl)
	enc := json.NewEncoder(os.Stdout)
	_ = enc.Encode(served{Endpoint: l.Addr().String(), CA: ca.CertPath, Key: token.FormatPrivateKey(key), Relay: rl.LocalAddr().String()})
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		cpu := float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
		var live uint64
		if sc.Text() == "m" {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			live = ms.HeapInuse + ms.StackInuse
		}
		_ = enc.Encode(usage{CPUSeconds: cpu, Forwarded: reg.forwarded(), LiveBytes: live})
	}
	return nil
}

// relay is the latency probe's peer: the least an SFU can do, in the SFU's
// process under the same load and scheduler — read a datagram, write it
// to the listener (the address that sent "listen"), no lookup, no
// cryptography. The SFU's probe latency beside it is what the SFU adds
// over a bare hop through a busy process.
func relay(c *net.UDPConn) {
	buf := make([]byte, 1600)
	var to netip.AddrPort
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		if string(buf[:n]) == "listen" {
			to = from
			continue
		}
		if to.IsValid() {
			_, _ = c.WriteToUDPAddrPort(buf[:n], to)
		}
	}
}

func drive(rooms, speakers, listeners, rate, payload int, dur time.Duration, procs, rcvbuf int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "serve", strconv.Itoa(rcvbuf))
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(procs))
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { in.Close(); _ = cmd.Wait() }()
	dec := json.NewDecoder(outp)
	var sv served
	if err := dec.Decode(&sv); err != nil {
		return fmt.Errorf("sfu child: %w", err)
	}
	seed, _ := hex.DecodeString(sv.Key)
	key := ed25519.NewKeyFromSeed(seed)
	caPEM, err := os.ReadFile(sv.CA)
	if err != nil {
		return err
	}
	pool := x509Pool(caPEM)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sample := func(cmd string) (usage, error) {
		if _, err := in.Write([]byte(cmd + "\n")); err != nil {
			return usage{}, err
		}
		var u usage
		return u, dec.Decode(&u)
	}
	m0, err := sample("m")
	if err != nil {
		return err
	}

	var all, talkers []*voiceclient.Client
	uid := uint64(1000)
	for r := 0; r < rooms; r++ {
		for i := 0; i < speakers+listeners; i++ {
			uid++
			sess := "s" + strconv.FormatUint(uid, 10)
			tok, err := token.Sign(key, token.Claims{UserID: snowflake.ID(uid), GuildID: 1, ChannelID: snowflake.ID(100 + r), Server: "bench", SessionID: sess}, time.Now())
			if err != nil {
				return err
			}
			c, err := voiceclient.Connect(ctx, voiceclient.Options{Endpoint: sv.Endpoint, GuildID: 1, UserID: uid, SessionID: sess, Token: tok,
				TLS: &tls.Config{RootCAs: pool}, NoHeartbeat: false})
			if err != nil {
				return fmt.Errorf("client %d: %w", uid, err)
			}
			all = append(all, c)
			if i < speakers {
				talkers = append(talkers, c)
			}
		}
	}
	// A probe call of one speaker and one listener rides along: its
	// packets carry their send time, so the listener measures the latency
	// the SFU adds under the load.
	join := func(room int) (*voiceclient.Client, error) {
		uid++
		sess := "s" + strconv.FormatUint(uid, 10)
		tok, err := token.Sign(key, token.Claims{UserID: snowflake.ID(uid), GuildID: 1, ChannelID: snowflake.ID(100 + room), Server: "bench", SessionID: sess}, time.Now())
		if err != nil {
			return nil, err
		}
		return voiceclient.Connect(ctx, voiceclient.Options{Endpoint: sv.Endpoint, GuildID: 1, UserID: uid, SessionID: sess, Token: tok, TLS: &tls.Config{RootCAs: pool}})
	}
	probeTx, err := join(rooms)
	if err != nil {
		return err
	}
	probeRx, err := join(rooms)
	if err != nil {
		return err
	}
	m1, err := sample("m")
	if err != nil {
		return err
	}
	participants := len(all) + 2
	var lmu sync.Mutex
	var lat []time.Duration
	var received atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, c := range all {
		wg.Add(1)
		go func(c *voiceclient.Client) {
			defer wg.Done()
			buf := make([]byte, 1600)
			for {
				_ = c.UDP.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
				if _, err := c.UDP.Read(buf); err == nil {
					received.Add(1)
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}(c)
	}
	go func() {
		for {
			r, err := probeRx.Recv(time.Now().Add(500 * time.Millisecond))
			select {
			case <-stop:
				return
			default:
			}
			if err != nil || len(r.Payload) < 8 {
				continue
			}
			received.Add(1)
			d := time.Duration(time.Now().UnixNano() - int64(binary.BigEndian.Uint64(r.Payload)))
			lmu.Lock()
			lat = append(lat, d)
			lmu.Unlock()
		}
	}()
	// The peer path: the same probe packets, timestamped at the same
	// tick, through the bare relay of the SFU's process.
	raddr, err := net.ResolveUDPAddr("udp4", sv.Relay)
	if err != nil {
		return err
	}
	relayTx, err := net.DialUDP("udp4", nil, raddr)
	if err != nil {
		return err
	}
	defer relayTx.Close()
	relayRx, err := net.DialUDP("udp4", nil, raddr)
	if err != nil {
		return err
	}
	defer relayRx.Close()
	if _, err := relayRx.Write([]byte("listen")); err != nil {
		return err
	}
	var relayLat []time.Duration
	go func() {
		buf := make([]byte, 1600)
		for {
			_ = relayRx.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			n, err := relayRx.Read(buf)
			select {
			case <-stop:
				return
			default:
			}
			if err != nil || n < 8 {
				continue
			}
			d := time.Duration(time.Now().UnixNano() - int64(binary.BigEndian.Uint64(buf)))
			lmu.Lock()
			relayLat = append(relayLat, d)
			lmu.Unlock()
		}
	}()
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		p := make([]byte, payload)
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				binary.BigEndian.PutUint64(p, uint64(time.Now().UnixNano()))
				_ = probeTx.SendOpus(p)
				binary.BigEndian.PutUint64(p, uint64(time.Now().UnixNano()))
				_, _ = relayTx.Write(p)
			}
		}
	}()
	pkt := make([]byte, payload)
	send := func() {
		t := time.NewTicker(time.Second / time.Duration(rate))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				for _, c := range talkers {
					_ = c.SendOpus(pkt)
				}
			}
		}
	}
	go send()
	time.Sleep(2 * time.Second) // warm-up: the measured window starts with traffic flowing
	lmu.Lock()
	lat, relayLat = lat[:0], relayLat[:0]
	lmu.Unlock()
	u0, err := sample("u")
	if err != nil {
		return err
	}
	r0 := received.Load()
	t0 := time.Now()
	time.Sleep(dur)
	u1, err := sample("u")
	if err != nil {
		return err
	}
	r1 := received.Load()
	el := time.Since(t0).Seconds()
	close(stop)
	wg.Wait()
	cpu := u1.CPUSeconds - u0.CPUSeconds
	fwd := u1.Forwarded - u0.Forwarded
	res := map[string]any{
		"rooms": rooms, "speakers": speakers, "sfu_rcvbuf": rcvbuf, "listeners": listeners, "rate": rate, "sfu_gomaxprocs": procs,
		"forwarded_per_s": fwd / el, "received_per_s": float64(r1-r0) / el, "sfu_cpu_cores": cpu / el,
		"forwarded_per_core_s": fwd / cpu, "delivery_ratio": float64(r1-r0) / fwd,
		"bytes_per_participant": (int64(m1.LiveBytes) - int64(m0.LiveBytes)) / int64(participants),
	}
	lmu.Lock()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	sort.Slice(relayLat, func(i, j int) bool { return relayLat[i] < relayLat[j] })
	if n := len(lat); n > 0 {
		res["probe_packets"] = n
		res["latency_p50_ms"] = ms(lat[n/2])
		res["latency_p99_ms"] = ms(lat[n*99/100])
	}
	if n := len(relayLat); n > 0 {
		res["relay_probe_packets"] = n
		res["relay_latency_p50_ms"] = ms(relayLat[n/2])
		res["relay_latency_p99_ms"] = ms(relayLat[n*99/100])
		if len(lat) > 0 {
			res["added_latency_p50_ms"] = ms(lat[len(lat)/2] - relayLat[n/2])
			res["added_latency_p99_ms"] = ms(lat[len(lat)*99/100] - relayLat[n*99/100])
		}
	}
	lmu.Unlock()
	b, _ := json.MarshalIndent(res, "", "  ")
	fmt.Println(string(b))
	for _, c := range all {
		c.Close()
	}
	return nil
}
