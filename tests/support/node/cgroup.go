package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
)

const cpuHierarchy = "/sys/fs/cgroup/cpu"
const cfsPeriodMicros = 100000

// podCgroup is the pod's cgroup v1 cpu directory, laid out as a kubelet with the cgroupfs
// driver lays it out (ROOT/kubepods[/burstable|/besteffort]/podUID), so that star-agent
// finds it. The pod's processes live in it directly and its quota is the sum of the
// containers' CPU limits ("" when the node runs without cgroups).
func podCgroup(root string, pod *corev1.Pod) string {
	if root == "" {
		return ""
	}
	qos := ""
	switch pod.Status.QOSClass {
	case corev1.PodQOSBurstable:
		qos = "burstable"
	case corev1.PodQOSBestEffort:
		qos = "besteffort"
	}
	return filepath.Join(cpuHierarchy, root, "kubepods", qos, "pod"+string(pod.UID))
}

func createCgroup(dir string, pod *corev1.Pod) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cgroup %s: %w", dir, err)
	}
	millis := int64(0)
	for _, c := range pod.Spec.Containers {
		q, ok := c.Resources.Limits[corev1.ResourceCPU]
		if !ok {
			millis = 0
			break
		}
		millis += q.MilliValue()
	}
	if millis == 0 {
		return nil
	}
	quota := strconv.FormatInt(millis*cfsPeriodMicros/1000, 10)
	if err := os.WriteFile(filepath.Join(dir, "cpu.cfs_period_us"), []byte(strconv.Itoa(cfsPeriodMicros)), 0o644); err != nil {
		return fmt.Errorf("cgroup %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cpu.cfs_quota_us"), []byte(quota), 0o644); err != nil {
		return fmt.Errorf("cgroup %s: %w", dir, err)
	}
	return nil
}

// removeCgroup kills what is left in the pod's cgroup and removes it.
func removeCgroup(dir string) {
	if dir == "" {
		return
	}
	for i := 0; i < 50; i++ {
		data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return
		}
		pids := strings.Fields(string(data))
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = os.Remove(dir)
}
