// Rule: a ```go block in a README.md is a whole file if it starts with `package`; any other block continues the nearest whole file above it in the same README (or, above the first, a file of its own): its leading imports join that file's, and it is added to the file as top-level declarations if it parses as such, else as the body of a function.
package readmetest

import (
	"bufio"
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// block is one ```go fenced block of a README.
type block struct {
	readme string // path from the repository root, with forward slashes
	line   int    // README line of the block's first line of code
	code   string
}

// snippetFile is one whole-file block with the fragments that continue it.
type snippetFile struct {
	file      block
	implicit  bool // no whole-file block came before: file is made up
	fragments []block
}

// TestReadmeSnippetsCompile builds every Go snippet of every README.md in
// the repository, as packages of this module (so that its go.mod's
// requirements apply), with one go build for all of them: the go command's
// cache makes a run with unchanged snippets take seconds. Errors name the
// README and the line of the snippet.
func TestReadmeSnippetsCompile(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readmes := map[string][]byte{}
	for _, path := range findReadmes(t, root) {
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
		if err != nil {
			t.Fatal(err)
		}
		readmes[path] = src
	}
	if len(readmes) == 0 {
		t.Fatalf("found no README.md under %s", root)
	}
	if out, err := build(t, readmes); err != nil {
		t.Errorf("a README's Go snippet does not compile (the rule is at the top of internal/readmetest/readme_test.go):\n%s", out)
	}
}

// TestBrokenSnippetNamesItsLine checks that the test above catches a
// snippet that does not compile, in a whole file and in each kind of
// fragment, and names the README line.
func TestBrokenSnippetNamesItsLine(t *testing.T) {
	readme := "# x\n\n" +
		"```go\n" + // 3
		"import \"fmt\"\n" + // 4
		"\n" +
		"fmt.Println(undefinedA)\n" + // 6
		"```\n" +
		"```go\n" + // 8
		"package main\n" + // 9
		"\n" +
		"func main() { undefinedB() }\n" + // 11
		"```\n" +
		"```go\n" + // 13
		"func helper() int { return undefinedC }\n" + // 14
		"```\n"
	out, err := build(t, map[string][]byte{"a/README.md": []byte(readme)})
	if err == nil {
		t.Fatalf("go build passed snippets that do not compile:\n%s", out)
	}
	for _, want := range []string{"a/README.md:6:", "a/README.md:11:", "a/README.md:14:"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("go build's output does not name %s:\n%s", want, out)
		}
	}
}

// build writes the Go snippets of readmes (contents by path) as packages of
// a temporary directory in this module and builds them all with one go
// build.
func build(t *testing.T, readmes map[string][]byte) ([]byte, error) {
	t.Helper()
	dir, err := os.MkdirTemp(".", "_snippets")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })

	paths := make([]string, 0, len(readmes))
	for path := range readmes {
		paths = append(paths, path)
	}
	slices.Sort(paths)
	var pkgs []string
	blocks := 0
	for _, readme := range paths {
		bs := goBlocks(readme, readmes[readme])
		blocks += len(bs)
		for i, f := range group(readme, bs) {
			pkg := filepath.Join(dir, fmt.Sprintf("%s_%d", packageDirName(readme), i))
			if err := os.Mkdir(pkg, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(pkg, "snippet.go"), assemble(f), 0o644); err != nil {
				t.Fatal(err)
			}
			pkgs = append(pkgs, "./"+filepath.ToSlash(pkg))
		}
	}
	t.Logf("%d READMEs, %d Go blocks, %d packages", len(readmes), blocks, len(pkgs))
	if len(pkgs) == 0 {
		return nil, nil
	}
	// go build, not go vet: vet would also analyse every dependency, which
	// takes minutes for controller-runtime's; build compiles them once into
	// the go command's cache. It discards what it builds when given several
	// packages, and writes one package to -o.
	args := []string{"build"}
	if len(pkgs) == 1 {
		args = append(args, "-o", os.DevNull)
	}
	return exec.Command("go", append(args, pkgs...)...).CombinedOutput()
}

// findReadmes returns the path of every README.md under root, from root,
// skipping .git and the directories the go command ignores.
func findReadmes(t *testing.T, root string) []string {
	var readmes []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == ".git" || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() == "README.md" {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			readmes = append(readmes, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return readmes
}

// goBlocks returns the ```go fenced blocks of a Markdown file, in order,
// with the opening fence's indentation removed from each line.
func goBlocks(readme string, src []byte) []block {
	var blocks []block
	var cur *block
	var indent string
	var code strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && trimmed == "```go":
			indent = line[:len(line)-len(strings.TrimLeft(line, " \t"))]
			cur = &block{readme: readme, line: n + 1}
			code.Reset()
		case cur != nil && strings.HasPrefix(trimmed, "```"):
			cur.code = code.String()
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			code.WriteString(strings.TrimPrefix(line, indent))
			code.WriteByte('\n')
		}
	}
	return blocks
}

// group sorts a README's blocks into whole files, each with the fragments
// that follow it.
func group(readme string, blocks []block) []*snippetFile {
	var files []*snippetFile
	for _, b := range blocks {
		if isWholeFile(b.code) {
			files = append(files, &snippetFile{file: b})
			continue
		}
		if len(files) == 0 {
			files = append(files, &snippetFile{
				file:     block{readme: readme, line: b.line, code: "package snippet\n"},
				implicit: true,
			})
		}
		f := files[len(files)-1]
		f.fragments = append(f.fragments, b)
	}
	return files
}

var packageClause = regexp.MustCompile(`^package [A-Za-z_][A-Za-z0-9_]*`)

// isWholeFile reports whether code starts with a package clause, after
// comments and blank lines.
func isWholeFile(code string) bool {
	for _, line := range strings.Split(code, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		return packageClause.MatchString(line)
	}
	return false
}

// assemble makes one Go file of a whole-file block and its fragments, with
// //line directives so that the compiler's positions are README lines.
func assemble(f *snippetFile) []byte {
	file := f.file.code
	fset := token.NewFileSet()
	parsed, err := parser.ParseFile(fset, "", file, parser.ImportsOnly)
	if err != nil {
		// The compiler reports it, at its README line.
		parsed = nil
	}
	// The file up to the end of the line that ends its imports (or its
	// package clause), then the fragments' imports, then the rest.
	split := 0
	if parsed != nil {
		end := parsed.Name.End()
		if n := len(parsed.Imports); n > 0 {
			end = parsed.Decls[len(parsed.Decls)-1].End()
		}
		split = fset.Position(end).Offset
		if i := strings.IndexByte(file[split:], '\n'); i >= 0 {
			split += i + 1
		} else {
			split = len(file)
		}
	}
	head, tail := file[:split], file[split:]
	tailLine := f.file.line + strings.Count(head, "\n")

	var imports, body strings.Builder
	seen := map[string]bool{}
	if parsed != nil {
		for _, spec := range parsed.Imports {
			seen[importKey(file[fset.Position(spec.Pos()).Offset:fset.Position(spec.End()).Offset])] = true
		}
	}
	for _, frag := range f.fragments {
		specs, rest, restLine := splitImports(frag)
		for _, s := range specs {
			if key := importKey(s.code); !seen[key] {
				seen[key] = true
				fmt.Fprintf(&imports, "//line %s:%d\n%s\n", s.readme, s.line, s.code)
			}
		}
		if strings.TrimSpace(rest) == "" {
			continue
		}
		if isDecls(rest) {
			fmt.Fprintf(&body, "\n//line %s:%d\n%s", frag.readme, restLine, rest)
		} else {
			fmt.Fprintf(&body, "\nfunc _() {\n//line %s:%d\n%s}\n", frag.readme, restLine, rest)
		}
	}

	var out strings.Builder
	if !f.implicit {
		fmt.Fprintf(&out, "//line %s:%d\n", f.file.readme, f.file.line)
	}
	out.WriteString(head)
	if imports.Len() > 0 {
		fmt.Fprintf(&out, "\nimport (\n%s)\n", imports.String())
	}
	if !f.implicit {
		fmt.Fprintf(&out, "\n//line %s:%d\n", f.file.readme, tailLine)
	}
	out.WriteString(tail)
	out.WriteString(body.String())
	return []byte(out.String())
}

// splitImports takes the import declarations at the top of a fragment:
// each spec with its README line, the rest of the fragment and the README
// line the rest starts at.
func splitImports(frag block) (specs []block, rest string, restLine int) {
	lines := strings.SplitAfter(frag.code, "\n")
	i := 0
	inGroup := false
	for ; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		switch {
		case inGroup && line == ")":
			inGroup = false
		case inGroup && line != "" && !strings.HasPrefix(line, "//"):
			specs = append(specs, block{readme: frag.readme, line: frag.line + i, code: line})
		case inGroup, line == "", strings.HasPrefix(line, "//"):
		case line == "import (":
			inGroup = true
		case strings.HasPrefix(line, "import "):
			specs = append(specs, block{readme: frag.readme, line: frag.line + i, code: strings.TrimPrefix(line, "import ")})
		default:
			return specs, strings.Join(lines[i:], ""), frag.line + i
		}
	}
	return specs, "", frag.line + i
}

// importKey is an import spec without its comment and spacing, to merge
// the same import from several blocks.
func importKey(spec string) string {
	if i := strings.Index(spec, "//"); i >= 0 && strings.Count(spec[:i], `"`) != 1 {
		spec = spec[:i]
	}
	return strings.Join(strings.Fields(spec), " ")
}

// isDecls reports whether code parses as top-level declarations.
func isDecls(code string) bool {
	_, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+code, parser.SkipObjectResolution)
	return err == nil
}

// packageDirName turns a README's path into a directory name.
func packageDirName(readme string) string {
	name := strings.TrimSuffix(readme, "README.md")
	name = strings.Trim(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(name, "_"), "_")
	if name == "" {
		return "root"
	}
	return name
}
