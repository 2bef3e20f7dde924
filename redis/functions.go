package redisqueue

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// librarySource is the queue's Redis Functions library: every operation
// that changes a queue's state is one of its functions, which runs alone
// on the server, so each state change is one atomic step, whichever
// process makes it. lua/workqueue.lua documents each function's keys,
// arguments and reply.
//
//go:embed lua/workqueue.lua
var librarySource string

// ErrRedisVersion is returned, wrapped with the version found, by the
// calls of a queue whose Redis is older than 7.0, which has no Functions.
var ErrRedisVersion = errors.New("redisqueue: the queue needs Redis 7.0 or later")

// op is one of the library's functions.
type op int

const (
	opAdd op = iota
	opAddOpts
	opGet
	opDone
	opExtend
	opSignal
	opRelease
	opCancel
	opRemove
	opSnapshot
	opPartitions
	opPark
	opParkDone
	opWake
	opWakeList
	opWakeKeys
	opWakeItem
	opSetLimit
	opLen
	opStep
	opCount
)

// opNames are the ops' names in the library, after its own and "_".
var opNames = [opCount]string{"add", "addopts", "get", "done", "extend", "signal", "release", "cancel", "remove", "snapshot", "partitions", "park", "parkdone", "wake", "wakelist", "wakekeys", "wakeitem", "setlimit", "len", "step"}

// library is a version of the queue's library: its source and the names
// of its functions, each led by the library's name. The name carries the
// version, so that the processes of two releases, each loading its own
// library, run side by side on one Redis.
type library struct {
	name string
	src  string
	fns  [opCount]string
}

// queueLibrary is the library that New gives a queue.
var queueLibrary = newLibrary(librarySource)

// newLibrary returns the library of src, named by its first line. It
// panics if that is not "#!lua name=NAME".
func newLibrary(src string) *library {
	first, _, _ := strings.Cut(src, "\n")
	name, ok := strings.CutPrefix(first, "#!lua name=")
	if !ok || name == "" {
		panic("redisqueue: the library's first line is not #!lua name=NAME")
	}
	l := &library{name: name, src: src}
	for i, op := range opNames {
		l.fns[i] = name + "_" + op
	}
	return l
}

// features returns the features the library's functions branch on, their
// ARGV[1]: 1 for a sorted queue (Fairness, MaxWait or GroupLimits), plus
// 2 with GroupLimits, plus 4 with two Fairness functions, plus 8 traced.
func (q *Queue[T]) features() int {
	f := 0
	if q.tracer != nil {
		f |= 8
	}
	if q.sorted() {
		f |= 1
	}
	if q.groups != nil {
		f |= 2
	}
	if q.nested != nil {
		f |= 4
	}
	return f
}

// call runs op with FCALL on keys (a queue's or partition's
// queueKeys.fcall), with the queue's features and args.
// A server that lacks the library (a new one, one restarted without
// persistence, a replica promoted before the library reached it, or one
// whose functions were flushed) is given it, and the call is made again,
// once: one that failed so ran nothing.
func (q *Queue[T]) call(ctx context.Context, o op, keys []string, args ...any) *redis.Cmd {
	args = append([]any{q.features()}, args...)
	cmd := q.client.FCall(ctx, q.lib.fns[o], keys, args...)
	if !lacksLibrary(cmd.Err()) {
		return cmd
	}
	if err := q.lib.load(ctx, q.client); err != nil {
		cmd.SetErr(err)
		return cmd
	}
	cmd = q.client.FCall(ctx, q.lib.fns[o], keys, args...)
	if lacksLibrary(cmd.Err()) {
		cmd.SetErr(q.lib.mismatch(cmd.Err()))
	}
	return cmd
}

// mismatch is the error of a call that found no function although the
// server has a library of l's name: another text under the same name,
// which a release must never load (see TestLibraryVersion).
func (l *library) mismatch(err error) error {
	return fmt.Errorf("redisqueue: the server's library %s is not this build's: %w", l.name, err)
}

// lacksLibrary reports whether err is a server's reply to an FCALL of a
// function it does not have, or to FCALL itself on a server too old.
func lacksLibrary(err error) bool {
	return err != nil && (redis.HasErrorPrefix(err, "Function not found") || redis.HasErrorPrefix(err, "unknown command"))
}

// load loads l on every server of client that can take writes: each
// primary of a cluster or shard of a ring. A server that has l already
// keeps it, as l's name stands for its text. It returns ErrRedisVersion,
// wrapped, for a server older than Redis 7.0.
func (l *library) load(ctx context.Context, client redis.UniversalClient) error {
	switch c := client.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return l.loadOn(ctx, node) })
	case *redis.Ring:
		return c.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error { return l.loadOn(ctx, node) })
	default:
		return l.loadOn(ctx, client)
	}
}

// loadOn loads l on the one server that node talks to.
func (l *library) loadOn(ctx context.Context, node redis.Cmdable) error {
	info, err := node.Info(ctx, "server").Result()
	if err != nil {
		return err
	}
	if version := infoField(info, "redis_version"); majorVersion(version) < 7 {
		return fmt.Errorf("%w: %s found (INFO redis_version %q)", ErrRedisVersion, nodeName(node), version)
	}
	err = node.FunctionLoad(ctx, l.src).Err()
	if err != nil && strings.Contains(err.Error(), "'"+l.name+"' already exists") {
		return nil
	}
	return err
}

// nodeName names the server node talks to, for an error.
func nodeName(node redis.Cmdable) string {
	if c, ok := node.(*redis.Client); ok {
		return "Redis at " + c.Options().Addr
	}
	return "Redis"
}

// infoField returns the value of field in an INFO reply, "" if it has none.
func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// majorVersion returns the major number of a version such as "7.0.15",
// 0 if it has none.
func majorVersion(version string) int {
	major, _, _ := strings.Cut(version, ".")
	n, _ := strconv.Atoi(major)
	return n
}

// queueKeys are the Redis keys of one queue or partition, in the order
// the library binds them. They share one hash tag: {name} for an
// unpartitioned queue and a partitioned queue's partition 0.
type queueKeys struct {
	all []string
	// fcall is the one key a function of the library is called with, the
	// prefix: the function derives the keys from it (see begin).
	fcall   []string
	ready   string
	prio    string
	blocked string
	nest    string
	fails   string
	signal  string
	grants  string
	prefix  string
}

// keyParts names a queue's keys in the order the library's begin binds
// them, each to its name in upper case and the prefix and its name, which
// a test checks.
var keyParts = []string{"ready", "state", "delayed", "leases", "tokens", "fence", "signal", "fails", "bucket", "grants", "since", "adds", "dprio", "seq", "prio", "parks", "waiters", "parked", "fired", "flows", "fair", "ages", "groups", "inflight", "blocked", "limits", "inner", "nest", "links"}

// newQueueKeys returns the keys under prefix (see partitionPrefixes).
func newQueueKeys(prefix string) queueKeys {
	all := make([]string, len(keyParts))
	for i, part := range keyParts {
		all[i] = prefix + part
	}
	return queueKeys{all: all, fcall: []string{prefix}, ready: all[0], prio: all[14], blocked: all[24], nest: all[27], signal: all[6], fails: all[7], grants: all[9], prefix: prefix}
}

// wakeKey is the list on which one handle's listener is woken at shutdown,
// beside the shared signal list.
func (k queueKeys) wakeKey(handle string) string {
	return k.prefix + "wake:" + handle
}

func validName(name string) bool {
	return name != "" && len(name) <= 256 && !strings.ContainsAny(name, "{}")
}
