package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
)

// Params is a row's swept keys as a JSON object in sweep order, each value
// a JSON number when it is one.
type Params []scenarios.Param

// MarshalJSON writes the keys in order.
func (p Params) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, kv := range p {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv.Key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(jsonValue(kv.Value))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads the object MarshalJSON writes, keeping its keys'
// order; numbers come back as their text.
func (p *Params) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("read params: want a JSON object, got %.40s", data)
	}
	out := Params{}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return fmt.Errorf("read params: %w", err)
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("read params: %q: %w", k, err)
		}
		text, ok := v.(string)
		if n, isNum := v.(json.Number); isNum {
			text, ok = n.String(), true
		}
		if !ok {
			return fmt.Errorf("read params: %q: want a string or a number, got %v", k, v)
		}
		out = append(out, scenarios.Param{Key: k.(string), Value: text})
	}
	*p = out
	return nil
}

// jsonValue writes a parameter as a JSON number when it is one, else as a
// string.
func jsonValue(s string) []byte {
	if _, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "xXpP_") {
		if b, err := json.Marshal(json.Number(s)); err == nil {
			return b
		}
	}
	b, _ := json.Marshal(s)
	return b
}

// Metrics is a row's metrics as a JSON object: every metric in order, each
// followed by <metric>_ci95 when the row has replications (then every
// value is the study's estimate: a mean, or a percentile of the
// replications' samples together; see system.Replicated).
type Metrics struct{ Row *scenarios.Row }

// MarshalJSON writes the object.
func (m Metrics) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	n := len(m.Row.Reps)
	b.WriteByte('{')
	for i, f := range system.Fields() {
		if i > 0 {
			b.WriteByte(',')
		}
		mean, half := m.Row.Stat(f)
		b.WriteString(strconv.Quote(f.Name))
		b.WriteByte(':')
		b.Write(jsonNumber(f, mean, n))
		if n > 1 {
			b.WriteString(`,"` + f.Name + `_ci95":`)
			b.Write(jsonNumber(system.Field{}, half, n))
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// jsonRow is one row of the JSON report.
type jsonRow struct {
	Params        Params        `json:"params"`
	Replications  int           `json:"replications"`
	Deterministic bool          `json:"deterministic,omitempty"`
	Metrics       Metrics       `json:"metrics"`
	Compat        compat.Matrix `json:"compat"`
	Classes       []jsonClass   `json:"classes,omitempty"`
	Notes         []string      `json:"notes,omitempty"` // what the study found about the row's figures (scenarios.Row.Notes)
}

// jsonClass is one client class's figures at a point.
type jsonClass struct {
	Name    string        `json:"name"`
	Mode    string        `json:"mode"`
	Metrics Metrics       `json:"metrics"`
	Compat  compat.Matrix `json:"compat"`
}

// WriteJSON writes {"scenario", "seed", "rows": [{"params", "replications",
// "metrics", "compat"}]}, and "explanation" (an Explanation) when the
// report has one.
func WriteJSON(w io.Writer, r Report) error {
	out := struct {
		Scenario    string       `json:"scenario"`
		Seed        uint64       `json:"seed"`
		Incomplete  string       `json:"incomplete,omitempty"`
		Assumptions []string     `json:"assumptions"`
		Rows        []jsonRow    `json:"rows"`
		Explanation *Explanation `json:"explanation,omitempty"`
	}{Scenario: r.Scenario, Seed: r.Seed, Assumptions: r.assumptions(), Rows: make([]jsonRow, len(r.Rows)), Explanation: r.Explanation}
	if out.Assumptions == nil {
		out.Assumptions = []string{}
	}
	if r.Missing > 0 {
		out.Incomplete = r.incompleteWords()
	}
	for i := range r.Rows {
		x := &r.Rows[i]
		out.Rows[i] = jsonRow{Params: Params(x.Params), Replications: len(x.Reps), Deterministic: x.Deterministic, Metrics: Metrics{x}, Compat: x.Compat, Notes: x.Notes}
		for k := range x.Classes {
			cr := classRow(x, k)
			out.Rows[i].Classes = append(out.Rows[i].Classes, jsonClass{Name: x.Classes[k].Name, Mode: cr.Config.Pooler.PoolMode.String(), Metrics: Metrics{cr}, Compat: cr.Compat})
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
