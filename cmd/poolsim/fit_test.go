package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const fitData = "testdata/fit-codahale.csv"

// sig4 reports whether got and want agree to 4 significant digits.
func sig4(got, want float64) bool {
	return strconv.FormatFloat(got, 'g', 4, 64) == strconv.FormatFloat(want, 'g', 4, 64)
}

func TestFitTable(t *testing.T) {
	code, out, errOut := runCmd("fit", fitData)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	t.Logf("\n%s", out)
	for _, c := range []struct {
		row  string
		want float64
	}{
		{"σ  contention", 0.02671591},
		{"κ  coherency", 7.690945e-4},
		{"λ  throughput at N=1", 995.6486},
		{"peak concurrency", 35.57},
		{"peak throughput", 12342.85},
	} {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(c.row) + ` +([0-9.e+-]+)`).FindStringSubmatch(out)
		if m == nil {
			t.Errorf("no %q row", c.row)
			continue
		}
		got, err := strconv.ParseFloat(m[1], 64)
		if err != nil || !sig4(got, c.want) {
			t.Errorf("%s = %s, want %.4g to 4 significant digits", c.row, m[1], c.want)
		}
	}
	for _, want := range []string{"32 points, concurrency 1 to 32", "best whole concurrency  36,", "R²                      0.9971"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestFitJSONAndPlot(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"fit.png", "fit.svg"} {
		out := filepath.Join(dir, name)
		code, stdout, errOut := runCmd("fit", fitData, "--format", "json", "--plot", out)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var res fitResult
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("%v in\n%s", err, stdout)
		}
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"sigma", res.Sigma, 0.02671591}, {"kappa", res.Kappa, 7.690945e-4}, {"lambda", res.Lambda, 995.6486}} {
			if math.Abs(c.got-c.want)/c.want > 5e-5 {
				t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
			}
		}
		if res.Peak == nil || math.Abs(res.Peak.Concurrency-35.5738) > 1e-3 || res.Points != 32 || res.R2 == nil {
			t.Errorf("result %+v", res)
		}
		b, err := os.ReadFile(out)
		if err != nil || len(b) == 0 {
			t.Fatalf("plot %s: %v, %d bytes", name, err, len(b))
		}
		if strings.HasSuffix(name, ".png") {
			img, err := png.Decode(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("plot %s: %v", name, err)
			}
			if r := img.Bounds(); r.Dx() < 400 || r.Dy() < 300 {
				t.Errorf("plot %s is %v", name, r)
			}
		} else if !bytes.Contains(b, []byte("<svg")) || !bytes.Contains(b, []byte("concurrency")) {
			t.Errorf("plot %s is not an SVG with labelled axes", name)
		}
	}
}

func TestFitNoPeak(t *testing.T) {
	// Amdahl data, σ = 0.1, throughput turning up at the end: κ fits to 0.
	dir := t.TempDir()
	path := filepath.Join(dir, "amdahl.csv")
	var b strings.Builder
	for n := 1.0; n <= 64; n *= 2 {
		x := 50 * n / (1 + 0.1*(n-1))
		if n >= 32 {
			x *= 1.01
		}
		b.WriteString(strconv.FormatFloat(n, 'g', -1, 64) + "," + strconv.FormatFloat(x, 'g', -1, 64) + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd("fit", path, "--plot", filepath.Join(dir, "amdahl.png"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "peak                    none: κ = 0, throughput rises towards λ/σ") {
		t.Errorf("κ = 0 output:\n%s", out)
	}
	code, out, _ = runCmd("fit", path, "--format", "json")
	if code != 0 || !strings.Contains(out, `"peak": null`) || !strings.Contains(out, `"ceiling"`) {
		t.Errorf("κ = 0 json (exit %d):\n%s", code, out)
	}
}

func TestFitUsageErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	six := "1,10\n2,19\n3,27\n4,34\n5,40\n6,45\n"
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"missing file", []string{"fit", filepath.Join(dir, "nope.csv")}, "no such file or directory"},
		{"no file", []string{"fit"}, "want exactly one DATA.csv, got 0 arguments"},
		{"two files", []string{"fit", "a.csv", "b.csv"}, "want exactly one DATA.csv, got 2"},
		{"non-numeric", []string{"fit", write("bad.csv", "# c\nN,X\n1,10\n2,19\n3,abc\n4,34\n5,40\n6,45\n")}, `bad.csv:5: throughput "abc" is not a number`},
		{"header mid-file", []string{"fit", write("mid.csv", "1,10\nN,X\n"+six)}, `mid.csv:2: concurrency "N" is not a number`},
		{"BOM, no header", []string{"fit", write("bom.csv", "\ufeff1,10\n2,19\n3,x\n")}, `bom.csv:3: throughput "x" is not a number`},
		{"three columns", []string{"fit", write("three.csv", "1,10,3\n"+six)}, "three.csv:1: want 2 columns (concurrency, throughput), got 3"},
		{"negative", []string{"fit", write("neg.csv", six+"-7,50\n")}, "neg.csv:7: concurrency -7 must be positive and finite"},
		{"zero throughput", []string{"fit", write("zero.csv", six+"7,0\n")}, "zero.csv:7: throughput 0 must be positive"},
		{"NaN", []string{"fit", write("nan.csv", six+"7,NaN\n")}, "nan.csv:7: throughput NaN must be positive and finite"},
		{"five points", []string{"fit", write("five.csv", "N,X\n1,10\n2,19\n3,27\n4,34\n5,40\n")}, "five.csv: 5 data points; the fit needs at least 6"},
		{"empty", []string{"fit", write("empty.csv", "# nothing\n")}, "empty.csv: 0 data points"},
		{"two concurrencies", []string{"fit", write("two.csv", "1,10\n1,11\n1,9\n2,19\n2,18\n2,20\n")}, "two.csv: need at least 3 distinct concurrencies"},
		{"bad format", []string{"fit", fitData, "--format", "csv"}, `--format "csv": want table or json`},
		{"bad plot", []string{"fit", fitData, "--plot", "x.jpg"}, `--plot "x.jpg": want a file ending in .png, .svg or .pdf`},
		{"bad flag", []string{"fit", fitData, "--bogus"}, "unknown flag: --bogus"},
	} {
		code, out, errOut := runCmd(c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.name, code, out, errOut, c.want)
		}
		if c.name != "bad flag" && strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 {
			t.Errorf("%s: want one line on stderr, got %q", c.name, errOut)
		}
	}
}

func TestFitHelp(t *testing.T) {
	code, _, errOut := runCmd("fit", "--help")
	if code != 0 || !strings.Contains(errOut, "Exit status: 0 success, 1 failure") || !strings.Contains(errOut, "poolsim fit bench.csv --plot") {
		t.Errorf("help: exit %d\n%s", code, errOut)
	}
	if _, out, _ := runCmd("help"); !strings.Contains(out, "fit ") {
		t.Errorf("main help does not list fit:\n%s", out)
	}
}
