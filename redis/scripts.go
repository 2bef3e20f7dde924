package redisqueue

import (
	"embed"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// The scripts that change a queue's state. Each runs alone on the server,
// so every state change is one atomic step, whichever process makes it.
var (
	addScript        = loadScript("add.lua")
	addOptsScript    = loadScript("addopts.lua")
	getScript        = loadScript("get.lua")
	promoteScript    = loadScript("promote.lua")
	doneScript       = loadScript("done.lua")
	extendScript     = loadScript("extend.lua")
	signalScript     = loadScript("signal.lua")
	releaseScript    = loadScript("release.lua")
	cancelScript     = loadScript("cancel.lua")
	removeScript     = loadScript("remove.lua")
	snapshotScript   = loadScript("snapshot.lua")
	partitionsScript = loadScript("partitions.lua")
	parkScript       = loadScript("park.lua")
	parkDoneScript   = loadScript("parkdone.lua")
	wakeScript       = loadScript("wake.lua")
	wakeListScript   = loadScript("wakelist.lua")
	wakeKeysScript   = loadScript("wakekeys.lua")
	wakeItemScript   = loadScript("wakeitem.lua")
	setLimitScript   = loadScript("setlimit.lua")
)

// script is one of the queue's Lua scripts: its body after the statements
// of the prelude that it uses. It is sent the keys those statements bind,
// which queueKeys.of lists.
type script struct {
	*redis.Script
	name string
	src  string
	// keys are the indexes in keyParts of the keys it is sent, in order.
	keys []int
	// variants are its variants by the features of the queue that runs
	// them (see Queue.script), one script where they are the same; fair
	// is that of a sorted queue without group limits or nesting.
	variants [variantCount]*script
	fair     *script
}

// The features of a queue that its scripts' variants are for: a sorted
// queue (Fairness, MaxWait, GroupLimits or NestedFairness), and of those
// one with GroupLimits, and one with NestedFairness.
const (
	sortedQueue = 1 << iota
	groupedQueue
	nestedQueue
	variantCount = 8
)

// featureTags end the lines of the scripts that only queues with a
// feature run: they are in its variants alone, so that the scripts of
// other queues reach fewer functions and keys.
var featureTags = []struct {
	suffix  string
	feature int
}{{" -- fair only", sortedQueue}, {" -- groups only", groupedQueue}, {" -- nested only", nestedQueue}}

// loadScript loads the script of lua/name and its variants, one for each
// set of features a queue can have (see featureTags).
func loadScript(name string) *script {
	var variants [variantCount]*script
	bySource := map[string]*script{}
	for features := range variantCount {
		if features != 0 && features&sortedQueue == 0 {
			continue // group limits and nesting make a queue sorted
		}
		s := load(name, features)
		if same := bySource[s.src]; same != nil {
			s = same
		}
		bySource[s.src], variants[features] = s, s
	}
	for _, s := range bySource {
		s.variants, s.fair = variants, variants[sortedQueue]
	}
	return variants[0]
}

func load(name string, features int) *script {
	body, err := luaFiles.ReadFile("lua/" + name)
	if err != nil {
		panic(err)
	}
	text, keys := assemble(preludes[features], keepFeatures(string(body), features))
	return &script{Script: redis.NewScript(text), name: strings.TrimSuffix(name, ".lua"), src: text, keys: keys}
}

// preludes are the prelude's statements for each set of features, parsed
// once at package init and shared by every script's variant for it.
var preludes = func() (p [variantCount][]statement) {
	src, err := luaFiles.ReadFile("lua/prelude.lua")
	if err != nil {
		panic(err)
	}
	for features := range variantCount {
		if features == 0 || features&sortedQueue != 0 {
			p[features] = parsePrelude(keepFeatures(string(src), features))
		}
	}
	return p
}()

// keepFeatures returns src without the lines tagged for features a queue
// with features lacks (see featureTags).
func keepFeatures(src string, features int) string {
	lines := strings.Split(src, "\n")
	lines = slices.DeleteFunc(lines, func(line string) bool {
		for _, tag := range featureTags {
			if features&tag.feature == 0 && strings.HasSuffix(line, tag.suffix) {
				return true
			}
		}
		return false
	})
	return strings.Join(lines, "\n")
}

// statement is one top-level statement of the prelude, with the comment
// before it.
type statement struct {
	text  string
	names []string // the locals it declares
	uses  []string // the names in its code, outside comments
	key   int      // for a key's binding, its index in keyParts; else -1
	// around, for a key's binding, is its text before and after the
	// number in KEYS[n], which assemble numbers anew.
	around [2]string
}

var (
	declaresFunction = regexp.MustCompile(`^local function ([A-Za-z_]\w*)`)
	declaresLocals   = regexp.MustCompile(`^local ([A-Za-z_][\w, ]*?)\s*=`)
	bindsKey         = regexp.MustCompile(`^local ([A-Z_]+) = KEYS\[(\d+)\]`)
)

// parsePrelude splits the prelude into its top-level statements: each
// starts at a line that begins in the first column with neither a comment
// nor "end", and takes the comment lines just before it. It panics on a
// key binding whose name is not in keyParts.
func parsePrelude(src string) []statement {
	lines := strings.Split(strings.TrimRight(src, "\n"), "\n")
	var stmts []statement
	start := 0 // the first line of the statement being read
	flush := func(end int) {
		if end > start {
			stmts = append(stmts, newStatement(strings.Join(lines[start:end], "\n")))
		}
		start = end
	}
	for i, line := range lines {
		if line == "" || strings.HasPrefix(line, "--") || strings.HasPrefix(line, " ") ||
			strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "end") || i == 0 {
			continue
		}
		// A new statement: the comment lines just above it are its own.
		head := i
		for head > start && strings.HasPrefix(lines[head-1], "--") {
			head--
		}
		flush(head)
	}
	flush(len(lines))
	return stmts
}

func newStatement(text string) statement {
	s := statement{text: text, key: -1, uses: namesIn(text)}
	for offset := 0; offset < len(text); {
		line, _, _ := strings.Cut(text[offset:], "\n")
		start := offset
		offset += len(line) + 1
		if !strings.HasPrefix(line, "local ") {
			continue // what the expressions below match starts so
		}
		if m := declaresFunction.FindStringSubmatch(line); m != nil {
			s.names = append(s.names, m[1])
		} else if m := declaresLocals.FindStringSubmatch(line); m != nil {
			for name := range strings.SplitSeq(m[1], ",") {
				s.names = append(s.names, strings.TrimSpace(name))
			}
		}
		if m := bindsKey.FindStringSubmatchIndex(line); m != nil && s.key < 0 {
			name := line[m[2]:m[3]]
			s.key = slices.Index(keyParts, strings.ToLower(name))
			if s.key < 0 {
				panic(fmt.Sprintf("redisqueue: prelude.lua binds %s, which keyParts lacks", name))
			}
			s.around = [2]string{text[:start+m[4]], text[start+m[5]:]}
		}
	}
	return s
}

// assemble returns the script made of body after the statements of
// prelude that it uses, directly or through another, in the prelude's
// order, and the keyParts indexes of the keys they bind: the bindings are
// numbered anew, KEYS[1] up, in that order. A statement that declares
// nothing is kept.
func assemble(prelude []statement, body string) (string, []int) {
	used := map[string]bool{}
	note := func(names []string) {
		for _, name := range names {
			used[name] = true
		}
	}
	note(namesIn(body))
	kept := make([]bool, len(prelude))
	for grown := true; grown; {
		grown = false
		// A statement uses only those before it, so one pass from the
		// end finds most; another pass runs only if one was kept.
		for i := len(prelude) - 1; i >= 0; i-- {
			if kept[i] {
				continue
			}
			s := prelude[i]
			if len(s.names) == 0 || slices.ContainsFunc(s.names, func(n string) bool { return used[n] }) {
				kept[i], grown = true, true
				note(s.uses)
			}
		}
	}
	var b strings.Builder
	var keys []int
	for i, s := range prelude {
		if !kept[i] {
			continue
		}
		if s.key >= 0 {
			keys = append(keys, s.key)
			b.WriteString(s.around[0])
			b.WriteString(strconv.Itoa(len(keys)))
			b.WriteString(s.around[1])
		} else {
			b.WriteString(s.text)
		}
		b.WriteString("\n")
	}
	b.WriteString(body)
	return b.String(), keys
}

// namesIn returns the names in Lua code, outside its comments, each
// once. It scans by hand rather than with regular expressions because it
// runs at package init over every script variant.
func namesIn(code string) []string {
	isStart := func(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || '0' <= c && c <= '9' }
	var names []string
	for i := 0; i < len(code); {
		switch {
		case strings.HasPrefix(code[i:], "--"):
			end := strings.IndexByte(code[i:], '\n')
			if end < 0 {
				return dedupe(names)
			}
			i += end
		case isStart(code[i]):
			j := i + 1
			for j < len(code) && isPart(code[j]) {
				j++
			}
			names = append(names, code[i:j])
			i = j
		default:
			i++
		}
	}
	return dedupe(names)
}

func dedupe(names []string) []string {
	slices.Sort(names)
	return slices.Compact(names)
}

// queueKeys are the Redis keys of one queue or partition, in the order
// the scripts' prelude names them. They share one hash tag: {name} for an
// unpartitioned queue and a partitioned queue's partition 0.
type queueKeys struct {
	all     []string
	ready   string
	prio    string
	blocked string
	nest    string
	fails   string
	signal  string
	grants  string
	prefix  string
}

// keyParts names a queue's keys in the order of the prelude's bindings:
// the prelude binds each to its name in upper case, which a test checks.
var keyParts = []string{"ready", "state", "delayed", "leases", "tokens", "fence", "signal", "fails", "bucket", "grants", "since", "adds", "dprio", "seq", "prio", "parks", "waiters", "parked", "fired", "flows", "fair", "ages", "groups", "inflight", "blocked", "limits", "inner", "nest"}

// newQueueKeys returns the keys under prefix (see partitionPrefixes).
func newQueueKeys(prefix string) queueKeys {
	all := make([]string, len(keyParts))
	for i, part := range keyParts {
		all[i] = prefix + part
	}
	return queueKeys{all: all, ready: all[0], prio: all[14], blocked: all[24], nest: all[27], signal: all[6], fails: all[7], grants: all[9], prefix: prefix}
}

// of returns the keys s is sent, its KEYS.
func (k queueKeys) of(s *script) []string {
	keys := make([]string, len(s.keys))
	for i, part := range s.keys {
		keys[i] = k.all[part]
	}
	return keys
}

// wakeKey is the list on which one handle's listener is woken at shutdown,
// beside the shared signal list.
func (k queueKeys) wakeKey(handle string) string {
	return k.prefix + "wake:" + handle
}

func validName(name string) bool {
	return name != "" && len(name) <= 256 && !strings.ContainsAny(name, "{}")
}
