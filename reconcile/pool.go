package reconcile

import (
	"context"
	"sync"

	"github.com/go-workqueue/workqueue/metrics"
)

// workerPool runs the workers of a Runner's Run and changes their number.
// Each worker has a context of its own, under the one start is given, which
// ends when the worker is told to leave or exits.
type workerPool struct {
	mu sync.Mutex
	// runCtx is Run's context: once it has ended, resize does nothing.
	runCtx context.Context
	getCtx context.Context
	// gauge is the workers metric, set under mu so that its value follows
	// the order of the changes.
	gauge metrics.SettableGauge
	work  func(leave context.Context)
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
func (p *workerPool) start(runCtx, getCtx context.Context, n int, gauge metrics.SettableGauge, work func(leave context.Context)) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runCtx, p.getCtx, p.gauge, p.work, p.open = runCtx, getCtx, gauge, work, true
	p.exited = make(chan struct{})
	for range n {
		p.startLocked()
	}
	p.gauge.Set(float64(n))
	return p.exited
}

// stopped is called as Run returns: nothing more starts, and the gauge
// reads 0.
func (p *workerPool) stopped() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open = false
	p.gauge.Set(0)
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
// reports whether it could: not before start, nor once Run's context has
// ended, nor after freeze or the last worker's exit.
func (p *workerPool) resize(n int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.open || p.runCtx.Err() != nil {
		return false
	}
	defer p.gauge.Set(float64(n))
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
