package inspect

import (
	_ "embed"
	"html/template"
	"strconv"
	"strings"
	"time"
)

//go:embed page.html
var pageSource string

// page renders a View as HTML. html/template escapes every key and error
// text for the context it lands in.
var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"duration": formatSeconds,
	"rate":     formatRate,
	"join":     strings.Join,
	"state":    stateText,
	"stamp":    func(t time.Time) string { return t.Format("2006-01-02 15:04:05 MST") },
}).Parse(pageSource))

// pageData is what the page template renders.
type pageData struct {
	View      View
	Refresh   int   // seconds between reloads; 0 for none
	Refreshes []int // the reload periods the page offers
}

var refreshChoices = []int{2, 5, 30}

// formatSeconds shows a duration in seconds as time.Duration does, rounded
// to the second from a second on and to the millisecond below.
func formatSeconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	if d >= time.Second {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}

// formatRate shows an adds-per-second rate with two significant digits
// below 1 and one decimal up to 100, or a dash when there is none.
func formatRate(r *float64) string {
	switch {
	case r == nil:
		return "–"
	case *r >= 99.95: // rounds to 100 or more
		return strconv.FormatFloat(*r, 'f', 0, 64)
	case *r >= 1:
		return strconv.FormatFloat(*r, 'f', 1, 64)
	}
	return strconv.FormatFloat(*r, 'g', 2, 64)
}

// stateText shows a State in words.
func stateText(s State) string {
	switch s {
	case Retrying:
		return "retrying"
	case GivenUp:
		return "given up"
	case DroppedAtShutdown:
		return "not retried (shutdown)"
	case Succeeded:
		return "succeeded since"
	}
	return string(s)
}
