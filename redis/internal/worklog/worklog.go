// Package worklog is the shared log that worker processes of a redis
// queue append to, and the check that reads it back. Every process opens
// one file with O_APPEND and writes each line with one write call, so the
// kernel orders the lines of all processes into one sequence that agrees
// with real time: a line written after another returned is after it in the
// file. That order is what lets the check decide whether two processes
// held a key at once, which no per-process log could show.
//
// A line is "OP KEY PID SEQ". The operations are:
//
//	A  an add is about to be called (written before the call, so that the
//	   hand-out the add promises comes after this line)
//	a  that add returned (same PID and SEQ as its A line)
//	B  Get returned KEY: the holding PID/SEQ begins
//	E  the holding PID/SEQ ends; Done is called after this line
//	P  the holding PID/SEQ of KEY was handed out at a priority other than
//	   the one every add of KEY asks for (see Priority)
//	H  a worker of PID stopped for good holding KEY (to be killed)
//	D  PID finished all its adds (KEY is "-")
//	K  PID was killed and has exited (written by the test, KEY is "-")
package worklog

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// Writer appends lines to a log shared by processes.
type Writer struct {
	f   *os.File
	pid int
	seq atomic.Int64
}

// Open opens the log at path for appending, creating it if needed.
func Open(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &Writer{f: f, pid: os.Getpid()}, nil
}

// Next returns a new sequence number of this process, to name a holding
// or an add across its two lines.
func (w *Writer) Next() int64 { return w.seq.Add(1) }

// Line appends one line for this process. One write call per line: with
// O_APPEND the kernel puts it whole at the end, after every line another
// process finished writing. A failed write panics: a log with a hole in it
// would make the check lie.
func (w *Writer) Line(op byte, key string, seq int64) {
	WriteLine(w.f, op, key, w.pid, seq)
}

// WriteLine writes one line for pid to f in one write call.
func WriteLine(f *os.File, op byte, key string, pid int, seq int64) {
	b := make([]byte, 0, len(key)+32)
	b = fmt.Appendf(b, "%c %s %d %d\n", op, key, pid, seq)
	if _, err := f.Write(b); err != nil {
		panic(fmt.Sprintf("worklog: %v", err))
	}
}

// Close closes the log.
func (w *Writer) Close() error { return w.f.Close() }

// Report is what Check found in a log.
type Report struct {
	Lines      int
	Adds       int            // adds acknowledged (A with its a)
	Unacked    int            // A lines without their a: the process was killed in the add
	AddsOnHeld int            // acknowledged adds begun while another process held the key
	Handouts   int            // B lines
	Completed  int            // E lines
	PerKey     map[string]int // completed holdings per key
	Killed     []int          // pids with a K line
	Reclaimed  int            // holdings of killed pids that never ended
	Overlaps   []string       // a B while another holding of the key was open
	Lost       []string       // acknowledged adds with no completed holding begun after them
	Unfinished []string       // holdings of live pids still open at the end
	WrongPrio  []string       // holdings handed out at another priority than their key's (P lines)
	Malformed  []string       // lines that do not parse, or E without its B
	BadKeys    []string       // keys of the overlaps and losses, in the order found
}

// Failures returns every problem found, for a test to print.
func (r *Report) Failures() []string {
	var all []string
	all = append(all, r.Malformed...)
	all = append(all, r.Overlaps...)
	all = append(all, r.Lost...)
	all = append(all, r.Unfinished...)
	all = append(all, r.WrongPrio...)
	return all
}

// MaxPerKey returns the largest number of completed holdings of one key.
func (r *Report) MaxPerKey() int {
	m := 0
	for _, n := range r.PerKey {
		m = max(m, n)
	}
	return m
}

type holding struct {
	pid  int
	seq  int64
	line int
}

type addRef struct {
	pid int
	seq int64
}

// Check reads a whole log and checks three things. No key was held by two
// holdings at once: the B and E lines of a key alternate, a killed pid's
// open holdings counting as ended at its K line. Nothing was lost: after
// the A line of every acknowledged add of a key, some holding of that key
// began and completed. Nothing is left open but the holdings of killed
// processes.
func Check(r io.Reader) (*Report, error) {
	rep := &Report{PerKey: make(map[string]int)}
	holder := make(map[string]*holding)    // key -> open holding
	byPid := make(map[int]map[string]bool) // pid -> keys it holds open
	intents := make(map[addRef]int)        // unacknowledged A lines -> line number
	intentKey := make(map[addRef]string)   // their keys
	onHeld := make(map[addRef]bool)        // intents made while another pid held the key
	type acked struct {
		key  string
		line int
	}
	var acks []acked
	lastCompletedBegin := make(map[string]int) // key -> line of the last B that got its E

	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		rep.Lines++
		n := rep.Lines
		f := strings.Fields(sc.Text())
		if len(f) != 4 || len(f[0]) != 1 {
			rep.Malformed = append(rep.Malformed, fmt.Sprintf("line %d: %q", n, sc.Text()))
			continue
		}
		key := f[1]
		pid, err1 := strconv.Atoi(f[2])
		seq, err2 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil {
			rep.Malformed = append(rep.Malformed, fmt.Sprintf("line %d: %q", n, sc.Text()))
			continue
		}
		switch f[0][0] {
		case 'A':
			intents[addRef{pid, seq}] = n
			intentKey[addRef{pid, seq}] = key
			if h := holder[key]; h != nil && h.pid != pid {
				onHeld[addRef{pid, seq}] = true
			}
		case 'a':
			ref := addRef{pid, seq}
			line, ok := intents[ref]
			if !ok || intentKey[ref] != key {
				rep.Malformed = append(rep.Malformed, fmt.Sprintf("line %d: ack of %s by pid %d seq %d without its A line", n, key, pid, seq))
				continue
			}
			delete(intents, ref)
			delete(intentKey, ref)
			acks = append(acks, acked{key, line})
			rep.Adds++
			if onHeld[ref] {
				rep.AddsOnHeld++
			}
		case 'B':
			rep.Handouts++
			if h := holder[key]; h != nil {
				rep.BadKeys = append(rep.BadKeys, key)
				rep.Overlaps = append(rep.Overlaps, fmt.Sprintf(
					"line %d: pid %d seq %d got %s while pid %d seq %d held it since line %d",
					n, pid, seq, key, h.pid, h.seq, h.line))
				delete(byPid[h.pid], key)
			}
			holder[key] = &holding{pid, seq, n}
			if byPid[pid] == nil {
				byPid[pid] = make(map[string]bool)
			}
			byPid[pid][key] = true
		case 'E':
			h := holder[key]
			if h == nil || h.pid != pid || h.seq != seq {
				rep.Malformed = append(rep.Malformed, fmt.Sprintf("line %d: pid %d seq %d ended %s, which it did not hold", n, pid, seq, key))
				continue
			}
			delete(holder, key)
			delete(byPid[pid], key)
			rep.Completed++
			rep.PerKey[key]++
			lastCompletedBegin[key] = h.line
		case 'K':
			rep.Killed = append(rep.Killed, pid)
			for key := range byPid[pid] {
				delete(holder, key)
				rep.Reclaimed++
			}
			delete(byPid, pid)
		case 'P':
			rep.BadKeys = append(rep.BadKeys, key)
			rep.WrongPrio = append(rep.WrongPrio, fmt.Sprintf("line %d: pid %d seq %d got %s at another priority than its adds'", n, pid, seq, key))
		case 'H', 'D':
		default:
			rep.Malformed = append(rep.Malformed, fmt.Sprintf("line %d: %q", n, sc.Text()))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	rep.Unacked = len(intents)
	for _, a := range acks {
		if lastCompletedBegin[a.key] <= a.line {
			rep.BadKeys = append(rep.BadKeys, a.key)
			rep.Lost = append(rep.Lost, fmt.Sprintf("%s: added (line %d), no completed holding began after that", a.key, a.line))
		}
	}
	for key, h := range holder {
		rep.Unfinished = append(rep.Unfinished, fmt.Sprintf("%s: held by live pid %d seq %d since line %d", key, h.pid, h.seq, h.line))
	}
	slices.Sort(rep.Lost)
	slices.Sort(rep.Unfinished)
	return rep, nil
}

// Priority returns the priority the multi-process tests add key at, when
// they add with priorities, from the number at its end (the keys are
// k00000, k00001, ...): a quarter of the keys each at 10, at 0 with
// AddWithOpts, at -100, and at 0 with Add (plain is then true). Every add
// of a key, by any process, asks for the same priority, so that each
// hand-out of the key, a key whose holder died included, must come at it.
func Priority(key string) (priority int, plain bool) {
	n, _ := strconv.Atoi(strings.TrimLeft(key, "k"))
	switch n % 4 {
	case 1:
		return 10, false
	case 2:
		return 0, false
	case 3:
		return -100, false
	}
	return 0, true
}

// History returns the numbered lines of the log at path that concern key
// or mark a kill, to show what happened to a key a check found wrong.
func History(path, key string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 4 && (f[1] == key || f[0] == "K") {
			out = append(out, fmt.Sprintf("%d: %s", i+1, line))
		}
	}
	return out, nil
}

// CheckFile is Check of the file at path.
func CheckFile(path string) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Check(f)
}
