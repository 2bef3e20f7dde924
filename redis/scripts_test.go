package redisqueue

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPreludeKeyOrder checks that lua/prelude.lua binds the queue's keys
// in the order of keyParts, one a line: the order is written in both
// places, and a swap would make every script write one key's data into
// another.
func TestPreludeKeyOrder(t *testing.T) {
	prelude, err := luaFiles.ReadFile("lua/prelude.lua")
	require.NoError(t, err)
	bindings := regexp.MustCompile(`(?m)^local ([A-Z_]+) = KEYS\[(\d+)\]$`).FindAllSubmatch(prelude, -1)
	require.Len(t, bindings, len(keyParts), "`local NAME = KEYS[i]` lines in prelude.lua, and keyParts")
	keys := queueKeysOf("q")
	for i, m := range bindings {
		index, err := strconv.Atoi(string(m[2]))
		require.NoError(t, err)
		assert.Equal(t, i+1, index, "%s is bound to KEYS[%d], want KEYS[%d]", m[1], index, i+1)
		assert.Equal(t, keyParts[i], strings.ToLower(string(m[1])), "KEYS[%d]", i+1)
		assert.Equal(t, "wq:{q}:"+keyParts[i], keys.all[i])
	}
	assert.Equal(t, keys.all[0], keys.ready)
	assert.Equal(t, keys.all[6], keys.signal)
	assert.Equal(t, keys.all[7], keys.fails)
	assert.Equal(t, keys.all[14], keys.prio)
}

// TestAssemble checks that a script gets the prelude's statements it
// uses, directly or through another, in the prelude's order and with
// their comments, and only the keys they bind, numbered anew.
func TestAssemble(t *testing.T) {
	prelude := parsePrelude(`-- The keys.
local READY = KEYS[1]
local STATE = KEYS[2]
local SEQ = KEYS[14]

-- one is used by two.
local function one()
  return redis.call('LLEN', READY)
end

-- two uses one.
local function two()
  -- three is not called here.
  return one() + 1
end
local A, B = 1, 2
local function three(x)
  return redis.call('HGET', STATE, x) .. SEQ .. A
end
`)
	tests := []struct {
		body     string
		want     string
		wantKeys []string
	}{
		{
			body:     "return 1",
			want:     "return 1",
			wantKeys: nil,
		},
		{
			body: "return two() -- not three()",
			want: `-- The keys.
local READY = KEYS[1]
-- one is used by two.
local function one()
  return redis.call('LLEN', READY)
end

-- two uses one.
local function two()
  -- three is not called here.
  return one() + 1
end
return two() -- not three()`,
			wantKeys: []string{"ready"},
		},
		{
			body: "return three('k')",
			want: `local STATE = KEYS[1]
local SEQ = KEYS[2]

local A, B = 1, 2
local function three(x)
  return redis.call('HGET', STATE, x) .. SEQ .. A
end
return three('k')`,
			wantKeys: []string{"state", "seq"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			got, keys := assemble(prelude, tt.body)
			assert.Equal(t, tt.want, got)
			var names []string
			for _, k := range keys {
				names = append(names, keyParts[k])
			}
			assert.Equal(t, tt.wantKeys, names)
		})
	}
}

// TestFIFOScriptsReachNoPriorities pins what keeps a queue that never uses
// priorities about as cheap as before priorities existed: the scripts of
// Add and Done define none of the functions of keys queued at other
// priorities, as the server runs every definition on each call. (The get
// script's promote adds delayed keys at any priority, so it defines them.)
func TestFIFOScriptsReachNoPriorities(t *testing.T) {
	tests := []struct {
		script *script
		lacks  []string
	}{
		{addScript, []string{"seq", "rank", "unqueue", "add_at", "add_once", "tagged", "rate_limit", "take_delayed", "promote"}},
		{doneScript, []string{"rank", "unqueue", "add", "add_at", "add_once", "tagged", "promote"}},
	}
	for _, tt := range tests {
		for _, fn := range tt.lacks {
			assert.NotContains(t, tt.script.src, "local function "+fn+"(", "%s.lua", tt.script.name)
		}
	}
	assert.Contains(t, addOptsScript.src, "local function add_at(")
}

// TestPlainScriptsReachNoFairness pins what keeps the scripts of a queue
// without Fairness or MaxWait as cheap as before those came: they define
// none of the functions of flows and ages, nor are sent their keys, which
// the variants of a sorted queue are.
func TestPlainScriptsReachNoFairness(t *testing.T) {
	for _, s := range []*script{addScript, addOptsScript, getScript, promoteScript, doneScript, removeScript, parkDoneScript, wakeScript} {
		for _, fn := range []string{"fair_seq", "fair_turn", "take_aged", "note_flows", "forget_flows"} {
			assert.NotContains(t, s.src, "local function "+fn+"(", "%s.lua", s.name)
		}
		for _, k := range s.keys {
			assert.NotContains(t, []string{"flows", "fair", "ages"}, keyParts[k], "%s.lua is sent %s", s.name, keyParts[k])
		}
	}
	for _, s := range []*script{addOptsScript, getScript, promoteScript, doneScript} {
		assert.Contains(t, s.fair.src, "local function fair_seq(", "%s.lua for a sorted queue", s.name)
	}
}

// TestNamesIn pins what assemble takes for a piece of code's names: every
// run of letters, digits and underscores that starts with a letter or an
// underscore, outside comments, each once.
func TestNamesIn(t *testing.T) {
	tests := []struct {
		code string
		want []string
	}{
		{"", nil},
		{"return one(x) + two_2", []string{"one", "return", "two_2", "x"}},
		{"local a = 1e5 -- b c\nreturn a", []string{"a", "e5", "local", "return"}},
		{"f() -- g() at the end, no newline", []string{"f"}},
		{"x--y\nz", []string{"x", "z"}},
		{"-- only a comment", nil},
		{"s = 'k' .. _G.name2", []string{"_G", "k", "name2", "s"}},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			assert.Equal(t, tt.want, namesIn(tt.code))
		})
	}
}
