// Package leader runs one piece of work on only one replica at a time,
// with client-go's leader election on a Lease.
//
// Guarantees:
//
//   - The work runs only while this replica holds the lease.
//   - When the lease is lost, the work's context is cancelled with cause
//     ErrLostLeadership before another replica can acquire the lease:
//     client-go stops renewing at RenewDeadline, and nobody else may take
//     the lease until LeaseDuration has passed since the last renewal, so
//     the work has LeaseDuration-RenewDeadline to stop.
//   - On a graceful stop (the context of Run ends), the lease is kept
//     (renewed) until the work has returned, then released, so that the
//     next leader starts only after this one has finished.
//   - A standby is ready: Role.Readiness answers the work's readiness only
//     while this replica leads.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ErrLostLeadership is the cause of the work's context when the lease was
// lost, and Run's error then.
var ErrLostLeadership = errors.New("leader: lost the lease")

// Config names the Lease and times the election.
type Config struct {
	Namespace, Name string
	// Identity names this replica in the Lease; unique per replica.
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// Run campaigns for the lease until ctx ends, and runs work while it holds
// it. leading is told when this replica starts and stops leading. Run
// returns nil after a graceful stop, ErrLostLeadership when the lease was
// lost, or work's error.
func Run(ctx context.Context, client kubernetes.Interface, cfg Config, log *slog.Logger,
	work func(ctx context.Context) error, leading func(bool)) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}
	// The election outlives ctx: while this replica works, the lease is
	// renewed until the work has returned.
	electCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()

	var (
		mu      sync.Mutex
		working bool // work has started
		closed  bool // Run is returning: work must not start
		lost    bool
		workErr error
		done    = make(chan struct{})
	)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            cfg.Name,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadCtx context.Context) {
				// client-go runs this in a goroutine of its own, with no
				// crash handler.
				defer utilruntime.HandleCrash()
				mu.Lock()
				if closed || ctx.Err() != nil {
					mu.Unlock()
					return
				}
				working = true
				mu.Unlock()
				defer func() {
					close(done)
					stopElection() // release the lease, now that the work is over
				}()
				log.Info("leading: this replica publishes", "lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
				leading(true)
				// The work's context ends only here, with its cause: as a
				// child of leadCtx it would end with leadCtx's cause,
				// context.Canceled, before the lost lease could be named.
				workCtx, stop := context.WithCancelCause(context.WithoutCancel(leadCtx))
				defer stop(nil)
				go func() {
					defer utilruntime.HandleCrash()
					select {
					case <-ctx.Done():
						stop(context.Canceled) // graceful: the lease is still held
					case <-leadCtx.Done():
						// The election is stopped only after the work, so
						// this is a renewal that failed.
						mu.Lock()
						lost = true
						mu.Unlock()
						stop(ErrLostLeadership)
					case <-workCtx.Done():
					}
				}()
				workErr = work(workCtx)
			},
			OnStoppedLeading: func() { leading(false) },
			OnNewLeader: func(id string) {
				if id != cfg.Identity {
					log.Info("standing by", "leader", id, "lease", cfg.Namespace+"/"+cfg.Name)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader: %w", err)
	}
	go func() {
		defer utilruntime.HandleCrash()
		select {
		case <-ctx.Done():
		case <-electCtx.Done():
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !working {
			stopElection() // a follower just stops campaigning
		}
	}()
	le.Run(electCtx)

	mu.Lock()
	closed = true
	wasWorking := working
	mu.Unlock()
	if wasWorking {
		<-done
	}
	mu.Lock()
	defer mu.Unlock()
	switch {
	case workErr != nil && !(lost && errors.Is(workErr, ErrLostLeadership)):
		return workErr
	case lost:
		return ErrLostLeadership
	}
	return nil
}
