package inspect

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestFormatRate(t *testing.T) {
	tests := []struct {
		rate *float64
		want string
	}{
		{nil, "–"},
		{rate(0), "0"},
		{rate(6.0 / 3600), "0.0017"},
		{rate(0.5), "0.5"},
		{rate(2.25), "2.2"},
		{rate(99.94), "99.9"},
		{rate(99.96), "100"},
		{rate(1234.5), "1234"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, formatRate(tt.rate))
	}
}

func TestFormatSeconds(t *testing.T) {
	tests := []struct {
		seconds float64
		want    string
	}{
		{0, "0s"},
		{0.0004, "0s"},
		{0.25, "250ms"},
		{1.4, "1s"},
		{90, "1m30s"},
		{3601, "1h0m1s"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, formatSeconds(tt.seconds))
	}
}

func TestStateText(t *testing.T) {
	tests := []struct {
		state State
		want  string
	}{
		{Retrying, "retrying"},
		{GivenUp, "given up"},
		{DroppedAtShutdown, "not retried (shutdown)"},
		{Succeeded, "succeeded since"},
		{"other", "other"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, stateText(tt.state))
	}
}

// TestPageShowsStates checks the rows of the failing and recent tables:
// a key given up on says so, with its error and failures, and a key that
// succeeded after failing is listed among the recent failures only.
func TestPageShowsStates(t *testing.T) {
	clock := clocktesting.NewFakeClock(t0)
	q := newQueue(clock)
	defer q.ShutDown()
	h := NewHandler(WithClock(clock))
	f := Register(h, "pods", q)
	f.ObserveError("flaky", errors.New("conflict"), 1, true)
	f.ObserveSuccess("flaky")
	f.ObserveError("retried", errors.New("timeout"), 2, true)
	f.ObserveError("broken", errors.New("image not found"), 3, false)
	clock.Step(2 * time.Second)
	page := serve(h, "GET", "/").Body.String()
	failing := tableOf(t, page, "failing")
	recent := tableOf(t, page, "recent")
	tests := []struct {
		table, row string
	}{
		{failing, `<tr class="givenUp"><td class="key">broken</td><td class="n">3</td><td class="error">image not found</td><td class="n">2s ago</td><td>given up</td></tr>`},
		{failing, `<tr class="retrying"><td class="key">retried</td><td class="n">2</td><td class="error">timeout</td><td class="n">2s ago</td><td>retrying</td></tr>`},
		{recent, `<tr class="givenUp"><td class="key">broken</td>`},
		{recent, `<tr class="retrying"><td class="key">retried</td>`},
		{recent, `<tr class="succeeded"><td class="key">flaky</td><td class="n">1</td><td class="error">conflict</td><td class="n">2s ago</td><td>succeeded since</td></tr>`},
	}
	for _, tt := range tests {
		assert.Contains(t, tt.table, tt.row)
	}
	assert.NotContains(t, failing, "flaky")
	assert.Contains(t, page, `<td class="n">0</td><td class="n">3</td><td class="n">3</td><td class="n">1</td></tr>`,
		"the counts end with adds/s, the failures of the last minute, since registration and the give-ups")
}

// tableOf returns the HTML of the page's table of the class given.
func tableOf(t *testing.T, page, class string) string {
	t.Helper()
	_, table, ok := strings.Cut(page, `<table class="`+class+`">`)
	require.True(t, ok, "no table of class %q", class)
	table, _, _ = strings.Cut(table, "</table>")
	return table
}

// TestPageShowsGroups checks the groups section: on a queue with group
// limits, a row per group, those with keys waiting for a slot marked, the keys waiting for
// a slot counted in the heading and in the queued keys' heading; no section
// on a queue whose groups hold no key, or that has none.
func TestPageShowsGroups(t *testing.T) {
	clock := clocktesting.NewFakeClock(t0)
	h := NewHandler(WithLimit(3), WithClock(clock))
	grouped := newGroupedQueue(t, clock)
	Register(h, "grouped", grouped)
	idle := newGroupedQueue(t, clock)
	Register(h, "idle", idle)
	plain := newQueue(clock)
	defer plain.ShutDown()
	Register(h, "plain", plain)
	fillGroups(t, grouped)
	plain.Add("a")

	page := serve(h, "GET", "/").Body.String()
	section := sectionOf(t, page, "grouped")
	assert.Contains(t, section,
		`<h3>Groups, those waiting for a slot first <span class="muted">(3 queued keys wait for a slot; 3 of 4 groups listed)</span></h3>`)
	groups := tableOf(t, section, "groups")
	for _, row := range []string{
		`<tr><th>group</th><th>limit</th><th>in flight</th><th>queued</th><th>waiting for a slot</th></tr>`,
		`<tr class="waitingForSlot"><td class="key">api</td><td class="n">1</td><td class="n">1</td><td class="n">1</td><td class="n">1</td></tr>`,
		`<tr class="waitingForSlot"><td class="key">web</td><td class="n">1</td><td class="n">1</td><td class="n">2</td><td class="n">2</td></tr>`,
		`<tr><td class="key"><span class="muted">no group</span></td><td class="n">none</td><td class="n">0</td><td class="n">1</td><td class="n">0</td></tr>`,
	} {
		assert.Contains(t, groups, row)
	}
	assert.NotContains(t, groups, "batch", "the fourth group is past the limit")
	assert.Contains(t, section, `Queued, next first <span class="muted">(2 of 5 listed; not those of groups at their limit)</span>`)
	for _, name := range []string{"idle", "plain"} {
		assert.NotContains(t, sectionOf(t, page, name), "Groups", "no groups in %s", name)
	}

	// One key waiting, and a group name made of markup.
	got, _ := grouped.Get()
	grouped.Done(got)
	idle.Add(`<img src=x onerror=alert(3)>/1`)
	idle.Add(`<img src=x onerror=alert(3)>/2`)
	idle.Get()
	page = serve(h, "GET", "/").Body.String()
	section = sectionOf(t, page, "idle")
	assert.Contains(t, section, `(1 queued key waits for a slot)`)
	assert.Contains(t, tableOf(t, section, "groups"), `<td class="key">&lt;img src=x onerror=alert(3)&gt;</td>`)
	assert.NotContains(t, page, "<img")

	body := serve(h, "GET", "/?format=json").Body.String()
	for _, want := range []string{`"waitingForSlot": 1,`, `"groupCount": 1,`, `"group": "\u003cimg src=x onerror=alert(3)\u003e",`} {
		assert.Contains(t, body, want)
	}
}

// sectionOf returns the HTML of the page's section of the queue named name.
func sectionOf(t *testing.T, page, name string) string {
	t.Helper()
	_, section, ok := strings.Cut(page, `<section class="queue" data-queue="`+name+`">`)
	require.True(t, ok, "no section for queue %q", name)
	section, _, _ = strings.Cut(section, "</section>")
	return section
}

// TestPageSectionOrder checks that a queue's sections come in the order
// the package doc lists them.
func TestPageSectionOrder(t *testing.T) {
	clock := clocktesting.NewFakeClock(t0)
	h := NewHandler(WithClock(clock))
	grouped := newGroupedQueue(t, clock)
	Register(h, "grouped", grouped)
	fillGroups(t, grouped)
	section := sectionOf(t, serve(h, "GET", "/").Body.String(), "grouped")
	last := -1
	for _, marker := range []string{
		`<table class="counts">`, "<h3>Groups", "<h3>In flight", "<h3>Failing now",
		"<h3>Failed recently", "<h3>Waiting for a delay", "<h3>Parked until an event", "<h3>Queued",
	} {
		i := strings.Index(section, marker)
		require.NotEqualf(t, -1, i, "no %q", marker)
		assert.Greaterf(t, i, last, "%q out of order", marker)
		last = i
	}
}
