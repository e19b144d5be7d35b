package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// runner starts a podWorker for each pod bound to the node and hands it the pod's deletion.
type runner struct {
	client kubernetes.Interface
	cfg    config
	net    *podNetwork
	mu     sync.Mutex
	pods   map[types.UID]*podWorker
	starts map[types.UID]time.Time
	wg     sync.WaitGroup
}

func (r *runner) logf(format string, args ...any) { log.Printf(format, args...) }

func (r *runner) started(uid types.UID) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.starts[uid]
}

// run registers the node and runs its pods until ctx ends; then every pod's processes
// are stopped and the node's network is removed.
func run(ctx context.Context, client kubernetes.Interface, cfg config) error {
	r := &runner{client: client, cfg: cfg, net: newPodNetwork(cfg.subnet),
		pods: map[types.UID]*podWorker{}, starts: map[types.UID]time.Time{}}
	if err := r.net.setUp(); err != nil {
		return err
	}
	defer r.net.tearDown()
	if err := registerNode(ctx, client, cfg, r.net.hostIP()); err != nil {
		return err
	}
	go keepLease(ctx, client, cfg, r.net.hostIP(), r.logf)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.nodeName).String()
		}))
	informer := factory.Core().V1().Pods().Informer()
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.sync(ctx, obj) },
		UpdateFunc: func(_, obj any) { r.sync(ctx, obj) },
		DeleteFunc: func(obj any) { r.forget(obj) },
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	fmt.Printf("node %s ready\n", cfg.nodeName)
	<-ctx.Done()
	factory.Shutdown()
	r.wg.Wait()
	return nil
}

func (r *runner) sync(ctx context.Context, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	w := r.pods[pod.UID]
	terminal := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	if w == nil && pod.DeletionTimestamp == nil && !terminal {
		w = r.newWorker(pod.DeepCopy())
		r.pods[pod.UID] = w
		r.starts[pod.UID] = time.Now()
		r.wg.Add(1)
		go func() { defer r.wg.Done(); w.run(ctx) }()
	}
	r.mu.Unlock()
	if pod.DeletionTimestamp == nil {
		return
	}
	if w == nil {
		// Not running here (finished before this node started): complete the deletion.
		_ = r.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0)),
			Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})
		return
	}
	grace := time.Duration(ptr.Deref(pod.DeletionGracePeriodSeconds, 30)) * time.Second
	select {
	case w.terminate <- grace:
	default:
	}
}

func (r *runner) newWorker(pod *corev1.Pod) *podWorker {
	return &podWorker{r: r, pod: pod, exits: make(chan int, 64), restarts: make(chan int, 64),
		terminate: make(chan time.Duration, 1), done: make(chan struct{})}
}

// forget stops a pod that left the API without passing through this node (a forced
// deletion).
func (r *runner) forget(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	w := r.pods[pod.UID]
	delete(r.pods, pod.UID)
	delete(r.starts, pod.UID)
	r.mu.Unlock()
	if w != nil {
		select {
		case w.terminate <- 0:
		default:
		}
	}
}
