package importer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// commentWidth is where comment lines wrap.
const commentWidth = 100

// YAML writes the imported scenario: a header saying where it came from
// (command, sources, the statement mix), every value with a comment above
// it saying its source, window and formula, then the caveats and what was
// dropped. fidelity, when not "", is appended as a comment block.
func (im *Import) YAML(command, fidelity string) []byte {
	var b strings.Builder
	comment(&b, "", fmt.Sprintf("Imported by poolsim import (database %s). Every value says where it came from.", im.Database))
	if command != "" {
		comment(&b, "", "Command: "+command)
	}
	b.WriteString("#\n# Sources:\n")
	for _, s := range im.Sources {
		comment(&b, "", "  - "+s)
	}
	if len(im.Mix) > 0 {
		b.WriteString("#\n# Statement mix (pg_stat_statements, most time first):\n")
		for _, m := range im.Mix {
			fmt.Fprintf(&b, "#   %s\n", m)
		}
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "name: %s\n", quote(im.Name))
	fmt.Fprintf(&b, "description: %s\n", quote(fmt.Sprintf("Imported from %s (database %s)", sourceNames(im.Sources), im.Database)))
	b.WriteString("seed: 1\n")
	section := ""
	for _, s := range im.Settings {
		sec, key, _ := strings.Cut(s.Key, ".")
		if sec != section {
			fmt.Fprintf(&b, "%s:\n", sec)
			section = sec
		}
		comment(&b, "  ", s.From)
		fmt.Fprintf(&b, "  %s: %s\n", key, s.Value)
	}
	if len(im.Caveats) > 0 {
		b.WriteString("\n# Caveats (what these values assume):\n")
		for _, c := range im.Caveats {
			comment(&b, "", "  - "+c)
		}
	}
	b.WriteString("\n# Dropped (the sources show it; the model cannot take it yet):\n")
	if len(im.Dropped) == 0 {
		b.WriteString("#   nothing\n")
	}
	for _, d := range im.Dropped {
		comment(&b, "", "  - "+d)
	}
	if fidelity != "" {
		b.WriteString("\n")
		for _, l := range strings.Split(strings.TrimRight(fidelity, "\n"), "\n") {
			if l == "" {
				b.WriteString("#\n")
				continue
			}
			if len(l) > commentWidth {
				comment(&b, "", l)
				continue
			}
			fmt.Fprintf(&b, "# %s\n", l)
		}
	}
	return []byte(b.String())
}

// sourceNames lists the flags of the sources, from their lines.
func sourceNames(lines []string) string {
	var names []string
	for _, l := range lines {
		name, _, _ := strings.Cut(l, ":")
		names = append(names, strings.TrimPrefix(name, "--"))
	}
	return strings.Join(names, ", ")
}

// quote writes s as a YAML double-quoted scalar (JSON's escapes are
// YAML's).
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// comment writes text as comment lines at indent, wrapped at words; a
// continuation line is indented two more (four for a list item, "  - ").
func comment(b *strings.Builder, indent, text string) {
	prefix := indent + "# "
	cont := "  "
	if strings.HasPrefix(text, "  - ") {
		cont = "    "
	}
	col := 0
	first := true
	for _, w := range strings.Fields(text) {
		n := utf8.RuneCountInString(w)
		switch {
		case first:
			b.WriteString(prefix)
			col = len(prefix)
			first = false
			if strings.HasPrefix(text, "  - ") {
				b.WriteString("  -")
				col += 3
				continue
			}
		case col+1+n > commentWidth:
			b.WriteString("\n" + prefix + cont)
			col = len(prefix) + len(cont)
		default:
			b.WriteByte(' ')
			col++
		}
		b.WriteString(w)
		col += n
	}
	if !first {
		b.WriteByte('\n')
	}
}
