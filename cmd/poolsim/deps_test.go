package main

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/poolsim/poolsim"

// The product does not carry the lab (lab/doc.go): of this command's files
// only validate.go imports a lab package, and nothing the other files
// import - nor sim, models, scenarios or proxy - pulls one in. So
// `go list -deps ./cmd/poolsim` less the validate command holds no lab
// package; a lab import in run.go, or in a package run.go imports, fails
// here.
func TestOnlyValidateImportsTheLab(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var direct []string // files other than validate.go importing the lab
	roots := []string{"./sim/...", "./models/...", "./scenarios/...", "./proxy/..."}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		// Every file whatever its build constraints: ImportsOnly reads them all.
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		lab := false
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case isLab(path):
				lab = true
			case name != "validate.go" && strings.HasPrefix(path, module+"/"):
				roots = append(roots, path)
			}
		}
		if lab && name != "validate.go" {
			direct = append(direct, name)
		}
		if !lab && name == "validate.go" {
			t.Error("validate.go imports no lab package: this test's exception names the wrong file")
		}
	}
	if len(direct) > 0 {
		t.Errorf("%v import the lab: only the validate command (validate.go) may", direct)
	}
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, roots...)...)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", errText(err))
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, module+"/sim") {
		t.Fatalf("go list -deps %v lists no %s/sim: %q", roots, module, out)
	}
	for _, d := range deps {
		if isLab(d) {
			t.Errorf("%s is among the dependencies of poolsim's commands other than validate, or of the product's packages", d)
		}
	}
}

func isLab(path string) bool { return path == module+"/lab" || strings.HasPrefix(path, module+"/lab/") }

// errText is err with a command's standard error when it has one.
func errText(err error) string {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return err.Error() + ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return err.Error()
}
