package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

type config struct {
	nodeName   string
	stateDir   string
	cgroupRoot string
	subnet     int
	cpu        string
	memory     string
	maxPods    int
	images     imageFlag
}

// check names the flag and the reason of the first bad value.
func (c config) check() error {
	if errs := validation.IsDNS1123Subdomain(c.nodeName); len(errs) > 0 {
		return fmt.Errorf("--node-name %q: %s", c.nodeName, strings.Join(errs, "; "))
	}
	if c.stateDir == "" || !filepath.IsAbs(c.stateDir) {
		return fmt.Errorf("--state-dir: an absolute directory is required, got %q", c.stateDir)
	}
	if c.cgroupRoot != "" {
		if filepath.IsAbs(c.cgroupRoot) || strings.Contains(c.cgroupRoot, "..") {
			return fmt.Errorf("--cgroup-root: must be a relative cgroup path without '..', got %q", c.cgroupRoot)
		}
	}
	if c.subnet < 0 || c.subnet > 254 {
		return fmt.Errorf("--subnet: must be 0..254, got %d", c.subnet)
	}
	for flag, v := range map[string]string{"--cpu": c.cpu, "--memory": c.memory} {
		if _, err := resource.ParseQuantity(v); err != nil {
			return fmt.Errorf("%s %q: %v", flag, v, err)
		}
	}
	if c.maxPods < 1 || c.maxPods > 1000 {
		return fmt.Errorf("--max-pods: must be 1..1000, got %d", c.maxPods)
	}
	return nil
}
