package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRun builds the example and runs it as `go run ./examples/distributed`
// does, so that the parent re-executes a real binary with -worker, and
// checks the summary, which does not depend on timing. It needs a
// redis-server on PATH and fails without one.
func TestRun(t *testing.T) {
	goTool, err := exec.LookPath("go")
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "distributed")
	out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)

	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "-keys", "200", "-procs", "3")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stdout:\n%s\nstderr:\n%s", &stdout, &stderr)
	t.Logf("output:\n%s", &stdout)
	require.Contains(t, stdout.String(), `
200 keys, 3 worker processes (one killed, one started after)
every key processed:         200 of 200
held by two workers at once: never
hand-outs:                   221
  first attempts:            200
  retries after a failure:   20 (AddRateLimited, backoff counted in Redis)
  after the kill:            1 (its lease expired, the key went to another worker)
`)
	require.NotContains(t, stdout.String(), "other:")
}
