package system

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestModelStartsNoGoroutine holds the model to its standard — one
// goroutine, events in (time, sequence) order — by reading its source: no
// `go` statement in sim or any models package, tests included. CI relies
// on it: those packages run without the race detector (.ci/run), which
// finds nothing where nothing runs concurrently and made them six times
// slower (models/system 304 s against 43 s).
func TestModelStartsNoGoroutine(t *testing.T) {
	roots := []string{"../../sim", ".."}
	files := 0
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") {
				return nil
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			files++
			ast.Inspect(f, func(n ast.Node) bool {
				if g, ok := n.(*ast.GoStmt); ok {
					t.Errorf("%s: a go statement in the model; it runs on one goroutine (and .ci/run tests it without -race)", fset.Position(g.Pos()))
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatalf("read the model's source under %s: %v", root, err)
		}
	}
	if files < 20 {
		t.Fatalf("read %d Go files under %v; the model's source is not where this test looks", files, roots)
	}
}
