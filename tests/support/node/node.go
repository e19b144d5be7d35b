package main

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

const leaseSeconds = 40

// registerNode creates the Node (or takes over an existing one) and marks it Ready.
func registerNode(ctx context.Context, client kubernetes.Interface, cfg config, ip string) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: cfg.nodeName,
		Labels: map[string]string{
			"kubernetes.io/hostname": cfg.nodeName,
			"kubernetes.io/os":       "linux",
			"kubernetes.io/arch":     "amd64",
			"star.dev/test-node":     "true",
		},
	}}
	_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("registering Node %s: %w", cfg.nodeName, err)
	}
	return updateNodeStatus(ctx, client, cfg, ip)
}

func updateNodeStatus(ctx context.Context, client kubernetes.Interface, cfg config, ip string) error {
	node, err := client.CoreV1().Nodes().Get(ctx, cfg.nodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading Node %s: %w", cfg.nodeName, err)
	}
	now := metav1.Now()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cfg.cpu),
		corev1.ResourceMemory: resource.MustParse(cfg.memory),
		corev1.ResourcePods:   *resource.NewQuantity(int64(cfg.maxPods), resource.DecimalSI),
	}
	node.Status.Capacity = capacity
	node.Status.Allocatable = capacity
	node.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: ip},
		{Type: corev1.NodeHostName, Address: cfg.nodeName},
	}
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "StarNodeReady",
		Message: "star-node runs pods as processes", LastHeartbeatTime: now, LastTransitionTime: now,
	}}
	node.Status.NodeInfo = corev1.NodeSystemInfo{
		OperatingSystem: "linux", Architecture: "amd64", KubeletVersion: "star-node",
		ContainerRuntimeVersion: "star-node://process",
	}
	_, err = client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("writing Node %s status: %w", cfg.nodeName, err)
	}
	return nil
}

// keepLease renews the node's Lease in kube-node-lease (the node lifecycle controller's
// heartbeat) and refreshes the Ready condition, until ctx ends.
func keepLease(ctx context.Context, client kubernetes.Interface, cfg config, ip string, logf func(string, ...any)) {
	leases := client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for n := 0; ; n++ {
		if err := renewLease(ctx, leases, cfg.nodeName); err != nil && ctx.Err() == nil {
			logf("lease: %v", err)
		}
		if n%6 == 5 {
			if err := updateNodeStatus(ctx, client, cfg, ip); err != nil && ctx.Err() == nil {
				logf("%v", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

type leaseClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, l *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, l *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

func renewLease(ctx context.Context, leases leaseClient, name string) error {
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}
		lease.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name),
			LeaseDurationSeconds: ptr.To(int32(leaseSeconds)), RenewTime: &now}
		_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.RenewTime = &now
	lease.Spec.HolderIdentity = ptr.To(name)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(leaseSeconds))
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}
