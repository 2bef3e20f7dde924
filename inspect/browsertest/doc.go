// Package browsertest tests the inspect package's page in a real browser,
// headless Chromium, driven with chromedp. It is a module of its own so
// that the library's users never download chromedp.
//
//	go test ./...                      # in this directory; needs Debian's chromium
//	go test . -update-screenshot       # also writes docs/inspector.png
package browsertest
