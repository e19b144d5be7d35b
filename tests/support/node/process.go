package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// process is one run of a container's command.
type process struct {
	cmd      *exec.Cmd
	log      *os.File
	started  time.Time
	finished time.Time
	exitCode int
	done     chan struct{}
}

// sandbox is where a pod's processes run: its network namespace ("" for the host's) and
// its cgroup ("" for none).
type sandbox struct {
	netns  string
	cgroup string
}

// startProcess runs argv with env in the sandbox, appending its output to logPath. The
// process leads its own process group, joins the pod's cgroup before it execs, and enters
// the pod's namespace through `ip netns exec`, which also binds /etc/netns/NS/hosts over
// /etc/hosts.
func startProcess(argv, env []string, box sandbox, logPath string) (*process, error) {
	full := argv
	if box.netns != "" {
		full = append([]string{"ip", "netns", "exec", box.netns}, full...)
	}
	if box.cgroup != "" {
		full = append([]string{"/bin/sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, box.cgroup}, full...)
	}
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(full[0], full[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	p := &process{cmd: cmd, log: log, started: time.Now(), done: make(chan struct{})}
	go p.wait()
	return p, nil
}

func (p *process) wait() {
	err := p.cmd.Wait()
	p.finished = time.Now()
	var exit *exec.ExitError
	switch {
	case err == nil:
		p.exitCode = 0
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.exitCode = 128 + int(ws.Signal())
		} else {
			p.exitCode = exit.ExitCode()
		}
	default:
		p.exitCode = 128
	}
	p.log.Close()
	close(p.done)
}

// stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
}

// lookCommand checks that argv[0] can be executed with the container's PATH, as a
// container runtime does before it reports the container started.
func lookCommand(argv []string, path string) error {
	if len(argv) == 0 {
		return fmt.Errorf("no command")
	}
	candidates := []string{argv[0]}
	if !strings.Contains(argv[0], "/") {
		candidates = nil
		for _, dir := range filepath.SplitList(path) {
			candidates = append(candidates, filepath.Join(dir, argv[0]))
		}
	}
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return nil
		}
	}
	return fmt.Errorf("exec: %q: executable file not found in $PATH", argv[0])
}
