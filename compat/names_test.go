package compat

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// leftOut lists client-go's exported names that go-workqueue does not have
// on purpose; the README's differences say why. A name client-go adds in a
// new version, or one dropped from go-workqueue, fails TestExportedNames
// until it is added here or to the library.
var leftOut = map[string]string{
	// The deprecated untyped API: the typed names replace each of them.
	"BucketRateLimiter":                         "untyped",
	"DefaultControllerRateLimiter":              "untyped",
	"DefaultItemBasedRateLimiter":               "untyped",
	"DelayingInterface":                         "untyped",
	"DelayingQueueConfig":                       "untyped",
	"Interface":                                 "untyped",
	"ItemExponentialFailureRateLimiter":         "untyped",
	"ItemFastSlowRateLimiter":                   "untyped",
	"MaxOfRateLimiter":                          "untyped",
	"New":                                       "untyped",
	"NewDelayingQueue":                          "untyped",
	"NewDelayingQueueWithConfig":                "untyped",
	"NewDelayingQueueWithCustomClock":           "untyped",
	"NewDelayingQueueWithCustomQueue":           "untyped",
	"NewItemExponentialFailureRateLimiter":      "untyped",
	"NewItemFastSlowRateLimiter":                "untyped",
	"NewMaxOfRateLimiter":                       "untyped",
	"NewNamed":                                  "untyped",
	"NewNamedDelayingQueue":                     "untyped",
	"NewNamedRateLimitingQueue":                 "untyped",
	"NewRateLimitingQueue":                      "untyped",
	"NewRateLimitingQueueWithConfig":            "untyped",
	"NewRateLimitingQueueWithDelayingInterface": "untyped",
	"NewWithConfig":                             "untyped",
	"NewWithMaxWaitRateLimiter":                 "untyped",
	"QueueConfig":                               "untyped",
	"RateLimiter":                               "untyped",
	"RateLimitingInterface":                     "untyped",
	"RateLimitingQueueConfig":                   "untyped",
	"Type":                                      "untyped",
	"WithMaxWaitRateLimiter":                    "untyped",
}

// exportedNames returns the exported top-level names (types, functions,
// variables, constants; not methods) of the package at importPath, as the
// module of this test resolves it.
func exportedNames(t *testing.T, importPath string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", importPath).Output()
	require.NoError(t, err, "go list %s", importPath)
	dir := strings.TrimSpace(string(out))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	fset := token.NewFileSet()
	var names []string
	for _, entry := range entries {
		if !strings.HasSuffix(entry.Name(), ".go") || strings.HasSuffix(entry.Name(), "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, filepath.Join(dir, entry.Name()), nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, decl := range file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names = append(names, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names = append(names, n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// TestExportedNames diffs the exported names of client-go's workqueue
// package (the version in this module's go.mod) against go-workqueue's:
// every client-go name must exist in go-workqueue or be listed in leftOut.
func TestExportedNames(t *testing.T) {
	theirs := exportedNames(t, "k8s.io/client-go/util/workqueue")
	ours := exportedNames(t, "github.com/go-workqueue/workqueue")
	var missing, listedButPresent []string
	for _, name := range theirs {
		_, skipped := leftOut[name]
		present := slices.Contains(ours, name)
		switch {
		case !present && !skipped:
			missing = append(missing, name)
		case present && skipped:
			listedButPresent = append(listedButPresent, name)
		}
	}
	for name := range leftOut {
		if !slices.Contains(theirs, name) {
			t.Errorf("leftOut lists %s, which client-go does not export", name)
		}
	}
	assert.Empty(t, missing, "client-go names missing from go-workqueue and not in leftOut")
	assert.Empty(t, listedButPresent, "names in leftOut that go-workqueue has")
	t.Logf("exported names: client-go %d, go-workqueue %d, left out %d", len(theirs), len(ours), len(leftOut))
}
