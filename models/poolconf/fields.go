package poolconf

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/poolsim/poolsim/models/poolmode"
)

// The [pgbouncer] keys with a field are found by the fields' `ini` tags
// (Settings and the Pooling it embeds), once: reading, SHOW CONFIG's text
// and the PgBouncer launcher all go through them, so a key is written once,
// as a tagged field.

// fieldIndex is the path of each tagged field in Settings; poolingKeys the
// keys of Pooling in declaration order.
var fieldIndex, poolingKeys = func() (map[string][]int, []string) {
	idx := map[string][]int{}
	var pooling []string
	var walk func(t reflect.Type, path []int, inPooling bool)
	walk = func(t reflect.Type, path []int, inPooling bool) {
		for i := range t.NumField() {
			f := t.Field(i)
			p := append(append([]int(nil), path...), i)
			if f.Anonymous {
				walk(f.Type, p, f.Type == reflect.TypeFor[Pooling]())
				continue
			}
			if key := f.Tag.Get("ini"); key != "" {
				idx[key] = p
				if inPooling {
					pooling = append(pooling, key)
				}
			}
		}
	}
	walk(reflect.TypeFor[Settings](), nil, false)
	return idx, pooling
}()

// PoolingDoc is what a key of Pooling means, from its field's doc tag
// ("" for another key).
func PoolingDoc(key string) string {
	path, ok := fieldIndex[key]
	if !ok || path[0] != poolingIndex {
		return ""
	}
	return reflect.TypeFor[Settings]().FieldByIndex(path).Tag.Get("doc")
}

// PoolingKeys are the pgbouncer.ini keys of Pooling, in its field order.
func PoolingKeys() []string { return poolingKeys }

// Field is a pointer to the field of key in s (*int, *time.Duration,
// *bool, *string, *[]string or *poolmode.Mode), false for a key without
// one.
func (s *Settings) Field(key string) (any, bool) {
	path, ok := fieldIndex[key]
	if !ok {
		return nil, false
	}
	return reflect.ValueOf(s).Elem().FieldByIndex(path).Addr().Interface(), true
}

// Field is a pointer to the field of key in p, as Settings.Field; false
// for a key that is not one of PoolingKeys.
func (p *Pooling) Field(key string) (any, bool) {
	path, ok := fieldIndex[key]
	if !ok || len(path) < 2 || path[0] != poolingIndex {
		return nil, false
	}
	return reflect.ValueOf(p).Elem().FieldByIndex(path[1:]).Addr().Interface(), true
}

// poolingIndex is the index of the embedded Pooling in Settings.
var poolingIndex = func() int {
	f, _ := reflect.TypeFor[Settings]().FieldByName("Pooling")
	return f.Index[0]
}()

// Set stores one key of Pooling as pgbouncer.ini writes it (seconds for
// durations, 0 or 1 for booleans): an error for a value that does not
// parse or a key that is not one of PoolingKeys.
func (p *Pooling) Set(key, value string) error {
	ptr, ok := p.Field(key)
	if !ok {
		return errors.New(key + ": not a pooling key")
	}
	if err := parseInto(ptr, value); err != nil {
		return errors.New(key + ": " + err.Error())
	}
	return nil
}

// Text is key's value in p as SHOW CONFIG writes it; false for a key that
// is not one of PoolingKeys.
func (p *Pooling) Text(key string) (string, bool) {
	ptr, ok := p.Field(key)
	if !ok {
		return "", false
	}
	return format(ptr), true
}

// parseInto parses v, as pgbouncer.ini writes it, into the field ptr.
func parseInto(ptr any, v string) error {
	var err error
	switch f := ptr.(type) {
	case *int:
		*f, err = parseInt(v)
	case *time.Duration:
		*f, err = parseSeconds(v)
	case *bool:
		*f, err = parseBool(v)
	case *string:
		*f = v
	case *[]string:
		*f = list(v)
	case *poolmode.Mode:
		*f, err = parseMode(v)
	default:
		panic("poolconf: a tagged field of an unsupported type") // a programming error, caught by TestEveryKeyRoundTrips
	}
	return err
}

// format writes the field ptr as SHOW CONFIG does.
func format(ptr any) string {
	switch f := ptr.(type) {
	case *int:
		return strconv.Itoa(*f)
	case *time.Duration:
		return strconv.FormatFloat(f.Seconds(), 'f', -1, 64)
	case *bool:
		if *f {
			return "1"
		}
		return "0"
	case *string:
		return *f
	case *[]string:
		return strings.Join(*f, ",")
	case *poolmode.Mode:
		return f.String()
	}
	panic("poolconf: a tagged field of an unsupported type")
}

// ParseValue parses v, as pgbouncer.ini writes it, into ptr: a pointer to
// a field of one of the types Field returns (*int, *time.Duration in
// seconds, *bool, *string, *[]string, *poolmode.Mode). A program that keeps
// a key in a field of its own (the proxy's Config) reads it with the same
// rules as Settings.
func ParseValue(ptr any, v string) error { return parseInto(ptr, v) }

// FormatValue writes the field ptr as SHOW CONFIG does (ParseValue's
// inverse).
func FormatValue(ptr any) string { return format(ptr) }
