package redisqueue

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue/redis/redistest"
)

func TestSmoke(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	q := New[string](s.Client(), "smoke", Options[string]{})
	defer q.ShutDownWithDrain()
	q.Add("a")
	q.Add("b")
	q.Add("a")
	require.Equal(t, 2, q.Len())
	item, shutdown := q.Get()
	require.False(t, shutdown)
	require.Equal(t, "a", item)
	q.Add("a")
	q.Done("a")
	item, _ = q.Get()
	require.Equal(t, "b", item)
	q.Done("b")
	item, _ = q.Get()
	require.Equal(t, "a", item)
	q.Done("a")
	require.Equal(t, 0, q.Len())
}
