package redisqueue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/redis/redistest"
)

// This file checks that the Redis queue is linearizable: every history of
// concurrent calls, made by goroutines spread over several handles on two
// keys, could have come from the calls one at a time, each at one instant
// between its call and its return, on the sequential queue (linState).
// Shutdown is left out: it is each handle's own and changes nothing in
// Redis. A Get that gives up after a short wait is legal only where the
// queue was empty, so a lost wakeup that outlasts the wait is caught too.
// Adds come at priorities -1 to 2, Gets say the priority they hand out,
// and Removes say whether they took anything, so the priority queue's
// rules are checked too: a re-add keeps the highest priority, a raised key
// goes behind those at its new priority, a key added while processed is
// queued again at the highest priority asked for meanwhile.
//
// A partitioned queue is checked twice. With both keys in one partition
// (the others stay empty) it must pass the same model, Len and AddBatch
// included. With the keys in two partitions it promises less, and
// linByPartition checks what it promises: each partition's history alone
// is linearizable (porcupine's partitioned check), where a Get that gave
// up belongs to every partition (it found each empty), an AddBatch is an
// add in each, and Len, the sum of the partitions' counts each at its own
// instant, is left out (TestPartitionedQueue checks it sequentially).
// Order between the partitions, and AddBatch's single instant across
// them, are not promised, so not checked.

const linKeys = 2

type linOp uint8

const (
	linAdd linOp = iota
	linAddRateLimited
	linForget
	linNumRequeues
	linLen
	linGet
	linDone
	linAddBatch    // AddBatch of key and then the other key
	linAddPriority // AddWithOpts at a priority
	linRemove
	linPark // by the goroutine that holds key, on the events of the mask ev
	linWake // of event ev
	linWakeItem
)

var linOpNames = [...]string{"Add", "AddRateLimited", "Forget", "NumRequeues", "Len", "Get", "Done", "AddBatch", "AddWithOpts", "Remove", "Park", "Wake", "WakeItem"}

// linEvents is the number of events the histories park on and wake.
const linEvents = 2

type linInput struct {
	op   linOp
	key  int8 // -1: none
	prio int8 // AddWithOpts
	ev   int8 // Park: a mask of events; Wake: an event
	// anyCount: Wake's count is not checked, as it is the sum over the
	// partitions (see linByPartition).
	anyCount bool
}

type linOutput struct {
	key  int8 // Get: the key, -1 if it gave up
	n    int  // NumRequeues, Len, Remove (1 if it took anything)
	prio int8 // Get: the priority
}

// linState is the sequential priority queue, a comparable value: fifo
// holds the queued keys in hand-out order, prio[k] the priority of queued
// key k, dirtyPrio[k] the priority a processed key k is queued at again.
// Parks follow the in-memory queue's rules (workqueue's parking.go):
// asking[k] is a park that key k's holder asked for, parked[k] one that
// took effect at Done, on the events of the mask events[k], numbered
// parkSeq[k] in park order, to queue k at gotPrio[k], the priority it was
// handed out at or, after a Remove of its re-add, that re-add's. wakes counts the wakes, lastWake[e] is its value at
// event e's last wake and gotAt[k] at key k's last Get.
type linState struct {
	fifo       [linKeys]int8
	prio       [linKeys]int8
	queued     int8
	processing [linKeys]bool
	dirty      [linKeys]bool
	dirtyPrio  [linKeys]int8
	failures   [linKeys]int8

	asking, parked [linKeys]bool
	events         [linKeys]int8
	parkSeq        [linKeys]int16
	gotPrio        [linKeys]int8
	parks, wakes   int16
	lastWake       [linEvents]int16
	gotAt          [linKeys]int16

	// With fair set, each key is a fairness key of its own, and keys are
	// queued by fair_seq's rule (lua/workqueue.lua), with a step of 1: seq[k]
	// is queued key k's sequence number; for priority p (index p+1),
	// start[p] is the number its keys start from and epoch[p] its epoch;
	// next[p][k], queuedAt[p][k] and after[p][k] are key k's state there
	// (the number of its next key if it has some queued, how many, and
	// the number after its last one handed out), of epoch flowEpoch[p][k].
	// Keys are handed out by priority, number, then key.
	fair bool
	// With limited set, the keys are of one group of limit 1: none is
	// handed out while the other is processed.
	limited   bool
	seq       [linKeys]int32
	start     [linPriorities]int32
	epoch     [linPriorities]int16
	next      [linPriorities][linKeys]int32
	queuedAt  [linPriorities][linKeys]int8
	after     [linPriorities][linKeys]int32
	flowEpoch [linPriorities][linKeys]int16
}

// linPriorities is the number of priorities the histories add at, -1 to 2.
const linPriorities = 4

// fairSeq returns the sequence number of key queued at prio on a fair
// queue, as fair_seq does, and records its state.
func (s linState) fairSeq(key, prio int8) (linState, int32) {
	p := prio + 1
	var head int32 = -1
	for _, k := range s.fifo[:s.queued] {
		if s.prio[k] == prio && (head < 0 || s.seq[k] < head) {
			head = s.seq[k]
		}
	}
	switch {
	case head < 0 && s.queued == 0:
		s.start, s.epoch = [linPriorities]int32{}, [linPriorities]int16{}
		s.next, s.queuedAt, s.after, s.flowEpoch = [linPriorities][linKeys]int32{}, [linPriorities][linKeys]int8{}, [linPriorities][linKeys]int32{}, [linPriorities][linKeys]int16{}
	case head < 0:
		s.epoch[p]++
		s.start[p] = 0
	default:
		s.start[p] = max(s.start[p], head)
	}
	if s.flowEpoch[p][key] != s.epoch[p] {
		s.next[p][key], s.queuedAt[p][key], s.after[p][key], s.flowEpoch[p][key] = 0, 0, 0, s.epoch[p]
	}
	from := s.after[p][key]
	if s.queuedAt[p][key] > 0 {
		from = s.next[p][key]
	}
	n := max(s.start[p], from)
	s.next[p][key] = n + 1
	s.queuedAt[p][key]++
	return s, n
}

// fairHandedOut records that queued key is handed out, as fair_left does.
func (s linState) fairHandedOut(key int8) linState {
	p := s.prio[key] + 1
	s.after[p][key] = max(s.after[p][key], s.seq[key]+1)
	s.start[p] = max(s.start[p], s.seq[key])
	return s
}

// unpark ends key's park, of either kind, and reports whether it had one.
func (s linState) unpark(key int8) (linState, bool) {
	had := s.asking[key] || s.parked[key]
	s.asking[key], s.parked[key], s.events[key], s.parkSeq[key] = false, false, 0, 0
	return s, had
}

// wakeKey ends key's park: a parked key is queued at its priority, one
// being processed is queued again at Done.
func (s linState) wakeKey(key int8) linState {
	if s.parked[key] {
		s = s.insert(key, s.gotPrio[key])
	} else {
		s.dirty[key], s.dirtyPrio[key] = true, s.gotPrio[key]
	}
	s, _ = s.unpark(key)
	return s
}

// insert queues key at prio, behind every key queued at prio or higher,
// or on a fair queue by its sequence number within prio.
func (s linState) insert(key, prio int8) linState {
	i := s.queued
	if s.fair {
		s, s.seq[key] = s.fairSeq(key, prio)
		for i > 0 {
			k := s.fifo[i-1]
			if s.prio[k] > prio || (s.prio[k] == prio && (s.seq[k] < s.seq[key] || (s.seq[k] == s.seq[key] && k < key))) {
				break
			}
			i--
		}
	}
	for i > 0 && s.prio[s.fifo[i-1]] < prio {
		i--
	}
	copy(s.fifo[i+1:s.queued+1], s.fifo[i:s.queued])
	s.fifo[i] = key
	s.prio[key] = prio
	s.queued++
	return s
}

// unqueue takes key out of fifo, if it is queued, and reports whether it
// was.
func (s linState) unqueue(key int8) (linState, bool) {
	i := slices.Index(s.fifo[:s.queued], key)
	if i < 0 {
		return s, false
	}
	if s.fair {
		s.queuedAt[s.prio[key]+1][key]--
	}
	copy(s.fifo[i:], s.fifo[i+1:s.queued])
	s.queued--
	s.fifo[s.queued], s.prio[key] = 0, 0
	return s, true
}

func (s linState) add(key, prio int8) linState {
	s, _ = s.unpark(key) // as if it had none
	switch {
	case s.processing[key]:
		if !s.dirty[key] || prio > s.dirtyPrio[key] {
			s.dirty[key], s.dirtyPrio[key] = true, prio
		}
	case slices.Contains(s.fifo[:s.queued], key):
		if prio > s.prio[key] {
			s, _ = s.unqueue(key)
			s = s.insert(key, prio)
		}
	default:
		s = s.insert(key, prio)
	}
	return s
}

func (s linState) step(in linInput, out linOutput) (bool, linState) {
	switch in.op {
	case linAdd:
		return true, s.add(in.key, 0)
	case linAddPriority:
		return true, s.add(in.key, in.prio)
	case linAddBatch:
		return true, s.add(in.key, 0).add(linKeys-1-in.key, 0)
	case linAddRateLimited:
		s.failures[in.key]++
		return true, s.add(in.key, 0)
	case linRemove:
		s, took := s.unqueue(in.key)
		s, hadPark := s.unpark(in.key)
		took = took || s.dirty[in.key] || hadPark
		if s.dirty[in.key] {
			// As the in-memory queue does, the item keeps the priority of
			// its removed re-add, for a later wake.
			s.gotPrio[in.key] = s.dirtyPrio[in.key]
		}
		s.dirty[in.key], s.dirtyPrio[in.key] = false, 0
		s.failures[in.key] = 0
		want := 0
		if took {
			want = 1
		}
		return out.n == want, s
	case linForget:
		s.failures[in.key] = 0
		return true, s
	case linNumRequeues:
		return out.n == int(s.failures[in.key]), s
	case linLen:
		return out.n == int(s.queued), s
	case linGet:
		full := s.limited && slices.Contains(s.processing[:], true)
		if out.key < 0 {
			return s.queued == 0 || full, s
		}
		if full || s.queued == 0 || s.fifo[0] != out.key || s.prio[out.key] != out.prio {
			return false, s
		}
		if s.fair {
			s = s.fairHandedOut(out.key)
		}
		s, _ = s.unqueue(out.key)
		s.processing[out.key] = true
		s.gotPrio[out.key], s.gotAt[out.key] = out.prio, s.wakes
		return true, s
	case linDone:
		if !s.processing[in.key] {
			return false, s
		}
		s.processing[in.key] = false
		if s.dirty[in.key] {
			s = s.insert(in.key, s.dirtyPrio[in.key])
			s.dirty[in.key], s.dirtyPrio[in.key] = false, 0
		}
		if s.asking[in.key] {
			s.asking[in.key], s.parked[in.key] = false, true
		}
		return true, s
	case linPark:
		if !s.processing[in.key] || s.dirty[in.key] {
			return true, s // the add, or the wake of an earlier park, wins
		}
		s, _ = s.unpark(in.key)
		for e := range linEvents {
			if in.ev&(1<<e) != 0 && s.lastWake[e] > s.gotAt[in.key] {
				s.dirty[in.key], s.dirtyPrio[in.key] = true, s.gotPrio[in.key]
				return true, s
			}
		}
		s.parks++
		s.asking[in.key], s.events[in.key], s.parkSeq[in.key] = true, in.ev, s.parks
		return true, s
	case linWake:
		s.wakes++
		s.lastWake[in.ev] = s.wakes
		var woken []int8
		for k := range int8(linKeys) {
			if (s.asking[k] || s.parked[k]) && s.events[k]&(1<<in.ev) != 0 {
				woken = append(woken, k)
			}
		}
		slices.SortFunc(woken, func(a, b int8) int { return int(s.parkSeq[a]) - int(s.parkSeq[b]) })
		for _, k := range woken {
			s = s.wakeKey(k)
		}
		return in.anyCount || out.n == len(woken), s
	case linWakeItem:
		if !s.asking[in.key] && !s.parked[in.key] {
			return out.n == 0, s
		}
		return out.n == 1, s.wakeKey(in.key)
	}
	return false, s
}

// linByPartition splits a history of a queue whose two keys are in two
// partitions into the histories of each, as the file's comment says.
func linByPartition(history []porcupine.Operation) [][]porcupine.Operation {
	parts := make([][]porcupine.Operation, linKeys)
	for _, op := range history {
		in, out := op.Input.(linInput), op.Output.(linOutput)
		switch {
		case in.op == linLen:
		case in.op == linWake:
			for k := range parts {
				wake := op
				wake.Input = linInput{op: linWake, key: -1, ev: in.ev, anyCount: true}
				parts[k] = append(parts[k], wake)
			}
		case in.op == linAddBatch:
			for k := range parts {
				add := op
				add.Input = linInput{op: linAdd, key: int8(k)}
				parts[k] = append(parts[k], add)
			}
		case in.op == linGet && out.key < 0:
			for k := range parts {
				parts[k] = append(parts[k], op)
			}
		case in.op == linGet:
			parts[out.key] = append(parts[out.key], op)
		default:
			parts[in.key] = append(parts[in.key], op)
		}
	}
	return parts
}

// linFairModel is linModel of a queue whose keys are each a fairness key
// of their own.
var linFairModel = func() porcupine.Model {
	m := linModel
	m.Init = func() any { return linState{fair: true} }
	return m
}()

// linGroupModel is linModel of a queue whose keys are of one group of
// limit 1.
var linGroupModel = func() porcupine.Model {
	m := linModel
	m.Init = func() any { return linState{limited: true} }
	return m
}()

// linPartitionedModel is linModel checked one partition at a time.
var linPartitionedModel = func() porcupine.Model {
	m := linModel
	m.Partition = linByPartition
	return m
}()

var linModel = porcupine.Model{
	Init: func() any { return linState{} },
	Step: func(state, input, output any) (bool, any) {
		return state.(linState).step(input.(linInput), output.(linOutput))
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		switch in.op {
		case linGet:
			return fmt.Sprintf("GetWithPriority() = %d, %d", out.key, out.prio)
		case linNumRequeues, linLen, linRemove:
			return fmt.Sprintf("%s(%d) = %d", linOpNames[in.op], in.key, out.n)
		case linAddPriority:
			return fmt.Sprintf("AddWithOpts(priority %d, %d)", in.prio, in.key)
		case linPark:
			return fmt.Sprintf("Park(%d, events %02b)", in.key, in.ev)
		case linWake:
			return fmt.Sprintf("Wake(%d) = %d", in.ev, out.n)
		case linWakeItem:
			return fmt.Sprintf("WakeItem(%d) = %d", in.key, out.n)
		}
		return fmt.Sprintf("%s(%d)", linOpNames[in.op], in.key)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%+v", state) },
}

// TestLinearizability records histories of 4 goroutines over 2 handles,
// each making 12 random calls on 2 keys, and checks them with porcupine.
func TestLinearizability(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	same, apart := linKeyNames(3, true), linKeyNames(3, false)
	tests := []struct {
		name       string
		handles    int
		histories  int
		partitions int
		keys       [linKeys]string
		model      porcupine.Model
		parking    bool // Park, Wake and WakeItem too
		// sorted keeps every key in the sorted set, as Fairness and
		// MaxWait do: one fairness key for all, so that each priority
		// stays first in, first out, and a MaxWait no key reaches.
		sorted bool
		// fair makes each key a fairness key of its own (keys must sort
		// in index order).
		fair bool
		// limited puts both keys in one group of limit 1.
		limited bool
		// nested makes fair's fairness keys the second level under one
		// first-level key, which takes them through the same turns.
		nested bool
	}{
		// Two goroutines on each handle: their calls may share scripts.
		{name: "2 handles", handles: 2, histories: 300, partitions: 1, keys: [linKeys]string{"a", "b"}, model: linModel},
		// All four on one handle: most calls made at once share a script.
		{name: "1 handle", handles: 1, histories: 150, partitions: 1, keys: [linKeys]string{"a", "b"}, model: linModel},
		{name: "3 partitions, keys in one", handles: 2, histories: 150, partitions: 3, keys: same, model: linModel},
		{name: "3 partitions, keys in two", handles: 2, histories: 300, partitions: 3, keys: apart, model: linPartitionedModel},
		{name: "parking, 2 handles", handles: 2, histories: 300, partitions: 1, keys: [linKeys]string{"a", "b"}, model: linModel, parking: true},
		{name: "parking, 4 handles", handles: 4, histories: 150, partitions: 1, keys: [linKeys]string{"a", "b"}, model: linModel, parking: true},
		{name: "parking, 3 partitions, keys in one", handles: 2, histories: 150, partitions: 3, keys: same, model: linModel, parking: true},
		{name: "parking, 3 partitions, keys in two", handles: 2, histories: 300, partitions: 3, keys: apart, model: linPartitionedModel, parking: true},
		{name: "sorted, 2 handles", handles: 2, histories: 300, partitions: 1, keys: [linKeys]string{"a", "b"}, model: linModel, sorted: true},
		{name: "fairness, 2 handles", handles: 2, histories: 300, partitions: 1, keys: [linKeys]string{"a", "b"}, model: linFairModel, parking: true, fair: true},
		{name: "fairness, 1 handle", handles: 1, histories: 150, partitions: 1, keys: [linKeys]string{"a", "b"}, model: linFairModel, fair: true},
		{name: "sorted, parking, 3 partitions, keys in two", handles: 2, histories: 150, partitions: 3, keys: apart, model: linPartitionedModel, parking: true, sorted: true},
		{name: "nested fairness, 2 handles", handles: 2, histories: 300, partitions: 1, keys: [linKeys]string{"a", "b"}, model: linFairModel, parking: true, fair: true, nested: true},
		{name: "nested fairness, 1 handle", handles: 1, histories: 150, partitions: 1, keys: [linKeys]string{"a", "b"}, model: linFairModel, fair: true, nested: true},
		{name: "group limit, 2 handles", handles: 2, histories: 300, partitions: 1, keys: [linKeys]string{"a", "b"}, model: linGroupModel, limited: true},
		{name: "group limit, parking, 2 handles", handles: 2, histories: 150, partitions: 1, keys: [linKeys]string{"a", "b"}, model: linGroupModel, parking: true, limited: true},
		// The group's keys are in one partition, where the group's name maps.
		{name: "group limit, 3 partitions, keys apart by name", handles: 2, histories: 150, partitions: 3, keys: apart, model: linGroupModel, limited: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			histories := tt.histories
			if testing.Short() {
				histories /= 5
			}
			for h := range histories {
				seed := rand.Uint64()
				name := fmt.Sprintf("lin-%d-%d", h, queueSeq.Add(1))
				handles := make([]*Queue[string], tt.handles)
				opts := Options[string]{RateLimit: &RateLimit{}, Partitions: tt.partitions, ParkBackoff: noParkBackoff()}
				if tt.sorted {
					opts.Fairness = []func(string) string{func(string) string { return "" }}
					opts.MaxWait = time.Hour
				}
				if tt.fair {
					opts.Fairness = []func(string) string{func(key string) string { return key }}
				}
				if tt.nested {
					opts.Fairness = []func(string) string{func(string) string { return "" }, func(key string) string { return key }}
				}
				if tt.limited {
					opts.GroupLimits = &workqueue.GroupLimits[string]{Group: func(string) string { return "g" }, Default: 1}
				}
				for i := range handles {
					handles[i] = New(client, name, opts)
				}
				ops := runLinHistory(t, handles, tt.keys, seed, tt.parking)
				for _, q := range handles {
					q.ShutDownWithDrain()
				}
				result := porcupine.CheckOperationsTimeout(tt.model, ops, 10*time.Second)
				require.Equal(t, porcupine.Ok, result, "history %d (seed %d) is not linearizable:\n%s", h, seed, formatLinHistory(ops))
			}
			t.Logf("%d histories of 4 goroutines on %d handles of %d partitions making 12 calls each (and the Dones they owe) are linearizable",
				histories, tt.handles, tt.partitions)
		})
	}
}

// linKeyNames returns two key names that are in one partition of n, or in
// two.
func linKeyNames(n int, together bool) [linKeys]string {
	for a := 'a'; a <= 'z'; a++ {
		for b := a + 1; b <= 'z'; b++ {
			if (partitionOf(string(a), n) == partitionOf(string(b), n)) == together {
				return [linKeys]string{string(a), string(b)}
			}
		}
	}
	panic("no such pair of letters")
}

// runLinHistory records one history of 4 goroutines over handles, on the
// keys names, drawing their calls from seed; with parking, Park, Wake and
// WakeItem too.
func runLinHistory(t *testing.T, handles []*Queue[string], names [linKeys]string, seed uint64, parking bool) []porcupine.Operation {
	kinds := 10
	if parking {
		kinds = 13
	}
	start := time.Now()
	var mu sync.Mutex
	var ops []porcupine.Operation
	var wg sync.WaitGroup
	for client := range 4 {
		q := handles[client%len(handles)]
		rng := rand.New(rand.NewPCG(seed, uint64(client)))
		wg.Go(func() {
			var held []int8
			record := func(in linInput, call func() linOutput) {
				begin := time.Since(start).Nanoseconds()
				out := call()
				end := time.Since(start).Nanoseconds()
				mu.Lock()
				ops = append(ops, porcupine.Operation{ClientId: client, Input: in, Call: begin, Output: out, Return: end})
				mu.Unlock()
			}
			for i := 0; i < 12 || len(held) > 0; i++ {
				key := int8(rng.IntN(linKeys))
				name := names[key]
				op := linOp(rng.IntN(kinds))
				if i >= 12 {
					op = linDone // finish what this goroutine holds
				}
				switch op {
				case linAdd:
					record(linInput{op: linAdd, key: key, prio: 0}, func() linOutput {
						require.NoError(t, q.AddContext(context.Background(), name))
						return linOutput{}
					})
				case linAddBatch:
					other := names[linKeys-1-key]
					record(linInput{op: linAddBatch, key: key, prio: 0}, func() linOutput {
						require.NoError(t, q.AddBatchContext(context.Background(), []string{name, other}))
						return linOutput{}
					})
				case linAddPriority:
					priority := rng.IntN(4) - 1
					record(linInput{op: linAddPriority, key: key, prio: int8(priority)}, func() linOutput {
						require.NoError(t, q.AddWithOptsContext(context.Background(), workqueue.AddOpts{Priority: &priority}, name))
						return linOutput{}
					})
				case linRemove:
					record(linInput{op: linRemove, key: key, prio: 0}, func() linOutput {
						took, err := q.RemoveContext(context.Background(), name)
						require.NoError(t, err)
						if took {
							return linOutput{n: 1}
						}
						return linOutput{}
					})
				case linAddRateLimited:
					record(linInput{op: linAddRateLimited, key: key, prio: 0}, func() linOutput {
						require.NoError(t, q.AddRateLimitedContext(context.Background(), name))
						return linOutput{}
					})
				case linForget:
					record(linInput{op: linForget, key: key, prio: 0}, func() linOutput {
						require.NoError(t, q.ForgetContext(context.Background(), name))
						return linOutput{}
					})
				case linNumRequeues:
					record(linInput{op: linNumRequeues, key: key, prio: 0}, func() linOutput {
						n, err := q.NumRequeuesContext(context.Background(), name)
						require.NoError(t, err)
						return linOutput{n: n}
					})
				case linLen:
					record(linInput{op: linLen, key: -1, prio: 0}, func() linOutput {
						n, err := q.LenContext(context.Background())
						require.NoError(t, err)
						return linOutput{n: n}
					})
				case linGet:
					record(linInput{op: linGet, key: -1, prio: 0}, func() linOutput {
						ctx, cancel := context.WithTimeout(context.Background(), 15*time.Millisecond)
						defer cancel()
						item, priority, err := q.GetWithPriorityContext(ctx)
						if errors.Is(err, context.DeadlineExceeded) {
							return linOutput{key: -1}
						}
						require.NoError(t, err)
						got := int8(slices.Index(names[:], item))
						held = append(held, got)
						return linOutput{key: got, prio: int8(priority)}
					})
				case linPark:
					if len(held) == 0 {
						continue
					}
					key := held[rng.IntN(len(held))]
					mask := int8(rng.IntN(1 << linEvents))
					var events []string
					for e := range linEvents {
						if mask&(1<<e) != 0 {
							events = append(events, fmt.Sprint("e", e))
						}
					}
					record(linInput{op: linPark, key: key, ev: mask}, func() linOutput {
						require.NoError(t, q.ParkContext(context.Background(), names[key], events...))
						return linOutput{}
					})
				case linWake:
					event := int8(rng.IntN(linEvents))
					record(linInput{op: linWake, key: -1, ev: event}, func() linOutput {
						n, err := q.WakeContext(context.Background(), fmt.Sprint("e", event))
						require.NoError(t, err)
						return linOutput{n: n}
					})
				case linWakeItem:
					record(linInput{op: linWakeItem, key: key}, func() linOutput {
						woken, err := q.WakeItemContext(context.Background(), name)
						require.NoError(t, err)
						if woken {
							return linOutput{n: 1}
						}
						return linOutput{}
					})
				case linDone:
					if len(held) == 0 {
						continue
					}
					j := rng.IntN(len(held))
					key := held[j]
					held = slices.Delete(held, j, j+1)
					record(linInput{op: linDone, key: key, prio: 0}, func() linOutput {
						require.NoError(t, q.DoneContext(context.Background(), names[key]))
						return linOutput{}
					})
				}
			}
		})
	}
	wg.Wait()
	return ops
}

func formatLinHistory(ops []porcupine.Operation) string {
	slices.SortFunc(ops, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
	var out string
	for _, op := range ops {
		out += fmt.Sprintf("  client %d [%d, %d] %s\n", op.ClientId, op.Call, op.Return, linModel.DescribeOperation(op.Input, op.Output))
	}
	return out
}

// linCall is one call of a hand-written history.
func linCall(client int, call, ret int64, in linInput, out linOutput) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: in, Output: out}
}

// TestLinearizabilityModelRejects shows the check can fail: histories a
// broken queue would produce are rejected.
func TestLinearizabilityModelRejects(t *testing.T) {
	tests := []struct {
		name string
		ops  []porcupine.Operation
	}{
		{"handed to two workers", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAdd, key: 0, prio: 0}, linOutput{}),
			linCall(1, 2, 3, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: 0}),
			linCall(2, 2, 3, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: 0}),
		}},
		{"dirty mark dropped", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAdd, key: 0, prio: 0}, linOutput{}),
			linCall(1, 2, 3, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: 0}),
			linCall(0, 4, 5, linInput{op: linAdd, key: 0, prio: 0}, linOutput{}),
			linCall(1, 6, 7, linInput{op: linDone, key: 0, prio: 0}, linOutput{}),
			linCall(1, 8, 9, linInput{op: linLen, key: -1, prio: 0}, linOutput{n: 0}),
		}},
		{"lost wakeup", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAdd, key: 1, prio: 0}, linOutput{}),
			linCall(1, 2, 30, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: -1}),
		}},
		{"batch seen half added", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAddBatch, key: 0, prio: 0}, linOutput{}),
			linCall(1, 2, 3, linInput{op: linLen, key: -1, prio: 0}, linOutput{n: 1}),
		}},
		{"fifo inverted", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAdd, key: 0, prio: 0}, linOutput{}),
			linCall(0, 2, 3, linInput{op: linAdd, key: 1, prio: 0}, linOutput{}),
			linCall(1, 4, 5, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: 1}),
		}},
		{"re-add lowered the priority", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAddPriority, key: 0, prio: 2}, linOutput{}),
			linCall(0, 2, 3, linInput{op: linAddPriority, key: 0, prio: 1}, linOutput{}),
			linCall(1, 4, 5, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: 0, prio: 1}),
		}},
		{"raised ahead of its new priority", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAddPriority, key: 0, prio: 1}, linOutput{}),
			linCall(0, 2, 3, linInput{op: linAdd, key: 1, prio: 0}, linOutput{}),
			linCall(0, 4, 5, linInput{op: linAddPriority, key: 1, prio: 1}, linOutput{}),
			linCall(1, 6, 7, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: 1, prio: 1}),
		}},
		{"requeued at the priority it was processed at", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAddPriority, key: 0, prio: 2}, linOutput{}),
			linCall(1, 2, 3, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: 0, prio: 2}),
			linCall(0, 4, 5, linInput{op: linAdd, key: 0, prio: 0}, linOutput{}),
			linCall(1, 6, 7, linInput{op: linDone, key: 0, prio: 0}, linOutput{}),
			linCall(1, 8, 9, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: 0, prio: 2}),
		}},
		{"removed re-add queued at Done", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAdd, key: 0, prio: 0}, linOutput{}),
			linCall(1, 2, 3, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: 0}),
			linCall(0, 4, 5, linInput{op: linAdd, key: 0, prio: 0}, linOutput{}),
			linCall(0, 6, 7, linInput{op: linRemove, key: 0, prio: 0}, linOutput{n: 1}),
			linCall(1, 8, 9, linInput{op: linDone, key: 0, prio: 0}, linOutput{}),
			linCall(1, 10, 11, linInput{op: linLen, key: -1, prio: 0}, linOutput{n: 1}),
		}},
		{"wakeup lost between Get and Park", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAdd, key: 0}, linOutput{}),
			linCall(1, 2, 3, linInput{op: linGet, key: -1}, linOutput{key: 0}),
			linCall(0, 4, 5, linInput{op: linWake, key: -1, ev: 0}, linOutput{}),
			linCall(1, 6, 7, linInput{op: linPark, key: 0, ev: 0b01}, linOutput{}),
			linCall(1, 8, 9, linInput{op: linDone, key: 0}, linOutput{}),
			linCall(1, 10, 11, linInput{op: linLen, key: -1}, linOutput{n: 0}),
		}},
		{"parked key handed out", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAdd, key: 0}, linOutput{}),
			linCall(1, 2, 3, linInput{op: linGet, key: -1}, linOutput{key: 0}),
			linCall(1, 4, 5, linInput{op: linPark, key: 0, ev: 0b10}, linOutput{}),
			linCall(1, 6, 7, linInput{op: linDone, key: 0}, linOutput{}),
			linCall(0, 8, 9, linInput{op: linGet, key: -1}, linOutput{key: 0}),
		}},
		{"wake missed a park made before Done", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAdd, key: 0}, linOutput{}),
			linCall(1, 2, 3, linInput{op: linGet, key: -1}, linOutput{key: 0}),
			linCall(1, 4, 5, linInput{op: linPark, key: 0, ev: 0b11}, linOutput{}),
			linCall(0, 6, 7, linInput{op: linWake, key: -1, ev: 1}, linOutput{n: 0}),
		}},
		{"woken key lost its priority", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAddPriority, key: 0, prio: 2}, linOutput{}),
			linCall(1, 2, 3, linInput{op: linGet, key: -1}, linOutput{key: 0, prio: 2}),
			linCall(1, 4, 5, linInput{op: linPark, key: 0, ev: 0b01}, linOutput{}),
			linCall(1, 6, 7, linInput{op: linDone, key: 0}, linOutput{}),
			linCall(0, 8, 9, linInput{op: linWakeItem, key: 0}, linOutput{n: 1}),
			linCall(1, 10, 11, linInput{op: linGet, key: -1}, linOutput{key: 0, prio: 0}),
		}},
		{"an add left the park in place", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAdd, key: 0}, linOutput{}),
			linCall(1, 2, 3, linInput{op: linGet, key: -1}, linOutput{key: 0}),
			linCall(1, 4, 5, linInput{op: linPark, key: 0, ev: 0b01}, linOutput{}),
			linCall(1, 6, 7, linInput{op: linDone, key: 0}, linOutput{}),
			linCall(0, 8, 9, linInput{op: linAdd, key: 0}, linOutput{}),
			linCall(0, 10, 11, linInput{op: linWake, key: -1, ev: 0}, linOutput{n: 1}),
		}},
		{"Remove of a held key took something", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAdd, key: 0, prio: 0}, linOutput{}),
			linCall(1, 2, 3, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: 0}),
			linCall(0, 4, 5, linInput{op: linRemove, key: 0, prio: 0}, linOutput{n: 1}),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(linModel, tt.ops, time.Second))
		})
	}
}

// TestLinearizabilityPartitionedModel shows what the check of a queue
// whose keys are in two partitions rejects, broken queues as the
// unpartitioned check does, and what it accepts that the unpartitioned
// check would not: order between partitions, and an AddBatch seen half
// added.
func TestLinearizabilityPartitionedModel(t *testing.T) {
	tests := []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"handed to two workers", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAdd, key: 1, prio: 0}, linOutput{}),
			linCall(1, 2, 3, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: 1}),
			linCall(2, 2, 3, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: 1}),
		}, porcupine.Illegal},
		{"dirty mark dropped", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAdd, key: 0, prio: 0}, linOutput{}),
			linCall(1, 2, 3, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: 0}),
			linCall(0, 4, 5, linInput{op: linAdd, key: 0, prio: 0}, linOutput{}),
			linCall(1, 6, 7, linInput{op: linDone, key: 0, prio: 0}, linOutput{}),
			linCall(1, 8, 30, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: -1}),
		}, porcupine.Illegal},
		{"lost wakeup in the other partition", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAdd, key: 1, prio: 0}, linOutput{}),
			linCall(1, 2, 30, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: -1}),
		}, porcupine.Illegal},
		{"batch lost half", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAddBatch, key: 0, prio: 0}, linOutput{}),
			linCall(1, 2, 3, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: 0}),
			linCall(1, 4, 30, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: -1}),
		}, porcupine.Illegal},
		{"failure counted in the wrong partition", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAddRateLimited, key: 0, prio: 0}, linOutput{}),
			linCall(1, 2, 3, linInput{op: linNumRequeues, key: 1, prio: 0}, linOutput{n: 1}),
		}, porcupine.Illegal},
		{"order between partitions", []porcupine.Operation{
			linCall(0, 0, 1, linInput{op: linAdd, key: 0, prio: 0}, linOutput{}),
			linCall(0, 2, 3, linInput{op: linAdd, key: 1, prio: 0}, linOutput{}),
			linCall(1, 4, 5, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: 1}),
		}, porcupine.Ok},
		{"batch seen half added", []porcupine.Operation{
			linCall(0, 0, 10, linInput{op: linAddBatch, key: 0, prio: 0}, linOutput{}),
			linCall(1, 2, 3, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: 1}),
			linCall(1, 4, 5, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: -1}),
			linCall(1, 11, 12, linInput{op: linGet, key: -1, prio: 0}, linOutput{key: 0}),
		}, porcupine.Ok},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, porcupine.CheckOperationsTimeout(linPartitionedModel, tt.ops, time.Second))
			// Every history is illegal for the unpartitioned queue.
			require.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(linModel, tt.ops, time.Second))
		})
	}
}

// TestLinearizabilityCatchesBrokenPriority runs the check against a queue
// whose add function lets a re-add lower the priority of a key queued or
// marked to be queued again, and requires it to reject one of the
// histories: the check sees a broken merge of priorities, not only
// hand-written histories of one.
func TestLinearizabilityCatchesBrokenPriority(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	broken := libraryReplacing(t, map[string]string{
		"  if prio > old then\n":                   "  if prio ~= old then\n",
		"    if prio > state_priority(state) then": "    if prio ~= state_priority(state) then",
	})
	saved := queueLibrary
	queueLibrary = broken
	defer func() { queueLibrary = saved }()
	requireRejected(t, client, Options[string]{RateLimit: &RateLimit{}}, linModel, false, 300, "a queue whose re-adds lower priorities")
}

// TestLinearizabilityCatchesLostWakeup runs the check against a queue
// whose Park ignores the wakes since the item's Get, and requires it to
// reject one of the histories with parking: the check sees a wakeup lost
// between a Get and a Park, not only hand-written histories of one.
func TestLinearizabilityCatchesLostWakeup(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	broken := libraryReplacing(t, map[string]string{
		"if fired and tonumber(fired) >= number then": "if false then",
	})
	saved := queueLibrary
	queueLibrary = broken
	defer func() { queueLibrary = saved }()
	requireRejected(t, client, Options[string]{RateLimit: &RateLimit{}}, linModel, true, 1000, "a queue that loses the wakes between Get and Park")
}

// requireRejected records up to most histories of two handles made with
// opts, with parking if set, until model rejects one, and fails the test
// if it rejects none: what describes the broken queue.
func requireRejected(t *testing.T, client redis.UniversalClient, opts Options[string], model porcupine.Model, parking bool, most int, what string) {
	t.Helper()
	for h := range most {
		seed := rand.Uint64()
		name := fmt.Sprintf("lin-broken-%d-%d", h, queueSeq.Add(1))
		handles := []*Queue[string]{New(client, name, opts), New(client, name, opts)}
		ops := runLinHistory(t, handles, [linKeys]string{"a", "b"}, seed, parking)
		for _, q := range handles {
			q.ShutDownWithDrain()
		}
		if porcupine.CheckOperationsTimeout(model, ops, 10*time.Second) == porcupine.Illegal {
			t.Logf("history %d (seed %d) of the broken queue is rejected", h+1, seed)
			return
		}
	}
	t.Fatalf("none of %d histories of %s was rejected", most, what)
}

// TestLinearizabilityCatchesStuckGroup runs the check against a queue
// with a group limit whose Done frees the slot but puts back none of the
// keys that wait for it, and requires it to reject one of the histories:
// the check sees a key left waiting while its group has a free slot.
func TestLinearizabilityCatchesStuckGroup(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	broken := libraryReplacing(t, map[string]string{
		"  fill_slots(group, stored, leased)\n": "",
	})
	saved := queueLibrary
	queueLibrary = broken
	defer func() { queueLibrary = saved }()
	opts := Options[string]{RateLimit: &RateLimit{}, GroupLimits: &workqueue.GroupLimits[string]{Group: func(string) string { return "g" }, Default: 1}}
	requireRejected(t, client, opts, linGroupModel, false, 300, "a queue whose Done leaves a group's keys waiting")
}
