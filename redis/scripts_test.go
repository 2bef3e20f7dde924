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
// in the order newQueueKeys sends them: the order is written in both
// places, and a swap would make every script write one key's data into
// another.
func TestPreludeKeyOrder(t *testing.T) {
	prelude, err := luaFiles.ReadFile("lua/prelude.lua")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^local ([A-Z_, ]+) =\s*((?:KEYS\[\d+\],?\s*)+)`).FindSubmatch(prelude)
	require.NotNil(t, m, "no line `local READY, ... = KEYS[1], ...` in prelude.lua")
	names := strings.Split(string(m[1]), ",")
	indexes := regexp.MustCompile(`KEYS\[(\d+)\]`).FindAllSubmatch(m[2], -1)
	require.Len(t, indexes, len(names), "names and KEYS[i] in prelude.lua")
	require.Len(t, names, len(keyParts), "keys in prelude.lua and keyParts")
	keys := queueKeysOf("q")
	for i, name := range names {
		index, err := strconv.Atoi(string(indexes[i][1]))
		require.NoError(t, err)
		assert.Equal(t, i+1, index, "%s is bound to KEYS[%d], want KEYS[%d]", name, index, i+1)
		assert.Equal(t, keyParts[i], strings.ToLower(strings.TrimSpace(name)), "KEYS[%d]", i+1)
		assert.Equal(t, "wq:{q}:"+keyParts[i], keys.all[i])
	}
	assert.Equal(t, keys.all[0], keys.ready)
	assert.Equal(t, keys.all[6], keys.signal)
	assert.Equal(t, keys.all[7], keys.fails)
}
