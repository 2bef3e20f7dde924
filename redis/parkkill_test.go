package redisqueue

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue/redis/redistest"
)

// parkerEnv tells the test binary, started again by TestParkSurvivesSIGKILL,
// to be a parker process: "ADDR NAME MODE".
const parkerEnv = "REDISQUEUE_PARKER"

// TestParkSurvivesSIGKILL kills with SIGKILL a process that parked a key,
// and checks what another process, with its own client, finds: a key
// parked by a Done outlives its parker and is woken by the other's Wake;
// a key whose parker died before its Done was never parked, so it is
// handed out again when its lease expires, and a Wake then finds no park.
func TestParkSurvivesSIGKILL(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	for _, mode := range []string{"done", "before-done"} {
		t.Run(mode, func(t *testing.T) {
			name := fmt.Sprint("parkkill-", queueSeq.Add(1))
			q := newHandle(t, s.Client(), name, Options[string]{})
			q.Add("a")
			cmd := exec.Command(os.Args[0], "-test.run=^TestParkerProcess$")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %s", parkerEnv, s.Addr, name, mode))
			setDeathSignal(cmd)
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			line, err := bufio.NewReader(out).ReadString('\n')
			require.NoError(t, err)
			require.Equal(t, "parked a\n", line)
			require.NoError(t, cmd.Process.Kill())
			_ = cmd.Wait()

			if mode == "done" {
				assert.Equal(t, 0, q.Len())
				assertNothingReady(t, q)
				assert.Equal(t, 1, q.Wake("e"))
				assert.Equal(t, "a", getNow(t, q))
			} else {
				// The lease of the dead process (500ms) expires; a waiting
				// Get finds it at its heartbeat.
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				item, err := q.GetContext(ctx)
				require.NoError(t, err)
				assert.Equal(t, "a", item)
				assert.Equal(t, 0, q.Wake("e"), "the park of a lease that expired before its Done")
			}
			q.Done("a")
			verifyParks(t, s.Client(), q)
		})
	}
}

// TestParkerProcess is the parker process of TestParkSurvivesSIGKILL: it
// gets a key, parks it on "e", marks it done unless told otherwise, says
// so on stdout and waits to be killed.
func TestParkerProcess(t *testing.T) {
	args := strings.Fields(os.Getenv(parkerEnv))
	if len(args) != 3 {
		t.Skip("run by TestParkSurvivesSIGKILL only")
	}
	client := redis.NewClient(&redis.Options{Addr: args[0]})
	q := New(client, args[1], Options[string]{LeaseDuration: 500 * time.Millisecond})
	item := getNow(t, q)
	q.Park(item, "e")
	if args[2] == "done" {
		q.Done(item)
	}
	fmt.Printf("parked %s\n", item)
	select {}
}
