package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// container is one container of a running pod.
type container struct {
	spec     corev1.Container
	argv     []string
	env      []string
	proc     *process
	state    corev1.ContainerState
	last     corev1.ContainerState
	restarts int32
}

// podWorker runs one pod from its binding to its deletion.
type podWorker struct {
	r         *runner
	pod       *corev1.Pod
	box       sandbox
	ip        string
	dir       string
	ctrs      []*container
	exits     chan int
	restarts  chan int
	terminate chan time.Duration
	done      chan struct{}
}

func (w *podWorker) run(ctx context.Context) {
	defer close(w.done)
	defer w.tearDown()
	if msg := w.setUp(ctx); msg != "" {
		w.write(ctx, corev1.PodFailed, msg)
		w.finish(ctx, w.awaitDeletion(ctx))
		return
	}
	for i := range w.ctrs {
		w.start(i)
	}
	w.write(ctx, w.phase(), "")
	w.finish(ctx, w.supervise(ctx))
}

// setUp gives the pod its namespace, cgroup, log directory and resolved containers; it
// returns why the pod cannot run ("" when it can).
func (w *podWorker) setUp(ctx context.Context) string {
	if len(w.pod.Spec.InitContainers) > 0 {
		return "star-node does not run init containers"
	}
	w.dir = filepath.Join(w.r.cfg.stateDir, "pods", w.pod.Namespace+"_"+w.pod.Name+"_"+string(w.pod.UID))
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return err.Error()
	}
	netns, ip, err := w.r.net.add()
	if err != nil {
		return "network: " + err.Error()
	}
	w.box.netns, w.ip = netns, ip
	w.r.net.publish(netns, ip, podNames(w.pod))
	w.box.cgroup = podCgroup(w.r.cfg.cgroupRoot, w.pod)
	if err := createCgroup(w.box.cgroup, w.pod); err != nil {
		return err.Error()
	}
	w.pod.Status.PodIP, w.pod.Status.HostIP = ip, w.r.net.hostIP()
	for _, spec := range w.pod.Spec.Containers {
		w.ctrs = append(w.ctrs, w.resolve(ctx, spec))
	}
	return ""
}

// podNames are the names a pod resolves under: its hostname and, with a subdomain, the
// names cluster DNS gives it behind the headless Service.
func podNames(pod *corev1.Pod) []string {
	host := podHostname(pod)
	names := []string{host}
	if sub := pod.Spec.Subdomain; sub != "" {
		fqdn := host + "." + sub + "." + pod.Namespace + ".svc"
		names = append([]string{fqdn + ".cluster.local", fqdn}, names...)
	}
	return names
}

// resolve finds a container's command and environment; a container that cannot start
// keeps a waiting or terminated state saying why.
func (w *podWorker) resolve(ctx context.Context, spec corev1.Container) *container {
	c := &container{spec: spec}
	env, vars, err := containerEnv(ctx, w.r.client, w.pod, &spec)
	if err != nil {
		c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "CreateContainerConfigError", Message: err.Error()}}
		return c
	}
	c.env = env
	command := spec.Command
	if len(command) == 0 {
		command = w.r.cfg.images[spec.Image]
	}
	if len(command) == 0 {
		c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull",
			Message: fmt.Sprintf("star-node runs commands on the host: image %q has no command "+
				"(give the container a command, or start star-node with --image %s=COMMAND)", spec.Image, spec.Image)}}
		return c
	}
	argv := append(append([]string{}, command...), spec.Args...)
	for i := range argv {
		argv[i] = expand(argv[i], vars)
	}
	c.argv = argv
	if err := lookCommand(argv, vars["PATH"]); err != nil {
		c.state = startErrorState(err.Error())
		c.argv = nil
	}
	return c
}

func (w *podWorker) start(i int) {
	c := w.ctrs[i]
	if c.argv == nil {
		return
	}
	p, err := startProcess(c.argv, c.env, w.box, filepath.Join(w.dir, c.spec.Name+".log"))
	if err != nil {
		c.state = startErrorState(err.Error())
		return
	}
	c.proc, c.state = p, runningState(p)
	go func() { <-p.done; w.exits <- i }()
}

// supervise follows the containers until the pod is deleted; it returns the deletion's
// grace period.
func (w *podWorker) supervise(ctx context.Context) time.Duration {
	for {
		select {
		case <-ctx.Done():
			return 0
		case grace := <-w.terminate:
			return grace
		case i := <-w.exits:
			w.exited(i)
		case i := <-w.restarts:
			w.ctrs[i].restarts++
			w.start(i)
		}
		phase := w.phase()
		w.write(ctx, phase, "")
		if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
			w.tearDown()
			return w.awaitDeletion(ctx)
		}
	}
}

func (w *podWorker) exited(i int) {
	c := w.ctrs[i]
	c.state = terminatedState(c.proc)
	policy := w.pod.Spec.RestartPolicy
	if policy == corev1.RestartPolicyAlways || (policy == corev1.RestartPolicyOnFailure && c.proc.exitCode != 0) {
		c.last = c.state
		backoff := min(time.Duration(1<<min(c.restarts, 4))*time.Second, 10*time.Second)
		c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
		time.AfterFunc(backoff, func() { w.restarts <- i })
	}
}

// phase is the pod's phase from its containers' states, as a kubelet computes it.
func (w *podWorker) phase() corev1.PodPhase {
	running, waiting, failed := 0, 0, 0
	for _, c := range w.ctrs {
		switch {
		case c.state.Running != nil:
			running++
		case c.state.Waiting != nil:
			waiting++
		case c.state.Terminated != nil && c.state.Terminated.ExitCode != 0:
			failed++
		}
	}
	switch {
	case waiting > 0 && running == 0 && w.anyNeverStarted():
		return corev1.PodPending
	case running > 0 || waiting > 0:
		return corev1.PodRunning
	case failed > 0:
		return corev1.PodFailed
	}
	return corev1.PodSucceeded
}

func (w *podWorker) anyNeverStarted() bool {
	for _, c := range w.ctrs {
		if c.state.Waiting != nil && c.restarts == 0 && c.last.Terminated == nil {
			return true
		}
	}
	return false
}

func (w *podWorker) write(ctx context.Context, phase corev1.PodPhase, msg string) {
	ready := phase == corev1.PodRunning
	st := corev1.PodStatus{Phase: phase, Message: msg, PodIP: w.ip, HostIP: w.r.net.hostIP(),
		StartTime: ptr.To(metav1.NewTime(w.r.started(w.pod.UID)))}
	if w.ip != "" {
		st.PodIPs = []corev1.PodIP{{IP: w.ip}}
		st.HostIPs = []corev1.HostIP{{IP: w.r.net.hostIP()}}
	}
	for _, c := range w.ctrs {
		ready = ready && c.state.Running != nil
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.spec.Name, Image: c.spec.Image, ImageID: c.spec.Image, State: c.state,
			LastTerminationState: c.last, Ready: c.state.Running != nil, RestartCount: c.restarts,
			Started: ptr.To(c.state.Running != nil), ContainerID: "star-node://" + string(w.pod.UID) + "/" + c.spec.Name,
		})
	}
	st.Conditions = podConditions(phase, ready)
	if err := writeStatus(ctx, w.r.client, w.pod, st); err != nil && ctx.Err() == nil {
		w.r.logf("pod %s/%s: status: %v", w.pod.Namespace, w.pod.Name, err)
	}
}

func (w *podWorker) awaitDeletion(ctx context.Context) time.Duration {
	select {
	case <-ctx.Done():
		return 0
	case grace := <-w.terminate:
		return grace
	}
}

// finish stops the containers within the grace period and, once the pod is being
// deleted, completes its deletion as a kubelet does (grace period 0, this pod's UID).
func (w *podWorker) finish(ctx context.Context, grace time.Duration) {
	for _, c := range w.ctrs {
		if c.proc != nil {
			c.proc.stop(grace)
		}
	}
	w.tearDown()
	if ctx.Err() != nil {
		return
	}
	err := w.r.client.CoreV1().Pods(w.pod.Namespace).Delete(ctx, w.pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To(int64(0)), Preconditions: metav1.NewUIDPreconditions(string(w.pod.UID))})
	if err != nil {
		w.r.logf("pod %s/%s: delete: %v", w.pod.Namespace, w.pod.Name, err)
	}
}

// tearDown releases the pod's namespace and cgroup (once).
func (w *podWorker) tearDown() {
	w.r.net.release(w.box.netns)
	removeCgroup(w.box.cgroup)
	w.box = sandbox{}
}
