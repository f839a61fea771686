package scenarios

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite generated files (docs/scenarios.md's key reference)")

// keyRefDoc is the guide whose marked block is the key reference.
var keyRefDoc = filepath.Join("..", "docs", "scenarios.md")

const (
	keyRefBegin = "<!-- key reference: begin (generated from the table poolsim run --help prints: go test ./scenarios -run TestKeyReference -update; do not edit by hand) -->"
	keyRefEnd   = "<!-- key reference: end -->"
)

// TestKeyReference holds docs/scenarios.md's key reference to the keys
// and texts `poolsim run --help` prints (Fields and DistHelp): a key added,
// renamed or reworded in the code fails here until the guide is
// regenerated with -update.
func TestKeyReference(t *testing.T) {
	doc, err := os.ReadFile(keyRefDoc)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := bytes.Cut(doc, []byte(keyRefBegin+"\n"))
	if !ok {
		t.Fatalf("%s: no line %q to start the key reference", keyRefDoc, keyRefBegin)
	}
	old, after, ok := bytes.Cut(rest, []byte(keyRefEnd+"\n"))
	if !ok {
		t.Fatalf("%s: no line %q after the key reference's start", keyRefDoc, keyRefEnd)
	}
	want := renderKeyReference(Fields(), DistHelp)
	if string(old) == want {
		return
	}
	if *update {
		var b bytes.Buffer
		b.Write(before)
		b.WriteString(keyRefBegin + "\n" + want + keyRefEnd + "\n")
		b.Write(after)
		if err := os.WriteFile(keyRefDoc, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the key reference differs from poolsim run --help (%s); regenerate it with: go test ./scenarios -run TestKeyReference -update",
		keyRefDoc, firstDifference(string(old), want))
}

// renderKeyReference writes the keys (lines of "KEY  DOC" as Fields gives
// them) as one Markdown table per top-level section, in their order, and
// the distribution forms as they are printed.
func renderKeyReference(lines []string, dists string) string {
	var b strings.Builder
	section := ""
	for _, line := range lines {
		key, doc, _ := strings.Cut(strings.TrimSpace(line), " ")
		doc = strings.TrimSpace(doc)
		top, _, _ := strings.Cut(key, ".")
		if top != section {
			if section != "" {
				b.WriteString("\n")
			}
			section = top
			fmt.Fprintf(&b, "#### `%s`\n\n| key | what it is and what it accepts |\n|---|---|\n", top)
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", key, markdownCell(doc))
	}
	b.WriteString("\n#### Distributions\n\n```\n")
	b.WriteString(strings.TrimRight(dists, "\n"))
	b.WriteString("\n```\n")
	return b.String()
}

// markdownCell escapes what would end or format a table cell.
func markdownCell(s string) string {
	r := strings.NewReplacer("|", `\|`, "*", `\*`, "<", "&lt;", ">", "&gt;")
	return r.Replace(s)
}

// firstDifference names the first line where got and want part.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) && i < len(w); i++ {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d of the block is %q, the code gives %q", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("the block has %d lines, the code gives %d", len(g), len(w))
}

func TestRenderKeyReference(t *testing.T) {
	got := renderKeyReference([]string{
		fmt.Sprintf("%-34s %s", "seed", "random seed"),
		fmt.Sprintf("%-34s %s", "pooler.mode", "direct | session"),
		fmt.Sprintf("%-34s %s", "pooler.hop", "a duration"),
	}, "Distributions:\n  3ms  a constant\n")
	want := "#### `seed`\n\n| key | what it is and what it accepts |\n|---|---|\n| `seed` | random seed |\n\n" +
		"#### `pooler`\n\n| key | what it is and what it accepts |\n|---|---|\n| `pooler.mode` | direct \\| session |\n| `pooler.hop` | a duration |\n\n" +
		"#### Distributions\n\n```\nDistributions:\n  3ms  a constant\n```\n"
	if got != want {
		t.Errorf("renderKeyReference:\n%s\nwant:\n%s", got, want)
	}
}
