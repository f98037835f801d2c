package controlplane

import (
	"testing"
	"time"
)

// ForTest starts a control plane with default Options for t and stops it
// when t and its subtests finish. It fails t (never skips it) if the control
// plane cannot start; a missing binary is reported with the advice to run
// `make controlplane`. If t has failed by clean-up time, the end of both
// processes' output is logged.
func ForTest(t testing.TB) *ControlPlane {
	t.Helper()
	began := time.Now()
	c, err := Start(t.Context(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("controlplane: API server %s, etcd %s, ready in %s", c.APIServerURL(), c.EtcdURL(), time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.LogTails())
		}
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}
