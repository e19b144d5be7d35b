package main

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// statusRetry bounds the retries of a status write: about 40 s in all.
var statusRetry = wait.Backoff{Steps: 12, Duration: 100 * time.Millisecond, Factor: 2, Cap: 5 * time.Second}

// retriable: a conflict (read again), a server that is busy or failing, or a refusal by the
// Node authorizer, whose graph learns of a pod's binding from its own watch and may lag
// the binding that brought the pod here (a kubelet's status manager retries the same way).
func retriable(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsForbidden(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsInternalError(err) ||
		apierrors.IsServiceUnavailable(err)
}

// writeStatus stores status as the pod's status, read fresh each try.
func writeStatus(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, status corev1.PodStatus) error {
	pods := client.CoreV1().Pods(pod.Namespace)
	return retry.OnError(statusRetry, func(err error) bool { return retriable(err) && ctx.Err() == nil }, func() error {
		cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != pod.UID {
			return nil // another pod of the same name: ours is gone
		}
		status.QOSClass = cur.Status.QOSClass
		cur.Status = status
		_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func condition(t corev1.PodConditionType, ok bool, now metav1.Time) corev1.PodCondition {
	s := corev1.ConditionFalse
	if ok {
		s = corev1.ConditionTrue
	}
	return corev1.PodCondition{Type: t, Status: s, LastTransitionTime: now}
}

// podConditions are the conditions a kubelet writes for a pod in this phase.
func podConditions(phase corev1.PodPhase, ready bool) []corev1.PodCondition {
	now := metav1.NewTime(time.Now())
	return []corev1.PodCondition{
		condition(corev1.PodScheduled, true, now),
		condition(corev1.PodInitialized, phase != corev1.PodPending, now),
		condition(corev1.ContainersReady, ready, now),
		condition(corev1.PodReady, ready, now),
	}
}

func runningState(p *process) corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(p.started)}}
}

func terminatedState(p *process) corev1.ContainerState {
	reason := "Completed"
	if p.exitCode != 0 {
		reason = "Error"
	}
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: int32(p.exitCode), Reason: reason,
		StartedAt: metav1.NewTime(p.started), FinishedAt: metav1.NewTime(p.finished),
	}}
}

func startErrorState(msg string) corev1.ContainerState {
	now := metav1.Now()
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 128, Reason: "StartError", Message: msg, StartedAt: now, FinishedAt: now,
	}}
}
