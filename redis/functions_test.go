package redisqueue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue/redis/redistest"
)

// fcalls reports whether cmd calls function o of the queue's library.
func fcalls(cmd redis.Cmder, o op) bool {
	args := cmd.Args()
	return len(args) > 1 && args[0] == "fcall" && args[1] == queueLibrary.fns[o]
}

// loadLibrary loads the queue's library in client's Redis, so that a hook
// sees the FCALL that runs, not one that fails for want of the library.
func loadLibrary(t *testing.T, client redis.UniversalClient) {
	t.Helper()
	require.NoError(t, queueLibrary.load(context.Background(), client))
}

var brokenLibraries atomic.Int64

// libraryReplacing returns the queue's library with each of replace's
// keys, each of which must occur once in it, replaced by its value, under
// a name of its own, so that it loads beside the real one.
func libraryReplacing(t *testing.T, replace map[string]string) *library {
	t.Helper()
	src := queueLibrary.src
	for old, repl := range replace {
		require.Equal(t, 1, strings.Count(src, old), "occurrences of %q", old)
		src = strings.Replace(src, old, repl, 1)
	}
	name := fmt.Sprintf("workqueue_broken%d", brokenLibraries.Add(1))
	return newLibrary(strings.ReplaceAll(src, queueLibrary.name, name))
}

// TestLibraryKeyOrder: the library binds the keys in keyParts's order,
// each to its name in upper case and the prefix it is called with and its
// name, as newQueueKeys makes them.
func TestLibraryKeyOrder(t *testing.T) {
	var upper []string
	for _, part := range keyParts {
		upper = append(upper, strings.ToUpper(part))
	}
	want := strings.Join(upper, ", ")
	require.Contains(t, queueLibrary.src, "\nlocal "+want+"\n", "the declaration of the keys")
	begin := queueLibrary.src[strings.Index(queueLibrary.src, "local function begin("):]
	begin = begin[:strings.Index(begin, "\nend\n")]
	var bound []string
	for _, m := range regexp.MustCompile(`\n\s*([A-Z][A-Z_, ]*) =\s*\n\s*([^\n]+)`).FindAllStringSubmatch(begin, -1) {
		names := strings.Split(m[1], ", ")
		values := strings.Split(m[2], ", ")
		require.Len(t, values, len(names), "%s", m[0])
		for i, name := range names {
			require.Equal(t, fmt.Sprintf("p .. '%s'", strings.ToLower(name)), values[i], "the binding of %s", name)
			bound = append(bound, name)
		}
	}
	assert.Equal(t, upper, bound, "the keys begin binds")
}

// TestLibraryVersion pins the library's text to its name: two releases
// whose libraries share a name would call each other's functions during
// a rolling upgrade. A change to the text comes with a new name (the
// first line of lua/workqueue.lua) and a new hash here.
func TestLibraryVersion(t *testing.T) {
	sum := sha256.Sum256([]byte(queueLibrary.src))
	assert.Equal(t, "workqueue_v6", queueLibrary.name)
	assert.Equal(t, libraryHash, hex.EncodeToString(sum[:]), "lua/workqueue.lua changed: give it a new version in its name")
}

// libraryHash is the SHA-256 of lua/workqueue.lua as named workqueue_v6.
const libraryHash = "2841cf7504cb5ffd1943064283248a71cd27d4ff44a342b84e01de3f1e9230d8"

// TestLibraryFunctions: loaded, the library has one function per op,
// each named after it, and a second load keeps it.
func TestLibraryFunctions(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	ctx := context.Background()
	require.NoError(t, queueLibrary.load(ctx, client))
	require.NoError(t, queueLibrary.load(ctx, client), "a second load")
	libs, err := client.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: queueLibrary.name}).Result()
	require.NoError(t, err)
	require.Len(t, libs, 1)
	var got []string
	for _, f := range libs[0].Functions {
		got = append(got, f.Name)
	}
	want := slices.Clone(queueLibrary.fns[:])
	slices.Sort(got)
	slices.Sort(want)
	assert.Equal(t, want, got)
}

// TestLibraryReloaded: a server that lost the library (its functions
// flushed, or restarted without persistence) is given it again by the
// next call, which then runs; no call fails.
func TestLibraryReloaded(t *testing.T) {
	tests := []struct {
		name string
		lose func(t *testing.T, s *redistest.Server, client *redis.Client)
	}{
		{"FUNCTION FLUSH", func(t *testing.T, _ *redistest.Server, client *redis.Client) {
			require.NoError(t, client.FunctionFlush(context.Background()).Err())
		}},
		{"restart without persistence", func(t *testing.T, s *redistest.Server, client *redis.Client) {
			s.Restart()
			// The client reconnects to the new process.
			require.NoError(t, client.Ping(context.Background()).Err())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := redistest.Start(t, redistest.Options{})
			client := s.Client()
			ctx := context.Background()
			q := newTestQueue(t, client, Options[string]{})
			require.NoError(t, q.AddContext(ctx, "a"))
			tt.lose(t, s, client)
			libs, err := client.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: queueLibrary.name}).Result()
			require.NoError(t, err)
			require.Empty(t, libs, "the library after the loss")
			if tt.name != "FUNCTION FLUSH" {
				// The restart lost the key too.
				require.NoError(t, q.AddContext(ctx, "a"))
			}
			require.NoError(t, q.AddContext(ctx, "b"))
			require.Equal(t, 2, q.Len())
			for _, want := range []string{"a", "b"} {
				item, err := q.GetContext(ctx)
				require.NoError(t, err)
				require.Equal(t, want, item)
				require.NoError(t, q.DoneContext(ctx, item))
			}
		})
	}
}

// oldRedis makes a client see Redis 6.2: INFO reports that version and
// FCALL is an unknown command.
type oldRedis struct{}

func (oldRedis) DialHook(next redis.DialHook) redis.DialHook { return next }
func (oldRedis) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (oldRedis) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch c := cmd.(type) {
		case *redis.Cmd:
			if cmd.Name() == "fcall" {
				c.SetErr(replyError("ERR unknown command 'FCALL', with args beginning with: "))
				return c.Err()
			}
		case *redis.StringCmd:
			if cmd.Name() == "info" {
				err := next(ctx, cmd)
				c.SetVal(regexp.MustCompile(`redis_version:[^\r\n]*`).ReplaceAllString(c.Val(), "redis_version:6.2.14"))
				return err
			}
		}
		return next(ctx, cmd)
	}
}

// TestOldRedis: against a Redis older than 7.0 every call fails with
// ErrRedisVersion, naming the version found.
func TestOldRedis(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	client.AddHook(oldRedis{})
	q := newTestQueue(t, client, Options[string]{})
	err := q.AddContext(context.Background(), "a")
	require.ErrorIs(t, err, ErrRedisVersion)
	require.ErrorContains(t, err, "redisqueue: the queue needs Redis 7.0 or later: Redis at "+s.Addr+" found (INFO redis_version \"6.2.14\")")
}
