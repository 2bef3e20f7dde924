package redisqueue

import (
	"embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// The scripts that change a queue's state. Each runs alone on the server,
// so every state change is one atomic step, whichever process makes it.
var (
	addScript        = loadScript("add.lua")
	getScript        = loadScript("get.lua")
	doneScript       = loadScript("done.lua")
	extendScript     = loadScript("extend.lua")
	signalScript     = loadScript("signal.lua")
	releaseScript    = loadScript("release.lua")
	removeScript     = loadScript("remove.lua")
	snapshotScript   = loadScript("snapshot.lua")
	partitionsScript = loadScript("partitions.lua")
)

func loadScript(name string) *redis.Script {
	prelude, err := luaFiles.ReadFile("lua/prelude.lua")
	if err != nil {
		panic(err)
	}
	body, err := luaFiles.ReadFile("lua/" + name)
	if err != nil {
		panic(err)
	}
	return redis.NewScript(string(prelude) + "\n" + string(body))
}

// queueKeys are the Redis keys of one queue or partition, in the order
// the scripts' prelude names them. They share one hash tag: {name} for an
// unpartitioned queue and a partitioned queue's partition 0.
type queueKeys struct {
	all    []string
	ready  string
	prio   string
	fails  string
	signal string
	prefix string
}

// keyParts names a queue's keys in the order of KEYS in the scripts: the
// prelude binds KEYS[i+1] to the upper-case keyParts[i], which a test
// checks.
var keyParts = []string{"ready", "state", "delayed", "leases", "tokens", "fence", "signal", "fails", "bucket", "grants", "since", "adds", "dprio", "seq", "prio"}

// newQueueKeys returns the keys under prefix (see partitionPrefixes).
func newQueueKeys(prefix string) queueKeys {
	all := make([]string, len(keyParts))
	for i, part := range keyParts {
		all[i] = prefix + part
	}
	return queueKeys{all: all, ready: all[0], prio: all[14], signal: all[6], fails: all[7], prefix: prefix}
}

// wakeKey is the list on which one handle's listener is woken at shutdown,
// beside the shared signal list.
func (k queueKeys) wakeKey(handle string) string {
	return k.prefix + "wake:" + handle
}

func validName(name string) bool {
	return name != "" && len(name) <= 256 && !strings.ContainsAny(name, "{}")
}
