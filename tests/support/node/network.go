package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// podNetwork gives each pod a network namespace on the node's bridge: 10.214.S.1 is the
// host's end, pods take 10.214.S.2 to .254. Subnet 0 means host networking (every pod
// gets 127.0.0.1). Names carry S so that scripts/cluster.sh down can remove them after a
// crash: bridge stnb-S, veths stnv<S>-<slot>, namespaces stn-S-<slot>.
type podNetwork struct {
	subnet int
	mu     sync.Mutex
	used   map[int]bool // slots in use
	next   int          // where the search for a free slot starts: freed slots rest a while
	hosts  map[string]hostEntry
}

type hostEntry struct {
	ip    string
	names []string
}

func newPodNetwork(subnet int) *podNetwork {
	return &podNetwork{subnet: subnet, used: map[int]bool{}, hosts: map[string]hostEntry{}}
}

func (n *podNetwork) bridge() string  { return fmt.Sprintf("stnb-%d", n.subnet) }
func (n *podNetwork) gateway() string { return fmt.Sprintf("10.214.%d.1", n.subnet) }

// hostIP is the address pods reach the node (and processes on the host) at.
func (n *podNetwork) hostIP() string {
	if n.subnet == 0 {
		return "127.0.0.1"
	}
	return n.gateway()
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setUp creates the bridge (an existing one, left by a crash, is reused).
func (n *podNetwork) setUp() error {
	if n.subnet == 0 {
		return nil
	}
	if exec.Command("ip", "link", "show", n.bridge()).Run() != nil {
		if err := ipCmd("link", "add", n.bridge(), "type", "bridge"); err != nil {
			return err
		}
	}
	_ = ipCmd("addr", "add", n.gateway()+"/24", "dev", n.bridge())
	return ipCmd("link", "set", n.bridge(), "up")
}

// tearDown removes the bridge; pods' namespaces go with release.
func (n *podNetwork) tearDown() {
	if n.subnet != 0 {
		_ = ipCmd("link", "del", n.bridge())
	}
}

// add gives a pod a namespace and an address; it returns the namespace ("" on host
// networking) and the pod's IP.
func (n *podNetwork) add() (netns, ip string, err error) {
	if n.subnet == 0 {
		return "", "127.0.0.1", nil
	}
	n.mu.Lock()
	slot := 0
	for i := 0; i < 253 && slot == 0; i++ {
		if s := (n.next+i)%253 + 1; !n.used[s] {
			slot = s
		}
	}
	if slot == 0 {
		n.mu.Unlock()
		return "", "", fmt.Errorf("no free address in 10.214.%d.0/24", n.subnet)
	}
	n.used[slot], n.next = true, slot
	n.mu.Unlock()
	netns = fmt.Sprintf("stn-%d-%d", n.subnet, slot)
	ip = fmt.Sprintf("10.214.%d.%d", n.subnet, slot+1)
	if err := n.plumb(netns, slot, ip); err != nil {
		n.release(netns)
		return "", "", err
	}
	return netns, ip, nil
}

func (n *podNetwork) veth(slot int) string { return fmt.Sprintf("stnv%d-%d", n.subnet, slot) }

func (n *podNetwork) plumb(netns string, slot int, ip string) error {
	veth := n.veth(slot)
	_ = ipCmd("link", "del", veth) // left by a crash
	steps := [][]string{
		{"netns", "add", netns},
		{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns},
		{"link", "set", veth, "master", n.bridge(), "up"},
		{"-n", netns, "link", "set", "lo", "up"},
		{"-n", netns, "addr", "add", ip + "/24", "dev", "eth0"},
		{"-n", netns, "link", "set", "eth0", "up"},
		{"-n", netns, "route", "add", "default", "via", n.gateway()},
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			return err
		}
	}
	return os.MkdirAll(filepath.Join("/etc/netns", netns), 0o755)
}

// release removes a pod's namespace (its veth goes with it) and frees its address.
func (n *podNetwork) release(netns string) {
	if netns == "" {
		return
	}
	var slot int
	if _, err := fmt.Sscanf(netns, fmt.Sprintf("stn-%d-%%d", n.subnet), &slot); err == nil {
		// Deleting the veth removes both ends now; the namespace itself goes when the
		// kernel gets to it, which may be after the slot is taken again.
		_ = ipCmd("link", "del", n.veth(slot))
		_ = ipCmd("netns", "del", netns)
		_ = os.RemoveAll(filepath.Join("/etc/netns", netns))
		n.mu.Lock()
		delete(n.used, slot)
		n.mu.Unlock()
	}
	n.mu.Lock()
	delete(n.hosts, netns)
	n.mu.Unlock()
	n.writeHosts()
}

// publish makes a pod's names resolve, in every pod, to its IP (as cluster DNS would for
// a pod with hostname and subdomain behind a headless Service).
func (n *podNetwork) publish(netns, ip string, names []string) {
	if netns == "" {
		return
	}
	n.mu.Lock()
	n.hosts[netns] = hostEntry{ip: ip, names: names}
	n.mu.Unlock()
	n.writeHosts()
}

// writeHosts rewrites each pod's /etc/hosts (bound over /etc/hosts by `ip netns exec`) in
// place (a bind mount holds the file, not its name), so that a running pod sees later pods too.
func (n *podNetwork) writeHosts() {
	n.mu.Lock()
	defer n.mu.Unlock()
	lines := []string{"127.0.0.1 localhost", "::1 localhost"}
	for _, e := range n.hosts {
		lines = append(lines, e.ip+" "+strings.Join(e.names, " "))
	}
	sort.Strings(lines[2:])
	text := []byte(strings.Join(lines, "\n") + "\n")
	for netns := range n.hosts {
		path := filepath.Join("/etc/netns", netns, "hosts")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			continue
		}
		// Overwrite, then cut: a reader never sees an empty file.
		_, _ = f.WriteAt(text, 0)
		_ = f.Truncate(int64(len(text)))
		_ = f.Close()
	}
}
