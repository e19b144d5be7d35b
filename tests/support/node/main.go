// star-node is the test node of scripts/cluster.sh: it registers a Node, keeps its Lease
// fresh, and runs the pods the scheduler binds to it as processes on this machine, each in
// its own network namespace and CPU cgroup, writing their status through the API as a
// kubelet would. Images are not pulled: a container runs its command (or the command that
// --image maps its image to) on the host.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

type imageFlag map[string][]string

func (m imageFlag) String() string { return fmt.Sprint(map[string][]string(m)) }

func (m imageFlag) Set(v string) error {
	image, command, ok := strings.Cut(v, "=")
	if !ok || image == "" || strings.TrimSpace(command) == "" {
		return fmt.Errorf("want IMAGE=COMMAND, got %q", v)
	}
	m[image] = strings.Fields(command)
	return nil
}

func main() {
	cfg := config{images: imageFlag{}}
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the node's identity (system:node:NAME)")
	flag.StringVar(&cfg.nodeName, "node-name", "star-node-0", "the Node's name")
	flag.StringVar(&cfg.stateDir, "state-dir", "", "where pods' files and logs are kept (required)")
	flag.StringVar(&cfg.cgroupRoot, "cgroup-root", "", "the cgroup (relative, cgroup v1 cpu) above kubepods; empty: no CPU cgroups")
	flag.IntVar(&cfg.subnet, "subnet", 0, "third octet S of the pods' 10.214.S.0/24 (1..254); 0: pods share the host's network")
	flag.StringVar(&cfg.cpu, "cpu", "8", "the Node's CPU capacity")
	flag.StringVar(&cfg.memory, "memory", "16Gi", "the Node's memory capacity")
	flag.IntVar(&cfg.maxPods, "max-pods", 110, "the Node's pod capacity")
	flag.Var(cfg.images, "image", "IMAGE=COMMAND: the command of a container that gives none (repeatable)")
	flag.Parse()
	if err := cfg.check(); err != nil {
		fmt.Fprintln(os.Stderr, "star-node:", err)
		os.Exit(2)
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "star-node: --kubeconfig:", err)
		os.Exit(2)
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "star-node:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, client, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "star-node:", err)
		os.Exit(1)
	}
}
