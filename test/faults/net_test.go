//go:build faults

package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// endpoint is where a process listens: an address (every port when Port
// is 0) or one port of an address.
type endpoint struct {
	Addr string
	Port int
}

// net cuts traffic between this machine's own test processes with
// iptables rules in a chain of its own, jumped to from OUTPUT (loopback
// packets traverse OUTPUT once, from the sender). A process is named by
// the cgroup (v2) it is moved into, matched with -m cgroup --path, so a
// rule drops what one process sends whatever source address the kernel
// picked; where it listens is named by address (the JVMs and etcd have
// loopback addresses of their own) or by port (Concord's nodes share
// 127.0.0.1).
type net struct {
	chain string
	cgv2  string // the cgroup v2 mount
	group string // our cgroups' parent, relative to cgv2
}

// newNet creates the chain and the cgroup parent, both named after the
// run; t.Cleanup removes the rules first of all else (a failed test must
// not leave this machine partitioned).
func newNet(t *testing.T, run string) *net {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the fault tests need root: iptables rules and cgroups partition the network between test processes")
	}
	n := &net{chain: "CONCORD-FAULTS-" + run, group: "concord-faults-" + run}
	for _, m := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(m, "cgroup.procs")); err == nil {
			if b, _ := os.ReadFile("/proc/mounts"); strings.Contains(string(b), " "+m+" cgroup2 ") {
				n.cgv2 = m
				break
			}
		}
	}
	if n.cgv2 == "" {
		t.Fatal("no cgroup v2 hierarchy mounted (/sys/fs/cgroup or /sys/fs/cgroup/unified): iptables -m cgroup --path needs one to name processes")
	}
	if err := os.MkdirAll(filepath.Join(n.cgv2, n.group), 0o755); err != nil {
		t.Fatalf("cgroup: %v", err)
	}
	if out, err := exec.Command("iptables", "-w", "-N", n.chain).CombinedOutput(); err != nil {
		t.Fatalf("iptables -N %s: %v: %s (is iptables installed and allowed here?)", n.chain, err, out)
	}
	if out, err := exec.Command("iptables", "-w", "-I", "OUTPUT", "-j", n.chain).CombinedOutput(); err != nil {
		t.Fatalf("iptables -I OUTPUT: %v: %s", err, out)
	}
	t.Cleanup(n.close)
	return n
}

func (n *net) close() {
	_ = exec.Command("iptables", "-w", "-D", "OUTPUT", "-j", n.chain).Run()
	_ = exec.Command("iptables", "-w", "-F", n.chain).Run()
	_ = exec.Command("iptables", "-w", "-X", n.chain).Run()
	// A cgroup is removed once empty: move what is left to the root.
	dirs, _ := filepath.Glob(filepath.Join(n.cgv2, n.group, "*"))
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil {
			for _, pid := range strings.Fields(string(b)) {
				_ = os.WriteFile(filepath.Join(n.cgv2, "cgroup.procs"), []byte(pid), 0o644)
			}
		}
		_ = os.Remove(d)
	}
	_ = os.Remove(filepath.Join(n.cgv2, n.group))
}

// cgroup is the path of process name's cgroup, as -m cgroup --path wants it.
func (n *net) cgroup(name string) string { return n.group + "/" + name }

// attach moves pid (with all its threads) into name's cgroup.
func (n *net) attach(name string, pid int) error {
	dir := filepath.Join(n.cgv2, n.cgroup(name))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return fmt.Errorf("move %d into cgroup %s: %w", pid, name, err)
	}
	return nil
}

// rule is one drop: packets sent by process from (a cgroup; "" for
// anyone) to endpoint to.
type rule struct {
	from string
	to   endpoint
	all  bool // from sends nothing at all
}

func (r rule) args(n *net) []string {
	var a []string
	if r.from != "" {
		a = append(a, "-m", "cgroup", "--path", n.cgroup(r.from))
	}
	if !r.all {
		a = append(a, "-d", r.to.Addr+"/32")
		if r.to.Port != 0 {
			a = append(a, "-p", "tcp", "--dport", strconv.Itoa(r.to.Port))
		}
	}
	return append(a, "-j", "DROP")
}

// apply replaces the chain's rules with rules, atomically (iptables-restore).
func (n *net) apply(rules []rule) error {
	var b strings.Builder
	b.WriteString("*filter\n")
	fmt.Fprintf(&b, "-F %s\n", n.chain)
	for _, r := range rules {
		fmt.Fprintf(&b, "-A %s %s\n", n.chain, strings.Join(r.args(n), " "))
	}
	b.WriteString("COMMIT\n")
	cmd := exec.Command("iptables-restore", "-w", "5", "--noflush")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-restore: %v: %s\n%s", err, out, b.String())
	}
	return nil
}

// heal removes every rule.
func (n *net) heal() error { return n.apply(nil) }

// listening are the TCP ports process pid listens on (ss -ltnp), for
// the nodes whose gRPC port was picked by the kernel.
func listening(pid int) ([]endpoint, error) {
	out, err := exec.Command("ss", "-Htlnp").Output()
	if err != nil {
		return nil, fmt.Errorf("ss -ltnp: %w", err)
	}
	var eps []endpoint
	tag := "pid=" + strconv.Itoa(pid) + ","
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, tag) {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		i := strings.LastIndex(f[3], ":")
		port, err := strconv.Atoi(f[3][i+1:])
		if err != nil {
			continue
		}
		addr := strings.Trim(f[3][:i], "[]")
		if addr == "*" || addr == "0.0.0.0" || addr == "::" {
			addr = "127.0.0.1"
		}
		if strings.Contains(addr, ":") {
			continue // IPv6: the tests use IPv4 loopback only
		}
		eps = append(eps, endpoint{addr, port})
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("pid %d listens on no TCP port", pid)
	}
	return eps, nil
}

// awaitCut polls until a TCP connect to ep from this process fails or
// times out, proving a rule is in force; used once at setup.
func awaitRulesWork(t *testing.T, n *net) {
	t.Helper()
	// A rule for anyone to 127.0.0.99:1 makes a connect time out instead
	// of being refused.
	if err := n.apply([]rule{{to: endpoint{"127.0.0.99", 1}}}); err != nil {
		t.Fatal(err)
	}
	defer n.heal()
	start := time.Now()
	err := exec.Command("timeout", "2", "bash", "-c", "exec 3<>/dev/tcp/127.0.0.99/1").Run()
	if err == nil || time.Since(start) < time.Second {
		t.Fatalf("an iptables DROP rule in %s did not stop a loopback connect (err %v after %v): the partitions would not partition", n.chain, err, time.Since(start))
	}
}
