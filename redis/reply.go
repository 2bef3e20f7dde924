package redisqueue

import (
	"errors"
	"fmt"
)

// errBadReply is wrapped by the error of a function whose reply has not
// the shape the handle expects: another version's library under this
// version's name cannot happen, so this means a proxy or a server that
// answers otherwise than Redis. It is no outage: it is not
// retried by the methods that retry outages.
var errBadReply = errors.New("workqueue: unexpected reply from Redis")

// replyReader decodes a function's reply, whose elements go-redis gives as
// any, checking every type. The first mismatch is kept in err and later
// reads return zero values, so that a caller reads the whole reply and
// checks err once.
type replyReader struct {
	script string
	err    error
}

func (r *replyReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: function %s: %s", errBadReply, r.script, fmt.Sprintf(format, args...))
	}
}

// array returns v as an array of at least n elements.
func (r *replyReader) array(v any, n int, what string) []any {
	a, ok := v.([]any)
	if !ok {
		r.fail("%s is %T, want an array", what, v)
		return make([]any, n)
	}
	if len(a) < n {
		r.fail("%s has %d elements, want at least %d", what, len(a), n)
		return make([]any, n)
	}
	return a
}

// int returns v as an integer.
func (r *replyReader) int(v any, what string) int64 {
	n, ok := v.(int64)
	if !ok {
		r.fail("%s is %T, want an integer", what, v)
	}
	return n
}

// str returns v as a string.
func (r *replyReader) str(v any, what string) string {
	s, ok := v.(string)
	if !ok {
		r.fail("%s is %T, want a string", what, v)
	}
	return s
}

// ints returns v as an array of exactly n integers.
func (r *replyReader) ints(v any, n int, what string) []int64 {
	a := r.array(v, n, what)
	if len(a) != n {
		r.fail("%s has %d elements, want %d", what, len(a), n)
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = r.int(a[i], what)
	}
	return out
}
