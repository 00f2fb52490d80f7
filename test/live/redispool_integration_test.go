//go:build integration

package live

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concord-chat/concord/runtime/domain/live/livetest"
)

// TestOneRedisPoolPerProcess: a `concord serve --roles=live-gateway`
// process, with a viewer subscribed (the relay's pub/sub connection) and
// the recent cache read (the viewer's opening snapshot), talks to Redis
// through one client: every connection the process holds to the server
// carries the one client name the process's counters set, none the
// names the recent cache and the relay would give connections of their
// own ("concord-live-recent", "concord-live-relay"). The process's
// connections are its sockets (/proc/<pid>/fd), matched to the server's
// CLIENT LIST by address.
func TestOneRedisPoolPerProcess(t *testing.T) {
	d := setup(t)
	chat := d.start(t, "chat", "--roles=gateway,api,guild,live-api")
	gw := d.start(t, "gw", "--roles=live-gateway")
	d.start(t, "router", "--roles=live-router")
	register := livetest.Register(chat.url)
	alice := register(t)
	e := livetest.Remote(t, chat.url, livetest.RemoteRoles{})
	s := e.CreateStream(alice, "one pool")
	v := livetest.Watch(t, gw.url, s.ID, nil, "")
	v.Next(livetest.Wait, "state")
	c := e.Post(alice, s.ID, "through the relay", 0)
	if got := v.Comments(1, livetest.Wait); got[0].ID != c.ID {
		t.Fatalf("viewer got %+v, want %s", got, c.ID)
	}

	raddr := strings.TrimPrefix(env(t, "CONCORD_REDIS", "CONCORD_TEST_REDIS"), "redis://")
	rc := goredis.NewClient(&goredis.Options{Addr: raddr, DisableIdentity: true})
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := rc.ClientList(ctx).Result()
	if err != nil {
		t.Fatalf("CLIENT LIST: %v", err)
	}
	names := map[string]string{} // client address -> name
	for _, line := range strings.Split(list, "\n") {
		var addr, name string
		for _, f := range strings.Fields(line) {
			if a, ok := strings.CutPrefix(f, "addr="); ok {
				addr = a
			}
			if n, ok := strings.CutPrefix(f, "name="); ok {
				name = n
			}
		}
		if addr != "" {
			names[addr] = name
		}
	}
	mine := procConnsTo(t, gw.cmd.Process.Pid, raddr)
	if len(mine) < 2 {
		t.Fatalf("the gateway process holds %d connections to Redis, want its pub/sub one and at least one for commands", len(mine))
	}
	seen := map[string]int{}
	for _, a := range mine {
		n, ok := names[a]
		if !ok {
			t.Fatalf("connection %s of the process is not in CLIENT LIST", a)
		}
		seen[n]++
	}
	if len(seen) != 1 || seen["concord-counters"] == 0 {
		t.Fatalf("the gateway process's %d Redis connections by client name: %v, want all of one client (concord-counters)", len(mine), seen)
	}
	t.Logf("gateway process: %d Redis connections, one client %v", len(mine), seen)
}

// procConnsTo returns the local addresses (ip:port) of the TCP
// connections process pid holds to server (ip:port), from its
// descriptors and the kernel's IPv4 socket table.
func procConnsTo(t *testing.T, pid int, server string) []string {
	t.Helper()
	host, port, err := net.SplitHostPort(server)
	if err != nil {
		t.Fatal(err)
	}
	ip := net.ParseIP(host).To4()
	p, _ := strconv.Atoi(port)
	// /proc/net/tcp writes an IPv4 address as the hex of its bytes in
	// host (little-endian) order, the port in big-endian hex.
	want := fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], p)
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	tab, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(tab), "\n")[1:] {
		f := strings.Fields(line)
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
		if len(f) < 10 || f[2] != want || f[3] != "01" || !inodes[f[9]] {
			continue
		}
		hp := strings.Split(f[1], ":")
		b, err := hex.DecodeString(hp[0])
		lp, err2 := strconv.ParseUint(hp[1], 16, 16)
		if err != nil || err2 != nil || len(b) != 4 {
			t.Fatalf("socket table line %q", line)
		}
		out = append(out, fmt.Sprintf("%d.%d.%d.%d:%d", b[3], b[2], b[1], b[0], lp))
	}
	return out
}
