package redisqueue

// stepCall is one call for a partition's steps, which run its handle's
// concurrent Gets and Dones together: a Done's done call (isDone), or
// else the get call of a Get with its nonce.
type stepCall struct {
	isDone bool
	done   doneCall
	nonce  string
}

// stepResult is a stepCall's result: a Done's outcome (as runDones's),
// or a Get's grant; err is the call's own error, where the Dones and the
// Gets ran apart.
type stepResult struct {
	outcome int64
	grant   grant
	err     error
}

// runSteps runs calls in partition p, the Dones first, then the Gets, and
// returns each one's result. Dones and Gets together run in one call, the
// step function, which saves one of two round trips; with
// Options.WaitReplicas the Dones run apart first, as each must wait for
// the replicas and a Get need not.
func (q *Queue[T]) runSteps(p *partition, calls []stepCall) ([]stepResult, error) {
	var dones []doneCall
	var nonces []string
	for _, c := range calls {
		if c.isDone {
			dones = append(dones, c.done)
		} else {
			nonces = append(nonces, c.nonce)
		}
	}
	var outcomes []int64
	var grants []grant
	var err, doneErr, getErr error
	switch {
	case len(nonces) == 0:
		outcomes, err = q.runDones(p, dones)
	case len(dones) > 0 && q.waitReplicas > 0:
		outcomes, doneErr = q.runDones(p, dones)
		grants, getErr = q.runTakes(p, nonces)
	default:
		grants, outcomes, err = q.runGets(p, dones, nonces)
	}
	if err != nil {
		return nil, err
	}
	out := make([]stepResult, len(calls))
	for i, c := range calls {
		switch {
		case c.isDone && doneErr != nil:
			out[i].err = doneErr
		case c.isDone:
			out[i].outcome, outcomes = outcomes[0], outcomes[1:]
		case getErr != nil:
			out[i].err = getErr
		default:
			out[i].grant, grants = grants[0], grants[1:]
		}
	}
	return out, nil
}
