// Package docs checks the project's documents against the tree: every
// repository path and Go symbol they cite in backticks exists, so a move
// or a rename that leaves a document stale fails the build.
package docs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository root, relative to this package.
const root = "../.."

// cited matches a backticked reference into the tree: a top-level
// directory of the repository, then a path, optionally followed by
// ":Symbol" or ".Symbol".
var cited = regexp.MustCompile("`((?:runtime|internal|test|hack|charts|operator|apis|cli|web|docs|config|proto)/[A-Za-z0-9_./*<>{}-]*)(?:[:.]([A-Z][A-Za-z0-9_]*))?")

// documents are the files whose citations are checked.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append(docs, filepath.Join(root, "README.md"), filepath.Join(root, "SECURITY.md"))
}

func TestCitedPathsExist(t *testing.T) {
	var missing []string
	for _, doc := range documents(t) {
		f, err := os.Open(doc)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for line := 1; sc.Scan(); line++ {
			for _, m := range cited.FindAllStringSubmatch(sc.Text(), -1) {
				if problem := checkCitation(m[1], m[2]); problem != "" {
					missing = append(missing, fmt.Sprintf("%s:%d: %s", filepath.Base(doc), line, problem))
				}
			}
		}
		f.Close()
	}
	if len(missing) > 0 {
		t.Fatalf("documents cite what the tree does not have:\n%s", strings.Join(missing, "\n"))
	}
}

// checkCitation returns what is wrong with a cited path and symbol, or "".
// Patterns (a "*", "...", "<name>" or "{a,b}") are not checked.
func checkCitation(path, symbol string) string {
	if strings.ContainsAny(path, "*<>{}") || strings.Contains(path, "...") {
		return ""
	}
	path = strings.TrimRight(path, "./")
	if i := strings.LastIndexByte(path, '.'); symbol == "" && i > strings.LastIndexByte(path, '/') &&
		i+1 < len(path) && path[i+1] >= 'A' && path[i+1] <= 'Z' {
		path, symbol = path[:i], path[i+1:] // package.Symbol
	}
	full := filepath.Join(root, path)
	st, err := os.Stat(full)
	if err != nil {
		return fmt.Sprintf("%s does not exist", path)
	}
	if symbol == "" {
		return ""
	}
	files := []string{full}
	if st.IsDir() {
		files, _ = filepath.Glob(filepath.Join(full, "*.go"))
	}
	decl := regexp.MustCompile(`(?m)^(?:func(?: \([^)]*\))?|type|var|const)?\s*` + symbol + `\b`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && decl.Match(b) {
			return ""
		}
	}
	return fmt.Sprintf("%s has no %s", path, symbol)
}
