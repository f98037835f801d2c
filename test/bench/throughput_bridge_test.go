package bench

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/internal/event"
	"github.com/kubebus/bridge/internal/metrics"
	"github.com/kubebus/bridge/internal/pipeline"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/source"
)

// drainTimeout bounds one run of the pipeline; a run that takes longer is
// stuck, not slow.
const drainTimeout = 5 * time.Minute

// loadConfig is the bridge's configuration with env on top of the
// defaults, read as the bridge reads it at start-up.
func loadConfig(b *testing.B, env map[string]string) *config.Config {
	b.Helper()
	environ := []string{
		"BRIDGE_RESOURCES=configmaps,pods",
		"BRIDGE_CLUSTER_NAME=" + throughputCluster,
		"BRIDGE_METRICS_ADDR=",
	}
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(environ)
	if err != nil {
		b.Fatalf("configuration: %v", err)
	}
	return cfg
}

// benchLogger shows warnings and errors only: a retry during a run is
// worth seeing, routine start-up lines are not.
func benchLogger(b *testing.B) *slog.Logger {
	return slog.New(slog.NewTextHandler(b.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// runPipeline publishes deltas to s through the bridge's pipeline, wired
// as internal/bridge wires it: the event encoder, a checkpoint writer on a
// bbolt file, and the metrics, which count every delta on its way in and
// observe every publish. With via, each delta first goes through via, in
// the goroutine that hands deltas to the pipeline, as the source applies a
// view to each object before it hands the delta on; a delta via turns
// down is not handed on. It measures from handing the first delta to the
// pipeline until the sink acknowledged the last and the checkpoint holds
// every position: a run is shorter than the checkpoint's interval, and a
// bridge that runs on pays a flush per interval for the objects that
// changed in it, so the flush that records this run's objects is part of
// its cost.
func runPipeline(b *testing.B, cfg *config.Config, s sink.Sink, deltas []source.Delta, via func(*source.Delta) bool) runResult {
	b.Helper()
	log := benchLogger(b)
	store, err := checkpoint.OpenFile(filepath.Join(b.TempDir(), "checkpoint.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	writer := checkpoint.NewWriter(store, cfg.CheckpointInterval, log)
	m := metrics.New()
	pipe := pipeline.New(s, event.Encoder{Cluster: cfg.ClusterName}, writer, pipeline.Options{
		Workers:             cfg.Workers,
		BatchSize:           cfg.BatchSize,
		MaxPendingPerObject: cfg.MaxPendingPerObject,
		MaxPendingBytes:     cfg.MaxPendingBytes,
		MaxRetryInterval:    cfg.RetryMaxInterval,
		Observer:            m,
		Intents:             writer,
	}, log)

	pipeCtx, stopPipe := context.WithCancel(context.Background())
	writerCtx, stopWriter := context.WithCancel(context.Background())
	var pipeWG, writerWG sync.WaitGroup
	pipeWG.Go(func() { _ = pipe.Run(pipeCtx) })
	var writerErr, runErr error
	writerWG.Go(func() { runErr = writer.Run(writerCtx) })

	var drainErr error
	handed := 0
	r := timed(func() {
		for _, d := range deltas {
			if via != nil && !via(&d) {
				continue
			}
			m.Observed(&d)
			pipe.OnDelta(d)
			handed++
		}
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		if drainErr = pipe.Drain(ctx); drainErr == nil {
			writerErr = writer.Flush(ctx)
		}
	})

	stopPipe()
	pipeWG.Wait()
	stopWriter()
	writerWG.Wait()
	if writerErr == nil {
		writerErr = runErr
	}
	if drainErr != nil {
		b.Fatalf("pipeline: %v", drainErr)
	}
	if writerErr != nil {
		b.Fatalf("checkpoint: %v", writerErr)
	}
	st := pipe.Stats()
	if st.Published != int64(handed) || st.Skipped != 0 || st.Coalesced != 0 {
		b.Fatalf("pipeline published %d of %d deltas (skipped %d, coalesced %d)", st.Published, handed, st.Skipped, st.Coalesced)
	}
	if st.Retried > 0 {
		b.Logf("pipeline retried %d deltas", st.Retried)
	}
	if ws := writer.Stats(); ws.Pending != 0 || ws.Records < uint64(handed) {
		b.Fatalf("checkpoint: %d records committed, %d not", ws.Records, ws.Pending)
	}
	return r
}
