package redisqueue

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReplyReader checks that every type and length of a script's reply is
// checked, with an error that names the script and the value, not a
// panic of an unchecked type assertion.
func TestReplyReader(t *testing.T) {
	tests := []struct {
		name    string
		read    func(r *replyReader)
		wantErr string // "" for none
	}{
		{name: "ints", read: func(r *replyReader) { r.ints([]any{int64(1), int64(2)}, 2, "the reply") }},
		{name: "not an array", read: func(r *replyReader) { r.ints("OK", 2, "the reply") },
			wantErr: "function add: the reply is string, want an array"},
		{name: "too short", read: func(r *replyReader) { r.array([]any{int64(1)}, 3, "the reply") },
			wantErr: "function add: the reply has 1 elements, want at least 3"},
		{name: "too long for ints", read: func(r *replyReader) { r.ints([]any{int64(1), int64(2), int64(3)}, 2, "the reply") },
			wantErr: "function add: the reply has 3 elements, want 2"},
		{name: "not an integer", read: func(r *replyReader) { r.int("1", "depth") },
			wantErr: "function add: depth is string, want an integer"},
		{name: "not a string", read: func(r *replyReader) { r.str(int64(1), "a key") },
			wantErr: "function add: a key is int64, want a string"},
		{name: "the first error is kept", read: func(r *replyReader) { r.str(nil, "a key"); r.int(nil, "depth") },
			wantErr: "function add: a key is <nil>, want a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := replyReader{script: "add"}
			require.NotPanics(t, func() { tt.read(&r) })
			if tt.wantErr == "" {
				assert.NoError(t, r.err)
				return
			}
			assert.ErrorIs(t, r.err, errBadReply)
			assert.ErrorContains(t, r.err, tt.wantErr)
			assert.False(t, isOutage(r.err), "a bad reply is no outage")
		})
	}
}
