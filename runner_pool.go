package workqueue

import (
	"context"
	"sync"
)

// workerPool runs the workers of a Runner's Run and changes their number.
// Each worker has a context of its own, under the one start is given, which
// ends when the worker is told to leave or exits.
type workerPool struct {
	mu     sync.Mutex
	getCtx context.Context
	work   func(leave context.Context)
	// staying are the workers not told to leave, oldest first.
	staying []*poolWorker
	// live counts the running workers, those leaving included; exited is
	// closed when it reaches 0, and from then on open is false.
	live   int
	exited chan struct{}
	// open is set while resize may start workers: from start until Run's
	// context ends or every worker has exited.
	open bool
}

type poolWorker struct{ leave context.CancelFunc }

// start runs n workers, each calling work with its own context, and
// returns a channel closed once every worker has exited.
func (p *workerPool) start(getCtx context.Context, n int, work func(leave context.Context)) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.getCtx, p.work, p.open = getCtx, work, true
	p.exited = make(chan struct{})
	for range n {
		p.startLocked()
	}
	return p.exited
}

func (p *workerPool) startLocked() {
	ctx, leave := context.WithCancel(p.getCtx)
	w := &poolWorker{leave: leave}
	p.staying = append(p.staying, w)
	p.live++
	go func() {
		p.work(ctx)
		p.exit(w)
	}()
}

// exit is called by a worker as it returns.
func (p *workerPool) exit(w *poolWorker) {
	w.leave()
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := indexOf(p.staying, w); i >= 0 {
		p.staying = append(p.staying[:i], p.staying[i+1:]...)
	}
	p.live--
	if p.live == 0 {
		p.open = false
		close(p.exited)
	}
}

func indexOf(workers []*poolWorker, w *poolWorker) int {
	for i, x := range workers {
		if x == w {
			return i
		}
	}
	return -1
}

// resize starts workers, or tells the newest to leave, until n stay, and
// reports whether it could: not before start, nor after freeze or the
// last worker's exit.
func (p *workerPool) resize(n int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.open {
		return false
	}
	for len(p.staying) < n {
		p.startLocked()
	}
	for len(p.staying) > n {
		last := len(p.staying) - 1
		p.staying[last].leave()
		p.staying = p.staying[:last]
	}
	return true
}

// freeze stops resize from changing anything: Run is stopping.
func (p *workerPool) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open = false
}
